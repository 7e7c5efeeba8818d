"""Split a packet table into bidirectional flows (TCP or UDP 5-tuples).

A flow's *client* is the host that sent its first SYN without ACK (TCP), or
else the sender of the flow's first packet in the capture.  ``fwd[i]`` is
True for packets from client to server.  Nothing here is TCP-specific except
the choice of the client.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.pcap import ACK, SYN, TCP, UDP, Packets, format_addr


@dataclass(frozen=True)
class FlowKey:
    proto: int
    client: str
    client_port: int
    server: str
    server_port: int

    @property
    def name(self) -> str:
        """``tcp-10.0.0.1:1000-10.0.0.2:80``; an IPv6 address in brackets (RFC 3986:
        ``tcp-[fd00::1]:1000-[fd00::2]:80``)."""
        p = {TCP: "tcp", UDP: "udp"}.get(self.proto, str(self.proto))
        return f"{p}-{_endpoint(self.client, self.client_port)}-{_endpoint(self.server, self.server_port)}"

    def matches(self, src: str | None, sport: int | None, dst: str | None, dport: int | None) -> bool:
        """True when the given (possibly partial) endpoints name this flow in either direction."""
        a = (self.client, self.client_port, self.server, self.server_port)
        b = (self.server, self.server_port, self.client, self.client_port)
        want = (src, sport, dst, dport)
        return any(all(w is None or w == x for w, x in zip(want, side)) for side in (a, b))


def _endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


@dataclass
class Flow:
    key: FlowKey
    index: np.ndarray   # packet indices into the table, in capture order
    fwd: np.ndarray     # bool per packet of the flow: True if client -> server

    def take(self, a: np.ndarray) -> np.ndarray:
        """``a[index]``: a field's values for this flow's packets; a view, not a copy, when
        they are contiguous in the capture (one flow per capture)."""
        i = self.index
        if len(i) and int(i[-1]) - int(i[0]) + 1 == len(i):
            return a[int(i[0]):int(i[-1]) + 1]
        return a[i]


def split(pk: Packets, protos=(TCP, UDP)) -> list[Flow]:
    """All flows of the given transport protocols, ordered by first packet."""
    sel = np.nonzero(np.isin(pk.proto, protos))[0]
    if len(sel) == 0:
        return []
    whole = len(sel) == len(pk)
    if _one_flow(pk, sel if not whole else None):
        return [_make(pk, sel)]
    # a capture's packets come in runs of one flow: compare each packet's key with the
    # previous one's column by column, then sort only the first key of each run
    head = np.zeros(len(sel), bool)
    head[0] = True
    for col in _key_columns(pk, None if whole else sel):
        head[1:] |= col[1:] != col[:-1]
    heads = np.nonzero(head)[0]
    key = np.ascontiguousarray(np.column_stack(list(_key_columns(pk, sel[heads]))))
    kv = key.view(np.dtype((np.void, 8 * key.shape[1]))).ravel()
    _, first, inverse = np.unique(kv, return_index=True, return_inverse=True)
    first = heads[first]
    if len(first) == 1:
        return [_make(pk, sel)]
    inverse = inverse.ravel()[np.cumsum(head) - 1]
    order = np.argsort(inverse, kind="stable")
    groups = np.split(sel[order], np.cumsum(np.bincount(inverse))[:-1])
    return [_make(pk, groups[g]) for g in np.argsort(first, kind="stable")]


def _one_flow(pk: Packets, sel) -> bool:
    """True when every packet (of ``sel``) has the endpoints of the first one, either way
    round: the common capture of one connection, told without sorting."""
    take = (lambda v: v) if sel is None else (lambda v: v[sel])  # noqa: E731
    a, b = take(pk.src).view(np.uint64), take(pk.dst).view(np.uint64)
    ap, bp, proto = take(pk.sport), take(pk.dport), take(pk.proto)

    def at(x, y, px, py):        # endpoints (x, px) -> (y, py) equal the first packet's
        return ((x[:, 0] == a[0, 0]) & (x[:, 1] == a[0, 1]) & (y[:, 0] == b[0, 0])
                & (y[:, 1] == b[0, 1]) & (px == ap[0]) & (py == bp[0]))
    return bool(((at(a, b, ap, bp) | at(b, a, bp, ap)) & (proto == proto[0])).all())


def _key_columns(pk: Packets, sel):
    """Five uint64 columns per packet (all packets when ``sel`` is None) shared by both
    directions of a flow: the two endpoints (address words, port) in ascending order, protocol."""
    take = (lambda v: v) if sel is None else (lambda v: v[sel])  # noqa: E731
    a, b = take(pk.src).view(np.uint64), take(pk.dst).view(np.uint64)    # (n, 2) each
    ap, bp = take(pk.sport).astype(np.uint64), take(pk.dport).astype(np.uint64)
    a_first = (a[:, 0] < b[:, 0]) | ((a[:, 0] == b[:, 0]) & (
        (a[:, 1] < b[:, 1]) | ((a[:, 1] == b[:, 1]) & (ap <= bp))))
    lo = lambda x, y: np.where(a_first, x, y)  # noqa: E731
    yield lo(a[:, 0], b[:, 0])
    yield lo(a[:, 1], b[:, 1])
    yield lo(b[:, 0], a[:, 0])
    yield lo(b[:, 1], a[:, 1])
    yield take(pk.proto).astype(np.uint64) << 32 | lo(ap, bp) << 16 | lo(bp, ap)


def _make(pk: Packets, idx: np.ndarray) -> Flow:
    syn = (pk.flags[idx] & (SYN | ACK)) == SYN
    if pk.proto[idx[0]] == TCP and syn.any():
        c = idx[np.argmax(syn)]
    else:
        c = idx[0]
    src = pk.src[idx].view(np.uint64)
    mine = pk.src[c].view(np.uint64)
    fwd = (pk.sport[idx] == pk.sport[c]) & (src[:, 0] == mine[0]) & (src[:, 1] == mine[1])
    key = FlowKey(int(pk.proto[c]), format_addr(pk.src[c]), int(pk.sport[c]),
                  format_addr(pk.dst[c]), int(pk.dport[c]))
    return Flow(key, idx, fwd)
