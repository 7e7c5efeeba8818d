"""One JSON-ready summary per flow of a capture (what ``testbed analyze`` prints).

Times in the summary are seconds from the flow's first packet (``t0_ns``, on
the clock named by ``clock``).  Per TCP flow:

``handshake``: event -> time (:mod:`analysis.handshake`); ``completion``: per
request first/last byte times (:func:`analysis.handshake.exchanges`) with the
application's events joined (:mod:`analysis.applog`; ``app``: event name ->
time of its first occurrence, periodic ``tcp_info`` samples left out) and
``request_flights``/``response_flights``: how many flights (rounds, see
:mod:`analysis.tcp`) of that direction overlap the request/response; and for the *data
direction* (the side that sent more payload; both are under ``directions``):
``in_flight``, ``retransmissions``, ``rtt_ms``, ``goodput_mbps``, ``acks``,
``flights`` (:mod:`analysis.tcp`, :mod:`analysis.tcpsender`), ``receiver_window``
(:mod:`analysis.rwnd`).

``vantage``: where the capture was taken, inferred from the handshake: near
the client when SYN->SYN/ACK took more than 4x SYN/ACK->ACK, near the server
when the reverse, else ``unknown``; ``sender_side`` says whether that is the
data sender (the assumption under which RTT samples, outstanding bytes and
retransmission kinds are the sender's own view).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis import applog, clock, flows as flowmod, handshake, linkjoin, native, pcap, tcp


SAMPLES = ("tcp_info",)   # periodic samples: joined to the flow, not listed per request
#: the range of a series' bin width and of the idle gap between flights, s: whole ns, at most
#: about 11.6 days (the nanosecond clocks' arithmetic stays exact)
MIN_BIN_S, MAX_WINDOW_S = 1e-9, 1e6


def check_windows(bin_s: float, gap_s: float | None) -> None:
    """A ValueError naming ``bin`` or ``gap`` when one is outside its range (``MIN_BIN_S`` to
    ``MAX_WINDOW_S``; the gap may be 0), NaN or infinite."""
    if not MIN_BIN_S <= bin_s <= MAX_WINDOW_S:
        raise ValueError(f"bin {bin_s:g} s: give a number of seconds from {MIN_BIN_S:g} (1 ns) to {MAX_WINDOW_S:g}")
    if gap_s is not None and not 0 <= gap_s <= MAX_WINDOW_S:
        raise ValueError(f"gap {gap_s:g} s: give a number of seconds from 0 to {MAX_WINDOW_S:g}")


def _rel(v, t0):
    return None if v is None else round((v - t0) / 1e9, 9)


def _vantage(ev: dict) -> str:
    if not all(k in ev for k in ("syn", "synack", "ack")):
        return "unknown"
    a, b = ev["synack"] - ev["syn"], ev["ack"] - ev["synack"]
    if a > 4 * b:
        return "client"
    if b > 4 * a:
        return "server"
    return "unknown"


def _count_damage(packets: int, captured: int | None, stopped: bool) -> list[dict]:
    """A ``count`` finding when the file holds another number of packets than its capture
    wrote (the sidecar's ``captured``): a file cut on a record boundary reads as sound.
    ``stopped``: the reader found where the file is damaged (the packets after it are lost)."""
    if captured is None or packets == captured:
        return []
    how = "records added after the capture" if packets > captured else \
        "the rest lost where reading stopped" if stopped else \
        "cut short on a record boundary, or records removed"
    return [{"kind": "count", "packets_read": packets, "message": (
        f"the file holds {packets} packets, its capture wrote {captured} (.meta.json): {how}")}]


def analyze_file(path: str | Path, *, events: list[dict] | None = None, bin_s: float = 0.1,
                 gap_s: float | None = None, keep: bool = False,
                 link_logs: list[tuple[dict, np.ndarray]] = (), engine: str | None = None,
                 samples: int = 1000) -> dict:
    """Summary of one capture; ``damage``: what was wrong with the file and where reading
    stopped (:mod:`analysis.pcap`), and a ``count`` finding when it holds another number of
    packets than its capture's sidecar says it wrote; empty for a sound one.  ``engine``: the
    implementation that runs (``native`` or ``python``, see :func:`analysis.native.engine`; named
    in the result as ``engine``);
    ``samples``: RTT samples listed per kind (see :mod:`analysis.tcp`).  ``keep=True``
    also returns the internal objects
    (packets, flows, directions) under ``"_objects"`` for plotting.  ``link_logs``:
    (header, records) of emulator frame logs (``testbed.emulator.linklog.read_log``);
    each flow then gets ``link``: per log, packets per verdict and the dropped ones (the first
    200; ``dropped_truncated`` says when there were more)."""
    check_windows(bin_s, gap_s)
    engine = native.engine(engine)
    pk = pcap.read(path, engine)
    pk.ts_ns, clk = clock.monotonic(pk.ts_ns, path, applog.clock_offset(events or []))
    fl = flowmod.split(pk)
    spans = [(f.key, int(pk.ts_ns[f.index[0]]), int(pk.ts_ns[f.index[-1]])) for f in fl]
    joined, unmatched = applog.assign(events or [], spans) if events else ({}, [])
    out = {"file": str(path), "packets": len(pk), "engine": engine, **clk,
           "damage": pk.damage + _count_damage(len(pk), clk.get("captured"),
                                               any("packets_read" in d for d in pk.damage)),
           "flows": [], "flows_not_analysed": []}
    joins = [(h.get("direction", f"log{k}"), linkjoin.join(pk, r, h.get("verdicts")))
             for k, (h, r) in enumerate(link_logs)]
    objects = []
    for i, f in enumerate(fl):
        t0 = spans[i][1]
        rec = {"flow": f.key.name, "proto": "tcp" if f.key.proto == pcap.TCP else "udp",
               "client": f"{f.key.client}:{f.key.client_port}",
               "server": f"{f.key.server}:{f.key.server_port}", "t0_ns": t0,
               "packets": int(len(f.index)),
               "duration_s": _rel(spans[i][2], t0)}
        evs = joined.get(i, [])
        obj = {"flow": f, "events": evs}
        if f.key.proto == pcap.TCP:
            try:
                _tcp(pk, f, rec, obj, evs, t0, int(bin_s * 1e9),
                     None if gap_s is None else int(gap_s * 1e9), engine, samples, keep)
            except (IndexError, ValueError) as exc:
                if not pk.damage:
                    raise
                # what a damaged capture holds of a flow can contradict itself (a flipped flag,
                # sequence number or time): the flow is named, not analysed
                out["flows_not_analysed"].append({"flow": f.key.name, "reason": (
                    f"the capture is damaged ({pk.damage[0]['kind']}): {type(exc).__name__}: {exc}")})
                continue
        else:
            rec["bytes"] = {"c2s": int(pk.payload_len[f.index][f.fwd].sum()),
                            "s2c": int(pk.payload_len[f.index][~f.fwd].sum())}
        if joins:
            rec["link"] = {name: _link(j, pk, f, t0) for name, j in joins}
        rec["app_events"] = [{**e, "t": _rel(e["t"], t0)} for e in evs]
        out["flows"].append(rec)
        objects.append(obj)
    out["app_events_unmatched"] = len(unmatched)
    if keep:
        out["_objects"] = {"packets": pk, "flows": objects}
    return out


def refuse_unreadable(res: dict) -> None:
    """A ValueError ``<file>: <why>`` when the summary ``res`` is of a file without a readable
    file header (``header`` damage, :mod:`analysis.pcap`: empty, cut inside it, or no pcap or
    pcapng file); else nothing.  For a capture given on its own, where one of a run's captures
    is a damaged capture among the others."""
    for d in res["damage"]:
        if d["kind"] in pcap.UNREAD:
            raise ValueError(f"{res['file']}: {d['message']}")


def _link(j, pk, f, t0, limit: int = 200) -> dict:
    idx = f.index
    v = j.verdict[idx]
    dropped = np.nonzero((v > 0))[0]
    return {
        "c2s": j.counts(np.isin(np.arange(len(pk)), idx[f.fwd])),
        "s2c": j.counts(np.isin(np.arange(len(pk)), idx[~f.fwd])),
        "dropped": [{"t": _rel(int(pk.ts_ns[idx[i]]), t0), "from": "client" if f.fwd[i] else "server",
                     "seq": int(pk.seq[idx[i]]), "payload": int(pk.payload_len[idx[i]]),
                     "verdict": j.verdicts[v[i]]} for i in dropped[:limit]],
        "dropped_truncated": len(dropped) > limit,
    }


def _tcp(pk, f, rec, obj, evs, t0, bin_ns, gap_ns, engine, samples, keep):
    ev = handshake.timeline(pk, f)
    irtt = ev.pop("initial_rtt", None)
    hrtt = ev.pop("handshake_rtt", None)
    rec["handshake"] = {k: _rel(v, t0) for k, v in ev.items()}
    rec["initial_rtt_ms"] = None if irtt is None else irtt / 1e6
    ex = handshake.exchanges(pk, f, engine)
    groups = applog.by_exchange(evs, ex) if evs else [[] for _ in ex]
    rec["completion"] = []
    for e, g in zip(ex, groups):
        app = {}
        for a in g:
            if a["event"] not in SAMPLES:
                app.setdefault(a["event"], _rel(a["t"], t0))
        rec["completion"].append(
            {**{k: (_rel(v, t0) if k.endswith(("_first", "_last", "_acked")) else v)
                for k, v in e.items()}, "app": app})
    if gap_ns is None and (hrtt or 0) > 0:
        gap_ns = hrtt // 2
    dirs, summaries = {}, {}
    sent = pk.payload_len[f.index] > 0
    for name, from_client in (("c2s", True), ("s2c", False)):
        if not (sent & (f.fwd if from_client else ~f.fwd)).any():
            continue            # no payload this way: nothing to report
        d = tcp.analyze_direction(pk, f, from_client, bin_ns=bin_ns, gap_ns=gap_ns, engine=engine)
        summaries[name] = d.summary(samples)
        dirs[name] = d if keep else d.release()
        del d                   # one direction's per-packet arrays in memory at a time
    obj["directions"] = dirs
    obj["handshake"] = ev
    obj["exchanges"] = ex
    for c, e in zip(rec["completion"], ex):
        for part, d in (("request", "c2s"), ("response", "s2c")):
            if d in dirs and f"{part}_first" in e:
                fl = dirs[d].flights
                c[f"{part}_flights"] = int(((fl["start"] <= e[f"{part}_last"])
                                            & (fl["end"] >= e[f"{part}_first"])).sum())
    rec["directions"] = summaries
    near = _vantage(ev)
    main = max(dirs, key=lambda k: dirs[k].payload_bytes) if dirs else None
    rec["vantage"] = {"capture_near": near,
                      "data_sender": dirs[main].sender if main else None,
                      "sender_side": (near == dirs[main].sender) if main and near != "unknown"
                      else None}
    rec["data_direction"] = main
    if main:
        s = rec["directions"][main]
        for k in ("in_flight", "retransmissions", "rtt_ms", "goodput_mbps", "acks", "flights",
                  "receiver_window", "bin_s"):
            rec[k] = s[k]
    obj["main"] = main


def series_table(d: "tcp.Direction") -> np.ndarray:
    """Columns t_ns, outstanding, pipe, sacked, wireshark of a direction's step series."""
    tr = d.tracker
    return np.column_stack([np.asarray(tr.series_t, np.int64), tr.series_outstanding,
                            tr.series_pipe, tr.series_sacked, tr.series_wireshark]).astype(np.int64)
