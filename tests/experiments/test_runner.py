"""Runner, ordering, resume, verification and exclusion through the fake executor (no root)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager

import pytest

from experiments import load_definition, run_experiment, write_all
from experiments.definition import Experiment
from tests.fixtures.fake_execute import FakeExecutor
from experiments.order import schedule
from experiments.report import text
from testbed.spec.errors import UsageError

from conftest import REPO  # noqa: E402
MEDIANS = {"new": 1185.0, "reuse": 240.0}


def reuse(reps=4, **kw):
    return load_definition("reuse").with_overrides(reps=reps).replace(**kw)


def test_alternate_abba_random_orders():
    labels = lambda exp: [s.level for s in schedule(exp) if not s.warmup]
    assert labels(reuse(3)) == ["new", "reuse"] * 3
    assert labels(reuse(4, order="abba")) == ["new", "reuse", "reuse", "new"] * 2
    rnd = labels(reuse(20, order="random"))
    blocks = [rnd[i:i + 2] for i in range(0, 40, 2)]
    assert all(sorted(b) == ["new", "reuse"] for b in blocks)
    assert blocks.count(["new", "reuse"]) not in (0, 20)          # really shuffled per block
    assert rnd == labels(reuse(20, order="random"))                # and reproducible
    assert rnd != labels(reuse(20, order="random", seed=2))


def test_seeds_per_repetition_recorded_and_shared_by_the_arms():
    slots = schedule(reuse(5))
    assert [s.warmup for s in slots[:2]] == [True, True] and not any(s.warmup for s in slots[2:])
    main = [s for s in slots if not s.warmup]
    seeds = {s.rep: s.seed for s in main}
    assert len(set(seeds.values())) == 5                           # no replayed loss pattern
    assert all(s.seed == seeds[s.rep] for s in main)               # common random numbers
    assert [s.seed for s in schedule(reuse(5, seed=7))] != [s.seed for s in slots]
    assert [s.dirname for s in slots[:3]] == ["000-warmup-new", "001-warmup-reuse", "002-new"]


def test_full_run_layout_and_numbers(tmp_path):
    fx = FakeExecutor("params.mode", MEDIANS)
    out = run_experiment(reuse(5), tmp_path / "e", executor=fx, quiet=True)
    s = write_all(out)
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == [x.dirname for x in schedule(reuse(5))]
    for name in runs:                       # made in runs/.partial-NAME, each names where it is now
        assert json.loads((out / "runs" / name / "manifest.json").read_text())["dir"] == str(out / "runs" / name)
    assert {"manifest.json", "summary.json", "report.md", "plots"} <= {p.name for p in out.iterdir()}
    m = json.loads((out / "manifest.json").read_text())
    assert m["schema"] == 1 and m["definition"]["name"] == "reuse" and "kernel" in m["environment"]
    # every run got the seed its slot recorded
    assert [c[1] for c in fx.calls] == [x["seed"] for x in m["schedule"]]
    assert s["by_level"]["new"]["n_valid"] == 5 and s["by_level"]["reuse"]["n_valid"] == 5
    c = next(c for c in s["comparisons"] if c["metric"] == "completion_ms_median")
    assert c["ratio_ci"][0] > 1
    assert s["by_level"]["new"]["verification"]["syn_per_request"]["min"] == 1.0
    assert "ratio of medians" in text(s) and "syn_per_request" in text(s)
    assert (out / "plots" / "completion_ms_median-levels.png").stat().st_size > 0


def test_a_run_narrowed_to_one_arm_repeats_it_without_comparisons(tmp_path):
    one = reuse(3).with_overrides(levels=["reuse"])
    assert [s.level for s in schedule(one) if not s.warmup] == ["reuse"] * 3
    fx = FakeExecutor("params.mode", MEDIANS)
    s = write_all(run_experiment(one, tmp_path / "e", executor=fx, quiet=True))
    assert list(s["by_level"]) == ["reuse"] and s["by_level"]["reuse"]["n_valid"] == 3
    assert s["comparisons"] == []
    assert [c[0] for c in fx.calls] == ["reuse"] * 4          # the warm-up and 3 repetitions


def test_broken_level_is_caught_and_excluded(tmp_path):
    # the reuse arm silently keeps opening a connection per request
    fx = FakeExecutor("params.mode", MEDIANS, broken=("reuse",), broken_as="new")
    out = run_experiment(reuse(4), tmp_path / "e", executor=fx, quiet=True)
    s = write_all(out, plots=False)
    assert s["by_level"]["reuse"]["n_valid"] == 0 and s["by_level"]["new"]["n_valid"] == 4
    ex = [e for e in s["excluded"] if e["level"] == "reuse"]
    assert len(ex) == 4 and all("SYNs per request" in e["reason"] for e in ex)
    assert "excluded runs/003-reuse" in text(s)


def test_failed_and_overloaded_runs_are_excluded_with_reasons(tmp_path):
    fx = FakeExecutor("params.mode", MEDIANS, fail=(3,), overloaded=(4,))
    out = run_experiment(reuse(3), tmp_path / "e", executor=fx, quiet=True)
    s = write_all(out, plots=False)
    reasons = {e["dir"]: e["reason"] for e in s["excluded"]}
    assert reasons == {"runs/003-reuse": "run failed: fake failure",
                       "runs/004-new": "link fidelity overloaded: no detail"}
    assert s["by_level"]["new"]["n_valid"] == 2 and s["by_level"]["reuse"]["n_valid"] == 2


def test_a_run_excluded_for_the_machine_is_replaced_by_one_more_repetition(tmp_path):
    """Run 3 (the first repetition's reuse arm after a warm-up block) stalls the machine: one more
    repetition of both arms follows, in the schedule's order with its seed; the stalled run stays
    excluded and listed, and the manifest and summary name the block and what it replaces."""
    fx = FakeExecutor("params.mode", MEDIANS, overloaded=(3,))
    out = run_experiment(reuse(2), tmp_path / "e", executor=fx, quiet=True, replace=2)
    s = write_all(out, plots=False)
    grown = schedule(reuse(3))
    assert sorted(p.name for p in (out / "runs").iterdir()) == [x.dirname for x in grown]
    assert [c[:2] for c in fx.calls] == [(x.level, x.seed) for x in grown]
    assert s["by_level"]["reuse"]["n_valid"] == 2 and s["by_level"]["new"]["n_valid"] == 3
    assert s["replacements"] == [{"rep": 2, "replaces": ["runs/003-reuse"], "time": s["replacements"][0]["time"]}]
    assert [e["dir"] for e in s["excluded"]] == ["runs/003-reuse"] and s["reps"] == 2
    assert "repetition 2 added to replace runs/003-reuse (the machine stalled)" in text(s)
    assert "repetition 2 added to replace runs/003-reuse" in (out / "report.md").read_text()
    # a resume with the same definition has nothing left to do: the block is in the schedule
    again = FakeExecutor("params.mode", MEDIANS)
    run_experiment(reuse(2), out, executor=again, quiet=True, resume=True, replace=2)
    assert again.calls == []


def test_a_finished_experiment_resumed_with_replace_replaces_its_stalled_run(tmp_path):
    out = run_experiment(reuse(2), tmp_path / "e", executor=FakeExecutor("params.mode", MEDIANS, overloaded=(3,)),
                         quiet=True)
    later = FakeExecutor("params.mode", MEDIANS)
    run_experiment(reuse(2), out, executor=later, quiet=True, resume=True, replace=1)
    assert [c[:2] for c in later.calls] == [(x.level, x.seed) for x in schedule(reuse(3))[-2:]]
    assert write_all(out, plots=False)["by_level"]["reuse"]["n_valid"] == 2


@pytest.mark.parametrize("kw, replace, calls", [
    ({"overloaded": (3, 6, 8)}, 2, 10),     # stalls in the first added block too: a second one, no third
    ({"overloaded": (3, 7)}, 1, 8),         # the limit
    ({"overloaded": (3,)}, 0, 6),           # off by default
    ({"overloaded": (3,), "cause": "engine"}, 2, 6),   # the emulator's fault: running again would not help
    ({"degraded": (3,)}, 2, 6),             # degraded runs are kept
    ({"fail": (3,)}, 2, 6),                 # a failed run is not the machine's stall
])
def test_replacement_blocks_follow_only_stalls_of_the_machine_up_to_the_limit(tmp_path, kw, replace, calls):
    fx = FakeExecutor("params.mode", MEDIANS, **kw)
    run_experiment(reuse(2), tmp_path / "e", executor=fx, quiet=True, replace=replace)
    assert len(fx.calls) == calls


def test_a_negative_replacement_count_is_refused(tmp_path):
    with pytest.raises(UsageError, match="replace must be 0 or more"):
        run_experiment(reuse(2), tmp_path / "e", executor=FakeExecutor("params.mode", MEDIANS), replace=-1)


def test_crash_then_resume_redoes_nothing(tmp_path):
    exp, out = reuse(4), tmp_path / "e"
    first = FakeExecutor("params.mode", MEDIANS, crash_after=5)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, out, executor=first, quiet=True)
    done = sorted(p.name for p in (out / "runs").iterdir())
    assert done == [s.dirname for s in schedule(exp)[:5]]          # no partial directory left
    assert not write_all(out, plots=False)["complete"]
    second = FakeExecutor("params.mode", MEDIANS)
    run_experiment(exp, out, executor=second, resume=True, quiet=True)
    assert [c[:2] for c in second.calls] == [(s.level, s.seed) for s in schedule(exp)[5:]]
    s = write_all(out, plots=False)
    assert s["complete"] and s["by_level"]["reuse"]["n_valid"] == 4


def test_resume_writes_the_ledger_line_a_killed_coordinator_never_wrote(tmp_path):
    """Killed between moving a run into runs/ and appending its ledger line: the run is kept and
    resume adds its line, marked recovered, so the ledger lists every run exactly once."""
    exp, out = reuse(3), tmp_path / "e"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, out, executor=FakeExecutor("params.mode", MEDIANS, crash_after=4), quiet=True)
    ledger = out / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    assert len(lines) == 4
    ledger.write_text("\n".join(lines[:2]) + "\n")               # the last two lines never written
    again = FakeExecutor("params.mode", MEDIANS)
    run_experiment(exp, out, executor=again, resume=True, quiet=True)
    assert len(again.calls) == 8 - 4                                # the two runs are not redone
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert sorted(r["dir"] for r in rows) == sorted(f"runs/{s.dirname}" for s in schedule(exp))
    assert [r["dir"] for r in rows if r.get("recovered")] == [f"runs/{s.dirname}" for s in schedule(exp)[2:4]]
    run_experiment(exp, out, executor=again, resume=True, quiet=True)   # nothing left: nothing added
    assert len(ledger.read_text().splitlines()) == 8


def test_a_ledger_line_a_crash_cut_short_does_not_stop_resume(tmp_path, caplog):
    """The coordinator killed while writing a line: resume warns about it, leaves it, and writes
    the run's line again."""
    exp, out = reuse(3), tmp_path / "e"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, out, executor=FakeExecutor("params.mode", MEDIANS, crash_after=4), quiet=True)
    ledger = out / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    ledger.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20] + "\n[1]\n")
    run_experiment(exp, out, executor=FakeExecutor("params.mode", MEDIANS), resume=True, quiet=True)
    assert f"{ledger}:4: not a ledger line" in caplog.text and f"{ledger}:5: not a ledger line" in caplog.text
    rows = [json.loads(line) for line in ledger.read_text().splitlines()[5:]]
    assert sorted(r["dir"] for r in rows) == sorted(f"runs/{s.dirname}" for s in schedule(exp)[3:])


