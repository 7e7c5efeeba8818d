"""Per-run verification: did the factor take effect (manipulation check), and can the run be
trusted (fidelity rule)?  Both read only ``RunResult.checks`` / ``RunResult.fidelity``.

A manipulation check is looked up by the factor's RunSpec path (:func:`check_for`):
``check(level, result) -> None`` when the factor demonstrably took effect, else the reason the run
is invalid.  A read-back that is missing makes the run invalid too (a factor that cannot be
verified is not counted as applied).  The check of a TCP factor (``socket.NAME``, ``host.NAME``)
is part of its record (``testbed.spec.factors``, ``Factor.check``); the others (workload
parameters, link fields; shell-style patterns allowed) are registered here, one :class:`Check`
each.  A link's ``schedule``, ``trace`` and ``down`` (an outage added to the direction's
schedule) are checked from what the run recorded: the schedule the direction ran, and that the
level's items took effect while the client ran (the manifest's ``link_changes`` up to its
``workload_end_ns``; :func:`schedule_readback`).

A factor without a hand-written check gets a *derived* one (:func:`derived_check`):

* a link field ``links.LINK.DIR.FIELD``: read back from the link itself
  (:func:`link_readback`, key ``link``).  On the userspace backend the emulator's frame log of
  that direction (``emulator/<from>-<to>.frames``; its header is the spec the emulator ran):
  the random-loss fraction measured over the frames that reached the loss stage with its
  Wilson interval (:data:`CI_LEVEL`), the propagation delay (the smallest time a delivered frame
  spent in the emulator minus its transmission time), the rate (the median, over departures that
  followed another with the queue never empty between them, of the bits sent over the time
  between the two departures), queue drops.  Without a frame
  log (the kernel backend) the spec the topology was built with (``metadata.json``).
  loss: the configured probability equals the level and the level lies in the measured
  fraction's interval; delay: configured equals the level and the measured delay is within
  ``DELAY_TOL``; rate: configured equals the level and, when the queue was backlogged for at least
  ``RATE_MIN_PAIRS`` departures, the measured rate is within ``RATE_TOL``; other fields: the
  configured value equals the level.
* a topology parameter ``topology_params.NAME``: the value the topology was built with
  (``metadata.json``, key ``topology_param``).
* a workload parameter ``params.NAME``: the value the run's manifest recorded for the
  workload (key ``workload_param``) — a record, not a measurement; the rule says so.

* a socket or host factor whose record has no check: ``sndbuf``/``rcvbuf`` read back on every
  socket as twice the level (Linux doubles what it is given); a route or sysctl option
  (``initrwnd``, ``advmss``) or a boolean socket option (``nodelay``) read back as given.

Factors of no kind above (:func:`unchecked_factors`; ``delack_max`` reads back rounded to the
kernel tick, ``window_clamp`` recomputed, ``keep_metrics`` what it did) have none: an experiment
over them needs ``check = "none"`` and its runs are marked unverified.

Fidelity rule (:func:`fidelity_reason`, :data:`FIDELITY_RULE`), applied to every run.
"""
from __future__ import annotations

import fnmatch
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from testbed.spec import factors
from testbed.spec.schedule import SCHEDULE_FIELDS
from testbed.spec.units import counted, parse_probability

LOSS_P = 0.001
CI_LEVEL = 0.999          # the Wilson interval of a measured loss fraction (two-sided)
DELAY_TOL = (0.5e-3, 2e-3, 0.05)   # measured delay in [level - 0.5 ms, level + max(2 ms, 5 %)]
RATE_TOL = 0.05
RATE_MIN_PAIRS = 50
LINK_FIELDS = ("rate", "delay", "jitter", "reorder", "loss", "queue", "queue_packets",
               "queue_bytes", "overhead", "mtu")
