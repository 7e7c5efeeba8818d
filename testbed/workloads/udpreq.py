"""``reqresp`` over this package's transport (``--transport udp``; app ``testbed/apps/udpreq.py``),
registered as reqresp's record for transport udp.

Its parameters are reqresp's (``testbed.workloads.reqresp.ReqRespParams``): the shared ones plus those
declared ``transport="udp"`` — ``fec``, ``ack_policy``, ``pacing``, ``loss_prior``, ``backoff``
(see ``config.TransportConfig``) and ``request_timeout``.  TCP factors (socket: ``--cc``,
``--nodelay`` …; host: ``--initcwnd`` …) do not apply and are refused.
"""
from __future__ import annotations

from pathlib import Path

from testbed.spec.errors import UsageError
from testbed.workloads.base import WORKLOADS, Workload
from testbed.workloads.reqresp import ReqRespParams

PORT = 5003


def _check(p: ReqRespParams, spec, topo) -> None:
    given = [*spec.socket, *spec.host]
    if given:
        raise UsageError(f"reqresp over transport udp: TCP factors ({', '.join(given)}) do not "
                         "apply; the UDP transport's own are the parameters fec, ack_policy, "
                         "pacing, loss_prior, backoff, send_window")


def _metrics(run_dir: Path) -> dict:
    from analysis.fec import run_metrics
    return run_metrics(run_dir, PORT)


UDP_REQRESP = WORKLOADS.register(Workload(
    "reqresp", "request/response over the testbed's UDP transport: ARQ or RaptorQ FEC (C6)",
    "testbed.apps.udpreq", ReqRespParams, PORT, metrics=_metrics, check=_check, transport="udp"))
