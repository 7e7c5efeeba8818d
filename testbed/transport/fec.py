"""Forward error correction: the redundancy rule, the loss-rate estimate it follows, and RaptorQ
(RFC 6330, the ``raptorq`` package) blocks of one message each.

A message of L bytes is one source block of k = ceil(L / 1448) source symbols (the message bytes,
the last one zero-padded: the code is systematic) and any number of repair symbols (ESI >= k).
RaptorQ decodes from any k received symbols with probability > 99 % (RFC 6330 says a failure
rate below 1 in 100 at k, 1 in 10^4 at k+1, 1 in 10^6 at k+2); a failed attempt asks for one
more symbol.

Redundancy r for a block of k (``FecPolicy.repair_count``):
- ``off``: r = 0 (selective-repeat ARQ only);
- ``fixed:R``: r = R for a whole message; a fallback of d symbols gets ceil(R·d/k) extra;
- ``adaptive[:target]``: the smallest r with P(Binomial(k + r, p) <= r) >= target (default
  0.999), i.e. with probability >= target at most r of the k + r symbols are lost; p is the
  loss rate the sender currently estimates (``LossEstimator``).  At p = 0.14, k = 245: r = 63.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import raptorq
from scipy.special import bdtr            # binomial CDF: bdtr(r, n, p) = P(Binomial(n, p) <= r)

from testbed.transport.wire import PAYLOAD_ID, SYMBOL, k_of

MAX_REPAIR = 1 << 16


@dataclass(frozen=True)
class FecPolicy:
    mode: str = "off"              # off | fixed | adaptive
    repair: int = 0                # fixed: R
    target: float = 0.999          # adaptive: decode probability

    def __post_init__(self):
        if self.mode not in ("off", "fixed", "adaptive"):
            raise ValueError(f"FEC mode {self.mode!r}; use off, fixed:R or adaptive[:target]")
        if self.repair < 0:
            raise ValueError(f"fixed repair count {self.repair} is negative")
        if not 0.0 < self.target < 1.0:
            raise ValueError(f"adaptive target {self.target} must be in (0, 1), e.g. 0.999")

    @classmethod
    def parse(cls, text: str) -> "FecPolicy":
        """'off' | 'fixed:R' | 'adaptive' | 'adaptive:TARGET'."""
        mode, _, value = text.partition(":")
        number = None
        if value:
            try:
                number = int(value) if mode == "fixed" else float(value)
            except ValueError:
                pass
        if mode == "off" and not value:
            return cls()
        if mode == "fixed" and number is not None:
            return cls("fixed", repair=number)
        if mode == "adaptive" and (number is not None or not value):
            return cls("adaptive", target=0.999 if number is None else number)
        raise ValueError(f"bad FEC setting {text!r}; use off, fixed:R (R repair symbols per "
                         "message) or adaptive[:TARGET] (e.g. adaptive:0.999)")

    def __str__(self) -> str:
        return {"off": "off", "fixed": f"fixed:{self.repair}",
                "adaptive": f"adaptive:{self.target:g}"}[self.mode]

    def repair_count(self, k: int, p: float, k_message: int | None = None) -> int:
        """Repair symbols to add to ``k`` symbols at loss rate ``p``; ``k_message`` is the
        message's k when ``k`` is a fallback's deficit (fixed mode scales R down to it)."""
        if self.mode == "off" or k <= 0:
            return 0
        if self.mode == "fixed":
            km = k_message or k
            return -(-self.repair * k // km)
        return adaptive_repair(k, p, self.target)


def adaptive_repair(k: int, p: float, target: float = 0.999) -> int:
    """Smallest r with P(Binomial(k + r, p) <= r) >= target (capped at MAX_REPAIR)."""
    if p <= 0.0:
        return 0
    lo, hi = 0, 1
    while bdtr(hi, k + hi, p) < target:       # exponential search, then bisection
        lo, hi = hi, hi * 2
        if hi >= MAX_REPAIR:
            return MAX_REPAIR
    while lo < hi:
        mid = (lo + hi) // 2
        if bdtr(mid, k + mid, p) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


class LossEstimator:
    """The sender's loss rate: the fraction of lost packets among the last ``window`` data
    packets whose fate is known (ACKed, or declared lost), or ``prior`` while fewer than
    ``min_samples`` fates are known.  ACK-only packets are not counted."""

    def __init__(self, prior: float = 0.0, window: int = 1000, min_samples: int = 100):
        self.prior, self.min_samples = prior, min_samples
        self._fates: deque[bool] = deque(maxlen=window)
        self._lost = 0

    def record(self, lost: bool) -> None:
        if len(self._fates) == self._fates.maxlen and self._fates[0]:
            self._lost -= 1
        self._fates.append(lost)
        self._lost += lost

    @property
    def samples(self) -> int:
        return len(self._fates)

    @property
    def p(self) -> float:
        if len(self._fates) < self.min_samples:
            return self.prior
        return self._lost / len(self._fates)


def source_symbol(data: bytes, esi: int) -> bytes:
    chunk = data[esi * SYMBOL:(esi + 1) * SYMBOL]
    return chunk if len(chunk) == SYMBOL else chunk.ljust(SYMBOL, b"\0")


class BlockEncoder:
    """Symbols of one message: source ESIs 0..k-1 are slices, repair ESIs come from RaptorQ,
    generated the first time one is asked for: ``repair_hint`` of them (the r the sender chose),
    or twice as many as asked for when more are needed later."""

    def __init__(self, data: bytes, repair_hint: int = 0):
        self.data = data
        self.k = k_of(len(data))
        self.repair_hint = repair_hint
        self._encoder = None
        self._repair: list[bytes] = []

    def symbol(self, esi: int) -> bytes:
        if esi < self.k:
            return source_symbol(self.data, esi)
        i = esi - self.k
        if i >= len(self._repair):
            if self._encoder is None:
                self._encoder = raptorq.Encoder.with_defaults(self.data or b"\0", SYMBOL)
            n = max(2 * (i + 1), self.repair_hint) if self._repair else max(i + 1, self.repair_hint)
            packets = self._encoder.get_encoded_packets(n)
            self._repair = [p[PAYLOAD_ID.size:] for p in packets[self.k:]]
        return self._repair[i]


def decode(length: int, packets: list[bytes]) -> bytes | None:
    """RaptorQ decode of one block from serialized packets (payload id + symbol); None if the
    received symbols do not determine it."""
    decoder = raptorq.Decoder.with_defaults(length or 1, SYMBOL)
    for p in packets:
        out = decoder.decode(p)
        if out is not None:
            return bytes(out[:length])
    return None
