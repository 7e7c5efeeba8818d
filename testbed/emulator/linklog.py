"""Per-direction frame log of the userspace emulator: fixed-size binary records, read as numpy.

File layout (``<log_dir>/<direction>.frames``)::

    b"TBFRAMES1\\n"  u32 little-endian header length  JSON header  records...

The JSON header names the direction, the clock and the record fields.  Records are appended in
chunks as frames *complete* (are sent, dropped, or abandoned at exit), so the file order is
completion order; sort by ``t_arrival`` for arrival order.  A record cut short by a crash is
ignored by the reader.

Record fields (all times CLOCK_MONOTONIC nanoseconds, the testbed's one clock):

- ``t_arrival``: when the frame reached the emulator's input interface (kernel receive
  timestamp, SO_TIMESTAMPNS, converted to CLOCK_MONOTONIC); the model's arrival time.
- ``t_read``: when the emulator read it from its socket (``t_read − t_arrival`` = read lag).
- ``t_sched``: for a delivered frame, the time the model scheduled its departure; for a drop,
  the time the drop took effect (model's answer).
- ``t_sent``: when the emulator handed the frame to the kernel on the output interface
  (0 when it was not sent).  *Scheduling error* = ``t_sent − t_sched`` of delivered frames.
- ``length``: Ethernet frame bytes (header included, no FCS), as read from AF_PACKET.
- ``verdict``: one of ``VERDICTS`` (index = code); ``dropped_outage`` and ``dropped_event``
  come from a link schedule (an outage, a per-frame event; ``schedule_model``).
- join key with captures (tcpdump/tshark on the hosts' interfaces): ``ethertype``; for IPv4,
  ``src``/``dst`` (addresses as u32 host order), ``ip_id``, ``proto``; for TCP/UDP of an
  unfragmented datagram ``sport``/``dport``; for TCP ``seq`` (raw sequence number).  Fields that
  do not apply are 0.

Schedule changes (a direction whose LinkSpec has a ``schedule``) are written beside the frames,
one JSON object per line in ``<log_dir>/<direction>.changes.jsonl`` (``write_changes``,
``read_changes``): first ``{"origin_ns", "origin_requested_ns"}``, then one
``schedule_model.ScheduleChange.to_dict()`` per change that took effect (kind, item, the
configured moment as written, ``configured_ns`` and ``actual_ns`` on the same clock as the
records, frames before it, what changed).
"""
from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path
from typing import Any

RECORD = struct.Struct("<qqqqIIIHHHHBHB")
FIELDS = ("t_arrival", "t_read", "t_sched", "t_sent", "src", "dst", "seq", "ethertype", "ip_id",
          "sport", "dport", "proto", "length", "verdict")
_FORMATS = ("<i8", "<i8", "<i8", "<i8", "<u4", "<u4", "<u4", "<u2", "<u2", "<u2", "<u2", "u1", "<u2",
            "u1")
MAGIC = b"TBFRAMES1\n"

DELIVERED, LOSS, QUEUE, SEND_ERROR, PENDING_AT_EXIT, OUTAGE, EVENT = range(7)
VERDICTS = ("delivered", "dropped_loss", "dropped_queue", "send_error", "pending_at_exit",
            "dropped_outage", "dropped_event")
CHANGES_SUFFIX = ".changes.jsonl"

_ETH_IP = struct.Struct("!12xHB3xH3xB2xII")  # ethertype, ver/ihl, ip id, proto, src, dst
_PORTS_SEQ = struct.Struct("!HHI")
_PORTS = struct.Struct("!HH")
_FRAG = struct.Struct("!H")


def dtype():
    import numpy as np
    return np.dtype({"names": list(FIELDS), "formats": list(_FORMATS)})


def parse_key(frame: bytes) -> tuple[int, int, int, int, int, int, int, int]:
    """(src, dst, seq, ethertype, ip_id, sport, dport, proto) of an Ethernet frame; 0 where absent.

    The order is the record's, so a record is ``RECORD.pack(t_arr, t_read, t_sched, t_sent, *key,
    length, verdict)``.
    """
    if len(frame) < 34:
        return (0, 0, 0, int.from_bytes(frame[12:14], "big") if len(frame) >= 14 else 0, 0, 0, 0, 0)
    ethertype, vihl, ip_id, proto, src, dst = _ETH_IP.unpack_from(frame)
    if ethertype != 0x0800:
        return (0, 0, 0, ethertype, 0, 0, 0, 0)
    l4 = 14 + (vihl & 15) * 4
    if _FRAG.unpack_from(frame, 20)[0] & 0x1FFF:  # not the first fragment: no L4 header
        return (src, dst, 0, ethertype, ip_id, 0, 0, proto)
    if proto == 6 and len(frame) >= l4 + 8:
        sport, dport, seq = _PORTS_SEQ.unpack_from(frame, l4)
        return (src, dst, seq, ethertype, ip_id, sport, dport, proto)
    if proto == 17 and len(frame) >= l4 + 4:
        sport, dport = _PORTS.unpack_from(frame, l4)
        return (src, dst, 0, ethertype, ip_id, sport, dport, proto)
    return (src, dst, 0, ethertype, ip_id, 0, 0, proto)


