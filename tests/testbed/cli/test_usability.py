"""What a new user trips over on the command line (found by following README.md)."""
import logging
import os

import pytest

from testbed.cli import setup_logging


def test_a_warning_prints_once_after_mininet_is_imported(capsys, restore_logging):
    mnlog = pytest.importorskip("mininet.log")   # it makes every later logger print by itself
    logging.setLoggerClass(mnlog.MininetLogger)
    early = logging.getLogger("testbed.test_cli_usability.early")
    assert early.handlers                         # the newline-less copy the user saw
    setup_logging()
    late = logging.getLogger("testbed.test_cli_usability.late")
    early.warning("early warning")
    late.warning("late warning")
    err = capsys.readouterr().err
    assert err.count("early warning") == 1 and err.count("late warning") == 1
    assert "testbed: warning: early warning\n" in err


def test_tls_resume_is_its_own_flag_and_needs_tls(capsys, restore_logging):
    """`--resume` is the experiment's "continue"; TLS session resumption is `--tls-resume`."""
    from testbed.cli import main
    loop = ["run", "reqresp", "--topo", "loopback", "--capture", "none"]
    assert main([*loop, "--tls-resume"]) == 2
    assert "tls_resume (TLS session resumption) needs tls" in capsys.readouterr().err
    assert main([*loop, "--tls-resume", "--tls", "--mode", "reuse"]) == 2
    assert "needs mode new" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*loop, "--tls", "--resume"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "unrecognized arguments: --resume" in err and "--tls-resume" in err


