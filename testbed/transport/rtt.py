"""Round-trip time estimate, RFC 6298 section 2 (times in integer ns).

First sample R: SRTT = R, RTTVAR = R/2.  Later samples: RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|,
then SRTT = 7/8 SRTT + 1/8 R.  RTO = SRTT + max(G, 4 RTTVAR) with clock granularity G, at least
``min_rto`` (RFC 6298 says 1 s; the default here is 200 ms like Linux) and at most 60 s; before
the first sample RTO = ``initial_rto`` (1 s).  Samples follow Karn's rule by construction: a
retransmitted symbol travels in a new packet with its own number, so every ACKed packet gives
an unambiguous sample.  As in QUIC (RFC 9002 section 5.3), the receiver's reported ACK delay is
subtracted from a sample when the result stays above the minimum RTT seen.
"""
from __future__ import annotations

MS = 1_000_000


class RttEstimator:
    def __init__(self, granularity_ns: int = 1 * MS, min_rto_ns: int = 200 * MS,
                 initial_rto_ns: int = 1000 * MS):
        self.granularity = granularity_ns
        self.min_rto = min_rto_ns
        self.initial_rto = initial_rto_ns
        self.srtt: int | None = None
        self.rttvar = 0
        self.min_rtt: int | None = None
        self.latest: int | None = None
        self.samples = 0

    def sample(self, rtt_ns: int, ack_delay_ns: int = 0) -> None:
        self.min_rtt = rtt_ns if self.min_rtt is None else min(self.min_rtt, rtt_ns)
        if rtt_ns - ack_delay_ns >= self.min_rtt:
            rtt_ns -= ack_delay_ns
        self.latest = rtt_ns
        self.samples += 1
        if self.srtt is None:
            self.srtt, self.rttvar = rtt_ns, rtt_ns // 2
        else:
            self.rttvar = (3 * self.rttvar + abs(self.srtt - rtt_ns)) // 4
            self.srtt = (7 * self.srtt + rtt_ns) // 8

    @property
    def rto(self) -> int:
        if self.srtt is None:
            return self.initial_rto
        return min(60_000 * MS, max(self.min_rto, self.srtt + max(self.granularity, 4 * self.rttvar)))
