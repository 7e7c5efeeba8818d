"""C6: retransmission rounds vs forward erasure coding on a lossy direction.

n = ceil(size/mss) packets, each lost independently with probability p.

* Ideal selective repeat: every round sends what is still missing; a round costs one RTT and its
  retransmissions can be lost again.  Rounds N until all arrived: P(N ≤ k) = (1 − p^k)^n.
  Completion = serial budget + (N − 1)·RTT, serial budget = RTT + compute + size·8/rate (the
  first round is inside the budget).  E[N] = Σ_{k≥0} P(N > k).
* Systematic erasure code, one symbol = one packet: the smallest r with
  P(Binomial(n + r, p) ≤ r) ≥ ``target`` — any n of the n + r symbols decode.  Completion =
  RTT + compute + (n + r)·mss·8/rate, no retransmission round (with probability ≥ target).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from analysis.models.base import UNIT_HIGH, Params, Q, param, register


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) ≤ k), summed in log space (exact enough for n up to ~10^5)."""
    if k >= n:
        return 1.0
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                                 + i * lp + (n - i) * lq) for i in range(k + 1)))


def arq_cdf(k: int, n: int, p: float) -> float:
    """P(all n packets delivered within k rounds) = (1 − p^k)^n."""
    return 0.0 if k <= 0 else (1 - p ** k) ** n


def fec_repair(n: int, p: float, target: float, limit: int = 100_000) -> int:
    """Smallest r with P(Binomial(n + r, p) ≤ r) ≥ target, by bisection: that probability grows
    with r (n + r + 1 trials have at most one loss more than n + r)."""
    if binom_cdf(limit, n + limit, p) < target:
        raise ValueError(f"no repair count up to {limit} reaches {target} at loss {p} for {n} packets; "
                         "lower the loss or the packets")
    low, high = 0, limit
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if binom_cdf(mid, n + mid, p) >= target else (mid + 1, high)
    return low


@dataclass(frozen=True)
class RecoveryParams(Params):
    size: float = param(354640, "B", "request size", positive=True)
    mss: int = param(1448, "count", "bytes per packet / symbol", positive=True)
    packets: int | None = param(None, "count", "packets n (default: ceil(size/mss))", positive=True)
    loss: float = param(0.14, "1", "independent loss probability p", high=0.999)
    rtt: float = param(0.2, "s", "round-trip time (one retransmission round)")
    compute: float = param(0.03, "s", "model time at the server")
    rate: float = param(333e6, "bit/s", "sending rate", positive=True)
    target: float = param(0.999, "1", "FEC: probability of decoding without retransmission",
                          high=0.999999, positive=True)
    quantile: float = param(0.99, "1", "ARQ completion quantile to report", high=0.999999,
                            positive=True)

    def __post_init__(self):
        super().__post_init__()
        if n_packets(self) > UNIT_HIGH["count"]:
            raise ValueError(f"--size {self.size:g} B is {n_packets(self)} packets of --mss {self.mss} B; at "
                             f"most {UNIT_HIGH['count']}: give a smaller --size, a larger --mss or --packets")


def n_packets(p: RecoveryParams) -> int:
    return p.packets if p.packets is not None else math.ceil(p.size / p.mss)


@register("fec", "C6", "ideal selective-repeat rounds vs systematic FEC redundancy", RecoveryParams)
def recovery(p: RecoveryParams) -> dict[str, Q]:
    n = n_packets(p)
    budget = p.rtt + p.compute + n * p.mss * 8 / p.rate
    mean_rounds, k = 0.0, 0
    while True:
        tail = 1 - arq_cdf(k, n, p.loss)
        if tail < 1e-12:
            break
        mean_rounds += tail
        k += 1
    q_rounds = next(k for k in itertools.count(1) if arq_cdf(k, n, p.loss) >= p.quantile)
    r = fec_repair(n, p.loss, p.target)
    fec_send = (n + r) * p.mss * 8 / p.rate
    return {"packets": Q(n, "packets", "n"),
            "expected_lost": Q(n * p.loss, "packets", "n·p lost in the first round"),
            "serial_budget": Q(budget * 1e3, "ms", "RTT + compute + n·mss/rate"),
            "arq_mean_rounds": Q(mean_rounds, "rounds", "E[N]"),
            "arq_mean": Q((budget + (mean_rounds - 1) * p.rtt), "s", "expected ARQ completion"),
            "arq_quantile_rounds": Q(q_rounds, "rounds", "rounds at the quantile"),
            "arq_quantile": Q(budget + (q_rounds - 1) * p.rtt, "s", "ARQ completion at the quantile"),
            "fec_repair": Q(r, "symbols", "repair symbols r"),
            "fec_redundancy": Q(r / n, "1", "r/n"),
            "fec_send": Q(fec_send * 1e3, "ms", "(n + r) symbols at the rate"),
            "fec_completion": Q((p.rtt + p.compute + fec_send) * 1e3, "ms",
                                "RTT + compute + sending n + r symbols")}
