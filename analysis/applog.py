"""Application event logs (JSONL) and their join onto flows.

Each line is a JSON object with ``"t"`` (CLOCK_MONOTONIC ns) and ``"event"``
(a name chosen by the application); any other fields are kept, and ``"log"``
(the file's name) is added when absent.  Endpoint
fields, when present, are used for the join: ``src``, ``sport``, ``dst``,
``dport`` (either direction of the flow matches), or ``local``/``remote`` as
``"ip:port"`` strings.  Within one log file, an event without endpoints but
with a ``conn`` id inherits the endpoints of that file's ``conn`` event with
the same id (the vocabulary of :mod:`testbed.apps.eventlog`).  A log whose last line was cut
short (its app killed while writing it) is read up to its last whole line, with a warning and
the result's ``damage`` (:func:`load`); a bad line before the last is an error.

Join rule (:func:`assign`; ``clock`` events are metadata and not joined): an
event naming endpoints goes to the flows those endpoints match; an event without endpoints goes to the one flow whose
lifetime [first packet, last packet] contains its time, and stays unmatched
when none or several do.  Within a flow (:func:`by_exchange`), an exchange's
span is [request_first, last of response_last / response_acked]; the events
of one log that share a ``"req"`` (or ``"request"``) value form a group, and
the group goes to the exchange its time span overlaps most (the nearest one if
it overlaps none); an event without such a field goes alone the same way.
Grouping by request makes the join robust to clock offsets between hosts
smaller than an exchange, and to however the application numbers requests.

Timed steps (``step`` events: computation the workload stands in for, see
:mod:`testbed.apps.eventlog`) are not joined to flows: :func:`steps` reads them as
:class:`Step` spans on the logs' clock (CLOCK_MONOTONIC, the clock captures are put on by
:mod:`analysis.clock`), :func:`step_totals` sums them per name.

A run's JSON files are read here too: :func:`read_object` (metadata, capture sidecars),
:func:`run_manifest` and :func:`role_host` (which host played client or server).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from testbed.spec.runresult import MANIFEST, read_manifest


def read_object(path: str | Path) -> dict | None:
    """The JSON object of one of a run's JSON files (metadata, a capture's sidecar), None when
    there is no such file; a ValueError naming it when it holds no JSON object."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON {type(data).__name__}, not an object")
    return data


def run_manifest(run_dir: str | Path) -> dict:
    """The run's manifest (``runresult.read_manifest``: a UsageError naming it when damaged);
    {} when the directory has none (captures analysed on their own)."""
    path = Path(run_dir) / MANIFEST
    return read_manifest(path) if path.is_file() else {}


def role_host(run_dir: str | Path, role: str) -> str:
    """The host that played ``role`` (client, server) in the run, by its manifest's ``roles``;
    the role's own name when the run recorded none (the two-host topologies' names)."""
    return run_manifest(run_dir).get("roles", {}).get(role) or role


#: the (file, message) of every warning :func:`_warn_once` logged
_WARNED: set[tuple[str, str]] = set()


class LoadedLog(list):
    """The events of one event log (a list of dicts, :func:`load`); ``damage``: what was wrong
    with the file, as ``analysis.pcap.Packets.damage`` — [] or one ``{"kind": "truncated",
    "line", "message"}`` for a last line cut short."""

    def __init__(self, events=(), damage: list[dict] | None = None):
        super().__init__(events)
        self.damage = damage or []


