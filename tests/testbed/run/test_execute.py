"""execute(RunSpec) -> RunResult: manifests, failures, one-factor differences, C7 from Python,
named-link overrides in effect, and `testbed analyze RUN_DIR` = RunResult.metrics."""
import json
import subprocess

import pytest

from conftest import REPO, TESTBED
from testbed.host.lifecycle import RunInterrupted
from testbed.spec.errors import RunError, UsageError
from testbed.run.execute import execute
from testbed.run.plan import resolve
from testbed.spec.runresult import MANIFEST_SCHEMA, load_run
from testbed.spec.runspec import CaptureSpec, RunSpec

LOOP = RunSpec(topology="loopback", capture=CaptureSpec("none"),
               params={"requests": 2, "size": "20000", "process": "1ms"})
# a scaled-down C7 path: 10 ms one way, no loss, so a run takes a few seconds
SMALL = {"delay": "10ms", "loss_down": "0%", "rate_up": "50mbit", "rate_down": "50mbit"}

pytestmark = pytest.mark.usefixtures("isolated_state")


def analyze_json(run_dir):
    out = subprocess.run([*TESTBED, "analyze", str(run_dir), "--json"], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.root
def test_two_specs_differing_in_one_factor_differ_in_exactly_that_field(tmp_path):
    a = execute(LOOP.set("socket.cc", "reno"), tmp_path / "a")
    b = execute(LOOP.set("socket.cc", "cubic"), tmp_path / "b")
    ma, mb = (json.loads((r.dir / "manifest.json").read_text()) for r in (a, b))
    assert ma["schema"] == mb["schema"] == MANIFEST_SCHEMA
    assert ma["status"] == mb["status"] == "complete"
    diff = RunSpec.from_dict(ma["spec"]).diff(RunSpec.from_dict(mb["spec"]))
    assert diff == {"socket.cc": ("reno", "cubic")}
    assert a.checks["cc"] == ["reno"] and b.checks["cc"] == ["cubic"]     # and it took effect
    assert len(a.metrics["completion_ms"]) == 2 and a.metrics["completion_ms_median"] > 0
    assert load_run(a.dir).metrics == a.metrics
    kinds = {f["path"]: f["kind"] for f in a.files}
    assert kinds["client.jsonl"] == "eventlog" and kinds["server.jsonl"] == "eventlog"


@pytest.mark.root
def test_a_failed_run_leaves_a_manifest_with_status_failed(tmp_path):
    spec = LOOP.set("params.think", "3s").set("params.requests", 3).set("timeout", 1.0)
    with pytest.raises(RunError, match="did not finish within 1 s") as err:
        execute(spec, tmp_path / "f")
    result = load_run(tmp_path / "f")
    assert result.status == "failed" and "did not finish" in result.error
    assert err.value.result.dir == result.dir and result.metrics == {}


@pytest.mark.root
def test_bad_spec_creates_nothing(tmp_path):
    with pytest.raises(UsageError, match="allowed"):
        execute(LOOP.set("params.colour", "red"), tmp_path / "x")
    assert not (tmp_path / "x").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("")
    with pytest.raises(UsageError, match="not empty"):
        execute(LOOP, tmp_path / "full")


def test_execute_takes_the_plan_it_would_resolve(tmp_path):
    plan = resolve(LOOP.set("params.requests", 1))
    r = execute(plan, tmp_path / "p", checked=True)
    assert r.status == "complete" and r.spec == plan.spec and r.roles == plan.roles
    assert load_run(r.dir).spec == plan.spec and len(r.metrics["completion_ms"]) == 1


@pytest.mark.root
def test_c7_relay_from_python_and_analyze_gives_the_same_metrics(tmp_path):
    spec = RunSpec(topology="relay", topology_params=SMALL, backend="userspace", workload="reqresp",
                   params={"path": "relay", "requests": 2, "size": "100000"})
    r = execute(spec, tmp_path / "c7")
    assert r.status == "complete" and r.roles == {"client": "client", "server": "server"}
    assert len(r.metrics["completion_ms"]) == 2
    assert all(c > 20 for c in r.metrics["completion_ms"])      # at least the 20 ms RTT
    assert r.checks["syn_per_request"] == 1.0                    # mode new: a SYN per request
    assert r.checks["host_factors"]["cgw"]["initcwnd"] == 256    # the tuned tunnel
    pcaps = [f for f in r.files if f["kind"] == "pcap"]
    assert {("client", "client-eth0"), ("sgw", "sgw-eth1")} <= {(f["host"], f["interface"]) for f in pcaps}
    assert any(f["kind"] == "framelog" for f in r.files)
    assert analyze_json(r.dir)["metrics"] == r.metrics
    # one id per run: metadata.json carried its testbed's own (the cleanup record's) id
    assert json.loads((r.dir / "metadata.json").read_text())["run_id"] == r.run_id == load_run(r.dir).run_id


@pytest.mark.root
def test_link_override_on_dualpath_reaches_the_emulator(tmp_path):
    out = subprocess.run([*TESTBED, "run", "reqresp", "--topo", "dualpath", "--backend", "userspace",
                          "--link", "access2.up.queue=50", "--link", "access1.up.queue=20",
                          "--capture", "none", "--json", "--results", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    summary = json.loads((tmp_path / printed["run_id"] / "emulator" / "summary.json").read_text())
    queues = {name: d["spec"]["queue_packets"] for name, d in summary["directions"].items()}
    assert sorted(q for q in queues.values() if q is not None) == [20, 50]
    up1 = next(d for d in summary["directions"].values() if d["spec"]["queue_packets"] == 20)
    assert up1["model"]["queue_max_packets"] <= 20                # the limit held
    meta = json.loads((tmp_path / printed["run_id"] / "metadata.json").read_text())
    assert meta["topology"]["link_overrides"] == {"access2.up.queue": 50, "access1.up.queue": 20}
    assert printed["metrics"]["completion_ms"]


@pytest.mark.root
def test_checks_show_initcwnd_window_and_queue_overrides(tmp_path):
    base = RunSpec(topology="longhaul", topology_params=SMALL, backend="userspace",
                   capture=CaptureSpec(("client", "server")), links={"bottleneck.up.queue": "300"})
    plain = execute(base, tmp_path / "plain")
    tuned = execute(base.set("host.initcwnd", 40).set("host.initrwnd", 40).set("socket.window", "64KB")
                    .set("host.advmss", 1180), tmp_path / "tuned")
    assert plain.checks["first_flight_segments"] == 10 and tuned.checks["first_flight_segments"] == 40
    # advmss: the SYNs carry it, segments shrink to advmss - 12 (timestamps), so more of them
    assert plain.checks["syn_mss"] == {"client": 1460, "server": 1460}
    assert tuned.checks["syn_mss"] == {"client": 1180, "server": 1180}
    assert (plain.checks["max_payload"], tuned.checks["max_payload"]) == (1448, 1168)
    assert tuned.metrics["data_packets_c2s"] > 1.2 * plain.metrics["data_packets_c2s"] > 0
    assert plain.metrics["wire_bytes"] > 0 and plain.metrics["flights"] >= 1
    assert tuned.checks["max_adv_window"] <= 1.3 * 64000 < plain.checks["max_adv_window"]
    assert plain.checks["queue_limit"] == [300]
    assert set(plain.checks["path"]) == {"client-client-eth0.pcap", "server-server-eth0.pcap"}
    assert all(n > 0 for n in plain.checks["path"].values())
    assert plain.fidelity["verdict"] in ("ok", "degraded", "overloaded")


@pytest.mark.root
def test_runs_on_a_testbed_that_is_already_up(tmp_path):
    from testbed.run.network import Testbed
    spec = RunSpec(topology="longhaul", topology_params=SMALL, backend="userspace",
                   params={"size": "20000", "requests": 2}, capture=CaptureSpec(("client",)))
    with Testbed("longhaul", backend="userspace", overrides=SMALL, results_root=tmp_path / "bed") as tb:
        runs = [execute(spec.set("host.initcwnd", iw).set("host.initrwnd", iw), tmp_path / f"r{iw}",
                        testbed=tb) for iw in (20, 10)]
        with pytest.raises(UsageError, match="does not match the spec in topology_params"):
            execute(spec.set("topology_params.delay", "20ms"), tmp_path / "x", testbed=tb)
    for r, iw, flight in zip(runs, (20, 10), (14, 10)):
        assert r.status == "complete" and len(r.metrics["completion_ms"]) == 2
        assert r.checks["host_factors"]["client"]["initcwnd"] == iw    # the route was replaced
        assert r.checks["first_flight_segments"] == flight   # 20,020 B = 14 segments; iw 10 holds 10
        assert (r.dir / "pcap" / "client-client-eth0.pcap").exists()


@pytest.mark.root
def test_discarded_pcaps_still_give_metrics(tmp_path):
    spec = RunSpec(topology="longhaul", topology_params=SMALL, backend="userspace",
                   params={"size": "20000"}, capture=CaptureSpec(("client",), keep=False))
    r = execute(spec, tmp_path / "r")
    assert r.metrics["handshake_ms"] and r.metrics["max_in_flight_bytes"] > 0
    assert not list((r.dir / "pcap").glob("*.pcap")) and not r.files_of("pcap")
    assert load_run(r.dir).metrics == r.metrics


@pytest.mark.root
def test_a_session_is_a_run_directory_also_when_interrupted(tmp_path):
    """`topo up`'s record: what ran in the block is the run; Ctrl-C in it leaves a manifest
    saying so, the captures stopped and listed, nothing running."""
    from testbed.run.execute import EXEC_WORKLOAD, session
    spec = RunSpec(topology="image", topology_params={"delay": "1ms"}, workload=EXEC_WORKLOAD,
                   capture=CaptureSpec("server"))
    with pytest.raises(KeyboardInterrupt):
        with session(spec, results_root=tmp_path) as (tb, result):
            tb.run("client", ["ping", "-c", "1", "server"], check=True)
            raise KeyboardInterrupt
    run = load_run(result.dir)
    assert run.status == "failed" and run.error == "interrupted (SIGINT)" and run.spec == spec
    assert [str(p.relative_to(run.dir)) for p in run.files_of("pcap")] == ["pcap/server-server-eth0.pcap"]
    assert run.capture["interfaces"][0]["captured"] >= 2 and run.roles["client"] == "client"
    assert run.capture["interfaces"][0]["pcap"] == "pcap/server-server-eth0.pcap"   # relative: dirs move
    with pytest.raises(ValueError, match="workload 'exec'"):
        with session(RunSpec(topology="image"), results_root=tmp_path):
            pass


@pytest.mark.parametrize("signal_exc, label", [(KeyboardInterrupt(), "interrupted (SIGINT)"),
                                               (RunInterrupted(143), "interrupted (SIGTERM)"),
                                               (RunInterrupted(129), "interrupted (SIGHUP)"),
                                               (RunInterrupted(130), "interrupted (SIGINT)")])
def test_an_interrupted_run_names_the_signal(tmp_path, monkeypatch, signal_exc, label):
    """Ctrl-C, SIGTERM, SIGHUP (a Run's RunInterrupted), Ctrl-C during teardown: one wording."""
    from testbed.run import execute as ex

    def interrupted(*a):
        raise signal_exc
    monkeypatch.setattr(ex, "_run", interrupted)
    with pytest.raises(type(signal_exc)):
        execute(LOOP, tmp_path / "r")
    run = load_run(tmp_path / "r")
    assert run.status == "failed" and run.error == label


def test_a_run_interrupted_while_its_metrics_are_computed_is_not_complete(tmp_path):
    """The manifest says complete before the metrics are computed (a crash then keeps the run);
    Ctrl-C in them leaves it failed, saying so, not complete without metrics."""
    import time

    from testbed.run.execute import _finish
    from testbed.spec.runresult import RunResult

    def interrupted(run_dir):
        assert load_run(run_dir).status == "complete"
        raise KeyboardInterrupt
    result = RunResult("tb-x", tmp_path, LOOP, "failed", None, time.time(), 0.0)
    with pytest.raises(KeyboardInterrupt):
        _finish(result, None, {}, interrupted, compute=True)
    run = load_run(tmp_path)
    assert run.status == "failed" and run.error.startswith("interrupted (SIGINT) while its metrics were computed")



def faulty_metrics(run_dir):
    raise KeyError("flows")


def flat_metrics(run_dir):
    return {"completion_ms": 3.0}


def odd_metrics(run_dir):
    return {"metrics": [("completion_ms", 3.0)]}


@pytest.mark.parametrize("metrics,problem", [
    (faulty_metrics, "raised KeyError: 'flows'"),
    (flat_metrics, 'returned a dict with key(s) completion_ms; allowed: {"metrics": {NAME: value, ...}, '
                   '"checks": {NAME: value, ...}}'),
    (odd_metrics, "returned metrics [('completion_ms', 3.0)], not a dict of names; allowed: {\"metrics\""),
    (lambda run_dir: None, "returned NoneType None, not a dict; allowed: {\"metrics\""),
])
def test_a_workloads_metrics_that_raise_or_have_the_wrong_shape_fail_the_run_naming_its_file(
        tmp_path, metrics, problem):
    """A workload's metrics() that raised (KeyError: a traceback, and the experiment runner threw
    the run directory away) or returned the wrong shape (recorded as no metrics, status complete)
    leaves the run failed, the files kept, the error one line naming the metrics' file: RunError."""
    import time

    from testbed.run.execute import _finish
    from testbed.spec.runresult import RunResult

    (tmp_path / "client.jsonl").write_text("{}\n")
    result = RunResult("tb-y", tmp_path, LOOP, "failed", None, time.time(), 0.0)
    with pytest.raises(RunError) as exc:
        _finish(result, None, {}, metrics, compute=True)
    run = load_run(tmp_path)
    assert run.status == "failed" and run.metrics == {}
    assert run.error == str(exc.value) and "\n" not in run.error
    assert run.error.startswith(f"the metrics of workload 'reqresp' ({__file__}) {problem}"), run.error
    assert "the run itself finished and its captures and logs are kept" in run.error
    assert exc.value.result is result and exc.value.run_dir == tmp_path
    assert (tmp_path / "client.jsonl").exists()


def test_metrics_that_cannot_read_the_runs_data_leave_it_complete_with_the_reason(tmp_path, caplog):
    """A ValueError or OSError of the metrics (a damaged capture, a streams run without its
    SYN-ACK) is the run's data, not a fault of the code: the run stays complete (an experiment's
    check excludes it; a machine stall's may rerun it), the reason in checks.metrics_error."""
    import time

    from testbed.run.execute import _finish
    from testbed.spec.runresult import RunResult

    def damaged(run_dir):
        raise ValueError("client-eth0.pcap: truncated in a packet's record")
    result = RunResult("tb-z", tmp_path, LOOP, "failed", None, time.time(), 0.0)
    _finish(result, None, {}, damaged, compute=True)
    run = load_run(tmp_path)
    assert run.status == "complete" and run.metrics == {}
    assert run.checks["metrics_error"] == "client-eth0.pcap: truncated in a packet's record"
    assert "could not be computed: client-eth0.pcap: truncated" in caplog.text


def test_metrics_of_the_right_shape_are_recorded(tmp_path):
    import time

    from testbed.run.execute import _finish
    from testbed.spec.runresult import RunResult

    result = RunResult("tb-z", tmp_path, LOOP, "failed", None, time.time(), 0.0)
    _finish(result, None, {}, lambda run_dir: {"metrics": {"completion_ms": 3.0}}, compute=True)
    run = load_run(tmp_path)
    assert run.status == "complete" and run.metrics == {"completion_ms": 3.0} and run.error is None


PLUGIN = '''"""tbmetricsbad: the client writes one line; metrics() reads a key it never wrote."""
import json
import socket
from dataclasses import dataclass
from pathlib import Path

from testbed.workloads import WORKLOADS, Workload, param


@dataclass(frozen=True)
class P:
    count: int = param(1, "unused")


def metrics(run_dir):
    return {"metrics": {"n": json.loads((run_dir / "client.jsonl").read_text())["missing"]}}


W = WORKLOADS.register(Workload("tbmetricsbad", "a toy", "tbmetricsbad", P, 5931, metrics=metrics,
                                socket_factors=False))


def serve(args):
    host, _, port = args.listen.rpartition(":")
    with socket.create_server((host, int(port))) as server:
        print(f"ready {host}:{port}", flush=True)
        server.accept()


def client(args):
    host, _, port = args.server.rpartition(":")
    socket.create_connection((host, int(port))).close()
    Path(args.log).write_text(json.dumps({"n": 1}) + "\\n")
    return 0


if __name__ == "__main__":
    from testbed.apps.appcli import app_main, app_parser
    raise SystemExit(app_main(lambda: app_parser(W, __doc__, serve, client)[0]))
'''


def test_a_plugin_workloads_metrics_that_raise_are_one_line_and_the_run_is_kept(tmp_path):
    """`testbed run` of a plugin whose metrics() raises: was a traceback (and status complete
    on disk); now one line naming the plugin file and the exception, exit 1, the run directory
    kept with status failed and that error in its manifest."""
    import os
    import sys

    (tmp_path / "plugins").mkdir()
    plugin = tmp_path / "plugins" / "tbmetricsbad.py"
    plugin.write_text(PLUGIN)
    r = subprocess.run([sys.executable, "-m", "testbed", "run", "tbmetricsbad", "--topo", "loopback",
                        "--results", str(tmp_path / "results")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO), "TESTBED_PATH": str(plugin.parent)})
    err = r.stderr.strip()
    assert r.returncode == 1 and "\n" not in err and "Traceback" not in err, r.stderr
    assert err.startswith(f"testbed: error: the metrics of workload 'tbmetricsbad' ({plugin}) raised "
                          "KeyError: 'missing'"), err
    (run_dir,) = (tmp_path / "results").iterdir()
    assert f"(run directory: {run_dir})" in err
    run = load_run(run_dir)
    assert run.status == "failed" and "raised KeyError: 'missing'" in run.error
    assert (run_dir / "client.jsonl").exists()
