"""``relay``: the Queqiao case (CHAPTER12.md C7): client and server with a gateway at each end
of the long-haul path.

    client ─ lan ─ cgw ═ long-haul (C5) ═ sgw ─ lan ─ server

Both arms of the experiment cross the same long-haul link: ``direct`` routes the client's
connection through cgw and sgw as plain routers; ``relay`` hands it to the SOCKS5 gateway on cgw,
which carries it over one pre-established tuned tunnel to sgw, which connects to the server.
The LAN links are unimpaired veths.
"""
from topologies.base import TOPOLOGIES, TestbedTopo, spec


@TOPOLOGIES.register
class Relay(TestbedTopo):
    name = "relay"
    description = "client — cgw ═ long-haul ═ sgw — server (gateway pair for the relay workload)"
    chapter_case = "C7"
    params = {
        "rate_up": ("333mbit", "cgw→sgw rate"),
        "rate_down": ("333mbit", "sgw→cgw rate"),
        "delay": ("100ms", "long-haul one-way delay"),
        "loss_up": ("0%", "cgw→sgw loss"),
        "loss_down": ("14%", "sgw→cgw loss"),
        "queue": (None, "long-haul bottleneck buffer (packets or bytes); default one RTT BDP"),
    }

    def build(self, rate_up, rate_down, delay, loss_up, loss_down, queue):
        client = self.addHost("client", ip=None, routes=[("default", "10.0.1.254")])
        cgw = self.addHost("cgw", ip=None, router=True, routes=[("10.0.3.0/24", "10.0.2.2")])
        sgw = self.addHost("sgw", ip=None, router=True, routes=[("10.0.1.0/24", "10.0.2.1")])
        server = self.addHost("server", ip=None, routes=[("default", "10.0.3.254")])
        self.addLink(client, cgw, name="client_lan", params1={"ip": "10.0.1.1/24"}, params2={"ip": "10.0.1.254/24"})
        self.addLink(cgw, sgw, name="bottleneck", params1={"ip": "10.0.2.1/24"}, params2={"ip": "10.0.2.2/24"},
                     spec_ab=spec(rate_up, delay, loss_up, queue),
                     spec_ba=spec(rate_down, delay, loss_down, queue))
        self.addLink(sgw, server, name="server_lan", params1={"ip": "10.0.3.254/24"}, params2={"ip": "10.0.3.2/24"})

    def summary(self) -> str:
        lans = [n for n in ("client_lan", "server_lan")
                if any(self.named[n].get(slot) is not None for slot in ("spec_ab", "spec_ba"))]
        return (f"client — cgw ═ long-haul ({self.link_phrase('bottleneck', no_loss=True)}) ═ sgw — server "
                "(gateway pair for the relay workload)"
                + "".join(f"; {n}: {self.link_phrase(n)}" for n in lans))
