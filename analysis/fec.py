"""The testbed's UDP transport (``testbed.transport``) seen in captures and app logs.

Packets are recognised by the transport's header in the first payload bytes (``analysis.pcap``
keeps 8, headers-only captures have them): magic 0xFC, type (source 1, repair 2, ACK 3; bit 0x80
= ACK_NOW), packet number, and for symbol packets the round.  Per connection (UDP 5-tuple) and
direction, at the capture's vantage point:

* ``source`` / ``repair``: symbol packets of each type; ``acks``: ACK packets;
* ``retransmitted``: source packets with round > 0 (a source symbol sent again: ARQ);
* ``rounds``: the highest round number seen (0: everything went in the first transmission);
* ``first_ns`` / ``last_ns``: first and last symbol packet (capture clock, CLOCK_REALTIME);
* ``round0_last_ns``: the last symbol packet of round 0 (the first transmission: the k source
  symbols and, with FEC, the r repair symbols sent with them — not those sent later);
* ``round0_repair``: repair packets of round 0 (the r the sender chose up front);
* ``round1_source``: source packets of round 1 — with ARQ the symbols whose first transmission
  was found lost (and any tail probe sent before an ACK came back).

Flights, as for TCP (``analysis.tcp.group_flights``): the symbol packets of the first request
connection, grouped by idle gaps longer than half the client's smallest RTT sample (its
``transport_stats``' ``min_rtt_ms``); ``flights`` counts them and ``flight_period_ms`` is the
median start-to-start interval of consecutive ones — one round trip under ACK clocking, the
window's sending time plus the round trip when one ACK comes per window.

From the server's event log: per request, ``decode_ms`` (CPU time of the RaptorQ decode call,
0 when every source symbol arrived), ``decoded`` and ``symbols`` received.  Completion per
request (request_issued → last_response_byte on the client's clock) comes from
``analysis.runmetrics`` as for TCP.

``timeline`` draws one capture's transport packets to a port: packet number over time (source
of the first transmission, repair, source sent again; ACKs coming back on a strip below) and,
sharing the time axis, the cumulative count of each kind.

    python -m analysis.fec RUN_DIR [--port 5003] [--plots DIR]    # metrics as JSON, timelines
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from analysis import applog, pcap

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
        rec["round0_repair"] = int((i & (kind == REPAIR) & (rnd == 0)).sum())
        rec["round1_source"] = int((i & (kind == SOURCE) & (rnd == 1)).sum())
        if sym.any():
            rec["first_ns"], rec["last_ns"] = int(t.ts_ns[sym].min()), int(t.ts_ns[sym].max())
            rec["round0_last_ns"] = int(t.ts_ns[sym & (rnd == 0)].max(initial=rec["first_ns"]))
        out.append(rec)
    return out


def symbol_times(pk: pcap.Packets, sport: int, dport: int) -> np.ndarray:
    """Capture times (ns) of the transport's symbol packets from ``sport`` to ``dport``."""
    sel = (pk.proto == pcap.UDP) & (pk.head_len >= 2) & (pk.sport == sport) & (pk.dport == dport)
    kind = pk.head[:, 1] & 0x0F
    sel &= (pk.head[:, 0] == MAGIC) & ((kind == SOURCE) | (kind == REPAIR))
    return np.sort(pk.ts_ns[sel].astype(np.int64))


def decode_times(server_log: Path) -> list[dict]:
    return [{"req": e["req"], "decoded": e.get("decoded"), "decode_ms": e.get("decode_ms"),
             "symbols": e.get("symbols")}
            for e in applog.load(server_log) if e["event"] == "request_complete" and "decoded" in e]


