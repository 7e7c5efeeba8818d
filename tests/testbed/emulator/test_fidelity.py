"""The fidelity verdict on synthetic emulator summaries (no root), and one real check on the
long-haul path (root): a clean low-rate run is ok, iperf3 at full rate through the Python
forwarder is overloaded."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.emulator import fidelity

SPEC = {"rate": 333e6, "delay": 0.1, "jitter": 0.0, "loss": {"model": "bernoulli", "p": 0.0}}


def summary(frames=1000, late=0, p99_us=50.0, max_us=200.0, lag_p99_us=100.0, lag_max_us=300.0,
            drops=0, delay=0.1, loss=0.14, accounted=True):
    up, down = dict(SPEC, delay=delay), dict(SPEC, delay=delay, loss={"model": "bernoulli", "p": loss})
    return {"totals": {"frames_in": frames, "delivered": frames - drops, "late": late},
            "sched_error_us": {"p50": 30.0, "p99": p99_us, "max": max_us},
            "read_lag_us": {"p50": 50.0, "p99": lag_p99_us, "max": lag_max_us},
            "unintended_drops": drops, "late_ns": 1_000_000, "accounted": accounted,
            "directions": {"client-server": {"frames_in": frames // 2, "dropped_loss": 0, "spec": up},
                           "server-client": {"frames_in": frames // 2, "dropped_loss": 70, "spec": down}}}


def test_clean_run_with_a_handful_of_late_frames_is_ok():
    v = fidelity.verdict(summary(late=2, max_us=1300.0))          # 2 of 1000, 0.15 Mbit/s style
    assert v["verdict"] == "ok" and not v["warnings"]
    assert v["path_rtt_ms"] == pytest.approx(200.0)
    assert v["notes"] and "2 of 1000" in v["notes"][0]
    links = {lk["name"]: lk for lk in v["links"]}
    assert links["server-client"]["configured_loss"] == 0.14 and links["server-client"]["lost"] == 70


def test_full_rate_overload_with_read_lag_is_overloaded():
    v = fidelity.verdict(summary(frames=60_000, late=27_000, p99_us=40_000.0, max_us=70_000.0,
                                 lag_p99_us=60_000.0, lag_max_us=65_000.0))
    assert v["verdict"] == "overloaded"
    assert all(w.startswith("OVERLOADED") for w in v["warnings"])
    assert any("read" in w for w in v["warnings"])


@pytest.mark.parametrize("kw, expected", [
    ({"drops": 1, "frames": 10_000}, "degraded"),             # any unintended drop
    ({"drops": 20, "frames": 10_000}, "overloaded"),          # > 0.1 % of the frames
    ({"late": 600, "frames": 10_000, "p99_us": 1500.0}, "ok"),          # 6 % late, by little
    ({"max_us": 60_000.0}, "degraded"),                        # one frame 30 % of 200 ms late
    ({"late": 3000, "frames": 10_000, "p99_us": 1500.0}, "overloaded"),  # 30 % late
    ({"p99_us": 5000.0}, "degraded"),                         # 2.5 % of 200 ms
    ({"lag_p99_us": 25_000.0}, "overloaded"),                 # 12.5 % of 200 ms
    ({"accounted": False}, "degraded"),
])
def test_each_threshold(kw, expected):
    v = fidelity.verdict(summary(**kw))
    assert v["verdict"] == expected and expected in fidelity.VERDICTS
    assert bool(v["warnings"]) == (expected != "ok")


def test_lateness_is_relative_to_the_path_rtt():
    assert fidelity.verdict(summary(p99_us=3000.0, delay=0.1))["verdict"] == "ok"        # 1.5 % of 200
    assert fidelity.verdict(summary(p99_us=3000.0, delay=0.01))["verdict"] == "overloaded"  # 15 % of 20
    # below the floor (10 ms) the floor is the reference
    assert fidelity.verdict(summary(p99_us=150.0, delay=0.0))["path_rtt_ms"] == fidelity.RTT_FLOOR_MS


def test_link_records_override_and_unknown():
    links = [{"a_to_b": dict(SPEC, delay=0.005), "b_to_a": dict(SPEC, delay=0.005)}]
    assert fidelity.path_rtt_ms(summary(), links) == pytest.approx(10.0)
    assert fidelity.verdict(None)["verdict"] == "unknown"
    assert fidelity.verdict({"error": "forwarder exited 1", "unintended_drops": None})["verdict"] == "unknown"
    assert fidelity.verdict(summary(frames=0))["verdict"] == "unknown"


@pytest.mark.root
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed (scripts/install.sh)")
def test_real_runs_on_the_longhaul_path(tmp_path):
    """A clean low-rate run (100 KB at 1 Mbit/s): ok.  iperf3 at full rate (333 Mbit/s) both ways
    with 0% loss through the Python engine: overloaded (one way, or with the path's 14% loss, it
    keeps up since the forwarder has a CPU of its own, see ``testbed.host.steering``)."""
    testbed = [sys.executable, "-m", "testbed"]
    slow = subprocess.run(testbed + ["run", "bulk", "--topo", "longhaul", "--backend", "userspace",
                                     "--capture", "none", "--size", "100KB", "--direction", "up",
                                     "--link", "bottleneck.up.rate=1mbit",
                                     "--results", str(tmp_path / "slow"), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert slow.returncode == 0, slow.stderr
    fast = subprocess.run(testbed + ["topo", "up", "longhaul", "--set", "loss_down=0%",
                                     "--backend", "userspace", "--engine",
                                     "python", "--results", str(tmp_path / "fast"),
                                     "--exec", "server", "iperf3", "-s", "-1",
                                     "--exec", "client", "iperf3", "-c", "{server}", "-t", "8", "--bidir"],
                          capture_output=True, text=True, timeout=600)
    assert fast.returncode == 0, fast.stderr
    v_slow = json.loads((Path(json.loads(slow.stdout)["dir"]) / "manifest.json").read_text())["fidelity"]
    meta = next((tmp_path / "fast").glob("*/metadata.json"))
    v_fast = json.loads(meta.read_text())["backend_summary"]["fidelity"]
    print(f"\nslow: {v_slow['verdict']} {v_slow.get('reasons')} {v_slow.get('notes')}\n"
          f"iperf3: {v_fast['verdict']} {v_fast.get('reasons')}")
    assert v_slow["verdict"] == "ok"
    assert v_fast["verdict"] == "overloaded"
    assert "OVERLOADED" in fast.stderr                       # the warning says so, by severity
