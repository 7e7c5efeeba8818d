"""Base class of the testbed's topologies, a Mininet ``Topo`` with declared, overridable
parameters, and their registry ``TOPOLOGIES``.

A topology is a ``TestbedTopo`` subclass with a ``name``, registered where it is defined::

    @TOPOLOGIES.register
    class Chain(TestbedTopo):
        name = "chain"
        ...

A topology declares ``params``: name → (default, help).  ``testbed topo up NAME --set KEY=VALUE``
overrides them; an unknown key is an error naming the allowed ones, and a bad value (any
ValueError of ``build``) one naming the parameter and its value (``TestbedTopo.culprits``).  It
declares its ``roles`` (which host is the client, which the server); ``addresses(host)`` are the
IPv4 addresses a host gets.  Every link has a name and one ``LinkSpec`` per direction:
``addLink(a, b, name=..., spec_ab=..., spec_ba=...)`` with ``a`` on the client's side, so a→b
is the link's ``up`` direction and b→a its ``down``.  ``links`` overrides any LinkSpec field
of any link without touching the topology: ``{"LINK.DIR.FIELD": "VALUE"}``,
e.g. ``{"access2.up.queue": "50", "bottleneck.down.jitter": "2ms"}`` (FIELD: ``LINK_FIELDS``;
an unimpaired link becomes an impaired one).  Hosts take ``router=True`` (IP forwarding on),
``routes=[(prefix, via), ...]``, ``sysctls`` and ``commands`` (argv lists run in the host after
its routes, e.g. source-address routing rules).  Links without a spec (``addLink(a, b)``) are unimpaired veths.

A topology may declare default ``schedules`` (links that change during a run): ``"LINK.DIR"`` →
a schedule as a schedule file holds it (``Schedule.from_dict``: ``step``, ``outage``, ``event``,
``trace``; a trace ``file`` relative to the topology's module).  The first ``links`` schedule
item on that direction (``schedule``, ``trace``, ``down``, ``FIELD=VALUE@MOMENT``) replaces the
default, later ones add to it; ``schedule=none`` removes it.

``summary()`` is the one line ``testbed topo show`` and ``list`` print for an instance: the path
with the parameters and link overrides in effect.  By default it is the class's ``description``
followed by what was set ("(as set: rate=20mbit)"); a topology whose line states numbers derives
it from its built links instead (``link_phrase``: rates, RTT, jitter, loss and what the link's
schedules change), so that ``--set loss_down=0%`` no longer leaves "14% loss" in it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar, Mapping

from mininet.topo import Topo

from testbed.spec import plugins
from testbed.spec.linkspec import Bernoulli, DropList, GilbertElliott, LinkSpec
from testbed.spec.schedule import Schedule, parse_inline
from testbed.spec.registry import Registry
from testbed.spec.units import counted, format_rate, format_time, written

DIRECTIONS = {"up": "spec_ab", "down": "spec_ba"}
# LinkSpec fields a link override may set (``queue`` takes packets '50' or bytes '64KB'), and
# the schedule's (``LinkSpec.with_override``: schedule=FILE, trace=FILE, down=5s+2s, rate=10mbit@3s).
LINK_FIELDS = ("rate", "delay", "jitter", "reorder", "loss", "queue", "queue_packets",
               "queue_bytes", "overhead", "mtu", "schedule", "trace", "down")


class TestbedTopo(Topo):
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    chapter_case: ClassVar[str] = ""
    params: ClassVar[dict[str, tuple[Any, str]]] = {}
    roles: ClassVar[dict[str, str]] = {"client": "client", "server": "server"}
    #: the absolute path of the file the topology was loaded from when it was given as a path
    #: (``topologies.topology_class("./chain.py")``); "" when it was looked up by name
    source: ClassVar[str] = ""
    #: default schedules, "LINK.DIR" → a schedule's table (see the module docstring)
    schedules: ClassVar[dict[str, Mapping[str, Any]]] = {}

    def __init__(self, links: Mapping[str, Any] | None = None, **overrides: Any):
        self.values = self.resolve(overrides)
        self.named: dict[str, dict] = {}        # link name → its Mininet link info
        try:
            super().__init__(**self.values)
        except ValueError as exc:
            if not overrides:
                raise
            given = ", ".join(f"{k}={written(v)}" for k, v in self.culprits(overrides).items())
            raise ValueError(f"topology {self.name!r} parameter {given}: {exc}") from None
        #: "LINK.DIR" → where its schedule comes from: "topology" (a default) or "links"
        self.schedule_from: dict[str, str] = {}
        base = Path(sys.modules[type(self).__module__].__file__ or ".").parent
        for key, table in self.schedules.items():
            info, slot = self._direction(key)
            try:
                sch = Schedule.from_dict(table, base)
                info[slot] = (info.get(slot) or LinkSpec()).replace(schedule=sch)
            except ValueError as exc:
                raise ValueError(f"topology {self.name!r}: default schedule of {key}: {exc}") from None
            self.schedule_from[key] = "topology"
        self.link_overrides = dict(links or {})
        for key, value in self.link_overrides.items():
            self.override(key, value)

    def _direction(self, key: str) -> tuple[dict, str]:
        """The link info and its spec key (spec_ab, spec_ba) of ``LINK.DIR``."""
        link, _, direction = key.partition(".")
        if link not in self.named:
            raise ValueError(f"topology {self.name!r} has no link {link!r}; links: {', '.join(self.named)}")
        if direction not in DIRECTIONS:
            raise ValueError(f"{key!r}: direction {direction!r}; allowed: up, down")
        return self.named[link], DIRECTIONS[direction]

    def addLink(self, node1, node2, port1=None, port2=None, key=None, name: str | None = None,
                **opts: Any):
        if not name or name in self.named:
            raise LookupError(f"topology {self.name!r}: every link needs a unique name ({name!r})")
        key = super().addLink(node1, node2, port1, port2, key, **opts)
        self.named[name] = self.linkInfo(node1, node2, key)
        return key

    def override(self, key: str, value: Any) -> None:
        """Set one field of one direction of a named link: ``key`` is ``LINK.DIR.FIELD``."""
        parts = key.split(".")
        if len(parts) != 3:
            raise ValueError(f"link override {key!r}: expected LINK.DIR.FIELD, e.g. "
                             f"{next(iter(self.named), 'bottleneck')}.down.loss")
        link, direction, fld = parts
        if link not in self.named:
            raise ValueError(f"topology {self.name!r} has no link {link!r}; links: {', '.join(self.named)}")
        if direction not in DIRECTIONS:
            raise ValueError(f"link override {key!r}: direction {direction!r}; allowed: up, down")
        if fld not in LINK_FIELDS:
            raise ValueError(f"link override {key!r}: field {fld!r}; allowed: {', '.join(LINK_FIELDS)}")
        info, slot = self._direction(f"{link}.{direction}")
        current = info.get(slot) or LinkSpec()
        try:
            if fld == "schedule" and str(value).strip().lower() == "none":
                info[slot] = current.replace(schedule=None)
                self.schedule_from.pop(f"{link}.{direction}", None)
                return
            extra = parse_inline(fld, value)
            if extra is None:
                info[slot] = current.with_override(fld, value)
                return
            if self.schedule_from.get(f"{link}.{direction}") != "links":   # replaces a default
                current = current.replace(schedule=None)
            info[slot] = current.replace(schedule=(current.schedule or Schedule()).merge(extra))
            self.schedule_from[f"{link}.{direction}"] = "links"
        except ValueError as exc:
            raise ValueError(f"link override {key}={written(value)}: {exc}") from None

    def summary(self) -> str:
        """One line: this path as built (see the module docstring).  The default: the class's
        ``description`` and, when something differs from the defaults, what was set."""
        given = self.as_set()
        return self.description + (f" (as set: {', '.join(given)})" if given else "")

    def as_set(self) -> list[str]:
        """``KEY=VALUE`` of every parameter whose value is not its default, then
        ``LINK.DIR.FIELD=VALUE`` of every link override, as given."""
        defaults = {k: d for k, (d, _help) in self.params.items()}
        return ([f"{k}={v}" for k, v in self.values.items() if v != defaults.get(k)]
                + [f"{k}={v}" for k, v in self.link_overrides.items()])

    def link_phrase(self, name: str, a: str | None = None, b: str | None = None,
                    rtt: bool = True, no_loss: bool = False) -> str:
        """Link ``name`` in words, from its specs as built (parameters and overrides applied):
        its rate ("333 Mbit/s", or "20 Mbit/s up, 100 Mbit/s down"), RTT (both directions'
        delays; ``rtt=False`` leaves it out), jitter and loss when there are any ("14% loss
        server→client", ``a``/``b`` naming the up direction's ends, default its hosts; with
        ``no_loss`` "no loss" when there is none) and what its schedules change during a run."""
        info = self.named[name]
        a, b = a or info["node1"], b or info["node2"]
        up, down = (info.get(DIRECTIONS[d]) or LinkSpec() for d in ("up", "down"))
        parts = [pair_phrase(format_rate(up.rate, words=True), format_rate(down.rate, words=True))]
        if rtt:
            parts.append(f"{format_time(up.delay + down.delay, words=True)} RTT")
        if up.jitter and down.jitter:
            jitter = pair_phrase(format_time(up.jitter, words=True), format_time(down.jitter, words=True))
            parts.append(f"jitter up to {jitter}")
        elif up.jitter or down.jitter:      # one direction: "jitter up to 2 ms sgw→cgw", not "0 s up"
            src, dst = (a, b) if up.jitter else (b, a)
            parts.append(f"jitter up to {format_time(up.jitter or down.jitter, words=True)} {src}→{dst}")
        loss = directed_phrase(loss_words(up.loss), loss_words(down.loss), a, b)
        if loss or no_loss:
            parts.append(loss or "no loss")
        changes = schedule_phrase(up, down)
        return ", ".join(parts) + (f"; changes: {changes}" if changes else "")

    def link_table(self) -> list[dict[str, Any]]:
        """Every named link: its ends, and per direction (``up``: client side → server side,
        ``down``) the hosts, the spec (None: unimpaired) and its description."""
        out = []
        for name, info in self.named.items():
            a, b = info["node1"], info["node2"]
            rec: dict[str, Any] = {"name": name, "a": a, "b": b}
            for d, (src, dst) in (("up", (a, b)), ("down", (b, a))):
                s = info.get(DIRECTIONS[d])
                rec[d] = {"from": src, "to": dst, "spec": s.to_dict() if s else None,
                          "describe": s.describe() if s else "unimpaired",
                          "schedule": None if s is None or s.schedule is None else {
                              "from": self.schedule_from.get(f"{name}.{d}"),
                              "items": s.schedule.describe_items()}}
            rec["medium"] = info["medium"].to_dict() if info.get("medium") is not None else None
            out.append(rec)
        return out

    @classmethod
    def resolve(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = set(overrides) - set(cls.params)
        if unknown:
            allowed = ", ".join(f"{k} (default {v[0]})" for k, v in cls.params.items())
            raise ValueError(f"topology {cls.name!r} has no parameter(s) {sorted(unknown)}; "
                             f"allowed: {allowed}")
        values = {k: default for k, (default, _help) in cls.params.items()}
        values.update(overrides)
        return values

    @classmethod
    def culprits(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        """The given parameters a failed ``build`` comes from: the first that fails on its own
        (the others at their defaults), else all of them (a combination failed)."""
        if len(overrides) > 1:
            for key, value in overrides.items():
                try:
                    cls(**{key: value})
                except ValueError:
                    return {key: value}
        return dict(overrides)

    def addresses(self, host: str) -> list[str]:
        """The IPv4 addresses ``host`` gets (without prefix length): its own ``ip`` and those its
        links give its ends (``params1``/``params2``), known before anything is brought up."""
        ips = [self.nodeInfo(host).get("ip")]
        for a, b, info in self.links(sort=True, withInfo=True):
            ips += [info.get(side, {}).get("ip") for side, end in (("params1", a), ("params2", b))
                    if end == host]
        return [ip.split("/")[0] for ip in ips if ip]

    def link_specs(self) -> list[tuple[str, str, LinkSpec | None, LinkSpec | None]]:
        """(a, b, spec a→b, spec b→a) for every link."""
        return [(a, b, info.get("spec_ab"), info.get("spec_ba"))
                for a, b, info in self.links(sort=True, withInfo=True)]

    def draws_at_random(self) -> bool:
        """True when a frame anywhere in the topology meets a random draw: a link direction's
        (``LinkSpec.draws_at_random``) or a shared medium's backoff.  Without one, two runs of
        the same spec differ only by the hosts' scheduling."""
        return any(spec is not None and spec.draws_at_random
                   for _a, _b, *specs in self.link_specs() for spec in specs) or any(
            info.get("medium") is not None and info["medium"].draws_at_random for info in self.named.values())

    def scheduled_links(self) -> list[str]:
        """``LINK.DIR`` of every direction with a schedule (steps, outages, per-frame events or a
        trace).  A schedule starts at a run's start, so such a topology cannot be kept up for
        another run."""
        return [f"{name}.{d}" for name, info in self.named.items() for d, slot in DIRECTIONS.items()
                if info.get(slot) is not None and info[slot].schedule is not None]

    def link_records(self) -> list[dict[str, Any]]:
        """Every link as recorded in run metadata: ends, both specs, shared medium if any."""
        records = []
        names = {id(info): name for name, info in self.named.items()}
        for a, b, info in self.links(sort=True, withInfo=True):
            specs = (info.get("spec_ab"), info.get("spec_ba"))
            medium = info.get("medium")
            records.append({
                "name": names.get(id(info)), "a": a, "b": b,
                "a_to_b": specs[0].to_dict() if specs[0] else None,
                "b_to_a": specs[1].to_dict() if specs[1] else None,
                "medium": medium.to_dict() if medium is not None else None,
                "describe": [(s.describe() if s else "unimpaired")
                             + (f", shared air {medium.name!r}" if medium is not None else "")
                             for s in specs]})
        return records


