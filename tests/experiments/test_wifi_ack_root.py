"""C10 done-when (root, userspace emulator, topology wifi): fewer end-to-end ACKs (host factor
ack: quick = one per segment, delayed = Linux's default, about one per two) reduce the ACK
airtime in the frame log by what the C10 model says — (ACK exchanges removed) × the model's ACK
exchange time for the run's ACK size — within 10%.  1 MB upload (short for CI)."""
import pytest

from analysis.airtime import run_airtime
from testbed.run.execute import execute
from testbed.spec.runspec import CaptureSpec, RunSpec

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("isolated_state")]


def test_halving_the_acks_frees_the_airtime_the_model_says(tmp_path):
    air = {}
    for ack in ("quick", "delayed"):
        spec = RunSpec(topology="wifi", backend="userspace", workload="airbulk",
                       params={"direction": "up", "size": "1MB"}, host={"ack": ack},
                       capture=CaptureSpec("none"), timeout=120)
        r = execute(spec, tmp_path / ack)
        assert r.status == "complete" and r.checks["airtime_exact"] is True
        air[ack] = run_airtime(r.dir)
    q, d = air["quick"]["ack"], air["delayed"]["ack"]
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    model_us = air["quick"]["model"]["ack_exchange_us"]
    predicted = (q["exchanges"] - d["exchanges"]) * model_us / 1e6
    measured = q["airtime_s"] - d["airtime_s"]
    print(f"\nload {load}: ACK exchanges quick {q['exchanges']}, delayed {d['exchanges']}; ACK airtime "
          f"{q['airtime_s'] * 1e3:.1f} → {d['airtime_s'] * 1e3:.1f} ms; reduction {measured * 1e3:.1f} ms, "
          f"model {predicted * 1e3:.1f} ms ({model_us:g} µs per ACK exchange); data exchanges "
          f"{air['quick']['data']['exchanges']}, {air['delayed']['data']['exchanges']}")
    assert d["exchanges"] <= 0.65 * q["exchanges"]                  # the ACKs were (about) halved
    assert abs(measured - predicted) <= 0.1 * predicted
    for a in air.values():                                           # the emulator's own total agrees
        assert a["ack"]["medium_busy_s"] == pytest.approx(a["ack"]["airtime_s"], rel=0.01)
