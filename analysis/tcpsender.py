"""Sans-I/O model of one TCP data sender as seen from a capture point.

:class:`SenderTracker` is fed, in capture order, the segments of one
direction (``segment``) and the ACKs coming back (``ack``).  It keeps the
sender's visible state (SND.UNA, SND.MAX, SACK scoreboard) and produces:

*outstanding* (after every event)
    ``SND.MAX - SND.UNA`` in payload bytes: end of the highest payload sent
    minus the highest cumulative ACK seen (or the first payload byte, while
    that ACK still covers only the SYN).  SYN and FIN do not count (as in
    Wireshark).

*wireshark* (after every event)
    Wireshark's ``tcp.analysis.bytes_in_flight`` (4.0, default
    payload-based method of ``tcp_analyze_sequence_number``), reproduced from
    its state: Wireshark keeps a list of the transmissions (every segment with
    payload, SYN or FIN, retransmissions included, at most 10000 =
    TCP_MAX_UNACKED_SEGMENTS; later ones are not added) and, at each ACK,
    deletes those ending at or below the ACK number and trims those it cuts
    to start at it.  The value is the highest end minus the lowest start in
    that list, minus the bytes in the first 3 SACK blocks of the latest ACK
    (D-SACK included; further blocks are not stored).  So it equals SND.MAX -
    SND.UNA - SACKed while the list holds the segment at SND.MAX, but once an
    ACK has covered everything sent the list restarts empty: a retransmission
    below SND.UNA sent then counts only the retransmissions sent since that
    ACK (e.g. 1448 for one spurious retransmission, where SND.MAX - its
    sequence number may be hundreds of kB).  A retransmission below SND.UNA
    otherwise moves the lower edge down until the next ACK deletes it.
    Wireshark shows the field (``series_wireshark_shown``) only at segments
    with payload, only when the value is > 0 (0 or negative, e.g. when the
    SACK blocks cover everything listed, gives no field), and not after a
    segment starting above SND.MAX (a capture gap) until the next packet
    with the ACK flag from the receiver.  A segment carrying SYN or FIN shows
    the value minus one (the test for > 0 is made before).  At ACK events the
    series holds the same formula over the list after the ACK (0 when empty).

*pipe* (after every event)
    RFC 6675 SetPipe() over the payload bytes between SND.UNA and SND.MAX: a
    byte not in the SACK scoreboard counts once unless IsLost() (above it,
    >= DupThresh = 3 whole segments or more than (DupThresh-1)*SMSS bytes
    SACKed), and once more if its segment was retransmitted in the current
    recovery episode (RFC 6675's "octet <= HighRxt", per segment as first
    transmitted).  Without SACK and outside recovery pipe == outstanding.

*retransmissions*
    A segment that consumes sequence space (payload, SYN or FIN) and starts
    below SND.MAX, except a keep-alive (<= 1 byte at SND.MAX-1 without
    SYN/FIN).  Same test as Wireshark's ``tcp.analysis.retransmission``;
    Wireshark additionally relabels some as ``out_of_order`` (within its
    reordering threshold of the highest segment) or ``fast_retransmission``.
    Each retransmission gets one ``kind``:

    - ``fast``: the receiver had signalled loss: the SACK scoreboard holds
      bytes above SND.UNA, or a duplicate ACK arrived since the last advance
      of SND.UNA; and the latest such signal (an ACK that was a duplicate or
      carried SACK blocks above SND.UNA) came after any earlier
      retransmission of the same bytes.  Or the segment continues a recovery
      episode that began as ``fast``.  (This covers RACK, RFC 8985, which
      retransmits on a cumulative ACK that carries SACK blocks.)
    - ``probe``: no such signal, and the segment is the highest one
      sent (ends at SND.MAX) while older data is outstanding: a tail loss
      probe (RFC 8985 TLP).  A probe opens no recovery episode.
    - ``rto``: no such signal otherwise: the sender acted on its
      retransmission timer; or the segment continues an RTO episode
      (go-back-N after the timeout).

    A recovery episode starts with a fast or RTO retransmission, records
    RecoveryPoint = SND.MAX, and ends when SND.UNA >= RecoveryPoint.  A
    retransmission of bytes already retransmitted in the current episode
    starts a new episode.  Limitation: a timeout that fires while duplicate
    ACKs are still arriving is counted as ``fast``.

    *spurious* (orthogonal to kind): the receiver later reported a D-SACK
    (RFC 2883: first SACK block below the cumulative ACK, or inside the
    second block) overlapping the retransmission's bytes, i.e. the bytes
    arrived twice (RFC 3708 detection).  The latest retransmission before the
    D-SACK that overlaps it is marked.  ``acked_before`` marks Wireshark's
    ``tcp.analysis.spurious_retransmission``: all bytes were already
    cumulatively ACKed when the retransmission was seen.

*duplicate ACK* (RFC 5681 section 2, RFC 6675)
    An ACK without payload, SYN, FIN or RST, acknowledging exactly SND.UNA
    while data is outstanding, that either carries SACK blocks or repeats the
    previous ACK's window.

*RTT samples*
    ``rtt_karn``: on each ACK that advances SND.UNA past at least one whole
    segment, ACK time minus the first transmission time of the highest such
    segment, skipped when any segment it covers was retransmitted (Karn).
    ``rtt_ts``: on each such ACK carrying a timestamp option, ACK time minus
    the time of the first segment sent with TSval == the ACK's TSecr
    (RFC 7323 RTTM; it includes the receiver's ACK delay and up to one tick
    of the sender's TS clock).

Sequence numbers given to the tracker are unwrapped 64-bit integers (see
:func:`analysis.pcap.unwrap32`).  Times are integers (ns) of any one clock.
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field

DUPTHRESH = 3
KINDS = ("fast", "rto", "probe")
WS_MAX_SEGMENTS = 10000       # Wireshark's TCP_MAX_UNACKED_SEGMENTS
WS_SACK_BLOCKS = 3            # SACK blocks Wireshark stores for bytes_in_flight


@dataclass
class Retransmission:
    t: int
    seq: int
    end: int
    kind: str
    packet: int
    episode: int
    spurious: bool = False
    acked_before: bool = False


@dataclass
class _Seg:
    start: int
    end: int
    t: int
    tsval: int | None
    rtx_episode: int = -1     # episode of its latest retransmission, -1 never
    rtx_t: int = -1


@dataclass
class SenderTracker:
    """State and outputs of one sender (see the module docstring); feed it with
    :meth:`segment`, :meth:`ack` and :meth:`ts_echo` in capture order."""

    smss: int = 1460
    una: int = 0
    snd_max: int | None = None
    data_start: int = 0                  # first payload sequence number (after the SYN)
    data_max: int | None = None          # end of the highest payload byte sent
    last_win: int | None = None
    last_advance_t: int = -1
    last_dupack_t: int = -1
    last_signal_t: int = -1              # latest duplicate ACK or ACK with SACK blocks above SND.UNA
    episode: int = -1
    episode_kind: str | None = None
    recovery_point: int | None = None
    segs: list = field(default_factory=list)      # first transmissions above SND.UNA, in order
    seg_start: list = field(default_factory=list)  # their start / end, for bisect
    seg_end: list = field(default_factory=list)
    rtx_segs: list = field(default_factory=list)   # segments retransmitted in the current episode
    sacked: list = field(default_factory=list)    # merged [l, r) intervals above una, sorted
    retransmissions: list = field(default_factory=list)
    series_t: list = field(default_factory=list)
    series_outstanding: list = field(default_factory=list)
    series_pipe: list = field(default_factory=list)
    series_sacked: list = field(default_factory=list)
    series_wireshark: list = field(default_factory=list)
    series_wireshark_shown: list = field(default_factory=list)
    last_sack: list = field(default_factory=list)  # SACK blocks of the latest ACK
    ws: "_WiresharkList" = field(default_factory=lambda: _WiresharkList())
    rtt_karn: list = field(default_factory=list)  # (t, sample) pairs
    rtt_ts: list = field(default_factory=list)
    tsval_first: dict = field(default_factory=dict)
    dupack_count: int = 0

    # -- events ---------------------------------------------------------
    def segment(self, t: int, seq: int, end: int, *, syn: bool = False, fin: bool = False,
                tsval: int | None = None, packet: int = -1) -> Retransmission | None:
        """A segment from the sender; ``end`` = seq + payload (+1 for SYN, +1 for FIN)."""
        if tsval is not None and tsval not in self.tsval_first:
            self.tsval_first[tsval] = t
        if self.snd_max is not None and seq > self.snd_max:
            self.ws.valid = False            # Wireshark's "previous segment not captured"
        if end <= seq:
            return None
        if self.snd_max is None:
            self.snd_max = self.una = seq
            self.data_start = self.data_max = seq + syn
        prior = self.snd_max
        rtx = None
        self.data_max = max(self.data_max, end - fin)
        if seq < prior and not (end - seq <= 1 and seq == prior - 1 and not (syn or fin)):
            rtx = self._retransmitted(t, seq, min(end, prior), packet)
        if end > prior:
            self.segs.append(_Seg(max(seq, prior), end, t, tsval))
            self.seg_start.append(max(seq, prior))
            self.seg_end.append(end)
            self.snd_max = end
        self.ws.add(seq, end)
        ws = self._ws_value()
        shown = self.ws.valid and end - seq > syn + fin and 0 < ws < 2_000_000_000
        self._record(t, ws - (syn or fin), shown)
        return rtx

    def ack(self, t: int, ack: int, *, win: int, sacks=(), pure: bool = True) -> None:
        """An ACK from the receiver: cumulative ``ack``, scaled window, SACK blocks [(l, r)]."""
        if self.snd_max is None:
            return
        self.ws.valid = True
        self.ws.ack(ack)
        sacks = list(sacks)
        self.last_sack = list(sacks)
        if sacks and (sacks[0][1] <= ack or (len(sacks) > 1 and sacks[1][0] <= sacks[0][0]
                                              and sacks[0][1] <= sacks[1][1])):
            self._dsack(t, *sacks.pop(0))
        if ack > self.una:
            self._advance(t, ack)
        elif (ack == self.una and pure and self.snd_max > self.una
              and (sacks or win == self.last_win)):
            self.dupack_count += 1
            self.last_dupack_t = self.last_signal_t = t
        for l, r in sacks:
            if r > self.una:
                self._add_sack(max(l, self.una), r)
                self.last_signal_t = t
        self.last_win = win
        self._record(t, self._ws_value(), False)

    # -- internals ------------------------------------------------------
    def _retransmitted(self, t, seq, end, packet) -> Retransmission:
        i = self._first_seg_after(seq)
        hit = []
        while i < len(self.segs) and self.segs[i].start < end:
            hit.append(self.segs[i])
            i += 1
        again = any(s.rtx_episode == self.episode and self.episode >= 0 for s in hit)
        prev_rtx = max((s.rtx_t for s in hit), default=-1)
        in_episode = self.recovery_point is not None and self.una < self.recovery_point
        if in_episode and not again:
            kind = self.episode_kind
        else:
            signalled = bool(self.sacked) or self.last_dupack_t > self.last_advance_t
            evidence = signalled and self.last_signal_t > prev_rtx
            if evidence:
                kind = "fast"
            elif end >= self.snd_max and seq > self.una:
                kind = "probe"
            else:
                kind = "rto"
            if kind != "probe":
                self.episode += 1
                self.episode_kind = kind
                self.recovery_point = self.snd_max
                self.rtx_segs = []
        for s in hit:
            if kind != "probe":
                if s.rtx_episode != self.episode:
                    self.rtx_segs.append(s)
                s.rtx_episode = self.episode
            s.rtx_t = t
        r = Retransmission(t, seq, end, kind, packet, self.episode if kind != "probe" else -1,
                           acked_before=end <= self.una)
        self.retransmissions.append(r)
        return r

    def _first_seg_after(self, seq):
        """Index of the first segment that ends after ``seq``."""
        return bisect.bisect_right(self.seg_end, seq)

    def _advance(self, t, ack):
        n = self._first_seg_after(ack)
        covered = self.segs[:n]
        if covered and not any(s.rtx_t >= 0 for s in covered):
            last = covered[-1]
            self.rtt_karn.append((t, t - last.t))
        del self.segs[:n], self.seg_start[:n], self.seg_end[:n]
        if self.segs and self.segs[0].start < ack:
            self.segs[0].start = self.seg_start[0] = ack
        self.una = ack
        self.last_advance_t = t
        while self.sacked and self.sacked[0][1] <= ack:
            self.sacked.pop(0)
        if self.sacked and self.sacked[0][0] < ack:
            self.sacked[0] = (ack, self.sacked[0][1])
        if self.recovery_point is not None and ack >= self.recovery_point:
            self.recovery_point = None
            self.episode_kind = None

    def ts_echo(self, t: int, tsecr: int) -> None:
        """Timestamp RTT sample for an ACK that advanced SND.UNA (call after :meth:`ack`)."""
        t0 = self.tsval_first.get(tsecr)
        if t0 is not None:
            self.rtt_ts.append((t, t - t0))

    def _dsack(self, t, l, r):
        for x in reversed(self.retransmissions):
            if x.t <= t and x.seq < r and l < x.end:
                x.spurious = True
                return

    def _add_sack(self, l, r):
        if l >= r:
            return
        iv = self.sacked
        i = bisect.bisect_left(iv, (l, l))
        if i > 0 and iv[i - 1][1] >= l:
            i -= 1
        j = i
        while j < len(iv) and iv[j][0] <= r:
            l, r = min(l, iv[j][0]), max(r, iv[j][1])
            j += 1
        iv[i:j] = [(l, r)]

    def _is_sacked(self, start, end) -> bool:
        i = bisect.bisect_right(self.sacked, (start, float("inf"))) - 1
        return i >= 0 and self.sacked[i][0] <= start and self.sacked[i][1] >= end

    def outstanding(self) -> int:
        """Payload bytes sent but not cumulatively ACKed (see module docstring)."""
        if self.data_max is None:
            return 0
        return max(self.data_max - max(self.una, self.data_start), 0)

    def pipe(self) -> int:
        """RFC 6675 pipe now (see module docstring).

        The segments that IsLost() are exactly the holes below the SACKed block at
        which, counting from the top, more than (DupThresh-1)*SMSS bytes or DupThresh
        segments have been SACKed; that block's left edge ``lost_below`` is found by
        walking the scoreboard from the top, so the cost does not grow with the window."""
        outstanding = self.outstanding()
        if not self.sacked and self.recovery_point is None:
            return outstanding
        lo, hi = max(self.una, self.data_start), self.data_max
        lost_below, acc, count = lo, 0, 0
        for l, r in reversed(self.sacked):
            acc += max(min(r, hi) - l, 0)
            inside = bisect.bisect_right(self.seg_end, r) - bisect.bisect_left(self.seg_start, l)
            count += max(inside, 0)
            if count >= DUPTHRESH or acc > (DUPTHRESH - 1) * self.smss:
                lost_below = max(l, lo)
                break
        sacked_above = sum(max(min(r, hi) - max(l, lost_below), 0) for l, r in self.sacked)
        total = max(hi - lost_below, 0) - sacked_above
        if self.recovery_point is not None:
            for s in self.rtx_segs:
                start = max(s.start, lo)
                if (s.end > start and s.rtx_episode == self.episode
                        and not self._is_sacked(start, s.end)):
                    total += s.end - start
        return total

    def _ws_value(self) -> int:
        if not self.ws.segs:
            return 0
        return (self.ws.top() - self.ws.bottom()
                - sum(r - l for l, r in self.last_sack[:WS_SACK_BLOCKS]))

    def _record(self, t, ws, ws_shown):
        self.series_t.append(t)
        self.series_outstanding.append(self.outstanding())
        self.series_pipe.append(self.pipe())
        top = self.data_max if self.data_max is not None else 0
        self.series_sacked.append(sum(max(min(r, top) - l, 0) for l, r in self.sacked))
        self.series_wireshark.append(ws)
        self.series_wireshark_shown.append(ws_shown)


class _WiresharkList:
    """Wireshark's list of unacknowledged transmissions (see *wireshark*): live
    segments ``id -> [start, end]`` with lazily cleaned heaps for the lowest start,
    the highest end and deletion by end."""

    def __init__(self):
        self.segs = {}
        self.valid = True
        self._next = 0
        self._by_end = []       # (end, id), deletion order
        self._by_start = []     # (start, id)
        self._by_top = []       # (-end, id)

    def add(self, seq, end):
        if len(self.segs) >= WS_MAX_SEGMENTS:
            return
        i = self._next
        self._next += 1
        self.segs[i] = [seq, end]
        heapq.heappush(self._by_end, (end, i))
        heapq.heappush(self._by_start, (seq, i))
        heapq.heappush(self._by_top, (-end, i))

    def ack(self, ack):
        """Delete the segments ending at or below ``ack``; trim those it cuts to start at it."""
        while self._by_end and self._by_end[0][0] <= ack:
            self.segs.pop(heapq.heappop(self._by_end)[1], None)
        while self._by_start and self._by_start[0][0] < ack:
            start, i = heapq.heappop(self._by_start)
            s = self.segs.get(i)
            if s is not None and s[0] == start:
                s[0] = ack
                heapq.heappush(self._by_start, (ack, i))

    def bottom(self) -> int:
        h = self._by_start
        while self.segs.get(h[0][1], (None,))[0] != h[0][0]:
            heapq.heappop(h)
        return h[0][0]

    def top(self) -> int:
        h = self._by_top
        while h[0][1] not in self.segs:
            heapq.heappop(h)
        return -h[0][0]