FIDELITY_RULE = (
    "a run is excluded when, in this order: (1) it failed; (2) the link backend's fidelity verdict "
    "(testbed/emulator/fidelity.py) is overloaded, or degraded when the definition sets "
    "accept_degraded = false (kept degraded runs are counted and listed; verdict unknown, e.g. "
    "kernel netem, is kept and counted as not verified); (3) the emulator lost frames itself "
    "(unintended drops > 0); (4) a link direction's measured random loss is implausible under its "
    f"configured Bernoulli probability (two-sided exact binomial test, p < {LOSS_P}, over the "
    "frames it carried).")


@dataclass(frozen=True)
class Check:
    factor: str                                  # RunSpec path or pattern
    needs: tuple[str, ...]                       # keys of RunResult.checks it reads (one suffices)
    rule: str                                    # the rule in words, printed in reports
    fn: Callable[[Any, dict], str | None]        # (level value, checks) -> reason or None


CHECKS: dict[str, Check] = {}


def register_check(c: Check) -> Check:
    CHECKS[c.factor] = c
    return c


def check_for(factor: str) -> Check | None:
    """The manipulation check of the factor at RunSpec path ``factor``: its own, else a derived
    one (None: there is none)."""
    where, _, name = factor.partition(".")
    if where in factors.WHERE:
        f = factors.FACTORS.get(name) if name in factors.FACTORS else None
        if f is None or f.where != where:
            return None
        if f.check is None:
            return derived_check(factor)
        return Check(factor, f.check.needs, f.check.rule, f.check.fn)
    if factor in CHECKS:
        return CHECKS[factor]
    own = next((c for pat, c in CHECKS.items() if fnmatch.fnmatchcase(factor, pat)), None)
    return own or derived_check(factor)


def checked_factors() -> list[str]:
    """Every factor path (or pattern) an experiment can vary: those with a manipulation check."""
    return ([f"{f.where}.{f.name}" for f in factors.FACTORS.values() if check_for(f"{f.where}.{f.name}")]
            + list(CHECKS) + [f"links.*.*.{x}" for x in LINK_FIELDS if x != "queue"]
            + ["topology_params.*", "params.*"])


def unchecked_factors() -> list[str]:
    """The socket and host factors with no manipulation check: an experiment over one needs
    ``check = "none"``."""
    return [f"{f.where}.{f.name}" for f in factors.FACTORS.values() if not check_for(f"{f.where}.{f.name}")]


def _mode(level, ch):
    syn = float(ch["syn_per_request"])
    if level == "new" and syn < 0.99:
        return f"mode new but {syn:.2f} SYNs per request (want >= 1)"
    if level == "reuse" and syn >= 0.5:
        return f"mode reuse but {syn:.2f} SYNs per request (want < 0.5)"
    return None


def _reuse_flag(level, ch):
    return _mode("reuse" if level in (True, "true", 1) else "new", ch)


def _path(level, ch):
    """``path``: capture file (``<host>-<iface>.pcap``) -> packets of the client's connections.
    Relayed, the client's connections end at the client gateway: none reach the server host."""
    seen: dict[str, int] = {}
    for name, packets in ch["path"].items():
        host = name.split("-")[0]
        seen[host] = seen.get(host, 0) + int(packets)
    if "server" not in seen:
        return "path not verifiable: no capture on the server host (capture hosts must include it)"
    at_server = seen["server"]
    if level == "relay" and (at_server or not seen.get("cgw")):
        return f"path relay but the client's connections were seen on the server ({at_server} packets)" \
            if at_server else "path relay but no packets of the client's connections at cgw"
    if level == "direct" and not at_server:
        return "path direct but none of the client's packets reached the server host"
    return None


def _tls_resume(level, ch):
    resumed = float(ch["tls_resumed"])
    want = bool(level)
    if want and resumed < 0.5 or not want and resumed > 0:
        return f"tls resumption {level} but {resumed:.2f} of the timed handshakes resumed"
    return None


