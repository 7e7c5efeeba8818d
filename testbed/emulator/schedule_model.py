"""``ScheduledDirection``: a ``DirectionModel`` whose link changes during the run.

``make_direction(spec, ...)`` builds one when ``spec.schedule`` is set (``testbed.spec.schedule``);
same calls, same verdicts, plus ``DROP_OUTAGE`` (3) and ``DROP_EVENT`` (4).  Before
``set_origin(t_ns)`` it behaves exactly as the constant direction of ``spec`` (the schedule's
fields are the values before the first step); ``set_origin`` may be called once, at or after
the last arrival.  Nothing here reads a clock: every moment below is computed, so a change
takes effect at exactly its moment, whatever the caller's timing.

Moments.  ``Ts`` s → ``origin + round(Ts·1e9)`` ns.  ``Nframes``/``Bbytes`` → the arrival time t*
of the first frame that finds at least N frames / B bytes (Ethernet frame lengths as given to
``arrive``) arrived since the origin before it; that frame is the first the change applies to,
frames admitted before t* keep the fate they were given, and from then on the item acts as if
it had been scheduled at t*.  Frame counts include every arriving frame, dropped ones too.

Stages of a frame arriving at ``a`` (each uses the values in force at *its own* moment):

1. Events (origin set): per event, frames of at least ``min_bytes`` are counted from 1 since
   the origin; frame k is hit when ``frame <= k < frame + count``; a window event hits frames
   with ``origin + start <= a < origin + end``.  Hits are decided here, acted on in 5 and 6.
   An event with ``copies_until`` u also keeps the TCP bytes of the frames it drops lost: each
   hit frame that is IPv4/TCP with a payload (``tcp_segment`` of the frame passed to
   ``arrive``) adds its (addresses, ports, sequence range); a later frame arriving at
   ``a < origin + u`` with the same addresses and ports whose sequence range overlaps one of
   them (modulo 2^32) is a copy: dropped as a hit is, whatever its size.  A frame given
   without its bytes, or not IPv4/TCP, is never a copy and adds no range.
2. Outage at ``a`` (an outage covers [down, up)): without ``hold`` the frame is dropped,
   ``DROP_OUTAGE`` at ``a``; with ``hold`` it goes on to the queue.
3. Queue: drop-tail (``queue.DropTailQueue``) with the limits of the LinkSpec in force at ``a``
   (``queue_limit_packets`` — the default follows rate and delay steps — and ``queue_bytes``);
   frames already queued are never dropped when a limit shrinks.  Held frames count.
4. Transmission start ``s = max(a, previous frame's finish)``, moved to ``up`` while ``s`` lies
   in an outage (no transmission starts during an outage; one in progress at ``down`` finishes).
   a. Serializer: the frame is sent entirely at the rate in force at ``s`` (a frame in
      transmission at a step finishes at the old rate; the next one starts at its finish with
      the new rate, so departure spacing changes at the first start at or after the step).
      Exact integers as ``serializer.Serializer``; the sub-ns remainder carries to the next
      frame only if it starts exactly at this one's finish (queued), was not moved by an
      outage and has the same rate; otherwise it starts at a whole ns.  Rate None: finish = s.
   b. Trace, for frames with ``s >= origin`` (before the origin the LinkSpec's rate applies):
      Mahimahi's ``LinkQueue::rationalize``.  Opportunity n is at ``origin + (n // len)·period
      + ms[n % len]`` ms; each carries ``OPPORTUNITY_BYTES`` = 1504 B; a frame needs
      ``frame_len - 14 + 4`` B (its IP packet plus the TUN header Mahimahi counts, so a full
      1514 B frame uses exactly one opportunity).  A frame may use an opportunity at time o
      only if ``o > a`` (Mahimahi burns the opportunities of the current ms before enqueueing)
      and ``o >= `` the previous frame's finish, and o is not in an outage.  It first uses what
      the previous frame left of its last opportunity (if ``a <`` that opportunity's time),
      then whole later opportunities; a frame may span several; bytes left when the queue is
      empty are lost; an unused opportunity is lost.  It finishes (departs) at the time of
      the opportunity carrying its last byte.  Frames over 1504 B span opportunities
      (Mahimahi refuses them).
   c. Shared medium: as ``DirectionModel`` (rate steps, traces and outages are refused there).
5. Loss at departure ``d``: the loss model in force at ``d`` is asked for every frame that got
   here, also one an event drops (so the random pattern of the others does not move); a step
   that sets ``loss`` starts a fresh generator (Gilbert–Elliott in the good state, DropList
   counting from 0) on the direction's one "<seed>:loss" stream; other steps keep it.  Then an
   event drop → ``DROP_EVENT`` at ``d``; else a loss → ``DROP_LOSS`` at ``d``.
6. Propagation: ``d + delay(d) + jitter`` with the delay, jitter and reorder in force at ``d``;
   without reorder, delivery = max(that, previous delivery), as ``DirectionModel``.  A delay
   decrease therefore never reorders (frames bunch behind the last old-delay frame), an
   increase leaves a gap.  Last, the events' extra delays are added *after* the FIFO clamp and
   do not hold back later frames: the frame arrives exactly that much later, nothing else moves.

Changes.  Every item records one ``ScheduleChange`` when it takes effect: a step at its moment,
an outage's ``down`` and ``up``, the trace at the origin, an event at the first frame it hits.
A time-tied record is emitted by the first ``arrive``/``drain_changes(now_ns)`` with
``now_ns >= moment``; its ``actual_ns`` is the moment itself (the model applies it exactly).
"""
from __future__ import annotations

