"""Link schedules in the forwarder's per-direction logic, the frame log's change file and the
run's warnings, without root (datagram socket pairs, virtual origins)."""
import socket
import time

import numpy as np

from testbed.emulator import linklog
from testbed.emulator.config import DirectionConfig, ForwarderConfig
from testbed.spec.linkspec import LinkSpec
from testbed.spec.schedule import Schedule


def _spec(schedule: dict) -> LinkSpec:
    return LinkSpec.parse(delay="1ms").replace(schedule=Schedule.from_dict(schedule))


def _direction(tmp_path, spec):
    from testbed.emulator.forwarder import Direction
    from testbed.emulator.schedule_model import make_direction
    a_in, b_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a_out, b_out = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (b_in, b_out):
        s.setblocking(False)
    cfg = DirectionConfig("a-b", "tbe0a", "tbe0b", spec, seed=3)
    d = Direction(cfg, make_direction(spec, seed=3, name="a-b"), b_in, a_out,
                  linklog.LogWriter(tmp_path / "a-b.frames", {"direction": "a-b"}))
    return d, a_in, b_out


def test_config_takes_a_scheduled_direction(tmp_path):
    spec = _spec({"outage": [{"down": "1s", "duration": "2s"}]})
    cfg = ForwarderConfig((DirectionConfig("a-b", "tbe0a", "tbe0b", spec, 1),), str(tmp_path))
    cfg.write(tmp_path / "c.json")
    assert ForwarderConfig.read(tmp_path / "c.json") == cfg


def test_outage_and_event_verdicts_are_logged_as_such(tmp_path):
    """Since the origin: the 2nd frame is dropped by an event, the 4th on by an outage."""
    from scapy.all import IP, UDP, Ether, raw
    spec = _spec({"outage": [{"down": "3frames", "duration": "3600s"}],
                  "event": [{"frame": 2, "drop": True}]})
    d, feed, sink = _direction(tmp_path, spec)
    feed.send(raw(Ether() / IP(id=1) / UDP()))
    d.drain(None)                                 # before the origin: delivered
    d.origin_ns = d.last_arrival + 1
    d.model.set_origin(d.origin_ns)
    for i in range(2, 7):
        feed.send(raw(Ether() / IP(id=i) / UDP()))
    d.drain(None)
    d.send_due(time.monotonic_ns() + 10**9)
    d.log.close()
    sink.close()
    _, rec = linklog.read_log(d.log.path)
    fate = dict(zip(rec["ip_id"].tolist(), rec["verdict"].tolist()))
    # frames count from the origin: id 3 is the 2nd, id 5 the first after 3 had arrived
    assert fate == {1: linklog.DELIVERED, 2: linklog.DELIVERED, 3: linklog.EVENT,
                    4: linklog.DELIVERED, 5: linklog.OUTAGE, 6: linklog.OUTAGE}
    s = linklog.summarize(rec, 10**6)
    assert (s["dropped_outage"], s["dropped_event"], s["delivered"]) == (2, 1, 3)
    changes = [c.to_dict() for c in d.model.drain_changes(d.origin_ns)]
    path = linklog.write_changes(d.log.path, {"origin_ns": d.origin_ns}, changes)
    assert path.name == "a-b.changes.jsonl"
    origin, back = linklog.read_changes(d.log.path)
    assert origin == {"origin_ns": d.origin_ns}
    assert [c["kind"] for c in back] == ["event", "down"] and back == changes
    assert linklog.read_changes(tmp_path / "none.frames") is None


def test_inventory_names_the_change_file(tmp_path):
    from testbed.run.execute import inventory
    from testbed.spec.runresult import RunResult
    from testbed.spec.runspec import RunSpec
    (tmp_path / "emulator").mkdir()
    (tmp_path / "emulator" / "a-b.changes.jsonl").write_text("{}\n")
    (tmp_path / "emulator" / "a-b.frames").write_bytes(b"")
    files = inventory(RunResult("r", tmp_path, RunSpec(), "complete", None, 0.0, 0.0))
    kinds = {f["path"]: (f["kind"], f["interface"]) for f in files}
    assert kinds == {"emulator/a-b.changes.jsonl": ("link_changes", "a-b"),
                     "emulator/a-b.frames": ("framelog", "a-b")}
    assert np.dtype(linklog.dtype()).itemsize == linklog.RECORD.size
