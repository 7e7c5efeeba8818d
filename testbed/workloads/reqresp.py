"""``reqresp`` (C7): K timed requests of N bytes, each answered after T with M bytes, over a new
or one kept connection, directly or through the SOCKS5 gateway pair (topology relay), over TCP
(app ``testbed/apps/reqresp.py``) or the testbed's UDP transport (``--transport udp``: the
record in ``testbed/workloads/udpreq.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testbed.spec.errors import UsageError
from testbed.workloads.base import WORKLOADS, Common, ParamError, Workload, param


@dataclass(frozen=True)
class ReqRespParams(Common):
    mode: str = param("new", "a new connection (udp: socket and transport endpoint) per request, "
                      "or one kept, warmed connection", choices=("new", "reuse"))
    requests: int = param(1, "timed requests K")
    think: str = param("0", "pause between requests", unit="time")
    warmup: int = param(10, "at most this many untimed requests to warm the kept connection "
                        "(mode reuse; warm: tcp cwnd ≥ 2 × request or two equal times, udp the "
                        "loss rate measured)")
    size: str = param("354640", "request body N (the fixed generated file)", unit="size")
    reply_size: str = param("1000", "reply size M (tcp with blocks: the total split evenly, or a "
                            "list of one per block)", unit="size")
    process: str = param("30ms", "server processing time T (tcp with blocks: the total split "
                         "evenly, or a list of one per block)", unit="time")
    transport: str = param("tcp", "tcp: the kernel's TCP; udp: the testbed's own transport "
                           "(testbed/transport: ARQ or RaptorQ FEC)", side="run", choices=("tcp", "udp"))
    write: str = param("one", "request write pattern: one send() or 64 KiB blocks",
                       choices=("one", "blocks"), transport="tcp")
    blocks: int = param(1, "send the request as K blocks of N/K bytes back to back on the "
                        "connection, each processed as it arrives and answered with its own reply "
                        "(testbed/apps/reqresp.py block_plan)", transport="tcp")
    dependent: bool = param(False, "blocks: a global dependency — nothing is processed before "
                            "the last block arrived, then all of T, and the replies follow it",
                            transport="tcp")
    compress: str = param("1", "codec size ratio: the body on the wire is N x this (0 < r <= 1)",
                          transport="tcp")
    encode: str = param("0", "codec: encoding on the client before the first request byte "
                        "(a timed step, inside the request's time)", unit="time", transport="tcp")
    decode: str = param("0", "codec: decoding on the server, added to its processing of each "
                        "request (a timed step)", unit="time", transport="tcp")
    tls: bool = param(False, "TLS 1.3 (self-signed certificate made at run time)", side="both",
                      transport="tcp")
    tls_resume: bool = param(False, "TLS session resumption (mode new)", transport="tcp")
    path: str = param("direct", "direct, or through the SOCKS5 gateway pair (topology relay)",
                      side="run", choices=("direct", "relay"), transport="tcp")
    relay_hosts: str = param("cgw,sgw", "client-side,server-side gateway hosts (path relay)", side="run",
                             transport="tcp")
    tunnel_buffers: str = param("16MB", "SO_SNDBUF/SO_RCVBUF of the tunnel (path relay)", side="run",
                                unit="size", transport="tcp")
    tunnel_initcwnd: int = param(256, "route initcwnd/initrwnd between the gateways (path relay; "
                                 "256 ≥ the 245 segments of the request)", side="run", transport="tcp")
    tunnel_cc: str = param("cubic", "TCP_CONGESTION of the tunnel (path relay)", side="run",
                           transport="tcp")
    connect_mode: str = param("confirmed", "relay: answer the SOCKS5 CONNECT after the far "
                              "gateway connected (confirmed) or at once (optimistic)", side="run",
                              choices=("confirmed", "optimistic"), transport="tcp")
    request_timeout: str = param("60s", "give up on a request after this long", unit="time",
                                 transport="udp")
    fec: str = param("off", "off | fixed:R | adaptive[:TARGET] (smallest r with "
                     "P(Binomial(k+r, p) <= r) >= TARGET, default 0.999)", side="both", transport="udp")
    ack_policy: str = param("every", "ACK policy: every | n:N | t:TIME | n:N,t:TIME", side="both",
                            transport="udp")
    pacing: str = param("rate:333mbit", "off | rate:R | estimate (max delivery rate x gain)",
                        side="both", transport="udp")
    loss_prior: str = param("0", "loss rate adaptive FEC assumes until it measured 100 packets",
                            side="both", transport="udp")
    backoff: bool = param(False, "halve the pacing rate once per RTT with a loss", side="both",
                          transport="udp")
    send_window: str = param("none", "none, or a fixed window: at most this many bytes of symbols "
                             "sent and not yet acknowledged (probes aside)", side="both", transport="udp")

    def validate(self) -> None:
        if self.requests < 1:
            raise ValueError(f"requests {self.requests} must be >= 1")
        if self.warmup < 0:
            raise ValueError(f"warmup {self.warmup} must be >= 0")
        if self.tls_resume and not self.tls:
            raise ParamError("tls_resume (TLS session resumption) needs tls: add {tls}", "tls")
        if self.tls_resume and self.mode != "new":
            raise ValueError("tls_resume needs mode new: a kept-alive connection makes one handshake")
        if len(self.relay_hosts.split(",")) != 2:
            raise ValueError(f"relay_hosts {self.relay_hosts!r}: give two hosts, e.g. cgw,sgw")
        if not 1 <= self.tunnel_initcwnd <= 65535:
            raise ValueError(f"tunnel_initcwnd {self.tunnel_initcwnd} must be in 1..65535")
        if self.blocks < 1:
            raise ValueError(f"blocks {self.blocks} must be >= 1")
        if self.blocks > 1 and self.tls:
            raise ValueError("blocks send and receive at once on one connection: not with tls")
        if self.dependent and self.blocks < 2:
            raise ValueError("dependent needs blocks >= 2")
        for name in ("reply_size", "process"):
            n = len(str(getattr(self, name)).split(","))
            if n > 1 and n != self.blocks:
                raise ValueError(f"{name} lists {n} values; give one, or one per block ({self.blocks})")
        try:
            ratio = float(self.compress)
        except ValueError:
            ratio = -1.0
        if not 0 < ratio <= 1:
            raise ValueError(f"compress {self.compress!r}: a size ratio in (0, 1]")
        if self.transport == "udp":
            from testbed.transport.config import TransportConfig
            TransportConfig.from_factors(self.fec, self.ack_policy, self.pacing, self.loss_prior,
                                         self.backoff, self.send_window)


def _check_reqresp(p: ReqRespParams, spec: Any, topo: Any) -> None:
    if p.path == "relay" and topo is not None:
        hosts = set(topo.hosts())
        missing = [h for h in p.relay_hosts.split(",") if h not in hosts]
        if missing:
            raise UsageError(f"path relay needs the gateway hosts {p.relay_hosts} (topology relay); "
                             f"topology {spec.topology!r} has no {', '.join(missing)}")


REQRESP = WORKLOADS.register(Workload("reqresp", "request/response (C7)", "testbed.apps.reqresp",
                                      ReqRespParams, 5000, check=_check_reqresp))
