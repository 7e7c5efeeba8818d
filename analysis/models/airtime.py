"""C10: 802.11a airtime per exchange (no aggregation, no backoff).

Uses :class:`testbed.emulator.airtime.AirtimeSpec` — the emulator's own air model — so the model
and the emulated medium cannot drift apart.  PPDU = 20 µs + 4 µs·ceil((16 + 8·L + 6)/N_DBPS);
exchange = DIFS + data PPDU + SIFS + MAC-ACK PPDU.  L = IP packet + ``mac_overhead`` (36 B: MAC
header 24, LLC/SNAP 8, FCS 4).

The chapter's figures and the frame sizes that give them:
* 302 µs: a 1228 B IP packet (1168 B payload + 60 B headers) → L = 1264 B → 208 µs PPDU.  A full
  1500 B IP packet (Linux's 1448 B payload) → L = 1536 B → 248 µs PPDU, 342 µs exchange.
* 134 µs: the 92 B end-to-end ACK → L = 128 B → 40 µs PPDU.
* 13.4 s of image airtime: 30,800 data + 30,800 feedback exchanges × (302 + 134) µs = 13.43 s.
  The chapter's 30,800 is 35 MB / 1136 B; with C1's 1168 B payloads the image is 29,966
  packets (25,685 up + 4,281 down), 13.07 s.  ``exchanges`` = 0 derives the count from the bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from testbed.emulator.airtime import AirtimeSpec

from analysis.models.base import Params, Q, param, register


@dataclass(frozen=True)
class AirtimeParams(Params):
    data_packet: int = param(1228, "count", "IP bytes of a data packet", positive=True)
    ack_packet: int = param(92, "count", "IP bytes of an end-to-end ACK", positive=True)
    full_packet: int = param(1500, "count", "IP bytes of a full Linux packet (MTU)", positive=True)
    mac_overhead: int = param(36, "count", "MAC header + LLC/SNAP + FCS bytes")
    data_rate: float = param(54e6, "bit/s", "PHY rate of data frames", positive=True)
    control_rate: float = param(6e6, "bit/s", "PHY rate of MAC ACKs", positive=True)
    difs: float = param(34e-6, "s", "DIFS (SIFS + 2 slots)")
    sifs: float = param(16e-6, "s", "SIFS")
    upload: float = param(30e6, "B", "image upload payload")
    download: float = param(5e6, "B", "image download payload")
    payload: int = param(1168, "count", "payload bytes per data packet", positive=True)
    exchanges: int = param(0, "count", "data exchanges of the image (0: sizes / payload, per "
                           "direction, rounded up); each has one feedback exchange")


@register("airtime", "C10", "802.11a PPDU and exchange airtime; the image's airtime", AirtimeParams)
def airtime(p: AirtimeParams) -> dict[str, Q]:
    spec = AirtimeSpec(data_rate=p.data_rate, control_rate=p.control_rate, difs=p.difs,
                       sifs=p.sifs, mac_overhead=p.mac_overhead)
    us = 1e-3  # ns -> µs

    def ppdu(ip):
        return spec.ppdu_ns(ip + p.mac_overhead, p.data_rate) * us
    data, ack = spec.exchange_ns(p.data_packet) * us, spec.exchange_ns(p.ack_packet) * us
    n = p.exchanges or math.ceil(p.upload / p.payload) + math.ceil(p.download / p.payload)
    return {"data_ppdu": Q(ppdu(p.data_packet), "µs", "data PPDU"),
            "data_exchange": Q(data, "µs", "DIFS + data PPDU + SIFS + MAC ACK"),
            "ack_ppdu": Q(ppdu(p.ack_packet), "µs", "PPDU carrying the end-to-end ACK"),
            "ack_exchange": Q(ack, "µs", "exchange carrying the end-to-end ACK"),
            "fixed": Q(data - ppdu(p.data_packet), "µs", "DIFS + SIFS + MAC ACK, paid per exchange"),
            "ppdu_reduction": Q(1 - ppdu(p.ack_packet) / ppdu(p.data_packet), "1",
                                "how much shorter the ACK's PPDU is"),
            "exchange_reduction": Q(1 - ack / data, "1", "how much shorter its exchange is"),
            "full_frame_exchange": Q(spec.exchange_ns(p.full_packet) * us, "µs",
                                     "exchange of a full-MTU packet"),
            "exchanges": Q(n, "exchanges", "data exchanges (as many feedback exchanges)"),
            "image_airtime": Q(n * (data + ack) * 1e-6, "s", "data + feedback exchanges")}