import dataclasses
import random
import struct
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from testbed.emulator.direction import (DELIVER, DROP_EVENT, DROP_LOSS, DROP_OUTAGE, DROP_QUEUE,
                                        DirectionModel)
from testbed.emulator.loss import make_loss
from testbed.emulator.queue import DropTailQueue
from testbed.spec.linkspec import ETH_HEADER, LinkSpec
from testbed.spec.schedule import OPPORTUNITY_BYTES, TUN_HEADER, Schedule

_NEVER = -(1 << 62)


@dataclass(frozen=True)
class ScheduleChange:
    """One change that took effect.

    kind: "step", "down", "up", "event" or "trace"; item: its index in ``schedule.steps``,
    ``outages`` or ``events`` (0 for the trace); at: the configured moment as written ("3.0s",
    "10frames", "1000B"; an up: "<down>+<duration>s"; an event: "frame K" or its window start);
    configured_ns: origin + the configured seconds (None when the moment is a frame or byte
    count); actual_ns: when it took effect in the model; frames_before: frames of the direction
    that arrived since the origin before ``actual_ns``; what: the change, e.g. "rate=10mbit
    delay=20ms", "down drop", "frame 2: +45ms".
    """
    kind: str
    item: int
    at: str
    configured_ns: int | None
    actual_ns: int
    frames_before: int
    what: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def describe_change(schedule, kind: str, item: int) -> tuple[str, str]:
    """(at, what) of a ``ScheduleChange`` of ``kind`` for ``schedule``'s ``item`` (every engine's
    records use these texts)."""
    if kind == "step":
        step = schedule.steps[item]
        return str(step.at), step.describe()
    if kind in ("down", "up"):
        o = schedule.outages[item]
        if kind == "down":
            return str(o.down), f"down {'hold' if o.hold else 'drop'}"
        return f"{o.down}+{o.duration!r}s", "up"
    if kind == "event":
        ev = schedule.events[item]
        return (f"frame {ev.frame}" if ev.frame is not None else f"{ev.start!r}s"), ev.describe()
    tr = schedule.trace
    return "0s", f"trace {tr.source} ({len(tr.ms)} opportunities/{tr.period_ms} ms)"


@dataclass
class ScheduleStats:
    """dropped_outage / dropped_event: frames with those verdicts; delayed_event: frames given
    an event's extra delay and delivered; changes: records emitted so far."""
    dropped_outage: int = 0
    dropped_event: int = 0
    delayed_event: int = 0
    changes: int = 0