def test_sigkill_mid_run_then_resume(tmp_path):
    """A real kill -9 of the process while a run is in progress."""
    out = tmp_path / "e"
    script = textwrap.dedent(f"""
        import time
        from experiments import load_definition, run_experiment
        from tests.fixtures.fake_execute import FakeExecutor
        class Slow(FakeExecutor):
            def __call__(self, plan, out_dir, **kw):
                r = super().__call__(plan, out_dir, **kw)
                time.sleep(0.4)            # killed here: the run dir is still .partial-
                return r
        exp = load_definition("reuse").with_overrides(reps=4)
        run_experiment(exp, {str(out)!r}, executor=Slow("params.mode", {MEDIANS!r}), quiet=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = out / "runs"
            if runs.is_dir() and len([p for p in runs.iterdir() if not p.name.startswith(".")]) >= 3:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    finished = {p.name for p in (out / "runs").iterdir() if not p.name.startswith(".")}
    assert 3 <= len(finished) < 10
    mtimes = {n: (out / "runs" / n / "manifest.json").stat().st_mtime_ns for n in finished}
    exp = load_definition("reuse").with_overrides(reps=4)
    again = FakeExecutor("params.mode", MEDIANS)
    run_experiment(exp, out, executor=again, resume=True, quiet=True)
    assert len(again.calls) == 10 - len(finished)
    assert {n: (out / "runs" / n / "manifest.json").stat().st_mtime_ns for n in finished} == mtimes
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]
    assert write_all(out, plots=False)["complete"]


def test_each_level_is_resolved_and_checked_once_not_per_run(tmp_path, monkeypatch):
    """The default executor gets each run's plan (its level's, with the run's seed) and
    ``checked=True``: root, backend and socket factors were checked once per level."""
    import testbed.run.execute
    import testbed.run.plan
    checked, resolved = [], []
    resolve = testbed.run.plan.resolve
    monkeypatch.setattr(testbed.run.plan.Plan, "preflight", lambda self: checked.append(self.spec))
    monkeypatch.setattr(testbed.run.plan, "resolve", lambda spec: resolved.append(spec) or resolve(spec))
    fx = FakeExecutor("params.mode", MEDIANS)
    seen = []
    monkeypatch.setattr(testbed.run.execute, "execute",
                        lambda plan, out_dir, **kw: seen.append((plan, kw)) or fx(plan, out_dir, **kw))
    run_experiment(reuse(3), tmp_path / "e", quiet=True)
    assert len(checked) == len(resolved) == 2 and len(seen) == 8
    assert all(kw == {"checked": True} for _, kw in seen)
    assert {plan.spec.seed for plan, _ in seen} == {s.seed for s in schedule(reuse(3))}
    by_level = {}
    for plan, _ in seen:
        by_level.setdefault(plan.params.mode, set()).add(id(plan.topology))
    assert all(len(ids) == 1 for ids in by_level.values())     # one topology per level, reused


def test_resume_refuses_another_definition_and_fresh_run_refuses_a_full_dir(tmp_path):
    out = run_experiment(reuse(2), tmp_path / "e", executor=FakeExecutor("params.mode", MEDIANS), quiet=True)
    with pytest.raises(UsageError, match=r"differs: --seed 7 \(there: 1\).*To continue it as it was: "
                                         r"testbed experiment run reuse --reps 2 --out \S+ --resume"):
        run_experiment(reuse(2, seed=7), out, executor=FakeExecutor("params.mode", MEDIANS), resume=True, quiet=True)
    with pytest.raises(UsageError, match="--reps 1 is fewer than the 2 repetitions there"):
        run_experiment(reuse(1), out, executor=FakeExecutor("params.mode", MEDIANS), resume=True, quiet=True)
    with pytest.raises(UsageError, match=r"--set/--link/--backend: params.requests=3 \(there: 10\)"):
        run_experiment(reuse(2).with_overrides(sets={"params.requests": 3}), out,
                       executor=FakeExecutor("params.mode", MEDIANS), resume=True, quiet=True)
    with pytest.raises(UsageError, match="not empty"):
        run_experiment(reuse(2), out, executor=FakeExecutor("params.mode", MEDIANS), quiet=True)


def test_topology_kept_up_per_repetition_block_only_when_the_factor_allows(tmp_path):
    ups = []

    @contextmanager
    def keep_up(plan):
        ups.append(plan.spec.seed)
        yield f"tb-{len(ups)}"

    fx = FakeExecutor("params.mode", MEDIANS)
    run_experiment(reuse(3), tmp_path / "a", executor=fx, keep_up=keep_up, quiet=True)
    assert len(ups) == 4                                            # 1 warm-up block + 3 reps
    assert [c[2] for c in fx.calls] == ["tb-1", "tb-1", "tb-2", "tb-2", "tb-3", "tb-3", "tb-4", "tb-4"]
    s = write_all(tmp_path / "a", plots=False)
    assert s["overhead"]["kept_topology"] and s["overhead"]["bringups"] == 4
    buf = load_definition("buffer").with_overrides(reps=2)
    assert not buf.topology_may_stay_up()
    ups.clear()
    fb = FakeExecutor("links.bottleneck.up.queue", {"20": 1.0, "1000": 2.0})
    run_experiment(buf, tmp_path / "b", executor=fb, keep_up=keep_up, quiet=True)
    assert ups == [] and all(c[2] is None for c in fb.calls)


def test_every_builtin_definition_loads_validates_and_has_a_check():
    from experiments.checks import check_for
    from experiments.definition import builtin_names
    names = builtin_names()
    assert {"reuse", "relay", "window", "ack", "cc", "initcwnd", "idle", "tls", "buffer"} <= set(names)
    for n in names:
        exp = load_definition(n)
        exp.validate()
        assert check_for(exp.factor) is not None, n
        assert Experiment.from_dict(exp.to_dict()) == exp


def test_definition_errors_name_what_is_allowed(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_text('name = "x"\nfactor = "params.mode"\nlevels = ["new"]\nmetrics = ["completion_ms"]\n[base]\n')
    with pytest.raises(UsageError, match="two or more levels.*narrow a run to one with --levels"):
        load_definition(bad)
    bad.write_text('name = "x"\nfactor = "params.mode"\nlevels = ["new", "reuse"]\nmetrics = ["speed"]\n[base]\n')
    with pytest.raises(UsageError, match="unknown metric 'speed'; allowed: one of the .* metrics "
                                         "`testbed experiment metrics` lists"):
        load_definition(bad)
    bad.write_text('name = "x"\nfactor = "params.mode"\nlevels = ["new", "reuse"]\nmetrics = ["completion_ms"]\n'
                   'colour = 1\n[base]\n')
    with pytest.raises(UsageError, match="unknown key"):
        load_definition(bad)
    with pytest.raises(UsageError, match="unknown experiment 'nope'.*reuse"):
        load_definition("nope")
    with pytest.raises(UsageError, match="level 'x': reqresp: params.mode 'x': allowed: new, reuse"):
        reuse().with_overrides(levels=["new", "x"]).validate()     # a new value, checked as a run's
    with pytest.raises(UsageError, match="no manipulation check for factor 'socket.delack_max'.*"
                                         'testbed experiment factors.*set check = "none"'):
        reuse().replace(factor="socket.delack_max", levels=("10ms", "20ms")).validate()
    reuse().replace(factor="socket.delack_max", levels=("10ms", "20ms"), check="none").validate()


@pytest.mark.parametrize("factor,level,checks,ok", [
    ("params.mode", "new", {"syn_per_request": 1.0}, True),
    ("params.mode", "reuse", {"syn_per_request": 1 / 11}, True),
    ("params.mode", "reuse", {"syn_per_request": 1.0}, False),
    ("socket.cc", "bbr", {"cc": ["bbr"]}, True),
    ("socket.cc", "bbr", {"cc": ["bbr", "cubic"]}, False),
    ("socket.window", "64KB", {"max_adv_window": 78000}, True),
    ("socket.window", "64KB", {"max_adv_window": 3_000_000}, False),
    ("host.ack", "quick", {"data_segments_per_ack": 1.0}, True),
    ("host.ack", "quick", {"data_segments_per_ack": 1.31}, False),
    ("host.ack", "max:10ms", {"data_segments_per_ack": 1.17}, True),
    ("host.initcwnd", 40, {"first_flight_segments": 40}, True),
    ("host.initcwnd", 40, {"first_flight_segments": 10}, False),
    ("host.initcwnd", 40, {"host_factors": {"client": {"initcwnd": 40}, "server": {"initcwnd": 40}}}, True),
    ("host.slow_start_after_idle", False,
     {"host_factors": {"client": {"slow_start_after_idle": 0}, "server": {"slow_start_after_idle": 0}}}, True),
    ("host.slow_start_after_idle", False,
     {"host_factors": {"client": {"slow_start_after_idle": 1}, "server": {"slow_start_after_idle": 0}}}, False),
    ("params.path", "relay", {"path": {"client-client-eth0.pcap": 10, "cgw-cgw-eth0.pcap": 10,
                                       "server-server-eth0.pcap": 0}}, True),
    ("params.path", "relay", {"path": {"client-client-eth0.pcap": 10, "cgw-cgw-eth0.pcap": 10,
                                       "server-server-eth0.pcap": 10}}, False),
    ("params.path", "direct", {"path": {"client-client-eth0.pcap": 10}}, False),
    ("links.bottleneck.up.queue", "20", {"queue_limit": [20]}, True),
    ("links.bottleneck.up.queue", "20", {"queue_limit": [1000]}, False),
    ("links.bottleneck.up.queue", "8MB", {"queue_limit": [8_000_000]}, True),
    ("params.tls_resume", True, {"tls_resumed": 0.9}, True),
    ("params.tls_resume", True, {"tls_resumed": 0.0}, False),
    ("params.tls_resume", False, {"tls_resumed": 0.1}, False),
    ("params.resume", True, {"tls_resumed": 0.0}, False),         # streams: QUIC resumption
    ("params.fec", "adaptive", {"repair_packets": 40}, True),
    ("params.fec", "adaptive", {"repair_packets": 0}, False),
    ("params.fec", "off", {"repair_packets": 0}, True),
    ("params.mode", "new", {}, False),
    ("params.reuse", True, {"syn_per_request": 1 / 30}, True),
    ("params.reuse", False, {"syn_per_request": 1 / 30}, False),
])
def test_manipulation_checks(factor, level, checks, ok):
    from experiments.checks import manipulation_reason
    reason = manipulation_reason(factor, level, checks)
    assert (reason is None) == ok, reason


def test_fidelity_rule():
    from experiments.checks import fidelity_reason
    assert fidelity_reason("complete", None, {"verdict": "ok"}) is None
    assert fidelity_reason("complete", None, {"verdict": "unknown"}) is None
    assert "overloaded: late" in fidelity_reason("complete", None, {"verdict": "overloaded", "reasons": ["late"]})
    assert fidelity_reason("complete", None, {"verdict": "degraded"}) is None
    assert "degraded" in fidelity_reason("complete", None, {"verdict": "degraded"}, accept_degraded=False)
    assert fidelity_reason("complete", None, {"links": [{"frames": 10, "lost": 5, "configured_loss": None}]}) is None
    assert "3 unintended" in fidelity_reason("complete", None, {"verdict": "ok", "unintended_drops": 3})
    assert "failed" in fidelity_reason("failed", "boom", {})
    link = {"name": "bottleneck.down", "configured_loss": "14%", "frames": 2000}
    assert fidelity_reason("complete", None, {"links": [{**link, "lost": 281}]}) is None
    assert "measured loss 0.0500" in fidelity_reason("complete", None, {"links": [{**link, "lost": 100}]})


def test_overrides_warmup_reps_seed_and_sets():
    exp = reuse(3).with_overrides(warmup=0, seed=5, sets={"params.requests": 2, "links.bottleneck.down.loss": "1%"})
    slots = schedule(exp)
    assert len(slots) == 6 and not any(s.warmup for s in slots)
    spec = exp.spec("reuse", slots[0].seed)
    assert spec.get("params.requests") == 2 and spec.get("links.bottleneck.down.loss") == "1%"
    assert spec.get("params.mode") == "reuse" and spec.seed == slots[0].seed
    window = load_definition("window")
    assert window.spec("default").get("socket.window") is None      # "default": the key unset
    assert window.spec("64KB").get("socket.window") == "64KB"


@pytest.mark.parametrize("name, per_exchange", [
    ("batch-ack", "1 exchange x (3 RTTs of 100 ms + 3 MB at 20 Mbit/s + 0.03 s of steps)"),
    ("c12-agent", "5 exchanges x (3 RTTs of 200 ms + 0.8 MB at 6.4 Mbit/s + 2.3 s of steps)"),
    ("cc", "its duration")])
def test_show_estimates_a_workload_from_its_bytes_steps_and_round_trips(name, per_exchange):
    """`testbed experiment show`: a run's workload is its duration, else per exchange 3 RTTs, its
    bytes at the slowest link rate and its timed steps (batch-ack: 3 MB up at 20 Mbit/s, 1.5 s)."""
    from experiments.report import _workload_seconds, describe
    exp = load_definition(name)
    plans = exp.validate()
    assert per_exchange in describe(exp, plans)
    if name == "batch-ack":
        seconds, _ = _workload_seconds(next(iter(plans.values())))
        assert seconds == pytest.approx(3 * 0.1 + 3e6 * 8 / 20e6 + 0.03, rel=0.01)
