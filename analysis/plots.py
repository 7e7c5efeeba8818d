"""Figures (matplotlib, Agg backend), each written as PNG and SVG.

- :func:`time_sequence`: tcptrace's time-sequence graph for one data direction:
  each segment a vertical bar from its first to its last sequence number
  (black; retransmissions red), the cumulative-ACK line (green step), the
  receive-window line = ACK + advertised window (yellow step), SACK blocks as
  purple bars at the time of the ACK carrying them.  Sequence numbers relative
  to the sender's ISN.
- :func:`in_flight`: outstanding bytes and RFC 6675 pipe as step functions,
  with the sender's cwnd where an application log has TCP_INFO samples
  (``snd_cwnd`` x ``snd_mss`` bytes) or a qlog has ``cwnd``.
- :func:`swimlane`: handshake, completion and application events on one lane
  per host (and one per application log role).
- :func:`delivery`: cumulative bytes delivered per stream (per request's
  response for TCP, per QUIC stream for qlog) over time.
- :func:`steps`: any step series (QUIC bytes_in_flight and cwnd from qlog).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, base: Path) -> list[str]:
    """Lay out ``fig``, write it as PNG and SVG next to ``base``, close it."""
    fig.tight_layout()
    base.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("png", "svg"):
        p = Path(f"{base}.{ext}")
        fig.savefig(p, dpi=120)
        out.append(str(p))
    _plt().close(fig)
    return out


def time_sequence(direction, t0: int, base: Path, title: str = "") -> list[str]:
    from matplotlib.collections import LineCollection
    plt = _plt()
    tr = direction.trace
    t = (tr["t"] - t0) / 1e9
    fwd, seq, end = tr["fwd"], tr["seq"], tr["end"]
    data = fwd & (end > seq)
    rtx = np.isin(tr["index"], tr["rtx_packets"])
    fig, ax = plt.subplots(figsize=(10, 6))
    for mask, color, label in ((data & ~rtx, "black", "segment"),
                               (data & rtx, "red", "retransmission")):
        if mask.any():
            segs = np.stack([np.column_stack([t[mask], seq[mask]]),
                             np.column_stack([t[mask], end[mask]])], axis=1)
            ax.add_collection(LineCollection(segs, colors=color, linewidths=1.2, label=label,
                                             zorder=3))
    acks = tr["has_ack"]
    if acks.any():
        ta, a = t[acks], np.maximum.accumulate(tr["ack"][acks])
        ax.step(ta, a, where="post", color="green", lw=0.8, label="cumulative ACK")
        ax.step(ta, a + tr["win"][acks], where="post", color="goldenrod", lw=0.8,
                label="receive window")
    if len(tr["sack"]):
        s = tr["sack"]
        ts = (s[:, 0] - t0) / 1e9
        segs = np.stack([np.column_stack([ts, s[:, 1]]), np.column_stack([ts, s[:, 2]])], axis=1)
        ax.add_collection(LineCollection(segs, colors="purple", linewidths=2.5, label="SACK block"))
    ax.autoscale()
    ax.set_xlabel("time (s)")
    ax.set_ylabel("relative sequence number (bytes)")
    ax.set_title(title or f"time-sequence, data from {direction.sender}")
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, base)


def in_flight(direction, t0: int, base: Path, cwnd: tuple | None = None, title: str = "") -> list[str]:
    """``cwnd`` = (t_ns array, bytes array) or None."""
    plt = _plt()
    tr = direction.tracker
    t = (np.asarray(tr.series_t, np.int64) - t0) / 1e9
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.step(t, tr.series_outstanding, where="post", lw=0.9, label="outstanding (SND.MAX - SND.UNA)")
    ax.step(t, tr.series_pipe, where="post", lw=0.9, label="pipe (RFC 6675)")
    if cwnd is not None and len(cwnd[0]):
        ax.step((np.asarray(cwnd[0]) - t0) / 1e9, cwnd[1], where="post", lw=1.2, color="black",
                label="cwnd (sender)")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("bytes")
    ax.set_title(title or f"in flight, data from {direction.sender}")
    ax.legend(loc="upper right", fontsize=8)
    return _save(fig, base)


def swimlane(lanes: dict, t0: int, base: Path, title: str = "timeline") -> list[str]:
    """lanes: {lane name: [(t_ns, label), ...]}."""
    plt = _plt()
    names = list(lanes)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.9 * len(names)))
    for y, name in enumerate(names):
        evs = sorted(lanes[name])
        if not evs:
            continue
        x = [(tt - t0) / 1e9 for tt, _ in evs]
        ax.plot(x, [y] * len(x), "o", ms=4)
        for k, (xx, (_, label)) in enumerate(zip(x, evs)):
            ax.annotate(label, (xx, y), xytext=(0, 6 + 9 * (k % 3)), textcoords="offset points",
                        fontsize=6, rotation=30)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.5, len(names) - 0.2)
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    return _save(fig, base)


def delivery(streams: dict, t0: int, base: Path, title: str = "delivery per stream") -> list[str]:
    """streams: {name: (t_ns array, cumulative bytes array)}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name, (tt, b) in streams.items():
        if len(tt):
            ax.step((np.asarray(tt) - t0) / 1e9, b, where="post", label=str(name))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("bytes delivered in order")
    ax.set_title(title)
    if streams:
        ax.legend(fontsize=7, loc="upper left")
    return _save(fig, base)


def steps(series: dict, t0: int, base: Path, ylabel: str, title: str) -> list[str]:
    """Generic step functions: {name: (t_ns array, values)}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name, (tt, v) in series.items():
        if len(tt):
            ax.step((np.asarray(tt) - t0) / 1e9, v, where="post", lw=0.9, label=name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series:
        ax.legend(fontsize=8, loc="upper right")
    return _save(fig, base)