class _Segment:
    """The direction's values from ``start`` ns on (``spec``: the LinkSpec in force)."""
    __slots__ = ("start", "changes", "own_loss", "spec", "limit_packets", "limit_bytes", "num",
                 "unit", "loss", "delay_ns", "jitter_span", "fifo")

    def __init__(self, start: int, changes: dict[str, Any], own_loss):
        self.start, self.changes, self.own_loss = start, changes, own_loss

    def derive(self, spec: LinkSpec, inherited_loss) -> None:
        self.spec = spec
        self.limit_packets, self.limit_bytes = spec.queue_limit_packets, spec.queue_bytes
        if spec.rate is None:
            self.num = self.unit = None
        else:
            frac = Fraction(spec.rate).limit_denominator(10**6)
            self.num, self.unit = frac.numerator, 8 * 10**9 * frac.denominator
        self.loss = self.own_loss if "loss" in self.changes else inherited_loss
        self.delay_ns = round(spec.delay * 1e9)
        self.jitter_span = round(spec.jitter * 1e9) + 1
        self.fifo = not spec.reorder


_IP_TCP = struct.Struct("!12xHBxH2xH")   # ethertype, version/IHL, total length, flags/offset
_TCP_SEQ = struct.Struct("!HHI4xB")           # ports, sequence number, data offset


def tcp_segment(frame: bytes | None) -> tuple[tuple[int, int, int, int], int, int] | None:
    """((src, dst, sport, dport), seq, payload bytes) of an Ethernet frame carrying an
    unfragmented IPv4/TCP segment with a payload (addresses as in the IP header, payload =
    IP total length - IP header - TCP header); None for any other frame, or one too short."""
    if frame is None or len(frame) < 34:
        return None
    ethertype, vihl, total, frag = _IP_TCP.unpack_from(frame)
    if ethertype != 0x0800 or vihl >> 4 != 4 or frame[23] != 6 or frag & 0x3FFF:
        return None
    l4 = 14 + (vihl & 15) * 4
    if len(frame) < l4 + 20:
        return None
    sport, dport, seq, doff = _TCP_SEQ.unpack_from(frame, l4)
    payload = total - (vihl & 15) * 4 - (doff >> 4) * 4
    if payload <= 0:
        return None
    return (frame[26:30], frame[30:34], sport, dport), seq, payload


def _overlap(seq_a: int, len_a: int, seq_b: int, len_b: int) -> bool:
    """Whether TCP sequence ranges [a, a + len_a) and [b, b + len_b) overlap (modulo 2^32)."""
    return (seq_b - seq_a) % (1 << 32) < len_a or (seq_a - seq_b) % (1 << 32) < len_b


class _EventState:
    __slots__ = ("item", "event", "seen", "start_ns", "end_ns", "delay_ns", "recorded", "until_ns",
                 "lost")

    def __init__(self, item, event, origin):
        self.item, self.event, self.seen, self.recorded = item, event, 0, False
        self.start_ns = origin + round(event.start * 1e9) if event.start is not None else 0
        self.end_ns = origin + round(event.end * 1e9) if event.end is not None else 0
        self.delay_ns = round(event.delay * 1e9)
        self.until_ns = origin + round(event.copies_until * 1e9) if event.copies_until is not None else None
        self.lost: dict[tuple, list[tuple[int, int]]] = {}   # flow -> [(seq, payload bytes)]


def check_on_medium(sch: Schedule, direction, medium) -> None:
    """Refuse what a direction on a shared medium cannot follow (its rate is the medium's)."""
    if sch.trace is not None or sch.outages or any("rate" in dict(s.changes) for s in sch.steps):
        raise ValueError(f"direction {direction!r} is on the shared medium {medium!r}: rate steps, "
                         "traces and outages are not modelled there (delay, jitter, loss and queue "
                         "steps and events are)")


