"""``longhaul``: a client and a server over the chapter's long-haul path (CHAPTER12.md C5).

200 ms RTT (100 ms each way), 333 Mbit/s capacity knee, ~14% independent random loss in the
server→client (Irvine→Guiyang) direction, none client→server, MSS 1448 B (MTU 1500 with
timestamps).  Every parameter can be overridden (``--set rate_down=50mbit``).
"""
from topologies.base import TOPOLOGIES, TestbedTopo, spec


@TOPOLOGIES.register
class LongHaul(TestbedTopo):
    name = "longhaul"
    description = "client — server over 333 Mbit/s, 200 ms RTT, 14% loss server→client"
    chapter_case = "C5"
    params = {
        "rate_up": ("333mbit", "client→server rate ('unshaped' for none)"),
        "rate_down": ("333mbit", "server→client rate"),
        "delay": ("100ms", "one-way propagation delay (each direction)"),
        "jitter": ("0ms", "per-frame extra delay, uniform in [0, jitter], no reordering"),
        "loss_up": ("0%", "client→server loss (Bernoulli, or ge:p,r,1-h,1-k)"),
        "loss_down": ("14%", "server→client loss"),
        "queue": (None, "bottleneck buffer per direction: packets ('5000') or bytes ('8MB'); "
                        "default one round-trip BDP"),
    }

    def build(self, rate_up, rate_down, delay, jitter, loss_up, loss_down, queue):
        client = self.addHost("client", ip="10.0.0.1/24")
        server = self.addHost("server", ip="10.0.0.2/24")
        self.addLink(client, server, name="bottleneck",
                     spec_ab=spec(rate_up, delay, loss_up, queue, jitter),
                     spec_ba=spec(rate_down, delay, loss_down, queue, jitter))

    def summary(self) -> str:
        return f"client — server over {self.link_phrase('bottleneck', no_loss=True)}"
