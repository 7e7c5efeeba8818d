"""``Schedule``: how one direction of a link changes during a run (values only, no model).

A schedule belongs to one ``LinkSpec`` (``LinkSpec.schedule``) and holds:

- ``steps`` (``Step``): from a moment on, set LinkSpec fields (``STEP_FIELDS``: rate, delay,
  jitter, reorder, loss, queue_packets, queue_bytes; ``queue`` is read as in ``LinkSpec.parse``);
- ``outages`` (``Outage``): from ``down`` for ``duration`` seconds the link sends nothing; frames
  arriving meanwhile are dropped (verdict ``outage``) or, with ``hold``, kept and sent from ``up``;
- ``events`` (``Event``): chosen frames (the k-th frame of at least ``min_bytes`` and the
  ``count - 1`` next ones, or the frames arriving in a time window) get ``delay`` more or are
  dropped (with ``copies_until``, their TCP retransmissions too until that moment);
- ``trace`` (``Trace``): Mahimahi delivery opportunities that replace ``rate``.

Moments (``Moment``) are counted from the run's origin, which the emulator is given explicitly:
``3s``/``250ms`` (seconds after the origin), ``10frames`` (once 10 frames of this direction have
arrived since the origin) or ``1MB``/``1500B`` (once that many bytes have).  What the emulator
does with each item, stage by stage, is written in ``testbed.emulator.direction``.

Files: TOML or JSON with the keys of ``Schedule.to_dict`` (``step``, ``outage``, ``event``,
``trace``), Mahimahi text for traces (``Trace.parse``), and the inline forms of ``--link``
(``parse_inline``: ``rate=10mbit@3s``, ``down=5s+2s``, ``down=5s+2s,hold``).  Bad input raises
``ValueError`` with one line naming the file and line when there is one.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from testbed.spec.lossmodel import Bernoulli, loss_from_dict, loss_to_dict, parse_loss
from testbed.spec.units import (SIZE_UNITS, TIME_UNITS, delay_as_written, format_rate, format_time, parse_bool,
                                parse_count, parse_delay, parse_link_rate, parse_queue, parse_size,
                                parse_time)

#: the ``links.LINK.DIR`` fields whose value is a schedule (``parse_inline``); the others are
#: LinkSpec fields, which take a step ``VALUE@MOMENT`` too
SCHEDULE_FIELDS = ("schedule", "trace", "down")
#: LinkSpec fields a step may set (overhead and mtu stay fixed for a run)
STEP_FIELDS = ("rate", "delay", "jitter", "reorder", "loss", "queue_packets", "queue_bytes")
#: what a step is written with: those fields, and queue (a count or a size, as a link's)
STEP_INPUT = STEP_FIELDS + ("queue",)
#: Mahimahi's delivery opportunity (``LinkQueue::PACKET_SIZE``): the TUN device's 4-byte packet
#: information header plus a 1500-byte IP packet
OPPORTUNITY_BYTES = 1504
TUN_HEADER = 4
FRAME_UNITS = ("frames", "frame")


@dataclass(frozen=True)
class Moment:
    """A moment of a direction: ``kind`` "time" (``value`` s after the origin), "frames" (once
    ``value`` frames have arrived since the origin) or "bytes" (once ``value`` bytes have)."""
    kind: str
    value: float | int

    def __post_init__(self):
        if self.kind not in ("time", "frames", "bytes"):
            raise ValueError(f"moment kind {self.kind!r}; allowed: time, frames, bytes")
        if not (isinstance(self.value, (int, float)) and math.isfinite(self.value) and self.value >= 0):
            raise ValueError(f"moment {self.value!r} must be a finite number >= 0")
        if self.kind != "time" and self.value != int(self.value):
            raise ValueError(f"moment {self.value!r} {self.kind} must be whole")

    @classmethod
    def parse(cls, value: Any) -> "Moment":
        """3, 3.0, '3s', '250ms' (time); '10frames'; '1MB', '1500B' (bytes)."""
        if isinstance(value, Moment):
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"moment {value!r}: give a time (3s, 250ms), a frame count "
                             "(10frames) or a byte count (1MB, 1500B)")
        if not isinstance(value, str):
            return cls("time", float(value))
        match = re.match(r"^\s*(-?[0-9.eE+-]*?)\s*([A-Za-z]*)\s*$", value)
        unit = match.group(2).lower() if match else ""
        if match and match.group(1).startswith("-"):
            raise ValueError(f"moment {value!r} is negative; moments count from the run's origin (>= 0)")
        if unit in FRAME_UNITS:
            number = float(match.group(1))
            if number != int(number):
                raise ValueError(f"moment {value!r}: a frame count must be whole")
            return cls("frames", int(number))
        if unit in SIZE_UNITS:
            return cls("bytes", parse_size(value))
        if unit in TIME_UNITS or not unit:
            return cls("time", parse_time(value))
        raise ValueError(f"moment {value!r}: unknown unit {unit!r}; allowed: {', '.join(TIME_UNITS)} "
                         f"(time), frames, {', '.join(SIZE_UNITS)} (bytes)")

    def __str__(self) -> str:
        if self.kind == "time":
            return f"{self.value!r}s"
        return f"{int(self.value)}{'frames' if self.kind == 'frames' else 'B'}"


def _step_value(name: str, value: Any) -> Any:
    """One step field from human units, as ``LinkSpec.parse`` reads it."""
    if name == "rate":
        if value == "":             # LinkSpec.parse's unshaped, but a step gives a rate or says so
            raise ValueError("rate '': give a rate (e.g. 4mbit) or 'unshaped'")
        return parse_link_rate(value)
    if name in ("delay", "jitter"):
        return parse_delay(value, name)
    if name == "reorder":
        return parse_bool(value)
    if name == "loss":
        return loss_from_dict(value) if isinstance(value, Mapping) else parse_loss(value)
    if value is None:
        return None
    number = parse_count(value, name) if name == "queue_packets" else parse_size(value)
    if number < 1:
        raise ValueError(f"{name} {value!r} must be >= 1")
    return number


@dataclass(frozen=True)
class Step:
    """From ``at`` on, the fields in ``changes`` (name → value in LinkSpec's base units, names
    from ``STEP_FIELDS``) replace the direction's values; fields not named keep theirs."""
    at: Moment
    changes: tuple[tuple[str, Any], ...]

    def __post_init__(self):
        if not self.changes:
            raise ValueError(f"step at {self.at}: sets nothing; give one of {', '.join(STEP_INPUT)}")
        for name, _ in self.changes:
            if name not in STEP_FIELDS:
                raise ValueError(f"step at {self.at}: unknown field {name!r}; allowed: {', '.join(STEP_INPUT)}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Step":
        d = dict(d)
        if "at" not in d:
            raise ValueError("a step needs 'at' (a moment: 3s, 10frames, 1MB) and fields from "
                             f"{', '.join(STEP_INPUT)}")
        at = Moment.parse(d.pop("at"))
        unknown = sorted(set(d) - set(STEP_INPUT))
        if unknown:
            raise ValueError(f"step at {at}: unknown field(s) {unknown}; allowed: at, {', '.join(STEP_INPUT)}")
        changes: dict[str, Any] = {}
        for name, value in d.items():
            try:
                if name == "queue":
                    changes["queue_packets"], changes["queue_bytes"] = parse_queue(value)
                else:
                    changes[name] = _step_value(name, value)
            except ValueError as exc:     # as LinkSpec names a step whose values it refuses
                raise ValueError(f"schedule step at {at}: {exc}") from None
        return cls(at, tuple(sorted(changes.items())))

    def to_dict(self) -> dict[str, Any]:
        return {"at": str(self.at), **{k: loss_to_dict(v) if k == "loss" else v for k, v in self.changes}}

    def describe(self) -> str:
        parts = []
        for k, v in self.changes:
            if k == "rate":
                parts.append(f"rate={format_rate(v)}")
            elif k in ("delay", "jitter"):
                parts.append(f"{k}={format_time(v)}")
            elif k == "loss":
                parts.append(f"loss={v.p:g}" if isinstance(v, Bernoulli) else f"loss={v}")
            else:
                parts.append(f"{k}={v}")
        return " ".join(parts)


@dataclass(frozen=True)
class Outage:
    """From ``down`` for ``duration`` s the direction sends nothing (up = down + duration).
    hold False: frames arriving in [down, up) are dropped (verdict outage); True: they are
    kept in the bottleneck queue (its limits apply) and sent from ``up``."""
    down: Moment
    duration: float
    hold: bool = False

    def __post_init__(self):
        if not (isinstance(self.duration, (int, float)) and math.isfinite(self.duration) and self.duration > 0):
            raise ValueError(f"outage at {self.down}: duration {self.duration!r} must be > 0 s")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Outage":
        d = dict(d)
        unknown = sorted(set(d) - {"down", "duration", "hold"})
        if unknown or "down" not in d or "duration" not in d:
            raise ValueError("an outage takes down (a moment), duration (e.g. 2s) and hold (true/false)"
                             + (f"; unknown field(s) {unknown}" if unknown else ""))
        return cls(Moment.parse(d["down"]), parse_time(d["duration"]), parse_bool(d.get("hold", False)))

    def to_dict(self) -> dict[str, Any]:
        return {"down": str(self.down), "duration": self.duration, "hold": self.hold}


@dataclass(frozen=True)
class Event:
    """A per-frame event.  Selector, exactly one of:
    frame: the ``frame``-th (1-based) frame of this direction since the origin among those of at
        least ``min_bytes`` bytes, and the ``count - 1`` such frames after it;
    start, end: the frames (of at least ``min_bytes``) arriving in [start, end) s after the origin.
    Action, exactly one of: ``delay`` s more on top of the frame's delivery time, or ``drop``.
    ``copies_until`` (only with ``drop``; s after the origin, like start/end): the dropped
    frames' TCP bytes stay lost until then: a later frame of this direction with the same IPv4
    TCP 4-tuple (addresses and ports) whose sequence range overlaps a dropped frame's payload
    is dropped too (verdict ``dropped_event``) while it arrives before that moment.  Only
    IPv4/TCP frames are recognised so; a frame that is not (QUIC: its retransmissions are new
    encrypted packets that nothing on the link can tie to the lost one) is matched only by the
    selector."""
    frame: int | None = None
    count: int = 1
    min_bytes: int = 0
    start: float | None = None
    end: float | None = None
    delay: float = 0.0
    drop: bool = False
    copies_until: float | None = None

    def __post_init__(self):
        window = self.start is not None or self.end is not None
        if (self.frame is None) == (not window):
            raise ValueError("an event selects frames either by frame (k-th frame, 1-based) or by "
                             "a window (start and end), not both or neither")
        if self.frame is not None and self.frame < 1:
            raise ValueError(f"event frame {self.frame!r} must be >= 1 (the first frame is 1)")
        if self.count < 1 or self.min_bytes < 0:
            raise ValueError(f"event count {self.count!r} must be >= 1 and min_bytes {self.min_bytes!r} >= 0")
        if window and not (self.start is not None and self.end is not None and 0 <= self.start < self.end):
            raise ValueError(f"event window [{self.start}, {self.end}) must have 0 <= start < end")
        if (self.delay > 0) == self.drop or self.delay < 0:
            raise ValueError("an event either delays (delay > 0, e.g. 45ms) or drops (drop = true) its frames")
        if self.copies_until is not None:
            if not self.drop:
                raise ValueError("event copies_until (drop the lost TCP bytes' copies until a moment) "
                                 "needs drop = true; a delaying event has no copies to drop")
            if not (isinstance(self.copies_until, (int, float)) and math.isfinite(self.copies_until)
                    and self.copies_until >= 0):
                raise ValueError(f"event copies_until {self.copies_until!r} must be a time >= 0 s "
                                 "after the origin (e.g. 7s)")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Event":
        known = ("frame", "count", "min_bytes", "start", "end", "delay", "drop", "copies_until")
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"event: unknown field(s) {unknown}; allowed: {', '.join(known)}")
        kw: dict[str, Any] = {k: parse_count(d[k], f"event {k}") for k in ("frame", "count") if k in d}
        if "min_bytes" in d:
            kw["min_bytes"] = parse_size(d["min_bytes"])
        for k in ("start", "end", "copies_until"):
            if k in d:
                kw[k] = parse_time(d[k])
        if "delay" in d:
            kw["delay"] = parse_delay(d["delay"])
        if "drop" in d:
            kw["drop"] = parse_bool(d["drop"])
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = ({"frame": self.frame, "count": self.count} if self.frame is not None
                               else {"start": self.start, "end": self.end})
        out["min_bytes"] = self.min_bytes
        out.update({"drop": True} if self.drop else {"delay": self.delay})
        if self.copies_until is not None:
            out["copies_until"] = self.copies_until
        return out

    def describe(self) -> str:
        sel = (f"frame {self.frame}" + (f"..{self.frame + self.count - 1}" if self.count > 1 else "")
               if self.frame is not None else f"frames in [{self.start!r}s, {self.end!r}s)")
        if self.min_bytes:
            sel += f" of >= {self.min_bytes} B"
        action = "drop" if self.drop else f"+{format_time(self.delay)}"
        if self.copies_until is not None:
            # copies are recognised by their TCP sequence numbers: a UDP frame has none (QUIC's
            # resends are new encrypted packets), so there only the frames selected are dropped
            action += f", and until {self.copies_until!r}s TCP resends of its bytes (UDP: the frame only)"
        return f"{sel}: {action}"


