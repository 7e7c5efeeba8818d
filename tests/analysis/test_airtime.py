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
