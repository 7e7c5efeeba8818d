"""Two access paths (C11): completion of a split / MPTCP upload, the bytes each path carried in
the client's capture, and the delivery of duplicated audio chunks.

``multipath`` run metrics:

* ``completion_ms``: client ``transfer_done`` − ``transfer_start`` (before the first connect →
  the server's answer on the last connection: every byte delivered to the server application).
* ``path_done_ms``: per connection, its ``path_done`` − ``transfer_start``.
* ``path_bytes``: per client interface (capture ``pcap/<client host>-<iface>.pcap``), the TCP
  payload bytes the client sent to the server's port, retransmissions included.  For MPTCP these
  are the subflows' bytes (one interface per path on ``dualpath``).
* check ``paths_with_data``: interfaces that carried ≥ 1 % of those bytes; ``mptcp_fallback``
  (scheme mptcp): true when fewer than two did — MPTCP fell back to one path; null when a
  capture is damaged (a path it holds may have carried more); ``capture_damage``:
  capture file → what was wrong with it (``analysis.pcap``) for each damaged one, whose bytes
  are then what could be read.

``duplicate`` run metrics: ``delivered`` (distinct chunk numbers that reached the server
application), ``chunks`` (sent), ``delivered_fraction``, ``lost`` (chunk numbers never
delivered), ``duplicates`` (later copies discarded), ``first_copy_by_path`` (client address of
the copy that won → count), ``delay_ms_median`` of the winning copies.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np

from analysis import applog

PORT = 5005
SHARE = 0.01


def path_bytes(run_dir: Path, port: int = PORT) -> tuple[dict[str, int], dict[str, list[str]]]:
    """({interface: TCP payload bytes the client sent to ``port``}, {capture file: what was
    wrong with it} for each damaged one, ``analysis.pcap``) from the client's captures."""
    from analysis import pcap
    host = applog.role_host(run_dir, "client")
    out, damage = {}, {}
    for f in sorted((run_dir / "pcap").glob(f"{host}-*.pcap")):
        p = pcap.read(f)
        if p.damage:
            damage[f.name] = [d["message"] for d in p.damage]
        m = (p.proto == pcap.TCP) & (p.dport == port)
        out[f.name[len(host) + 1:].split(".pcap")[0]] = int(p.payload_len[m].astype(np.int64).sum())
    return out, damage


def run_metrics(run_dir: str | Path, port: int = PORT) -> dict:
    run_dir = Path(run_dir)
    log = run_dir / "client.jsonl"
    events = applog.load(log)
    start, done = (applog.first(events, name, log) for name in ("transfer_start", "transfer_done"))
    metrics = {"completion_ms": (done["t"] - start["t"]) / 1e6,
               "path_done_ms": [(e["t"] - start["t"]) / 1e6 for e in events if e["event"] == "path_done"]}
    checks: dict = {"scheme": start["scheme"]}
    if (run_dir / "pcap").is_dir():
        per, damage = path_bytes(run_dir, port)
        if damage:
            checks["capture_damage"] = damage
        total = sum(per.values())
        metrics["path_bytes"] = per
        checks["paths_with_data"] = sorted(i for i, b in per.items() if total and b >= SHARE * total)
        if start["scheme"] == "mptcp":       # unknown when a capture could not be read whole
            checks["mptcp_fallback"] = None if damage else len(checks["paths_with_data"]) < 2
    return {"metrics": metrics, "checks": checks}