#: the latest timestamp a trace may hold, ms (about 11.6 days): far beyond any recording, and
#: a loop's nanoseconds stay exact in the emulators' 64-bit arithmetic; a larger one is a
#: damaged line (a digit run), not a trace
MAX_TRACE_MS = 10**9


def _beyond_max(ms) -> str:
    return (f"timestamp {ms} ms is beyond {MAX_TRACE_MS:,} ms (about 11.6 days), the longest a "
            "trace's loop may last")


@dataclass(frozen=True)
class Trace:
    """Mahimahi delivery opportunities: ``ms`` holds one integer millisecond per opportunity of
    ``OPPORTUNITY_BYTES`` bytes, nondecreasing (repeats: several opportunities in that ms), the
    last one > 0.  Time 0 is the origin; the trace loops with period = the last timestamp, so
    opportunity n is at ``(n // len(ms)) * period + ms[n % len(ms)]`` ms.  ``source``: where it
    was read from (a label).  For backends that cannot replay opportunities (netem, which
    applies a trace as rate steps: ``testbed.backends.tc_schedule``): ``resolution``, the length
    in s of the windows whose rates become the steps (a whole number of ms), and ``exact``,
    True to have such a backend refuse the trace instead (the userspace emulator replays it
    exactly either way)."""
    ms: tuple[int, ...]
    source: str = ""
    exact: bool = False
    resolution: float = 0.1

    def __post_init__(self):
        where = self.source or "trace"
        if not self.ms:
            raise ValueError(f"{where}: empty trace: no timestamps (one integer ms per line)")
        prev = 0
        for i, t in enumerate(self.ms):
            if isinstance(t, bool) or not isinstance(t, int) or t < prev:
                raise ValueError(f"{where}: timestamp {i + 1} ({t!r}) " + (
                    f"goes backwards (after {prev})" if isinstance(t, int) else "is not a whole ms")
                    + "; timestamps are nondecreasing whole ms >= 0")
            prev = t
        if self.ms[-1] == 0:
            raise ValueError(f"{where}: the trace lasts 0 ms (its last timestamp is its period); it must be > 0")
        if self.ms[-1] > MAX_TRACE_MS:
            raise ValueError(f"{where}: {_beyond_max(self.ms[-1])}")
        if not (isinstance(self.resolution, (int, float)) and self.resolution >= 1e-3
                and abs(self.resolution * 1e3 - round(self.resolution * 1e3)) < 1e-6):
            raise ValueError(f"{where}: resolution {self.resolution!r} s must be a whole number of "
                             "ms, at least 1ms (e.g. 100ms)")

    @property
    def period_ms(self) -> int:
        return self.ms[-1]

    @property
    def mean_rate(self) -> float:
        """bit/s of the whole loop: opportunities × 1504 B × 8 / period (Mahimahi's own bytes)."""
        return len(self.ms) * OPPORTUNITY_BYTES * 8 / (self.period_ms / 1e3)

    def opportunities_before(self, t_ms: int) -> int:
        """Opportunities at times < ``t_ms`` (looping), counted from the origin: every one of the
        whole loops that end before ``t_ms``, then those of the next loop up to ``t_ms`` - 1 (a
        loop's last opportunities are at its period, so they belong to the loop before it)."""
        if t_ms <= 0:
            return 0
        loops, rest = divmod(t_ms - 1, self.period_ms)
        return loops * len(self.ms) + bisect_right(self.ms, rest)

    @classmethod
    def parse(cls, text: str, source: str = "trace") -> "Trace":
        """Mahimahi's format: one integer ms per line; blank lines only at the end."""
        lines = text.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        ms: list[int] = []
        for no, line in enumerate(lines, 1):
            word = line.strip()
            if not re.fullmatch(r"[0-9]+", word):
                raise ValueError(f"{source}:{no}: {word!r} is not a whole number of ms "
                                 "(one nondecreasing integer ms per line, Mahimahi's format)")
            t = int(word)
            if t > MAX_TRACE_MS:
                raise ValueError(f"{source}:{no}: {_beyond_max(word)}")
            if ms and t < ms[-1]:
                raise ValueError(f"{source}:{no}: timestamp {t} goes backwards (after {ms[-1]}); "
                                 "timestamps are nondecreasing")
            ms.append(t)
        if ms and ms[-1] == 0:
            raise ValueError(f"{source}:{len(lines)}: the trace lasts 0 ms (its last timestamp is its "
                             "period); it must be > 0")
        return cls(tuple(ms), source)

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"trace {path}: cannot read it ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ValueError(f"trace {path}: not text; a trace is one delivery time in ms per line "
                             "(Mahimahi's format)") from None
        try:
            return cls.parse(text, str(path))
        except ValueError as exc:
            if Path(path).suffix.lower() not in (".toml", ".json"):
                raise
            try:                    # a schedule file given where a trace goes?
                Schedule.load(path)
            except ValueError:
                raise exc from None     # neither: the trace's own error
            raise ValueError(f"trace {path}: a schedule file, not a trace (one delivery time in ms "
                             "per line, Mahimahi's format); a schedule goes in "
                             "--link LINK.DIR.schedule=FILE") from None

    def to_text(self) -> str:
        return "".join(f"{t}\n" for t in self.ms)

    def to_dict(self) -> dict[str, Any]:
        """``source``, ``ms``; ``exact`` and ``resolution`` only when not the defaults."""
        out: dict[str, Any] = {"source": self.source, "ms": list(self.ms)}
        if self.exact:
            out["exact"] = True
        if self.resolution != Trace.resolution:
            out["resolution"] = self.resolution
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base: Path | None = None) -> "Trace":
        """``{"ms": [...], "source": ...}`` or ``{"file": PATH}`` (relative to ``base``), and
        optionally ``exact`` (true/false) and ``resolution`` (e.g. "100ms")."""
        unknown = sorted(set(d) - {"ms", "source", "file", "exact", "resolution"}) if isinstance(d, Mapping) else []
        if not isinstance(d, Mapping) or unknown or not ("ms" in d or "file" in d) \
                or not isinstance(d.get("file", ""), str) or not isinstance(d.get("ms", []), (list, tuple)):
            raise ValueError("trace takes file (a Mahimahi trace, relative to the schedule) or ms "
                             "(a list of whole ms), and exact (true/false) and resolution (e.g. "
                             f"100ms){'; unknown field(s) ' + str(unknown) if unknown else ''}")
        trace = cls.load((base or Path(".")) / d["file"]) if "file" in d else cls(tuple(d["ms"]), d.get("source", ""))
        extra: dict[str, Any] = {}
        if "exact" in d:
            extra["exact"] = parse_bool(d["exact"])
        if "resolution" in d:
            extra["resolution"] = parse_time(d["resolution"])
        return dataclasses.replace(trace, **extra) if extra else trace


