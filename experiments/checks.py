"""Per-run verification: did the factor take effect (manipulation check), and can the run be
trusted (fidelity rule)?  Both read only ``RunResult.checks`` / ``RunResult.fidelity``.

A manipulation check is looked up by the factor's RunSpec path (:func:`check_for`):
``check(level, result) -> None`` when the factor demonstrably took effect, else the reason the run
is invalid.  A read-back that is missing makes the run invalid too (a factor that cannot be
verified is not counted as applied).  The check of a TCP factor (``socket.NAME``, ``host.NAME``)
is part of its record (``testbed.spec.factors``, ``Factor.check``); the others (workload
parameters, link fields; shell-style patterns allowed) are registered here, one :class:`Check`
each.

Fidelity rule (:func:`fidelity_reason`, :data:`FIDELITY_RULE`), applied to every run.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Callable

from testbed.spec import factors
from testbed.spec.units import parse_probability

LOSS_P = 0.001
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
    """The manipulation check of the factor at RunSpec path ``factor`` (None: there is none)."""
    where, _, name = factor.partition(".")
    if where in factors.WHERE:
        f = factors.FACTORS.get(name) if name in factors.FACTORS else None
        if f is None or f.where != where or f.check is None:
            return None
        return Check(factor, f.check.needs, f.check.rule, f.check.fn)
    if factor in CHECKS:
        return CHECKS[factor]
    return next((c for pat, c in CHECKS.items() if fnmatch.fnmatchcase(factor, pat)), None)


def checked_factors() -> list[str]:
    """Every factor path (or pattern) an experiment can vary: those with a manipulation check."""
    return [f"{f.where}.{f.name}" for f in factors.FACTORS.values() if f.check is not None] + list(CHECKS)


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
        return None if str(ch[key]) == str(level) else f"{key} {level} but the run logged {ch[key]}"
    return fn


def _schedule(level, ch):
    first = ch["audio_before_image_end"]
    if first is None:
        return "schedule not verifiable: no audio or no image frame sent"
    if (level == "priority") != bool(first):
        return f"schedule {level} but the first audio frame left {'before' if first else 'after'} the last image frame"
    return None


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
    Check("params.transport", ("streams_transport",), "streams: the server's session ran over the level's "
          "transport", _equals("streams_transport")),
    Check("params.schedule", ("audio_before_image_end",), "priority: the first audio frame left "
          "before the last image frame; fifo: after it", _schedule),
    Check("params.scheme", ("paths_with_data",), "single: one client interface carried >= 1 % of "
          "the bytes in the capture; split / mptcp: two", _scheme),
    Check("params.send", ("paths_seen",), "single: the server saw chunks from one client address; "
          "duplicate: from two", _send),
):
    register_check(c)


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


def fidelity_reason(status: str, error: str | None, fidelity: dict,
                    accept_degraded: bool = True) -> str | None:
    if status != "complete":
        return f"run failed: {error or 'no error recorded'}"
    verdict = fidelity.get("verdict", "unknown")
    if verdict == "overloaded" or verdict == "degraded" and not accept_degraded:
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
