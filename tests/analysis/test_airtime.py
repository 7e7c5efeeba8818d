"""analysis.airtime without root: synthetic frame logs of a shared medium."""
import json

import pytest

from analysis.airtime import run_airtime
from testbed.emulator.airtime import AirtimeSpec
from testbed.emulator.linklog import DELIVERED, LOSS, RECORD, LogWriter


def _log(path, frames):
    w = LogWriter(path, {"direction": path.stem})
    for i, (eth_len, verdict) in enumerate(frames):
        w.buf.append(RECORD.pack(i, i, i, i, 0, 0, 0, 0x800, 0, 0, 0, 6, eth_len, verdict))
    w.close()


def test_data_and_ack_airtime_follow_the_ppdu_formula(tmp_path):
    emu = tmp_path / "emulator"
    emu.mkdir()
    spec = AirtimeSpec()
    config = {"directions": [{"name": "up", "medium": "air"}, {"name": "down", "medium": "air"}],
              "media": {"air": spec.to_dict()}}
    (emu / "config.json").write_text(json.dumps(config))
    _log(emu / "up.frames", [(1514, DELIVERED)] * 10 + [(1514, LOSS)])   # a lost frame: no air
    _log(emu / "down.frames", [(66, DELIVERED)] * 5)                      # 52 B ACKs
    a = run_airtime(tmp_path)
    assert a["data"]["direction"] == "up" and a["data"]["exchanges"] == 10
    assert a["data"]["airtime_s"] == pytest.approx(10 * 342e-6)           # 1500 B: 34+248+16+44
    assert a["ack"]["airtime_s"] == pytest.approx(5 * 130e-6)             # 52 B: 34+36+16+44
    assert a["model"]["ack_exchange_us"] == pytest.approx(130)
    assert a["ack"]["medium_busy_s"] is None                              # no summary.json


def test_airtime_needs_a_medium(tmp_path):
    with pytest.raises(ValueError, match="userspace backend"):
        run_airtime(tmp_path)
    (tmp_path / "emulator").mkdir()
    (tmp_path / "emulator" / "config.json").write_text(json.dumps({"directions": [], "media": {}}))
    with pytest.raises(ValueError, match="no shared medium"):
        run_airtime(tmp_path)


def test_busy_intervals_follow_the_frames_times_not_a_count():
    """Two back-to-back frames and one after an idle gap: busy = their intervals, the gap left out."""
    import numpy as np

    from analysis.airtime import busy_intervals
    tail = 60_000
    arrival = np.array([0, 10_000, 1_000_000])
    data_end = np.array([282_000, 282_000 + 60_000 + 34_000 + 248_000, 1_000_000 + 34_000 + 36_000])
    b = busy_intervals(arrival, data_end, np.array([1500, 1500, 52]), tail)
    assert list(b["share_ns"]) == [342_000, 342_000, 130_000]   # waited for the first; then idle
    assert b["busy_ns"] == 814_000 and b["periods"] == 2
    with pytest.raises(ValueError, match="before it arrived"):
        busy_intervals(np.array([100_000]), np.array([100]), np.array([52]), tail)


def test_medium_busy_splits_data_and_feedback_frames_by_size(tmp_path):
    emu = tmp_path / "emulator"
    emu.mkdir()
    spec = AirtimeSpec()
    (emu / "config.json").write_text(json.dumps({
        "directions": [{"name": "up", "medium": "air", "spec": {"delay": 0.0}},
                       {"name": "down", "medium": "air", "spec": {"delay": 0.0}}],
        "media": {"air": spec.to_dict()}}))
    w = LogWriter(emu / "up.frames", {"direction": "up"})
    t = 34_000 + spec.ppdu_ns(1536, 54e6) - spec.exchange_ns(1500)
    for _ in range(3):                       # 1514 B data frames at 0, each waiting for the previous
        t += spec.exchange_ns(1500)
        w.buf.append(RECORD.pack(0, 0, t, t, 0, 0, 0, 0x800, 0, 0, 0, 6, 1514, DELIVERED))
    w.close()
    w = LogWriter(emu / "down.frames", {"direction": "down"})
    ack = t + 60_000 + 34_000 + spec.ppdu_ns(88, 54e6)          # one 66 B ACK after them
    w.buf.append(RECORD.pack(t, t, ack, ack, 0, 0, 0, 0x800, 0, 0, 0, 6, 66, DELIVERED))
    w.close()
    from analysis.airtime import medium_busy
    m = medium_busy(tmp_path)
    assert m["air_data_frames"] == 3 and m["air_feedback_frames"] == 1
    assert m["air_data_busy_ms"] == pytest.approx(3 * 0.342)
    assert m["air_feedback_busy_ms"] == pytest.approx(0.130)
    assert m["air_busy_ms"] == pytest.approx(3 * 0.342 + 0.130)


@pytest.mark.parametrize("name", ["config.json", "summary.json"])
def test_a_damaged_emulator_file_is_named(tmp_path, name):
    from analysis.airtime import medium_busy
    emu = tmp_path / "emulator"
    emu.mkdir()
    spec = AirtimeSpec().to_dict()
    (emu / "config.json").write_text(json.dumps({"media": {"air": spec}, "directions": []}))
    (emu / name).write_text('{"media": {')
    with pytest.raises(ValueError, match=f"{emu / name}: not valid JSON"):
        run_airtime(tmp_path)
    if name == "config.json":
        with pytest.raises(ValueError, match=f"{emu / name}: not valid JSON"):
            medium_busy(tmp_path)
