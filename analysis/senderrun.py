"""Run the sender model (:mod:`analysis.tcpsender`) over the packets of one flow, with
either engine, into one :class:`SenderResult`.

``python`` (the reference): one :class:`~analysis.tcpsender.SenderTracker` call per packet.
``native``: the sequential state machines (SACK scoreboard and pipe, Wireshark's segment
list, retransmission kinds and episodes, D-SACK, Karn samples) in ``analysis/native``
(C), and what the definitions allow computed for all packets at once with numpy:
*outstanding* (running maxima of the highest byte sent and of the cumulative ACK) and
the timestamp RTT samples (first transmission of each TSval, looked up by TSecr).
Both give identical results (``tests/analysis/test_native.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from analysis import native
from analysis.tcpsender import KINDS, Retransmission, SenderTracker

SEGMENT, ACKROW = 1, 2          # Rows.kind: a packet from the sender / an ACK from the receiver
SYNB, FINB, PUREB = 1, 2, 4     # Rows.fl bits


@dataclass
class Rows:
    """The packets of one flow in capture order, as the sender model sees them.

    ``kind``: SEGMENT (every packet from the sender), ACKROW (from the receiver with ACK
    and without RST) or 0.  ``val``: unwrapped sequence number (segments) or cumulative
    ACK (ACKs).  ``end``: seq + payload + SYN + FIN.  ``fl``: SYNB, FINB, PUREB (no
    payload, SYN or FIN).  ``win``: scaled window.  ``nsack``: SACK blocks of each ACK
    row, ``sack``: their unwrapped (l, r) edges, (sum(nsack), 2), in row order.
    ``packet``: index into the capture's packet table."""
    kind: np.ndarray
    t: np.ndarray
    val: np.ndarray
    end: np.ndarray
    fl: np.ndarray
    win: np.ndarray
    nsack: np.ndarray
    sack: np.ndarray
    has_ts: np.ndarray
    tsval: np.ndarray
    tsecr: np.ndarray
    payload: np.ndarray
    packet: np.ndarray


@dataclass
class SenderResult:
    """What :class:`SenderTracker` produces, as arrays: one series point per recorded event
    (``series_*``, see the *outstanding*, *pipe* and *wireshark* definitions), ``rtt_karn`` /
    ``rtt_ts`` as (n, 2) [ACK time, sample] rows, ``data_events`` as (n, 2) [series index,
    packet index] rows, one per segment with payload, ``rtx`` as (n, 8) rows of the
    :class:`~analysis.tcpsender.Retransmission` fields in order (t, seq, end, kind as its
    index in ``KINDS``, packet, episode, spurious, acked_before)."""
    engine: str
    data_start: int
    dupack_count: int
    rtx: np.ndarray
    rtt_karn: np.ndarray
    rtt_ts: np.ndarray
    series_t: np.ndarray
    series_outstanding: np.ndarray
    series_pipe: np.ndarray
    series_sacked: np.ndarray
    series_wireshark: np.ndarray
    series_wireshark_shown: np.ndarray
    data_events: np.ndarray

    @cached_property
    def retransmissions(self) -> list:
        return [Retransmission(t, s, e, KINDS[k], p, ep, spurious=bool(sp), acked_before=bool(ab))
                for t, s, e, k, p, ep, sp, ab in self.rtx.tolist()]


def run(rows: Rows, smss: int, engine: str | None = None) -> SenderResult:
    """The sender model over ``rows``; ``engine`` as in :func:`analysis.native.engine`."""
    return _native(rows, smss) if native.engine(engine) == "native" else _python(rows, smss)


def _pairs(a) -> np.ndarray:
    return np.asarray(a, np.int64).reshape(-1, 2)


