"""``image``: the image-refinement path of CHAPTER12.md C1 (and C2, C3, C4).

Uplink 20 Mbit/s, downlink 100 Mbit/s, RTT 100 ms (50 ms each way), no loss: a 30 MB upload,
0.3 s of processing and a 5 MB download take 12.8 s in the serial model.
"""
from topologies.base import TOPOLOGIES, TestbedTopo, spec


@TOPOLOGIES.register
class Image(TestbedTopo):
    name = "image"
    description = "client — server, 20 Mbit/s up, 100 Mbit/s down, 100 ms RTT"
    chapter_case = "C1"
    params = {
        "rate_up": ("20mbit", "client→server rate"),
        "rate_down": ("100mbit", "server→client rate"),
        "delay": ("50ms", "one-way delay"),
        "loss_up": ("0%", "client→server loss"),
        "loss_down": ("0%", "server→client loss"),
        "queue": (None, "bottleneck buffer per direction (packets or bytes); default one RTT BDP"),
    }

    def build(self, rate_up, rate_down, delay, loss_up, loss_down, queue):
        client = self.addHost("client", ip="10.0.0.1/24")
        server = self.addHost("server", ip="10.0.0.2/24")
        self.addLink(client, server, name="bottleneck", spec_ab=spec(rate_up, delay, loss_up, queue),
                     spec_ba=spec(rate_down, delay, loss_down, queue))

    def summary(self) -> str:
        return f"client — server, {self.link_phrase('bottleneck')}"
