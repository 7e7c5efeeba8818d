"""Head-of-line waiting of the ``streams`` workload (C8), from the receiver's records.

Per frame (audio chunk or image frame) of the client's ``stream_chunk`` events:

* ``delivered``: the event's time — the frame was handed to the application.
* ``complete``: the first time every byte of the frame had arrived at the receiver, in any
  order.  TCP: from the client's capture (``pcap/<client host>-*.pcap``, the server→client
  segments of the logged connection; byte offset = sequence number − ISN − 1 of the server's
  SYN-ACK; capture time on CLOCK_MONOTONIC via ``analysis.clock``).  QUIC: from the client's
  qlog (received STREAM frames of the frame's stream: offset, length; the qlog's
  ``time.time()`` stamps moved to CLOCK_MONOTONIC with the client log's ``clock`` offset): when
  aioquic processed the packet in the client process, not its wire arrival (the capture is
  encrypted), so QUIC's complete→delivered excludes the receiving process's scheduling delay
  that TCP's includes — compare ``order_wait`` for TCP.
* ``stream_ready``: the latest ``complete`` among this frame and the earlier frames of the same
  kind — when per-kind (per-stream) in-order delivery could have handed it over.
* ``in_order``: the first time every byte from the start of the frame's byte stream up to its
  end had arrived — when the transport could hand it over in order (TCP: the connection; QUIC:
  the frame's own stream); ``order_wait`` = in_order − stream_ready: the wait the transport's
  ordering imposes for other streams' bytes, from the receive-side record alone (no process
  scheduling in it; 0 for QUIC by construction, so QUIC's figure is ``cross_wait``).
* ``hol_wait`` = delivered − complete; ``cross_wait`` = delivered − stream_ready: the wait
  caused by *other* streams' missing bytes (TCP's connection-wide order; ~0 for QUIC).
* audio chunk i is ``on_time`` when delivered ≤ session start + deadline + i·tau (the server's
  ``streams_session`` event; both logs on one clock).

``first_byte_ms``: the client's ``connect_start`` → the first frame delivered (with QUIC
``--resume``: 0-RTT request; ``tls_resumed`` / ``early_data_accepted`` in the checks).

Checks: ``streams_transport`` (the server's session), ``audio_before_image_end``: the first
audio frame was sent (server ``frame_sent``) before the last image frame — false under FIFO when
the image was queued first, true under priority when audio became ready during the image.

``image_gaps``: intervals [open, close) during which the image's bytes had a hole: some image
byte had arrived beyond the in-order prefix of the image's bytes; ``image_repair_ms``: the last
close, from the session start (when the last hole was repaired); ``image_longest_gap_close_ms``:
the close of the longest of them (a hole still open at the end counts as closing never: None).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis import applog


def covered_at(t: np.ndarray, start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> int | None:
    """The first time at which the arrivals (time, [start, end)) cover [lo, hi); None if never."""
    m = (end > lo) & (start < hi)
    times, reach = _prefix(t[m], np.maximum(start[m], lo) - lo, np.minimum(end[m], hi) - lo)
    i = int(np.searchsorted(reach, hi - lo, side="left"))
    return int(times[i]) if i < len(times) else None


def _prefix(t: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(arrival times in time order, the in-order prefix [0, reach) covered after each): reach is
    nondecreasing.  One pass with a heap of the pieces beyond the prefix."""
    import heapq
    idx = np.argsort(t, kind="stable")
    heap: list[tuple[int, int]] = []
    reach, out = 0, np.empty(len(idx), np.int64)
    for n, i in enumerate(idx):
        if end[i] > reach:
            heapq.heappush(heap, (int(start[i]), int(end[i])))
        while heap and heap[0][0] <= reach:
            reach = max(reach, heapq.heappop(heap)[1])
        out[n] = reach
    return np.asarray(t)[idx].astype(np.int64), out