@pytest.mark.parametrize("args, message", [
    (["{tmp}"], "give one run directory"),                      # a directory without manifest
    (["{tmp}/run", "{tmp}/run"], "give one run directory"),      # two run directories
    (["{tmp}/run/a.pcap", "--app-log", "{tmp}/missing.jsonl"], "--app-log {tmp}/missing.jsonl: no such file"),
    (["{tmp}/run/a.pcap", "--link-log", "{tmp}/missing.frames"], "--link-log {tmp}/missing.frames: no such file"),
])
def test_analyze_bad_paths_are_one_line(tmp_path, capsys, restore_logging, args, message):
    from testbed.cli import main
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text("{}")
    (tmp_path / "run" / "a.pcap").write_bytes(b"")
    assert main(["analyze", *(a.format(tmp=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert message.format(tmp=tmp_path) in err and len(err.strip().splitlines()) == 1


def test_output_into_a_closed_pipe_is_no_traceback():
    """`testbed experiment show reuse | head` closed stdout early: a BrokenPipeError traceback."""
    import subprocess

    from conftest import REPO, TESTBED
    p = subprocess.Popen([*TESTBED, "experiment", "show", "reuse"], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()                  # the reader is gone before the command writes
    err = p.stderr.read()
    p.wait(timeout=60)
    assert "Traceback" not in err and "Error" not in err, err
    assert p.returncode == 1


def test_experiment_run_help_names_every_default():
    import argparse

    from testbed.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    exp = next(a for a in sub.choices["experiment"]._actions
               if isinstance(a, argparse._SubParsersAction)).choices["run"]
    missing = [a.option_strings[0] for a in exp._actions
               if a.option_strings and a.nargs != 0 and a.dest not in ("help", "levels", "link", "overrides")
               and "default" not in (a.help or "")]
    assert missing == []


def test_model_help_states_each_default_once_and_no_unit_as_placeholder():
    import argparse

    from testbed.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    models = next(a for a in sub.choices["model"]._actions if isinstance(a, argparse._SubParsersAction))
    bad = [(name, a.option_strings[0]) for name, mp in models.choices.items() if name != "list"
           for a in mp._actions if a.option_strings and a.dest not in ("help", "json")
           and ((a.help or "").count("(default:") != 1 or a.metavar == "1")]
    assert bad == []     # was: --packets "(default: ceil(size/mss)) [count] (default: derived)", --loss 1


def test_reproduce_help_names_every_default():
    import argparse

    from testbed.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [a.option_strings[0] for a in sub.choices["reproduce"]._actions
               if a.option_strings and a.nargs != 0 and a.dest != "help" and "default" not in (a.help or "")]
    assert missing == []


def test_demo_help_says_what_it_runs():
    from conftest import REPO, TESTBED
    import subprocess
    top = subprocess.run([*TESTBED, "--help"], cwd=REPO, capture_output=True, text=True).stdout
    demo = subprocess.run([*TESTBED, "demo", "--help"], cwd=REPO, capture_output=True, text=True).stdout
    assert "reproduce C7" in " ".join(top.split()) and "(default: auto)" in demo


@pytest.mark.parametrize("args, message", [
    (["--cli", "--hold", "3"], "alternatives"),
    (["--hold", "3", "--exec", "client", "true"], "alternatives"),
    (["--hold", "-1"], "--hold -1"),
    (["--exec", "nohost", "true"], "HOST one of client, server"),
    (["--exec", "client", "iperf3", "-s", "--exec", "server"], "HOST one of client, server"),
])
def test_topo_up_refuses_bad_options_before_building_anything(capsys, restore_logging, args, message):
    from testbed.cli import main
    assert main(["topo", "up", "longhaul", *args]) == 2
    out, err = capsys.readouterr()
    assert message in err and len(err.strip().splitlines()) == 1 and "up with backend" not in out


def test_not_root_is_one_line_before_anything_is_created(tmp_path, monkeypatch):
    """Was: 'congestion control cubic needs CAP_NET_ADMIN' (run) or a PermissionError
    traceback (topo up, calibrate) for a user who forgot sudo."""
    import os

    from testbed.spec.errors import SetupError
    from testbed.run.execute import execute
    from testbed.run.network import Testbed
    from testbed.spec.runspec import RunSpec
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SetupError, match="'longhaul' needs root"):
        execute(RunSpec(topology="longhaul", workload="reqresp"), tmp_path / "run")
    with pytest.raises(SetupError, match="'longhaul' needs root"):
        with Testbed("longhaul", results_root=tmp_path):
            pass
    assert list(tmp_path.iterdir()) == []


def test_doctor_note_names_only_the_missing_qdisc(monkeypatch):
    """Was 'no netem/htb in this kernel' on a kernel that has htb."""
    from testbed.cli import doctor
    from testbed.backends import kernel
    monkeypatch.setattr(doctor.os, "geteuid", lambda: 0)
    monkeypatch.setattr(kernel, "probe_qdiscs", lambda: {"netns": True, "veth": True, "netem": False,
                                                         "htb": True, "errors": {}})
    from testbed.backends import uml
    monkeypatch.setattr(uml, "doctor_report", lambda refresh=False: {"available": False, "reason": "x"})  # no boot
    note = doctor.diagnose()["backend_note"]
    assert note.startswith("no netem in this kernel")


def test_every_valued_factor_option_names_its_default():
    import argparse

    from testbed.spec import factors
    p = argparse.ArgumentParser()
    factors.add_arguments(p, "socket")
    factors.add_arguments(p, "host")
    missing = [a.option_strings[0] for a in p._actions
               if a.option_strings and a.nargs != 0 and a.dest != "help" and "(default:" not in a.help]
    assert missing == []      # was: --window, --initcwnd … said nothing (they are left unset)


def test_calibrate_help_names_every_default():
    import argparse

    from testbed.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [a.option_strings[0] for a in sub.choices["calibrate"]._actions
               if a.option_strings and a.nargs != 0 and a.dest != "help" and "(default" not in (a.help or "")]
    assert missing == []      # was: --packets "(>= 10000 by default)"


def test_topo_list_keeps_long_parameter_names_apart_from_their_defaults(capsys, restore_logging):
    import re

    from testbed.cli import main
    assert main(["topo", "list"]) == 0
    params = [l for l in capsys.readouterr().out.splitlines()
              if l.startswith("    ") and not l.startswith("    hosts:")]
    assert params and all(re.match(r"    \S+ {2,}\S", l) for l in params)   # was 'cloud_rate_down 6.4mbit'


def test_experiment_list_columns_line_up(capsys, restore_logging):
    from testbed.cli import main
    assert main(["experiment", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    starts = {len(l) - len(l.split(None, 1)[1]) for l in lines}     # where the factor column starts
    assert len(lines) > 10 and len(starts) == 1                     # was shifted by 'streams-schedule'


def test_experiment_list_cuts_a_long_levels_cell(capsys, restore_logging):
    """c14-uplinks' second level, a list of 20 rates, pushed every description past 250 columns."""
    from testbed.cli import main
    from testbed.cli.experiment import LEVELS_WIDTH
    assert main(["experiment", "list"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("c14-uplinks "))
    levels = line.split(None, 2)[2].split("  ")[0]
    assert levels == "6.4mbit | … (2 levels)" and len(levels) <= LEVELS_WIDTH


def test_verbose_after_the_command_says_where_it_goes(capsys, restore_logging):
    from testbed.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["topo", "list", "-v"])
    assert exc.value.code == 2 and "-v and -q go before the command" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--set", "rate1="], ["--link", "access1.up.rate="]])
def test_an_empty_value_is_refused_not_read_as_unshaped(capsys, restore_logging, args):
    """`--set rate1=$RATE` with RATE unset used to remove the rate limit silently."""
    from testbed.cli import main
    assert main(["topo", "show", "dualpath", *args]) == 2
    assert "expected" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--set", "topology_params.rate1="], ["--link", "access1.up.rate="]])
def test_experiment_empty_value_is_refused(capsys, restore_logging, args):
    from testbed.cli import main
    assert main(["experiment", "run", "multipath", "--reps", "1", *args]) == 2
    err = capsys.readouterr().err
    assert "expected" in err and "with a value" in err


def test_analyze_says_when_a_run_failed(tmp_path, capsys, restore_logging):
    import json

    from testbed.cli import main
    (tmp_path / "manifest.json").write_text(json.dumps({"status": "failed", "error": "interrupted"}))
    assert main(["analyze", str(tmp_path)]) == 0
    assert "failed (interrupted)" in capsys.readouterr().out.splitlines()[0]
    assert main(["analyze", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "failed"


def test_a_user_other_than_root_keeps_run_state_of_its_own():
    """`--topo loopback` needs no root, but its state file went to root's /run/testbed
    (PermissionError traceback)."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import REPO
    code = "import testbed.host.lifecycle as l; print(l.STATE_DIR)"
    env = {k: v for k, v in os.environ.items() if k not in ("TESTBED_STATE_DIR", "XDG_RUNTIME_DIR")}
    if os.geteuid() != 0:
        argv = [sys.executable, "-c", code]
    elif shutil.which("runuser"):
        argv = ["runuser", "-u", "nobody", "--", sys.executable, "-c", code]
    else:
        pytest.skip("root without runuser")
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("/tmp/testbed-")


def test_levels_take_the_value_experiment_show_prints():
    """`experiment show ack` prints the level max:10ms; --levels knew only its label max-10ms."""
    from experiments import load_definition
    e = load_definition("ack")
    assert e.level("max:10ms") == e.level("max-10ms") == "max:10ms"
    with pytest.raises(Exception, match="levels: delayed, quick, max-10ms"):
        e.level("max:20ms")


def test_analyze_run_dir_uses_the_workloads_own_metrics():
    """analyze RUN_DIR of a udpreq run (now reqresp --transport udp) printed TCP metrics
    (in flight 0 …), not the manifest's."""
    from testbed.cli.analyze import _workload_metrics
    from analysis.runmetrics import run_metrics
    from testbed import workloads
    reqresp = workloads.get("reqresp")
    udp = reqresp.for_params(reqresp.make_params({"transport": "udp"})).metrics
    assert _workload_metrics({"spec": {"workload": "udpreq"}}) is udp is not run_metrics
    assert _workload_metrics({"spec": {"workload": "reqresp", "params": {"transport": "udp"}}}) is udp
    assert _workload_metrics({"spec": {"workload": "reqresp", "params": {"mode": "reuse"}}}) is reqresp.metrics
    assert _workload_metrics({}) is run_metrics
    assert _workload_metrics({"spec": {"workload": "gone"}}) is run_metrics


def test_experiment_without_root_makes_no_directory(tmp_path, monkeypatch, capsys, restore_logging):
    import os

    from testbed.cli import main
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["experiment", "run", "window", "--reps", "1", "--out", str(tmp_path / "e")]) == 1
    assert "needs root" in capsys.readouterr().err and not (tmp_path / "e").exists()


def test_verbose_shows_the_run_phases(caplog):
    """`testbed -v run …` printed nothing more than without -v."""
    from testbed.run.execute import _phase
    phases = {}
    with caplog.at_level(logging.INFO, logger="testbed.run.execute"):
        with _phase(phases, "bring_up_s"):
            pass
    assert "bring up …" in caplog.text and "bring up: " in caplog.text and "bring_up_s" in phases


def test_debug_is_the_testbeds_not_every_netlink_message(capsys, restore_logging):
    setup_logging(2)
    logging.getLogger("pyroute2.netlink.core").debug("SOCK_DGRAM enqueue")
    logging.getLogger("fontTools.subset").info("maxp pruned")          # matplotlib writing a PDF
    logging.getLogger("testbed.test_cli_usability").debug("ours")
    logging.getLogger("pyroute2.netlink.core").warning("a real problem")
    err = capsys.readouterr().err
    assert "ours" in err and "a real problem" in err and "SOCK_DGRAM" not in err and "maxp" not in err


def test_v_shows_the_info_lines_of_a_logger_made_while_mininet_ruled(capsys, restore_logging):
    """Importing mininet.log makes every logger made afterwards a MininetLogger at Mininet's level
    (25, above info): -v lost the info lines of a module imported before logging was set up."""
    mininet_log = pytest.importorskip("mininet.log")
    logging.setLoggerClass(mininet_log.MininetLogger)
    early = logging.getLogger("testbed.test_made_early")
    assert isinstance(early, mininet_log.MininetLogger) and early.level == mininet_log.LOGLEVELDEFAULT
    setup_logging(1)
    early.info("an info line")
    assert capsys.readouterr().err == "testbed: info: an info line\n"


@pytest.mark.parametrize("argv, message", [
    (["--transport", "udp", "--tls"], "tls applies to transport tcp only"),
    (["--transport", "udp", "--mode", "reuse", "--cc", "bbr"], "TCP factors (cc) do not apply"),
    (["--transport", "udp", "--nodelay"], "TCP factors (nodelay) do not apply"),
    (["--transport", "udp", "--fec", "fixed"], "fixed:R"),
])
def test_testbed_run_reqresp_udp_refuses_in_one_line(argv, message, capsys, restore_logging):
    """TCP-only options with --transport udp: one line saying what is wrong and what is allowed."""
    from testbed.cli import main
    assert main(["run", "reqresp", "--topo", "loopback", "--capture", "none", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv", [["topo", "up", "longhaul"], ["run", "reqresp"], ["calibrate"],
                                  ["experiment", "run", "reuse"], ["reproduce", "C7"], ["demo"]])
def test_every_command_that_brings_links_up_takes_the_engine(argv, monkeypatch):
    """README: ``--engine native|python`` on every command that brings a topology up (calibrate,
    experiments, reproduce and demo included); parsing it sets $TESTBED_ENGINE, which the
    userspace backend and every process a command starts read."""
    from testbed.cli import build_parser
    from testbed.emulator.config import ENGINE_ENV
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    args = build_parser().parse_args([*argv, "--engine", "python"])
    assert args.engine == "python" and os.environ[ENGINE_ENV] == "python"


@pytest.mark.parametrize("argv, allowed", [
    (["run", "reqresp", "--topo", "longhaul", "--mode", "sometimes"], "'new', 'reuse'"),
    (["topo", "up", "longhaul", "--hold", "abc"], "invalid float value"),
    (["calibrate", "--engine", "x"], "'native', 'python'"),
    (["nosuch"], "'doctor'"),
])
def test_argparse_errors_are_one_line_not_the_usage_block(argv, allowed, capsys, restore_logging):
    """README: bad input gets one line saying what is wrong and what is allowed (argparse's own
    errors printed the command's whole usage first: 28 lines for `run reqresp`)."""
    from testbed.cli import main
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and allowed in err and "--help" in err


def test_backend_netem_without_netem_is_refused_before_anything_is_made(monkeypatch, tmp_path, capsys,
                                                                        restore_logging):
    """`--backend netem` on a kernel without netem (as this VM's): one line naming what to use
    instead, exit 2, and no run, topology or experiment directory (it was a raw tc error after
    a failed run directory)."""
    if os.geteuid() != 0:
        pytest.skip("the root check comes first")
    from testbed.backends import kernel
    from testbed.cli import main
    monkeypatch.setattr(kernel, "probe_qdiscs", lambda: {
        "netns": True, "veth": True, "netem": False, "htb": True,
        "errors": {"netem": "Error: Specified qdisc kind is unknown."}})
    for argv in (["topo", "up", "longhaul", "--hold", "1"], ["calibrate"],
                 ["run", "reqresp", "--topo", "longhaul"],
                 ["experiment", "run", "reuse", "--reps", "1", "--out", str(tmp_path / "exp")]):
        assert main([*argv, "--backend", "netem", "--results", str(tmp_path)]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "no netem qdisc" in err[0] and "netem-uml" in err[0], (argv, err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["topo", "show", "longhaul", "--set", "delay=10"],
     "delay=10 has no unit, which is 10 s; write 10ms for milliseconds (or 10s if you mean seconds)"),
    (["topo", "show", "dualpath", "--set", "topology_params.delay1=15"], "write 15ms"),
    (["topo", "show", "longhaul", "--set", "jitter=5"], "jitter=5 has no unit, which is 5 s"),
    (["topo", "show", "longhaul", "--link", "bottleneck.up.delay=10"],
     "link override bottleneck.up.delay='10': delay=10 has no unit"),
    (["run", "bulk", "--topo", "longhaul", "--size", "1MB", "--set", "delay=10"], "write 10ms"),
    (["experiment", "run", "reuse", "--set", "delay=3"], "write 3ms"),
    (["calibrate", "--delay", "10"], "--delay=10 has no unit, which is 10 s; write 10ms"),
    # calibrate names the option of every value it refuses, before anything starts
    (["calibrate", "--delay", "-5ms"], "--delay -5ms: cannot read duration '-5ms'"),
    (["calibrate", "--rate", "fast"], "--rate fast: cannot read rate 'fast'"),
    (["calibrate", "--loss-down", "200%"], "--loss-down 200%: outside [0, 1]"),
])
def test_a_bare_delay_above_a_second_is_refused_naming_the_unit(argv, message, capsys, restore_logging):
    """`--set delay=10` was silently 10 s (a 549,868-packet queue on the long-haul path)."""
    from testbed.cli import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") <= 1


@pytest.mark.parametrize("args", [["--set", "delay=2s"], ["--set", "delay=0.05"],
                                  ["--link", "bottleneck.up.delay=1"], ["--set", "delay=40ms"],
                                  ["--set", "topology_params.jitter=0"]])
def test_a_delay_with_a_unit_or_at_most_a_second_is_taken(args, capsys, restore_logging):
    from testbed.cli import main
    assert main(["topo", "show", "longhaul", *args]) == 0


def test_a_bare_delay_in_a_definition_string_is_refused_too():
    from testbed.spec.linkspec import LinkSpec
    from testbed.spec.units import parse_delay
    with pytest.raises(ValueError, match="delay=10 has no unit, which is 10 s; write 10ms"):
        LinkSpec.parse(delay="10")
    with pytest.raises(ValueError, match="jitter=2.5 has no unit"):
        LinkSpec.parse(jitter="2.5")
    assert LinkSpec.parse(delay="10s").delay == 10.0 and LinkSpec.parse(delay=10).delay == 10.0
    assert parse_delay("0.5") == 0.5


@pytest.mark.parametrize("argv", [["run", "bulk", "--topo", "longhual"],
                                  ["run", "reqresp", "--topo", "longhual", "--initcwnd", "abc"],
                                  ["run", "bulk", "--topo", "longhual", "--set", "params.size=x"],
                                  ["run", "bulk", "--topo", "longhual", "--set", "delay=10"]])
def test_the_topology_name_is_checked_before_any_other_option(argv, capsys, restore_logging):
    """`run bulk --topo longhual` complained about --size first and about the typo only after."""
    from testbed.cli import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("testbed: error: unknown topology 'longhual'; allowed: longhaul")


def _parsers():
    import argparse

    from testbed.cli import build_parser

    def walk(p, path):
        yield " ".join(path), p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, [*path, name])
    return list(walk(build_parser(), ["testbed"]))


def test_every_help_text_is_plain_and_refers_to_what_exists():
    """Help showed RST markup (``testbed experiment``) and `--exec … (see above)` referred to
    nothing: every parser's --help, every subcommand's."""
    bad = []
    for path, p in _parsers():
        text = p.format_help()
        for marker in ("``", "see above", "see below", ":class:", ":func:", ":mod:"):
            if marker in text:
                bad.append(f"{path}: {marker!r}")
    assert not bad, bad


@pytest.mark.parametrize("argv,says", [
    (["run", "bulk", "--topo", "image", "--results", "{file}"], "argument --results: {file} is not a directory"),
    (["calibrate", "--results", "{file}/sub"], "{file} is a file, so nothing can be made under it"),
    (["reproduce", "C7", "--model-only", "--out", "{file}"], "argument --out: {file} is not a directory"),
    (["analyze", "--plots", "{file}", "x.pcap"], "argument --plots: {file} is not a directory"),
    (["analyze", "--html", "{dir}", "x.pcap"], "argument --html: {dir} is not a file"),
])
def test_an_output_path_in_the_way_is_refused_up_front(tmp_path, capsys, restore_logging, argv, says):
    from testbed.cli import main
    (tmp_path / "t.txt").write_text("")
    paths = {"file": str(tmp_path / "t.txt"), "dir": str(tmp_path)}
    with pytest.raises(SystemExit) as exc:
        main([a.format(**paths) for a in argv])
    assert exc.value.code == 2 and says.format(**paths) in capsys.readouterr().err


def test_an_os_error_about_a_path_is_one_line(tmp_path, capsys, restore_logging):
    """A capture that is a directory: the path and the system's reason, no traceback."""
    from testbed.cli import main
    run = tmp_path / "tb-run"
    (run / "pcap" / "client-eth0.pcap").mkdir(parents=True)
    (run / "manifest.json").write_text('{"schema": 1, "status": "complete", "spec": {"topology": "image"}}')
    assert main(["analyze", str(run)]) == 1
    err = capsys.readouterr().err
    assert err == f"testbed: error: {run / 'pcap' / 'client-eth0.pcap'}: Is a directory\n"


@pytest.mark.parametrize("argv,says", [
    (["--set", "topology=relay"], "--set topology=relay: the topology is --topo, not a --set"),
    (["--set", "workload=reqresp"], "--set workload=reqresp: the workload is the command's WORKLOAD"),
    (["--capture", ""], "capture hosts '': give 'all', 'none' or host names"),
])
def test_run_refuses_what_it_would_ignore(capsys, restore_logging, argv, says):
    """These once ran quietly: on relay, the reqresp workload, or without any capture."""
    from testbed.cli import main
    assert main(["run", "bulk", "--topo", "image", "--size", "1KB", *argv]) == 2
    assert says in capsys.readouterr().err


def test_client_and_server_on_one_host_is_refused():
    """They would talk over the host's loopback, through no emulated link."""
    from testbed.run.plan import resolve
    from testbed.spec.errors import UsageError
    from testbed.spec.runspec import RunSpec
    spec = RunSpec(topology="image", workload="bulk", params={"size": "1KB"}, client_host="server")
    with pytest.raises(UsageError, match="client and server are both on host 'server': no link"):
        resolve(spec)


@pytest.mark.parametrize("argv,says", [(["--size", "0"], "bulk: size 0: give at least 1 byte"),
                                       (["--duration", "0s"], "bulk: duration 0s: give more than 0 s")])
def test_an_empty_bulk_transfer_is_refused_before_the_topology_is_up(capsys, restore_logging, argv, says):
    from testbed.cli import main
    assert main(["run", "bulk", "--topo", "image", *argv]) == 2
    assert says in capsys.readouterr().err


def test_verbose_and_quiet_together_are_refused(capsys, restore_logging):
    from testbed.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["-v", "-q", "topo", "list"])
    assert exc.value.code == 2 and "-q/--quiet: not allowed with argument -v/--verbose" in capsys.readouterr().err


def test_calibrate_with_a_schedule_refuses_the_constant_links_options(tmp_path, capsys, restore_logging):
    from testbed.cli import main
    (tmp_path / "s.toml").write_text("")
    assert main(["calibrate", "--schedule", str(tmp_path / "s.toml"), "--overflow", "600mbit",
                 "--packets", "2000"]) == 2
    assert "so --packets, --overflow would do nothing" in capsys.readouterr().err


@pytest.mark.parametrize("argv,says", [
    (["--schedule", ""], "--schedule '': an empty path; give a link schedule file"),    # was a constant link
    (["--packets", "999999999999"], "--packets 999999999999: give at least 1000 (10000 for a 99% interval "
                                    "of about ±0.9 points at 14%) and at most 1,000,000"),
    (["--overflow", "1e15mbit"], "--overflow 1e15mbit: give a rate above the link's --rate 333mbit and at "
                                 "most 100gbit, or none"),
    (["--overflow", ""], "--overflow : cannot read rate ''"),
])
def test_calibrate_refuses_before_anything_starts(capsys, restore_logging, monkeypatch, argv, says):
    """Each was accepted (a calibration of 10^12 datagrams, a train at 10^21 bit/s, a constant link
    for an empty --schedule) or refused without naming its option."""
    from testbed.calibrate import link
    from testbed.cli import main
    from testbed.run import network

    def started(*a, **k):
        raise AssertionError("calibrate started measuring")
    monkeypatch.setattr(link, "measure", started)
    monkeypatch.setattr(network, "Testbed", started)
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_timeout_must_be_finite(capsys, restore_logging, value):
    """NaN once ran, and went into the manifest as invalid JSON."""
    from testbed.cli import main
    assert main(["run", "bulk", "--topo", "image", "--size", "1KB", "--timeout", value]) == 2
    assert f"timeout {value} must be > 0 seconds and finite" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["run", "bulk", "--topo", "image", "--size", "1KB", "--seed", "-1"],
                                  ["calibrate", "--seed", "-1"]])
def test_a_negative_seed_is_refused(capsys, restore_logging, argv):
    from testbed.cli import main
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --seed: '-1': give a whole number from 0 to 2^63-1" in err


@pytest.mark.parametrize("argv", [["run", "bulk", "--topo", "image", "--size", "1KB", "--seed", str(2**64)],
                                  ["topo", "up", "image", "--seed", str(2**63)],
                                  ["calibrate", "--seed", str(2**64)]])
def test_a_seed_beyond_netem_s_is_refused_naming_the_range(capsys, restore_logging, argv):
    """2^64 was accepted and failed when netem was given it."""
    from testbed.cli import main
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert f"argument --seed: '{argv[-1]}': give a whole number from 0 to 2^63-1 (9223372036854775807)" in err


def test_a_seed_set_beyond_netem_s_is_refused(capsys, restore_logging):
    from testbed.cli import main
    assert main(["run", "bulk", "--topo", "image", "--size", "1KB", "--set", f"seed={2**64}"]) == 2
    assert capsys.readouterr().err == (f"testbed: error: seed {2**64}: give a whole number from 0 to "
                                       "2^63-1 (9223372036854775807)\n")


def test_experiment_out_in_the_way_is_refused(tmp_path, capsys, restore_logging):
    from testbed.cli import main
    (tmp_path / "f").write_text("")
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "run", "buffer", "--reps", "1", "--out", str(tmp_path / "f")])
    assert exc.value.code == 2 and f"argument --out: {tmp_path / 'f'} is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("text,words", [
    ('[[step]]\nat = "1s"\ndelay = 100\n',
     "s.toml:1: schedule step at 1.0s: delay=100 has no unit, which is 100 s; write 100ms"),
    ('[step]\nat = "1s"\njitter = 3\n', "s.toml:1: schedule step at 1.0s: jitter=3 has no unit, which is 3 s"),
    ('[[event]]\nframe = 2\ndelay = 45\n', "s.toml:1: delay=45 has no unit, which is 45 s"),
])
def test_a_bare_delay_in_a_toml_schedule_is_refused_as_on_the_command_line(tmp_path, text, words):
    """`delay = 100` in a schedule file was 100 s, where `--link ...delay=100` is refused."""
    from testbed.spec.schedule import Schedule
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(ValueError, match=words):
        Schedule.load(tmp_path / "s.toml")
    (tmp_path / "s.toml").write_text('[[step]]\nat = "1s"\ndelay = 0.5\njitter = "2ms"\n')
    assert dict(Schedule.load(tmp_path / "s.toml").steps[0].changes) == {"delay": 0.5, "jitter": 0.002}
    (tmp_path / "s.json").write_text('{"step": [{"at": "1s", "delay": 2.0}]}')   # to_dict's seconds
    assert dict(Schedule.load(tmp_path / "s.json").steps[0].changes) == {"delay": 2.0}