def load(path: str | Path) -> LoadedLog:
    """The events of the event log ``path`` (module docstring), each with ``"log"`` and the
    endpoints of its ``conn``.  A last line cut short (the app was killed while writing it: the
    last non-empty line is not JSON) is left out, warned about once naming the file and the line,
    and said in the result's ``damage``; a ValueError naming the file and line for any other line
    that is not a JSON object with integer ``"t"`` and ``"event"``, or a file that is not text."""
    try:
        text = Path(path).read_text()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not text; an event log is JSON lines (a run's *.jsonl)") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    damage = _cut_last_line(path, lines)
    events = LoadedLog((_event(path, n, line) for n, line in lines), damage)
    conns = {e["conn"]: _endpoints(e) for e in events
             if e.get("conn") is not None and _endpoints(e) is not None}
    for e in events:
        ep = conns.get(e.get("conn"))
        if ep is not None and _endpoints(e) is None:
            e.update(zip(("src", "sport", "dst", "dport"), ep))
    return events


def _cut_last_line(path: str | Path, lines: list[tuple[int, str]]) -> list[dict]:
    """When the last of the log's non-empty ``lines`` ((number, text)) is not JSON: drop it from
    ``lines``, warn naming the file and the line, and return its damage entry; else []."""
    if not lines:
        return []
    n, last = lines[-1]
    try:
        json.loads(last)
    except json.JSONDecodeError:
        del lines[-1]
        message = (f"cut short: line {n} is {len(last)} characters of an event after the {len(lines)} "
                   "whole ones (the log's end is missing)")
        _warn_once(path, message)
        return [{"kind": "truncated", "line": n, "message": message}]
    return []


def _warn_once(path: str | Path, message: str) -> None:
    """Log the warning ``path: message`` unless this process logged it already (a run's log is
    read by several of its metrics and figures: its damage is said once)."""
    key = (str(Path(path).resolve()), message)
    if key not in _WARNED:
        _WARNED.add(key)
        logging.getLogger(__name__).warning("%s: %s", path, message)


def _event(path: str | Path, n: int, line: str) -> dict:
    """The event on line ``n`` of the log ``path``, with ``"log"`` (the file's name) set when
    absent; a ValueError naming the file and line when it is not one JSON object with integer
    ``"t"`` and ``"event"``."""
    try:
        e = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{n}: not JSON ({exc.msg}); each line must be one JSON object") from None
    if not isinstance(e, dict) or not isinstance(e.get("t"), int) or "event" not in e:
        raise ValueError(f"{path}:{n}: need an object with integer \"t\" (monotonic ns) and "
                         "\"event\"")
    e.setdefault("log", Path(path).name)
    return e


def first(events: list[dict], name: str, where: str | Path) -> dict:
    """The first event called ``name``; ValueError naming ``where`` (the log) when there is none."""
    e = next((e for e in events if e["event"] == name), None)
    if e is None:
        raise ValueError(f"{where}: the log has no {name} event")
    return e


def clock_offset(events: list[dict]) -> int | None:
    """realtime - monotonic (ns) from a ``clock`` event, when a log has one."""
    for e in events:
        if e.get("event") == "clock" and "realtime_minus_monotonic_ns" in e:
            return int(e["realtime_minus_monotonic_ns"])
    return None


def _endpoints(e: dict):
    src, sport, dst, dport = e.get("src"), e.get("sport"), e.get("dst"), e.get("dport")
    for field, which in (("local", 0), ("remote", 1)):
        if isinstance(e.get(field), str) and ":" in e[field]:
            host, _, port = e[field].rpartition(":")
            if which == 0:
                src, sport = host.strip("[]"), int(port)
            else:
                dst, dport = host.strip("[]"), int(port)
    if all(x is None for x in (src, sport, dst, dport)):
        return None
    return src, sport, dst, dport


def assign(events: list[dict], flows: list[tuple]) -> tuple[dict, list]:
    """flows: [(key, t_first_ns, t_last_ns)] with FlowKey ``key``.  Returns
    ({flow index: [events]}, unmatched events)."""
    out, unmatched = {}, []
    for e in events:
        if e.get("event") == "clock":
            continue
        ep = _endpoints(e)
        if ep is not None:
            hits = [i for i, (k, _, _) in enumerate(flows) if k.matches(*ep)]
        else:
            hits = [i for i, (_, a, b) in enumerate(flows) if a <= e["t"] <= b]
            hits = hits if len(hits) == 1 else []
        for i in hits:
            out.setdefault(i, []).append(e)
        if not hits:
            unmatched.append(e)
    return out, unmatched


def by_exchange(events: list[dict], exchanges: list[dict]) -> list[list[dict]]:
    """Split one flow's events over its exchanges (see module docstring)."""
    groups = [[] for _ in exchanges]
    if not exchanges:
        return groups
    spans = [(x["request_first"], max(x.get(k, x["request_first"]) for k in
                                      ("request_last", "response_last", "response_acked")))
             for x in exchanges]

    def best(a: int, b: int) -> int:
        """Exchange overlapping [a, b] the most; else the nearest one."""
        score = [(min(b, hi) - max(a, lo), -max(lo - b, a - hi, 0)) for lo, hi in spans]
        return score.index(max(score))

    by_req: dict = {}
    for e in events:
        rid = e.get("req", e.get("request"))
        if rid is None:
            groups[best(e["t"], e["t"])].append(e)
        else:
            by_req.setdefault((e.get("log"), json.dumps(rid, sort_keys=True)), []).append(e)
    for evs in by_req.values():
        ts = [e["t"] for e in evs]
        groups[best(min(ts), max(ts))].extend(evs)
    return groups


@dataclass(frozen=True)
class Step:
    """One timed step: ``name`` (prep, encode, process, ...) run by the process that wrote the
    log ``log`` (its file name: the host's app), from ``start_ns`` (CLOCK_MONOTONIC) for its
    configured length ``ms``; ``index`` its ``round``, ``seq`` or ``req`` when it has one."""
    name: str
    log: str
    start_ns: int
    ms: float
    index: object = None

    def __post_init__(self):
        if not isinstance(self.start_ns, int) or not isinstance(self.ms, (int, float)) or self.ms < 0:
            raise ValueError(f"{self.log}: step {self.name!r} needs an integer start (monotonic ns) "
                             f"and ms >= 0, got start {self.start_ns!r}, ms {self.ms!r}")

    @property
    def end_ns(self) -> int:
        return self.start_ns + round(self.ms * 1e6)


def steps(events: list[dict]) -> list[Step]:
    """The ``step`` events of ``events`` as :class:`Step` spans, in order of start."""
    out = [Step(str(e.get("name", "step")), str(e.get("log", "")), e.get("start"), e.get("ms"),
                next((e[k] for k in ("round", "seq", "req") if e.get(k) is not None), None))
           for e in events if e.get("event") == "step"]
    return sorted(out, key=lambda s: s.start_ns)


def step_totals(spans: list[Step]) -> dict[str, dict]:
    """Per step name: ``count`` (steps), ``total_ms`` (the sum of their configured lengths
    ``ms``) and ``logs`` (the logs, i.e. hosts' apps, that ran them)."""
    out: dict[str, dict] = {}
    for s in spans:
        t = out.setdefault(s.name, {"count": 0, "total_ms": 0.0, "logs": []})
        t["count"] += 1
        t["total_ms"] = round(t["total_ms"] + s.ms, 6)
        if s.log not in t["logs"]:
            t["logs"].append(s.log)
    return out
