"""A topology's one line (``TestbedTopo.summary``, the description ``testbed topo show`` and
``list`` print) says what the path is with the parameters and link overrides in effect: `topo
show longhaul --set loss_down=0%` still said "14% loss server→client"."""
import json

import pytest

from testbed.cli import main
from testbed.run.plan import build_topology
from topologies import TOPOLOGIES, base

DEFAULTS = {
    "longhaul": "client — server over 333 Mbit/s, 200 ms RTT, 14% loss server→client",
    "image": "client — server, 20 Mbit/s up, 100 Mbit/s down, 100 ms RTT",
    "relay": "client — cgw ═ long-haul (333 Mbit/s, 200 ms RTT, 14% loss sgw→cgw) ═ sgw — server "
             "(gateway pair for the relay workload)",
    "wifi": "station — server over one shared 802.11a-like air interface (data 54 Mbit/s, MAC ACKs "
            "6 Mbit/s; userspace backend)",
    "dualpath": "client with 20 and 10 Mbit/s access paths into one 24 Mbit/s common egress",
    "edgecloud": "device with an edge path (80 Mbit/s, 20 ms RTT) and a cloud path (6.4 Mbit/s, 200 ms RTT)",
    "handover": "client — server over a cellular link: 5 Mbit/s up, 20 Mbit/s down, 50 ms RTT; changes: "
                "down 20 → 4 Mbit/s at 3 s, both directions out for 500 ms at 5 s, down 4 → 30 Mbit/s at 5.5 s",
}


def test_every_builtin_topology_says_what_it_is_with_its_defaults():
    assert set(DEFAULTS) == set(TOPOLOGIES.names())
    for name, line in DEFAULTS.items():
        assert build_topology(name).summary() == line


@pytest.mark.parametrize("name,params,links,line", [
    ("longhaul", {"loss_down": "0%"}, {}, "client — server over 333 Mbit/s, 200 ms RTT, no loss"),
    ("longhaul", {"loss_up": "1%", "jitter": "2ms", "rate_up": "unshaped"}, {},
     "client — server over unshaped up, 333 Mbit/s down, 200 ms RTT, jitter up to 2 ms, "
     "1% loss client→server, 14% loss server→client"),
    ("relay", {}, {"bottleneck.down.jitter": "2ms"},      # was "jitter up to 0 s up, 2 ms down"
     "client — cgw ═ long-haul (333 Mbit/s, 200 ms RTT, jitter up to 2 ms sgw→cgw, 14% loss sgw→cgw) "
     "═ sgw — server (gateway pair for the relay workload)"),
    ("longhaul", {}, {"bottleneck.up.jitter": "1ms", "bottleneck.down.jitter": "2ms"},
     "client — server over 333 Mbit/s, 200 ms RTT, jitter up to 1 ms up, 2 ms down, "
     "14% loss server→client"),
    ("longhaul", {}, {"bottleneck.down.loss": "3%", "bottleneck.up.delay": "50ms"},
     "client — server over 333 Mbit/s, 150 ms RTT, 3% loss server→client"),
    ("image", {"rate_up": "100mbit", "loss_up": "1%", "loss_down": "1%"}, {},
     "client — server, 100 Mbit/s, 100 ms RTT, 1% loss each way"),
    ("relay", {"loss_down": "0%", "delay": "50ms"}, {},
     "client — cgw ═ long-haul (333 Mbit/s, 100 ms RTT, no loss) ═ sgw — server (gateway pair for the "
     "relay workload)"),
    ("wifi", {"data_rate": "24mbit", "delay": "5ms", "cw_min": "15"}, {},
     "station — server over one shared 802.11a-like air interface (data 24 Mbit/s, MAC ACKs 6 Mbit/s, "
     "15 backoff slots at most, 10 ms wired RTT; userspace backend)"),
    ("dualpath", {"rate2": "5mbit", "egress": "unshaped"}, {},
     "client with 20 and 5 Mbit/s access paths into one unshaped common egress"),
    ("dualpath", {"loss1": "1%"}, {"access2.up.rate": "5mbit"},
     "client with access paths 1 (20 Mbit/s, 1% loss each way) and 2 (5 Mbit/s up, 10 Mbit/s down) "
     "into one 24 Mbit/s common egress"),
    ("edgecloud", {"cloud_loss_down": "2%", "edge_delay": "5ms"}, {},
     "device with an edge path (80 Mbit/s, 10 ms RTT) and a cloud path (6.4 Mbit/s, 200 ms RTT, "
     "2% loss cloud→device)"),
    ("handover", {"rate_down": "10mbit"}, {},
     "client — server over a cellular link: 5 Mbit/s up, 10 Mbit/s down, 50 ms RTT; changes: down 10 → "
     "4 Mbit/s at 3 s, both directions out for 500 ms at 5 s, down 4 → 30 Mbit/s at 5.5 s"),
    ("handover", {}, {"cell.down.schedule": "none", "cell.up.schedule": "none"},
     "client — server over a cellular link: 5 Mbit/s up, 20 Mbit/s down, 50 ms RTT"),
    ("handover", {}, {"cell.down.schedule": "down=2s+1s;rate=8mbit@1MB"},
     "client — server over a cellular link: 5 Mbit/s up, 20 Mbit/s down, 50 ms RTT; changes: down out "
     "for 1 s at 2 s, up out for 500 ms at 5 s, down 20 → 8 Mbit/s at 1000000 B"),
])
def test_the_line_follows_the_parameters_and_links_in_effect(name, params, links, line):
    assert build_topology(name, params, links).summary() == line


def test_topo_show_prints_it(capsys):
    assert main(["topo", "show", "longhaul", "--set", "loss_down=0%"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "longhaul: client — server over 333 Mbit/s, 200 ms RTT, no loss"
    assert main(["topo", "show", "longhaul", "--link", "bottleneck.down.loss=5%", "--json"]) == 0
    assert "5% loss server→client" in json.loads(capsys.readouterr().out)["description"]


def test_a_topology_of_ones_own_shows_its_description_and_what_was_set():
    class Chain(base.TestbedTopo):
        name = "chain-summary"
        description = "client — router — server, 50 Mbit/s and 10 ms between router and server"
        params = {"rate": ("50mbit", "rate"), "delay": ("10ms", "delay")}

        def build(self, rate, delay):
            self.addLink(self.addHost("client"), self.addHost("server"), name="bottleneck",
                         spec_ab=base.spec(rate, delay), spec_ba=base.spec(rate, delay))
    assert Chain().summary() == Chain.description
    assert Chain(delay="10ms").summary() == Chain.description          # the default, given
    assert Chain(links={"bottleneck.down.loss": "1%"}, rate="20mbit").summary() == (
        f"{Chain.description} (as set: rate=20mbit, bottleneck.down.loss=1%)")
    assert "chain-summary" not in base.TOPOLOGIES
