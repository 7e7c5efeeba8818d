"""Can a run through the userspace emulator be trusted?  One verdict per run, a pure function
of the emulator's summary (``summary.json`` of either engine, plus what the backend adds) and
the link specs it carries (or ``links``, the topology's link records).

Quantities (all from the summary's ``totals``, ``sched_error_us``, ``read_lag_us`` and
``unintended_drops``):

* lateness L of a delivered frame = t_sent − t_sched (how much later than the model said it
  left the emulator); *late* frames are those with L > ``late_ns`` (1 ms by default).
* read lag = t_read − t_arrival (how long a frame waited in the socket before the emulator
  read it; its schedule still counts from the kernel arrival time, so lag shows as lateness
  only when it exceeds the frame's delay).
* unintended drops = frames the emulator itself lost (socket buffer, send errors, interface
  drops) — losses the model did not decide.
* R = the path's round-trip time: the largest ``delay + jitter`` of an emulated direction plus
  that of the reverse direction (a lower bound of any RTT across that link), floored at
  ``RTT_FLOOR_MS`` (10 ms: below it the emulator's timer resolution, tens of µs, and the
  kernel's own latencies dominate, so relative figures would mislead).

Rule (the first that matches):

* ``unknown``: no summary, the engine reported an error, or no frame was read.
* ``overloaded``: unintended drops > 0.1 % of the frames read; or p99 lateness > 10 % of R;
  or p99 read lag > 10 % of R; or more than 25 % of the delivered frames late.  The emulator
  could not keep up: delays and losses are not the configured ones; discard the run.
* ``degraded``: any unintended drop; or p99 lateness > 2 % of R; or p99 read lag > 2 % of R;
  or one frame later than 25 % of R (enough to shift one exchange visibly); or the frame
  accounting does not add up.  Timing figures carry an error of the stated size; compare with
  care or repeat.
* ``ok``: otherwise.  Late frames (> 1 ms) alone do not degrade a run: what matters is their
  lateness against R, so a few ms on a 200 ms path are noted, not warned about.

``warnings`` are worded by that severity; ``notes`` hold what is worth knowing in an ok run.
``links`` gives per direction the frames, the model's random losses and the configured loss
probability (for a plausibility test of the loss process).
"""
from __future__ import annotations

from typing import Any, Iterable

RTT_FLOOR_MS = 10.0
OVERLOAD = {"drop_fraction": 0.001, "late_p99_rtt": 0.10, "lag_p99_rtt": 0.10, "late_fraction": 0.25}
DEGRADE = {"late_p99_rtt": 0.02, "lag_p99_rtt": 0.02, "late_max_rtt": 0.25}
VERDICTS = ("ok", "degraded", "overloaded", "unknown")


def path_rtt_ms(summary: dict, links: Iterable[dict] | None = None) -> float | None:
    """R of the module docstring from ``links`` (records with ``a_to_b``/``b_to_a`` spec
    dicts, delay and jitter in seconds) or else from the summary's per-direction specs."""
    pairs = []
    if links is not None:
        pairs = [(lk.get("a_to_b"), lk.get("b_to_a")) for lk in links]
    else:
        dirs = summary.get("directions") or {}
        for name, d in dirs.items():
            src, _, dst = name.partition(".")[0].partition("-")
            suffix = name[len(name.partition(".")[0]):]
            rev = dirs.get(f"{dst}-{src}{suffix}")
            pairs.append((d.get("spec"), rev.get("spec") if rev else d.get("spec")))
    best = None
    for a, b in pairs:
        if not a and not b:
            continue
        one = [s for s in (a, b) if s] * (1 if a and b else 2)
        rtt = sum(float(s.get("delay", 0)) + float(s.get("jitter", 0)) for s in one) * 1e3
        best = rtt if best is None else max(best, rtt)
    return best


def _ms(d: dict | None, key: str) -> float | None:
    v = (d or {}).get(key)
    return None if v is None else v / 1e3


