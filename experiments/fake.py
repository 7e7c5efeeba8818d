"""A stand-in executor with the shape of ``testbed.execute.execute`` — ``(spec, out_dir, **kw) ->
RunResult`` — for tests and dry runs without root: no packets, numbers drawn from a seeded
distribution per level, read-backs that say the factor took effect unless the level is listed in
``broken`` (then the read-back shows the base value, as when a factor silently fails)."""
from __future__ import annotations

import time
import zlib
from pathlib import Path

import numpy as np

from testbed.errors import RunError
from testbed.runresult import RunResult

_READBACK = {"params.mode": lambda v: {"syn_per_request": 1.0 if v == "new" else 0.0},
             "socket.cc": lambda v: {"cc": [v, v]},
             "host.ack": lambda v: {"data_segments_per_ack": 1.0 if v == "quick" else 1.17},
             "host.initcwnd": lambda v: {"first_flight_segments": int(v)},
             "params.path": lambda v: {"path": {"client-client-eth0.pcap": 900, "cgw-cgw-eth0.pcap": 900,
                                                "server-server-eth0.pcap": 0 if v == "relay" else 900}},
             "host.slow_start_after_idle": lambda v: {"host_factors": {
                 h: {"slow_start_after_idle": int(v)} for h in ("client", "server")}}}


class FakeExecutor:
    """``medians``: level value -> median of the primary metric (ms); ``factor``: the RunSpec path;
    ``broken``: level values whose read-back shows ``broken_as`` instead; ``fail``: run indices
    (call order) that raise RunError; ``crash_after``: raise KeyboardInterrupt on that call."""

    def __init__(self, factor: str, medians: dict, *, metric: str = "completion_ms_median",
                 spread: float = 0.05, broken: tuple = (), broken_as=None, fail: tuple = (),
                 crash_after: int | None = None, overloaded: tuple = ()):
        self.factor, self.medians, self.metric, self.spread = factor, medians, metric, spread
        self.broken, self.broken_as, self.fail = broken, broken_as, fail
        self.crash_after, self.overloaded = crash_after, overloaded
        self.calls: list[tuple] = []

    def __call__(self, spec, out_dir, **kw) -> RunResult:
        n = len(self.calls)
        if self.crash_after is not None and n == self.crash_after:
            raise KeyboardInterrupt
        level = spec.get(self.factor)
        self.calls.append((level, spec.seed, kw.get("testbed")))
        out = Path(out_dir)
        out.mkdir(parents=True)
        rng = np.random.default_rng([spec.seed, zlib.crc32(str(level).encode())])
        med = self.medians[level]
        values = list(med * np.exp(rng.normal(0, self.spread, 10)))
        shown = self.broken_as if level in self.broken else level
        checks = _READBACK.get(self.factor, lambda v: {})(shown)
        now = time.time()
        result = RunResult(run_id=f"fake-{n}", dir=out, spec=spec, status="complete", error=None,
                           started=now, finished=now,
                           metrics={self.metric: float(np.median(values)), "completion_ms": values},
                           checks=checks,
                           fidelity={"verdict": "overloaded" if n in self.overloaded else "ok",
                                     "backend": "fake", "unintended_drops": 0})
        if n in self.fail:
            result.status, result.error = "failed", "fake failure"
            result.write()
            raise RunError("fake failure", run_dir=out, result=result)
        result.write()
        return result