class ScheduledDirection(DirectionModel):
    """A direction with a schedule; the model is the module docstring."""

    def __init__(self, spec: LinkSpec, seed: int, medium=None, name: str = ""):
        sch = spec.schedule
        if medium is not None:
            check_on_medium(sch, name, medium.spec.name)
        super().__init__(spec, seed, medium, name)
        self.schedule = sch
        if self._queue is None:
            self._queue = DropTailQueue()
        self._loss_rng = random.Random(f"{seed}:loss")
        base = _Segment(_NEVER, {}, make_loss(spec.loss, self._loss_rng))
        base.derive(spec.replace(schedule=None), base.own_loss)
        self._segs = [base]
        self._cur = [0, 0, 0]              # segment cursors: admission, transmission, departure
        self._origin: int | None = None
        self._last_arrival = _NEVER
        self._busy = 0
        self._rem = 0
        self._last_rate: tuple | None = None
        self._outages: list[list] = []     # [down_ns, up_ns, hold]
        self._tied: list[tuple] = []       # (kind, threshold, what, item) not yet resolved
        self._pending: list[tuple] = []    # time-tied records: (moment_ns, seq, fields)
        self._changes: list[ScheduleChange] = []
        self._events: list[_EventState] = []
        self._n = self._nbytes = 0         # frames and bytes arrived since the origin
        self._trace = None
        self._op = -1                      # last opportunity used (global index)
        self._op_left = 0
        self._op_t = 0
        self.schedule_stats = ScheduleStats()
        self.wants_frames = any(e.copies_until is not None for e in sch.events)

    # --- the schedule ---------------------------------------------------------------------
    def set_origin(self, t_ns: int) -> None:
        """Start the schedule: moments count from ``t_ns`` (once; ``t_ns`` >= the last arrival)."""
        if self._origin is not None:
            raise ValueError(f"direction {self.name!r}: the origin is already set ({self._origin} ns)")
        if t_ns < self._last_arrival:
            raise ValueError(f"direction {self.name!r}: origin {t_ns} ns is before the last arrival "
                             f"({self._last_arrival} ns)")
        self._origin = t_ns
        sch = self.schedule
        seq = 0
        for i, step in enumerate(sch.steps):
            if step.at.kind == "time":
                t = t_ns + round(step.at.value * 1e9)
                self._segs.append(self._segment(t, step))
                at, what = describe_change(sch, "step", i)
                self._pending.append((t, seq, ("step", i, at, t, what)))
            else:
                self._tied.append((step.at, seq, "step", i))
            seq += 1
        self._rebuild(1)
        for i, outage in enumerate(sch.outages):
            if outage.down.kind == "time":
                self._add_outage(i, t_ns + round(outage.down.value * 1e9), seq, configured=True)
            else:
                self._tied.append((outage.down, seq, "down", i))
            seq += 2
        self._events = [_EventState(i, e, t_ns) for i, e in enumerate(sch.events)]
        if sch.trace is not None:
            tr = sch.trace
            self._trace = tr
            self._ms_ns = [m * 1_000_000 for m in tr.ms]
            self._period_ns = tr.period_ms * 1_000_000
            at, what = describe_change(sch, "trace", 0)
            self._pending.append((t_ns, -1, ("trace", 0, at, t_ns, what)))
        self._pending.sort()
        self._emit_until(t_ns)

    def drain_changes(self, now_ns: int | None = None) -> list[ScheduleChange]:
        """The ``ScheduleChange`` records since the last call; with ``now_ns``, time-tied ones
        due by then are emitted first."""
        if now_ns is not None:
            self._emit_until(now_ns)
        out, self._changes = self._changes, []
        return out

    def _segment(self, start: int, step) -> _Segment:
        changes = dict(step.changes)
        own = make_loss(changes["loss"], self._loss_rng) if "loss" in changes else None
        return _Segment(start, changes, own)

    def _rebuild(self, first: int) -> None:
        segs = self._segs
        for k in range(max(first, 1), len(segs)):
            prev = segs[k - 1]
            segs[k].derive(prev.spec.replace(**segs[k].changes), prev.loss)

    def _insert_segment(self, seg: _Segment) -> None:
        segs = self._segs
        p = bisect_right([s.start for s in segs], seg.start)
        segs.insert(p, seg)
        self._rebuild(p)
        self._cur = [c + 1 if c >= p else c for c in self._cur]

    def _add_outage(self, item: int, down: int, seq: int, configured: bool) -> None:
        o = self.schedule.outages[item]
        up = down + round(o.duration * 1e9)
        self._outages.append([down, up, o.hold])
        self._outages.sort()
        at, what = describe_change(self.schedule, "down", item)
        rec = ("down", item, at, down if configured else None, what)
        if configured:
            self._pending.append((down, seq, rec))
        else:
            self._record(*rec, actual=down)
        at, what = describe_change(self.schedule, "up", item)
        self._pending.append((up, seq + 1, ("up", item, at, up, what)))
        self._pending.sort()

    def _record(self, kind, item, at, configured_ns, what, actual) -> None:
        self._changes.append(ScheduleChange(kind, item, at, configured_ns, actual, self._n, what))
        self.schedule_stats.changes += 1

    def _emit_until(self, now: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= now:
            t, _, (kind, item, at, configured, what) = pending.pop(0)
            self._record(kind, item, at, configured, what, actual=t)

    def _resolve(self, now: int) -> None:
        n, nbytes = self._n, self._nbytes
        due = [x for x in self._tied
               if (n if x[0].kind == "frames" else nbytes) >= x[0].value]
        if not due:
            return
        self._tied = [x for x in self._tied if x not in due]
        for _, seq, kind, item in sorted(due, key=lambda x: x[1]):
            if kind == "step":
                self._insert_segment(self._segment(now, self.schedule.steps[item]))
                text, what = describe_change(self.schedule, "step", item)
                self._record("step", item, text, None, what, actual=now)
            else:
                self._add_outage(item, now, seq, configured=False)

    # --- helpers of the stages ---------------------------------------------------------------
    def _seg(self, stage: int, t: int) -> _Segment:
        segs, i = self._segs, self._cur[stage]
        while i + 1 < len(segs) and segs[i + 1].start <= t:
            i += 1
        self._cur[stage] = i
        return segs[i]

    def _outage_at(self, t: int):
        for o in self._outages:
            if o[0] <= t < o[1]:
                return o
        return None

    def _op_time(self, n: int) -> int:
        loops, i = divmod(n, len(self._ms_ns))
        return self._origin + loops * self._period_ns + self._ms_ns[i]

    def _first_op_after(self, t: int) -> int:
        """Index of the first opportunity at a time > t."""
        if t < self._origin:
            return 0
        loops, rest = divmod(t - self._origin, self._period_ns)
        return loops * len(self._ms_ns) + bisect_right(self._ms_ns, rest)

    def _trace_send(self, a: int, frame_len: int) -> int:
        need = frame_len - ETH_HEADER + TUN_HEADER
        if self._op_left and a < self._op_t and self._outage_at(self._op_t) is None:
            take = min(need, self._op_left)
            need -= take
            self._op_left -= take
        while need > 0:
            n = max(self._first_op_after(max(a, self._busy - 1)), self._op + 1)
            t = self._op_time(n)
            o = self._outage_at(t) if self._outages else None
            while o is not None:
                n = max(self._first_op_after(o[1] - 1), n)
                t = self._op_time(n)
                o = self._outage_at(t)
            self._op, self._op_t = n, t
            take = min(need, OPPORTUNITY_BYTES)
            need -= take
            self._op_left = OPPORTUNITY_BYTES - take
            self._busy = t
        return self._op_t

    def _transmit(self, a: int, frame_len: int) -> int:
        busy = self._busy
        s = a if a > busy else busy
        moved = False
        if self._outages:
            o = self._outage_at(s)
            while o is not None:
                s, moved = o[1], True
                o = self._outage_at(s)
        if self._trace is not None and s >= self._origin:
            self._last_rate = None
            return self._trace_send(a, frame_len)
        seg = self._seg(1, s)
        if seg.num is None:
            finish, rem = s, 0
        else:
            rate = (seg.num, seg.unit)
            rem = self._rem if (s == busy and not moved and rate == self._last_rate) else 0
            q, rem = divmod(rem + (frame_len + self.spec.overhead) * seg.unit, seg.num)
            finish = s + q
            self._last_rate = rate
        self._rem = rem
        self._busy = finish
        return finish

    # --- the frame ----------------------------------------------------------------------------
    def arrive(self, now_ns: int, frame_len: int, frame: bytes | None = None) -> tuple[int, int]:
        """As ``DirectionModel.arrive``, with the schedule (see the module docstring); ``frame``:
        the frame's bytes, read only when ``wants_frames`` (to recognise TCP copies)."""
        self._frames_in += 1
        self._bytes_in += frame_len
        self._last_arrival = now_ns
        drop_event, extra = False, 0
        if self._origin is not None:
            if self._pending and self._pending[0][0] <= now_ns:
                self._emit_until(now_ns)
            if self._tied:
                self._resolve(now_ns)
            tcp = tcp_segment(frame) if self.wants_frames else None
            for st in self._events:
                ev = st.event
                if tcp is not None and st.lost and now_ns < st.until_ns:
                    ranges = st.lost.get(tcp[0])
                    if ranges and any(_overlap(seq, n, tcp[1], tcp[2]) for seq, n in ranges):
                        drop_event = True
                if frame_len < ev.min_bytes:
                    continue
                if ev.frame is not None:
                    st.seen += 1
                    hit = ev.frame <= st.seen < ev.frame + ev.count
                else:
                    hit = st.start_ns <= now_ns < st.end_ns
                if hit:
                    if not st.recorded:
                        st.recorded = True
                        at, what = describe_change(self.schedule, "event", st.item)
                        self._record("event", st.item, at, st.start_ns if ev.frame is None else None,
                                     what, actual=now_ns)
                    drop_event = drop_event or ev.drop
                    extra += st.delay_ns
                    if tcp is not None and st.until_ns is not None and now_ns < st.until_ns:
                        st.lost.setdefault(tcp[0], []).append(tcp[1:])
            self._n += 1
            self._nbytes += frame_len
        if self._outages:
            o = self._outage_at(now_ns)
            if o is not None and not o[2]:
                self.schedule_stats.dropped_outage += 1
                return DROP_OUTAGE, now_ns
        seg = self._seg(0, now_ns)
        queue = self._queue
        queue.limit_packets, queue.limit_bytes = seg.limit_packets, seg.limit_bytes
        if not queue.admit(now_ns, frame_len):
            self._dropped_queue += 1
            return DROP_QUEUE, now_ns
        if self.medium is not None:
            depart, finish = self.medium.transmit(now_ns, frame_len - ETH_HEADER, self._air_id)
        else:
            depart = finish = self._transmit(now_ns, frame_len)
        queue.push(finish, frame_len)
        seg = self._seg(2, depart)
        lost = seg.loss is not None and seg.loss()
        if drop_event:
            self.schedule_stats.dropped_event += 1
            return DROP_EVENT, depart
        if lost:
            self._dropped_loss += 1
            return DROP_LOSS, depart
        t = depart + seg.delay_ns
        if seg.jitter_span > 1:
            t += int(self._jitter_draw() * seg.jitter_span)
        if seg.fifo:
            if t < self._last_delivery:
                t = self._last_delivery
            self._last_delivery = t
        if extra:
            t += extra
            self.schedule_stats.delayed_event += 1
        self._delivered += 1
        self._bytes_delivered += frame_len
        return DELIVER, t


def make_direction(spec: LinkSpec, seed: int, medium=None, name: str = "") -> DirectionModel:
    """The model of one direction: ``ScheduledDirection`` when ``spec.schedule`` is set, else
    the constant ``DirectionModel`` (whose ``arrive`` pays nothing for schedules)."""
    cls = ScheduledDirection if spec.schedule is not None else DirectionModel
    return cls(spec, seed, medium, name)
