"""C11: two access paths — split a transfer, or duplicate it.

* ``split``: S bytes, a fraction x on path 1 (rate B1), the rest on path 2 (B2), independent:
  T(x) = max(x·S/B1, (1 − x)·S/B2), minimal at x = B1/(B1 + B2).  If both paths then share one
  egress of rate E, T ≥ S/E too.
* ``duplicate``: every chunk on both paths; it fails if the common endpoint fails (q) or both
  paths fail: p_fail = q + (1 − q)·p1·p2.  Bytes sent: 2 × chunks × chunk size.
"""
from __future__ import annotations

from dataclasses import dataclass

from analysis.models.base import Params, Q, param, register


@dataclass(frozen=True)
class SplitParams(Params):
    size: float = param(30e6, "B", "bytes to send S")
    rate1: float = param(20e6, "bit/s", "path 1 rate", positive=True)
    rate2: float = param(10e6, "bit/s", "path 2 rate", positive=True)
    egress: float = param(24e6, "bit/s", "shared egress rate after both paths", positive=True)
    fraction: float | None = param(None, "1", "fraction on path 1 (default: the best, B1/(B1+B2))",
                                   high=1)


def split_time(x: float, p: SplitParams) -> float:
    return max(x * p.size * 8 / p.rate1, (1 - x) * p.size * 8 / p.rate2)


@register("split", "C11", "split one transfer over two paths", SplitParams)
def split(p: SplitParams) -> dict[str, Q]:
    best = p.rate1 / (p.rate1 + p.rate2)
    x = best if p.fraction is None else p.fraction
    t = split_time(x, p)
    return {"fraction": Q(x, "1", "fraction on path 1"),
            "best_fraction": Q(best, "1", "B1/(B1+B2)"),
            "bytes1": Q(x * p.size / 1e6, "MB", "on path 1"),
            "bytes2": Q((1 - x) * p.size / 1e6, "MB", "on path 2"),
            "split_time": Q(t, "s", "independent paths"),
            "fast_path_only": Q(p.size * 8 / max(p.rate1, p.rate2), "s", "faster path alone"),
            "with_egress": Q(max(t, p.size * 8 / p.egress), "s", "both paths into the shared egress")}


@dataclass(frozen=True)
class DuplicateParams(Params):
    p1: float = param(0.1, "1", "path 1 failure probability", high=1)
    p2: float = param(0.05, "1", "path 2 failure probability", high=1)
    q: float = param(0.02, "1", "common endpoint failure probability", high=1)
    chunks: int = param(8, "count", "audio chunks")
    chunk_bytes: float = param(640, "B", "bytes per chunk")


@register("duplicate", "C11", "duplicate chunks on both paths: failure probability and bytes",
          DuplicateParams)
def duplicate(p: DuplicateParams) -> dict[str, Q]:
    return {"p_fail": Q(p.q + (1 - p.q) * p.p1 * p.p2, "1", "q + (1 − q)·p1·p2"),
            "p_fail_single_best": Q(p.q + (1 - p.q) * min(p.p1, p.p2), "1", "better path alone"),
            "bytes": Q(2 * p.chunks * p.chunk_bytes, "B", "bytes sent, duplicated")}
