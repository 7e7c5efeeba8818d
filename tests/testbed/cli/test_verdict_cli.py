"""The link fidelity verdict as the command line prints it: ``calibrate`` says what the run's
verdict says (the machine or the engine to blame; the measurement faked, no root), and `topo up`
prints and records the verdict a run gets (root)."""
import json

import pytest

from testbed.cli import main

FRAMES = 10_000
SUMMARY = {  # an idle emulator on a busy machine: the case a user met with calibrate
    "engine": "native", "wall_s": 10.0, "cpu_s": 0.08, "cpu_percent": 0.8, "poll_idle_s": 0.0,
    "totals": {"frames_in": FRAMES, "delivered": FRAMES, "late": 3000, "late_after_stall": 0},
    "sched_error_us": {"p50": 30.0, "p99": 30_000.0, "max": 40_000.0},
    "read_lag_us": {"p50": 50.0, "p99": 100.0, "max": 300.0},
    "unintended_drops": 0, "late_ns": 1_000_000, "accounted": True,
    "host": {"busy_percent": 76.0, "steal_percent": 0.3, "forwarder_runqueue_wait_s": 1.1},
    "stalls": {"count": 0, "held_back": 0, "quiet": 0},
    "directions": {"client-server": {"frames_in": FRAMES // 2,
                                     "spec": {"delay": 0.02, "jitter": 0.0, "loss": {"p": 0.0}}},
                   "server-client": {"frames_in": FRAMES // 2,
                                     "spec": {"delay": 0.02, "jitter": 0.0, "loss": {"p": 0.02}}}}}


def fake_calibrate(tmp_path, monkeypatch):
    from testbed.emulator import fidelity
    summary = json.loads(json.dumps(SUMMARY))
    fidelity.apply(summary)
    (tmp_path / "metadata.json").write_text(json.dumps({"backend": "userspace",
                                                         "backend_summary": summary}))
    out = {"backend": "userspace", "run_dir": str(tmp_path), "ok": False,
           "checks": [{"check": "emulator sched error p99 (µs)", "configured": None,
                       "measured": 30_000.0, "ok": False, "tolerance": "≤ 200"}],
           "measured": {"rtt_ms": {"min": 40.1, "echoed": 10, "probes": 10}},
           "emulator": {"sched_error_us": summary["sched_error_us"], "cpu_percent": 0.8,
                        "warnings": summary["warnings"]}}
    monkeypatch.setattr("testbed.calibrate.link.calibrate", lambda *a, **k: out)


def test_calibrate_blames_the_busy_machine_not_the_idle_emulator(tmp_path, monkeypatch, capsys):
    fake_calibrate(tmp_path, monkeypatch)
    assert main(["calibrate", "--rate", "20mbit", "--delay", "20ms", "--loss-down", "2%"]) == 1
    out = capsys.readouterr().out
    assert "link fidelity: overloaded — the machine was busy, not the emulator" in out
    assert "76 % busy" in out and "1.10 s of 10.0 s in the run queue" in out
    assert "could not keep up" not in out
    assert main(["calibrate", "--json"]) == 1
    got = json.loads(capsys.readouterr().out)["fidelity"]
    assert got["verdict"] == "overloaded" and got["cause"] == "machine"


@pytest.mark.root
def test_topo_up_prints_and_records_the_links_verdict(tmp_path):
    """A `topo up` run gets the verdict `testbed run` gets (manifest and a printed line), and the
    emulator's summary.json says the same (one signal)."""
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run([sys.executable, "-m", "testbed", "topo", "up", "longhaul", "--set", "loss_down=0%",
                           "--backend", "userspace", "--results", str(tmp_path), "--exec", "client",
                           "ping", "-c", "3", "-i", "0.2", "{server}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (manifest,) = tmp_path.glob("*/manifest.json")
    verdict = json.loads(manifest.read_text())["fidelity"]
    assert verdict["verdict"] in ("ok", "degraded", "overloaded")
    assert f"link fidelity: {verdict['verdict']}" in proc.stdout
    summary = json.loads((manifest.parent / "emulator" / "summary.json").read_text())
    assert summary["fidelity"]["verdict"] == verdict["verdict"]
    assert summary["overload"] == (verdict["verdict"] == "overloaded")
    assert Path(summary["log_dir"]).is_dir()
