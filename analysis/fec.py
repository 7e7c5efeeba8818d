"""The testbed's UDP transport (``testbed.transport``) seen in captures and app logs.

Packets are recognised by the transport's header in the first payload bytes (``analysis.pcap``
keeps 8, headers-only captures have them): magic 0xFC, type (source 1, repair 2, ACK 3; bit 0x80
= ACK_NOW), packet number, and for symbol packets the round.  Per connection (UDP 5-tuple) and
direction, at the capture's vantage point:

* ``source`` / ``repair``: symbol packets of each type; ``acks``: ACK packets;
* ``retransmitted``: source packets with round > 0 (a source symbol sent again: ARQ);
* ``rounds``: the highest round number seen (0: everything went in the first transmission);
* ``first_ns`` / ``last_ns``: first and last symbol packet (capture clock, CLOCK_REALTIME).

From the server's event log: per request, ``decode_ms`` (CPU time of the RaptorQ decode call,
0 when every source symbol arrived), ``decoded`` and ``symbols`` received.  Completion per
request (request_issued → last_response_byte on the client's clock) comes from
``analysis.runmetrics`` as for TCP.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from . import applog, pcap

MAGIC, SOURCE, REPAIR, ACK = 0xFC, 1, 2, 3


def connections(pk: pcap.Packets) -> list[dict[str, Any]]:
    """Per (src, sport, dst, dport) of transport packets: the counts of the module docstring."""
    sel = (pk.proto == pcap.UDP) & (pk.head_len >= 2) & (pk.head[:, 0] == MAGIC)
    t = pk.select(np.nonzero(sel)[0])
    if not len(t):
        return []
    kind = t.head[:, 1] & 0x0F
    rnd = np.where(t.head_len >= 7, t.head[:, 6], 0)
    keys = np.stack([t.sport.astype(np.int64), t.dport.astype(np.int64)], axis=1)
    out = []
    for sport, dport in np.unique(keys, axis=0):
        i = (t.sport == sport) & (t.dport == dport)
        sym = i & ((kind == SOURCE) | (kind == REPAIR))
        first = np.nonzero(i)[0][0]
        rec = {"src": pcap.format_addr(t.src[first]), "sport": int(sport),
               "dst": pcap.format_addr(t.dst[first]), "dport": int(dport),
               "source": int((i & (kind == SOURCE)).sum()), "repair": int((i & (kind == REPAIR)).sum()),
               "acks": int((i & (kind == ACK)).sum()),
               "retransmitted": int((i & (kind == SOURCE) & (rnd > 0)).sum()),
               "rounds": int(rnd[sym].max()) if sym.any() else 0}
        if sym.any():
            rec["first_ns"], rec["last_ns"] = int(t.ts_ns[sym].min()), int(t.ts_ns[sym].max())
        out.append(rec)
    return out


def decode_times(server_log: Path) -> list[dict]:
    return [{"req": e["req"], "decoded": e.get("decoded"), "decode_ms": e.get("decode_ms"),
             "symbols": e.get("symbols")}
            for e in applog.load(server_log) if e["event"] == "request_complete" and "decoded" in e]


def run_metrics(run_dir: str | Path, port: int, client: str | None = None) -> dict[str, dict[str, Any]]:
    """``analysis.runmetrics.run_metrics`` plus the transport's counts: ``retransmissions``
    (source symbols sent again by the client), ``repair_packets`` (check), ``rounds``,
    ``decode_ms`` (per request) — from the client's captures (packets to the server's UDP
    ``port``), or its ``transport_stats`` events when there are none."""
    from .runmetrics import run_metrics as base
    run_dir = Path(run_dir)
    out = base(run_dir, client)
    m, c = out["metrics"], out["checks"]
    for k in ("retransmissions", "retransmitted_bytes", "max_in_flight_bytes"):
        m.pop(k, None)                              # TCP-only figures; none of them apply
    manifest = run_dir / "manifest.json"
    roles = json.loads(manifest.read_text()).get("roles", {}) if manifest.is_file() else {}
    client = client or roles.get("client") or "client"
    conns = []
    for f in sorted((run_dir / "pcap").glob(f"{client}-*.pcap")):
        conns += [r for r in connections(pcap.read(f)) if r["source"] + r["repair"]]
    up = [r for r in conns if r["dport"] == port]            # client → server: the request
    if up:
        m["retransmissions"] = sum(r["retransmitted"] for r in up)
        m["rounds"] = max(r["rounds"] for r in up)
        c["repair_packets"] = sum(r["repair"] for r in up)
        c["source_packets"] = sum(r["source"] for r in up)
        c["transport_connections"] = up
    else:
        stats = [e for e in applog.load(run_dir / "client.jsonl") if e["event"] == "transport_stats"] \
            if (run_dir / "client.jsonl").is_file() else []
        if stats:
            m["retransmissions"] = sum(e["retransmitted"] for e in stats)
            c["repair_packets"] = sum(e["repair_sent"] for e in stats)
            c["source_packets"] = sum(e["source_sent"] for e in stats)
    if (run_dir / "server.jsonl").is_file():
        dec = decode_times(run_dir / "server.jsonl")
        if dec:
            m["decode_ms"] = [d["decode_ms"] for d in dec]
            c["decoded_requests"] = sum(bool(d["decoded"]) for d in dec)
    return out
