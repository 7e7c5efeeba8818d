"""``agent`` (C13): N rounds of screenshot upload, server think time and a small action, with
terminal work between rounds (client ``testbed/apps/agent.py`` against the reqresp server).
The steps that stand for computation — preparation once, encoding and terminal work per round on
the device, the model's time on the server — are timed parameters, logged as ``step`` events.

Per-round uplinks (C14, ``uplinks`` b_1..b_n): round i's upload runs at b_i on the server's
path.  They are rate steps of that link's uplink schedule (``LINK.up``, the link named after the
server host: edgecloud's ``cloud``), each at a *byte* moment that falls between round i−1's last
request frame and round i's first (:func:`uplink_schedule`), so no step depends on timing.  The
list implies that schedule (the workload's ``links``: the run adds ``cloud.up.schedule`` to its
links, recorded in the manifest with the list; a run that gives another schedule there is
refused, naming the list's).  The uplink frames since the origin, counted exactly (Linux with
TCP timestamps, MSS = MTU − 52): the SYN (74 B) and the handshake's ACK (66 B), per round the request (a 28-byte
operation header and the screenshot) in ⌈request / MSS⌉ frames of 66 header bytes each, and one
66-byte ACK of the action (one segment).  The step's moment sits midway in the byte window that
applies it to a frame of the gap ((end − last frame, end + one ACK], end = the bytes through
round i−1's last frame), so a miscount of less than half that window (≥ 66 B) still lands it
there.  The run checks where every step landed (:func:`uplink_steps`, ``checks.uplink_steps``):
after round i−1's request left the device's send queue and before round i's first write (+
``STEP_SLACK``, the first frame's way to the link).  Needs a kept connection, no TLS and no
disconnect (their frames are not counted), and no frame sent twice: the uplink's queue must
hold a whole request (553 frames for 0.8 MB, refused otherwise; the client has one request in
flight, so nothing overflows it) and the uplink must not lose frames — the check says so when a
step landed elsewhere."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.spec.errors import UsageError
from testbed.spec.schedule import parse_inline
from testbed.spec.units import format_rate, parse_rate, parse_size
from testbed.workloads.base import WORKLOADS, Common, Workload, param
from topologies.base import DIRECTIONS

#: the request header of a round (reqresp's ``OP_HEADER``, ``!4sQIIQ``: it carries the operation id)
REQUEST_HEADER = 28
SYN_FRAME = 74   # Ethernet 14 + IPv4 20 + TCP 20 + SYN options 20 (MSS, SACK ok, timestamps, wscale)
ACK_FRAME = 66   # Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12: every later segment's header
#: how long after round i's first write (a client clock stamp) its first frame may reach the link
STEP_SLACK = 0.002


@dataclass(frozen=True)
class AgentParams(Common):
    rounds: int = param(30, "rounds N")
    screenshot: str = param("0.8MB", "upload S per round", unit="size")
    model: str = param("2s", "server think time T per round", unit="time")
    action: str = param("200", "action size A returned", unit="size")
    terminal: str = param("0.3s", "terminal work W between rounds", unit="time")
    encode: str = param("0", "encoding E on the device before each upload (a timed step: the "
                        "screenshot size is what it encodes to)", unit="time")
    prep: str = param("0", "preparation P once before the first round (a timed step)", unit="time")
    disconnect: str = param("none", "none, or K:keep | K:lose — the device loses its connection "
                            "after round K (RST), reconnects after --reconnect and redoes the "
                            "rounds its commit log did not keep: keep = the K−1 confirmed ones "
                            "(round K's commit rides on round K+1), lose = none of the K")
    reconnect: str = param("1s", "time until the network is back after a disconnect (a timed step)",
                           unit="time")
    reuse: bool = param(False, "one connection for all rounds")
    tls: bool = param(False, "TLS 1.3", side="both")
    uplinks: str = param("none", "none, or the server path's uplink per round b_1,...,b_n (one per "
                         "round, or one for every round): rate steps of the link LINK.up named "
                         "after the server host, at byte moments between the rounds (the run adds "
                         "that schedule); give the queue the run names (--link cloud.up.queue=N)",
                         side="run")

    def validate(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds {self.rounds} must be >= 1")
        after, _ = parse_disconnect(self.disconnect)
        if after > self.rounds:
            raise ValueError(f"disconnect after round {after}: the run has only {self.rounds} rounds")
        if self.uplinks != "none":
            round_rates(self)
            if not self.reuse or self.tls or after:
                raise ValueError("uplinks needs reuse, no tls and no disconnect (the byte moments "
                                 "of its steps count the frames of one plain kept connection)")


def round_rates(p: AgentParams) -> list[float]:
    """b_i of every round (bit/s) from ``uplinks``: one value per round, or one for every round."""
    rates = [parse_rate(x.strip()) for x in p.uplinks.split(",") if x.strip()]
    if len(rates) not in (1, p.rounds) or not all(math.isfinite(r) and r > 0 for r in rates):
        raise ValueError(f"uplinks {p.uplinks!r}: give {p.rounds} rates > 0 (one per round) or one "
                         "for every round, e.g. 6.4mbit,3.2mbit")
    return rates * p.rounds if len(rates) == 1 else rates


def uplink_moments(request: int, rounds: int, mtu: int = 1500) -> list[int]:
    """The byte moment of round i's step on the uplink, counted from the origin (module
    docstring): 0 for round 0 (from the SYN on), then midway in the window between round i−1's
    last request frame and round i's first."""
    mss = mtu - 52
    frames = -(-request // mss)
    last = request - (frames - 1) * mss + ACK_FRAME
    per_round = request + frames * ACK_FRAME + ACK_FRAME          # its frames and the action's ACK
    return [0] + [SYN_FRAME + ACK_FRAME + i * per_round - ACK_FRAME - (last - ACK_FRAME) // 2
                  for i in range(1, rounds)]


def uplink_schedule(p: AgentParams, mtu: int = 1500) -> str:
    """The inline schedule (``--link LINK.up.schedule=...``) of ``p.uplinks``: ``rate=b_i@MB``."""
    moments = uplink_moments(REQUEST_HEADER + parse_size(p.screenshot), p.rounds, mtu)
    return ";".join(f"rate={format_rate(b)}@{m}B" for b, m in zip(round_rates(p), moments))


def _uplink_link(p: AgentParams, spec: Any, topo: Any) -> tuple[str, Any] | None:
    """(server host, the LinkSpec of its link's uplink) of a run with ``uplinks``; None without
    them, on loopback or without a link named after the server (the check says why)."""
    if p.uplinks == "none" or topo is None:
        return None
    server = spec.server_host or topo.roles.get("server")
    if server not in getattr(topo, "named", {}):
        return None
    return server, topo.named[server].get(DIRECTIONS["up"])          # the overrides applied


def _agent_links(p: AgentParams, spec: Any, topo: Any) -> dict[str, str]:
    """The links ``uplinks`` implies: the server link's uplink schedule (:func:`uplink_schedule`)."""
    found = _uplink_link(p, spec, topo)
    if found is None:
        return {}
    server, link = found
    return {f"{server}.up.schedule": uplink_schedule(p, getattr(link, "mtu", 1500))}


def _check_agent(p: AgentParams, spec: Any, topo: Any) -> None:
    """With ``uplinks``: the server's link has, on its uplink, exactly the steps of the list."""
    if p.uplinks == "none":
        return
    if topo is None:
        raise UsageError("agent uplinks: needs a topology with links (e.g. edgecloud), not loopback")
    found = _uplink_link(p, spec, topo)
    if found is None:
        raise UsageError(f"agent uplinks: topology {spec.topology!r} has no link named after the server "
                         f"host {spec.server_host or topo.roles.get('server')!r} (edgecloud: "
                         "--server-host cloud or edge)")
    server, link = found
    mtu = getattr(link, "mtu", 1500)
    if parse_size(p.action) > mtu - 52:
        raise UsageError(f"agent uplinks: action {p.action} must fit one segment ({mtu - 52} B) so that "
                         "one ACK answers it")
    frames = -(-(REQUEST_HEADER + parse_size(p.screenshot)) // (mtu - 52))
    if getattr(link, "queue_packets", None) is None or link.queue_packets < frames:
        raise UsageError(f"agent uplinks: the uplink's queue must hold one request's {frames} frames "
                         f"(a dropped frame sent again shifts every later byte moment); give --link "
                         f"{server}.up.queue={frames}")
    want = uplink_schedule(p, mtu)
    given = spec.links.get(f"{server}.up.schedule")
    if given is None or parse_inline("schedule", given) != parse_inline("schedule", want):
        raise UsageError(f"agent uplinks {p.uplinks}: the list sets {server}.up.schedule to "
                         f"'{want}'; leave that link setting out (or give exactly it)")


def uplink_steps(changes: list[dict], events: list[dict], rates: list[float]) -> dict:
    """Where each round's rate step took effect (``changes``: the uplink's ``ScheduleChange``
    records, ``events``: the client's log): ``ok`` when step i set b_i after round i−1's
    request left the send queue and no later than ``STEP_SLACK`` after round i's first write.
    ``steps``: per round, the step's moment and the two bounds (ns)."""
    steps = sorted((c for c in changes if c.get("kind") == "step"), key=lambda c: c["item"])
    left = {e["req"]: e["t"] for e in events if e["event"] == "request_left_send_queue"}
    first = {e["req"]: e["t"] for e in events if e["event"] == "first_request_byte_sent"}
    out, ok = [], len(steps) == len(rates) == len(first)
    for i, (c, b) in enumerate(zip(steps, rates)):
        after, before = left.get(i - 1) if i else None, first.get(i)
        rate = re.search(r"rate=([^,; ]+)", c.get("what", ""))
        rate = parse_rate(rate.group(1)) if rate else None
        landed = (before is not None and c["actual_ns"] <= before + STEP_SLACK * 1e9 and rate == b
                  and (i == 0 or (after is not None and after < c["actual_ns"])))
        ok = ok and landed
        out.append({"round": i, "actual_ns": c["actual_ns"], "after_ns": after, "before_ns": before,
                    "rate": rate, "ok": landed})
    return {"ok": ok, "steps": out}


def agent_metrics(run_dir: Path) -> dict:
    """The run's metrics (``analysis.runmetrics``) and, with ``uplinks``, ``checks.uplink_steps``."""
    from analysis import applog
    from analysis.runmetrics import run_metrics
    out = run_metrics(run_dir)
    manifest = applog.run_manifest(run_dir)
    spec = manifest.get("spec", {})
    p = AGENT.make_params(spec.get("params", {}))
    if p.uplinks != "none":
        server = spec.get("server_host") or manifest.get("roles", {}).get("server")
        changes = manifest.get("link_changes", {}).get("changes", {})
        mine = next((v for k, v in changes.items() if k.endswith(f"-{server}")), [])   # LINK.up: gw-cloud
        log = Path(run_dir) / "client.jsonl"
        out["checks"]["uplink_steps"] = uplink_steps(mine, applog.load(log) if log.is_file() else [],
                                                     round_rates(p))
    return out


def parse_disconnect(value: str) -> tuple[int, str]:
    """``none`` → (0, ""); ``K:keep`` / ``K:lose`` → (K, commit) with K >= 1."""
    if value == "none":
        return 0, ""
    k, _, commit = value.partition(":")
    if not k.isdigit() or int(k) < 1 or commit not in ("keep", "lose"):
        raise ValueError(f"disconnect {value!r}: none, or K:keep | K:lose with K >= 1 (e.g. 10:keep)")
    return int(k), commit


AGENT = WORKLOADS.register(Workload("agent", "screenshot agent loop (C13)", "testbed.apps.reqresp",
                                    AgentParams, 5000, client_module="testbed.apps.agent",
                                    client_command=(), metrics=agent_metrics, check=_check_agent,
                                    links=_agent_links))
