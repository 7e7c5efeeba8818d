"""``dualpath``: two access paths into one common egress (CHAPTER12.md C11).

    client ─ 20 Mbit/s (access 1) ─┐
                                   gw ─ 24 Mbit/s egress ─ server
    client ─ 10 Mbit/s (access 2) ─┘

The client has one address per path (10.0.1.1, 10.0.2.1) with source-address routing, as MPTCP
and multipath transports need: traffic from 10.0.2.1 leaves by access 2.  Splitting 30 MB in
proportion 20:10 takes 8 s on independent paths; here the common egress (24 Mbit/s) caps the sum.
Access delays are not in the chapter: the defaults (10 ms and 15 ms one way, 5 ms egress) are
stated here so the paths differ, and every one is a parameter.
"""
from topologies.base import TOPOLOGIES, TestbedTopo, spec


@TOPOLOGIES.register
class DualPath(TestbedTopo):
    name = "dualpath"
    description = "client with 20 and 10 Mbit/s access paths into a 24 Mbit/s common egress"
    chapter_case = "C11"
    params = {
        "rate1": ("20mbit", "access path 1 rate (both directions)"),
        "rate2": ("10mbit", "access path 2 rate (both directions)"),
        "egress": ("24mbit", "common egress rate gw—server (both directions)"),
        "delay1": ("10ms", "access path 1 one-way delay"),
        "delay2": ("15ms", "access path 2 one-way delay"),
        "egress_delay": ("5ms", "egress one-way delay"),
        "loss1": ("0%", "access path 1 loss (both directions)"),
        "loss2": ("0%", "access path 2 loss (both directions)"),
    }

    def build(self, rate1, rate2, egress, delay1, delay2, egress_delay, loss1, loss2):
        rules = [["ip", "rule", "add", "from", "10.0.2.1", "table", "2"],
                 ["ip", "route", "add", "10.0.2.0/24", "dev", "client-eth1", "table", "2"],
                 ["ip", "route", "add", "default", "via", "10.0.2.254", "table", "2"]]
        client = self.addHost("client", ip=None, routes=[("default", "10.0.1.254")], commands=rules)
        gw = self.addHost("gw", ip=None, router=True)
        server = self.addHost("server", ip=None, routes=[("default", "10.0.3.254")])
        for path, (rate, delay, loss) in enumerate(((rate1, delay1, loss1), (rate2, delay2, loss2)), 1):
            self.addLink(client, gw, name=f"access{path}", params1={"ip": f"10.0.{path}.1/24"},
                         params2={"ip": f"10.0.{path}.254/24"},
                         spec_ab=spec(rate, delay, loss), spec_ba=spec(rate, delay, loss))
        self.addLink(gw, server, name="egress", params1={"ip": "10.0.3.254/24"}, params2={"ip": "10.0.3.2/24"},
                     spec_ab=spec(egress, egress_delay), spec_ba=spec(egress, egress_delay))

    def summary(self) -> str:
        paths = [self.link_phrase(n, "client", "gw", rtt=False) for n in ("access1", "access2")]
        egress = self.link_phrase("egress", rtt=False)
        plain = all(" " not in p.removesuffix(" Mbit/s") for p in paths)      # "20 and 10 Mbit/s"
        access = (f"{paths[0].removesuffix(' Mbit/s')} and {paths[1]} access paths" if plain
                  else f"access paths 1 ({paths[0]}) and 2 ({paths[1]})")
        return (f"client with {access} into one {egress} common egress" if "," not in egress
                else f"client with {access} into one common egress ({egress})")
