"""Two endpoints over the emulator's sans-I/O link models, in virtual time.

``Simulation(a, b, ab, ba)`` connects endpoint ``a`` to ``b`` through ``DirectionModel`` ``ab``
(a→b) and ``ba`` (b→a): every datagram becomes a frame of len + 42 B (Ethernet 14 + IPv4 20 +
UDP 8, what the forwarder sees) that the model delivers at a time or drops.  Events run in time
order; after each arrival or timer the endpoint's ``send(now)`` output goes onto the link and its
next timer is scheduled.  ``at(t, fn)`` schedules application code (e.g. a server that replies
after its processing time); ``on_event(fn)`` sees every endpoint event as ``fn(sim, side,
event)`` with side "a" or "b".  Nothing here reads a clock.
"""
from __future__ import annotations

import heapq
from typing import Callable

from testbed.emulator.direction import DELIVER, DirectionModel
from testbed.transport.endpoint import Endpoint

FRAME_OVERHEAD = 14 + 20 + 8


class Simulation:
    def __init__(self, a: Endpoint, b: Endpoint, ab: DirectionModel, ba: DirectionModel, start_ns: int = 0):
        self.ends = {"a": a, "b": b}
        self.links = {"a": ab, "b": ba}                # link leaving each side
        self.peer = {"a": "b", "b": "a"}
        self.now = start_ns
        self._heap: list = []
        self._seq = 0
        self._timer_version = {"a": 0, "b": 0}
        self._handlers: list[Callable] = []
        self.frames = {"a": 0, "b": 0}                 # datagrams sent by each side

    def on_event(self, fn: Callable) -> None:
        self._handlers.append(fn)

    def at(self, t: int, fn: Callable[["Simulation"], None]) -> None:
        self._push(t, "call", fn)

    def _push(self, t: int, kind: str, arg) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, arg))

    def flush(self, side: str) -> None:
        """Send what ``side`` has to send now and schedule its next timer."""
        end = self.ends[side]
        datagrams, timer = end.send(self.now)
        link, peer = self.links[side], self.peer[side]
        for d in datagrams:
            self.frames[side] += 1
            verdict, t = link.arrive(self.now, len(d) + FRAME_OVERHEAD)
            if verdict == DELIVER:
                self._push(t, "rx", (peer, d))
        for ev in end.events():
            for fn in self._handlers:
                fn(self, side, ev)
        self._timer_version[side] += 1
        if timer is not None:
            self._push(max(timer, self.now), "timer", (side, self._timer_version[side]))

    def run(self, until: int | None = None, stop: Callable[[], bool] = lambda: False,
            max_events: int = 10_000_000) -> None:
        for _ in range(max_events):
            if not self._heap or stop():
                return
            t, _, kind, arg = self._heap[0]
            if until is not None and t > until:
                return
            heapq.heappop(self._heap)
            self.now = t
            if kind == "rx":
                side, data = arg
                self.ends[side].datagram_received(t, data)
                self.flush(side)
            elif kind == "timer":
                side, version = arg
                if version == self._timer_version[side]:
                    self.ends[side].handle_timer(t)
                    self.flush(side)
            else:
                arg(self)
        raise RuntimeError(f"simulation did not finish within {max_events} events")
