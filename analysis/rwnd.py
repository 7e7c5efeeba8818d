"""Receiver-window events of one data direction of a TCP flow, flagged packet by packet as
Wireshark 4.0's TCP sequence analysis flags them (``epan/dissectors/packet-tcp.c``,
``tcp_analyze_sequence_number``; tcptrace reports the same zero-window and window-full events).

The *sender* sends the direction's data, the *receiver* advertises the window it is limited by.
Each side's state is Wireshark's, updated by each of its packets after the packet is judged:
``window``, the raw 16-bit window field of its last packet (0 before its first); ``lastack``, the
ACK number of its last packet (0 before its first); ``nextseq``, the highest seq + payload (+1 for
a SYN or FIN) it sent, zero-window probes left out.  Comparisons are modulo 2^32.

*Window scale* (``scale``, ``scaling``): the receiver's shift count as Wireshark derives it from
the SYNs in the capture (RFC 7323): ``signalled`` when the receiver's SYN carried the option
(and the sender's SYN, if captured, did too); ``not used`` (shift 0) when a captured SYN of
either side lacked it; ``unknown`` (shift None, Wireshark's "window size scaling factor: -1
(unknown)") when neither is the case — a capture started after the handshake — and then, as in
Wireshark, no segment is judged window-full.

Events (each a packet; the docstring of each function says which exactly):

* :func:`zero_window` — ``tcp.analysis.zero_window``;
* :func:`zero_window_probes` — ``tcp.analysis.zero_window_probe``;
* :func:`window_full` — ``tcp.analysis.window_full``;
* :func:`window_update` — ``tcp.analysis.window_update``.

Linux probes a zero window with a segment one byte below ``nextseq`` and no payload, which
Wireshark 4.0 calls a keep-alive, not a zero-window probe: such probes are not counted here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.pcap import ACK, FIN, RST, SYN, TWO32, unwrap32

KINDS = ("zero_window", "zero_window_probe", "window_full", "window_update")
#: event times listed per kind in a summary (``truncated`` says when there were more)
FIRST = 10
M32 = TWO32 - 1                     # sequence arithmetic modulo 2^32
UNKNOWN, NOT_USED = -1, -2          # Wireshark's win_scale states
NEVER = -(1 << 62)                  # below any unwrapped sequence number


@dataclass
class WindowEvents:
    """Per kind in :data:`KINDS`, the flow positions (indices into the flow's packets) of the
    packets flagged; ``scale``/``scaling``: the receiver's window scale (module docstring)."""
    scale: int | None
    scaling: str
    zero_window: np.ndarray
    zero_window_probe: np.ndarray
    window_full: np.ndarray
    window_update: np.ndarray

    def summary(self, t: np.ndarray, t0: int, first: int = FIRST) -> dict:
        """JSON-ready: per kind ``count``, the times ``t`` of the first ``first`` (s from ``t0``)
        and ``truncated``; ``window_full``'s count is None when the scale is unknown."""
        out: dict = {"scale": self.scale, "scaling": self.scaling}
        for k in KINDS:
            pos = getattr(self, k)
            out[k] = {"count": None if k == "window_full" and self.scale is None else int(len(pos)),
                      "t": [round((int(x) - t0) / 1e9, 9) for x in t[pos[:first]]],
                      "truncated": bool(len(pos) > first)}
        return out


def _last_before(of: np.ndarray, values: np.ndarray, fill) -> np.ndarray:
    """For every packet, ``values`` at the last earlier packet where ``of`` is true (``fill``
    before the first): that side's state as the packet is judged."""
    n = len(of)
    pos = np.where(of, np.arange(n), -1)
    np.maximum.accumulate(pos, out=pos)
    prev = np.concatenate([[-1], pos[:-1]]) if n else pos
    out = np.asarray(values)[np.maximum(prev, 0)].copy()
    out[prev < 0] = fill
    return out


def zero_window_probes(side: np.ndarray, seq: np.ndarray, end: np.ndarray, plen: np.ndarray,
                       other_win: np.ndarray) -> np.ndarray:
    """Wireshark ``tcp.analysis.zero_window_probe``, a boolean mask: a segment from ``side`` of
    exactly 1 payload byte starting at ``side``'s nextseq (:func:`nextseq`) while the other
    side's last window field (``other_win`` before each packet) was 0.  ``seq``/``end``:
    unwrapped.  A probe does not advance nextseq, so the candidates (few) are judged in order."""
    cand = side & (plen == 1) & (other_win == 0)
    base = _running_max_before(side & ~cand, end)
    probe = np.zeros(len(side), bool)
    extra = NEVER              # the largest end of the candidates that were no probe
    for i in np.nonzero(cand)[0].tolist():
        nxt = max(int(base[i]), extra)
        if nxt != NEVER and int(seq[i]) == nxt:
            probe[i] = True
        else:
            extra = max(extra, int(end[i]))
    return probe


def nextseq(side: np.ndarray, end: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """``side``'s nextseq before each packet (the largest ``end`` it sent, its zero-window
    probes left out; unwrapped; ``NEVER`` before its first)."""
    return _running_max_before(side & ~probe, end)


def _running_max_before(of: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For every packet, the largest ``values`` of the earlier packets ``of`` marks (``NEVER``
    before the first)."""
    grow = np.where(of, values, NEVER)
    np.maximum.accumulate(grow, out=grow)
    return np.concatenate([[NEVER], grow[:-1]]) if len(grow) else grow


def _receiver_scale(fwd: np.ndarray, flags: np.ndarray, wscale: np.ndarray) -> np.ndarray:
    """Wireshark's win_scale of the receiver (``not fwd``) before each packet: the option of each
    side's SYN (``pdu_store_window_scale_option``), then ``verify_tcp_window_scaling`` (a SYN
    without it: neither side scales; a SYN/ACK with it after a SYN without: no scaling)."""
    n = len(fwd)
    ws = {True: UNKNOWN, False: UNKNOWN}      # by "from the sender"
    out = np.full(n, UNKNOWN, np.int16)
    prev = 0
    for i in np.nonzero((flags & SYN) != 0)[0].tolist():
        out[prev:i + 1] = ws[False]
        me = bool(fwd[i])
        if wscale[i] >= 0:
            ws[me] = int(wscale[i])
        if ws[me] == UNKNOWN:
            ws[me] = ws[not me] = NOT_USED
        elif flags[i] & ACK and ws[not me] == NOT_USED:
            ws[me] = NOT_USED
        prev = i + 1
    out[prev:] = ws[False]
    return out


def zero_window(recv: np.ndarray, win: np.ndarray, flags: np.ndarray,
                probe: np.ndarray) -> np.ndarray:
    """Wireshark ``tcp.analysis.zero_window``: a packet from the receiver whose window field is 0,
    without SYN, FIN or RST (and not itself a zero-window probe)."""
    return recv & (win == 0) & ((flags & (SYN | FIN | RST)) == 0) & ~probe


def window_full(send: np.ndarray, seq_raw: np.ndarray, plen: np.ndarray, flags: np.ndarray,
                probe: np.ndarray, r_lastack: np.ndarray, r_win: np.ndarray,
                r_shift: np.ndarray) -> np.ndarray:
    """Wireshark ``tcp.analysis.window_full``: a segment from the sender with payload, without
    SYN, FIN or RST and no zero-window probe, whose seq + payload equals the receiver's last ACK
    number + its last window << its scale (not shifted while the receiver has sent only its
    SYN/ACK), when that scale is known (``r_shift`` >= 0)."""
    edge = (r_lastack.astype(np.int64) + (r_win.astype(np.int64) << np.maximum(r_shift, 0))) & M32
    return (send & (plen > 0) & ((flags & (SYN | FIN | RST)) == 0) & ~probe & (r_shift >= 0)
            & (((seq_raw.astype(np.int64) + plen) & M32) == edge))


def window_update(recv: np.ndarray, win: np.ndarray, plen: np.ndarray, flags: np.ndarray,
                  r_seq: np.ndarray, r_nextseq: np.ndarray, ack_raw: np.ndarray,
                  r_prev_win: np.ndarray, r_prev_ack: np.ndarray) -> np.ndarray:
    """Wireshark ``tcp.analysis.window_update``: a packet from the receiver without payload, SYN,
    FIN or RST, whose window field is not 0 and differs from the receiver's previous packet's,
    with seq at the receiver's nextseq and the previous packet's ACK number."""
    return (recv & (plen == 0) & ((flags & (SYN | FIN | RST)) == 0) & (win != 0)
            & (win != r_prev_win) & (r_seq == r_nextseq) & (ack_raw == r_prev_ack))


def events(fwd: np.ndarray, flags: np.ndarray, plen: np.ndarray, seq_raw: np.ndarray, seq: np.ndarray,
           ack_raw: np.ndarray, win: np.ndarray, wscale: np.ndarray) -> WindowEvents:
    """The receiver-window events of the data sent by the side whose packets ``fwd`` marks, over
    one flow's packets in capture order (raw header fields: ``win`` the 16-bit window,
    ``wscale`` the window scale option, -1 when absent).  ``seq``: the ``fwd`` packets' sequence
    numbers unwrapped (``analysis.tcp``'s, from any reference; the others' are not read): the
    other side's are unwrapped here, each side's sequence space on its own."""
    fwd = np.asarray(fwd, bool)
    rev = ~fwd
    plen = plen.astype(np.int64)
    win = win.astype(np.int32)
    seq = np.where(fwd, seq, 0)
    if rev.any():
        seq[rev] = unwrap32(seq_raw[rev], int(seq_raw[rev][0]))
    end = seq + plen + ((flags & SYN) != 0) + ((flags & FIN) != 0)
    # each side's state as the other side's packets (and its own next one) see it
    r_win = _last_before(rev, win, 0)
    f_probe = zero_window_probes(fwd, seq, end, plen, r_win)
    r_probe = zero_window_probes(rev, seq, end, plen, _last_before(fwd, win, 0))
    r_next = nextseq(rev, end, r_probe)
    del end
    ack_raw = ack_raw.astype(np.int64)
    r_ack = _last_before(rev, ack_raw, 0)
    wu = np.nonzero(window_update(rev, win, plen, flags, seq, r_next, ack_raw, r_win, r_ack))[0]
    del r_next, seq
    syn = (flags & SYN) != 0
    r_first = _last_before(rev & (syn | ((flags & ACK) != 0)), syn, False)
    s_rev = _receiver_scale(fwd, flags, wscale)
    shift = np.where(s_rev == UNKNOWN, -1, np.where(r_first | (s_rev == NOT_USED), 0, s_rev))
    del r_first
    wf = np.nonzero(window_full(fwd, seq_raw, plen, flags, f_probe, r_ack, r_win, shift))[0]
    final = int(s_rev[-1]) if len(s_rev) else UNKNOWN
    return WindowEvents(
        scale=None if final == UNKNOWN else max(final, 0),
        scaling="unknown" if final == UNKNOWN else "not used" if final == NOT_USED else "signalled",
        zero_window=np.nonzero(zero_window(rev, win, flags, r_probe))[0],
        zero_window_probe=np.nonzero(f_probe)[0],
        window_full=wf, window_update=wu)
