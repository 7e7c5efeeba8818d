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
    port = lambda v: v[sel, None].astype(">u2").view(np.uint8).reshape(-1, 2)
    a = np.concatenate([pk.src[sel], port(pk.sport)], axis=1)
    b = np.concatenate([pk.dst[sel], port(pk.dport)], axis=1)
    key = np.ascontiguousarray(np.concatenate([pk.proto[sel, None], _order(a, b)], axis=1))
    kv = key.view(np.dtype((np.void, key.shape[1]))).ravel()
    _, first, inverse = np.unique(kv, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    groups = np.split(sel[order], np.cumsum(np.bincount(inverse))[:-1])
    return [_make(pk, groups[g]) for g in np.argsort(first, kind="stable")]


def _order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows [min(a,b), max(a,b)] in lexicographic byte order, so both directions share a key."""
    diff = a != b
    first = np.argmax(diff, axis=1)
    rows = np.arange(len(a))
    a_first = a[rows, first] <= b[rows, first]
    lo = np.where(a_first[:, None], a, b)
    hi = np.where(a_first[:, None], b, a)
    return np.concatenate([lo, hi], axis=1)


def _make(pk: Packets, idx: np.ndarray) -> Flow:
    syn = (pk.flags[idx] & (SYN | ACK)) == SYN
    if pk.proto[idx[0]] == TCP and syn.any():
        c = idx[np.argmax(syn)]
    else:
        c = idx[0]
    fwd = (pk.sport[idx] == pk.sport[c]) & (pk.src[idx] == pk.src[c]).all(axis=1)
    key = FlowKey(int(pk.proto[c]), format_addr(pk.src[c]), int(pk.sport[c]),
                  format_addr(pk.dst[c]), int(pk.dport[c]))
    return Flow(key, idx, fwd)
