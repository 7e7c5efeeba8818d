"""``wifi``: a station and a server sharing one half-duplex air interface (CHAPTER12.md C10).

Both directions of the link contend for the same medium: uplink data frames and downlink ACK
frames take turns in arrival order, each costing DIFS + data PPDU + SIFS + MAC-ACK PPDU of
airtime (802.11a OFDM, no aggregation).  Only the userspace emulator models the shared medium.
"""
from testbed.spec.units import format_rate, format_time, parse_count, parse_rate, parse_time

from topologies.base import TOPOLOGIES, TestbedTopo, directed_phrase, loss_words, spec


@TOPOLOGIES.register
class Wifi(TestbedTopo):
    name = "wifi"
    description = "station — server over one shared 802.11a-like air interface (userspace backend)"
    chapter_case = "C10"
    roles = {"client": "station", "server": "server"}
    params = {
        "data_rate": ("54mbit", "PHY rate of data frames"),
        "control_rate": ("6mbit", "PHY rate of MAC ACK frames"),
        "difs": ("34us", "access wait before each exchange"),
        "sifs": ("16us", "gap between data frame and MAC ACK"),
        "cw_min": ("0", "random backoff: uniform slots in [0, cw_min] (0: none)"),
        "delay": ("0ms", "one-way delay beyond the air (wired part)"),
        "queue": ("1000", "per-direction transmit queue (packets, like a txqueuelen)"),
    }

    def build(self, data_rate, control_rate, difs, sifs, cw_min, delay, queue):
        from testbed.emulator.airtime import AirtimeSpec
        air = AirtimeSpec(name="air", data_rate=parse_rate(data_rate),
                          control_rate=parse_rate(control_rate), difs=parse_time(difs),
                          sifs=parse_time(sifs), cw_min=parse_count(cw_min, "backoff slots"))
        station = self.addHost("station", ip="10.0.0.1/24")
        server = self.addHost("server", ip="10.0.0.2/24")
        self.addLink(station, server, name="air", spec_ab=spec(None, delay, queue=queue),
                     spec_ba=spec(None, delay, queue=queue), medium=air)

    def summary(self) -> str:
        air = self.named["air"]
        m, up, down = air["medium"], air["spec_ab"], air["spec_ba"]
        extra = [f"{m.cw_min} backoff slots at most" if m.cw_min else "",
                 f"{format_time(up.delay + down.delay, words=True)} wired RTT" if up.delay or down.delay else "",
                 directed_phrase(loss_words(up.loss), loss_words(down.loss), "station", "server")]
        return (f"station — server over one shared 802.11a-like air interface (data "
                f"{format_rate(m.data_rate, words=True)}, MAC ACKs {format_rate(m.control_rate, words=True)}"
                + "".join(f", {x}" for x in extra if x) + "; userspace backend)")
