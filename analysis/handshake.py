"""Connection timeline of one TCP flow: handshake, TLS, first/last payload, FIN, and the
request/response exchanges (completion timeline).

All times are capture times (ns) of the packet that shows the event at the
capture point.  Events (absent ones are left out):

``syn``, ``synack``, ``ack`` (first client ACK of the server's SYN),
``tls_client_hello`` / ``tls_server_hello`` (first segment from client / server
whose payload starts with a TLS handshake record, type 22, of message type 1 /
2), ``first_app_data`` (first TLS application_data record, type 23, from the
client; under TLS 1.3 this is the client's encrypted Finished, which leaves
with the first request in practice; without TLS: the first client payload
byte), ``first_payload_c2s``/``last_payload_c2s`` and the same for ``s2c``
(first and last segment carrying payload), ``fin_c2s``/``fin_s2c``,
``rst``.  TLS records are only recognised at the start of a segment, which is
where a handshake record is in practice.

``initial_rtt`` = ``ack`` - ``syn``: Wireshark's ``tcp.analysis.initial_rtt``.
At the client it is one full RTT plus the server's SYN/ACK turnaround; at the
server the ``synack`` - ``syn`` part is ~0.  When a SYN or SYN/ACK was lost it
also holds the retransmission timeout (1 s).
``handshake_rtt``: the handshake's round trip with that timeout left out (Karn's
rule applied to the handshake): the larger of ``synack`` minus the last SYN seen
before it and ``ack`` minus the last SYN/ACK seen before it — one RTT at either
end; after a retransmission it pairs with the latest copy, so it may fall short
of the RTT, never long by a timeout.

Exchanges: the payload in sequence order is cut into *runs*: a new request
starts with the first client payload after the server has sent payload (and
the first response with the first server payload after a request).  For each
request i: ``request_first`` / ``request_last`` (first appearance of the
request's first byte; first appearance of its highest byte),
``response_first`` / ``response_last`` likewise, ``request_bytes`` /
``response_bytes`` (sequence space from the run's first byte to its highest,
so bytes lost before a receiver-side capture count too), ``response_acked``
(the client's cumulative ACK covering the response's last byte).  At a
sender-side capture the response's *last byte sent* is ``response_last`` and
*delivered* is ``response_acked``; at the client, ``response_last`` is the
arrival of the highest byte and ``response_acked`` the moment the client had
every byte (it ACKs at once when a hole is filled).
"""
from __future__ import annotations

import numpy as np

from analysis import native
from analysis.flows import Flow
from analysis.pcap import ACK, FIN, RST, SYN, Packets, unwrap32


def timeline(pk: Packets, flow: Flow) -> dict:
    idx, fwd = flow.index, flow.fwd
    t = flow.take(pk.ts_ns)
    fl = flow.take(pk.flags)
    plen = flow.take(pk.payload_len)
    head, hl = flow.take(pk.head), flow.take(pk.head_len)
    ev = {}

    def first(mask, name):
        w = np.nonzero(mask)[0]
        if len(w):
            ev[name] = int(t[w[0]])
        return w

    syn = (fl & (SYN | ACK)) == SYN
    synack = (fl & (SYN | ACK)) == (SYN | ACK)
    first(syn & fwd, "syn")
    sa = first(synack & ~fwd, "synack")
    if len(sa):
        want = (int(pk.seq[idx[sa[0]]]) + 1) & 0xFFFFFFFF
        later = np.arange(len(idx)) > sa[0]
        ack = first(later & fwd & ((fl & ACK) != 0) & ((fl & SYN) == 0) & (flow.take(pk.ack) == want),
                    "ack")
    data = plen > 0
    tls_hs = (hl >= 6) & (head[:, 0] == 22) & (head[:, 1] == 3)
    first(data & fwd & tls_hs & (head[:, 5] == 1), "tls_client_hello")
    first(data & ~fwd & tls_hs & (head[:, 5] == 2), "tls_server_hello")
    if "tls_client_hello" in ev:
        first(data & fwd & (hl >= 1) & (head[:, 0] == 23), "first_app_data")
    else:
        first(data & fwd, "first_app_data")
    for d, m in (("c2s", fwd), ("s2c", ~fwd)):
        w = first(data & m, f"first_payload_{d}")
        if len(w):
            ev[f"last_payload_{d}"] = int(t[w[-1]])
        first(((fl & FIN) != 0) & m, f"fin_{d}")
    first((fl & RST) != 0, "rst")
    if "syn" in ev and "ack" in ev:
        ev["initial_rtt"] = ev["ack"] - ev["syn"]
        syns = np.nonzero(syn & fwd)[0]
        before = syns[syns < sa[0]]
        last_syn = before[-1] if len(before) else syns[0]
        last_synack = sa[sa < ack[0]][-1]        # the first SYN/ACK is among them
        ev["handshake_rtt"] = max(ev["synack"] - int(t[last_syn]), ev["ack"] - int(t[last_synack]))
    return ev


