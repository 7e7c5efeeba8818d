"""C7 and C12: what connection setup costs.

* ``setup`` (C12): ``rounds`` request rounds of ``round_time`` each; a new connection costs
  ``setup_rtts`` extra RTTs.  Reconnecting every round adds rounds·setup_rtts·R, connecting once
  setup_rtts·R.
* ``connections`` (C7, lower bounds, no loss on the request direction): a kept-alive connection
  whose window already covers the request costs R + compute + size·8/rate.  A new direct
  connection adds ``setup_rtts`` handshake RTTs and (rounds − 1) RTTs of slow start (rounds from
  :mod:`.window`'s slow-start model with ``iw`` × ``mss``).  Through the relay, the client's new
  connection, the SOCKS5 exchange (``socks_rtts``) and its slow start happen on the LAN
  (``lan_rtt``); the long-haul tunnel is already open and its window open, so it costs what a
  kept-alive direct connection costs, plus one LAN RTT to reach the gateways, plus
  ``confirm_rtts`` long-haul RTTs when the SOCKS5 reply waits for the far side's connect.
"""
from __future__ import annotations

from dataclasses import dataclass

from analysis.models.base import Params, Q, param, register
from analysis.models.window import SlowStartParams, cumulative


@dataclass(frozen=True)
class SetupParams(Params):
    rounds: int = param(30, "count", "request rounds", positive=True)
    round_time: float = param(3.5, "s", "time of one round on an open connection (C13: 3.5 s)")
    rtt: float = param(0.2, "s", "round-trip time")
    setup_rtts: float = param(2, "1", "extra RTTs a new connection costs (TCP + TLS 1.3: 2)")


@register("setup", "C12", "reconnecting every round vs once", SetupParams)
def setup(p: SetupParams) -> dict[str, Q]:
    base = p.rounds * p.round_time
    once, every = p.setup_rtts * p.rtt, p.rounds * p.setup_rtts * p.rtt
    return {"base": Q(base, "s", "rounds x round time"),
            "extra_every_round": Q(every, "s", "reconnect every round"),
            "extra_once": Q(once, "s", "connect once, then reuse"),
            "total_reuse": Q(base + once, "s", "with reuse"),
            "total_reconnect": Q(base + every, "s", "reconnect every round")}


@dataclass(frozen=True)
class ConnectionsParams(Params):
    size: float = param(354640, "B", "request size")
    mss: int = param(1448, "count", "segment size", positive=True)
    iw: int = param(10, "count", "initial window in segments", positive=True)
    rtt: float = param(0.2, "s", "long-haul round-trip time")
    lan_rtt: float = param(0.0002, "s", "round trip client-gateway + gateway-server on the LANs")
    compute: float = param(0.03, "s", "model time at the server")
    rate: float = param(333e6, "bit/s", "long-haul rate", positive=True)
    setup_rtts: float = param(1, "1", "handshake RTTs before the request (TCP: 1)")
    socks_rtts: float = param(2, "1", "SOCKS5 RTTs to the client gateway (greeting, CONNECT)")
    confirm_rtts: float = param(0, "1", "long-haul RTTs the SOCKS5 CONNECT reply waits for (0: "
                                "answered at once; 1: after the far gateway connected, the relay "
                                "workload's connect_mode confirmed)")


@register("connections", "C7", "new connection vs kept alive, direct vs relay (lower bounds)",
          ConnectionsParams)
def connections(p: ConnectionsParams) -> dict[str, Q]:
    def rounds(rtt):
        return len(cumulative(SlowStartParams(size=p.size, iw=p.iw, mss=p.mss, rtt=rtt)))
    warm = p.rtt + p.compute + p.size * 8 / p.rate
    direct_new = (p.setup_rtts + rounds(p.rtt) - 1) * p.rtt + warm
    relay_warm = warm + p.lan_rtt
    relay_new = ((p.setup_rtts + p.socks_rtts + rounds(p.lan_rtt) - 1) * p.lan_rtt
                 + p.confirm_rtts * p.rtt + relay_warm)
    return {"slow_start_rounds": Q(rounds(p.rtt), "rounds", "rounds of the request, new connection"),
            "direct_new": Q(direct_new * 1e3, "ms", "new connection per request, direct"),
            "relay_new": Q(relay_new * 1e3, "ms", "new connection per request, relay"),
            "ratio_new": Q(direct_new / relay_new, "1", "direct / relay, new connections"),
            "direct_keepalive": Q(warm * 1e3, "ms", "kept-alive connection, direct"),
            "relay_keepalive": Q(relay_warm * 1e3, "ms", "kept-alive connection, relay"),
            "ratio_keepalive": Q(warm / relay_warm, "1", "direct / relay, kept alive")}