def _python(rows: Rows, smss: int) -> SenderResult:
    tr = SenderTracker(smss=smss)
    events = []
    cur = 0
    K, T, V, E, FL = (x.tolist() for x in (rows.kind, rows.t, rows.val, rows.end, rows.fl))
    W, NS, HT, TV, TE = (x.tolist() for x in (rows.win, rows.nsack, rows.has_ts, rows.tsval,
                                                rows.tsecr))
    PL, P, S = rows.payload.tolist(), rows.packet.tolist(), rows.sack.tolist()
    for i in range(len(K)):
        if K[i] == SEGMENT:
            before = len(tr.series_t)
            tr.segment(T[i], V[i], E[i], syn=bool(FL[i] & SYNB), fin=bool(FL[i] & FINB),
                       tsval=TV[i] if HT[i] else None, packet=P[i])
            if PL[i] > 0 and len(tr.series_t) > before:
                events.append((len(tr.series_t) - 1, P[i]))
        elif K[i] == ACKROW:
            blocks = [tuple(b) for b in S[cur:cur + NS[i]]]
            cur += NS[i]
            una = tr.una
            tr.ack(T[i], V[i], win=W[i], sacks=blocks, pure=bool(FL[i] & PUREB))
            if tr.una > una and HT[i]:
                tr.ts_echo(T[i], TE[i])
    i64 = lambda a: np.asarray(a, np.int64)  # noqa: E731
    return SenderResult(
        "python", tr.data_start, tr.dupack_count,
        np.asarray([(r.t, r.seq, r.end, KINDS.index(r.kind), r.packet, r.episode, r.spurious,
                     r.acked_before) for r in tr.retransmissions], np.int64).reshape(-1, 8),
        _pairs(tr.rtt_karn),
        _pairs(tr.rtt_ts), i64(tr.series_t), i64(tr.series_outstanding), i64(tr.series_pipe),
        i64(tr.series_sacked), i64(tr.series_wireshark),
        np.asarray(tr.series_wireshark_shown, bool), _pairs(events))


def _native(rows: Rows, smss: int) -> SenderResult:
    o = native.sender(rows.kind, rows.t, rows.val, rows.end, rows.fl, rows.win,
                      np.where(rows.kind == ACKROW, rows.nsack, 0), rows.sack, smss)
    rs = o["row_series"]
    rec = rs >= 0
    never = -(1 << 62)
    seg, ack = rec & (rows.kind == SEGMENT), rec & (rows.kind == ACKROW)
    if rec.any():                     # outstanding = SND.MAX - SND.UNA (module doc)
        first = int(np.argmax(seg))
        seq0 = int(rows.val[first])
        start = seq0 + int(rows.fl[first] & SYNB)
        run = rows.end - ((rows.fl & FINB) != 0)           # in place: memory, not speed
        run[~seg] = never
        np.maximum.accumulate(run, out=run)
        outstanding = np.maximum(run[rec], start)           # SND.MAX
        np.copyto(run, rows.val)
        run[~ack] = never
        np.maximum.accumulate(run, out=run)
        una = run[rec]
        del run
        np.maximum(una, seq0, out=una)
        np.maximum(una, start, out=una)
        outstanding -= una
        del una
        np.maximum(outstanding, 0, out=outstanding)
    else:
        outstanding = np.zeros(0, np.int64)
    x = o["rtx"]
    rtx = np.column_stack([x[:, :4], rows.packet[x[:, 4]], x[:, 5], x[:, 6] & 1,
                           (x[:, 6] >> 1) & 1]).astype(np.int64)
    data = np.nonzero(seg & (rows.payload > 0))[0]
    return SenderResult(
        "native", o["data_start"], o["dupacks"], rtx, o["karn"], _ts_samples(rows, o["advanced"]),
        rows.t[rec], outstanding, o["pipe"], o["sacked"], o["wireshark"], o["shown"],
        np.column_stack([rs[data], rows.packet[data]]).astype(np.int64))


def _ts_samples(rows: Rows, advanced: np.ndarray) -> np.ndarray:
    """RFC 7323 RTTM (see *RTT samples*): at each ACK that advanced SND.UNA and carries a
    timestamp, ACK time minus the time of the first earlier segment sent with TSval ==
    TSecr."""
    sent = np.nonzero((rows.kind == SEGMENT) & rows.has_ts)[0]
    vals, first = np.unique(rows.tsval[sent], return_index=True)
    first_row = sent[first]
    q = np.nonzero(advanced & rows.has_ts & (rows.kind == ACKROW))[0]
    echo = rows.tsecr[q]
    pos = np.minimum(np.searchsorted(vals, echo), max(len(vals) - 1, 0))
    ok = (vals[pos] == echo) & (first_row[pos] < q) if len(vals) else np.zeros(len(q), bool)
    q, pos = q[ok], pos[ok]
    return np.column_stack([rows.t[q], rows.t[q] - rows.t[first_row[pos]]]).astype(np.int64)
