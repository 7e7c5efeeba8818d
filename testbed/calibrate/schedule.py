"""Calibrating a link that changes during the run: ``calibrate_schedule`` (``testbed calibrate
--schedule FILE``).

The link is ``calibrate``'s (``testbed.calibrate.link``): the ``longhaul`` topology with the given
rate, one-way delay and loss per direction, and the schedule FILE on both directions.  The
schedule's time-tied steps and outages cut the run into *intervals* from the origin: [0, t1),
[t1, t2), ... and a last one as long as the longest before it (at least ``MIN_INTERVAL``).  Each
interval's configuration is the base LinkSpec with every step up to it applied (what
``schedule_model`` applies); an interval inside an outage is configured as "nothing passes".

The origin is set (``Testbed.set_link_origin``) once the topology is up; then in each interval,
from ``SETTLE`` s after its start, the probes of a constant link run one after the other, sized to
fit: ``RTT_PROBES`` ping-pongs ``RTT_GAP`` apart, ``LOSS_S`` s of loss datagrams each way, and a
``TRAIN_S`` s rate train per shaped direction (``testbed.calibrate.pathprobe``).  An outage
interval gets the loss probe only.  The lines per interval are ``link.evaluate``'s, named
``[a–b s] ...``, with the same tolerances (the loss interval is wider: fewer datagrams); one more
line per interval says whether its probes ran inside it ("probes inside the interval": the
monotonic times before the first and after the last probe) — a probe that spilled into the next
interval measured a mixture, so the interval fails.  The emulator's lines (scheduling error,
unintended and queue drops) are checked once, over the whole run.

Only time-tied steps and outages that drop are calibrated; a schedule with frame- or byte-tied
moments, events, a trace or a holding outage is refused in one line, as is an interval shorter
than ``MIN_INTERVAL`` or a backend that does not apply schedules.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from testbed.calibrate import link

log = logging.getLogger(__name__)

MIN_INTERVAL = 6.0   # s: time for the probes of one interval (3.9-5.4 s on a 2-core VM, load 1-4.5)
SETTLE = 0.3         # s after an interval starts before its first probe
RTT_PROBES, RTT_GAP = 40, 0.01
LOSS_S = 0.5         # s of loss datagrams per direction and interval
TRAIN_S = 0.3        # s of the rate train per direction and interval


def intervals(schedule, base: tuple) -> list[dict[str, Any]]:
    """[{"start", "end", "outage", "specs": (up, down)}] of a schedule (see the module docstring);
    ``base``: the two directions' LinkSpecs without the schedule.  ValueError (one line) for
    what cannot be calibrated."""
    if schedule.events or schedule.trace is not None:
        raise ValueError("calibrate --schedule measures time-tied steps and outages; this schedule "
                         "has " + ("events" if schedule.events else "a trace") + ", which it does not "
                         "calibrate (the frame log records what they did to each frame)")
    untimed = [str(s.at) for s in schedule.steps if s.at.kind != "time"] + \
        [str(o.down) for o in schedule.outages if o.down.kind != "time"]
    if untimed:
        raise ValueError(f"calibrate --schedule needs moments in time; {', '.join(untimed)} counts "
                         "frames or bytes")
    if any(o.hold for o in schedule.outages):
        raise ValueError("calibrate --schedule calibrates outages that drop, not hold")
    cuts = sorted({0.0, *(s.at.value for s in schedule.steps),
                   *(x for o in schedule.outages for x in (o.down.value, o.down.value + o.duration))})
    if len(cuts) < 2 and not schedule.outages:
        raise ValueError("calibrate --schedule needs a schedule with a step or an outage after 0 s")
    spans = [b - a for a, b in zip(cuts, cuts[1:])]
    cuts.append(cuts[-1] + max([MIN_INTERVAL, *spans]))
    out = []
    for a, b in zip(cuts, cuts[1:]):
        if b - a < MIN_INTERVAL:
            raise ValueError(f"interval [{a:g} s, {b:g} s) of the schedule lasts {b - a:g} s; "
                             f"calibrate --schedule needs at least {MIN_INTERVAL:g} s per interval "
                             "to measure RTT, loss and rate in it")
        specs = []
        for spec in base:
            for step in schedule.steps:
                if step.at.value <= a:
                    spec = spec.replace(**dict(step.changes))
            specs.append(spec)
        outage = any(o.down.value <= a < o.down.value + o.duration for o in schedule.outages)
        out.append({"start": a, "end": b, "outage": outage, "specs": tuple(specs)})
    return out


def configured(specs: tuple) -> dict[str, Any]:
    """``link.evaluate``'s configured values of one interval's two LinkSpecs."""
    probe_frame = link.PROBE_PAYLOAD + 42
    return {"rate_mbps": {d: s.rate / 1e6 if s.rate else None for d, s in zip(("up", "down"), specs)},
            "delay_ms": specs[0].delay * 1e3,
            "rtt_ms": round((sum(s.delay for s in specs)
                             + sum(s.serialization_time(probe_frame) for s in specs)) * 1e3, 6),
            "loss": {d: s.loss.mean_loss if s.loss is not None else 0.0
                     for d, s in zip(("up", "down"), specs)}}


def _measure(tb, iv: dict, origin_ns: int, own_rtt: dict) -> dict[str, Any]:
    """The probes of one interval, started ``SETTLE`` s after it begins."""
    from testbed.calibrate import pathprobe
    up, down = iv["specs"]
    idle = 0.3 + up.delay + down.delay + up.jitter + down.jitter
    wait = origin_ns + int((iv["start"] + SETTLE) * 1e9) - time.monotonic_ns()
    if wait > 0:
        time.sleep(wait / 1e9)
    t0 = time.monotonic_ns()
    m: dict[str, Any] = {"rate_mbps": {}, "train": {}, "reordered": 0}
    if not iv["outage"]:
        m["rtt_ms"] = pathprobe.rtt(tb, "client", "server", RTT_PROBES, RTT_GAP, link.PROBE_PAYLOAD,
                                    idle)
        m["rtt_ms"]["endpoints"] = own_rtt
    probe_bits = (link.PROBE_PAYLOAD + 42) * 8
    pps = link.loss_pps((up, down))
    lost = pathprobe.loss(tb, "client", "server", int(pps * LOSS_S), pps * probe_bits,
                          link.PROBE_PAYLOAD, idle, timeout=LOSS_S + 1.0 + idle)
    m.update(link.loss_figures(lost))
    if not iv["outage"]:
        for d, src, dst, spec in (("up", "client", "server", up), ("down", "server", "client", down)):
            if spec.rate is None:
                m["rate_mbps"][d] = None
                continue
            r = pathprobe.rate(tb, src, dst, spec, d, seconds=TRAIN_S, overdrive=link.OVERDRIVE,
                               head_start=link.HEAD_START, idle=idle,
                               delivered=tb.backend.name == "netem")
            m["reordered"] += r.pop("reordered")
            m["rate_mbps"][d] = r.pop("rate_mbps")
            m["train"][d] = r
    m["probes_s"] = [(t0 - origin_ns) / 1e9, (time.monotonic_ns() - origin_ns) / 1e9]
    return m


def evaluate(iv: dict, m: dict) -> list[dict]:
    """The lines of one interval: ``link.evaluate``'s (an outage: nothing passes either way),
    then whether its probes ran inside it."""
    name = f"[{iv['start']:g}–{iv['end']:g} s] "
    if iv["outage"]:
        checks = [{"check": f"loss {d} (outage)", "configured": 1.0, "measured": round(m["loss"][d], 6),
                   "ok": m["loss"][d] == 1.0, "tolerance": "all lost"} for d in ("up", "down")]
    else:
        checks = link.evaluate(configured(iv["specs"]), {"measured": m, "emulator": {}})
    a, b = m["probes_s"]
    checks.append({"check": "probes inside the interval", "configured": None, "measured": round(b, 3),
                   "ok": iv["start"] <= a and b <= iv["end"],
                   "tolerance": f"ran {a:.2f}–{b:.2f} s"})
    return [{**c, "check": name + c["check"], "interval": [iv["start"], iv["end"]]} for c in checks]


def calibrate_schedule(schedule_file: str, rate: str = "20mbit", delay: str = "20ms",
                       loss_up: str = "0%", loss_down: str = "0%", backend: str = "auto",
                       seed: int = 1, results: str = "results") -> dict:
    """Measure the longhaul link with this base configuration and ``schedule_file`` on both
    directions, interval by interval: ``{"intervals", "checks", "ok", "backend", "run_dir",
    "emulator"}`` (see the module docstring)."""
    from testbed.calibrate import pathprobe
    from testbed.run.network import Testbed
    from testbed.spec.errors import SetupError, UsageError
    from testbed.spec.linkspec import LinkSpec
    from testbed.spec.schedule import Schedule
    from testbed.spec.units import parse_probability, parse_rate, parse_time
    rate_bps = None if str(rate).lower() in ("unshaped", "none") else parse_rate(rate)
    delay_s = parse_time(delay)
    p_up, p_down = parse_probability(loss_up), parse_probability(loss_down)
    schedule = Schedule.load(schedule_file)
    base = (LinkSpec.parse(rate=rate_bps, delay=delay_s, loss=p_up),
            LinkSpec.parse(rate=rate_bps, delay=delay_s, loss=p_down))
    try:
        ivs = intervals(schedule, base)
    except ValueError as exc:
        raise UsageError(f"{schedule_file}: {exc}") from None
    fmt = (lambda r: "unshaped" if r is None else f"{r:.0f}bit")
    overrides = {"rate_up": fmt(rate_bps), "rate_down": fmt(rate_bps), "delay": f"{delay_s}s",
                 "loss_up": p_up, "loss_down": p_down}
    links = {f"bottleneck.{d}.schedule": str(schedule_file) for d in ("up", "down")}
    measured = []
    with Testbed("longhaul", backend=backend, overrides=overrides, links=links,
                 results_root=results, seed=seed) as tb:
        own = pathprobe.rtt(tb, "client", "client", link.ENDPOINT_PROBES, 0.01, link.PROBE_PAYLOAD,
                            1.0, loopback=True)
        origin = tb.set_link_origin()
        if origin is None:
            raise SetupError(f"backend {tb.backend.name!r} does not apply link schedules; calibrate "
                             "--schedule needs one that does (--backend userspace)")
        for iv in ivs:
            log.info("interval [%g, %g) s: %s", iv["start"], iv["end"],
                     "outage" if iv["outage"] else iv["specs"][1].describe())
            measured.append(_measure(tb, iv, origin["origin_requested_ns"],
                                     {"min": own["min"], "median": own["median"]}))
    emu = link.emulator_report(tb)
    checks = [c for iv, m in zip(ivs, measured) for c in evaluate(iv, m)] + link.emulator_checks(emu)
    return {"intervals": [{"start": iv["start"], "end": iv["end"], "outage": iv["outage"],
                           "configured": configured(iv["specs"]), "measured": m}
                          for iv, m in zip(ivs, measured)],
            "checks": checks, "ok": all(c["ok"] for c in checks), "backend": tb.backend.name,
            "run_dir": str(tb.dir), "emulator": emu}
