"""When the receiver sends an ACK.

A policy is ``every`` (N = 1), ``n:N`` (an ACK once N ack-eliciting packets are unacknowledged),
``t:T`` (T after the oldest unacknowledged ack-eliciting packet arrived) or ``n:N,t:T`` (whichever
comes first).  Under every policy an ACK also goes out at once when a packet completes a message
or carries the ACK_NOW flag (the sender's probes).  So without loss, M packets of one message
produce exactly ceil(M / N) ACKs under ``n:N``; under ``t:T`` one ACK per T-long window that
starts at an unacknowledged arrival, plus the one on completion.
"""
from __future__ import annotations

from dataclasses import dataclass

from testbed.spec.units import parse_time


@dataclass(frozen=True)
class AckPolicy:
    every_n: int | None = 1
    every_t_ns: int | None = None

    def __post_init__(self):
        if self.every_n is None and self.every_t_ns is None:
            raise ValueError("an ACK policy needs a packet count N, a time T, or both")
        if self.every_n is not None and self.every_n < 1:
            raise ValueError(f"ACK every N packets needs N >= 1, got {self.every_n}")
        if self.every_t_ns is not None and self.every_t_ns <= 0:
            raise ValueError(f"ACK every T needs T > 0, got {self.every_t_ns} ns")

    @classmethod
    def parse(cls, text: str) -> "AckPolicy":
        """'every' | 'n:N' | 't:T' | 'n:N,t:T' (T with a unit, e.g. 't:10ms')."""
        if text == "every":
            return cls(1, None)
        n = t = None
        try:
            for part in text.split(","):
                key, _, value = part.partition(":")
                if key == "n" and n is None:
                    n = int(value)
                elif key == "t" and t is None:
                    t = round(parse_time(value) * 1e9)
                else:
                    raise ValueError
        except ValueError:
            raise ValueError(f"bad ACK policy {text!r}; use every, n:N, t:TIME or n:N,t:TIME "
                             "(e.g. n:4,t:10ms)") from None
        return cls(n, t)

    def __str__(self) -> str:
        parts = []
        if self.every_n is not None:
            parts.append("every" if self.every_n == 1 and self.every_t_ns is None else f"n:{self.every_n}")
        if self.every_t_ns is not None:
            parts.append(f"t:{self.every_t_ns / 1e6:g}ms")
        return ",".join(parts)


class AckScheduler:
    """Receiver side of a policy: ``on_packet`` per arrival, ``due(now)`` whether to ACK now,
    ``deadline`` the time of the pending timer ACK (None if none), ``sent()`` after an ACK."""

    def __init__(self, policy: AckPolicy):
        self.policy = policy
        self.unacked = 0
        self.first_unacked: int | None = None
        self.immediate = False

    def on_packet(self, now: int, ack_eliciting: bool, immediate: bool) -> None:
        if ack_eliciting:
            if self.unacked == 0:
                self.first_unacked = now
            self.unacked += 1
        self.immediate = self.immediate or immediate

    def due(self, now: int) -> bool:
        if self.immediate:
            return True
        if self.unacked == 0:
            return False
        n = self.policy.every_n
        if n is not None and self.unacked >= n:
            return True
        d = self.deadline
        return d is not None and now >= d

    @property
    def deadline(self) -> int | None:
        if self.unacked == 0 or self.policy.every_t_ns is None:
            return None
        return self.first_unacked + self.policy.every_t_ns

    def sent(self) -> None:
        self.unacked = 0
        self.first_unacked = None
        self.immediate = False
