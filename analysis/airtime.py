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

The **data** direction is the one with more IP bytes; the other is the **ACK** (feedback)
direction — exact for a one-way bulk transfer, where the receiver sends only ACKs (plus its
SYN-ACK and FIN).  ``model``: the C10 model's exchange times for the median data and ACK packet
sizes of this run.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ETH_HEADER = 14


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
    config = json.loads((emu / "config.json").read_text())
    media = config.get("media") or {}
    if not media:
        raise ValueError(f"{run_dir}: the emulated links have no shared medium (topology wifi has one)")
    name, spec_d = next(iter(media.items()))
    spec = AirtimeSpec.from_dict(spec_d)
    summary = json.loads((emu / "summary.json").read_text()) if (emu / "summary.json").exists() else {}
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
    m["ack_exchange_us_model"] = a["model"]["ack_exchange_us"]
    m["ack_airtime_ms_model"] = round(a["ack"]["exchanges"] * a["model"]["ack_exchange_us"] / 1e3, 3)
    out.setdefault("checks", {})["airtime_exact"] = a["exact"]
    return out