def gaps(t: np.ndarray, start: np.ndarray, end: np.ndarray, ranges: list[tuple[int, int]] | None = None
         ) -> list[tuple[int, int | None]]:
    """[open, close) intervals during which bytes had arrived beyond the in-order prefix.
    ``ranges``: count only bytes inside these byte ranges (the image's frames on a TCP
    connection); None: all."""
    if ranges is not None:
        keep = sorted(ranges)
        lo = np.array([a for a, _ in keep], np.int64)
        segs = []
        for ti, s, e in zip(t, start, end):
            first = max(0, int(np.searchsorted(lo, s, side="right")) - 1)
            for a, b in keep[first:]:
                if a >= e:
                    break
                if s < b:
                    segs.append((int(ti), max(int(s), a), min(int(e), b)))
        order = _remap(keep)
        segs = [(ti, order(s), order(e - 1) + 1) for ti, s, e in segs]
    else:
        segs = [(int(ti), int(s), int(e)) for ti, s, e in zip(t, start, end)]
    if not segs:
        return []
    arr = np.array(segs, np.int64)
    times, reach = _prefix(arr[:, 0], arr[:, 1], arr[:, 2])
    top = np.maximum.accumulate(arr[np.argsort(arr[:, 0], kind="stable"), 2])
    out: list[tuple[int, int | None]] = []
    opened = None
    for ti, prefix, hi in zip(times, reach, top):
        if prefix < hi and opened is None:
            opened = int(ti)
        elif prefix >= hi and opened is not None:
            out.append((opened, int(ti)))
            opened = None
    if opened is not None:
        out.append((opened, None))
    return out


def _remap(ranges: list[tuple[int, int]]):
    """Offsets inside ``ranges`` → offsets in their concatenation."""
    starts = np.array([a for a, _ in ranges])
    before = np.concatenate([[0], np.cumsum([b - a for a, b in ranges])[:-1]])
    return lambda x: int(before[np.searchsorted(starts, x, side="right") - 1] + x
                         - starts[np.searchsorted(starts, x, side="right") - 1])


def tcp_arrivals(pcap: Path, conn: dict, offset_ns: int | None):
    """(t, start, end) of the server→client payload of the logged connection in ``pcap``."""
    from analysis import clock, pcap as pcapmod
    p = pcapmod.read(pcap)
    ip = lambda a: np.array([pcapmod.format_addr(x) for x in a])        # noqa: E731
    m = (p.proto == pcapmod.TCP) & (p.sport == conn["dport"]) & (p.dport == conn["sport"])
    p = p.select(m)
    if len(p) == 0:
        return None
    src = ip(p.src)
    p = p.select(np.char.endswith(src.astype(str), conn["dst"]))
    synack = np.flatnonzero((p.flags & pcapmod.SYN) != 0)
    if len(synack) == 0:
        raise ValueError(f"{pcap}: no SYN-ACK of the server → client connection")
    isn = int(p.seq[synack[0]])
    data = p.payload_len > 0
    start = ((p.seq[data].astype(np.int64) - isn - 1) % (1 << 32))
    t, _ = clock.monotonic(p.ts_ns[data].astype(np.int64), pcap, offset_ns)
    return t, start, start + p.payload_len[data].astype(np.int64)


def quic_arrivals(qlog_dir: Path, offset_ns: int | None):
    """{stream id: (t, start, end)} of the STREAM frames the client's qlog received."""
    from analysis import qlog
    files = sorted(qlog_dir.glob("*.qlog"))
    if not files:
        return None
    out: dict = {}
    for trace in qlog.load(files[0], offset_ns or 0):
        f = trace.frames[~trace.frames["sent"]]
        for sid in np.unique(f["stream"]):
            g = f[f["stream"] == sid]
            out[int(sid)] = (g["t_ns"], g["offset"], g["offset"] + g["length"])
    return out