@dataclass(frozen=True)
class Item:
    """One item of a schedule as a run reports it: ``text`` (one line, :meth:`Schedule.describe_items`),
    ``records`` — the (kind, index) of the ``ScheduleChange`` records that together say it took
    effect (an outage: its down and its up; a trace: any record of its, all ("trace", 0)) — and
    ``moment``, its first moment in s from the origin when it is tied to time, else None."""
    text: str
    records: frozenset
    moment: float | None


@dataclass(frozen=True)
class Schedule:
    """Everything scheduled on one direction; see the module docstring.

    Validation: within each moment kind, steps are in increasing order (two steps at one moment:
    write one step); time-tied outages are in order and do not overlap; no step sets ``rate``
    when there is a trace (the trace is the rate)."""
    steps: tuple[Step, ...] = ()
    outages: tuple[Outage, ...] = ()
    events: tuple[Event, ...] = ()
    trace: Trace | None = None

    def __post_init__(self):
        last: dict[str, float] = {}
        for i, s in enumerate(self.steps):
            if s.at.kind in last and s.at.value <= last[s.at.kind]:
                raise _ItemError("step", i, f"step at {s.at} is not after the step before it "
                                 f"({Moment(s.at.kind, last[s.at.kind])}); list steps in time order, "
                                 "one step per moment")
            last[s.at.kind] = s.at.value
            if self.trace is not None and any(k == "rate" for k, _ in s.changes):
                raise _ItemError("step", i, f"step at {s.at} sets rate, but a trace gives this "
                                 "direction's rate; drop the trace or the rate step")
        end = -1.0
        for i, o in enumerate(self.outages):
            if o.down.kind == "time":
                if o.down.value < end:
                    raise _ItemError("outage", i, f"outage at {o.down} overlaps or precedes the one "
                                     f"before it (up at {end!r}s); list outages in order, apart")
                end = o.down.value + o.duration

    @property
    def empty(self) -> bool:
        return not (self.steps or self.outages or self.events or self.trace)

    def items(self) -> list[Item]:
        """Every item in the order written: steps, outages, events, the trace."""
        out = [Item(f"at {s.at}: {s.describe()}", frozenset({("step", i)}),
                    s.at.value if s.at.kind == "time" else None) for i, s in enumerate(self.steps)]
        out += [Item(f"down at {o.down} for {o.duration!r}s ({'hold' if o.hold else 'drop'})",
                     frozenset({("down", i), ("up", i)}), o.down.value if o.down.kind == "time" else None)
                for i, o in enumerate(self.outages)]
        out += [Item(f"event: {e.describe()}", frozenset({("event", i)}), e.start)
                for i, e in enumerate(self.events)]
        if self.trace is not None:
            t = self.trace
            out.append(Item(f"trace {t.source or '(inline)'}: {format_rate(t.mean_rate)} mean, period "
                            f"{t.period_ms / 1000:g} s" + (", exact" if t.exact else
                                                           f", resolution {format_time(t.resolution)}"),
                            frozenset({("trace", 0)}), 0.0))
        return out

    def describe_items(self) -> list[str]:
        """One line per item, in the order written: "at 3.0s: rate=10mbit", "down at 5.0s for
        2.0s (drop)", "event: frame 2: +45ms", "trace cell.up: 12.1mbit mean, period 1 s"."""
        return [item.text for item in self.items()]

    def item_effects(self, changes: Iterable[Mapping[str, Any]],
                     end_ns: int | None = None) -> list[tuple[Item, str]]:
        """Each item with when it took effect, by ``changes`` (``ScheduleChange`` records as
        dicts: kind, item, actual_ns) against ``end_ns`` (when the workload ended; None: no end):
        "during" (all its records by ``end_ns``; a trace: any), "after" (all only with those
        after ``end_ns``: during drain or teardown, not on the measured workload), "partly" (some,
        never all: an outage that went down and never up) or "never" (none)."""
        changes = list(changes)

        def took(cs):
            return {(c["kind"], 0 if c["kind"] == "trace" else c["item"]) for c in cs}
        every = took(changes)
        during = took(c for c in changes if end_ns is None or c["actual_ns"] <= end_ns)
        return [(item, "during" if item.records <= during else "after" if item.records <= every
                 else "partly" if item.records & every else "never") for item in self.items()]

    def merge(self, other: "Schedule") -> "Schedule":
        """Both schedules' items (steps sorted by moment within a kind); ``other``'s trace wins.
        Steps at one moment become one step when they set different fields (an inline item
        sets one field: ``rate=4mbit@3s;delay=30ms@3s``); one field set twice at one moment is
        refused."""
        at_moment: dict[tuple[str, float], Step] = {}
        for s in self.steps + other.steps:
            key = (s.at.kind, s.at.value)
            if key in at_moment:
                before = at_moment[key]
                both = sorted({k for k, _ in before.changes} & {k for k, _ in s.changes})
                if both:
                    raise ValueError(f"two steps at {s.at} set {', '.join(both)} ({before.describe()}; "
                                     f"{s.describe()}); give one value per field and moment")
                s = Step(s.at, tuple(sorted(before.changes + s.changes)))
            at_moment[key] = s
        steps = sorted(at_moment.values(), key=lambda s: (s.at.kind, s.at.value))
        outages = sorted(self.outages + other.outages, key=lambda o: (o.down.kind, o.down.value))
        return Schedule(tuple(steps), tuple(outages), self.events + other.events,
                        other.trace or self.trace)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.steps:
            out["step"] = [s.to_dict() for s in self.steps]
        if self.outages:
            out["outage"] = [o.to_dict() for o in self.outages]
        if self.events:
            out["event"] = [e.to_dict() for e in self.events]
        if self.trace is not None:
            out["trace"] = self.trace.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base: Path | None = None) -> "Schedule":
        """The file format (and ``to_dict``'s): lists ``step``, ``outage``, ``event``, a table
        ``trace``.  Errors raise ``_ItemError`` (a ValueError) naming the item."""
        if not isinstance(d, Mapping):
            raise ValueError("a schedule is a table with step, outage, event and trace")
        unknown = sorted(set(d) - {"step", "outage", "event", "trace"})
        if unknown:
            raise ValueError(f"unknown schedule key(s) {unknown}; allowed: step, outage, event, trace")
        items: dict[str, list] = {}
        for key, kind in (("step", Step), ("outage", Outage), ("event", Event)):
            raw = d.get(key, [])
            if isinstance(raw, Mapping):
                raw = [raw]
            if not isinstance(raw, list):
                raise ValueError(f"{key} = {raw!r}: each {key} is a table of fields ([[{key}]] in TOML, "
                                 "objects in a list in JSON)")
            items[key] = []
            for i, item in enumerate(raw):
                try:
                    if not isinstance(item, Mapping):
                        raise ValueError(f"a {key} is a table of fields, not {item!r}")
                    items[key].append(kind.from_dict(item))
                except ValueError as exc:
                    raise _ItemError(key, i, str(exc)) from None
        trace = d.get("trace")
        try:
            trace = Trace.from_dict(trace, base) if trace is not None else None
        except ValueError as exc:
            raise _ItemError("trace", 0, str(exc)) from None
        return cls(tuple(items["step"]), tuple(items["outage"]), tuple(items["event"]), trace)

    @classmethod
    def load(cls, path: str | Path) -> "Schedule":
        """A TOML (.toml) or JSON (.json) schedule file; errors are one line ``FILE:LINE: ...``."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ValueError(f"schedule {path}: cannot read it ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ValueError(f"schedule {path}: not text; a schedule is a TOML or JSON file") from None
        fmt = path.suffix.lower().lstrip(".")
        try:
            if fmt == "toml":
                data = _as_written(tomllib.loads(text))
            elif fmt == "json":
                data = json.loads(text)
            else:
                raise ValueError(f"{path}: a schedule file ends in .toml or .json")
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not TOML: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
        try:
            return cls.from_dict(data, path.parent)
        except _ItemError as exc:
            line = _item_line(text, fmt, exc.section, exc.index)
            raise ValueError(f"{path}:{line}: {exc.message}" if line else f"{path}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def _as_written(data: Any) -> Any:
    """A TOML schedule's steps and events with their delays and jitters as written
    (``units.delay_as_written``); JSON, ``to_dict``'s format, keeps numbers in seconds."""
    if not isinstance(data, dict):
        return data
    def written(item):
        return {k: delay_as_written(k, v) for k, v in item.items()} if isinstance(item, dict) else item
    out = dict(data)
    for key in ("step", "event"):
        raw = out.get(key)
        out[key] = [written(i) for i in raw] if isinstance(raw, list) else written(raw)
    return {k: v for k, v in out.items() if v is not None or k in data}


