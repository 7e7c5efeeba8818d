"""The link fidelity verdict as the command line prints it: ``calibrate`` says what the run's
verdict says (the machine or the engine to blame), no root needed (the measurement is faked)."""
import json

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