def frames(run_dir: Path, port: int) -> tuple[list[dict], dict]:
    """Per-frame records (see the module docstring) and the server's session event."""
    run_dir = Path(run_dir)
    client = applog.load(run_dir / "client.jsonl")
    server = applog.load(run_dir / "server.jsonl")
    session = applog.first(server, "streams_session", run_dir / "server.jsonl")
    offset = applog.clock_offset(client)
    chunks = [e for e in client if e["event"] == "stream_chunk"]
    conn = next((e for e in client if e["event"] == "conn"), None)
    arrivals: dict = {}
    if session["transport"] == "tcp":
        role = applog.role_host(run_dir, "client")
        for pcap in sorted((run_dir / "pcap").glob(f"{role}-*.pcap")) if conn else ():
            got = tcp_arrivals(pcap, conn, offset)
            if got is not None:
                arrivals = {0: got}
                break
    else:
        arrivals = quic_arrivals(run_dir / "client.qlog", offset) or {}
    out = []
    ready: dict[str, int] = {}
    for e in sorted(chunks, key=lambda e: (e["kind"], e["seq"])):
        arr = arrivals.get(e["stream"])
        complete = covered_at(*arr, e["start"], e["end"]) if arr is not None else None
        rec = {"kind": e["kind"], "seq": e["seq"], "stream": e["stream"], "start": e["start"],
               "end": e["end"], "delivered": e["t"], "complete": complete}
        if complete is not None:
            ready[e["kind"]] = max(ready.get(e["kind"], complete), complete)
            rec["stream_ready"] = ready[e["kind"]]
            rec["in_order"] = covered_at(*arr, 0, e["end"])
            rec["hol_wait_ms"] = (e["t"] - complete) / 1e6
            rec["cross_wait_ms"] = (e["t"] - ready[e["kind"]]) / 1e6
            rec["order_wait_ms"] = (rec["in_order"] - ready[e["kind"]]) / 1e6
        if e["kind"] == "audio":
            rec["due"] = session["t"] + session["deadline_ns"] + e["seq"] * session["tau_ns"]
            rec["on_time"] = e["t"] <= rec["due"]
        out.append(rec)
    session["image_gaps"] = _image_gaps(out, arrivals, session["transport"])
    return out, session


def longest_gap(intervals: list[tuple[int, int | None]]) -> tuple[int, int | None] | None:
    """The longest of ``gaps``' intervals (one still open, close None, is longer than any
    closed one); None without any."""
    return max(intervals, key=lambda g: (1 << 62 if g[1] is None else g[1]) - g[0], default=None)


def _image_gaps(recs, arrivals, transport) -> list:
    image = [r for r in recs if r["kind"] == "image"]
    if not image or not arrivals:
        return []
    sid = image[0]["stream"]
    if sid not in arrivals:
        return []
    ranges = [(r["start"], r["end"]) for r in image] if transport == "tcp" else None
    return gaps(*arrivals[sid], ranges)


