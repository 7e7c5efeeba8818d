"""``edgecloud``: where to run the agent's rounds (CHAPTER12.md C14).

    device ─ gw ─ 80 Mbit/s, 20 ms RTT ─ edge     (nearby workstation)
               └─ 6.4 Mbit/s, 200 ms RTT ─ cloud  (cloud region)

The chapter gives the uplink rates and RTTs; downlinks default to the same rates (an assumption
stated here; the replies are small actions), and every value is a parameter.  The device's two
uplinks are access links with a deep buffer, 1000 packets (a txqueuelen, as the ``wifi``
topology's; access uplinks buffer far more than a bandwidth-delay product, and Mahimahi's link
queue is unbounded by default): the chapter's rounds send each upload at the uplink's rate.  The
downlinks keep the default one-BDP buffer.  ``topology_params.uplink_queue`` (or a link's
``queue``) sets another; with a one-BDP uplink buffer the kept connection's bursts lose frames
(docs/findings.md).
"""
from topologies.base import TOPOLOGIES, TestbedTopo, spec


@TOPOLOGIES.register
class EdgeCloud(TestbedTopo):
    name = "edgecloud"
    description = "device with an edge path (80 Mbit/s, 20 ms RTT) and a cloud path (6.4 Mbit/s, 200 ms RTT)"
    chapter_case = "C14"
    roles = {"client": "device", "server": "edge"}
    params = {
        "edge_rate_up": ("80mbit", "device→edge rate"),
        "edge_rate_down": ("80mbit", "edge→device rate"),
        "edge_delay": ("10ms", "one-way delay to the edge"),
        "cloud_rate_up": ("6.4mbit", "device→cloud rate"),
        "cloud_rate_down": ("6.4mbit", "cloud→device rate"),
        "cloud_delay": ("100ms", "one-way delay to the cloud"),
        "cloud_loss_down": ("0%", "cloud→device loss"),
        "uplink_queue": ("1000", "buffer of the device→edge and device→cloud directions (packets or bytes)"),
    }

    def build(self, edge_rate_up, edge_rate_down, edge_delay, cloud_rate_up, cloud_rate_down,
              cloud_delay, cloud_loss_down, uplink_queue):
        device = self.addHost("device", ip=None, routes=[("default", "10.0.1.254")])
        gw = self.addHost("gw", ip=None, router=True)
        edge = self.addHost("edge", ip=None, routes=[("default", "10.0.2.254")])
        cloud = self.addHost("cloud", ip=None, routes=[("default", "10.0.3.254")])
        self.addLink(device, gw, name="access", params1={"ip": "10.0.1.1/24"}, params2={"ip": "10.0.1.254/24"})
        self.addLink(gw, edge, name="edge", params1={"ip": "10.0.2.254/24"}, params2={"ip": "10.0.2.2/24"},
                     spec_ab=spec(edge_rate_up, edge_delay, queue=uplink_queue),
                     spec_ba=spec(edge_rate_down, edge_delay))
        self.addLink(gw, cloud, name="cloud", params1={"ip": "10.0.3.254/24"}, params2={"ip": "10.0.3.2/24"},
                     spec_ab=spec(cloud_rate_up, cloud_delay, queue=uplink_queue),
                     spec_ba=spec(cloud_rate_down, cloud_delay, cloud_loss_down))

    def summary(self) -> str:
        return (f"device with an edge path ({self.link_phrase('edge', 'device', 'edge')}) and a cloud "
                f"path ({self.link_phrase('cloud', 'device', 'cloud')})")
