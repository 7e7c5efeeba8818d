"""C3 and C4: the window bound, the batch-ACK cycle and slow-start rounds.

* ``window``: useful throughput ≤ min(B, W/R).  Bytes in flight to fill the link: the
  bandwidth-delay product B·R/8.  With one batch ACK per window, a cycle is W·8/B (sending the
  window) + R (waiting for its ACK), throughput W/cycle.
* ``slowstart``: the first round sends ``iw`` segments of ``mss`` bytes; each round multiplies the
  window by ``growth`` (2: doubling).  Rounds needed = smallest n whose cumulative bytes
  iw·mss·(g^n − 1)/(g − 1) reach ``size``; the time of those rounds is n·R (each round waits for
  the previous round's ACKs; no loss, no receive-window limit).
"""
from __future__ import annotations

from dataclasses import dataclass

from analysis.models.base import Params, Q, param, register


@dataclass(frozen=True)
class WindowParams(Params):
    rate: float = param(20e6, "bit/s", "path rate B", positive=True)
    rtt: float = param(0.1, "s", "round-trip time R", positive=True)
    window: float = param(64000, "B", "window W (bytes in flight)", positive=True)


@register("window", "C3", "window bound min(B, W/R) and the batch-ACK cycle", WindowParams)
def window(p: WindowParams) -> dict[str, Q]:
    send = p.window * 8 / p.rate
    cycle = send + p.rtt
    return {"bdp": Q(p.rate * p.rtt / 8, "B", "bytes in flight needed to fill the link"),
            "window_bound": Q(min(p.rate, p.window * 8 / p.rtt) / 1e6, "Mbit/s", "min(B, W/R)"),
            "window_rate": Q(p.window / p.rtt, "B/s", "W/R"),
            "batch_send": Q(send * 1e3, "ms", "time to send one window"),
            "batch_cycle": Q(cycle * 1e3, "ms", "send one window + wait R for its batch ACK"),
            "batch_throughput": Q(p.window * 8 / cycle / 1e6, "Mbit/s", "W per batch-ACK cycle")}


@dataclass(frozen=True)
class SlowStartParams(Params):
    size: float = param(354640, "B", "bytes to send")
    iw: int = param(10, "count", "initial window in segments", positive=True)
    mss: int = param(1460, "count", "segment size in bytes", positive=True)
    growth: float = param(2.0, "1", "window factor per round (2 = doubling)", low=1, positive=True)
    rtt: float = param(0.1, "s", "round-trip time per round")


def cumulative(p: SlowStartParams) -> list[float]:
    """Cumulative bytes sent after each round, up to the round that covers ``size``."""
    sent, flight, out = 0.0, float(p.iw * p.mss), []
    while not out or sent < p.size:
        if len(out) > 10_000:
            raise ValueError("--growth 1 with this --size needs more than 10,000 rounds")
        sent += flight
        out.append(sent)
        flight *= p.growth
    return out


@register("slowstart", "C4", "slow-start rounds to send a request", SlowStartParams)
def slowstart(p: SlowStartParams) -> dict[str, Q]:
    cum = cumulative(p)
    return {"rounds": Q(len(cum), "rounds", "rounds needed to send size"),
            "cumulative": Q(tuple(cum), "B", "cumulative bytes after each round"),
            "time": Q(len(cum) * p.rtt, "s", "rounds x RTT")}
