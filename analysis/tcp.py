"""Per-direction TCP analysis of one flow: feeds :class:`SenderTracker` and adds
rates, ACK ratio and flights.

Vantage point: every metric is computed *as seen at the capture point*.  With
a capture at the data sender (the default assumption, ``vantage="sender"``)
segment times are transmission times and ACK times are ACK arrival times, so
RTT samples, outstanding bytes and retransmission kinds are the sender's own
view.  At the receiver, the same numbers describe arrivals: RTT samples become
the receiver's ACK delay plus the stack's turnaround, retransmissions lost
upstream are invisible and losses show up only as holes.

Definitions (``bin_ns`` is stated in every result):

*throughput*: IP bytes (``ip_len``, headers included, retransmissions
included) of the data direction per bin / bin width.
*goodput*: payload bytes newly covered by the cumulative ACK per bin / bin
width; the overall ``goodput_mbps`` is all such bytes (SYN/FIN excluded) over
the time from the first data segment to the last ACK advance.
*data_per_ack*: data segments (payload > 0, retransmissions included) divided
by pure ACKs of the other direction (no payload, ACK flag, sent between the
first data segment and the last ACK advance).
*flights*: data segments grouped into flights separated by idle gaps longer
than ``gap_ns`` with no segment sent (default: half the handshake's initial
RTT when :mod:`analysis.report` knows it, else half the minimum Karn sample,
else 1 ms); a slow-start round is one flight when the sender is
window-limited and the path delay dominates the flight's duration.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .flows import Flow
from .pcap import ACK, FIN, RST, SYN, Packets
from .tcpsender import KINDS, SenderTracker

TWO32 = 1 << 32


def unwrap32(values: np.ndarray, ref: int) -> np.ndarray:
    """uint32 sequence numbers (in time order) -> int64 offsets from ``ref``, without wraps."""
    d = (values.astype(np.int64) - ref) & (TWO32 - 1)
    d = np.where(d >= TWO32 // 2, d - TWO32, d) if len(d) and d[0] >= TWO32 // 2 else d
    if len(d) > 1:
        step = np.diff(d)
        fix = np.cumsum(np.where(step < -TWO32 // 2, TWO32, 0) - np.where(step > TWO32 // 2, TWO32, 0))
        d = d + np.concatenate([[0], fix])
    return d


@dataclass
class Direction:
    """Analysis of the data sent by one side of a flow (``sender`` is "client"/"server")."""
    sender: str
    t0: int                      # ns, first packet of the flow
    bin_ns: int
    gap_ns: int
    tracker: SenderTracker
    payload_bytes: int
    data_segments: int
    pure_acks: int
    advancing_acks: int
    acked_bytes: int
    first_data_t: int | None
    last_advance_t: int | None
    throughput_bps: np.ndarray   # per bin
    goodput_bps: np.ndarray
    flights: list                # dicts: start, end (ns), segments, bytes (new), cum_bytes
    data_events: list            # (series index, packet index) recorded at each data segment
    trace: dict                  # per-packet arrays for plots: t, fwd, seq, end, ack, win, sack

    @property
    def goodput_mbps(self) -> float | None:
        if self.first_data_t is None or self.last_advance_t is None:
            return None
        dt = self.last_advance_t - self.first_data_t
        return self.acked_bytes * 8 / dt * 1e3 if dt > 0 else None

    def summary(self) -> dict:
        tr = self.tracker
        kinds = {k: sum(r.kind == k for r in tr.retransmissions) for k in KINDS}
        sent_idx = np.asarray([i for i, _ in self.data_events], dtype=np.int64)
        series = np.asarray(tr.series_outstanding, np.int64)
        at_data = series[sent_idx] if len(sent_idx) else series[:0]
        karn = np.array([s for _, s in tr.rtt_karn], float) / 1e6
        ts = np.array([s for _, s in tr.rtt_ts], float) / 1e6
        return {
            "sender": self.sender,
            "payload_bytes": self.payload_bytes,
            "in_flight": {
                "definition": "outstanding = highest seq sent - highest cumulative ACK, bytes; "
                              "median over data segments",
                "max": int(series.max()) if len(series) else 0,
                "median": float(np.median(at_data)) if len(at_data) else None,
                "pipe_max": int(max(tr.series_pipe)) if tr.series_pipe else 0,
                "path": None,
            },
            "retransmissions": {
                "total": len(tr.retransmissions), **kinds,
                "spurious_dsack": sum(r.spurious for r in tr.retransmissions),
                "acked_before": sum(r.acked_before for r in tr.retransmissions),
                "dupacks": tr.dupack_count,
            },
            "rtt_ms": {
                "karn": _stats(karn), "ts": _stats(ts),
            },
            "goodput_mbps": self.goodput_mbps,
            "throughput_mbps_mean": float(self.throughput_bps.mean() / 1e6)
            if len(self.throughput_bps) else None,
            "bin_s": self.bin_ns / 1e9,
            "acks": {
                "data_segments": self.data_segments, "pure_acks": self.pure_acks,
                "advancing_acks": self.advancing_acks,
                "data_per_ack": self.data_segments / self.pure_acks if self.pure_acks else None,
            },
            "flights": {
                "gap_ms": self.gap_ns / 1e6, "count": len(self.flights),
                "bytes": [f["bytes"] for f in self.flights[:50]],
            },
        }


def _stats(a: np.ndarray) -> dict:
    if len(a) == 0:
        return {"n": 0, "min": None, "median": None, "samples": []}
    return {"n": int(len(a)), "min": float(a.min()), "median": float(np.median(a)),
            "samples": [round(float(x), 4) for x in a[:1000]]}


def analyze_direction(pk: Packets, flow: Flow, from_client: bool, *, bin_ns: int = 100_000_000,
                      gap_ns: int | None = None) -> Direction:
    """Run the sender model over the data ``from_client`` (or from the server) and its ACKs."""
    idx = flow.index
    fwd = flow.fwd if from_client else ~flow.fwd
    t = pk.ts_ns[idx]
    flags = pk.flags[idx].astype(np.int64)
    plen = pk.payload_len[idx].astype(np.int64)
    seq_raw, ack_raw = pk.seq[idx], pk.ack[idx]
    syn = (flags & SYN) != 0
    fin = (flags & FIN) != 0
    sender_syn = np.nonzero(fwd & syn)[0]
    ref_i = sender_syn[0] if len(sender_syn) else (np.nonzero(fwd)[0][0] if fwd.any() else 0)
    ref = int(seq_raw[ref_i])
    seq = np.zeros(len(idx), np.int64)
    ack = np.zeros(len(idx), np.int64)
    seq[fwd] = unwrap32(seq_raw[fwd], ref)
    rev_ack = ~fwd & ((flags & ACK) != 0)
    ack[rev_ack] = unwrap32(ack_raw[rev_ack], ref)
    end = seq + plen + syn + fin
    # window scale applies when both SYNs carried the option (RFC 7323)
    ws = pk.wscale[idx]
    syn_ws_recv = ws[~fwd & syn]
    syn_ws_send = ws[fwd & syn]
    scale = int(syn_ws_recv[0]) if len(syn_ws_recv) and len(syn_ws_send) and syn_ws_recv[0] >= 0 \
        and syn_ws_send[0] >= 0 else 0
    win = pk.win[idx].astype(np.int64) << np.where(syn, 0, scale)
    nsack = pk.nsack[idx]
    sack = pk.sack[idx].astype(np.int64)
    has_ts = pk.has_ts[idx]
    tsval, tsecr = pk.tsval[idx], pk.tsecr[idx]
    mss_opt = pk.mss[idx][~fwd & syn]   # the receiver's MSS limits what the sender sends
    smss = int(plen[fwd].max()) if (fwd & (plen > 0)).any() else 1460
    if len(mss_opt) and mss_opt[0]:
        smss = min(smss, int(mss_opt[0]))

    tr = SenderTracker(smss=smss)
    data_events = []
    sack_marks = []
    T, F, S, E, A = t.tolist(), fwd.tolist(), seq.tolist(), end.tolist(), ack.tolist()
    FL, PL, W, NS = flags.tolist(), plen.tolist(), win.tolist(), nsack.tolist()
    HT, TV, TE = has_ts.tolist(), tsval.tolist(), tsecr.tolist()
    for i in range(len(idx)):
        if F[i]:
            before = len(tr.series_t)
            tr.segment(T[i], S[i], E[i], syn=bool(FL[i] & SYN), fin=bool(FL[i] & FIN),
                       tsval=TV[i] if HT[i] else None, packet=int(idx[i]))
            if PL[i] > 0 and len(tr.series_t) > before:
                data_events.append((len(tr.series_t) - 1, int(idx[i])))
        elif FL[i] & ACK and not FL[i] & RST:
            blocks = []
            if NS[i]:
                a32 = int(ack_raw[i])
                for b in range(NS[i]):
                    l, r = int(sack[i, b, 0]), int(sack[i, b, 1])
                    blocks.append((A[i] + _s32(l - a32), A[i] + _s32(r - a32)))
                sack_marks.extend((T[i], bl, br) for bl, br in blocks)
            una = tr.una
            tr.ack(T[i], A[i], win=W[i], sacks=blocks,
                   pure=PL[i] == 0 and not FL[i] & (SYN | FIN))
            if tr.una > una and HT[i]:
                tr.ts_echo(T[i], TE[i])

    data = fwd & (plen > 0)
    first_data_t = int(t[data][0]) if data.any() else None
    rev_pure = ~fwd & ((flags & ACK) != 0) & (plen == 0) & ((flags & (SYN | FIN | RST)) == 0)
    never = -(1 << 62)        # before the first ACK; far below any unwrapped sequence number
    una_series = np.maximum.accumulate(np.where(rev_ack, ack, never))
    advancing = rev_ack & (np.diff(una_series, prepend=never) > 0)
    last_adv = int(t[advancing][-1]) if advancing.any() else None
    window = (t >= (first_data_t or 0)) & (t <= (last_adv or 0))
    start = int(t[0])
    nb = max(int((int(t[-1]) - start) // bin_ns) + 1, 1)
    thr = np.bincount((t[fwd] - start) // bin_ns, weights=pk.ip_len[idx][fwd], minlength=nb)
    base = int(seq[ref_i]) + (1 if len(sender_syn) else 0)
    acked_now = np.clip(una_series, base, None) if advancing.any() else np.zeros(len(t), np.int64)
    fin_end = int(end[fwd & fin][0]) - 1 if (fwd & fin).any() else None
    if fin_end is not None:
        acked_now = np.minimum(acked_now, fin_end)
    newly = np.diff(acked_now, prepend=base) * advancing
    good = np.bincount((t - start) // bin_ns, weights=np.maximum(newly, 0), minlength=nb)
    gap = gap_ns if gap_ns is not None else (
        int(min(s for _, s in tr.rtt_karn) // 2) if tr.rtt_karn else 1_000_000)
    return Direction(
        sender="client" if from_client else "server", t0=start, bin_ns=bin_ns, gap_ns=gap,
        tracker=tr, payload_bytes=int(plen[fwd].sum()), data_segments=int(data.sum()),
        pure_acks=int((rev_pure & window).sum()), advancing_acks=int(advancing.sum()),
        acked_bytes=int(np.maximum(newly, 0).sum()), first_data_t=first_data_t,
        last_advance_t=last_adv, throughput_bps=thr * 8 / (bin_ns / 1e9),
        goodput_bps=good * 8 / (bin_ns / 1e9),
        flights=_flights(t[data], seq[data], end[data], gap), data_events=data_events,
        trace={"t": t, "fwd": fwd, "seq": seq, "end": end, "ack": ack, "has_ack": rev_ack,
               "win": win, "payload": plen,
               "sack": np.asarray(sack_marks, np.int64).reshape(-1, 3),
               "rtx_packets": np.asarray([r.packet for r in tr.retransmissions], np.int64),
               "index": idx})


def _s32(x: int) -> int:
    x &= TWO32 - 1
    return x - TWO32 if x >= TWO32 // 2 else x


def _flights(t: np.ndarray, seq: np.ndarray, end: np.ndarray, gap_ns: int) -> list:
    """Group data segments into flights separated by idle gaps > gap_ns (see module doc)."""
    if len(t) == 0:
        return []
    new_end = np.maximum.accumulate(end)
    new_bytes = np.diff(new_end, prepend=seq[0])
    cut = np.nonzero(np.diff(t) > gap_ns)[0] + 1
    bounds = np.concatenate([[0], cut, [len(t)]])
    out, cum = [], 0
    for a, b in zip(bounds[:-1], bounds[1:]):
        nbytes = int(new_bytes[a:b].sum())
        cum += nbytes
        out.append({"start": int(t[a]), "end": int(t[b - 1]), "segments": int(b - a),
                    "bytes": nbytes, "cum_bytes": cum})
    return out
