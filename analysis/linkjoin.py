"""Join captured packets with the userspace emulator's frame log (testbed.emulator.linklog).

Key: IPv4 (src, dst, IP id, protocol, ports, TCP seq) — the fields the frame log
records.  Packets with equal keys (rare: IP id wrap, or a frame seen twice) are
matched in order: the k-th capture occurrence of a key (in capture time order)
to the k-th log record of that key (in ``t_arrival`` order).  A packet with no
record was not seen by that emulator direction (other direction, other link,
or IPv6); a record with no packet was not captured (capture on another host).

Result per packet (arrays aligned with the capture): ``record`` (index into
the log, -1 none), ``verdict`` (the log's verdict code, -1 none),
``t_arrival``/``t_sent`` (ns, CLOCK_MONOTONIC; 0 when not sent).  With a
capture at the sender and the log of the sender->receiver direction, a
``dropped_*`` verdict says where (this emulator direction) and why (loss
model or queue) a segment never arrived, and ``t_sent - t_arrival`` is the
time it spent in the emulator.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.pcap import Packets

KEY = ("src", "dst", "ip_id", "proto", "sport", "dport", "seq")


@dataclass
class LinkJoin:
    record: np.ndarray
    verdict: np.ndarray
    t_arrival: np.ndarray
    t_sent: np.ndarray
    verdicts: tuple

    def counts(self, mask: np.ndarray | None = None) -> dict:
        """Packets per verdict name (and ``not_in_log``), optionally within ``mask``."""
        v = self.verdict if mask is None else self.verdict[mask]
        out = {name: int((v == code).sum()) for code, name in enumerate(self.verdicts)}
        out["not_in_log"] = int((v < 0).sum())
        return out


def packet_keys(pk: Packets) -> dict:
    """The frame log's key columns computed from a capture (IPv4 only; others get src=dst=0)."""
    v4 = pk.ipver == 4
    addr = lambda a: np.where(v4, a[:, 12:16].astype(np.uint32) @ np.array(  # noqa: E731
        [1 << 24, 1 << 16, 1 << 8, 1], np.uint32), 0).astype(np.uint32)
    tcp = pk.proto == 6
    return {"src": addr(pk.src), "dst": addr(pk.dst), "ip_id": pk.ip_id.astype(np.uint32),
            "proto": pk.proto.astype(np.uint32), "sport": pk.sport.astype(np.uint32),
            "dport": pk.dport.astype(np.uint32), "seq": np.where(tcp, pk.seq, 0).astype(np.uint32)}


def _ranked(cols: dict, t: np.ndarray):
    """Structured keys + occurrence rank of each row within its key (by time)."""
    n = len(t)
    key = np.zeros(n, [(k, "<u4") for k in KEY] + [("rank", "<u4")])
    for k in KEY:
        key[k] = cols[k]
    order = np.lexsort([t] + [key[k] for k in reversed(KEY)])
    s = key[order]
    new = np.ones(n, bool)
    if n:
        same = np.ones(n - 1, bool)
        for k in KEY:
            same &= s[k][1:] == s[k][:-1]
        new[1:] = ~same
    start = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    rank = np.empty(n, np.uint32)
    rank[order] = np.arange(n) - start
    key["rank"] = rank
    return key


def join(pk: Packets, records: np.ndarray, verdicts=None) -> LinkJoin:
    """Match capture packets to frame-log ``records`` (structured array from
    ``testbed.emulator.linklog.read_log``)."""
    if verdicts is None:
        from testbed.emulator.linklog import VERDICTS as verdicts
    a = _ranked(packet_keys(pk), pk.ts_ns)
    b = _ranked({k: records[k] for k in KEY}, records["t_arrival"])
    bv = b.view(np.dtype((np.void, b.dtype.itemsize)))
    av = a.view(np.dtype((np.void, a.dtype.itemsize)))
    rec = np.full(len(a), -1, np.int64)
    if len(b):
        order = np.argsort(bv, kind="stable")
        pos = np.minimum(np.searchsorted(bv[order], av), len(order) - 1)
        hit = bv[order][pos] == av
        rec[hit] = order[pos[hit]]
    hit = rec >= 0

    def take(col):
        out = np.full(len(a), -1 if col == "verdict" else 0, np.int64)
        out[hit] = records[col][rec[hit]].astype(np.int64)
        return out

    return LinkJoin(record=rec, verdict=take("verdict"), t_arrival=take("t_arrival"),
                    t_sent=take("t_sent"), verdicts=tuple(verdicts))