@pytest.mark.parametrize("lines,words", [
    (['factor = "topology_params.delay"', 'levels = [100, "10ms"]'],
     "level '100': topology 'longhaul' parameter delay='100': delay=100 has no unit"),
    (['factor = "socket.cc"', 'levels = ["cubic", "bbr"]', "[base.topology_params]", "delay = 50"],
     "delay=50 has no unit, which is 50 s"),
    (['factor = "socket.cc"', 'levels = ["cubic", "bbr"]', "[base.links]", '"bottleneck.up.jitter" = 2'],
     "jitter=2 has no unit"),
])
def test_a_bare_delay_number_in_a_definition_is_refused(tmp_path, lines, words):
    """`delay = 100` in a definition planned a 110-minute experiment of 100 s one-way delays."""
    from experiments.definition import read_definition
    from testbed.spec.errors import UsageError
    head = ['name = "x"', 'metrics = ["goodput_mbps"]']
    base = ["[base]", 'topology = "longhaul"', 'workload = "bulk"', 'params = {size = "1MB"}']
    tables = [i for i, line in enumerate(lines) if line.startswith("[")]
    top, rest = (lines[:tables[0]], lines[tables[0]:]) if tables else (lines, [])
    (tmp_path / "x.toml").write_text("\n".join(head + top + base + rest) + "\n")
    with pytest.raises((UsageError, ValueError), match=words):
        read_definition(tmp_path / "x.toml").validate()
    (tmp_path / "x.toml").write_text("\n".join(head + top + base + rest).replace("100", "0.1")
                                     .replace("= 50", '= "50ms"').replace("= 2", "= 0.002") + "\n")
    read_definition(tmp_path / "x.toml").validate()


