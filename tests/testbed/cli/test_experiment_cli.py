"""``testbed experiment``: list, show, report, and refusals before anything runs (no root)."""
import json
import subprocess
import sys

import pytest

from experiments import load_definition, run_experiment
from tests.fixtures.fake_execute import FakeExecutor

from conftest import REPO  # noqa: E402


def tb(*args):
    return subprocess.run([sys.executable, "-m", "testbed", "experiment", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_list_json_names_every_builtin():
    r = tb("list", "--json")
    assert r.returncode == 0, r.stderr
    names = {e["name"] for e in json.loads(r.stdout)}
    assert {"reuse", "relay", "window", "ack", "cc", "initcwnd", "idle", "tls", "buffer"} <= names


def test_show_prints_definition_and_schedule():
    r = tb("show", "reuse", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["factor"] == "params.mode" and d["schedule"][2]["dir"] == "runs/002-new"


def test_show_reads_like_a_definition_with_runs_and_time():
    r = tb("show", "loss-cc", "--levels", "0%:2%:1%", "--reps", "2")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "factor    links.bottleneck.down.loss: 0%, 1%, 2% (3 levels)" in out
    assert "crossed   socket.cc: reno, cubic, bbr -> 9 arms" in out
    assert "runs      27 = (1 warm-up + 2 repetitions) x 9 arms" in out and "time      ~ " in out
    assert "goodput_mbps (primary)" in out and "Wilson" in out


@pytest.mark.parametrize("args,message", [
    (["--set", "capture.hosts=nohost"], "capture host(s) ['nohost'] not in topology 'longhaul'"),
    (["--link", "bottleneck.down.rate=1mbps"], "ambiguous rate unit 'mbps'"),
])
def test_show_validates_as_run_does(args, message):
    r = tb("show", "reuse", *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("args,message", [
    (["run", "nosuch"], "unknown experiment 'nosuch'; allowed: ack"),
    (["run", "reuse", "--levels", "new,bogus"], "level 'bogus': reqresp: params.mode 'bogus': allowed: new, reuse"),
    (["run", "reuse", "--levels", "0%:5%:0"], "step must be > 0"),
    (["run", "reuse", "--set", "params.bogus=1"], "no parameter(s) ['bogus']; allowed: sample, mode"),
    (["run", "reuse", "--set", "socket.speed=1"], "unknown socket factor 'speed'; allowed: cc"),
    (["run", "reuse", "--link", "nolink.down.queue=5"], "no link 'nolink'; links: bottleneck"),
    (["run", "reuse", "--set", "params.mode=new"], "that is a factor of 'reuse'"),
    (["run", "reuse", "--set", "nothing=1"], "topology 'longhaul' has no parameter(s) ['nothing']"),
    (["run", "reuse", "--set", "nothing.x=1"], "unknown RunSpec path 'nothing.x'"),
    (["run", "reuse", "--reps", "0"], "--reps 0"),
    (["run", "reuse", "--resume"], "--resume needs --out"),
])
def test_bad_input_is_refused_before_anything_runs(tmp_path, args, message):
    r = tb(*args, "--results", str(tmp_path))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not any(tmp_path.iterdir())


def test_report_recomputes_from_the_directory(tmp_path):
    exp = load_definition("reuse").with_overrides(reps=3)
    out = run_experiment(exp, tmp_path / "e", executor=FakeExecutor("params.mode", {"new": 1185.0, "reuse": 240.0}),
                         quiet=True)
    r = tb("report", str(out))
    assert r.returncode == 0, r.stderr
    assert "new/reuse: ratio of medians" in r.stdout and "n valid 3/3" in r.stdout
    assert (out / "report.md").is_file() and (out / "summary.json").is_file()
    assert tb("report", str(tmp_path)).returncode == 2


def test_interrupt_prints_the_command_that_continues(monkeypatch, capsys, tmp_path):
    import experiments
    from testbed.cli import main

    def interrupted(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(experiments, "run_experiment", interrupted)
    argv = ["experiment", "run", "reuse", "--reps", "3", "--results", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", ["testbed", *argv])
    assert main(argv) != 0
    err = capsys.readouterr().err
    line = err.split("continue with:\n", 1)[1].strip().splitlines()[0]
    want = f"testbed experiment run reuse --reps 3 --results {tmp_path} --resume --out {tmp_path}/reuse-"
    assert line.startswith(want)


def test_sigterm_prints_the_command_that_continues(monkeypatch, capsys, tmp_path):
    """SIGTERM (or SIGHUP) between runs or in one ends the experiment as Ctrl-C does: with the
    command that continues it."""
    import signal

    import experiments
    from testbed.cli import main
    from testbed.host.lifecycle import RunInterrupted

    def terminated(*a, **kw):
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the experiment")
    monkeypatch.setattr(experiments, "run_experiment", terminated)
    old = signal.signal(signal.SIGTERM, lambda *a: None)    # without a handler of its own: noted only
    argv = ["experiment", "run", "reuse", "--out", str(tmp_path / "e")]
    monkeypatch.setattr(sys, "argv", ["testbed", *argv])
    try:
        with pytest.raises(RunInterrupted):
            main(argv)
    finally:
        signal.signal(signal.SIGTERM, old)
    err = capsys.readouterr().err
    assert f"continue with:\n  testbed experiment run reuse --out {tmp_path}/e --resume\n" in err


def test_show_of_one_level_counts_in_the_singular():
    r = tb("show", "initcwnd", "--levels", "40", "--reps", "1")
    assert r.returncode == 0, r.stderr
    assert "host.initcwnd: 40 (1 level)\n" in r.stdout
    assert "runs      2 = (1 warm-up + 1 repetition) x 1 arm;" in r.stdout


def test_keep_topology_for_a_structural_factor_says_it_is_ignored(monkeypatch, capsys, tmp_path,
                                                                  restore_logging):
    """buffer's factor is a link's queue: --keep-topology cannot apply, and said nothing."""
    import experiments
    from testbed.cli import main
    real = experiments.run_experiment
    fake = FakeExecutor("links.bottleneck.up.queue", {"20": 5.0, "1000": 14.0}, metric="goodput_mbps")
    monkeypatch.setattr(experiments, "run_experiment",
                        lambda exp, out, **kw: real(exp, out, executor=fake, keep_up=kw["keep_up"], quiet=True))
    assert main(["experiment", "run", "buffer", "--reps", "1", "--warmup", "0", "--keep-topology",
                 "--out", str(tmp_path / "e")]) == 0
    err = capsys.readouterr().err
    assert "warning: --keep-topology ignored: the topology is rebuilt for every run" in err
    assert err.count("--keep-topology") == 1 and "links.bottleneck.up.queue" in err
    report = (tmp_path / "e" / "report.md").read_text()
    assert ("topology kept up across the runs of a repetition: no (rebuilt for every run, --keep-topology "
            "or not: what it is built with (the topology, its parameters, a link, the backend or the link "
            "seed) differs between the arms: `links.bottleneck.up.queue`)") in report
    assert [c[2] for c in fake.calls] == [None, None]                  # no topology was handed over
    assert load_definition("reuse").structural_factors() == ()


def test_keep_topology_with_a_scheduled_link_says_it_is_ignored(monkeypatch, capsys, tmp_path, restore_logging):
    """A link schedule starts at a run's start: a topology kept up could not start it for the
    block's second run (that run failed), so the topology is rebuilt and the warning names the link."""
    import experiments
    from testbed.cli import main
    real = experiments.run_experiment
    fake = FakeExecutor("params.mode", {"new": 5.0, "reuse": 1.0})
    monkeypatch.setattr(experiments, "run_experiment",
                        lambda exp, out, **kw: real(exp, out, executor=fake, keep_up=kw["keep_up"], quiet=True))
    assert main(["experiment", "run", "reuse", "--reps", "1", "--warmup", "0", "--keep-topology",
                 "--link", "bottleneck.down.down=1s+0.5s", "--out", str(tmp_path / "e")]) == 0
    err = capsys.readouterr().err
    assert ("warning: --keep-topology ignored: the topology is rebuilt for every run, as its links change "
            "during a run, from the run's start (a schedule or trace): bottleneck.down") in err
    assert [c[2] for c in fake.calls] == [None, None]
    report = (tmp_path / "e" / "report.md").read_text()
    assert "no (rebuilt for every run, --keep-topology or not: its links change during a run" in report


def test_factors_and_metrics_list_what_an_error_can_only_point_to():
    r = tb("factors")
    assert r.returncode == 0, r.stderr
    assert "socket.cc " in r.stdout and "links.*.*.loss " in r.stdout
    assert 'check = "none"): socket.window_clamp, socket.delack_max, host.keep_metrics' in r.stdout
    from experiments.definition import METRICS
    assert json.loads(tb("metrics", "--json").stdout) == list(METRICS)
    assert tb("metrics").stdout.split() == list(METRICS)


def test_an_interrupted_campaign_says_what_it_keeps(monkeypatch, capsys, tmp_path):
    """Runs come back from a worker one by one, within seconds of their end: what the coordinator
    keeps is what it gathered, and the message says so rather than 'its finished runs are kept'."""
    import contextlib

    import experiments
    import experiments.cluster
    from testbed.cli import main

    def interrupted(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(experiments, "run_experiment", interrupted)
    monkeypatch.setattr(experiments.cluster, "place", lambda address: contextlib.nullcontext(None))
    argv = ["experiment", "run", "reuse", "--cluster", "local:1", "--out", str(tmp_path / "e")]
    monkeypatch.setattr(sys, "argv", ["testbed", *argv])
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert (f"experiment interrupted; the runs gathered from the workers are kept in {tmp_path}/e (a run "
            "that ended in the last 5 s may not have come back); continue with:") in err


DEFINITION = '''name = "think"
factor = "params.mode"
levels = ["new", "reuse"]
metrics = ["completion_ms"]
[base]
topology = "longhaul"
workload = "reqresp"
[base.params]
think = "-1s"
'''


@pytest.mark.parametrize("definition,message", [
    (DEFINITION, "experiment 'think', level 'new': reqresp: params.think '-1s': cannot read duration"),
    (DEFINITION.replace('factor = "params.mode"\nlevels = ["new", "reuse"]',
                        'factor = "params.think"\nlevels = ["0", "-2s"]').replace('think = "-1s"', ''),
     "reqresp: params.think '-2s': cannot read duration"),
])
def test_a_definition_files_bad_parameter_is_named_as_the_file_writes_it(tmp_path, capsys, restore_logging,
                                                                           definition, message):
    """A definition's `params.think = "-1s"` (or a level of a sweep over params.think) was
    reported as `reqresp: --think '-1s'`: an option nobody typed."""
    from testbed.cli import main
    path = tmp_path / "think.toml"
    path.write_text(definition)
    assert main(["experiment", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "--think" not in err, err


def test_report_of_a_reproduction_points_at_its_experiments(tmp_path):
    """`experiment report` of a reproduction's directory said only "no manifest.json; not an
    experiment directory"."""
    r = tmp_path / "reproduce-1"
    (r / "experiments" / "reuse").mkdir(parents=True)
    (r / "summary.json").write_text(json.dumps({"meta": {"title": "C7"}, "rows": []}))
    p = tb("report", str(r))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"{r}: a reproduction's directory" in p.stderr and f"its experiments are {r}/experiments/NAME" in p.stderr
