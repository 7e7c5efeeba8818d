"""C5: the long-haul path seen by loss-based and model-based congestion control.

* Mathis bound: rate ≤ C·MSS/(R·√p) (C = 1 in the chapter's first figure, 1.22 in its second);
  time to send ``size`` at that rate.
* BBR's view: BDP = B·R; the in-flight cap cwnd_gain·BDP; ideal goodput with random loss p that is
  not taken as congestion: (1 − p)·B.
* Queue overflow above the knee: a sender at rate S > B through a bottleneck of rate B loses the
  fraction 1 − B/S once its queue is full (random loss on top: 1 − (1 − p)·B/S).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.models.base import Params, Q, param, register


@dataclass(frozen=True)
class LongHaulParams(Params):
    mss: int = param(1448, "count", "segment size in bytes", positive=True)
    rtt: float = param(0.2, "s", "round-trip time", positive=True)
    loss: float = param(0.14, "1", "random loss rate p", high=1, positive=True)
    mathis_c: float = param(1.0, "1", "Mathis constant C (1 or 1.22)", positive=True)
    capacity: float = param(333e6, "bit/s", "bottleneck rate B (the knee)", positive=True)
    cwnd_gain: float = param(2.0, "1", "BBR cwnd_gain", positive=True)
    size: float = param(354640, "B", "request to send at the Mathis rate")
    send_rate: float = param(600e6, "bit/s", "sending rate for the overflow loss", positive=True)
    overflow_random_loss: bool = param(False, "bool", "add random loss p to the overflow loss")


@register("longhaul", "C5", "Mathis bound, BBR's view and overflow loss on the long-haul path",
          LongHaulParams)
def longhaul(p: LongHaulParams) -> dict[str, Q]:
    mathis = p.mathis_c * p.mss * 8 / (p.rtt * math.sqrt(p.loss))
    bdp = p.capacity * p.rtt / 8
    delivered = min(1.0, p.capacity / p.send_rate) * ((1 - p.loss) if p.overflow_random_loss else 1)
    return {"mathis": Q(mathis / 1e6, "Mbit/s", "C·MSS/(R·sqrt(p))"),
            "mathis_transfer": Q(p.size * 8 / mathis, "s", "size sent at the Mathis rate"),
            "bdp": Q(bdp / 1e6, "MB", "B·R"),
            "bbr_inflight_cap": Q(p.cwnd_gain * bdp / 1e6, "MB", "cwnd_gain·BDP"),
            "bbr_goodput": Q((1 - p.loss) * p.capacity / 1e6, "Mbit/s", "(1 − p)·B"),
            "overflow_loss": Q(1 - delivered, "1", "loss at send_rate through the bottleneck")}
