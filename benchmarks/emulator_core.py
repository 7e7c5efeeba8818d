"""Micro-benchmark of the emulator's sans-I/O core: ``DirectionModel.arrive()`` calls per second.

Virtual time, no I/O: full-size frames (1514 B) offered at 99% of the bottleneck rate, so the
queue is busy but rarely full.  Prints calls/s per configuration and the headroom against the
forwarder's need at the long-haul path's 333 Mbit/s (1514 B frames: 27,500 frames/s per
direction; both directions plus ACKs stay below 40,000 calls/s), and against a peer in the same
run: a bare Python method call doing nothing (the ceiling for any pure-Python model).

    .venv/bin/python benchmarks/emulator_core.py [--frames N]
"""
from __future__ import annotations

import argparse
import time

from testbed.emulator.airtime import AirMedium, AirtimeSpec
from testbed.emulator.direction import DirectionModel
from testbed.spec.linkspec import Bernoulli, GilbertElliott, LinkSpec

FRAME = 1514
NEEDED = 40_000


class _Noop:
    def arrive(self, now_ns, frame_len):
        return 0, now_ns


def _configs():
    yield "empty method call (peer)", lambda: _Noop(), 333e6
    yield "unshaped, delay only", lambda: DirectionModel(LinkSpec(delay=0.1), 1), 333e6
    yield "333 Mbit/s, Bernoulli 14%", lambda: DirectionModel(
        LinkSpec(rate=333e6, delay=0.1, loss=Bernoulli(0.14)), 1), 333e6
    yield "333 Mbit/s, Gilbert-Elliott, jitter", lambda: DirectionModel(
        LinkSpec(rate=333e6, delay=0.1, jitter=0.001, loss=GilbertElliott(0.01, 0.1)), 1), 333e6
    yield ("shared 54 Mbit/s air", lambda: DirectionModel(
        LinkSpec(delay=0.001), 1, medium=AirMedium(AirtimeSpec(), 1)),
        1 / AirtimeSpec().exchange_time(FRAME - 14) * FRAME * 8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=500_000, help="frames per configuration")
    n = ap.parse_args().frames
    print(f"{'configuration':40s} {'calls/s':>12s} {'x needed':>9s} {'x peer':>7s}")
    peer = None
    for label, make, rate in _configs():
        model = make()
        arrive = model.arrive
        gap = int(FRAME * 8 / (0.99 * rate) * 1e9)
        t0 = time.perf_counter()
        now = 0
        for _ in range(n):
            arrive(now, FRAME)
            now += gap
        rate_calls = n / (time.perf_counter() - t0)
        peer = peer or rate_calls
        print(f"{label:40s} {rate_calls:12,.0f} {rate_calls / NEEDED:9.1f} {rate_calls / peer:7.2f}")


if __name__ == "__main__":
    main()
