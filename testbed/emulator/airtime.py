"""A shared half-duplex 802.11a air interface (CHAPTER12.md C10).

``AirtimeSpec`` holds the PHY/MAC parameters; ``AirMedium`` is one air interface shared by
several emulator directions (e.g. uplink data and downlink ACKs of one Wi-Fi link, or several
stations).  Model, per frame handed to the medium:

- MAC frame length L = MAC payload + ``mac_overhead`` (default 36 B: 24 B MAC header, 8 B
  LLC/SNAP, 4 B FCS).  The emulator passes the Ethernet payload (frame length − 14 B), i.e. the
  IP packet.
- PPDU duration(L, rate) = ``PREAMBLE`` 20 µs + ``SYMBOL`` 4 µs · ceil((16 + 8·L + 6) / N_DBPS),
  N_DBPS = rate · 4 µs (216 at 54 Mbit/s, 24 at 6 Mbit/s); 16 service and 6 tail bits.
- Exchange = DIFS + backoff + data PPDU at ``data_rate`` + SIFS + MAC ACK PPDU (``ack_bytes``
  = 14 B) at ``control_rate``.  1228 B IP packet: 34 + 208 + 16 + 44 = 302 µs.
- Backoff: with ``cw_min`` = 0 none (C10's setting); otherwise every exchange waits a uniform
  whole number of slots in [0, cw_min], drawn from the medium's seeded ``random.Random``.  No
  collisions, retries or rate adaptation are modelled, so the window never grows.
- Turns: frames of all attached directions use the medium one at a time, in the order they are
  handed to it (their arrival order): an exchange starts at max(arrival, end of the previous
  exchange on this medium).  A frame's own direction's earlier frames are always ahead of it,
  so its queue wait is included.
- The receiver has the frame when its data PPDU ends (``data_end``); the medium stays busy until
  the MAC ACK ends (``end``).  The emulator adds the direction's propagation delay after
  ``data_end`` and counts the frame in its queue until ``end``.
- Airtime of a direction = sum over its exchanges of (end − start): DIFS, backoff, data, SIFS
  and ACK, waiting for the medium excluded.

All times inside are integer nanoseconds (parameters rounded to whole ns once).
"""
from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field
from typing import Any, Mapping

PREAMBLE = 20e-6        # PLCP preamble + SIGNAL, s
SYMBOL = 4e-6           # OFDM symbol, s
SERVICE_TAIL_BITS = 22  # 16 service + 6 tail bits


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _bits_per_symbol(rate: float) -> int:
    return round(rate * SYMBOL)


