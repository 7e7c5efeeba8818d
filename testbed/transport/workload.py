"""The ``udpreq`` workload record: request/response over this package's transport
(``testbed/apps/udpreq.py``), registered in ``testbed.workloads`` (listed in its PLUGINS).

Factors of the transport are parameters of both sides: ``fec``, ``ack``, ``pacing``,
``loss_prior``, ``backoff`` (see ``config.TransportConfig``).  TCP socket factors (``--cc``,
``--window`` ...) do not apply and are refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..workloads import Workload, param, register_workload

PORT = 5003


@dataclass(frozen=True)
class UdpReqParams:
    mode: str = param("new", "a new socket and transport endpoint per request, or one kept "
                      "(warmed, so adaptive FEC starts from a measured loss rate)", choices=("new", "reuse"))
    requests: int = param(1, "timed requests K")
    think: str = param("0", "pause between requests", unit="time")
    warmup: int = param(1, "untimed requests on the kept endpoint (mode reuse)")
    size: str = param("354640", "request body N (the fixed generated file)", unit="size")
    reply_size: str = param("1000", "reply size M", unit="size")
    process: str = param("30ms", "server processing time T", unit="time")
    request_timeout: str = param("60s", "give up on a request after this long", unit="time")
    fec: str = param("off", "off | fixed:R | adaptive[:TARGET] (smallest r with "
                     "P(Binomial(k+r, p) <= r) >= TARGET, default 0.999)", side="both")
    ack_policy: str = param("every", "ACK policy: every | n:N | t:TIME | n:N,t:TIME", side="both")
    pacing: str = param("rate:333mbit", "off | rate:R | estimate (max delivery rate x gain)", side="both")
    loss_prior: str = param("0", "loss rate adaptive FEC assumes until it measured 100 packets",
                            side="both")
    backoff: bool = param(False, "halve the pacing rate once per RTT with a loss", side="both")

    def validate(self) -> None:
        from .config import TransportConfig
        if self.requests < 1:
            raise ValueError(f"requests {self.requests} must be >= 1")
        if self.warmup < 0:
            raise ValueError(f"warmup {self.warmup} must be >= 0")
        TransportConfig.from_factors(self.fec, self.ack_policy, self.pacing, self.loss_prior, self.backoff)


def _check(p: UdpReqParams, spec, topo) -> None:
    if spec.socket:
        raise UsageError(f"udpreq runs over UDP: TCP socket factors ({', '.join(spec.socket)}) do "
                         "not apply; use its fec, ack, pacing, loss_prior, backoff parameters")


def _metrics(run_dir: Path) -> dict:
    from analysis.fec import run_metrics
    return run_metrics(run_dir, PORT)


UDPREQ = register_workload(Workload(
    "udpreq", "request/response over the testbed's UDP transport: ARQ or RaptorQ FEC (C6)",
    "testbed.apps.udpreq", UdpReqParams, PORT, metrics=_metrics, check=_check))