class _ItemError(ValueError):
    """A bad item of a schedule: ``section`` (step, outage, event, trace) and its 0-based index."""

    def __init__(self, section: str, index: int, message: str):
        super().__init__(f"{section} {index + 1}: {message}")
        self.section, self.index, self.message = section, index, message


def _item_line(text: str, fmt: str, section: str, index: int) -> int | None:
    """1-based line where the ``index``-th item of ``section`` starts in a schedule file."""
    if fmt == "toml":
        heads = [no for no, line in enumerate(text.splitlines(), 1)
                 if re.match(rf"^\s*\[\[?\s*{section}\s*\]\]?", line)]
        return heads[index] if index < len(heads) else (heads[0] if heads else None)
    key = text.find(f'"{section}"')
    if key < 0:
        return None
    depth, in_str, esc, found = 0, False, False, -1
    for pos in range(text.index(":", key) + 1, len(text)):
        c = text[pos]
        if in_str:
            in_str, esc = (c != '"' or esc), (c == "\\" and not esc)
            continue
        if c == '"':
            in_str = True
        elif c in "[{":
            if c == "{" and depth <= 1:
                found += 1
                if found == index:
                    return text.count("\n", 0, pos) + 1
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth <= 0:
                break
    return text.count("\n", 0, key) + 1