def _queue(level, ch):
    """``queue_limit``: per overridden link direction the built buffer (packets or bytes)."""
    from testbed.spec.units import parse_queue
    packets, nbytes = parse_queue(level)
    want = packets if packets is not None else nbytes
    got = ch["queue_limit"]
    got = got if isinstance(got, (list, tuple)) else [got]
    return None if got and all(g == want for g in got) else f"queue {level} but the link was built with {got}"


def _repair(level, ch):
    n = int(ch["repair_packets"])
    return None if (n > 0) == (str(level) not in ("0", "0%", "off", "none")) else \
        f"fec {level} but {n} repair packets on the wire"


def _equals(key):
    def fn(level, ch):
        return None if str(ch[key]).lower() == str(level).lower() else f"{key} {level} but the run logged {ch[key]}"
    return fn


def _schedule(level, ch):
    first = ch["audio_before_image_end"]
    if first is None:
        return "schedule not verifiable: no audio or no image frame sent"
    if (level == "priority") != bool(first):
        return f"schedule {level} but the first audio frame left {'before' if first else 'after'} the last image frame"
    return None


def _uplinks(level, ch):
    steps = ch["uplink_steps"]
    bad = [s["round"] for s in steps.get("steps", []) if not s["ok"]]
    return None if steps.get("ok") else \
        f"uplinks {level} but the steps of round(s) {bad or 'all'} did not land between the rounds"


def _ack_policy(level, ch):
    from testbed.transport.ackpolicy import AckPolicy
    got, policy = ch["symbols_per_ack"], AckPolicy.parse(level)
    n = policy.every_n
    if policy.every_t_ns is not None:
        return None if got >= 1 else f"ack_policy {level} but {got:.2f} symbols per ACK (fewer than 1)"
    if n == 1:
        return None if got < 1.5 else f"ack_policy every but {got:.2f} symbols per ACK on the wire"
    return None if 1.5 < got <= n else \
        f"ack_policy {level} but {got:.2f} symbols per ACK on the wire (want more than 1.5, at most {n})"


def _scheme(level, ch):
    paths = ch["paths_with_data"]
    want = 1 if level == "single" else 2
    if len(paths) != want:
        return f"scheme {level} but {len(paths)} path(s) carried data in the client capture ({paths})"
    return None


def _send(level, ch):
    want = 1 if level == "single" else 2
    got = ch["paths_seen"]
    return None if got == want else f"send {level} but the server saw chunks from {got} path(s)"


for c in (
    Check("params.mode", ("syn_per_request",), "new: >= 1 SYN per request; reuse: < 0.5", _mode),
    Check("params.reuse", ("syn_per_request",), "true: < 0.5 SYNs per request; false: >= 1", _reuse_flag),
    Check("params.path", ("path",), "relay: the client's connections reach cgw and never the server "
          "host; direct: they reach the server host (captures on client, cgw and server)", _path),
    Check("params.resume", ("tls_resumed",), "on: at least half the timed TLS handshakes resumed "
          "(the first cannot); off: none", _tls_resume),
    Check("params.tls_resume", ("tls_resumed",), "on: at least half the timed TLS handshakes "
          "resumed (the first cannot); off: none", _tls_resume),
    Check("links.*.*.queue", ("queue_limit",), "the link direction was built with the level's buffer "
          "(packets or bytes)", _queue),
    Check("params.fec", ("repair_packets",), "repair packets sent iff FEC is on (level not off)", _repair),
    Check("params.ack_policy", ("symbols_per_ack",), "UDP transport, the request's symbols per ACK in "
          "the client's capture: every: below 1.5; n:N: above 1.5 and at most N; with a time T: at "
          "least 1", _ack_policy),
    Check("params.transport", ("streams_transport",), "streams: the server's session ran over the level's "
          "transport", _equals("streams_transport")),
    Check("params.schedule", ("audio_before_image_end",), "priority: the first audio frame left "
          "before the last image frame; fifo: after it", _schedule),
    Check("params.scheme", ("paths_with_data",), "single: one client interface carried >= 1 % of "
          "the bytes in the capture; split / mptcp: two", _scheme),
    Check("params.send", ("paths_seen",), "single: the server saw chunks from one client address; "
          "duplicate: from two", _send),
    Check("params.uplinks", ("uplink_steps",), "agent: every round's uplink rate step took effect "
          "after the previous round's upload and by the round's first write", _uplinks),
):
    register_check(c)


