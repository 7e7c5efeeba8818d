"""``DirectionModel``: the fate of every frame on one direction of one link.

Sans-I/O: ``arrive(now_ns, frame_len)`` is called for each frame in nondecreasing ``now_ns``
(any clock, integer ns; the forwarder uses CLOCK_MONOTONIC) with the Ethernet frame length as
read from AF_PACKET (14-byte header included, no FCS).  It returns ``(verdict, t_ns)``, final at
arrival:

- ``DELIVER``: the frame must leave the emulator towards the receiver at ``t_ns``;
- ``DROP_QUEUE``: refused by the full bottleneck buffer; ``t_ns`` = arrival;
- ``DROP_LOSS``: lost by the random-loss model; ``t_ns`` = the end of its transmission, i.e.
  when it would have started propagating.

Order of operations for a frame (``spec`` is the direction's ``LinkSpec``):

1. Bottleneck queue (``queue.DropTailQueue``): limits ``spec.queue_limit_packets`` and
   ``spec.queue_bytes``; occupancy = frames arrived but not finished transmission; a frame that
   does not fit is dropped at once (DROP_QUEUE) and goes no further.  (On the shared medium the
   queue is unbounded unless ``queue_packets``/``queue_bytes`` is set: LinkSpec's default
   bandwidth-delay buffer needs a rate.)
2. Transmission, one of:
   a. shaped (``spec.rate`` set): the ``serializer.Serializer`` at ``spec.rate`` with
      ``spec.overhead`` bytes added per frame, FIFO; it departs when its last bit is sent;
   b. shared air (``medium`` given; ``spec.rate`` must then be None): the frame's IP packet
      (frame_len − 14) takes its turn on the ``airtime.AirMedium``; it departs when its data
      PPDU ends, and stays in the queue until its MAC ACK ends;
   c. unshaped (no rate, no medium): no queue, no transmission time; it departs on arrival.
3. Random loss (``loss.make_loss``): decided for every frame that got here, so a lost frame
   still used its transmission time (and airtime).  DropList indices count the frames that
   reached this stage (0-based), i.e. queue drops are not counted.
4. Propagation: candidate = departure + ``spec.delay`` + jitter, jitter uniform in whole ns in
   [0, ``spec.jitter``].  Unless ``spec.reorder``, delivery = max(candidate, previous delivery of
   this direction), so jitter never reorders; with ``spec.reorder`` delivery = candidate.

Randomness: two ``random.Random`` streams per direction, seeded from ``seed`` ("<seed>:loss",
"<seed>:jitter"), so changing the jitter does not change which frames are lost.  The medium
draws its backoff from its own seed.  The caller records the seeds.

A direction whose spec has a ``schedule`` (``testbed.spec.schedule``) is modelled by
``schedule_model.ScheduledDirection`` (same interface, same verdicts plus ``DROP_OUTAGE`` and
``DROP_EVENT``); ``schedule_model.make_direction(spec, ...)`` builds the right one, and a
direction without a schedule never pays for it.  Both take ``set_origin(t_ns)``
and ``drain_changes(now_ns)``; without a schedule they do nothing.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from testbed.spec.linkspec import ETH_HEADER, LinkSpec
from testbed.emulator.airtime import AirMedium
from testbed.emulator.loss import make_loss
from testbed.emulator.queue import DropTailQueue
from testbed.emulator.serializer import Serializer

DELIVER, DROP_LOSS, DROP_QUEUE, DROP_OUTAGE, DROP_EVENT = 0, 1, 2, 3, 4
VERDICT_NAMES = ("deliver", "drop_loss", "drop_queue", "drop_outage", "drop_event")


@dataclass
class DirectionStats:
    """Counters of one direction; frames_in = delivered + dropped_loss + dropped_queue.

    queue_max_packets/bytes: largest occupancy seen (see ``queue``), counted right after a frame
    was admitted.  airtime_ns: this direction's time on the shared medium (0 without one).
    """
    frames_in: int = 0
    delivered: int = 0
    dropped_loss: int = 0
    dropped_queue: int = 0
    queue_max_packets: int = 0
    queue_max_bytes: int = 0
    bytes_in: int = 0
    bytes_delivered: int = 0
    airtime_ns: int = 0


class DirectionModel:
    """One direction of a link; see the module docstring for the model and the verdicts.
    A spec with a ``schedule`` is refused: build it with ``schedule_model.make_direction``."""

    #: whether ``arrive`` reads the frame's bytes (a schedule's ``copies_until``); the I/O loop
    #: passes them only then
    wants_frames = False

    def __init__(self, spec: LinkSpec, seed: int, medium: AirMedium | None = None, name: str = ""):
        if medium is not None and spec.rate is not None:
            raise ValueError(f"a direction on the shared medium {medium.spec.name!r} gets its rate "
                             f"from the airtime model; set rate None/'unshaped' (got {spec.rate:g} bit/s)")
        if spec.schedule is not None and type(self) is DirectionModel:
            raise ValueError(f"direction {name!r} has a schedule, which this engine does not apply yet; "
                             "remove the schedule (or build the model with schedule_model.make_direction)")
        self.spec = spec
        self.seed = seed
        self.name = name
        self.medium = medium
        self._air_id = medium.attach(name) if medium is not None else -1
        self._serializer = Serializer(spec.rate, spec.overhead) if spec.rate is not None else None
        shaped = spec.rate is not None or medium is not None
        self._queue = DropTailQueue(spec.queue_limit_packets, spec.queue_bytes) if shaped else None
        self._lost = make_loss(spec.loss, random.Random(f"{seed}:loss"))
        self._jitter_draw = random.Random(f"{seed}:jitter").random
        self._delay_ns = round(spec.delay * 1e9)
        self._jitter_span = round(spec.jitter * 1e9) + 1   # jitter in [0, span) whole ns
        self._fifo = not spec.reorder
        self._last_delivery = 0
        self._frames_in = self._delivered = self._dropped_loss = self._dropped_queue = 0
        self._bytes_in = self._bytes_delivered = 0

    def arrive(self, now_ns: int, frame_len: int) -> tuple[int, int]:
        """Decide the fate of a frame of ``frame_len`` bytes arriving at ``now_ns``."""
        self._frames_in += 1
        self._bytes_in += frame_len
        queue = self._queue
        if queue is None:
            depart = now_ns
        else:
            if not queue.admit(now_ns, frame_len):
                self._dropped_queue += 1
                return DROP_QUEUE, now_ns
            if self._serializer is not None:
                depart = finish = self._serializer.send(now_ns, frame_len)
            else:
                depart, finish = self.medium.transmit(now_ns, frame_len - ETH_HEADER, self._air_id)
            queue.push(finish, frame_len)
        if self._lost is not None and self._lost():
            self._dropped_loss += 1
            return DROP_LOSS, depart
        t = depart + self._delay_ns
        if self._jitter_span > 1:
            t += int(self._jitter_draw() * self._jitter_span)
        if self._fifo:
            if t < self._last_delivery:
                t = self._last_delivery
            self._last_delivery = t
        self._delivered += 1
        self._bytes_delivered += frame_len
        return DELIVER, t

    def set_origin(self, t_ns: int) -> None:
        """The run's origin (moments of a schedule count from it); a constant link ignores it."""

    def drain_changes(self, now_ns: int | None = None) -> list:
        """Changes applied since the last call (``ScheduleChange``); none on a constant link."""
        return []

    @property
    def backlog(self) -> tuple[int, int]:
        """(packets, bytes) in the bottleneck queue as of the last ``arrive`` call."""
        return (self._queue.packets, self._queue.bytes) if self._queue is not None else (0, 0)

    @property
    def stats(self) -> DirectionStats:
        q = self._queue
        return DirectionStats(
            frames_in=self._frames_in, delivered=self._delivered,
            dropped_loss=self._dropped_loss, dropped_queue=self._dropped_queue,
            queue_max_packets=q.max_packets if q is not None else 0,
            queue_max_bytes=q.max_bytes if q is not None else 0,
            bytes_in=self._bytes_in, bytes_delivered=self._bytes_delivered,
            airtime_ns=self.medium.busy_ns(self._air_id) if self.medium is not None else 0)