def exchanges(pk: Packets, flow: Flow, engine: str | None = None) -> list[dict]:
    """Request/response runs with first/last byte times (see module docstring): for all
    packets at once with numpy, or (``engine="python"``, :func:`analysis.native.engine`)
    packet by packet, the reference."""
    fwd = flow.fwd
    t = flow.take(pk.ts_ns)
    plen = flow.take(pk.payload_len).astype(np.int64)
    ends = _ends(pk, flow, plen)
    if native.engine(engine) == "python":
        return _exchanges_loop(t, fwd, plen, ends)
    return _exchanges_vec(t, fwd, plen, ends)


def _ends(pk: Packets, flow: Flow, plen: np.ndarray) -> dict:
    """Per side ("c", "s"): (seq, end, ack of the other side) relative to its first byte."""
    idx, fwd = flow.index, flow.fwd
    fl = flow.take(pk.flags)
    ends = {}
    for side, m in (("c", fwd), ("s", ~fwd)):
        syn = np.nonzero(m & ((fl & SYN) != 0))[0]
        ref_i = syn[0] if len(syn) else (np.nonzero(m)[0][0] if m.any() else None)
        if ref_i is None:
            ends[side] = None
            continue
        ref = int(pk.seq[idx[ref_i]]) + (1 if len(syn) else 0)
        seq = np.zeros(len(idx), np.int64)
        seq[m] = unwrap32(flow.take(pk.seq)[m], ref)
        ack = np.full(len(idx), -1, np.int64)
        am = ~m & ((fl & ACK) != 0)
        ack[am] = unwrap32(flow.take(pk.ack)[am], ref)
        ends[side] = (seq, seq + plen, ack)
    return ends


def _exchanges_vec(t, fwd, plen, ends) -> list[dict]:
    data = np.nonzero(plen > 0)[0]
    end = np.zeros(len(t), np.int64)
    for side, m in (("c", fwd), ("s", ~fwd)):
        if ends[side] is not None:
            end[m] = ends[side][1][m]
    fresh = np.zeros(len(t), bool)             # bytes beyond the side's highest so far
    before = np.zeros(len(t), np.int64)        # that highest
    for m in (fwd[data], ~fwd[data]):
        r = data[m]
        hi = np.maximum(np.maximum.accumulate(np.concatenate([[0], end[r]]))[:-1], 0)
        fresh[r], before[r] = end[r] > hi, hi
    new = np.nonzero(fresh)[0]
    start = before[new]
    client = fwd[new]
    run = np.nonzero(np.concatenate([[True], client[1:] != client[:-1]]))[0]
    last = np.concatenate([run[1:], [len(new)]]) - 1
    out = []
    for a, b in zip(run.tolist(), last.tolist()):
        key = "request" if client[a] else "response"
        if key == "request":
            out.append({"request": len(out)})
        elif not out:
            continue
        out[-1].update({f"{key}_first": int(t[new[a]]), f"{key}_last": int(t[new[b]]),
                        f"{key}_bytes": int(end[new[b]] - start[a]), f"_{key}_end": int(end[new[b]])})
    if ends["s"] is not None and out:
        acked = np.maximum.accumulate(np.where(fwd, ends["s"][2], -1))
        for ex in out:
            if "_response_end" in ex:
                k = int(np.searchsorted(acked, ex["_response_end"]))
                if k < len(acked):
                    ex["response_acked"] = int(t[k])
    for ex in out:
        ex.pop("_request_end", None)
        ex.pop("_response_end", None)
    return out


def _exchanges_loop(t, fwd, plen, ends) -> list[dict]:
    data = plen > 0
    order = np.nonzero(data)[0]
    out, cur, last_side = [], None, None
    new_hi = {"c": 0, "s": 0}
    for i in order:
        side = "c" if fwd[i] else "s"
        seq, end, _ = ends[side]
        if end[i] <= new_hi[side]:
            continue                          # retransmission: no new byte, no new run
        key = "request" if side == "c" else "response"
        if side == "c" and last_side != "c":
            cur = {"request": len(out), "request_first": int(t[i]), "_request_start": new_hi["c"]}
            out.append(cur)
        elif side == "s" and last_side != "s" and cur is not None:
            cur["response_first"] = int(t[i])
            cur["_response_start"] = new_hi["s"]
        if cur is not None:
            cur[f"{key}_last"] = int(t[i])
            cur[f"{key}_bytes"] = int(end[i]) - cur[f"_{key}_start"]
            cur[f"_{key}_end"] = int(end[i])
        new_hi[side] = int(end[i])
        last_side = side
    for ex in out:
        if "_response_end" in ex and ends["s"] is not None:
            ack = ends["s"][2]
            hit = np.nonzero(fwd & (ack >= ex["_response_end"]))[0]
            if len(hit):
                ex["response_acked"] = int(t[hit[0]])
        for k in ("_request_start", "_request_end", "_response_start", "_response_end"):
            ex.pop(k, None)
    return out
