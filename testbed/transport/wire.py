"""Packet format of the transport (all integers big-endian, one packet per UDP datagram).

Common header, 6 bytes: ``magic`` (0xFC), ``type|flags`` (low 4 bits: SOURCE=1, REPAIR=2, ACK=3;
bit 0x80 ACK_NOW asks the receiver to ACK at once), ``pn`` (uint32 packet number, one space per
direction, never reused: a retransmitted symbol gets a new number).

SOURCE / REPAIR (symbol packets), then 9 bytes: ``round`` (uint8: 0 = first transmission, n =
sent because a packet of round n-1 was lost or a probe timer expired), ``msg`` (uint32 message
id), ``length`` (uint32 message length in bytes), followed by RaptorQ's 4-byte payload id (source block number 0, 24-bit
encoding symbol id, ESI) and one symbol of ``SYMBOL`` bytes (the last source symbol zero-padded).
ESI < k = ceil(length / SYMBOL) is a source symbol (the message bytes themselves, the code is
systematic), ESI >= k a repair symbol; the type says which, so pcaps count repair packets from
the header alone.  1448 B symbols make 1467 B of UDP payload, a 1495 B IP packet.  The first 8
payload bytes (what a headers-only capture and ``analysis.pcap`` keep) hold magic, type, packet
number and round.

ACK, then: ``ack_delay_us`` (uint32: time the receiver held the ACK), ``n_status`` (uint8) times
(``msg`` uint32, ``need`` uint16: symbols the receiver still needs for that message, 0 = delivered),
``n_ranges`` (uint8) times (``hi`` uint32, ``lo`` uint32): received packet numbers, highest range
first, at most ``MAX_RANGES``.

``parse`` raises ``Malformed`` for anything that is not exactly such a packet.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

MAGIC = 0xFC
SOURCE, REPAIR, ACK = 1, 2, 3
TYPE_NAMES = {SOURCE: "source", REPAIR: "repair", ACK: "ack"}
ACK_NOW = 0x80
SYMBOL = 1448
MAX_RANGES = 64
MAX_STATUS = 16

HEADER = struct.Struct("!BBI")
SYMHDR = struct.Struct("!BII")
PAYLOAD_ID = struct.Struct("!I")          # SBN (8 bits) | ESI (24 bits), RFC 6330 section 3.2
ACKHDR = struct.Struct("!IB")
STATUS = struct.Struct("!IH")
RANGE = struct.Struct("!II")
SYMBOL_OVERHEAD = HEADER.size + SYMHDR.size + PAYLOAD_ID.size
_SYMBOL_HEAD = struct.Struct("!BBIBIII")                 # HEADER + SYMHDR + PAYLOAD_ID in one


class Malformed(ValueError):
    """A datagram that is not a well-formed packet of this transport."""


class SymbolPacket(NamedTuple):          # a NamedTuple: built once per packet, on the hot path
    pn: int
    repair: bool
    msg: int
    length: int
    round: int
    esi: int
    symbol: bytes            # SYMBOL bytes
    ack_now: bool = False
    raptorq_packet: bytes = b""   # parse: payload id + symbol, as RaptorQ's Decoder takes it


class AckPacket(NamedTuple):
    pn: int
    ack_delay_us: int
    status: tuple[tuple[int, int], ...]        # (msg, need)
    ranges: tuple[tuple[int, int], ...]        # (hi, lo), highest first


def k_of(length: int) -> int:
    """Source symbols of a message of ``length`` bytes (at least 1)."""
    return max(1, -(-length // SYMBOL))


def encode_symbol(p: SymbolPacket) -> bytes:
    kind = (REPAIR if p.repair else SOURCE) | (ACK_NOW if p.ack_now else 0)
    return _SYMBOL_HEAD.pack(MAGIC, kind, p.pn, p.round, p.msg, p.length, p.esi) + p.symbol


def encode_ack(a: AckPacket) -> bytes:
    parts = [HEADER.pack(MAGIC, ACK, a.pn), ACKHDR.pack(a.ack_delay_us, len(a.status))]
    parts += [STATUS.pack(m, n) for m, n in a.status]
    parts.append(bytes([len(a.ranges)]))
    parts += [RANGE.pack(hi, lo) for hi, lo in a.ranges]
    return b"".join(parts)


def parse(data: bytes) -> SymbolPacket | AckPacket:
    if len(data) < HEADER.size:
        raise Malformed(f"{len(data)} B is shorter than the {HEADER.size} B header")
    magic, kind, pn = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise Malformed(f"magic 0x{magic:02x}, expected 0x{MAGIC:02x}")
    ptype, ack_now = kind & 0x0F, bool(kind & ACK_NOW)
    if kind & 0x70:
        raise Malformed(f"reserved flag bits set in 0x{kind:02x}")
    if ptype in (SOURCE, REPAIR):
        if len(data) != SYMBOL_OVERHEAD + SYMBOL:
            raise Malformed(f"symbol packet of {len(data)} B, expected {SYMBOL_OVERHEAD + SYMBOL}")
        rnd, msg, length = SYMHDR.unpack_from(data, HEADER.size)
        (pid,) = PAYLOAD_ID.unpack_from(data, HEADER.size + SYMHDR.size)
        if pid >> 24:
            raise Malformed(f"source block number {pid >> 24}, only block 0 is used")
        esi, k = pid & 0xFFFFFF, k_of(length)
        if (esi < k) == (ptype == REPAIR):
            raise Malformed(f"ESI {esi} with k={k} contradicts packet type {TYPE_NAMES[ptype]}")
        rq = bytes(data[HEADER.size + SYMHDR.size:])
        return SymbolPacket(pn, ptype == REPAIR, msg, length, rnd, esi, rq[PAYLOAD_ID.size:], ack_now, rq)
    if ptype == ACK:
        off = HEADER.size
        try:
            delay, n = ACKHDR.unpack_from(data, off)
            off += ACKHDR.size
            status = tuple(STATUS.unpack_from(data, off + i * STATUS.size) for i in range(n))
            off += n * STATUS.size
            nr = data[off]
            off += 1
            ranges = tuple(RANGE.unpack_from(data, off + i * RANGE.size) for i in range(nr))
        except (struct.error, IndexError):
            raise Malformed(f"truncated ACK packet ({len(data)} B)") from None
        off += nr * RANGE.size
        if off != len(data):
            raise Malformed(f"{len(data) - off} B after the end of the ACK packet")
        prev_lo = None
        for hi, lo in ranges:
            if lo > hi or (prev_lo is not None and hi + 1 >= prev_lo):
                raise Malformed(f"ACK ranges not disjoint and descending: {ranges}")
            prev_lo = lo
        return AckPacket(pn, delay, status, ranges)
    raise Malformed(f"unknown packet type {ptype}")
