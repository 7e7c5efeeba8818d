"""``TransportConfig``: every switch of the transport in one frozen, validated record.

Factor strings (as the CLI and experiments give them) parse with ``from_factors``:
``fec`` (off | fixed:R | adaptive[:target]), ``ack`` (every | n:N | t:T | n:N,t:T),
``pacing`` (off | rate:R | estimate), ``loss_prior`` (the loss rate adaptive FEC assumes until
it has measured ``min_loss_samples`` packet fates), ``backoff`` (halve the pacing rate once per
round trip with a loss; off by default: loss here is not congestion), ``window`` (none | SIZE: a
fixed window, at most SIZE bytes of symbols — ``wire.SYMBOL`` each — sent and not yet
acknowledged or declared lost, as TCP's window counts payload bytes; probes may exceed it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from testbed.spec.units import parse_probability, parse_size
from testbed.transport.ackpolicy import AckPolicy
from testbed.transport.fec import FecPolicy
from testbed.transport.pacing import PacingPolicy
from testbed.transport.wire import SYMBOL

MS = 1_000_000


@dataclass(frozen=True)
class TransportConfig:
    fec: FecPolicy = field(default_factory=FecPolicy)
    ack: AckPolicy = field(default_factory=AckPolicy)
    pacing: PacingPolicy = field(default_factory=lambda: PacingPolicy("rate", 333e6))
    loss_prior: float = 0.0
    loss_window: int = 1000
    min_loss_samples: int = 100
    backoff: bool = False
    reorder_threshold: int = 3        # packets (RFC 9002 kPacketThreshold)
    time_threshold: float = 9 / 8     # x max(srtt, latest RTT) (RFC 9002 kTimeThreshold)
    max_ack_delay_ns: int = 0         # the peer's promise, added to the PTO
    min_rto_ns: int = 200 * MS
    initial_rto_ns: int = 1000 * MS
    initial_window: int = 10          # packets before the first delivery-rate sample (estimate)
    burst_ns: int = 1 * MS
    pacing_quantum_ns: int = 0        # pacing.Pacer; the UDP loop sets 250 µs
    window: int | None = None         # bytes of symbols in flight at most (None: no fixed window)

    def __post_init__(self):
        if not 0.0 <= self.loss_prior < 1.0:
            raise ValueError(f"loss prior {self.loss_prior} must be in [0, 1)")
        if self.reorder_threshold < 1:
            raise ValueError(f"reorder threshold {self.reorder_threshold} must be >= 1")
        if self.time_threshold < 1.0:
            raise ValueError(f"time threshold {self.time_threshold} must be >= 1")
        if self.window is not None and self.window < SYMBOL:
            raise ValueError(f"send window {self.window} B holds no symbol: give at least {SYMBOL} B (one symbol)")

    @classmethod
    def from_factors(cls, fec: str = "off", ack: str = "every", pacing: str = "rate:333mbit",
                     loss_prior: str | float = 0.0, backoff: bool = False,
                     window: str = "none") -> "TransportConfig":
        ackp = AckPolicy.parse(ack)
        return cls(fec=FecPolicy.parse(fec), ack=ackp, pacing=PacingPolicy.parse(pacing),
                   loss_prior=parse_probability(loss_prior), backoff=backoff,
                   max_ack_delay_ns=ackp.every_t_ns or 0,
                   window=None if window == "none" else parse_size(window))

    def describe(self) -> dict:
        return {"fec": str(self.fec), "ack": str(self.ack), "pacing": str(self.pacing),
                "loss_prior": self.loss_prior, "backoff": self.backoff, "window": self.window}
