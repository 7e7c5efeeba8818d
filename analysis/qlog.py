"""QUIC traces from qlog (aioquic's QuicLogger / QuicFileLogger JSON, qlog 0.3 "JSON" format).

:func:`load` returns one :class:`QuicTrace` per trace in the file, with numpy
arrays of packets sent / received (time, packet number, size, packet type),
packets declared lost, recovery metrics (bytes_in_flight, cwnd,
smoothed/latest RTT as last logged) and STREAM frames (time, sent or received,
stream id, offset, length, fin).  aioquic stamps events with ``time.time()`` in
ms: ``t_ns`` are CLOCK_REALTIME ns unless ``offset_ns`` (realtime - monotonic,
e.g. from an application log's ``clock`` event) is given to :func:`load`.

Definitions in :func:`summary` (vantage: the endpoint that wrote the trace):
``bytes_in_flight``/``cwnd``: the sender's recovery state after each
``recovery:metrics_updated`` (a step function); ``streams``: per stream id and
direction, first and last STREAM frame time, bytes (highest offset+length),
and ``complete`` = time at which all bytes up to the FIN were present
(received frames) or first sent (sent frames).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class QuicTrace:
    vantage: str
    odcid: str
    sent: np.ndarray          # structured: t_ns, pn, size, ptype
    received: np.ndarray
    lost: np.ndarray          # structured: t_ns, pn, ptype
    metrics: dict             # name -> (t_ns array, value array)
    frames: np.ndarray        # structured: t_ns, sent, stream, offset, length, fin
    extra: dict = field(default_factory=dict)


_PKT = np.dtype([("t_ns", "i8"), ("pn", "i8"), ("size", "i8"), ("ptype", "U12")])
_LOST = np.dtype([("t_ns", "i8"), ("pn", "i8"), ("ptype", "U12")])
_FRM = np.dtype([("t_ns", "i8"), ("sent", "?"), ("stream", "i8"), ("offset", "i8"),
                 ("length", "i8"), ("fin", "?")])


def is_qlog(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix in (".qlog", ".sqlog"):
        return True
    if p.suffix != ".json":
        return False
    with open(p, "rb") as fh:
        return b"qlog_version" in fh.read(4096)


def load(path: str | Path, offset_ns: int = 0) -> list[QuicTrace]:
    try:
        doc = json.loads(Path(path).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a qlog JSON file ({exc})") from None
    if not isinstance(doc, dict) or "traces" not in doc:
        raise ValueError(f"{path}: not a qlog JSON file (no 'traces'); JSON-SEQ qlog is not supported")
    return [_trace(tr, offset_ns) for tr in doc["traces"]]


def _trace(tr: dict, offset_ns: int) -> QuicTrace:
    sent, recv, lost, frames = [], [], [], []
    metrics: dict = {}
    for ev in tr.get("events", []):
        name = ev.get("name", "")
        t = int(round(float(ev["time"]) * 1e6)) - offset_ns
        data = ev.get("data", {})
        if name in ("transport:packet_sent", "transport:packet_received"):
            hdr = data.get("header", {})
            row = (t, hdr.get("packet_number", -1), data.get("raw", {}).get("length", 0),
                   hdr.get("packet_type", ""))
            is_sent = name.endswith("sent")
            (sent if is_sent else recv).append(row)
            for fr in data.get("frames", []):
                if fr.get("frame_type") == "stream":
                    frames.append((t, is_sent, fr["stream_id"], fr.get("offset", 0),
                                   fr.get("length", 0), bool(fr.get("fin", False))))
        elif name == "recovery:packet_lost":
            lost.append((t, data.get("packet_number", -1), data.get("type", "")))
        elif name == "recovery:metrics_updated":
            for k, v in data.items():
                if isinstance(v, (int, float)):
                    metrics.setdefault(k, ([], []))
                    metrics[k][0].append(t)
                    metrics[k][1].append(v)
    vp = tr.get("vantage_point", {})
    return QuicTrace(
        vantage=vp.get("type", "unknown"), odcid=tr.get("common_fields", {}).get("ODCID", ""),
        sent=np.array(sent, _PKT), received=np.array(recv, _PKT), lost=np.array(lost, _LOST),
        metrics={k: (np.asarray(a, np.int64), np.asarray(b, float)) for k, (a, b) in metrics.items()},
        frames=np.array(frames, _FRM))


def streams(trace: QuicTrace) -> list[dict]:
    out = []
    f = trace.frames
    for sent in (True, False):
        for sid in np.unique(f["stream"][f["sent"] == sent]):
            m = (f["stream"] == sid) & (f["sent"] == sent)
            g = np.sort(f[m], order="t_ns")
            size = int((g["offset"] + g["length"]).max())
            fin = bool(g["fin"].any())
            out.append({"stream": int(sid), "direction": "sent" if sent else "received",
                        "first": int(g["t_ns"][0]), "last": int(g["t_ns"][-1]), "bytes": size,
                        "fin": fin, "complete": _complete(g, size) if fin else None})
    return out


def delivered(trace: QuicTrace, stream: int, sent: bool = False):
    """(t_ns, in-order bytes available) step series of one stream (per-stream delivery)."""
    f = trace.frames
    g = np.sort(f[(f["stream"] == stream) & (f["sent"] == sent)], order="t_ns")
    t, b, have = [], [], []
    for row in g:
        have.append((int(row["offset"]), int(row["offset"] + row["length"])))
        t.append(int(row["t_ns"]))
        b.append(_prefix(have))
    return np.asarray(t, np.int64), np.asarray(b, np.int64)


def _prefix(ranges) -> int:
    end = 0
    for lo, hi in sorted(ranges):
        if lo > end:
            break
        end = max(end, hi)
    return end


def _complete(g, size) -> int | None:
    have = []
    for row in g:
        have.append((int(row["offset"]), int(row["offset"] + row["length"])))
        if _prefix(have) >= size:
            return int(row["t_ns"])
    return None


def summary(traces: list[QuicTrace]) -> dict:
    """JSON-ready summary of the first trace (times in s from its first event)."""
    if not traces:
        raise ValueError("qlog has no traces")
    tr = traces[0]
    times = [a["t_ns"].min() for a in (tr.sent, tr.received) if len(a)]
    t0 = int(min(times)) if times else 0
    rel = lambda v: None if v is None else round((v - t0) / 1e9, 9)  # noqa: E731
    bif = tr.metrics.get("bytes_in_flight", (np.zeros(0), np.zeros(0)))[1]
    cwnd = tr.metrics.get("cwnd", (np.zeros(0), np.zeros(0)))[1]
    rtt = tr.metrics.get("latest_rtt", (np.zeros(0), np.zeros(0)))[1]
    return {
        "vantage": tr.vantage, "odcid": tr.odcid, "t0_ns": t0, "traces": len(traces),
        "packets_sent": int(len(tr.sent)), "packets_received": int(len(tr.received)),
        "packets_lost": int(len(tr.lost)),
        "bytes_sent": int(tr.sent["size"].sum()) if len(tr.sent) else 0,
        "bytes_in_flight_max": float(bif.max()) if len(bif) else None,
        "cwnd_max": float(cwnd.max()) if len(cwnd) else None,
        "cwnd_last": float(cwnd[-1]) if len(cwnd) else None,
        "rtt_ms": {"n": int(len(rtt)), "min": float(rtt.min()) if len(rtt) else None,
                   "median": float(np.median(rtt)) if len(rtt) else None},
        "streams": [{**s, "first": rel(s["first"]), "last": rel(s["last"]),
                     "complete": rel(s["complete"])} for s in streams(tr)],
    }
