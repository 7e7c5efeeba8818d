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

Cause (``cause``; a run that is not ok names one, from the summary's own figures):

* ``machine``: the emulator's CPU was taken away or shared — the forwarder waited in the run
  queue for ≥ 1 % of the run (``host.forwarder_runqueue_wait_s``), steal ≥ 5 %, most late
  frames followed a stall of the machine (``totals.late_after_stall``), a stall with no frame
  arriving on any link (``stalls.quiet``: the whole machine stopped), or held-back stalls
  (``stalls.held_back``) or a machine ≥ 70 % busy while the engine itself did little (below
  half a core of work).
* ``engine``: the engine worked ≥ half a core (CPU time minus the native loop's deliberate
  polling, ``poll_idle_s``) and the machine's figures show none of the above.
* ``machine and engine``: both; ``undetermined``: neither (the figures are printed).

The warning says which: "the emulator could not keep up" only when the engine was busy, "the
machine was busy" with its figures otherwise.  ``warnings`` are worded by the severity;
``notes`` hold what is worth knowing in an ok run.  ``links`` gives per direction the frames,
the model's random losses and the configured loss probability (for a plausibility test of the
loss process).

One signal: ``apply`` writes the verdict into an emulator summary (``overload`` = the verdict
is overloaded, ``warnings`` = the verdict's, ``fidelity``); the forwarder and the userspace
backend both use it, so ``summary.json`` and the run's verdict cannot disagree.  ``of_run``
gives the verdict of a run from its metadata (a ``Testbed``'s, e.g. after ``topo up``) and
``line`` one printable line of it.
"""
from __future__ import annotations

from typing import Any, Iterable

RTT_FLOOR_MS = 10.0
OVERLOAD = {"drop_fraction": 0.001, "late_p99_rtt": 0.10, "lag_p99_rtt": 0.10, "late_fraction": 0.25}
DEGRADE = {"late_p99_rtt": 0.02, "lag_p99_rtt": 0.02, "late_max_rtt": 0.25}
VERDICTS = ("ok", "degraded", "overloaded", "unknown")
CAUSES = ("machine", "engine", "machine and engine", "undetermined")
MACHINE = {"runqueue_share": 0.01, "steal_percent": 5.0, "busy_percent": 70.0,
           "late_after_stall_share": 0.5}
ENGINE_SHARE = 0.5  # of one core: the engine's own work (CPU time less deliberate polling)


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
    c = cause(summary) if (over or reasons) else None
    if over:
        v = "overloaded"
        warnings = [f"OVERLOADED, discard this run — {c['blame']}: {'; '.join(reasons)}"]
    elif reasons:
        v = "degraded"
        warnings = [f"degraded, timing figures carry error — {c['blame']}: {'; '.join(reasons)}"]
    else:
        v, warnings = "ok", []
    notes = [words["late_fraction"]() + " — negligible"] if v == "ok" and late else []
    return {"verdict": v, "cause": c and c["cause"], "cause_figures": c and c["figures"],
            "reasons": reasons, "warnings": warnings, "notes": notes,
            "path_rtt_ms": round(rtt, 3), "path_rtt_from_specs_ms": rtt_raw,
            "frames": frames, "late": late, "unintended_drops": drops,
            **{k: (round(x, 6) if isinstance(x, float) else x) for k, x in f.items()},
            "links": _links(summary)}


def _num(x) -> float | None:
    return None if x is None else float(x)


def cause(summary: dict) -> dict[str, Any]:
    """Who is to blame for lateness or drops, from the summary's own figures (module docstring):
    ``cause`` (one of ``CAUSES``), ``figures`` (what it rests on) and ``blame`` (the words)."""
    t, host, st = summary.get("totals") or {}, summary.get("host") or {}, summary.get("stalls") or {}
    wall = _num(summary.get("wall_s"))
    cpu = _num(summary.get("cpu_s"))
    work = None if cpu is None or not wall else max(cpu - (_num(summary.get("poll_idle_s")) or 0.0), 0.0) / wall
    rq = _num(host.get("forwarder_runqueue_wait_s"))
    late, after = int(t.get("late") or 0), int(t.get("late_after_stall") or 0)
    fig = {"engine_work_share": None if work is None else round(work, 4),
           "engine_cpu_percent": summary.get("cpu_percent"),
           "frames_per_s": round(t.get("frames_in", 0) / wall) if wall else None,
           "machine_busy_percent": host.get("busy_percent"), "steal_percent": host.get("steal_percent"),
           "runqueue_wait_s": rq, "wall_s": wall, "late": late, "late_after_stall": after,
           "stalls": st.get("count"), "held_back": st.get("held_back"), "quiet_stalls": st.get("quiet")}
    engine_busy = work is not None and work >= ENGINE_SHARE
    machine = []
    if rq is not None and wall and rq >= MACHINE["runqueue_share"] * wall:
        machine.append(f"the forwarder waited {rq:.2f} s of {wall:.1f} s in the run queue")
    if (host.get("steal_percent") or 0) >= MACHINE["steal_percent"]:
        machine.append(f"{host['steal_percent']:.1f} % steal (the hypervisor ran something else)")
    if late and after >= MACHINE["late_after_stall_share"] * late:
        machine.append(f"{after} of {late} late frames followed a stall of the machine")
    if st.get("quiet"):
        machine.append(f"{st['quiet']} stalls with no frame arriving anywhere (the whole machine stopped)")
    if st.get("held_back") and not engine_busy:
        machine.append(f"{st['held_back']} stalls held back by other tasks (up to "
                       f"{st.get('held_back_max_ms') or 0:g} ms)")
    busy = host.get("busy_percent")
    if busy is not None and busy >= MACHINE["busy_percent"] and not engine_busy:
        machine.insert(0, f"the machine was {busy:.0f} % busy")
    engine_words = (f"the emulator used {summary.get('cpu_percent', 0) or 0:g} % of a core"
                    + (f" ({100 * work:.1f} % of a core of work)" if work is not None and summary.get("poll_idle_s")
                       else "")
                    + (f" for {fig['frames_per_s']:,} frames/s" if fig["frames_per_s"] is not None else ""))
    if machine and engine_busy:
        c, blame = "machine and engine", (f"the machine was busy ({'; '.join(machine)}) and the "
                                          f"emulator could not keep up ({engine_words})")
    elif machine:
        c, blame = "machine", (f"the machine was busy, not the emulator ({'; '.join(machine)}; "
                               f"{engine_words})")
    elif engine_busy:
        c, blame = "engine", f"the emulator could not keep up ({engine_words})"
    else:
        extra = (f"machine {busy:.0f} % busy" if busy is not None else "machine load not recorded") + \
                (f", {rq:.3f} s run-queue wait" if rq is not None else "")
        c, blame = "undetermined", (f"cause not shown by the figures ({extra}; {engine_words})")
    return {"cause": c, "figures": fig, "blame": blame}


def apply(summary: dict, links: Iterable[dict] | None = None) -> dict[str, Any]:
    """Write the verdict into an emulator summary (in place): ``fidelity``, ``overload`` (the
    verdict is overloaded) and ``warnings`` (the verdict's).  Returns the full verdict."""
    v = verdict(summary, links)
    summary["fidelity"] = {k: v.get(k) for k in ("verdict", "cause", "reasons", "notes", "path_rtt_ms")}
    summary["overload"] = v["verdict"] == "overloaded"
    summary["warnings"] = v["warnings"]
    return v


def of_run(metadata: dict) -> dict[str, Any]:
    """The verdict on a run from its metadata (``Testbed.metadata`` after it stopped, or
    ``metadata.json``): ``backend_summary`` judged against the run's ``links``; ``unknown``
    without a summary (loopback, a backend without one)."""
    summary = metadata.get("backend_summary")
    return {"backend": metadata.get("backend"), "engine": (summary or {}).get("engine"),
            **verdict(summary, metadata.get("links"))}


def line(v: dict) -> str:
    """One printable line: ``link fidelity: VERDICT`` and, unless ok, the cause and reasons."""
    if v.get("verdict") == "ok":
        return "link fidelity: ok" + (f" ({v['notes'][0]})" if v.get("notes") else "")
    if v.get("verdict") == "unknown":
        return f"link fidelity: unknown ({'; '.join(map(str, v.get('reasons') or [])) or 'no summary'})"
    return f"link fidelity: {v['verdict']} — " + (v.get("warnings") or [""])[0].split(" — ", 1)[-1]


def _links(summary: dict) -> list[dict]:
    out = []
    for name, d in (summary.get("directions") or {}).items():
        loss = ((d.get("spec") or {}).get("loss") or {})
        out.append({"name": name, "frames": d.get("frames_in", 0), "lost": d.get("dropped_loss", 0),
                    "configured_loss": loss.get("p", 0) if loss.get("model", "bernoulli") == "bernoulli"
                    else None})
    return out
