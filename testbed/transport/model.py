"""The ideal round model of CHAPTER12.md C6, run over the emulator's loss model in virtual time.

The closed forms are ``analysis.models.recovery`` (``testbed model fec``): ideal selective repeat
P(all k delivered within n rounds) = (1 − pⁿ)ᵏ, completion = serial budget (RTT + processing +
k·MSS/rate) + (N − 1)·RTT; at k = 245, p = 0.14, RTT 200 ms: mean 0.756 s, p99 1.2385 s.

``round_trial`` draws one transfer through a ``DirectionModel`` instead of the formula.  What it
assumes, exactly: the sender puts a round's packets back to back on the model (its rate, its
seeded Bernoulli loss stream, one-way delay RTT/2); the receiver's report of what arrived reaches
the sender RTT/2 after the round's last packet would have arrived (no ACK loss, no timers, no
reordering, nothing but propagation in the feedback); the next round carries exactly the packets
still needed.  With FEC the first round carries k + r symbols and the block is complete when any k
arrived (an ideal MDS code; RaptorQ needs k with probability > 99 %); later rounds carry the
deficit without new redundancy.  Completion = arrival of the last needed packet + processing +
RTT/2 for the response (never lost, its sending time ignored).  It differs from the closed form
only by the sending time of the retransmission rounds (≈ 1 ms in total at 333 Mbit/s).
"""
from __future__ import annotations

import math

from testbed.emulator.direction import DELIVER, DirectionModel


def round_trial(k: int, r: int, link: DirectionModel, rtt_ns: int, process_ns: int,
                frame_len: int, start_ns: int) -> tuple[int, int]:
    """One transfer in the round model; returns (completion ns from ``start_ns``, rounds)."""
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
            else:
                when += half                 # DROP_LOSS reports the end of its transmission
            last = max(last, when)
        if len(arrivals) >= need:
            arrivals.sort()
            return arrivals[need - 1] + process_ns + half - start_ns, rounds
        need -= len(arrivals)
        t = last + half                      # the report reaches the sender
        send = need


def trials(n: int, k: int, r: int, link: DirectionModel, rtt_ns: int, process_ns: int,
           frame_len: int, gap_ns: int = 10**9) -> list[tuple[int, int]]:
    """``n`` transfers one after the other on ``link`` (``gap_ns`` apart, so none overlap)."""
    out, t = [], 0
    for _ in range(n):
        c, rounds = round_trial(k, r, link, rtt_ns, process_ns, frame_len, t)
        out.append((c, rounds))
        t += c + gap_ns
    return out


def quantile(values, q: float) -> float:
    """The q-quantile by the nearest-rank method: the smallest value with at least a fraction q
    of the values at or below it."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]
