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
than ``gap_ns`` with no segment sent (default: half the handshake's round trip,
``handshake_rtt`` of :mod:`analysis.handshake`, without a lost SYN's timeout, when
:mod:`analysis.report` knows it, else half the minimum Karn sample, else 1 ms);
a slow-start round is one flight when the sender is window-limited and the path
delay dominates the flight's duration.
*retransmissions.bytes*: sequence space sent again: per retransmission (see
:mod:`analysis.tcpsender`) its part below SND.MAX at the time (a SYN or FIN counts one).
*rtt_ms*: per kind (``karn``, ``ts``) n, min, mean, median, max of all samples in ms, and
the first ``samples`` of them; ``truncated`` is true when that list is shorter than n.
``engine``: which implementation of the sender model ran (:mod:`analysis.senderrun`).
*receiver_window*: the receiver's window scale and its zero-window, zero-window-probe,
window-full and window-update packets as Wireshark flags them (:mod:`analysis.rwnd`): per kind
the count and the times of the first ten (s from the flow's first packet).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.flows import Flow
from analysis.pcap import ACK, FIN, RST, SYN, TWO32, Packets, unwrap32
from analysis import rwnd, senderrun
from analysis.tcpsender import KINDS


#: the throughput series' longest span in bins; a packet beyond it (a capture timestamp
#: damaged, years off) is left out of the series, not allocated for
MAX_BINS = 1_000_000


def _binned(bins: np.ndarray, weights: np.ndarray, nb: int) -> np.ndarray:
    """Sum of ``weights`` per bin over ``nb`` bins; bins beyond them are left out."""
    keep = bins < nb
    return np.bincount(bins[keep], weights=weights[keep], minlength=nb)

@dataclass
class Direction:
    """Analysis of the data sent by one side of a flow (``sender`` is "client"/"server")."""
    sender: str
    t0: int                      # ns, first packet of the flow
    bin_ns: int
    gap_ns: int
    tracker: senderrun.SenderResult
    payload_bytes: int
    data_segments: int
    pure_acks: int
    advancing_acks: int
    acked_bytes: int
    first_data_t: int | None
    last_advance_t: int | None
    throughput_bps: np.ndarray   # per bin
    goodput_bps: np.ndarray
    flights: np.ndarray          # FLIGHT records: start, end (ns), segments, bytes (new), cum_bytes
    delivery_rate_bps: float | None   # max_delivery_rate before the first retransmission, bit/s
    min_rtt_ns: int | None            # the smallest RTT sample (Karn)
    data_events: np.ndarray      # (n, 2): series index, packet index at each data segment
    window_events: rwnd.WindowEvents   # zero window, window full, ... (flow positions)
    trace: dict                  # per-packet arrays for plots: t, fwd, seq, end, ack, win, sack

    @property
    def bdp_bytes(self) -> float | None:
        """The path's bandwidth-delay product as this sender sees it: ``delivery_rate_bps`` × the
        smallest RTT sample (Karn), in bytes — the data in flight that keeps the bottleneck busy
        without a queue (BBR's BtlBw × RTprop); None without both."""
        if self.delivery_rate_bps is None or self.min_rtt_ns is None:
            return None
        return self.delivery_rate_bps / 8 * self.min_rtt_ns / 1e9

    @property
    def goodput_mbps(self) -> float | None:
        if self.first_data_t is None or self.last_advance_t is None:
            return None
        dt = self.last_advance_t - self.first_data_t
        return self.acked_bytes * 8 / dt * 1e3 if dt > 0 else None

    def release(self) -> "Direction":
        """Drop the per-packet arrays (``tracker``, ``trace``: what plots need) once
        summarised; returns self."""
        self.tracker = self.trace = None
        return self

    def summary(self, samples: int = 1000) -> dict:
        """JSON-ready metrics; at most ``samples`` RTT samples are listed per kind (``truncated``
        says when the list is shorter than ``n``)."""
        tr = self.tracker
        rtx = tr.rtx
        kinds = dict(zip(KINDS, np.bincount(rtx[:, 3], minlength=len(KINDS)).tolist()))
        series = tr.series_outstanding
        at_data = series[tr.data_events[:, 0]]
        return {
            "sender": self.sender,
            "engine": tr.engine,
            "payload_bytes": self.payload_bytes,
            "in_flight": {
                "definition": "outstanding = highest seq sent - highest cumulative ACK, bytes; "
                              "median over data segments",
                "max": int(series.max()) if len(series) else 0,
                "median": float(np.median(at_data)) if len(at_data) else None,
                "pipe_max": int(tr.series_pipe.max()) if len(tr.series_pipe) else 0,
                "path": None,
            },
            "retransmissions": {
                "total": len(rtx), **kinds,
                "bytes": int((rtx[:, 2] - rtx[:, 1]).sum()),
                "spurious_dsack": int(rtx[:, 6].sum()),
                "acked_before": int(rtx[:, 7].sum()),
                "dupacks": tr.dupack_count,
            },
            "rtt_ms": {
                "karn": _stats(tr.rtt_karn[:, 1] / 1e6, samples),
                "ts": _stats(tr.rtt_ts[:, 1] / 1e6, samples),
            },
            "goodput_mbps": self.goodput_mbps,
            "delivery_rate_mbps": None if self.delivery_rate_bps is None else self.delivery_rate_bps / 1e6,
            "bdp_bytes": self.bdp_bytes,
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
                "bytes": self.flights["bytes"][:50].tolist(),
                "truncated": len(self.flights) > 50,
            },
            "receiver_window": self.window_events.summary(self.trace["t"], self.t0),
        }


