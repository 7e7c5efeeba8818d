"""The bottleneck serializer: frames leave one after another at ``rate`` bit/s.

A frame of L bytes occupies the line for (L + overhead)·8 / rate seconds, starting when it
arrives or when the frame ahead of it has finished, whichever is later.

Exact integer arithmetic.  The rate is taken as the fraction num/den bit/s
(``Fraction(rate).limit_denominator(10**6)``: exact for every whole-bit/s rate, within 1 ppm of
any other).  The busy horizon is an integer nanosecond ``busy_ns`` plus a remainder ``rem`` in
units of 1/num ns, so one frame adds exactly (L + overhead)·8·10⁹·den / num ns.  A frame's
finish time is the floor of its exact finish time: off by less than 1 ns, and the error never
accumulates over a back-to-back train (n frames of equal size finish exactly n·t apart, rounded
down once).  After an idle period the horizon restarts at the arrival time with ``rem = 0``.
"""
from __future__ import annotations

from fractions import Fraction


class Serializer:
    __slots__ = ("rate", "overhead", "_num", "_unit", "busy_ns", "_rem")

    def __init__(self, rate: float, overhead: int = 0):
        if not rate > 0:
            raise ValueError(f"serializer rate {rate!r} must be > 0 bit/s")
        if overhead < 0:
            raise ValueError(f"overhead {overhead!r} must be >= 0 bytes")
        frac = Fraction(rate).limit_denominator(10**6)
        self.rate = rate
        self.overhead = overhead
        self._num = frac.numerator
        self._unit = 8 * 10**9 * frac.denominator   # one byte, in 1/num ns
        self.busy_ns = 0
        self._rem = 0

    def send(self, now_ns: int, frame_len: int) -> int:
        """Serialize a frame arriving at ``now_ns``; return the ns its last bit leaves."""
        if now_ns > self.busy_ns:
            start, rem = now_ns, 0
        else:
            start, rem = self.busy_ns, self._rem
        q, self._rem = divmod(rem + (frame_len + self.overhead) * self._unit, self._num)
        self.busy_ns = finish = start + q
        return finish
