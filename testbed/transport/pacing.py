"""Pacing: when the next packet may leave.

Policies (``PacingPolicy.parse``):
- ``off``: no pacing, every queued packet leaves at once;
- ``rate:R`` (e.g. ``rate:333mbit``): a fixed rate R;
- ``estimate``: the delivery-rate estimate ``DeliveryRate`` — the maximum delivery-rate sample
  (bytes newly ACKed between a packet's send and its ACK, over that interval, as in BBR /
  draft-cheng-iccrg-delivery-rate-estimation) over the last ``window`` (default 10 round trips)
  — times a gain: 2.885 in startup (until the maximum grew less than 25 % over three round
  trips), then 1.  The in-flight cap is twice the estimated BDP (max rate × min RTT), so at
  most one BDP waits in the bottleneck queue, and never below ``initial_window`` packets nor
  twice the ACK policy's N (else a receiver waiting for N packets and a sender waiting for an
  ACK would stall each other until a probe timeout); before the
  first sample an initial window of ``initial_window`` packets goes out unpaced.

No policy slows down on loss unless ``backoff`` is set in the configuration (then the rate is
halved once per round trip that had a loss, ``endpoint``).

``Pacer``: a packet of ``size`` bytes may leave when ``now >= next_time − quantum``; sending it
moves ``next_time`` by size·8/rate from max(next_time, now − burst), so a late wake-up (the I/O
loop's timer) may send at most ``burst`` ns worth of backlog at once, and a wake-up sends the
packets due within the next ``quantum`` ns together (the real loop uses 250 µs, 7 packets at
333 Mbit/s, instead of waking for every packet; the virtual-time harness uses 0).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from testbed.spec.units import parse_rate

STARTUP_GAIN = 2.885


@dataclass(frozen=True)
class PacingPolicy:
    mode: str = "off"                 # off | rate | estimate
    rate_bps: float | None = None

    def __post_init__(self):
        if self.mode not in ("off", "rate", "estimate"):
            raise ValueError(f"pacing mode {self.mode!r}; use off, rate:R or estimate")
        if self.mode == "rate" and not (self.rate_bps and self.rate_bps > 0):
            raise ValueError(f"pacing rate must be > 0, got {self.rate_bps}")

    @classmethod
    def parse(cls, text: str) -> "PacingPolicy":
        """'off' | 'rate:R' (R like 333mbit) | 'estimate'."""
        mode, _, value = text.partition(":")
        if mode in ("off", "estimate") and not value:
            return cls(mode)
        if mode == "rate" and value:
            return cls("rate", parse_rate(value))
        raise ValueError(f"bad pacing setting {text!r}; use off, rate:R (e.g. rate:333mbit) or estimate")

    def __str__(self) -> str:
        return f"rate:{self.rate_bps / 1e6:g}mbit" if self.mode == "rate" else self.mode


class Pacer:
    def __init__(self, burst_ns: int = 1_000_000, quantum_ns: int = 0):
        self.burst = burst_ns
        self.quantum = quantum_ns
        self.next_time = 0

    def ready(self, now: int) -> bool:
        return now >= self.next_time - self.quantum

    @property
    def wake(self) -> int:
        """When the next packet may leave (``next_time`` less the quantum)."""
        return self.next_time - self.quantum

    def sent(self, now: int, size: int, rate_bps: float | None) -> None:
        if rate_bps is None:
            return
        self.next_time = max(self.next_time, now - self.burst) + round(size * 8e9 / rate_bps)


class DeliveryRate:
    """Delivery-rate samples and their windowed maximum (bytes per second)."""

    def __init__(self, window_rounds: int = 10):
        self.delivered = 0               # bytes ACKed so far
        self.delivered_time = 0
        self.round = 0
        self._round_end = 0              # a round ends when a packet sent after it started is ACKed
        self._samples: deque[tuple[int, float]] = deque()   # (round, rate)
        self.window_rounds = window_rounds
        self.max_rate: float | None = None
        self.full = False
        self._full_rate, self._full_count = 0.0, 0

    def on_sent(self) -> tuple[int, int]:
        """State to store with a packet: (delivered, delivered_time)."""
        return self.delivered, self.delivered_time

    def on_acked(self, now: int, size: int, sent_state: tuple[int, int], sent_time: int) -> None:
        self.delivered += size
        self.delivered_time = now
        pdelivered, ptime = sent_state
        if pdelivered >= self._round_end:
            self._round_end = self.delivered
            self.round += 1
            self._check_full()
        interval = max(now - (ptime if ptime else sent_time), 1)
        rate = (self.delivered - pdelivered) * 1e9 / interval
        samples = self._samples            # monotonic: rates decrease from left to right
        while samples and samples[-1][1] <= rate:
            samples.pop()
        samples.append((self.round, rate))
        while samples[0][0] <= self.round - self.window_rounds:
            samples.popleft()
        self.max_rate = samples[0][1]

    def _check_full(self) -> None:
        if self.full or self.max_rate is None:
            return
        if self.max_rate >= 1.25 * self._full_rate:
            self._full_rate, self._full_count = self.max_rate, 0
        else:
            self._full_count += 1
            self.full = self._full_count >= 3

    @property
    def gain(self) -> float:
        return 1.0 if self.full else STARTUP_GAIN
