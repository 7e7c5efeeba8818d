"""Mahimahi traces made by small generators, and a trace's rate statistics (no data files).

Every generator returns a ``schedule.Trace``: one loop of ``duration`` seconds, built from
constant-rate pieces.  Within the loop, millisecond m (1 ≤ m ≤ duration in ms) carries the
opportunities whose cumulative count first reaches a whole number during it:
``floor(Σ_{j≤m} rate_j / (1504·8·1000))`` minus those emitted before, where rate_j is the rate
of millisecond j (bit/s).  If the last millisecond carries none, one opportunity is added there,
so that the loop's period (its last timestamp) is the duration: the loop then carries at most
one opportunity (1504 B) more than the rates ask.  A loop lasts at most ``MAX_LOOP_S`` and carries
at least one opportunity (the least a trace can express: a lower mean rate is refused, not
rounded up) and at most ``MAX_OPPORTUNITIES``.  A rate of 12.032 Mbit/s is one opportunity
per millisecond; 1 opportunity/ms carries one full-size 1514 B Ethernet frame.

Statistics (``rate_series``, ``trace_stats``): the rate of the window starting at t is
opportunities with timestamps in (t, t + w] ms × 1504 B × 8 / w; windows tile one period from 0; a last
window shorter than w is dropped unless it is the only one.  Without a window given, w is the
trace's own (``default_window``): short enough to resolve its shape, long enough that counting
whole opportunities is not noise.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from testbed.spec.schedule import OPPORTUNITY_BYTES, Trace
from testbed.spec.units import format_rate

_BITS_PER_MS = OPPORTUNITY_BYTES * 8 * 1000   # bit/s that give one opportunity per ms
#: a generated loop lasts at most an hour and carries at most 10^7 opportunities (a file of
#: about 80 MB; 1 s at 120 Gbit/s, an hour at 33 Mbit/s)
MAX_LOOP_S = 3600
MAX_OPPORTUNITIES = 10**7
#: the default window holds this many opportunities at the trace's mean rate (one more or less
#: moves the window's rate by 1 % of the mean) and cuts a loop into at most ``MAX_WINDOWS``
WINDOW_OPPORTUNITIES = 100
MAX_WINDOWS = 1000


def _check(duration: float, *rates: float) -> int:
    ms = round(duration * 1000)
    if any(not (r >= 0) for r in rates) or not any(r > 0 for r in rates):
        raise ValueError(f"trace rates {rates!r} must be >= 0 bit/s with one > 0")
    if ms < 1:
        raise ValueError(f"trace duration {duration!r} s must be at least 1 ms")
    if ms > MAX_LOOP_S * 1000:
        raise ValueError(f"trace loop of {duration:g} s is longer than {MAX_LOOP_S} s (an hour); a trace "
                         "loops: give a shorter one")
    return ms


def from_rates(pieces: list[tuple[float, float]], source: str) -> Trace:
    """A trace from (seconds, bit/s) pieces in order (see the module docstring)."""
    piece_ms = [_check(seconds, rate if rate > 0 else 1.0) for seconds, rate in pieces]
    loop, bits = sum(s for s, _ in pieces), sum(s * r for s, r in pieces)
    if not OPPORTUNITY_BYTES * 8 <= bits <= MAX_OPPORTUNITIES * OPPORTUNITY_BYTES * 8:
        raise ValueError(f"{source}: a {loop:g} s loop at {format_rate(bits / loop)} mean carries "
                         f"{bits / (OPPORTUNITY_BYTES * 8):.3g} delivery opportunities of {OPPORTUNITY_BYTES} "
                         f"B; it must carry from 1 to {MAX_OPPORTUNITIES:,}: a mean rate from "
                         f"{format_rate(OPPORTUNITY_BYTES * 8 / loop)} to "
                         f"{format_rate(MAX_OPPORTUNITIES * OPPORTUNITY_BYTES * 8 / loop)} (or another loop length)")
    ms: list[int] = []
    credit, emitted, m = 0.0, 0, 0
    for (_, rate), n in zip(pieces, piece_ms):
        for _ in range(n):
            m += 1
            credit += rate / _BITS_PER_MS
            whole = int(credit + 1e-9)
            ms.extend([m] * (whole - emitted))
            emitted = whole
    if not ms or ms[-1] != m:
        ms.append(m)
    return Trace(tuple(ms), source)


def constant(rate: float, duration: float = 1.0) -> Trace:
    """``rate`` bit/s for ``duration`` s per loop."""
    _check(duration, rate)
    return from_rates([(duration, rate)], f"constant {format_rate(rate)}")


def alternating(rates: list[float], interval: float, cycles: int = 1) -> Trace:
    """Each rate of ``rates`` in turn for ``interval`` s, ``cycles`` times per loop."""
    _check(interval * len(rates) * cycles, *rates)
    return from_rates([(interval, r) for r in rates] * cycles,
                      f"alternating {'/'.join(map(format_rate, rates))} every {interval:g} s")


def on_off(rate: float, on: float, off: float) -> Trace:
    """An outage pattern: ``off`` s with no opportunity, then ``on`` s at ``rate`` (the loop
    ends with the on part, so its period is on + off)."""
    _check(on + off, rate)
    return from_rates([(off, 0.0), (on, rate)], f"on/off {format_rate(rate)} {on:g} s on {off:g} s off")


def markov(rates: list[float], mean_dwell: float, duration: float, seed: int) -> Trace:
    """A "cellular-like" trace: a Markov chain over the states ``rates`` (bit/s); it starts in
    state 0, stays an exponential time of mean ``mean_dwell`` s (whole ms, at least 1), then
    moves to one of the other states, uniformly; ``random.Random(seed)``; cut at ``duration``."""
    total = _check(duration, *rates)
    if len(rates) < 2 or not mean_dwell > 0:
        raise ValueError("markov trace: give at least two state rates and a mean dwell > 0 s")
    rng = random.Random(seed)
    pieces, state, left = [], 0, total
    while left > 0:
        dwell = min(left, max(1, round(rng.expovariate(1.0 / mean_dwell) * 1000)))
        pieces.append((dwell / 1000, rates[state]))
        left -= dwell
        state = rng.choice([s for s in range(len(rates)) if s != state])
    return from_rates(pieces, f"markov seed {seed} states {'/'.join(map(format_rate, rates))}")


def default_window(trace: Trace) -> float:
    """The window (s) that shows ``trace``'s shape: the shortest of 1, 2 or 5 × 10^k ms that
    holds ``WINDOW_OPPORTUNITIES`` opportunities at the trace's mean rate and cuts one loop into
    at most ``MAX_WINDOWS`` windows (a 1 s loop alternating 6 and 24 Mbit/s every 500 ms: 100 ms;
    a window as long as the loop would show only its mean)."""
    need = max(WINDOW_OPPORTUNITIES * trace.period_ms / len(trace.ms), trace.period_ms / MAX_WINDOWS, 1.0)
    decade = 10 ** math.floor(math.log10(need))
    return next(m * decade for m in (1, 2, 5, 10) if m * decade >= need) / 1000


def _window_ms(trace: Trace, window: float) -> int:
    """A window of ``window`` s in whole ms as the series cuts the loop: at least 1, at most the
    loop's period."""
    return min(max(1, round(window * 1000)), trace.period_ms)


