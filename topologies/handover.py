"""``handover``: a phone on a cellular access whose link changes during the run.

client — server over one link, ``cell``: 20 Mbit/s down, 5 Mbit/s up, 25 ms each way (parameters).
Its default schedules (``TestbedTopo.schedules``), counted from the client's start: the downlink
falls to 4 Mbit/s at 3 s (the cell's edge); both directions are down from 5 s for 0.5 s (the
handover: frames sent meanwhile are lost); the new cell's downlink carries 30 Mbit/s.  Any
schedule item given with ``--link cell.DIR....`` replaces that direction's default;
``--link cell.DIR.schedule=none`` removes it.
"""
from topologies.base import TOPOLOGIES, TestbedTopo, spec

HANDOVER = {"down": "5s", "duration": "0.5s"}


@TOPOLOGIES.register
class Handover(TestbedTopo):
    name = "handover"
    description = ("client — server over a cellular link that changes: 20 → 4 Mbit/s down at 3 s, "
                   "0.5 s handover outage at 5 s, then 30 Mbit/s down")
    params = {
        "rate_up": ("5mbit", "client→server rate"),
        "rate_down": ("20mbit", "server→client rate until the first step"),
        "delay": ("25ms", "one-way delay (each direction)"),
    }
    schedules = {
        "cell.down": {"step": [{"at": "3s", "rate": "4mbit"}, {"at": "5.5s", "rate": "30mbit"}],
                      "outage": [HANDOVER]},
        "cell.up": {"outage": [HANDOVER]},
    }

    def build(self, rate_up, rate_down, delay):
        client = self.addHost("client", ip="10.0.0.1/24")
        server = self.addHost("server", ip="10.0.0.2/24")
        self.addLink(client, server, name="cell",
                     spec_ab=spec(rate_up, delay), spec_ba=spec(rate_down, delay))

    def summary(self) -> str:
        return f"client — server over a cellular link: {self.link_phrase('cell')}"
