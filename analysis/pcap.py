"""Vectorised pcap / pcapng reader: one numpy array per header field.

The reference (``engine="python"``): the file is read once into memory; a
short Python loop walks the record chain to find where each record starts
(pcap records and pcapng blocks are length-prefixed, so their offsets cannot
be computed without walking), and every header field is then gathered for all
packets at once with numpy fancy indexing on the raw bytes.  The fast path
(``native``, :mod:`analysis.native`) walks and decodes in C, with the same
rules, into the same arrays.  No per-packet object is ever created.

Supported: pcap (microsecond and nanosecond magic, either byte order),
pcapng (SHB/IDB/EPB, if_tsresol, several interfaces and link types);
link types Ethernet (1, with one optional 802.1Q tag), Linux cooked
SLL (113) and SLL2 (276), raw IP (101, 228, 229) and BSD loopback (0);
IPv4 and IPv6 (fixed header only: a packet with extension headers is kept
with ``proto`` set to the first next-header value); TCP and UDP.

Fields beyond the captured length (snaplen) read as 0; ``tcp_hdr_ok`` says
whether the whole TCP header, options included, was captured.

Damaged input is never read silently: :attr:`Packets.damage` lists what was wrong, one
dict per finding with ``kind``, ``message`` and, where reading stopped, ``offset`` (the
byte where the bad or cut record starts) and ``packets_read``:

* ``header``: the file has no readable file header — it is empty, ends inside the pcap file
  header (24 bytes) or the pcapng section header block, that block is bad, or the file starts
  with neither magic number (no pcap or pcapng file); no packets are read.  ``testbed analyze``
  refuses such a file given on its own, and warns about it as one damaged capture of a run.
* ``unsupported``: a pcapng whose interfaces use different timestamp units; no packets are read,
  as for ``header``.
* ``bad_record``: a record header no capture tool writes (pcap: a timestamp fraction of a
  second or more, a captured length above both the file's snap length and libpcap's
  largest, 262144, or above the packet's length on the wire; pcapng: a block length that is
  not a multiple of 4 of at least 12, a trailing length that differs from the leading one,
  a packet larger than its block).  Reading stops there: what follows cannot be framed.
* ``truncated``: the file ends inside the last record (a capture cut short or still being
  written); the records before it are read.
* ``snaplen``: the file's snap length is shorter than the link, IPv4 and TCP headers.
* ``headers_cut``: TCP packets captured without their whole TCP header (options included).
* ``length``: IP packets whose length on the wire contradicts their IP header (shorter than
  link header + IP length, or longer by more than a VLAN tag or FCS beyond Ethernet's minimum
  frame; an IPv4 length 0 or IPv6 payload length 0, as GSO jumbograms carry, is not checked).
* ``link_type``: a link type this reader does not decode (its packets read as non-IP).

:func:`analysis.report.analyze_file` adds ``count`` when the file holds another number of
packets than the capture's sidecar (``.meta.json``) says it wrote: a file cut on a record
boundary is otherwise sound.

The native reader stops at the same record for the same reason (``tbanalysis.c``).
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from analysis import native

LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW = 0, 1, 101
LINKTYPE_SLL, LINKTYPE_SLL2 = 113, 276
LINKTYPE_IPV4, LINKTYPE_IPV6 = 228, 229

TCP, UDP = 6, 17
FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 1, 2, 4, 8, 16, 32, 64, 128
#: TCP's sequence and acknowledgment numbers are 32 bits: they wrap (:func:`unwrap32`)
TWO32 = 1 << 32
MAX_SACK = 4   # a TCP header fits at most 4 SACK blocks
HEAD = 8       # payload bytes kept per packet (enough for a TLS record header + handshake type)
_PAD = 128     # zero bytes appended so gathers past a record's end stay in the buffer
MAX_CAPLEN = 262144   # libpcap's largest snap length: a longer record is damage
LINK_HEADER = {LINKTYPE_NULL: 4, LINKTYPE_ETHERNET: 14, 12: 0, LINKTYPE_RAW: 0, LINKTYPE_SLL: 16,
               LINKTYPE_IPV4: 0, LINKTYPE_IPV6: 0, LINKTYPE_SLL2: 20}   # the link types decoded


def unwrap32(values: np.ndarray, ref: int) -> np.ndarray:
    """uint32 sequence numbers (in time order) -> int64 offsets from ``ref``, without wraps."""
    d = (values.astype(np.int64) - ref) & (TWO32 - 1)
    d = np.where(d >= TWO32 // 2, d - TWO32, d) if len(d) and d[0] >= TWO32 // 2 else d
    if len(d) > 1:
        step = np.diff(d)
        if ((step < -TWO32 // 2) | (step > TWO32 // 2)).any():      # at least one wrap
            fix = np.cumsum(np.where(step < -TWO32 // 2, TWO32, 0)
                            - np.where(step > TWO32 // 2, TWO32, 0))
            d = d + np.concatenate([[0], fix])
    return d


@dataclass
class Packets:
    """One entry per captured packet, in file order.

    ``ts_ns``: capture timestamp in ns as the file stores it (CLOCK_REALTIME for
    tcpdump). ``src``/``dst``: 16-byte addresses, IPv4 as IPv4-mapped IPv6
    (``::ffff:a.b.c.d``). ``ip_len``: IPv4 total length or IPv6 payload
    length + 40. ``payload_len``: TCP/UDP payload bytes computed from the IP
    header (not from the captured length). ``wscale``: window scale option
    (-1 when absent, normally only on SYNs). ``win``: the raw 16-bit window
    field, unscaled. ``sack``: (n, 4, 2) left/right edges, ``nsack`` valid
    blocks. ``head``: the first ``HEAD`` payload bytes, ``head_len`` of them
    captured.
    """

    ts_ns: np.ndarray
    iface: np.ndarray
    caplen: np.ndarray
    wirelen: np.ndarray
    ipver: np.ndarray
    proto: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    ip_id: np.ndarray
    ip_len: np.ndarray
    sport: np.ndarray
    dport: np.ndarray
    payload_len: np.ndarray
    flags: np.ndarray
    seq: np.ndarray
    ack: np.ndarray
    win: np.ndarray
    wscale: np.ndarray
    mss: np.ndarray
    sack_perm: np.ndarray
    has_ts: np.ndarray
    tsval: np.ndarray
    tsecr: np.ndarray
    nsack: np.ndarray
    sack: np.ndarray
    tcp_hdr_ok: np.ndarray
    head: np.ndarray
    head_len: np.ndarray
    damage: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts_ns)

    def select(self, index) -> "Packets":
        """A new table with the packets picked by a boolean mask or index array."""
        return Packets(**{f: getattr(self, f)[index] for f in ARRAYS}, damage=self.damage)


ARRAYS = tuple(f.name for f in fields(Packets) if f.name != "damage")   # the per-packet fields


def read(path: str | Path, engine: str | None = None) -> Packets:
    """Read a pcap or pcapng file (format detected from its magic number); what was wrong
    with it is in the result's ``damage`` (module docstring), a file without a readable file
    header included (no packets, ``header`` damage).

    ``engine`` (see :func:`analysis.native.engine`): ``native`` walks and decodes the
    records in C, a pcap file through a memory map, ``WINDOW`` bytes resident at a time
    (memory: the arrays, about 140 bytes per packet; pcapng is read whole); ``python`` is
    the reference below."""
    fast = native.engine(engine) == "native"
    with open(path, "rb") as f:
        magic = f.read(4)
        fault = _header_fault(magic, os.fstat(f.fileno()).st_size)
        if fault:
            return _unread(fault)
        if fast and magic in _PCAP_MAGIC:
            return _read_pcap_native(f, magic)
    data = Path(path).read_bytes()
    raw = np.frombuffer(data + bytes(_PAD), np.uint8)
    damage: list[dict] = []
    if magic == PCAPNG_MAGIC:
        walked = _walk_pcapng(data, raw, damage)
        if damage and damage[0]["kind"] in UNREAD:
            return _unread(damage[0]["message"], damage[0]["kind"])
        ts, iface, off, cap, wire, links = walked
        snaplen = None
    else:
        ts, iface, off, cap, wire, links = _walk_pcap(data, raw, damage)
        snaplen = _file_header(data)[2]
    if not fast:
        pk = decode(raw, ts, iface, off, cap, wire, links)
    else:
        out = native.empty_fields(len(off))
        native.decode(raw, off, cap, _link_types(links, iface), out)
        out.update(ts_ns=np.asarray(ts, np.int64), iface=iface, caplen=cap.astype(np.uint32),
                   wirelen=wire.astype(np.uint32))
        pk = Packets(**out)
    pk.damage = damage
    return _check_headers(pk, snaplen, links)


_PCAP_MAGIC = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"      # a section header block's type
WINDOW = 64 << 20     # bytes of the mapped file resident at a time (native reader)


def _header_fault(magic: bytes, size: int) -> str | None:
    """Why a file of ``size`` bytes starting with ``magic`` has no readable pcap file header or
    is no pcap or pcapng file (``header`` damage, module docstring), or None."""
    if size == 0:
        return "an empty file (0 bytes), not a capture: no pcap or pcapng file header"
    if size < 4:
        return f"not a capture file: {size} bytes, too short for a file header (a capture cut short)"
    if magic in _PCAP_MAGIC and size < 24:
        return (f"the pcap file header is cut short: {size} of its 24 bytes (a capture cut short); "
                "no packets read")
    if magic not in _PCAP_MAGIC and magic != PCAPNG_MAGIC:
        return f"not a pcap or pcapng file (magic {magic.hex()})"
    return None


#: damage after which nothing of the file is read (module docstring)
UNREAD = ("header", "unsupported")


def _unread(message: str, kind: str = "header") -> Packets:
    """No packets, and ``kind`` damage (:data:`UNREAD`) saying why (``message``): a file
    without a readable file header, or one this reader does not take."""
    pk = Packets(**native.empty_fields(0))
    pk.damage = [{"kind": kind, "offset": 0, "packets_read": 0, "message": message}]
    return pk


def _file_header(head: bytes) -> tuple[bool, bool, int, int]:
    """(little-endian, nanosecond, snap length, link type) of a pcap file header."""
    le = head[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
    nano = head[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    snaplen, linktype = struct.unpack_from("<II" if le else ">II", head, 16)
    return le, nano, snaplen, linktype & 0x0FFFFFFF


def _record_fault(frac: int, cap: int, wire: int, nano: bool, snaplen: int) -> str | None:
    """Why a pcap record header is not one a capture tool writes, or None (module doc)."""
    if frac >= (1_000_000_000 if nano else 1_000_000):
        return f"timestamp fraction {frac} is not below one second ({'ns' if nano else 'µs'})"
    if cap > max(snaplen, MAX_CAPLEN):
        return (f"captured length {cap} exceeds the snap length {snaplen} and the largest "
                f"record libpcap writes ({MAX_CAPLEN})")
    if cap > wire:
        return f"captured length {cap} exceeds the packet's length on the wire ({wire})"
    return None


def _stopped(data, pos: int, k: int, nano: bool, snaplen: int, le: bool) -> dict | None:
    """The damage where a pcap walk stopped at byte ``pos`` after ``k`` records (None at
    the file's end): a bad record header, or a last record cut short."""
    size = len(data)
    if pos >= size:
        return None
    if pos + 16 > size:
        return {"kind": "truncated", "offset": pos, "packets_read": k,
                "message": f"the file ends {size - pos} bytes into the record header at byte "
                           f"{pos} (a capture cut short); {k} packets read"}
    _, frac, cap, wire = struct.unpack_from("<IIII" if le else ">IIII", data, pos)
    fault = _record_fault(frac, cap, wire, nano, snaplen)
    if fault:
        return {"kind": "bad_record", "offset": pos, "packets_read": k,
                "message": f"bad record header at byte {pos}: {fault}; reading stopped there "
                           f"after {k} packets, {size - pos} of {size} bytes unread"}
    return {"kind": "truncated", "offset": pos, "packets_read": k,
            "message": f"the last record, at byte {pos}, is cut short: its header says {cap} "
                       f"captured bytes, the file ends {size - pos - 16} bytes after it (a "
                       f"capture cut in the middle of a packet); {k} packets read"}


def _read_pcap_native(f, magic: bytes) -> Packets:
    """Two passes over the memory-mapped records, ``WINDOW`` bytes at a time, each window
    released once walked (so a large file does not stay resident): count, then decode
    into arrays of that size (see :func:`read`)."""
    le, nano, snaplen, linktype = _file_header(magic + f.read(20))
    maxcap = max(snaplen, MAX_CAPLEN)
    size = os.fstat(f.fileno()).st_size
    if size <= 24:
        return Packets(**native.empty_fields(0))
    mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    buf = np.frombuffer(mm, np.uint8)
    try:
        release = size > WINDOW         # else the count pass leaves the pages for the next
        n, pos = _walk_windows(mm, buf, lambda b, k0: native.pcap_records(
            b, len(b), le, nano, linktype, maxcap), release)
        out = native.empty_fields(n)
        done, _ = _walk_windows(mm, buf, lambda b, k0: native.pcap_records(
            b, len(b), le, nano, linktype, maxcap, out, k0, n - k0), release)
        stop = _stopped(mm, pos, n, nano, snaplen, le)
    finally:
        del buf                         # the map closes only without views on it
        try:
            mm.close()
        except BufferError:             # a view still held elsewhere for a moment (a sampling
            pass                        # profiler's frame, e.g. Dask's): unmapped when it goes
    pk = Packets(**out) if done == n else Packets(**out).select(slice(0, done))
    pk.damage = [stop] if stop else []
    return _check_headers(pk, snaplen, [linktype])


def _walk_windows(mm: mmap.mmap, buf: np.ndarray, walk, release: bool) -> tuple[int, int]:
    """``walk(window, records so far) -> (records, bytes used, bad)`` over buf[24:], one
    window at a time (a record cut by a window's end starts the next window), each window's
    pages released after it when ``release``; returns the number of records and the byte
    where the walk stopped (the file's size unless a record is bad or cut short)."""
    pos, k, page = 24, 0, mmap.PAGESIZE
    while pos < len(buf):
        width = WINDOW
        while True:
            got, used, bad = walk(buf[pos:pos + width], k)
            if used or bad or pos + width >= len(buf):
                break
            width *= 2                  # one record larger than the window
        lo, hi = pos // page * page, (pos + used) // page * page
        if release and hi > lo:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        pos += used
        k += got
        if bad or used == 0:
            break
    return k, pos


def _link_types(links, iface) -> np.ndarray:
    return np.asarray(links)[iface] if len(links) > 1 else np.full(len(iface), links[0])


def _check_headers(pk: Packets, snaplen: int | None, links) -> Packets:
    """Add to ``pk.damage`` what the file's snap length and link types leave undecoded, and IP
    packets whose lengths contradict their records' (module docstring)."""
    for lt in sorted(set(int(x) for x in links)):
        if lt not in LINK_HEADER:
            pk.damage.append({"kind": "link_type", "message": (
                f"link type {lt} is not one this reader decodes (supported: "
                f"{', '.join(map(str, sorted(LINK_HEADER)))}): its packets read as non-IP")})
    need = max((LINK_HEADER.get(int(lt), 0) for lt in links), default=0) + 40
    if snaplen and snaplen < need:
        pk.damage.append({"kind": "snaplen", "message": (
            f"the snap length {snaplen} is shorter than the link, IPv4 and TCP headers "
            f"({need} bytes): packets read without them are not TCP to the analysis")})
    lh = _link_types(np.array([LINK_HEADER.get(int(lt), 0) for lt in links]), pk.iface)
    ip_len, wire = pk.ip_len.astype(np.int64), pk.wirelen.astype(np.int64)
    jumbo = ((pk.ipver == 4) & (ip_len == 0)) | ((pk.ipver == 6) & (ip_len == 40))
    odd = (pk.ipver > 0) & ~jumbo & ((wire < lh + ip_len) | ((wire > lh + ip_len + 4) & (wire > 64)))
    if odd.any():
        first = int(np.argmax(odd))
        pk.damage.append({"kind": "length", "packets": int(odd.sum()), "first_packet": first,
                          "message": (
            f"{int(odd.sum())} IP packets have a length on the wire that their IP header "
            f"contradicts (the first is packet {first}: {int(wire[first])} bytes on the wire, "
            f"IP length {int(ip_len[first])} after a {int(lh[first])}-byte link header): a "
            "damaged record header or packet")})
    tcp = pk.proto == TCP
    cut = tcp & ~pk.tcp_hdr_ok
    if cut.any():
        first = int(np.argmax(cut))
        pk.damage.append({"kind": "headers_cut", "packets": int(cut.sum()), "first_packet": first,
                          "message": (
            f"{int(cut.sum())} of {int(tcp.sum())} TCP packets were captured without their whole "
            f"TCP header (the first is packet {first}, {int(pk.caplen[first])} of "
            f"{int(pk.wirelen[first])} bytes captured): their options (MSS, window scale, SACK "
            "blocks, timestamps) read as absent")})
    return pk


def _walk_pcap(data: bytes, raw: np.ndarray, damage: list):
    le, nano, snaplen, linktype = _file_header(data)
    e = "<" if le else ">"
    unpack = struct.Struct(e + "I").unpack_from
    offs = []
    append = offs.append
    pos, end = 24, len(data) - 16
    while pos <= end:
        append(pos)
        pos += 16 + unpack(data, pos + 8)[0]
    rec = np.asarray(offs, np.int64)
    h = _header_words(raw, rec, 4, le)
    frac, cap, wire = h[:, 1], h[:, 2], h[:, 3]
    bad = (frac >= (1_000_000_000 if nano else 1_000_000)) | (cap > max(snaplen, MAX_CAPLEN)) \
        | (cap > wire)
    keep = int(np.argmax(bad)) if bad.any() else len(rec) - (pos > len(data))
    stop = _stopped(data, int(rec[keep]) if keep < len(rec) else pos, keep, nano, snaplen, le)
    if stop:
        damage.append(stop)
    rec, h = rec[:keep], h[:keep]
    ts = h[:, 0] * 1_000_000_000 + (h[:, 1] if nano else h[:, 1] * 1000)
    cap, wire = h[:, 2], h[:, 3]
    iface = np.zeros(len(rec), np.uint16)
    return ts, iface, rec + 16, cap, wire, np.array([linktype])


def _walk_pcapng(data: bytes, raw: np.ndarray, damage: list):
    pos, n = 0, len(data)
    e = "<"
    links: list[int] = []
    resol: list[tuple[int, int]] = []      # per interface: (base, exponent) of the time unit
    epb_off, epb_if = [], []

    def stop(kind, what):
        if pos == 0:                        # the section header block: the file's header
            damage.append({"kind": "header", "offset": 0, "packets_read": 0, "message": (
                f"the pcapng file header (section header block) is damaged: {what}; no packets "
                "read")})
            return
        damage.append({"kind": kind, "offset": pos, "packets_read": len(epb_off), "message": (
            f"{what}; reading stopped there after {len(epb_off)} packets, {n - pos} of {n} "
            "bytes unread" if kind == "bad_record" else
            f"{what} (a capture cut short); {len(epb_off)} packets read")})

    while pos < n:
        if pos + 12 > n:
            stop("truncated", f"the file ends {n - pos} bytes into the block header at byte {pos}")
            break
        btype = struct.unpack_from(e + "I", data, pos)[0]
        if btype == 0x0A0D0D0A:             # section header: byte order may change
            e = "<" if data[pos + 8:pos + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            links, resol = [], []
        blen = struct.unpack_from(e + "I", data, pos + 4)[0]
        if blen < 12 or blen % 4:
            stop("bad_record", f"bad block header at byte {pos}: block length {blen} is not a "
                               "multiple of 4 of at least 12")
            break
        if pos + blen > n:
            stop("truncated", f"the last block, at byte {pos}, is cut short: its header says "
                              f"{blen} bytes, the file ends {n - pos} bytes after its start")
            break
        if struct.unpack_from(e + "I", data, pos + blen - 4)[0] != blen:
            stop("bad_record", f"bad block at byte {pos}: its trailing length differs from its "
                               f"leading length {blen}")
            break
        if btype == 6:
            cap, wire = struct.unpack_from(e + "II", data, pos + 20) if blen >= 32 else (blen, 0)
            if cap > blen - 32 or cap > wire:
                stop("bad_record", f"bad packet block at byte {pos}: captured length {cap} "
                                   f"exceeds its block ({blen} bytes) or its length on the wire "
                                   f"({wire})")
                break
            epb_off.append(pos)
            epb_if.append(struct.unpack_from(e + "I", data, pos + 8)[0])
        elif btype == 1:
            links.append(struct.unpack_from(e + "H", data, pos + 8)[0])
            resol.append(_if_tsresol(data, pos, blen, e))
        pos += blen
    if len(set(resol)) > 1:         # no packet read: as a file without a readable header
        damage[:] = [{"kind": "unsupported", "offset": 0, "packets_read": 0, "message": (
            "a pcapng whose interfaces have different timestamp units (if_tsresol): not read")}]
        return None
    base, exp = resol[0] if resol else (10, 6)
    rec = np.asarray(epb_off, np.int64)
    h = _header_words(raw, rec, 7, e == "<")
    units = (h[:, 3] << 32) | h[:, 4]
    if base == 10 and exp <= 9:
        ts = units * 10 ** (9 - exp)
    else:
        ts = (units.astype(np.float64) * 1e9 / float(base) ** exp).astype(np.int64)
    iface = np.asarray(epb_if, np.uint16)
    return ts, iface, rec + 28, h[:, 5], h[:, 6], np.asarray(links or [1])


def _if_tsresol(data: bytes, pos: int, blen: int, e: str) -> tuple[int, int]:
    opt, end = pos + 16, pos + blen - 4
    while opt + 4 <= end:
        code, olen = struct.unpack_from(e + "HH", data, opt)
        if code == 0:
            break
        if code == 9 and olen >= 1:
            v = data[opt + 4]
            return (2, v & 0x7F) if v & 0x80 else (10, v)
        opt += 4 + (olen + 3) // 4 * 4
    return (10, 6)


def _header_words(raw: np.ndarray, rec: np.ndarray, words: int, le: bool) -> np.ndarray:
    """(n, words) u32 of each record header, gathered at once."""
    dt = np.dtype("<u4" if le else ">u4")
    return raw[rec[:, None] + np.arange(4 * words)].view(dt).astype(np.int64)


def decode(raw: np.ndarray, ts, iface, off, cap, wire, links) -> Packets:
    """Dissect all packets at once. ``raw`` must end with ``_PAD`` zero bytes."""
    n = len(off)
    limit = off + cap                  # first byte not captured, per packet
    top = len(raw) - 1

    def grab(p, width, sel=slice(None)):
        """(n, width) bytes from absolute offsets p of packets ``sel`` (0 past their capture)."""
        pos = p[:, None] + np.arange(width)
        b = raw[np.minimum(pos, top)]
        b[pos >= limit[sel][:, None]] = 0
        return b

    def u8(p, sel=slice(None)):
        return grab(p, 1, sel)[:, 0]

    def u16(p, sel=slice(None)):
        b = grab(p, 2, sel).astype(np.uint16)
        return (b[:, 0] << 8) | b[:, 1]

    def u32(p, sel=slice(None)):
        b = grab(p, 4, sel).astype(np.uint32)
        return (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]

    lt = _link_types(links, iface)
    net = off.copy()
    ethertype = np.zeros(n, np.uint16)
    m = lt == LINKTYPE_ETHERNET
    net[m] += 14
    ethertype[m] = u16(off[m] + 12, m)
    vlan = m & (ethertype == 0x8100)
    net[vlan] += 4
    ethertype[vlan] = u16(off[vlan] + 16, vlan)
    m = lt == LINKTYPE_SLL
    net[m] += 16
    ethertype[m] = u16(off[m] + 14, m)
    m = lt == LINKTYPE_SLL2
    net[m] += 20
    ethertype[m] = u16(off[m], m)
    m = lt == LINKTYPE_NULL
    net[m] += 4
    fam = raw[np.minimum(off, len(raw) - 1)]     # host byte order family, first byte on LE hosts
    ethertype[m & (fam == 2)] = 0x0800
    ethertype[m & np.isin(fam, (24, 28, 30))] = 0x86DD
    m = np.isin(lt, (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6)) | (lt == 12)
    ver = u8(off) >> 4
    ethertype[m & (ver == 4)] = 0x0800
    ethertype[m & (ver == 6)] = 0x86DD

    v4 = ethertype == 0x0800
    v6 = ethertype == 0x86DD
    ipver = np.where(v4, 4, np.where(v6, 6, 0)).astype(np.uint8)
    ihl = np.where(v4, (u8(net) & 0x0F).astype(np.int64) * 4, 40)
    proto = np.where(v4, u8(net + 9), np.where(v6, u8(net + 6), 0)).astype(np.uint8)
    ip_len = np.where(v4, u16(net + 2), np.where(v6, u16(net + 4).astype(np.int64) + 40, 0))
    ip_len = ip_len.astype(np.uint32)
    ip_id = np.where(v4, u16(net + 4), 0).astype(np.uint32)
    frag_off = np.where(v4, u16(net + 6) & 0x1FFF, 0)
    proto[frag_off != 0] = 0           # non-first fragments carry no transport header

    src = np.zeros((n, 16), np.uint8)
    dst = np.zeros((n, 16), np.uint8)
    src[v4, 10:12] = 0xFF
    dst[v4, 10:12] = 0xFF
    idx4 = np.nonzero(v4)[0]
    src[idx4, 12:] = grab(net[idx4] + 12, 4, idx4)
    dst[idx4, 12:] = grab(net[idx4] + 16, 4, idx4)
    idx6 = np.nonzero(v6)[0]
    src[idx6] = grab(net[idx6] + 8, 16, idx6)
    dst[idx6] = grab(net[idx6] + 24, 16, idx6)

    l4 = net + ihl
    tcp = proto == TCP
    udp = proto == UDP
    l4m = tcp | udp
    sport = np.where(l4m, u16(l4), 0).astype(np.uint16)
    dport = np.where(l4m, u16(l4 + 2), 0).astype(np.uint16)
    doff = np.where(tcp, (u8(l4 + 12) >> 4).astype(np.int64) * 4, 8)
    payload_len = np.where(
        tcp, ip_len.astype(np.int64) - ihl - doff,
        np.where(udp, u16(l4 + 4).astype(np.int64) - 8, 0))
    payload_len = np.maximum(payload_len, 0).astype(np.int32)

    t = np.nonzero(tcp)[0]
    tl4 = l4[t]
    flags = np.zeros(n, np.uint16)
    seq = np.zeros(n, np.uint32)
    ack = np.zeros(n, np.uint32)
    win = np.zeros(n, np.uint16)
    flags[t] = u16(tl4 + 12, t) & 0x01FF
    seq[t] = u32(tl4 + 4, t)
    ack[t] = u32(tl4 + 8, t)
    win[t] = u16(tl4 + 14, t)
    tcp_hdr_ok = np.zeros(n, bool)
    tcp_hdr_ok[t] = tl4 + doff[t] <= limit[t]

    opts = _tcp_options(u8, u32, tl4, doff[t], n, t)

    pay = l4 + doff
    head = np.zeros((n, HEAD), np.uint8)
    head_len = np.clip(np.minimum(limit - pay, payload_len), 0, HEAD).astype(np.uint8)
    has = np.nonzero(head_len > 0)[0]
    h = grab(pay[has], HEAD, has)
    h[np.arange(HEAD) >= head_len[has, None]] = 0
    head[has] = h

    return Packets(ts_ns=np.asarray(ts, np.int64), iface=iface, caplen=cap.astype(np.uint32),
                   wirelen=wire.astype(np.uint32), ipver=ipver, proto=proto, src=src, dst=dst,
                   ip_id=ip_id, ip_len=ip_len, sport=sport, dport=dport, payload_len=payload_len,
                   flags=flags, seq=seq, ack=ack, win=win, tcp_hdr_ok=tcp_hdr_ok,
                   head=head, head_len=head_len, **opts)


def _tcp_options(u8, u32, tl4, doff, n, t):
    """Walk the TCP option lists of all packets in lockstep (≤ 40 steps)."""
    wscale = np.full(n, -1, np.int8)
    mss = np.zeros(n, np.uint16)
    sack_perm = np.zeros(n, bool)
    has_ts = np.zeros(n, bool)
    tsval = np.zeros(n, np.uint32)
    tsecr = np.zeros(n, np.uint32)
    nsack = np.zeros(n, np.uint8)
    sack = np.zeros((n, MAX_SACK, 2), np.uint32)

    live = np.nonzero(doff > 20)[0]
    pos, end, who = tl4[live] + 20, tl4[live] + doff[live], t[live]
    while len(pos):
        kind = u8(pos, who)
        olen = u8(pos + 1, who).astype(np.int64)
        single = kind <= 1
        step = np.where(single, 1, olen)
        ok = single | ((olen >= 2) & (pos + olen <= end))
        k = ok & (kind == 2) & (olen == 4)
        mss[who[k]] = (u8(pos[k] + 2, who[k]).astype(np.uint16) << 8) | u8(pos[k] + 3, who[k])
        k = ok & (kind == 3) & (olen == 3)
        wscale[who[k]] = np.minimum(u8(pos[k] + 2, who[k]), 14)
        sack_perm[who[ok & (kind == 4)]] = True
        k = ok & (kind == 8) & (olen == 10)
        has_ts[who[k]] = True
        tsval[who[k]] = u32(pos[k] + 2, who[k])
        tsecr[who[k]] = u32(pos[k] + 6, who[k])
        k = np.nonzero(ok & (kind == 5) & (olen >= 10))[0]
        if len(k):
            nb = np.minimum((olen[k] - 2) // 8, MAX_SACK)
            nsack[who[k]] = nb
            for b in range(MAX_SACK):
                kb = k[nb > b]
                sack[who[kb], b, 0] = u32(pos[kb] + 2 + 8 * b, who[kb])
                sack[who[kb], b, 1] = u32(pos[kb] + 6 + 8 * b, who[kb])
        pos = pos + step
        keep = ok & (kind != 0) & (pos < end)
        pos, end, who = pos[keep], end[keep], who[keep]
    return dict(wscale=wscale, mss=mss, sack_perm=sack_perm, has_ts=has_ts, tsval=tsval,
                tsecr=tsecr, nsack=nsack, sack=sack)


def format_addr(a: np.ndarray) -> str:
    """Text form of one 16-byte address (dotted quad for IPv4-mapped)."""
    import ipaddress
    b = bytes(np.asarray(a, np.uint8))
    if b[:12] == b"\0" * 10 + b"\xff\xff":
        return str(ipaddress.IPv4Address(b[12:]))
    return str(ipaddress.IPv6Address(b))