@dataclass(frozen=True)
class AirtimeSpec:
    """802.11a (OFDM, no aggregation) air interface parameters.

    name: label used in stats and metadata.
    data_rate, control_rate: PHY rate of data frames / MAC ACKs in bit/s; must carry a whole
        number of bits per 4 µs symbol (6, 9, 12, 18, 24, 36, 48, 54 Mbit/s do).
    difs, sifs, slot: s.  mac_overhead: bytes added to the IP packet to form the MAC frame.
    ack_bytes: MAC ACK frame length.  cw_min: backoff window in slots (0 = no backoff).
    """
    name: str = "air"
    data_rate: float = 54e6
    control_rate: float = 6e6
    difs: float = 34e-6
    sifs: float = 16e-6
    slot: float = 9e-6
    mac_overhead: int = 36
    ack_bytes: int = 14
    cw_min: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"airtime name {self.name!r} must be a non-empty string")
        for what in ("data_rate", "control_rate"):
            rate = getattr(self, what)
            if not (isinstance(rate, (int, float)) and rate > 0 and math.isfinite(rate)):
                raise ValueError(f"airtime {what} {rate!r} must be a positive bit/s value")
            bits = rate * SYMBOL
            if bits < 1 or abs(bits - round(bits)) > 1e-6:
                raise ValueError(f"airtime {what} {rate:g} bit/s carries {bits:g} bits per 4 µs "
                                 "OFDM symbol; use an 802.11a rate (6, 9, 12, 18, 24, 36, 48 or "
                                 "54 Mbit/s)")
        for what in ("difs", "sifs", "slot"):
            value = getattr(self, what)
            if not (isinstance(value, (int, float)) and 0 <= value < 1):
                raise ValueError(f"airtime {what} {value!r} must be in [0, 1) s")
        for what, low in (("mac_overhead", 0), ("ack_bytes", 1), ("cw_min", 0)):
            value = getattr(self, what)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"airtime {what} {value!r} must be a whole number >= {low}")

    @property
    def draws_at_random(self) -> bool:
        """True when exchanges wait a random backoff (``cw_min`` > 0)."""
        return self.cw_min > 0

    def ppdu_ns(self, l_bytes: int, rate: float) -> int:
        """Duration in ns of a PPDU carrying a MAC frame of ``l_bytes`` at ``rate`` bit/s."""
        ndbps = _bits_per_symbol(rate)
        symbols = -(-(SERVICE_TAIL_BITS + 8 * l_bytes) // ndbps)
        return _ns(PREAMBLE) + symbols * _ns(SYMBOL)

    def exchange_ns(self, ip_bytes: int) -> int:
        """DIFS + data PPDU + SIFS + MAC ACK PPDU in ns, without backoff."""
        return (_ns(self.difs) + self.ppdu_ns(ip_bytes + self.mac_overhead, self.data_rate)
                + _ns(self.sifs) + self.ppdu_ns(self.ack_bytes, self.control_rate))

    def exchange_time(self, ip_bytes: int) -> float:
        """DIFS + data PPDU + SIFS + MAC ACK PPDU in s for an IP packet of ``ip_bytes``."""
        return self.exchange_ns(ip_bytes) / 1e9

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AirtimeSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown airtime parameter(s) {sorted(unknown)}; allowed: {sorted(known)}")
        return cls(**d)


@dataclass
class AirStats:
    """exchanges: frames sent on the medium; busy_ns: total airtime (see module doc);
    busy_ns_by_direction: airtime per attached direction name; backoff_slots: slots waited."""
    name: str
    exchanges: int = 0
    busy_ns: int = 0
    busy_ns_by_direction: dict[str, int] = field(default_factory=dict)
    backoff_slots: int = 0


class AirMedium:
    """One shared half-duplex medium; see the module docstring for the model."""

    def __init__(self, spec: AirtimeSpec, seed: int):
        self.spec = spec
        self.seed = seed
        self._draw = random.Random(seed).random
        self._data_ppdu: dict[int, int] = {}
        self._difs_ns = _ns(spec.difs)
        self._tail_ns = _ns(spec.sifs) + spec.ppdu_ns(spec.ack_bytes, spec.control_rate)
        self._slot_ns = _ns(spec.slot)
        self._cw = spec.cw_min
        self.free_ns = 0
        self._names: list[str] = []
        self._busy: list[int] = []
        self._exchanges = 0
        self._backoff_slots = 0

    def attach(self, name: str = "") -> int:
        """Register a direction using this medium; returns its id for ``transmit``."""
        name = name or f"dir{len(self._names)}"
        if name in self._names:
            raise ValueError(f"direction name {name!r} already attached to medium {self.spec.name!r}")
        self._names.append(name)
        self._busy.append(0)
        return len(self._names) - 1

    def transmit(self, now_ns: int, ip_bytes: int, direction: int) -> tuple[int, int]:
        """Send one frame handed over at ``now_ns``; return (data_end_ns, end_ns)."""
        start = now_ns if now_ns > self.free_ns else self.free_ns
        ppdu = self._data_ppdu.get(ip_bytes)
        if ppdu is None:
            spec = self.spec
            ppdu = self._data_ppdu[ip_bytes] = spec.ppdu_ns(ip_bytes + spec.mac_overhead, spec.data_rate)
        data_start = start + self._difs_ns
        if self._cw:
            slots = int(self._draw() * (self._cw + 1))
            self._backoff_slots += slots
            data_start += slots * self._slot_ns
        data_end = data_start + ppdu
        self.free_ns = end = data_end + self._tail_ns
        self._busy[direction] += end - start
        self._exchanges += 1
        return data_end, end

    def busy_ns(self, direction: int) -> int:
        return self._busy[direction]

    @property
    def stats(self) -> AirStats:
        return AirStats(self.spec.name, self._exchanges, sum(self._busy),
                        dict(zip(self._names, self._busy)), self._backoff_slots)
