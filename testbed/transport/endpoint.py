"""``Endpoint``: one side of a connection of the transport, sans-I/O (the clock is passed in).

Drive it with ``datagram_received(now, data)``, ``handle_timer(now)`` and ``send(now)`` (which
returns the datagrams to send now and the time of the next timer, or None); queue a message with
``send_message(now, data)``; take what happened from ``events()``.  Times are integer ns on any
clock.  Both sides send and receive messages; a message id pairs a request with its response.

Sender.  A message is one block of k source symbols (``fec``); with FEC it is sent as k + r
symbols, r from the ``FecPolicy`` at the current loss estimate.  Every packet gets a new packet
number.  ACKs carry ranges of received packet numbers and, per message, how many symbols the
receiver still ``need``s.  Loss detection (RFC 9002 section 6): a packet is lost when a packet
sent ``reorder_threshold`` numbers later was ACKed, or when it was sent more than
``time_threshold`` × max(SRTT, latest RTT) before now and a later one was ACKed; a probe timeout
(PTO = RTO of ``rtt`` + the peer's max ACK delay, doubled per consecutive expiry) sends one probe
per unfinished message with ACK_NOW set.  Whenever a message's need exceeds its symbols in flight
and queued, the deficit d is sent again: without FEC, the missing source symbols (selective
repeat); with FEC, d + repair_count(d) new repair symbols (the fallback when a block could not
be decoded).  A message is done when an ACK reports need 0.  Loss does not slow the sender
unless ``backoff``.

Receiver.  A message is delivered when all its source symbols arrived (no decoding) or, once at
least k symbols arrived, when RaptorQ decodes it (a failed attempt raises the need by one).  The
ids of the last ``KEEP_DONE`` delivered messages are kept (symbols of these, or of older ids,
are ACKed and ignored).
Datagrams that do not parse, or contradict what was received before, are counted in
``stats["malformed"]`` and dropped.
"""
from __future__ import annotations

import bisect
import time
from collections import deque
from dataclasses import dataclass, field

from testbed.transport import wire
from testbed.transport.ackpolicy import AckScheduler
from testbed.transport.config import TransportConfig
from testbed.transport.fec import BlockEncoder, LossEstimator, decode
from testbed.transport.pacing import DeliveryRate, Pacer
from testbed.transport.rtt import RttEstimator

MAX_MESSAGE = 64 * 1024 * 1024
MAX_PROBES = 2
RECENT_DONE = 4
KEEP_DONE = 1024


@dataclass(frozen=True)
class MessageReceived:
    msg: int
    data: bytes
    t: int                      # when the last needed symbol arrived
    first_t: int                # when its first symbol arrived
    symbols: int                # symbols received until then
    decoded: bool               # True: RaptorQ reconstructed missing source symbols
    decode_ns: int              # CPU time of the decode call(s) (0 without decoding)


@dataclass(frozen=True)
class MessageDelivered:
    msg: int
    t: int                      # when the sender learned it (ACK with need 0)
    packets: int                # packets it took
    repair: int                 # of which repair packets
    rounds: int                 # highest round number sent


@dataclass(slots=True)
class _Sent:
    pn: int
    t: int
    size: int
    msg: int
    esi: int
    round: int
    rate_state: tuple[int, int]


@dataclass
class _Out:
    id: int
    enc: BlockEncoder
    need: int
    next_repair: int
    acked: set = field(default_factory=set)
    inflight: dict = field(default_factory=dict)     # pn -> esi
    queued: int = 0
    lost_round: int = -1
    max_round: int = 0
    packets: int = 0
    repair: int = 0


@dataclass
class _In:
    length: int
    k: int
    first_t: int
    packets: dict = field(default_factory=dict)      # esi -> raptorq packet
    sources: int = 0
    failed: int = 0
    decode_ns: int = 0

    @property
    def need(self) -> int:
        """Symbols still needed: k, plus one per failed decode attempt, minus those received."""
        return self.k + self.failed - len(self.packets)