def _stats(a: np.ndarray, samples: int = 1000) -> dict:
    """n, min, mean, median, max (ms) and the first ``samples`` samples."""
    if len(a) == 0:
        return {"n": 0, "min": None, "mean": None, "median": None, "max": None, "samples": [],
                "truncated": False}
    return {"n": int(len(a)), "min": float(a.min()), "mean": float(a.mean()),
            "median": float(np.median(a)), "max": float(a.max()),
            "samples": [round(float(x), 4) for x in a[:samples]], "truncated": len(a) > samples}


def analyze_direction(pk: Packets, flow: Flow, from_client: bool, *, bin_ns: int = 100_000_000,
                      gap_ns: int | None = None, engine: str | None = None) -> Direction:
    """Run the sender model over the data ``from_client`` (or from the server) and its ACKs
    (``engine``: see :func:`analysis.native.engine`)."""
    idx, take = flow.index, flow.take
    fwd = flow.fwd if from_client else ~flow.fwd
    t = take(pk.ts_ns)
    flags = take(pk.flags)
    plen = take(pk.payload_len)
    seq_raw, ack_raw = take(pk.seq), take(pk.ack)
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
    ws = take(pk.wscale)
    syn_ws_recv = ws[~fwd & syn]
    syn_ws_send = ws[fwd & syn]
    scale = int(syn_ws_recv[0]) if len(syn_ws_recv) and len(syn_ws_send) and syn_ws_recv[0] >= 0 \
        and syn_ws_send[0] >= 0 else 0
    win = take(pk.win).astype(np.int64) << np.where(syn, 0, scale)
    mss_opt = take(pk.mss)[~fwd & syn]   # the receiver's MSS limits what the sender sends
    smss = int(plen[fwd].max()) if (fwd & (plen > 0)).any() else 1460
    if len(mss_opt) and mss_opt[0]:
        smss = min(smss, int(mss_opt[0]))

    rows = _rows(pk, idx, take, fwd, t, flags, plen, seq, ack, ack_raw, rev_ack, end, win)
    tr = senderrun.run(rows, smss, engine)
    data_events = tr.data_events
    sack_marks = np.column_stack([np.repeat(rows.t, np.where(rows.kind == senderrun.ACKROW,
                                                             rows.nsack, 0)), rows.sack])
    del rows                  # memory: a 1 GB capture has ~5 million packets

    data = fwd & (plen > 0)
    first_data_t = int(t[data][0]) if data.any() else None
    rev_pure = ~fwd & ((flags & ACK) != 0) & (plen == 0) & ((flags & (SYN | FIN | RST)) == 0)
    never = -(1 << 62)        # before the first ACK; far below any unwrapped sequence number
    # (in place below: a 1 GB capture has ~5 million packets)
    una_series = np.where(rev_ack, ack, never)
    np.maximum.accumulate(una_series, out=una_series)
    advancing = rev_ack.copy()
    advancing[1:] &= una_series[1:] > una_series[:-1]
    advancing[:1] &= una_series[:1] > never
    last_adv = int(t[advancing][-1]) if advancing.any() else None
    window = (t >= (first_data_t or 0)) & (t <= (last_adv or 0))
    start = int(t.min())      # the first packet, unless capture timestamps go backwards
    # a damaged timestamp (the capture's damage report says where) caps the series at MAX_BINS
    nb = min(max(int((int(t.max()) - start) // bin_ns) + 1, 1), MAX_BINS)
    thr = _binned((t[fwd] - start) // bin_ns, take(pk.ip_len)[fwd], nb)
    base = int(seq[ref_i]) + (1 if len(sender_syn) else 0)
    fin_end = int(end[fwd & fin][0]) - 1 if (fwd & fin).any() else None
    newly = np.zeros(len(t), np.int64)  # payload bytes newly ACKed at each packet
    if advancing.any():
        acked_now = np.maximum(una_series, base, out=una_series)
        if fin_end is not None:
            np.minimum(acked_now, fin_end, out=acked_now)
        newly[0] = acked_now[0] - base
        np.subtract(acked_now[1:], acked_now[:-1], out=newly[1:])
        newly *= advancing
        np.maximum(newly, 0, out=newly)
    del una_series
    # the delivery rate over one smallest RTT, from the cumulative ACK while it counts every byte
    # delivered: before the first retransmission (after it, an ACK that fills a hole also
    # acknowledges what SACKs had reported, a jump that is no rate)
    rate = None
    min_rtt = int(tr.rtt_karn[:, 1].min()) if len(tr.rtt_karn) else None
    if min_rtt and advancing.any():
        clean = advancing & (t < tr.rtx[:, 0].min()) if len(tr.rtx) else advancing
        rate = max_delivery_rate(t[clean], np.cumsum(newly)[clean], min_rtt)
    bins = t - start
    bins //= bin_ns
    good = _binned(bins, newly, nb)
    del bins
    gap = gap_ns if gap_ns is not None else (min_rtt // 2 if min_rtt else 1_000_000)
    return Direction(
        sender="client" if from_client else "server", t0=start, bin_ns=bin_ns, gap_ns=gap,
        tracker=tr, payload_bytes=int(plen[fwd].sum()), data_segments=int(data.sum()),
        pure_acks=int((rev_pure & window).sum()), advancing_acks=int(advancing.sum()),
        acked_bytes=int(newly.sum()), first_data_t=first_data_t,
        last_advance_t=last_adv, throughput_bps=thr * 8 / (bin_ns / 1e9),
        goodput_bps=good * 8 / (bin_ns / 1e9),
        flights=group_flights(t[data], seq[data], end[data], gap),
        delivery_rate_bps=None if rate is None else rate * 8, min_rtt_ns=min_rtt, data_events=data_events,
        window_events=rwnd.events(fwd, flags, plen, seq_raw, seq, ack_raw, take(pk.win), ws),
        trace={"t": t, "fwd": fwd, "seq": seq, "end": end, "ack": ack, "has_ack": rev_ack,
               "win": win, "payload": plen,
               "sack": sack_marks.astype(np.int64),
               "rtx_packets": tr.rtx[:, 4].copy(),
               "index": idx})


def _rows(pk, idx, take, fwd, t, flags, plen, seq, ack, ack_raw, rev_ack, end,
          win) -> senderrun.Rows:
    """The flow's packets as the sender model's input (:class:`analysis.senderrun.Rows`);
    SACK edges are unwrapped relative to the ACK number that carries them."""
    kind = np.where(fwd, senderrun.SEGMENT,
                    np.where(rev_ack & ((flags & RST) == 0), senderrun.ACKROW, 0)).astype(np.uint8)
    nsack = take(pk.nsack)
    has = np.nonzero((kind == senderrun.ACKROW) & (nsack > 0))[0]
    nb = nsack[has].astype(np.int64)
    blocks = pk.sack[idx[has]][np.arange(4)[None, :] < nb[:, None]].astype(np.int64)   # (k, 2)
    a32 = np.repeat(ack_raw[has].astype(np.int64), nb)[:, None]
    d = (blocks - a32) & (TWO32 - 1)
    sack = np.repeat(ack[has], nb)[:, None] + np.where(d >= TWO32 // 2, d - TWO32, d)
    fl = (((flags & SYN) != 0) * senderrun.SYNB + ((flags & FIN) != 0) * senderrun.FINB
          + ((plen == 0) & ((flags & (SYN | FIN)) == 0)) * senderrun.PUREB).astype(np.uint8)
    return senderrun.Rows(kind=kind, t=t, val=np.where(fwd, seq, ack), end=end, fl=fl, win=win,
                          nsack=nsack, sack=sack.reshape(-1, 2), has_ts=take(pk.has_ts),
                          tsval=take(pk.tsval), tsecr=take(pk.tsecr), payload=plen, packet=idx)


FLIGHT = np.dtype([("start", np.int64), ("end", np.int64), ("segments", np.int64),
                   ("bytes", np.int64), ("cum_bytes", np.int64)])


def max_delivery_rate(t: np.ndarray, delivered: np.ndarray, interval_ns: int) -> float | None:
    """The largest delivery rate in bytes/s over the intervals between two ACKs at least
    ``interval_ns`` apart: for each ACK i, (delivered[i] − delivered[j]) / (t[i] − t[j]) with j
    the last ACK at or before t[i] − interval_ns.  ``t``: ACK times (ns, ascending);
    ``delivered``: the bytes acknowledged by each.  None when no two ACKs are that far apart."""
    if interval_ns <= 0 or len(t) < 2:
        return None
    j = np.searchsorted(t, t - interval_ns, side="right") - 1
    i = np.nonzero(j >= 0)[0]
    if not len(i):
        return None
    j = j[i]
    return float(((delivered[i] - delivered[j]) / (t[i] - t[j])).max() * 1e9)


def group_flights(t: np.ndarray, seq: np.ndarray, end: np.ndarray, gap_ns: int) -> np.ndarray:
    """Group data segments (send times ``t``, sequence ranges ``seq``..``end``) into flights
    separated by idle gaps > gap_ns (see module doc): FLIGHT records."""
    out = np.zeros(0 if len(t) == 0 else 1 + int((np.diff(t) > gap_ns).sum()), FLIGHT)
    if len(t) == 0:
        return out
    new_bytes = np.diff(np.maximum.accumulate(end), prepend=seq[0])
    first = np.concatenate([[0], np.nonzero(np.diff(t) > gap_ns)[0] + 1])
    last = np.concatenate([first[1:], [len(t)]]) - 1
    out["start"], out["end"], out["segments"] = t[first], t[last], last - first + 1
    out["bytes"] = np.add.reduceat(new_bytes, first)
    out["cum_bytes"] = np.cumsum(out["bytes"])
    return out