def run_metrics(run_dir: str | Path, port: int, client: str | None = None) -> dict[str, dict[str, Any]]:
    """``analysis.runmetrics.run_metrics`` (whose TCP figures are absent: no TCP connection)
    plus the transport's counts: ``retransmissions`` (source symbols sent again by the client),
    ``repair_packets`` (check), ``symbols_per_ack`` (check: the request's symbol packets over the
    server's ACK packets), ``rounds``, ``flights`` and ``flight_period_ms`` (the module
    docstring), ``decode_ms`` (per request) — from the client's
    captures (packets to the server's UDP ``port``), or its ``transport_stats`` events when
    there are none."""
    from analysis.runmetrics import run_metrics as base
    run_dir = Path(run_dir)
    out = base(run_dir, client)
    m, c = out["metrics"], out["checks"]
    client = client or applog.role_host(run_dir, "client")
    conns, request, acks = [], None, 0         # request: (first_ns, symbol times) of the first
    for f in sorted((run_dir / "pcap").glob(f"{client}-*.pcap")):
        pk = pcap.read(f)
        every = connections(pk)
        acks += sum(r["acks"] for r in every if r["sport"] == port)
        mine = [r for r in every if r["source"] + r["repair"]]
        conns += mine
        first = min((r for r in mine if r["dport"] == port), key=lambda r: r["first_ns"], default=None)
        if first and (request is None or first["first_ns"] < request[0]):
            request = (first["first_ns"], symbol_times(pk, first["sport"], port))
    up = [r for r in conns if r["dport"] == port]            # client → server: the request
    stats = [e for e in applog.load(run_dir / "client.jsonl") if e["event"] == "transport_stats"] \
        if (run_dir / "client.jsonl").is_file() else []
    rtts = [e["min_rtt_ms"] for e in stats if e.get("min_rtt_ms")]
    if request is not None and rtts:
        from analysis.tcp import group_flights
        from testbed.transport.wire import SYMBOL
        t = request[1]
        seq = np.arange(len(t), dtype=np.int64) * SYMBOL              # each symbol: new bytes
        fl = group_flights(t, seq, seq + SYMBOL, int(min(rtts) * 1e6 / 2))
        m["flights"] = len(fl)
        if len(fl) > 1:
            m["flight_period_ms"] = float(np.median(np.diff(fl["start"])) / 1e6)
    if up:
        m["retransmissions"] = sum(r["retransmitted"] for r in up)
        m["rounds"] = max(r["rounds"] for r in up)
        c["repair_packets"] = sum(r["repair"] for r in up)
        c["source_packets"] = sum(r["source"] for r in up)
        c["transport_connections"] = up
        if acks:
            c["symbols_per_ack"] = (c["repair_packets"] + c["source_packets"]) / acks
    elif stats:
        m["retransmissions"] = sum(e["retransmitted"] for e in stats)
        c["repair_packets"] = sum(e["repair_sent"] for e in stats)
        c["source_packets"] = sum(e["source_sent"] for e in stats)
    if (run_dir / "server.jsonl").is_file():
        dec = decode_times(run_dir / "server.jsonl")
        if dec:
            m["decode_ms"] = [d["decode_ms"] for d in dec]
            c["decoded_requests"] = sum(bool(d["decoded"]) for d in dec)
    return out


DEFAULT_PORT = 5003     # the udpreq server's port


def draw(ax, cum, pk: pcap.Packets, port: int) -> None:
    """The two panels of :func:`timeline` on given axes (``ax`` above, ``cum`` below), each
    kind of packet labelled for the figure's legend (``analysis.plots.figure_legend``: below the
    axes, where no packet is under it)."""
    sel = (pk.proto == pcap.UDP) & (pk.head_len >= 7) & (pk.head[:, 0] == MAGIC)
    t = pk.select(np.nonzero(sel)[0])
    kind = t.head[:, 1] & 0x0F
    pn = (t.head[:, 2:6].astype(np.int64) * np.array([1 << 24, 1 << 16, 1 << 8, 1])).sum(axis=1)
    to = (t.dport == port) & (kind != ACK)
    back = (t.sport == port) & (kind == ACK)
    t0 = int(t.ts_ns[to].min()) if to.any() else 0
    ms = (t.ts_ns.astype(np.int64) - t0) / 1e6
    kinds = {"source": to & (kind == SOURCE) & (t.head[:, 6] == 0), "repair": to & (kind == REPAIR),
             "source sent again": to & (kind == SOURCE) & (t.head[:, 6] > 0), "ACK received": back}
    colors = {"source": "black", "repair": "tab:blue", "source sent again": "tab:red",
              "ACK received": "tab:green"}
    floor = -0.05 * max(int(pn[to].max()) if to.any() else 1, 1)
    for name, mask in kinds.items():
        if not mask.any():
            continue
        y = pn[mask] if name != "ACK received" else np.full(int(mask.sum()), floor)
        ax.plot(ms[mask], y, "|" if name == "ACK received" else ".", color=colors[name], ms=4, label=name)
        cum.step(ms[mask], np.arange(1, int(mask.sum()) + 1), where="post", color=colors[name], label=name)
    ax.set_ylabel("packet number\n(ACKs on the strip below 0)")
    cum.set_xlabel("time since the first symbol packet (ms)")
    cum.set_ylabel("packets (cumulative)")


def timeline(pk: pcap.Packets, port: int, base: Path, title: str = "") -> list[str]:
    """The figure of the module docstring for packets to/from UDP ``port``; PNG, SVG and PDF at
    ``base``.  Time in ms from the first symbol packet to ``port``."""
    from analysis.plots import _plt, _save, figure_legend
    plt = _plt()
    fig, (ax, cum) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, height_ratios=(3, 2))
    draw(ax, cum, pk, port)
    figure_legend(fig, [cum], fontsize=8)
    ax.set_title(title or f"transport packets to port {port}")
    return _save(fig, base)


def main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m analysis.fec", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="the server's UDP port (udpreq: 5003)")
    p.add_argument("--plots", type=Path, help="write a timeline per client capture here")
    a = p.parse_args(argv)
    if not (a.run_dir / "client.jsonl").is_file():
        p.error(f"{a.run_dir} is not a udpreq run directory (no client.jsonl)")
    out = run_metrics(a.run_dir, a.port)
    print(json.dumps(out, indent=1, default=str))
    if a.plots:
        for f in sorted((a.run_dir / "pcap").glob("*.pcap")):
            timeline(pcap.read(f), a.port, a.plots / f"fec-timeline-{f.stem}", f"{f.name}: port {a.port}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