def run_metrics(run_dir: Path, port: int) -> dict:
    recs, session = frames(run_dir, port)
    t0 = session["t"]
    audio = [r for r in recs if r["kind"] == "audio"]
    image = [r for r in recs if r["kind"] == "image"]
    ms = lambda t: None if t is None else round((t - t0) / 1e6, 3)      # noqa: E731
    known = [r for r in audio if "cross_wait_ms" in r]
    gaps_ = session["image_gaps"]
    during = [r for r in known if any(a <= r["stream_ready"] < (b if b is not None else 1 << 62)
                                      for a, b in gaps_)]
    longest = longest_gap(gaps_)
    metrics = {
        "audio_on_time": sum(r["on_time"] for r in audio),
        "audio_chunks": len(audio),
        "audio_done_ms": ms(max((r["delivered"] for r in audio), default=None)),
        "image_done_ms": ms(max((r["delivered"] for r in image), default=None)),
        "audio_delivered_ms": [ms(r["delivered"]) for r in audio],
        "audio_complete_ms": [ms(r["complete"]) for r in audio],
        "audio_cross_wait_ms": [round(r["cross_wait_ms"], 3) for r in known],
        "audio_cross_wait_max_ms": max((r["cross_wait_ms"] for r in known), default=None),
        "audio_in_order_ms": [ms(r["in_order"]) for r in known],
        "audio_order_wait_ms": [round(r["order_wait_ms"], 3) for r in known],
        "audio_order_wait_max_ms": max((r["order_wait_ms"] for r in known), default=None),
        "audio_ready_in_image_gap": len(during),
        "audio_ready_in_image_gap_delivered_before_repair": sum(
            1 for r in during for a, b in gaps_ if a <= r["stream_ready"] and (b is None or r["delivered"] < b)
            and r["stream_ready"] < (b if b is not None else 1 << 62)),
        "image_gaps": len(gaps_),
        "image_repair_ms": ms(max((b for _, b in gaps_ if b is not None), default=None)),
        "image_gap_ms": [[ms(a), ms(b)] for a, b in gaps_],
        "image_longest_gap_close_ms": None if longest is None else ms(longest[1]),
    }
    client = applog.load(Path(run_dir) / "client.jsonl")
    start = next((e["t"] for e in client if e["event"] == "connect_start"), None)
    first = min((r["delivered"] for r in recs), default=None)
    metrics["first_byte_ms"] = None if start is None or first is None else (first - start) / 1e6
    tls = next((e for e in client if e["event"] == "tls_done"), None)
    sent = [e for e in applog.load(Path(run_dir) / "server.jsonl") if e["event"] == "frame_sent"]
    first_audio = min((e["t"] for e in sent if e["kind"] == "audio"), default=None)
    last_image = max((e["t"] for e in sent if e["kind"] == "image"), default=None)
    checks = {"streams_transport": session["transport"], "schedule": session["schedule"],
              "audio_before_image_end": None if first_audio is None or last_image is None
              else first_audio < last_image,
              "complete_from": ("capture" if session["transport"] == "tcp" else "qlog")
              if len(known) == len(audio) and audio else "missing"}
    if tls is not None:
        checks["tls_resumed"] = 1.0 if tls["resumed"] else 0.0
        checks["early_data_accepted"] = tls["early_data_accepted"]
    return {"metrics": metrics, "checks": checks}


def delivery_series(run_dir: Path, port: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"<kind> delivered" / "<kind> complete": (ns since the session start, cumulative frame
    bytes)} of one run: when the frames reached the application, and when all their bytes had
    reached the receiver (TCP capture / QUIC qlog)."""
    recs, session = frames(run_dir, port)
    out = {}
    for kind in ("audio", "image"):
        mine = [r for r in recs if r["kind"] == kind]
        for what in ("complete", "delivered"):      # delivered drawn on top
            pts = sorted((r[what], r["end"] - r["start"]) for r in mine if r[what] is not None)
            if pts:
                t = np.array([p[0] for p in pts], np.int64) - session["t"]
                out[f"{kind} {what}"] = (t, np.cumsum([p[1] for p in pts]))
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="python -m analysis.streams",
                                 description="C8 runs: head-of-line waits; delivery per stream of "
                                             "several runs (TCP and QUIC) on one time axis")
    ap.add_argument("run_dirs", nargs="+")
    ap.add_argument("--plots", help="directory for audio_delivery and image_delivery plots")
    a = ap.parse_args(argv)
    try:
        series: dict = {}
        for d in a.run_dirs:
            m = run_metrics(Path(d), 0)
            print(json.dumps({"run": d, **m}, indent=1))
            label = f"{m['checks']['streams_transport']}/{m['checks']['schedule']} ({Path(d).name})"
            for name, s in delivery_series(Path(d)).items():
                series.setdefault(name.split()[0], {})[f"{label}: {name.split()[1]}"] = s
        if a.plots:
            from analysis.plots import delivery
            for kind, s in series.items():
                for f in delivery(s, 0, Path(a.plots) / f"{kind}_delivery",
                                  f"{kind}: bytes complete at the receiver vs delivered to the "
                                  "application (time from session start)"):
                    print(f)
    except (ValueError, OSError, KeyError) as exc:
        print(f"analysis.streams: error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