# --- a path in words (``TestbedTopo.summary``) ---------------------------------------------

def pair_phrase(up: str, down: str) -> str:
    """One value for both directions, or "UP up, DOWN down"."""
    return up if up == down else f"{up} up, {down} down"


def loss_words(loss: Any) -> str:
    """A direction's loss model in words ("14% loss", "2% mean Gilbert–Elliott loss"; "" for none)."""
    if isinstance(loss, Bernoulli):
        return f"{100 * loss.p:.4g}% loss" if loss.p else ""
    if isinstance(loss, GilbertElliott):
        return f"{100 * loss.mean_loss:.3g}% mean Gilbert–Elliott loss"
    if isinstance(loss, DropList):
        return f"{len(loss.indices)} listed frame(s) dropped" if loss.indices else ""
    return str(loss)


def directed_phrase(up: str, down: str, a: str, b: str) -> str:
    """What holds in each direction of a link a–b ("" for neither): "X each way", "X a→b",
    "X b→a" or both."""
    if up and up == down:
        return f"{up} each way"
    return ", ".join(f"{text} {src}→{dst}" for text, src, dst in ((up, a, b), (down, b, a)) if text)


def schedule_phrase(up: LinkSpec, down: LinkSpec) -> str:
    """What the two directions' schedules change during a run, in the order of their moments:
    rate steps ("down 20 → 4 Mbit/s at 3 s"), other steps, outages ("both directions out for
    0.5 s at 5 s" when the two have the same one), then events and traces; "" without any."""
    def moment(m) -> tuple[float, str]:
        if m.kind == "time":
            return m.value, format_time(m.value, words=True)
        return float("inf"), f"{int(m.value)} {'frames' if m.kind == 'frames' else 'B'}"

    items: list[tuple[float, str]] = []
    outages: dict[str, list] = {}
    tail: list[str] = []
    for d, s in (("up", up), ("down", down)):
        sch = s.schedule
        if sch is None:
            continue
        rate = s.rate
        for step in sch.steps:
            key, when = moment(step.at)
            changes = dict(step.changes)
            if "rate" in changes:
                new = changes.pop("rate")
                old_t, new_t = format_rate(rate, words=True), format_rate(new, words=True)
                unit = new_t.rpartition(" ")[2]
                if old_t.endswith(" " + unit) and new is not None:
                    old_t = old_t.rpartition(" ")[0]
                items.append((key, f"{d} {old_t} → {new_t} at {when}"))
                rate = new
            if changes:
                rest = " ".join(part for part in step.describe().split() if not part.startswith("rate="))
                items.append((key, f"{d} {rest} at {when}"))
        outages[d] = list(sch.outages)
        if sch.events:
            tail.append(f"{counted(len(sch.events), 'per-frame event')} {d}")
        if sch.trace is not None:
            tail.append(f"{d} follows trace {sch.trace.source or '(inline)'} "
                        f"({format_rate(sch.trace.mean_rate, words=True)} mean)")
    both = [o for o in outages.get("up", []) if o in outages.get("down", [])]
    for d, found in outages.items():
        for o in found:
            if o in both and d == "down":
                continue
            key, when = moment(o.down)
            who = "both directions" if o in both else d
            items.append((key, f"{who} out for {format_time(o.duration, words=True)} at {when}"
                               + (" (held)" if o.hold else "")))
    return ", ".join([text for _key, text in sorted(items, key=lambda kv: kv[0])] + tail)


def spec(rate: Any = None, delay: Any = 0, loss: Any = 0, queue: Any = None, jitter: Any = None,
         **extra: Any) -> LinkSpec:
    """A LinkSpec from human units: ``LinkSpec.parse`` with rate, delay, loss, queue positional."""
    return LinkSpec.parse(rate=rate, delay=delay, loss=loss, queue=queue, jitter=jitter, **extra)


#: every topology by name: the built-ins (``topologies/__init__.py`` imports their modules) and
#: the user's own (``testbed.spec.plugins``)
TOPOLOGIES: Registry[type[TestbedTopo]] = Registry("topology", also="a path to a .py file that registers one")
TOPOLOGIES.add_loader(plugins.load)
