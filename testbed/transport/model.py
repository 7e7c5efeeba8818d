"""Closed forms of CHAPTER12.md C6 and the ideal round model they describe, run over the
emulator's loss model in virtual time.

Closed form, selective-repeat ARQ: k packets, each lost independently with p in every
transmission, one round trip R per round: P(all delivered within n rounds) = (1 − pⁿ)ᵏ.
Completion = N·R + extra, N the number of rounds, extra = processing time + the first round's
sending time (the chapter: 30 ms + 8.5 ms), so E[completion] = R·Σ_{n≥0}(1 − (1 − pⁿ)ᵏ) + extra
and the q-quantile is R·min{n : (1 − pⁿ)ᵏ ≥ q} + extra.  At k = 245, p = 0.14, R = 200 ms:
mean 0.756 s, p99 1.2385 s (6 rounds).

Round model in virtual time (``round_trial``), what it assumes exactly: the sender puts the
round's packets back to back on a ``DirectionModel`` (rate, Bernoulli loss from the model's
seeded stream, one-way delay R/2); the receiver's report of which packets arrived reaches the
sender R/2 after the round's last packet would have arrived (no ACK loss, no timers, no
reordering, no feedback delay beyond propagation), and the next round carries exactly the
packets still needed.  With FEC the first round carries k + r symbols and the block is complete
when any k arrived (an ideal MDS code; RaptorQ needs k with probability > 99 %); later rounds
carry the deficit without new redundancy.  Completion = arrival of the last needed packet +
processing + R/2 for the response (not lost, its sending time ignored).
"""
from __future__ import annotations

import math

from ..emulator.direction import DELIVER, DirectionModel


def arq_cdf(n: int, k: int, p: float) -> float:
    """P(all k packets delivered within n rounds)."""
    return (1.0 - p ** n) ** k if n > 0 else 0.0


def arq_mean_rounds(k: int, p: float, tol: float = 1e-12) -> float:
    total, n = 0.0, 0
    while True:
        tail = 1.0 - arq_cdf(n, k, p)
        total += tail
        n += 1
        if tail < tol:
            return total


def arq_quantile_rounds(q: float, k: int, p: float) -> int:
    n = 1
    while arq_cdf(n, k, p) < q:
        n += 1
    return n


def arq_completion(k: int, p: float, rtt: float, extra: float) -> dict:
    """Closed-form ARQ completion (seconds): mean, p50, p99."""
    return {"mean": arq_mean_rounds(k, p) * rtt + extra,
            "p50": arq_quantile_rounds(0.5, k, p) * rtt + extra,
            "p99": arq_quantile_rounds(0.99, k, p) * rtt + extra}


def round_trial(k: int, r: int, link: DirectionModel, rtt_ns: int, process_ns: int,
                frame_len: int, start_ns: int) -> tuple[int, int]:
    """One transfer in the round model (see the module docstring); returns (completion ns from
    ``start_ns``, rounds)."""
    t, need, rounds, send = start_ns, k, 0, k + r
    half = rtt_ns // 2
    while True:
        rounds += 1
        arrivals = []
        last = t
        for _ in range(send):
            verdict, when = link.arrive(t, frame_len)
            if verdict == DELIVER:
                arrivals.append(when)
            last = max(last, when + (half if verdict != DELIVER else 0))
        arrivals.sort()
        if len(arrivals) >= need:
            return arrivals[need - 1] + process_ns + half - start_ns, rounds
        need -= len(arrivals)
        t = last + half                     # the report reaches the sender
        send = need


def quantile(values, q: float) -> float:
    """The q-quantile by the nearest-rank method (the value below which a fraction q falls)."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]