def verdict(summary: dict | None, links: Iterable[dict] | None = None) -> dict[str, Any]:
    """The verdict and the figures it rests on (see the module docstring for the rule)."""
    if not summary or summary.get("error") or not (summary.get("totals") or {}).get("frames_in"):
        why = (summary or {}).get("error") or "no frames went through the emulator"
        return {"verdict": "unknown", "reasons": [why], "warnings": [], "notes": []}
    t = summary["totals"]
    frames, delivered = t["frames_in"], max(t.get("delivered", 0), 1)
    rtt_raw = path_rtt_ms(summary, links)
    rtt = max(rtt_raw or 0.0, RTT_FLOOR_MS)
    drops = int(summary.get("unintended_drops") or 0)
    late = int(t.get("late", 0))
    f = {"late_fraction": late / delivered, "drop_fraction": drops / frames,
         "late_p99_ms": _ms(summary.get("sched_error_us"), "p99"),
         "late_max_ms": _ms(summary.get("sched_error_us"), "max"),
         "lag_p99_ms": _ms(summary.get("read_lag_us"), "p99"),
         "lag_max_ms": _ms(summary.get("read_lag_us"), "max")}
    f["late_p99_rtt"] = max(f["late_p99_ms"] or 0.0, 0.0) / rtt
    f["lag_p99_rtt"] = (f["lag_p99_ms"] or 0.0) / rtt
    f["late_max_rtt"] = max(f["late_max_ms"] or 0.0, 0.0) / rtt
    words = {
        "drop_fraction": lambda: f"{drops} frames ({f['drop_fraction']:.2%}) lost by the emulator "
                                 "itself (socket buffer, send errors or interface drops)",
        "late_p99_rtt": lambda: f"1 % of the frames left ≥ {f['late_p99_ms']:.1f} ms later than "
                                f"scheduled ({f['late_p99_rtt']:.1%} of the {rtt:.0f} ms path RTT)",
        "lag_p99_rtt": lambda: f"1 % of the frames waited ≥ {f['lag_p99_ms']:.1f} ms in the socket "
                               f"before being read ({f['lag_p99_rtt']:.1%} of the {rtt:.0f} ms path RTT)",
        "late_fraction": lambda: f"{late} of {delivered} frames ({f['late_fraction']:.1%}) left more "
                                 f"than {summary.get('late_ns', 1_000_000) / 1e6:g} ms late "
                                 f"(up to {f['late_max_ms'] or 0:.1f} ms)",
        "late_max_rtt": lambda: f"a frame left {f['late_max_ms']:.1f} ms later than scheduled "
                                f"({f['late_max_rtt']:.1%} of the {rtt:.0f} ms path RTT)",
    }
    over = [k for k, lim in OVERLOAD.items() if f[k] > lim]
    degraded = [k for k, lim in DEGRADE.items() if f[k] > lim]
    if drops and "drop_fraction" not in over:
        degraded.insert(0, "drop_fraction")
    reasons = [words[k]() for k in (over or degraded)]
    if summary.get("accounted") is False:
        reasons.append("the frame accounting does not add up (see summary.json)")
    if over:
        v = "overloaded"
        warnings = [f"OVERLOADED, discard this run — the emulator could not keep up: {r}"
                    for r in reasons]
    elif reasons:
        v = "degraded"
        warnings = [f"degraded — timing figures carry emulator error: {r}" for r in reasons]
    else:
        v, warnings = "ok", []
    notes = [words["late_fraction"]() + " — negligible"] if v == "ok" and late else []
    return {"verdict": v, "reasons": reasons, "warnings": warnings, "notes": notes,
            "path_rtt_ms": round(rtt, 3), "path_rtt_from_specs_ms": rtt_raw,
            "frames": frames, "late": late, "unintended_drops": drops,
            **{k: (round(x, 6) if isinstance(x, float) else x) for k, x in f.items()},
            "links": _links(summary)}


def _links(summary: dict) -> list[dict]:
    out = []
    for name, d in (summary.get("directions") or {}).items():
        loss = ((d.get("spec") or {}).get("loss") or {})
        out.append({"name": name, "frames": d.get("frames_in", 0), "lost": d.get("dropped_loss", 0),
                    "configured_loss": loss.get("p", 0) if loss.get("model", "bernoulli") == "bernoulli"
                    else None})
    return out
