"""The testbed's one clock: CLOCK_MONOTONIC in nanoseconds (``time.monotonic_ns()``).

It is shared by every network namespace of the machine, so event logs, emulator frame logs and
application logs line up without correction.  pcaps carry CLOCK_REALTIME; whoever writes
realtime timestamps records ``clock_offset_ns()`` beside them, and
``t_monotonic = t_realtime − offset``.
"""
from __future__ import annotations

import time


def clock_offset_ns() -> int:
    """CLOCK_REALTIME − CLOCK_MONOTONIC now, in ns (realtime read between two monotonic reads,
    against their midpoint)."""
    m0 = time.monotonic_ns()
    r = time.time_ns()
    m1 = time.monotonic_ns()
    return r - (m0 + m1) // 2