class Endpoint:
    def __init__(self, config: TransportConfig | None = None):
        self.config = c = config or TransportConfig()
        self.rtt = RttEstimator(min_rto_ns=c.min_rto_ns, initial_rto_ns=c.initial_rto_ns)
        self.loss = LossEstimator(c.loss_prior, c.loss_window, c.min_loss_samples)
        self.rate = DeliveryRate()
        self.pacer = Pacer(c.burst_ns, c.pacing_quantum_ns)
        self.stats = dict.fromkeys(("packets_sent", "source_sent", "repair_sent", "retransmitted",
                                    "probes", "acks_sent", "acks_received", "lost", "malformed",
                                    "duplicates", "decode_failures", "bytes_sent"), 0)
        self._events: list = []
        # sender
        self._next_pn = 0
        self._next_msg = 0
        self._out: dict[int, _Out] = {}
        self._queue: list[tuple[int, int, int, bool]] = []       # (msg, esi, round, ack_now)
        self._qhead = 0
        self._sent: dict[int, _Sent] = {}
        self._largest_acked = -1
        self._last_ack_pn = -1
        self._loss_time: int | None = None
        self._last_eliciting = 0
        self._pto_count = 0
        self._rate_factor = 1.0
        self._backoff_until = 0
        # receiver
        self._in: dict[int, _In] = {}
        self._done: dict[int, None] = {}                          # delivered message ids
        self._recent_done: deque[int] = deque(maxlen=RECENT_DONE)  # reported in every ACK
        self._forgotten = 0             # ids below this are done and no longer listed
        self._ranges: list[list[int]] = []                        # [lo, hi] ascending
        self._acks = AckScheduler(c.ack)
        self._largest_rx_t = 0

    # ------------------------------------------------------------------ API
    def send_message(self, now: int, data: bytes) -> int:
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"message of {len(data)} B exceeds {MAX_MESSAGE} B")
        mid = self._next_msg
        self._next_msg += 1
        enc = BlockEncoder(bytes(data))
        m = self._out[mid] = _Out(mid, enc, enc.k, enc.k)
        r = enc.repair_hint = self.config.fec.repair_count(enc.k, self.loss.p)
        self._enqueue(m, list(range(enc.k + r)), 0)
        m.next_repair = enc.k + r
        return mid

    def events(self) -> list:
        out, self._events = self._events, []
        return out

    def datagram_received(self, now: int, data: bytes) -> None:
        try:
            pkt = wire.parse(data)
            if isinstance(pkt, wire.AckPacket):
                self._on_ack(now, pkt)
            else:
                self._on_symbol(now, pkt)
        except wire.Malformed:
            self.stats["malformed"] += 1

    def handle_timer(self, now: int) -> None:
        if self._loss_time is not None and now >= self._loss_time:
            self._detect_losses(now)
        pto = self._pto_deadline()
        if pto is not None and now >= pto:
            self._pto_count += 1
            self._probe()

    def send(self, now: int) -> tuple[list[bytes], int | None]:
        out = []
        if self._acks.due(now):
            out.append(self._make_ack(now))
        while self._qhead < len(self._queue) and self.pacer.ready(now):
            mid, esi, rnd, ack_now = self._queue[self._qhead]
            m = self._out.get(mid)
            if m is not None and not (esi < m.enc.k and esi in m.acked):
                if not ack_now and not self._window_open():     # a probe may exceed it (RFC 9002)
                    break
                out.append(self._make_symbol(now, m, esi, rnd, ack_now))
            self._qhead += 1
            if m is not None:
                m.queued -= 1
        if self._qhead == len(self._queue):
            self._queue.clear()
            self._qhead = 0
        return out, self.next_timer(now)

    def next_timer(self, now: int) -> int | None:
        times = [self._acks.deadline, self._loss_time, self._pto_deadline()]
        if self._qhead < len(self._queue) and self._window_open():
            times.append(max(self.pacer.wake, now))
        times = [t for t in times if t is not None]
        return min(times) if times else None

    @property
    def busy(self) -> bool:
        """Unfinished messages of this sender."""
        return bool(self._out)

    # ------------------------------------------------------------------ sender
    def _enqueue(self, m: _Out, esis, rnd: int, ack_now: bool = False, front: bool = False) -> None:
        items = [(m.id, e, rnd, ack_now) for e in esis]
        if front:
            self._queue[self._qhead:self._qhead] = items
        else:
            self._queue.extend(items)
        m.queued += len(items)

    def _pacing_rate(self) -> float | None:
        pol = self.config.pacing
        if pol.mode == "off":
            return None
        if pol.mode == "rate":
            return pol.rate_bps * self._rate_factor
        if self.rate.max_rate is None:
            return None
        return self.rate.max_rate * 8 * self.rate.gain * self._rate_factor

    def _inflight_packets(self) -> int:
        return sum(len(m.inflight) for m in self._out.values())

    def _window_open(self) -> bool:
        """Whether one more symbol may go out: the fixed window (``TransportConfig.window``, in
        symbol bytes) and, with pacing ``estimate``, twice the estimated BDP (in packet bytes)."""
        fixed, estimate = self.config.window, self.config.pacing.mode == "estimate"
        if fixed is None and not estimate:
            return True
        after = self._inflight_packets() + 1         # in flight once this symbol is sent
        if fixed is not None and after * wire.SYMBOL > fixed:
            return False
        if not estimate:
            return True
        size = wire.SYMBOL_OVERHEAD + wire.SYMBOL
        floor = max(self.config.initial_window, 2 * (self.config.ack.every_n or 1)) * size
        if self.rate.max_rate is None or self.rtt.min_rtt is None:
            cwnd = floor
        else:
            cwnd = max(2 * self.rate.max_rate * self.rtt.min_rtt / 1e9, floor)
        return after * size <= cwnd

    def _make_symbol(self, now: int, m: _Out, esi: int, rnd: int, ack_now: bool) -> bytes:
        pn = self._next_pn
        self._next_pn += 1
        repair = esi >= m.enc.k
        data = wire.encode_symbol(wire.SymbolPacket(pn, repair, m.id, len(m.enc.data), min(rnd, 255),
                                                    esi, m.enc.symbol(esi), ack_now))
        self._sent[pn] = _Sent(pn, now, len(data), m.id, esi, rnd, self.rate.on_sent())
        m.inflight[pn] = esi
        m.packets += 1
        m.max_round = max(m.max_round, rnd)
        st = self.stats
        st["packets_sent"] += 1
        st["bytes_sent"] += len(data)
        st["repair_sent" if repair else "source_sent"] += 1
        if rnd > 0 and not repair:
            st["retransmitted"] += 1
        if repair:
            m.repair += 1
        self._last_eliciting = now
        self.pacer.sent(now, len(data), self._pacing_rate())
        return data

    def _on_ack(self, now: int, a: wire.AckPacket) -> None:
        self.stats["acks_received"] += 1
        newest = a.pn > self._last_ack_pn
        if newest:
            self._last_ack_pn = a.pn
        largest_new = None
        los = [lo for _, lo in reversed(a.ranges)]          # ascending (wire.parse checked order)
        his = [hi for hi, _ in reversed(a.ranges)]
        top = his[-1] if his else -1
        for pn in [pn for pn in self._sent if pn <= top]:   # each packet in flight looked up once
            i = bisect.bisect_right(los, pn) - 1
            if i >= 0 and pn <= his[i]:
                p = self._sent.pop(pn)
                if largest_new is None or pn > largest_new.pn:
                    largest_new = p
                self._acked(now, p)
        if largest_new is not None:
            self._pto_count = 0
            if largest_new.pn > self._largest_acked:
                self._largest_acked = largest_new.pn
                self.rtt.sample(now - largest_new.t, a.ack_delay_us * 1000)
        if newest:
            for mid, need in a.status:
                m = self._out.get(mid)
                if m is None:
                    continue
                if need == 0:
                    del self._out[mid]              # its packets still in flight resolve without it
                    self._events.append(MessageDelivered(mid, now, m.packets, m.repair, m.max_round))
                else:
                    m.need = min(need, m.enc.k + 0xFFFF)
        self._detect_losses(now)
        self._replenish()

    def _acked(self, now: int, p: _Sent) -> None:
        self.loss.record(False)
        self.rate.on_acked(now, p.size, p.rate_state, p.t)
        m = self._out.get(p.msg)
        if m is not None:
            m.inflight.pop(p.pn, None)
            m.acked.add(p.esi)

    def _detect_losses(self, now: int) -> None:
        self._loss_time = None
        if self._largest_acked < 0:
            return
        rtt = max(self.rtt.srtt or 0, self.rtt.latest or 0)
        delay = max(int(self.config.time_threshold * rtt), self.rtt.granularity)
        lost = []
        for pn, p in self._sent.items():
            if pn > self._largest_acked:
                break
            if self._largest_acked - pn >= self.config.reorder_threshold or p.t <= now - delay:
                lost.append(p)
            elif self._loss_time is None or p.t + delay < self._loss_time:
                self._loss_time = p.t + delay
        for p in lost:
            del self._sent[p.pn]
            self.stats["lost"] += 1
            self.loss.record(True)
            m = self._out.get(p.msg)
            if m is not None:
                m.inflight.pop(p.pn, None)
                m.lost_round = max(m.lost_round, p.round)
        if lost:
            if self.config.backoff and now >= self._backoff_until:
                self._rate_factor *= 0.5
                self._backoff_until = now + (self.rtt.srtt or self.rtt.initial_rto)
            self._replenish()

    def _replenish(self) -> None:
        for m in self._out.values():
            deficit = m.need - len(m.inflight) - m.queued
            if deficit <= 0:
                continue
            rnd = m.lost_round + 1
            if self.config.fec.mode == "off":
                busy = set(m.inflight.values()) | m.acked | self._queued_esis(m.id)
                esis = [e for e in range(m.enc.k) if e not in busy][:deficit]
            else:
                n = deficit + self.config.fec.repair_count(deficit, self.loss.p, m.enc.k)
                esis = list(range(m.next_repair, m.next_repair + n))
                m.next_repair += n
            self._enqueue(m, esis, rnd)

    def _queued_esis(self, mid: int) -> set:
        return {e for q, e, _, _ in self._queue[self._qhead:] if q == mid}

    def _pto_deadline(self) -> int | None:
        if not any(m.inflight for m in self._out.values()):
            return None
        pto = self.rtt.rto + self.config.max_ack_delay_ns
        return self._last_eliciting + (pto << min(self._pto_count, 16))

    def _probe(self) -> None:
        probes = 0
        for m in self._out.values():
            if not m.inflight or probes >= MAX_PROBES:
                continue
            if self.config.fec.mode == "off":
                esi = m.inflight[min(m.inflight)]
            else:
                esi = m.next_repair
                m.next_repair += 1
            self._enqueue(m, [esi], m.lost_round + 1, ack_now=True, front=True)
            self.stats["probes"] += 1
            probes += 1

    # ------------------------------------------------------------------ receiver
    def _on_symbol(self, now: int, p: wire.SymbolPacket) -> None:
        if p.length > MAX_MESSAGE:
            raise wire.Malformed(f"message length {p.length} above {MAX_MESSAGE}")
        msg = self._in.get(p.msg)
        if msg is not None and msg.length != p.length:
            raise wire.Malformed(f"message {p.msg}: length {p.length}, earlier {msg.length}")
        if not self._record_pn(p.pn):
            self.stats["duplicates"] += 1
        elif p.pn == self._ranges[-1][1]:
            self._largest_rx_t = now
        completes = False
        if p.msg >= self._forgotten and p.msg not in self._done:
            if msg is None:
                msg = self._in[p.msg] = _In(p.length, wire.k_of(p.length), now)
            if p.esi not in msg.packets:
                msg.packets[p.esi] = p.raptorq_packet
                msg.sources += p.esi < msg.k
                completes = self._try_complete(now, p.msg, msg)
        self._acks.on_packet(now, True, p.ack_now or completes)

    def _try_complete(self, now: int, mid: int, msg: _In) -> bool:
        if msg.sources == msg.k:
            data = b"".join(msg.packets[e][wire.PAYLOAD_ID.size:] for e in range(msg.k))[:msg.length]
            decoded = False
        elif msg.need <= 0:
            t0 = time.perf_counter_ns()          # CPU cost only; protocol time is ``now``
            data = decode(msg.length, list(msg.packets.values()))
            msg.decode_ns += time.perf_counter_ns() - t0
            if data is None:
                msg.failed += 1
                self.stats["decode_failures"] += 1
                return False
            decoded = True
        else:
            return False
        self._events.append(MessageReceived(mid, data, now, msg.first_t, len(msg.packets), decoded,
                                            msg.decode_ns))
        del self._in[mid]
        self._done[mid] = None
        self._recent_done.append(mid)
        if len(self._done) > 2 * KEEP_DONE:                       # bounded memory on long connections
            ids = sorted(self._done)
            self._forgotten = max(self._forgotten, ids[-KEEP_DONE])
            self._done = {i: None for i in ids[-KEEP_DONE:]}
            for i in [i for i in self._in if i < self._forgotten]:
                del self._in[i]
        return True

    def _record_pn(self, pn: int) -> bool:
        """Add pn to the received ranges; False if it was there already."""
        r = self._ranges
        if r and r[-1][1] + 1 == pn:
            r[-1][1] = pn
            return True
        i = bisect.bisect_right(r, [pn, float("inf")])
        if i and r[i - 1][1] >= pn:
            return False
        if i and r[i - 1][1] + 1 == pn:
            r[i - 1][1] = pn
            if i < len(r) and r[i][0] == pn + 1:
                r[i - 1][1] = r[i][1]
                del r[i]
        elif i < len(r) and r[i][0] == pn + 1:
            r[i][0] = pn
        else:
            r.insert(i, [pn, pn])
        if len(r) > 4 * wire.MAX_RANGES:
            del r[:len(r) - 2 * wire.MAX_RANGES]
        return True

    def _make_ack(self, now: int) -> bytes:
        status = [(mid, msg.need) for mid, msg in list(self._in.items())[-wire.MAX_STATUS + RECENT_DONE:]]
        status += [(mid, 0) for mid in self._recent_done]
        delay = now - self._largest_rx_t       # held since the largest acknowledged arrived
        ranges = tuple((hi, lo) for lo, hi in reversed(self._ranges[-wire.MAX_RANGES:]))
        pn = self._next_pn
        self._next_pn += 1
        self._acks.sent()
        self.stats["acks_sent"] += 1
        return wire.encode_ack(wire.AckPacket(pn, min(delay // 1000, 0xFFFFFFFF), tuple(status), ranges))
