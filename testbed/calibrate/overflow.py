"""The overflow probe's loss: a train of full-size datagrams offered faster than a link's rate
into a direction that loses nothing at random, so its bottleneck queue fills and then overflows
(CHAPTER12.md C5: 600 Mbit/s through the long-haul path's 333 Mbit/s knee; ``pathprobe.overflow``
sends it, ``testbed calibrate`` reports it).  Pure functions of what the probes printed.

Definitions (``figures``), from the receiver's sequence numbers with the sender's clock at the
send of each datagram received, and the sequence numbers the sender's kernel refused (``unsent``:
never on the link, so left out everywhere):

- ``first_lost``: the lowest sequence number sent and not received — where the queue first
  overflowed (the direction drops nothing else; the drop counters beside the figures say whether
  that held).  None when nothing was lost.
- the window: the datagrams sent from ``first_lost`` to the end of the train.  Its first one met a
  full queue; those before it only filled the queue (``fill_s`` of the sender's time), so the
  window is the steady state: the queue stays full while the sender keeps offering more than the
  rate, and every datagram of the window it accepts leaves at the rate — those in the queue when
  the train ends too.
- ``window``: datagrams sent in the window; ``missing``: those of them not received;
  ``loss`` = (``missing`` − ``receive_drops``) / ``window``, where ``receive_drops`` are the
  datagrams the receiving side dropped after the link delivered them (``pathprobe.loss_drops``'
  ``receive_path``, counted over the train): not the link's loss, left out as calibrate's loss
  lines leave them out.  They come from the receiver falling behind, so late in the train, in
  the window; one before the queue's first overflow would start the window early, so the
  calibrate line shows their number.
- ``offered_mbps``: the sender's rate over the window in frame bits (``frame_bits`` per datagram,
  the link's unit): datagrams sent from the window's first received datagram to its last one,
  less one, × frame bits / the time between those two datagrams' send times.
- ``expected``: 1 − ``rate`` / ``offered_mbps`` — the share of what arrives that a full queue
  drained at ``rate`` cannot take.  A reference computed from the measured offered rate, for the
  check; the loss itself is counted from the sequence numbers.
- ``lost``: every datagram sent and not received (window or not); ``received``.
- ``send_gap_max_ms``: the longest time between the send times of two consecutive received
  datagrams of the window: a sender held up longer than the queue takes to drain (its size over
  ``rate``: 0.2 s on the long-haul path) lets it empty, the window is no steady state, and the
  loss departs from ``expected``.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

#: the chapter's offered rate (CHAPTER12.md C5: "600 Mbit/s through the 333 Mbit/s knee")
RATE = 600e6
#: seconds of the train at the offered rate: ~0.25 s fill the long-haul path's one-BDP queue, the
#: rest (~86,000 datagrams at 600 Mbit/s) is the window
SECONDS = 2.0
#: the check: |loss − expected| at most this (absolute)
TOL = 0.02


def figures(count: int, seq: Iterable[int], t_send_ns: Iterable[int], unsent: Iterable[int],
            frame_bits: float, rate: float, receive_drops: int = 0) -> dict[str, Any]:
    """The module docstring's figures of a train of ``count`` datagrams (sequence numbers
    0..count−1) through a link of ``rate`` bit/s: ``seq`` and ``t_send_ns`` of each datagram
    received (arrival order, duplicates allowed), ``unsent`` the sequence numbers never sent,
    ``receive_drops`` those the receiving side dropped."""
    seq = np.asarray(list(seq), dtype=np.int64)
    t_send = np.asarray(list(t_send_ns), dtype=np.int64)
    if len(seq) != len(t_send):
        raise ValueError(f"{len(seq)} sequence numbers but {len(t_send)} send times")
    if len(seq) and (seq.min() < 0 or seq.max() >= count):
        raise ValueError(f"sequence numbers outside 0..{count - 1}")
    got = np.zeros(count, dtype=bool)
    got[seq] = True
    sent = np.ones(count, dtype=bool)
    sent[np.asarray(list(unsent), dtype=np.int64)] = False
    missing = np.flatnonzero(sent & ~got)
    out: dict[str, Any] = {"count": count, "sent": int(sent.sum()), "received": int(got.sum()),
                           "lost": len(missing), "first_lost": None, "window": 0, "missing": 0,
                           "receive_drops": receive_drops, "loss": None,
                           "offered_mbps": None, "expected": None, "fill_s": None,
                           "send_gap_max_ms": None}
    if not len(missing):
        return out
    first = int(missing[0])
    in_window = sent[first:]
    window = int(in_window.sum())
    gone = int((in_window & ~got[first:]).sum())
    out.update(first_lost=first, window=window, missing=gone,
               loss=max(0, gone - receive_drops) / window)
    order = np.argsort(seq, kind="stable")
    seq_sorted, t_sorted = seq[order], t_send[order]
    keep = np.concatenate(([True], seq_sorted[1:] != seq_sorted[:-1]))  # first copy of each
    seq_sorted, t_sorted = seq_sorted[keep], t_sorted[keep]
    if len(seq_sorted):
        out["fill_s"] = float((t_sorted[np.searchsorted(seq_sorted, first) - 1] - t_sorted[0]) / 1e9) \
            if seq_sorted[0] < first else 0.0
    win = seq_sorted >= first
    ws, wt = seq_sorted[win], t_sorted[win]
    if len(ws) >= 2 and wt[-1] > wt[0]:
        between = int(sent[ws[0]:ws[-1] + 1].sum()) - 1
        offered = float(between * frame_bits / ((wt[-1] - wt[0]) / 1e9))
        out.update(offered_mbps=offered / 1e6, expected=1 - rate / offered,
                   send_gap_max_ms=float(np.diff(wt).max() / 1e6))
    return out


def drops(emulator: dict, probe_drops: dict | None, unsent: int, direction: str = "up") -> dict[str, Any]:
    """Where the train's datagrams were dropped, by reason: the emulator's verdicts in the
    train's direction (``queue``: the queue was full; ``random_loss``: the model's loss), the
    frames the emulator lost itself in its run (``emulator_unintended``), the receiving side's
    drops after the link (``receive_path``, ``pathprobe.loss_drops``) and the datagrams the
    sender's kernel refused (``unsent``).  ``emulator``: ``link.emulator_report`` of the run (None
    where the backend has no such figure: the kernel backend's qdisc drops are then in
    ``qdisc``, overflow and random loss together)."""
    probe_drops = probe_drops or {}
    return {"queue": (emulator.get("queue_drops") or {}).get(direction),
            "random_loss": (emulator.get("loss_drops") or {}).get(direction),
            "emulator_unintended": emulator.get("unintended_drops"),
            "receive_path": probe_drops.get("receive_path"),
            "qdisc": probe_drops.get("qdisc") or None, "unsent": unsent}


def other_drops(d: dict) -> int | None:
    """Drops of ``drops`` on the link that are not the queue's: random loss, the emulator's own;
    None when the backend counts neither (netem's qdisc counts overflow and random loss
    together).  The receiving side's are not the link's (``figures``)."""
    known = [int(d[k]) for k in ("random_loss", "emulator_unintended") if d.get(k) is not None]
    return sum(known) if known else None