def duplicate_metrics(run_dir: str | Path) -> dict:
    """The ``duplicate`` workload from the server's log: ``delivered_fraction`` (distinct chunk
    numbers that arrived ÷ chunks sent), ``failed_fraction`` (1 − that), ``attempt_failed`` (per
    chunk, 1 when no copy arrived), ``received_bytes`` (payload bytes of every copy that arrived,
    first copies and duplicates, on all paths), ``delay_ms_median`` (winning copies)."""
    run_dir = Path(run_dir)
    server = applog.load(run_dir / "server.jsonl")
    client = applog.load(run_dir / "client.jsonl")
    summary = applog.first(client, "summary", run_dir / "client.jsonl")
    arrivals = [e for e in server if e["event"] == "chunk_arrival"]
    seqs = {e["seq"] for e in arrivals}
    by_path: dict[str, int] = {}
    for e in arrivals:
        by_path[e["src"]] = by_path.get(e["src"], 0) + 1
    n = summary["chunks"]
    copies = [e for e in server if e["event"] in ("chunk_arrival", "duplicate")]
    return {"metrics": {"chunks": n, "delivered": len(seqs), "delivered_fraction": len(seqs) / n,
                        "failed_fraction": 1 - len(seqs) / n,
                        "attempt_failed": [0 if i in seqs else 1 for i in range(n)],
                        "received_bytes": sum(e["bytes"] for e in copies),
                        "lost": sorted(set(range(n)) - seqs),
                        "duplicates": sum(e["event"] == "duplicate" for e in server),
                        "first_copy_by_path": by_path,
                        "delay_ms_median": statistics.median(e["delay_ms"] for e in arrivals) if arrivals else None},
            "checks": {"send": summary["send"], "copies": summary["copies"],
                       "paths_seen": len({e["src"] for e in server if e["event"] in ("chunk_arrival", "duplicate")})}}


def subflow_in_flight(run_dir: str | Path, port: int = PORT) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per client interface (one MPTCP subflow or split connection per path on ``dualpath``):
    (t_ns on CLOCK_MONOTONIC, in-flight bytes) at every captured packet of the connections to
    ``port`` — in-flight = highest sequence end the client sent − highest ACK the server
    returned (tcptrace's outstanding data; sequence numbers relative to each subflow's SYN).
    ``"all"``: the sum of the subflows on the merged timeline — the MPTCP connection as one."""
    from analysis import clock, pcap
    run_dir = Path(run_dir)
    host = applog.role_host(run_dir, "client")
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for f in sorted((run_dir / "pcap").glob(f"{host}-*.pcap")):
        p = pcap.read(f)
        m = (p.proto == pcap.TCP) & ((p.dport == port) | (p.sport == port))
        p = p.select(m)
        if len(p) == 0:
            continue
        t, _ = clock.monotonic(p.ts_ns.astype(np.int64), f)
        up = p.dport == port
        total = np.zeros(len(p), np.int64)
        for sport in np.unique(np.where(up, p.sport, p.dport)):    # one subflow per client port
            mine = np.where(up, p.sport, p.dport) == sport
            syn = np.flatnonzero(mine & up & ((p.flags & pcap.SYN) != 0))
            if len(syn) == 0:
                continue
            isn = int(p.seq[syn[0]])
            sent = np.where(mine & up, (p.seq.astype(np.int64) - isn) % (1 << 32)
                            + p.payload_len.astype(np.int64), 0)
            acked = np.where(mine & ~up & ((p.flags & pcap.ACK) != 0),
                             (p.ack.astype(np.int64) - isn) % (1 << 32), 0)
            total += np.maximum(np.maximum.accumulate(sent) - np.maximum.accumulate(acked), 0)
        out[f.name[len(host) + 1:].split(".pcap")[0]] = (t, total)
    if out:
        grid = np.unique(np.concatenate([t for t, _ in out.values()]))
        out["all"] = (grid, sum(v[np.maximum(np.searchsorted(t, grid, side="right") - 1, 0)]
                                * (grid >= t[0]) for t, v in out.values()))
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m analysis.multipath",
                                 description="C11 run: completion, bytes per path, in-flight per subflow")
    ap.add_argument("run_dir")
    ap.add_argument("--plots", help="directory for the in-flight plot (per subflow and summed)")
    a = ap.parse_args(argv)
    try:
        print(json.dumps(run_metrics(a.run_dir), indent=1))
        if a.plots:
            from analysis.plots import steps
            series = subflow_in_flight(a.run_dir)
            if not series:
                raise ValueError(f"{a.run_dir}: no capture of the client's connections")
            t0 = min(int(t[0]) for t, _ in series.values())
            for f in steps(series, t0, Path(a.plots) / "in_flight", "bytes in flight",
                           "in flight per path and summed (the MPTCP connection as one)"):
                print(f)
    except (ValueError, OSError) as exc:
        print(f"analysis.multipath: error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
