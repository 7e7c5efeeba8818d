"""Split a packet table into bidirectional flows (TCP or UDP 5-tuples).

A flow's *client* is the host that sent its first SYN without ACK (TCP), or
else the sender of the flow's first packet in the capture.  ``fwd[i]`` is
True for packets from client to server.  Nothing here is TCP-specific except
the choice of the client.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .pcap import ACK, SYN, TCP, UDP, Packets, format_addr


@dataclass(frozen=True)
class FlowKey:
    proto: int
    client: str
    client_port: int
    server: str
    server_port: int

    @property
    def name(self) -> str:
        p = {TCP: "tcp", UDP: "udp"}.get(self.proto, str(self.proto))
        return f"{p}-{self.client}:{self.client_port}-{self.server}:{self.server_port}"

    def matches(self, src: str | None, sport: int | None, dst: str | None, dport: int | None) -> bool:
        """True when the given (possibly partial) endpoints name this flow in either direction."""
        a = (self.client, self.client_port, self.server, self.server_port)
        b = (self.server, self.server_port, self.client, self.client_port)
        want = (src, sport, dst, dport)
        return any(all(w is None or w == x for w, x in zip(want, side)) for side in (a, b))


@dataclass
class Flow:
    key: FlowKey
    index: np.ndarray   # packet indices into the table, in capture order
    fwd: np.ndarray     # bool per packet of the flow: True if client -> server


def split(pk: Packets, protos=(TCP, UDP)) -> list[Flow]:
    """All flows of the given transport protocols, ordered by first packet."""
    sel = np.nonzero(np.isin(pk.proto, protos))[0]
    if len(sel) == 0:
        return []
    a, b = pk.src[sel].view(">u8"), pk.dst[sel].view(">u8")    # (n, 2) each
    ap, bp = pk.sport[sel].astype(np.uint64), pk.dport[sel].astype(np.uint64)
    # both directions share one key: the two endpoints (address, port) in ascending order
    a_first = (a[:, 0] < b[:, 0]) | ((a[:, 0] == b[:, 0]) & (
        (a[:, 1] < b[:, 1]) | ((a[:, 1] == b[:, 1]) & (ap <= bp))))
    lo = lambda x, y: np.where(a_first, x, y)  # noqa: E731
    key = np.column_stack([lo(a[:, 0], b[:, 0]), lo(a[:, 1], b[:, 1]), lo(b[:, 0], a[:, 0]),
                           lo(b[:, 1], a[:, 1]),
                           pk.proto[sel].astype(np.uint64) << 32 | lo(ap, bp) << 16 | lo(bp, ap)])
    # sort only the first key of each run of packets with the same key (a capture's
    # packets come in runs of one flow)
    head = np.zeros(len(sel), bool)
    head[0] = True
    for c in range(key.shape[1]):
        head[1:] |= key[1:, c] != key[:-1, c]
    heads = np.nonzero(head)[0]
    kv = np.ascontiguousarray(key[heads]).view(np.dtype((np.void, 8 * key.shape[1]))).ravel()
    _, first, inverse = np.unique(kv, return_index=True, return_inverse=True)
    first = heads[first]
    inverse = inverse.ravel()[np.cumsum(head) - 1]
    order = np.argsort(inverse, kind="stable")
    groups = np.split(sel[order], np.cumsum(np.bincount(inverse))[:-1])
    return [_make(pk, groups[g]) for g in np.argsort(first, kind="stable")]


def _make(pk: Packets, idx: np.ndarray) -> Flow:
    syn = (pk.flags[idx] & (SYN | ACK)) == SYN
    if pk.proto[idx[0]] == TCP and syn.any():
        c = idx[np.argmax(syn)]
    else:
        c = idx[0]
    src = pk.src[idx].view(">u8")
    mine = pk.src[c].view(">u8")
    fwd = (pk.sport[idx] == pk.sport[c]) & (src[:, 0] == mine[0]) & (src[:, 1] == mine[1])
    key = FlowKey(int(pk.proto[c]), format_addr(pk.src[c]), int(pk.sport[c]),
                  format_addr(pk.dst[c]), int(pk.dport[c]))
    return Flow(key, idx, fwd)