def test_the_clients_note_is_a_warning_that_quiet_silences(tmp_path, capsys, restore_logging):
    """`testbed -q run` printed the client's congestion-control note with its result lines."""
    from testbed.cli import setup_logging
    from testbed.cli.run import print_client_output
    out = tmp_path / "client.stdout"
    out.write_text("new: median 36.9 ms over 2 requests\nnote: congestion control cubic on the "
                   "testbed's sockets; ...\n")
    for quiet, shown in ((False, True), (True, False)):
        setup_logging(quiet=quiet)
        print_client_output(out)
        o, e = capsys.readouterr()
        assert o == "new: median 36.9 ms over 2 requests\n"
        assert ("warning: congestion control cubic" in e) is shown


def test_no_command_redefines_the_global_loudness_options():
    """`experiment run --quiet` had dest quiet: its default False overrode `testbed -q`, and its
    --quiet silenced every warning, not only the progress bar."""
    import argparse
    from testbed.cli import build_parser

    def parsers(p):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield sub
                    yield from parsers(sub)
    clashes = [(sub.prog, a.dest) for sub in parsers(build_parser()) for a in sub._actions
               if a.dest in ("quiet", "verbose")]
    assert clashes == []
    assert build_parser().parse_args(["-q", "experiment", "run", "reuse"]).quiet is True


def test_a_process_knows_its_logging_is_set_up(restore_logging):
    """A campaign block logs at the coordinator's level only where nothing set the worker's up:
    a `testbed worker -v` kept its own -v no more (every block reset it)."""
    from testbed.host.logs import logging_set_up
    logging.getLogger().handlers[:] = []
    assert not logging_set_up()
    setup_logging(1)
    assert logging_set_up() and logging.getLogger().level == logging.INFO