class LogWriter:
    """Appends packed records (``RECORD.pack(...)``) to ``path`` in chunks of ``chunk`` records."""

    def __init__(self, path: Path | str, header: dict[str, Any], chunk: int = 8192):
        self.path = Path(path)
        meta = dict(header, clock="CLOCK_MONOTONIC_ns", fields=list(FIELDS),
                    formats=list(_FORMATS), verdicts=list(VERDICTS), record_size=RECORD.size)
        blob = json.dumps(meta).encode()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(self._fd, MAGIC + struct.pack("<I", len(blob)) + blob)
        self.buf: list[bytes] = []
        self.chunk = chunk
        self.records = 0
        self.flush_max_ns = 0  # longest flush: the loop stands still meanwhile

    def flush(self) -> None:
        if self.buf:
            t0 = time.monotonic_ns()
            data = b"".join(self.buf)
            self.records += len(self.buf)
            self.buf.clear()
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            self.flush_max_ns = max(self.flush_max_ns, time.monotonic_ns() - t0)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1


def read_log(path: Path | str):
    """(header dict, numpy structured array with ``FIELDS``) of one direction's frame log; a
    ValueError naming the file when its header cannot be read.  A log that ends inside a record
    (cut short) gives the whole records, and the header's ``damage`` says what was left out."""
    import numpy as np
    with open(path, "rb") as f:
        head = f.read(len(MAGIC) + 4)
        if len(head) < len(MAGIC) + 4 or not head.startswith(MAGIC):
            raise ValueError(f"{path} is not an emulator frame log (bad magic)")
        hlen = struct.unpack_from("<I", head, len(MAGIC))[0]
        try:
            header = json.loads(f.read(hlen))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: the frame log's header is damaged ({exc})") from None
        if not isinstance(header, dict):
            raise ValueError(f"{path}: the frame log's header is not a JSON object")
        start = f.tell()
        n, rest = divmod(os.fstat(f.fileno()).st_size - start, RECORD.size)
        if rest:
            header["damage"] = (f"cut short: {rest} bytes of a record after the {n} whole ones "
                                "(the log's end is missing)")
        f.seek(start)
        return header, np.fromfile(f, dtype=dtype(), count=n)


def changes_path(frames_path: Path | str) -> Path:
    """The schedule-change file beside a direction's frame log."""
    p = Path(frames_path)
    return p.with_name(p.name.removesuffix(".frames") + CHANGES_SUFFIX)


def write_changes(frames_path: Path | str, origin: dict[str, Any], changes: list[dict]) -> Path:
    """Write a direction's schedule changes (see the module docstring); returns the path."""
    path = changes_path(frames_path)
    lines = [json.dumps(origin)] + [json.dumps(c) for c in changes]
    path.write_text("\n".join(lines) + "\n")
    return path


def read_changes(frames_path: Path | str) -> tuple[dict[str, Any], list[dict]] | None:
    """(origin record, change records) of a direction, None when it has no schedule file."""
    path = changes_path(frames_path)
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return (rows[0] if rows else {}), rows[1:]


def percentiles_us(values_ns) -> dict[str, float | None]:
    """p50/p99/max of nanosecond values, in microseconds (None when empty)."""
    import numpy as np
    if len(values_ns) == 0:
        return {"p50": None, "p99": None, "max": None}
    v = np.asarray(values_ns, dtype=np.float64) / 1e3
    return {"p50": round(float(np.percentile(v, 50)), 3), "p99": round(float(np.percentile(v, 99)), 3),
            "max": round(float(v.max()), 3)}


def summarize(records, late_ns: int) -> dict[str, Any]:
    """Counts per verdict, scheduling error percentiles and late departures of one log.

    sched_error_us: ``t_sent − t_sched`` of delivered frames (negative = sent early).
    late: delivered frames with a scheduling error above ``late_ns``.
    read_lag_us: ``t_read − t_arrival`` of all frames.
    """
    import numpy as np
    verdict = records["verdict"]
    counts = {name: int(np.count_nonzero(verdict == code)) for code, name in enumerate(VERDICTS)}
    sent = records[verdict == DELIVERED]
    err = sent["t_sent"] - sent["t_sched"]
    return {"frames_in": int(len(records)), **counts, "bytes_delivered": int(sent["length"].sum()),
            "sched_error_us": percentiles_us(err), "late": int(np.count_nonzero(err > late_ns)),
            "read_lag_us": percentiles_us(records["t_read"] - records["t_arrival"])}