def parse_inline(name: str, value: Any) -> Schedule | None:
    """A ``--link LINK.DIR.NAME=VALUE`` that is a schedule: ``schedule=FILE``, ``trace=FILE``,
    ``down=5s+2s[,hold]``, or a step ``FIELD=VALUE@MOMENT`` (``rate=10mbit@3s``,
    ``loss=5%@10frames``); None when it is a plain field.  ``schedule`` also takes those inline
    items, ``;``-separated (``schedule=down=5s+2s;rate=4mbit@3s``): a value with ``=`` is items,
    one without is a file."""
    if name == "schedule":
        text = str(value)
        if "=" not in text:
            return Schedule.load(text)
        out = Schedule()
        for item in (i.strip() for i in text.split(";") if i.strip()):
            key, eq, rest = item.partition("=")
            extra = parse_inline(key.strip(), rest.strip()) if eq and key.strip() != "schedule" else None
            if extra is None:
                raise ValueError(f"schedule={text}: item {item!r} is not a schedule item; give "
                                 "down=MOMENT+DURATION[,hold], trace=FILE or FIELD=VALUE@MOMENT, "
                                 "separated by ';' (or a schedule file)")
            out = out.merge(extra)
        return out
    if name == "trace":
        return Schedule(trace=Trace.load(str(value)))
    if name == "down":
        text = str(value)
        head, _, flag = text.partition(",")
        down, plus, duration = head.partition("+")
        if not plus or flag.strip() not in ("", "hold"):
            raise ValueError(f"down={text}: expected MOMENT+DURATION[,hold], e.g. down=5s+2s or down=5s+2s,hold")
        return Schedule(outages=(Outage(Moment.parse(down.strip()), parse_time(duration.strip()),
                                        flag.strip() == "hold"),))
    if isinstance(value, str) and "@" in value:
        if name not in STEP_INPUT:
            raise ValueError(f"{name}={value}: a step sets one of {', '.join(STEP_INPUT)}")
        v, _, at = value.rpartition("@")
        return Schedule(steps=(Step.from_dict({"at": at.strip(), name: v.strip()}),))
    return None