# --- derived checks -----------------------------------------------------------------------

def wilson(k: int, n: int, level: float = CI_LEVEL) -> list[float] | None:
    """Wilson score interval of a binomial proportion k/n (None without trials)."""
    if n <= 0:
        return None
    from scipy.stats import norm
    z = float(norm.ppf(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _link_record(run_dir: Path, link: str) -> dict | None:
    metadata = _json(run_dir / "metadata.json")
    links = metadata.get("links") or (_json(run_dir / "manifest.json").get("environment") or {}).get("links") or []
    return next((r for r in links if r.get("name") == link), None)


def frame_stats(header: dict, records) -> dict:
    """What one direction's frame log says the link did (see the module docstring)."""
    import numpy as np

    from testbed.emulator import linklog
    spec = header.get("spec") or {}
    rec = np.sort(records, order="t_arrival")
    v = rec["verdict"]
    tx = rec[(v == linklog.DELIVERED) | (v == linklog.LOSS)]       # reached the loss stage
    lost = int((tx["verdict"] == linklog.LOSS).sum())
    out: dict[str, Any] = {"frames": int(len(tx)), "lost": lost,
                           "loss": round(lost / len(tx), 6) if len(tx) else None,
                           "loss_ci": [round(x, 6) for x in wilson(lost, len(tx))] if len(tx) else None,
                           "loss_ci_level": CI_LEVEL,
                           "queue_drops": int((v == linklog.QUEUE).sum())}
    rate = spec.get("rate")
    bits = (tx["length"].astype(np.int64) + int(spec.get("overhead") or 0)) * 8
    ser = (bits / rate * 1e9) if rate else np.zeros(len(tx))
    sent = tx["verdict"] == linklog.DELIVERED
    sojourn = (tx["t_sent"] - tx["t_arrival"] - ser)[sent]
    out["delay_ms"] = round(float(sojourn.min()) / 1e6, 4) if len(sojourn) else None
    out["rate_mbps"], out["rate_pairs"] = None, 0
    if rate and sent.sum() > 1 and not float(spec.get("jitter") or 0):
        delay_ns = int(round(float(spec.get("delay") or 0) * 1e9))
        # the model's end of transmission (t_sched of a loss; t_sched - delay of a delivery)
        done = np.where(sent, tx["t_sched"] - delay_ns, tx["t_sched"])
        queued = np.r_[False, tx["t_arrival"][1:] < done[:-1]]      # arrived before the one ahead left
        idx = np.flatnonzero(sent)
        cum_bits = np.r_[0, np.cumsum(bits)]
        cum_idle = np.r_[0, np.cumsum(~queued)]
        between = cum_bits[idx[1:] + 1] - cum_bits[idx[:-1] + 1]      # bits after one delivery, up to the next
        busy = cum_idle[idx[1:] + 1] - cum_idle[idx[:-1] + 1] == 0    # every one of them queued
        gap = (tx["t_sent"][idx[1:]] - tx["t_sent"][idx[:-1]]).astype(float)   # measured departures
        ok = busy & (gap > 0)
        if ok.any():            # the median: a stretch of late sends (the verdict's business) skews a sum
            out["rate_mbps"] = round(float(np.median(between[ok] / gap[ok])) * 1e3, 4)
            out["rate_pairs"] = int(ok.sum())
    return out


def link_readback(run_dir: Path | str, name: str) -> dict | None:
    """The read-back of link direction ``LINK.DIR`` of a run (see the module docstring); None
    when the run recorded no such link."""
    from testbed.spec.linkspec import LinkSpec
    run_dir = Path(run_dir)
    link, _, direction = name.partition(".")
    rec = _link_record(run_dir, link)
    if rec is None or direction not in ("up", "down"):
        return None
    src, dst = (rec["a"], rec["b"]) if direction == "up" else (rec["b"], rec["a"])
    built = rec["a_to_b" if direction == "up" else "b_to_a"]
    logs = sorted((run_dir / "emulator").glob(f"{src}-{dst}.frames")) + \
        sorted((run_dir / "emulator").glob(f"{src}-{dst}.*.frames"))
    out: dict[str, Any] = {"link": name, "direction": f"{src}-{dst}"}
    for path in logs:
        from testbed.emulator import linklog
        try:
            header, records = linklog.read_log(path)
        except (OSError, ValueError):
            continue
        if built is None or len(logs) == 1 or header.get("spec") == built:
            return {**out, "direction": path.name.removesuffix(".frames"),
                    "source": f"frame log {path.relative_to(run_dir)}",
                    "configured": header.get("spec"), **frame_stats(header, records)}
    if built is None:
        return {**out, "source": "metadata.json (the link is unimpaired)",
                "configured": LinkSpec().to_dict()}
    return {**out, "source": "metadata.json (the spec the topology was built with; nothing "
                             "measured: no frame log)", "configured": built}


def _field_value(fld: str, level) -> Any:
    """The LinkSpec value(s) a level of link field ``fld`` sets, as ``LinkSpec.to_dict`` has them."""
    from testbed.spec.linkspec import LinkSpec
    parsed = LinkSpec.parse(**{fld: level}).to_dict()
    names = ("queue_packets", "queue_bytes") if fld == "queue" else (fld,)
    return {n: parsed[n] for n in names}


def _link_check(fld: str):
    def fn(level, ch):
        rb = ch["link"]
        conf = rb.get("configured") or {}
        try:
            want = _field_value(fld, level)
        except ValueError as exc:
            return f"{fld} {level}: {exc}"
        got = {k: conf.get(k) for k in want}
        if got != want:
            return f"{fld} {level} but the link ran with {got} ({rb.get('source')})"
        if "frames" not in rb:
            return None                                   # configured only (no frame log)
        if fld == "loss" and want["loss"].get("model") == "bernoulli":
            p, ci = want["loss"]["p"], rb.get("loss_ci")
            if not rb["frames"]:
                return f"loss {level} not verifiable: no frame crossed {rb['link']}"
            if not ci[0] <= p <= ci[1]:
                return (f"loss {level} but {rb['lost']} of {rb['frames']} frames lost on {rb['link']}: "
                        f"{rb['loss']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}] ({CI_LEVEL:.1%} Wilson)")
        if fld == "delay":
            d = rb.get("delay_ms")
            want_ms = want["delay"] * 1e3
            lo, hi = want_ms - DELAY_TOL[0] * 1e3, want_ms + max(DELAY_TOL[1] * 1e3, DELAY_TOL[2] * want_ms)
            if d is None:
                return f"delay {level} not verifiable: no frame delivered on {rb['link']}"
            if not lo <= d <= hi:
                return f"delay {level} but the frames of {rb['link']} spent {d:.3f} ms (want [{lo:.3f}, {hi:.3f}])"
        if fld == "rate" and want["rate"] and rb.get("rate_pairs", 0) >= RATE_MIN_PAIRS:
            r, w = rb["rate_mbps"], want["rate"] / 1e6
            if abs(r - w) > RATE_TOL * w:
                return (f"rate {level} but {rb['link']} sent back to back at {r:.3f} Mbit/s "
                        f"(over {rb['rate_pairs']} departures)")
        return None
    return fn


_LINK_RULES = {
    "loss": "the emulator ran the level's loss (frame-log header) and the level lies in the "
            f"{CI_LEVEL:.1%} Wilson interval of the random-loss fraction measured over the frames "
            "that crossed the link direction",
    "delay": "the emulator ran the level's delay and the smallest time a delivered frame spent in "
             "it, minus its transmission time, is within [level − 0.5 ms, level + max(2 ms, 5 %)]",
    "rate": "the emulator ran the level's rate and, when its queue stayed backlogged for "
            f"{RATE_MIN_PAIRS} departures or more, the median rate of its back-to-back departures "
            f"(bits over the time between two departures) is within {RATE_TOL:.0%} of it",
}


def _doubled(name: str):
    def fn(level, ch):
        want = 2 * factors.FACTORS.get(name).canonical(level)
        got = (ch.get("socket_readback") or {}).get(name)
        vals = set(got if isinstance(got, (list, tuple)) else [got])
        return None if got and vals == {want} else f"{name} {level} but read back {got} (want {want})"
    return fn


def _schedule_check(fld: str):
    """The link direction ran the level's schedule (``schedule``: a file, inline items or none;
    ``trace``: a trace file) — the configured spec's ``schedule`` equals the level's; ``down``:
    an outage, which is added to whatever else the direction's schedule holds — the configured
    schedule has the level's outage — and every item of the level took effect while the client
    ran (read-back ``schedule_took_effect``, :func:`schedule_readback`; what took effect only
    after the client finished is named from ``schedule_after_workload``)."""
    def fn(level, ch):
        from testbed.spec.linkspec import LinkSpec
        from testbed.spec.schedule import Schedule
        rb = ch.get("link") or {}
        try:
            none = fld == "schedule" and str(level).strip().lower() == "none"
            want = None if none else LinkSpec().with_override(fld, level).schedule
        except ValueError as exc:
            return f"{fld} {level}: {exc}"
        got = (rb.get("configured") or {}).get("schedule")
        what = "no schedule" if got is None else "a schedule of " + ", ".join(
            counted(len(got.get(kind, [])), kind) for kind in ("step", "outage", "event")) + \
            (", a trace" if got.get("trace") else "")
        if fld == "down":                  # the level's outage among the direction's items
            try:
                have = Counter(Schedule.from_dict(got).describe_items()) if got else Counter()
            except ValueError as exc:
                return f"{fld} {level} but {rb.get('link')}'s recorded schedule cannot be read: {exc}"
            if Counter(want.describe_items()) - have:
                return (f"{fld} {level} but {rb.get('link')} ran with {what}, without that outage "
                        f"({rb.get('source')})")
        elif got != (want.to_dict() if want else None):
            return f"{fld} {level} but {rb.get('link')} ran with {what} ({rb.get('source')})"
        never = list((Counter(want.describe_items() if want else []) -
                      Counter(ch.get("schedule_took_effect") or [])).elements())
        if never:
            late = set(ch.get("schedule_after_workload") or [])
            gone, after = [i for i in never if i not in late], [i for i in never if i in late]
            said = ([f"did not take effect (in full): {'; '.join(gone)}"] if gone else []) + (
                [f"took effect only after the client finished, not on the measured workload: "
                 f"{'; '.join(after)}"] if after else [])
            return f"{fld} {level} but on {rb.get('link')} {'; '.join(said)} (the manifest's link_changes)"
        return None
    return fn


for _fld in ("schedule", "trace"):
    register_check(Check(f"links.*.*.{_fld}", ("schedule_took_effect",), f"the link direction ran "
                         f"with the level's {_fld} (frame-log header, else metadata.json: its schedule "
                         "equals the level's, item for item) and every item of it took effect while "
                         "the client ran (the manifest's link_changes, up to its workload_end_ns; an "
                         "outage: its down and its up)", _schedule_check(_fld)))
register_check(Check("links.*.*.down", ("schedule_took_effect",), "the link direction ran with the "
                     "level's outage (frame-log header, else metadata.json: among its schedule's "
                     "outages, which may hold other items) and the outage took effect while the "
                     "client ran (the manifest's link_changes, up to its workload_end_ns: its down "
                     "and its up)", _schedule_check("down")))


def schedule_readback(run_dir: Path | str, link: dict) -> dict[str, list[str]] | None:
    """What a link direction's schedule did in a run, given the direction's
    :func:`link_readback`: the items of the schedule it ran (``configured``, described as
    ``Schedule.describe_items`` does) by when they took effect (``Schedule.item_effects`` of the
    manifest's ``link_changes`` against its ``workload_end_ns``: "during" the workload, "after"
    it — in drain or teardown, not on the measured workload — "partly", "never"); {} when it ran
    without a schedule; None (no read-back) when it ran with one but the run recorded none of
    the direction's changes."""
    from testbed.spec.schedule import Schedule
    recorded = (link.get("configured") or {}).get("schedule")
    if recorded is None:
        return {}
    lc = _json(Path(run_dir) / "manifest.json").get("link_changes") or {}
    changes = lc.get("changes") or {}
    if link["direction"] not in changes:
        return None
    out: dict[str, list[str]] = {}
    for item, effect in Schedule.from_dict(recorded).item_effects(changes[link["direction"]],
                                                                  lc.get("workload_end_ns")):
        out.setdefault(effect, []).append(item.text)
    return out


def _socket_host_check(where: str, name: str) -> Check | None:
    """A socket or host factor whose record has no check: sndbuf/rcvbuf read back doubled
    (Linux doubles what it is given), a route or sysctl option or a boolean socket option read
    back as given; others (delack_max rounds to the tick, window_clamp is recomputed,
    keep_metrics reads back what it did) have none."""
    f = factors.FACTORS.get(name) if name in factors.FACTORS else None
    if f is None or f.where != where:
        return None
    if name in ("sndbuf", "rcvbuf"):
        return Check(f"{where}.{name}", ("socket_readback",), f"every socket's {name} read back equals "
                     "twice the level (Linux doubles SO_SNDBUF/SO_RCVBUF)", _doubled(name))
    plain = f.route is not None or f.sysctl is not None or (f.sockopt is not None and f.sockopt.kind is bool)
    if not plain:
        return None
    v = factors._readback_check(f)
    return Check(f"{where}.{name}", v.needs, v.rule, v.fn)


def derived_check(factor: str) -> Check | None:
    """The check a factor without a hand-written one gets (module docstring); None if none."""
    parts = factor.split(".")
    if parts[0] in factors.WHERE and len(parts) == 2:
        return _socket_host_check(parts[0], parts[1])
    if parts[0] == "links" and len(parts) == 4 and parts[3] in LINK_FIELDS:
        rule = _LINK_RULES.get(parts[3], f"the link direction ran with the level's {parts[3]} "
                                         "(frame-log header, else metadata.json)")
        return Check(factor, ("link",), rule + " (without a frame log: the spec the topology was "
                     "built with)", _link_check(parts[3]))
    if parts[0] == "topology_params" and len(parts) == 2:
        return Check(factor, ("topology_param",), "the topology was built with the level "
                     "(metadata.json)", _equals("topology_param"))
    if parts[0] == "params" and len(parts) == 2:
        return Check(factor, ("workload_param",), "the run's manifest records the level for the "
                     "workload (a record of what was asked, not a measurement)", _equals("workload_param"))
    return None


def derived_readbacks(factor: str, run_dir: Path | str) -> dict:
    """The read-back a derived check of ``factor`` reads, from the run directory's files."""
    run_dir = Path(run_dir)
    parts = factor.split(".")
    if parts[0] == "links" and len(parts) == 4:
        rb = link_readback(run_dir, f"{parts[1]}.{parts[2]}")
        if not rb:
            return {}
        effects = schedule_readback(run_dir, rb) if parts[3] in SCHEDULE_FIELDS else None
        if effects is None:
            return {"link": rb}
        return {"link": rb, "schedule_took_effect": effects.get("during", []),
                **({"schedule_after_workload": effects["after"]} if effects.get("after") else {})}
    if parts[0] == "topology_params" and len(parts) == 2:
        topo = (_json(run_dir / "metadata.json").get("topology") or
                (_json(run_dir / "manifest.json").get("environment") or {}).get("topology") or {})
        values = topo.get("params") or {}
        return {"topology_param": values[parts[1]]} if parts[1] in values else {}
    if parts[0] == "params" and len(parts) == 2:
        params = (_json(run_dir / "manifest.json").get("spec") or {}).get("params") or {}
        return {"workload_param": params[parts[1]]} if parts[1] in params else {}
    return {}


def link_readbacks(run_dir: Path | str) -> dict:
    """Every named link direction's read-back (:func:`link_readback`) of a run, by ``LINK.DIR``."""
    run_dir = Path(run_dir)
    links = _json(run_dir / "metadata.json").get("links") or []
    out = {}
    for rec in links:
        for d in ("up", "down"):
            rb = rec.get("name") and link_readback(run_dir, f"{rec['name']}.{d}")
            if rb and "frames" in rb:
                out[f"{rec['name']}.{d}"] = rb
    return out


def manipulation_reason(factor: str, level, checks: dict) -> str | None:
    c = check_for(factor)
    if c is None:
        return f"no manipulation check registered for factor {factor}"
    if all(checks.get(k) is None for k in c.needs):
        return f"no read-back {' or '.join(c.needs)} in the run's checks"
    return c.fn(level, checks)


def _loss_reason(link: dict) -> str | None:
    frames, lost = int(link.get("frames") or 0), int(link.get("lost") or 0)
    if frames == 0 or link.get("configured_loss") is None:      # no traffic, or not Bernoulli
        return None
    p = parse_probability(link["configured_loss"])
    if p == 0:
        return f"{link.get('name', 'link')}: {lost} random losses on a lossless link" if lost else None
    from scipy.stats import binomtest
    pv = binomtest(lost, frames, p).pvalue
    if pv < LOSS_P:
        return (f"{link.get('name', 'link')}: measured loss {lost / frames:.4f} over {frames} frames "
                f"vs configured {p:.4f} (binomial p={pv:.1e})")
    return None


def _verdict_excludes(fidelity: dict, accept_degraded: bool) -> bool:
    verdict = fidelity.get("verdict", "unknown")
    return verdict == "overloaded" or verdict == "degraded" and not accept_degraded


def excluded_for_the_machine(status: str, fidelity: dict, accept_degraded: bool = True) -> bool:
    """Whether a finished run is excluded by its link fidelity verdict (:func:`fidelity_reason`)
    and that verdict names the machine as its cause (``testbed.emulator.fidelity``: the host
    stalled, not the emulator nor the transport) — a run worth running again."""
    return status == "complete" and _verdict_excludes(fidelity, accept_degraded) \
        and fidelity.get("cause") == "machine"


def fidelity_reason(status: str, error: str | None, fidelity: dict,
                    accept_degraded: bool = True) -> str | None:
    if status != "complete":
        return f"run failed: {error or 'no error recorded'}"
    verdict = fidelity.get("verdict", "unknown")
    if _verdict_excludes(fidelity, accept_degraded):
        why = "; ".join(map(str, fidelity.get("reasons", []))) or "no detail"
        return f"link fidelity {verdict}: {why}"
    drops = int(fidelity.get("unintended_drops", 0) or 0)
    if drops:
        return f"{drops} unintended drops in the emulator"
    for link in fidelity.get("links", []) or []:
        reason = _loss_reason(link)
        if reason:
            return reason
    return None
