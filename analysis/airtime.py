"""Airtime of a shared air interface (C10) from the userspace emulator's frame logs, next to the
C10 model (``analysis.models.airtime``).

For a run on a topology with a medium (``wifi``), per emulator direction attached to it:

* ``exchanges``: frames the medium carried (verdict ``delivered``; ``dropped_queue`` frames
  never reached the air).
* ``airtime_s``: the sum over those frames of the exchange time DIFS + data PPDU + SIFS + MAC
  ACK PPDU of an IP packet of (frame length − 14) bytes, from the run's own ``AirtimeSpec``
  (``emulator/config.json``; backoff is not in the frame log, so only ``cw_min`` = 0 media are
  accounted exactly — ``exact`` says which).
* ``ip_bytes_median``, ``exchange_us_median``.
* ``medium_busy_s``: the emulator's own running total for the direction (``summary.json``),
  a cross-check of ``airtime_s``.

Busy intervals (``busy_intervals``; metrics ``air_*``), measured from the frame logs' times
rather than from exchange counts: the medium serves the frames of both directions one at a time
in the order their data PPDUs end (``t_sched`` − the direction's propagation delay).  Frame i
holds the air from ``max(t_arrival_i, end_{i−1})`` — it waits for the previous exchange to end —
to its own ``end_i`` = data PPDU end + the MAC ACK tail (SIFS + MAC-ACK PPDU, the one constant
taken from the medium's parameters, since the frame log records when the data PPDU ends).  A
frame's share is that interval; their sum is the time the medium was busy (gaps where no frame
waited are left out).  A frame of at most ``FEEDBACK_MAX_IP`` IP bytes is **feedback** (a pure
TCP ACK: 20 B IP + at most 60 B TCP header, no room for data), every other one **data** — per
frame, so a request/response transfer's data and ACKs in both directions are told apart.

The **data** direction is the one with more IP bytes; the other is the **ACK** (feedback)
direction — exact for a one-way bulk transfer, where the receiver sends only ACKs (plus its
SYN-ACK and FIN).  ``model``: the C10 model's exchange times for the median data and ACK packet
sizes of this run.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis import applog

ETH_HEADER = 14
#: IP packets up to this size are feedback: 20 B IPv4 header + a TCP header of at most 60 B
FEEDBACK_MAX_IP = 80


def busy_intervals(arrival: np.ndarray, data_end: np.ndarray, ip_bytes: np.ndarray, tail_ns: int
                   ) -> dict:
    """Busy time of one medium from its frames (both directions, any order; ns on one clock):
    ``arrival`` (handed to the medium), ``data_end`` (data PPDU ended), ``ip_bytes``.  Returns
    ``{"share_ns": per frame in data_end order, "order": the sort index, "busy_ns", "periods":
    busy periods (a frame arriving while none waited starts one), "span_ns": first start to last
    end}``; see the module docstring."""
    order = np.argsort(data_end, kind="stable")
    arr, end = arrival[order].astype(np.int64), data_end[order].astype(np.int64) + int(tail_ns)
    prev = np.concatenate([[np.iinfo(np.int64).min], end[:-1]])
    start = np.maximum(arr, prev)
    share = end - start
    if len(share) and share.min() <= 0:
        raise ValueError("frame log: a frame's data PPDU ended before it arrived or before the "
                         "previous exchange ended (not one medium's frames?)")
    return {"share_ns": share, "order": order, "busy_ns": int(share.sum()),
            "periods": int((arr >= prev).sum()), "span_ns": int(end[-1] - start[0]) if len(end) else 0}


def medium_busy(run_dir: str | Path) -> dict:
    """The ``air_*`` metrics of a run on one medium: busy time of data and feedback frames
    (``busy_intervals``) and their counts; ValueError without a medium."""
    from testbed.emulator.airtime import AirtimeSpec
    from testbed.emulator.linklog import DELIVERED, read_log
    emu = Path(run_dir) / "emulator"
    config = applog.read_object(emu / "config.json") or {}
    media = config.get("media") or {}
    if len(media) != 1:
        raise ValueError(f"{run_dir}: {len(media)} shared media; busy intervals need exactly one")
    name, spec_d = next(iter(media.items()))
    spec = AirtimeSpec.from_dict(spec_d)
    tail = round(spec.sifs * 1e9) + spec.ppdu_ns(spec.ack_bytes, spec.control_rate)
    parts = []
    for d in config["directions"]:
        if d.get("medium") != name:
            continue
        if d["spec"].get("jitter"):
            raise ValueError(f"direction {d['name']}: jitter hides when its data PPDUs ended")
        _, rec = read_log(emu / f"{d['name']}.frames")
        rec = rec[rec["verdict"] == DELIVERED]
        delay = round(float(d["spec"].get("delay") or 0) * 1e9)
        parts.append((rec["t_arrival"], rec["t_sched"] - delay, rec["length"].astype(np.int64) - ETH_HEADER))
    arrival, data_end, ip = (np.concatenate([p[i] for p in parts]) for i in range(3))
    b = busy_intervals(arrival, data_end, ip, tail)
    feedback = ip[b["order"]] <= FEEDBACK_MAX_IP
    share = b["share_ns"]
    return {"air_busy_ms": b["busy_ns"] / 1e6, "air_data_busy_ms": float(share[~feedback].sum()) / 1e6,
            "air_feedback_busy_ms": float(share[feedback].sum()) / 1e6,
            "air_data_frames": int((~feedback).sum()), "air_feedback_frames": int(feedback.sum()),
            "air_busy_periods": b["periods"], "air_span_ms": b["span_ns"] / 1e6}


def direction_airtime(frames_path: Path, spec) -> dict:
    from testbed.emulator.linklog import DELIVERED, read_log
    _, rec = read_log(frames_path)
    rec = rec[rec["verdict"] == DELIVERED]
    ip = rec["length"].astype(np.int64) - ETH_HEADER
    sizes, counts = np.unique(ip, return_counts=True)
    us = {int(s): spec.exchange_ns(int(s)) / 1e3 for s in sizes}
    air_us = float(sum(us[int(s)] * c for s, c in zip(sizes, counts)))
    return {"exchanges": int(len(rec)), "ip_bytes": int(ip.sum()), "airtime_s": air_us / 1e6,
            "ip_bytes_median": float(np.median(ip)) if len(ip) else None,
            "exchange_us_median": float(np.median([us[int(s)] for s in ip])) if len(ip) else None}


def run_airtime(run_dir: str | Path) -> dict:
    """{"medium", "exact", "data": {...}, "ack": {...}, "model": {...}} (see the module doc);
    ValueError when the run has no emulated medium."""
    from analysis.models.airtime import AirtimeParams, airtime
    from testbed.emulator.airtime import AirtimeSpec
    emu = Path(run_dir) / "emulator"
    if not (emu / "config.json").exists():
        raise ValueError(f"{run_dir}: no emulator/config.json (airtime needs the userspace backend)")
    config = applog.read_object(emu / "config.json")
    media = config.get("media") or {}
    if not media:
        raise ValueError(f"{run_dir}: the emulated links have no shared medium (topology wifi has one)")
    name, spec_d = next(iter(media.items()))
    spec = AirtimeSpec.from_dict(spec_d)
    summary = applog.read_object(emu / "summary.json") or {}
    busy = summary.get("media", {}).get(name, {}).get("busy_ns_by_direction", {})
    dirs = {d["name"]: direction_airtime(emu / f"{d['name']}.frames", spec)
            for d in config["directions"] if d.get("medium") == name}
    if len(dirs) != 2:
        raise ValueError(f"{run_dir}: medium {name!r} has {len(dirs)} directions; expected 2")
    for d, rec in dirs.items():
        rec["direction"] = d
        rec["medium_busy_s"] = busy[d] / 1e9 if d in busy else None
    data, ack = sorted(dirs.values(), key=lambda r: -r["ip_bytes"])
    model = airtime(AirtimeParams(data_packet=int(data["ip_bytes_median"] or 1),
                                  ack_packet=int(ack["ip_bytes_median"] or 1),
                                  data_rate=spec.data_rate, control_rate=spec.control_rate,
                                  difs=spec.difs, sifs=spec.sifs, mac_overhead=spec.mac_overhead))
    return {"medium": name, "exact": spec.cw_min == 0, "data": data, "ack": ack,
            "model": {"data_exchange_us": model["data_exchange"].value,
                      "ack_exchange_us": model["ack_exchange"].value}}


def run_metrics(run_dir: str | Path) -> dict:
    """The bulk metrics (``analysis.runmetrics``) plus the airtime figures as flat metrics."""
    from analysis.runmetrics import run_metrics as bulk_metrics
    out = bulk_metrics(run_dir)
    try:
        a = run_airtime(run_dir)
    except (ValueError, OSError) as exc:
        out.setdefault("checks", {})["airtime_error"] = str(exc)
        return out
    m = out.setdefault("metrics", {})
    for kind in ("data", "ack"):
        m[f"{kind}_exchanges"] = a[kind]["exchanges"]
        m[f"{kind}_airtime_ms"] = round(a[kind]["airtime_s"] * 1e3, 3)
    try:
        m.update(medium_busy(run_dir))
    except (ValueError, OSError) as exc:
        out.setdefault("checks", {})["air_busy_error"] = str(exc)
    m["ack_exchange_us_model"] = a["model"]["ack_exchange_us"]
    m["ack_airtime_ms_model"] = round(a["ack"]["exchanges"] * a["model"]["ack_exchange_us"] / 1e3, 3)
    out.setdefault("checks", {})["airtime_exact"] = a["exact"]
    return out