def rate_series(trace: Trace, window: float | None = None) -> list[tuple[float, float]]:
    """(window start s, bit/s) over one period (see the module docstring); ``window`` s, by
    default ``default_window(trace)``."""
    w = _window_ms(trace, window or default_window(trace))
    starts = list(range(0, trace.period_ms - w + 1, w)) or [0]
    return [(t / 1000, (trace.opportunities_before(t + w + 1) - trace.opportunities_before(t + 1))
             * OPPORTUNITY_BYTES * 8 / (w / 1000)) for t in starts]


@dataclass(frozen=True)
class TraceStats:
    """mean_bps: the loop's mean (``Trace.mean_rate``); min_bps/max_bps: of ``rate_series``
    windows of ``window`` s; period: s; opportunities: per loop."""
    mean_bps: float
    min_bps: float
    max_bps: float
    window: float
    period: float
    opportunities: int


def trace_stats(trace: Trace, window: float | None = None) -> TraceStats:
    """``trace``'s statistics over windows of ``window`` s, by default ``default_window(trace)``."""
    window = window or default_window(trace)
    rates = [r for _, r in rate_series(trace, window)]
    return TraceStats(trace.mean_rate, min(rates), max(rates), _window_ms(trace, window) / 1000,
                      trace.period_ms / 1000, len(trace.ms))
