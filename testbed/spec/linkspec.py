"""``LinkSpec``: the impairment of one direction of one link.

A link a–b has two independent LinkSpecs, a→b and b→a.  Both backends (kernel htb+netem and
the userspace emulator) read the same spec; what each makes of it is documented in its module.

Queue semantics.  ``queue_packets``/``queue_bytes`` bound the *bottleneck buffer*: frames that
have arrived but not yet finished serialization at ``rate``.  Frames already on the wire
(propagating for ``delay``) do not count.  The default bottleneck buffer is one bandwidth-delay
product of the round trip, assuming the reverse direction has the same delay
(rate × 2·delay, in full-size frames, at least ``MIN_DEFAULT_QUEUE`` packets).  netem counts
its delay line in its ``limit`` too; the kernel backend adds it (see ``netem_limit``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from testbed.spec.lossmodel import (Bernoulli, DropList, GilbertElliott, LossModel, loss_from_dict,
                                    loss_to_dict, parse_loss)
from testbed.spec.schedule import Schedule, parse_inline
from testbed.spec.units import (counted, format_rate, format_time, parse_bool, parse_count, parse_delay,
                                parse_link_rate, parse_queue, parse_size, rate_refusal)

__all__ = ["Bernoulli", "DropList", "ETH_HEADER", "GilbertElliott", "LinkSpec", "LossModel",
           "MIN_DEFAULT_QUEUE", "loss_from_dict", "loss_to_dict", "parse_loss"]

ETH_HEADER = 14
MIN_DEFAULT_QUEUE = 100
#: the values a link takes (``LinkSpec`` refuses others): a rate from ``MIN_RATE`` to
#: ``MAX_RATE`` (``units.rate_refusal``), a delay and a jitter of at most an hour, a queue of at
#: most 10^7 packets or 10 GB
MAX_DELAY = 3600.0
MAX_QUEUE_PACKETS, MAX_QUEUE_BYTES = 10**7, 10**10


@dataclass(frozen=True)
class LinkSpec:
    """One direction of a link.

    rate: bottleneck rate in bit/s, or None for unshaped.
    delay: one-way propagation delay in seconds.
    jitter: extra delay uniform in [0, jitter] s per frame (see ``reorder``).
    reorder: allow jitter to reorder frames; False keeps FIFO order (a frame never leaves before
        the one ahead of it).
    loss: Bernoulli, GilbertElliott or DropList.
    queue_packets, queue_bytes: bottleneck buffer limits (see module doc); None = default.
    overhead: bytes added to every frame's size for serialization (e.g. 24 for Ethernet preamble,
        SFD and inter-frame gap beyond the 14-byte header the frame already has).
    mtu: IP MTU of the link; a queue limit below one full frame is rejected.
    schedule: a ``testbed.spec.schedule.Schedule`` (steps, outages, per-frame events, a trace)
        that changes this direction during a run, or None (constant); the fields above are its
        values before the first step.  Each step's values must be valid on this spec.
    """
    rate: float | None = None
    delay: float = 0.0
    jitter: float = 0.0
    reorder: bool = False
    loss: LossModel = field(default_factory=Bernoulli)
    queue_packets: int | None = None
    queue_bytes: int | None = None
    overhead: int = 0
    mtu: int = 1500
    schedule: "Schedule | None" = None

    def __post_init__(self):
        if self.rate is not None and not (self.rate > 0):
            raise ValueError(f"rate {self.rate!r} must be > 0 bit/s, or 'unshaped'")
        if self.rate is not None and (why := rate_refusal(self.rate)):
            raise ValueError(why)
        for name in ("delay", "jitter"):
            if not (0 <= getattr(self, name) <= MAX_DELAY):
                raise ValueError(f"{name} {getattr(self, name):g} s must be >= 0 s and at most "
                                 f"{MAX_DELAY:g} s (an hour)")
        if not isinstance(self.loss, (Bernoulli, GilbertElliott, DropList)):
            raise ValueError(f"loss must be Bernoulli, GilbertElliott or DropList, not {self.loss!r}")
        if self.overhead < 0:
            raise ValueError(f"overhead {self.overhead!r} must be >= 0 bytes")
        if not (68 <= self.mtu <= 65535):
            raise ValueError(f"mtu {self.mtu!r} must be in [68, 65535]")
        if self.queue_packets is not None and self.queue_packets < 1:
            raise ValueError(f"queue limit {self.queue_packets} packets is smaller than one MTU-sized "
                             "frame; give at least 1 packet")
        if self.queue_bytes is not None and self.queue_bytes < self.frame_bytes:
            raise ValueError(f"queue limit {self.queue_bytes} B is smaller than one MTU-sized frame "
                             f"({self.frame_bytes} B)")
        for value, most, unit in ((self.queue_packets, MAX_QUEUE_PACKETS, "packets"),
                                  (self.queue_bytes, MAX_QUEUE_BYTES, "B")):
            if value is not None and value > most:
                raise ValueError(f"queue limit {value:g} {unit} is too large; a queue holds at most "
                                 f"{MAX_QUEUE_PACKETS} packets or {MAX_QUEUE_BYTES // 10**9} GB")
        if self.schedule is not None:
            if not isinstance(self.schedule, Schedule):
                raise ValueError(f"schedule must be a Schedule or None, not {self.schedule!r}")
            for step in self.schedule.steps:
                try:
                    dataclasses.replace(self, schedule=None, **dict(step.changes))
                except ValueError as exc:
                    raise ValueError(f"schedule step at {step.at}: {exc}") from None

    # --- derived values -------------------------------------------------------------------
    @property
    def frame_bytes(self) -> int:
        """Bytes of one full-size Ethernet frame on this link (MTU + Ethernet header)."""
        return self.mtu + ETH_HEADER

    @property
    def queue_limit_packets(self) -> int | None:
        """Effective bottleneck buffer in packets (None: unbounded, for unshaped links)."""
        if self.queue_packets is not None:
            return self.queue_packets
        if self.queue_bytes is not None or self.rate is None:
            return None
        bdp_packets = self.rate * 2 * self.delay / 8 / (self.frame_bytes + self.overhead)
        return max(MIN_DEFAULT_QUEUE, math.ceil(bdp_packets))

    @property
    def delay_line_packets(self) -> int:
        """Full-size frames on the wire at ``rate`` during one ``delay + jitter``."""
        if self.rate is None:
            return 0
        return math.ceil(self.rate * (self.delay + self.jitter) / 8 / (self.frame_bytes + self.overhead))

    @property
    def unimpaired(self) -> bool:
        """True when the spec changes nothing: unshaped, no delay, no jitter, no loss."""
        return (self.rate is None and self.delay == 0 and self.jitter == 0
                and isinstance(self.loss, Bernoulli) and self.loss.p == 0)

    @property
    def draws_at_random(self) -> bool:
        """True when frames on this direction meet a random draw: random loss (Bernoulli p > 0,
        Gilbert–Elliott with any loss), jitter, or a schedule step that sets either.  A
        schedule's outages, per-frame events and trace are deterministic; so is a DropList."""
        if self.jitter > 0 or (isinstance(self.loss, Bernoulli) and self.loss.p > 0) \
                or (isinstance(self.loss, GilbertElliott) and self.loss.mean_loss > 0):
            return True
        return self.schedule is not None and any(
            self.replace(schedule=None, **dict(step.changes)).draws_at_random for step in self.schedule.steps)

    def serialization_time(self, frame_len: int) -> float:
        """Seconds to send a frame of ``frame_len`` bytes (plus overhead) at ``rate``."""
        if self.rate is None:
            return 0.0
        return (frame_len + self.overhead) * 8 / self.rate

    def replace(self, **changes: Any) -> "LinkSpec":
        return dataclasses.replace(self, **changes)

    # --- (de)serialization --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every field; ``schedule`` only when there is one (``Schedule.to_dict``)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "schedule"}
        d["loss"] = loss_to_dict(self.loss)
        if self.schedule is not None:
            d["schedule"] = self.schedule.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LinkSpec":
        d = dict(d)
        loss = d.pop("loss", None)
        if isinstance(loss, Mapping):
            d["loss"] = loss_from_dict(loss)
        elif loss is not None:
            d["loss"] = loss
        if isinstance(d.get("schedule"), Mapping):
            d["schedule"] = Schedule.from_dict(d["schedule"])
        return cls(**d)

    def with_override(self, name: str, value: Any) -> "LinkSpec":
        """This spec with one ``--link``-style field set from text: a LinkSpec field
        (``LinkSpec.parse``'s names), or a schedule item (``schedule.parse_inline``: ``schedule``,
        ``trace``, ``down``, ``FIELD=VALUE@MOMENT``) merged into the schedule."""
        extra = parse_inline(name, value)
        if extra is not None:
            return self.replace(schedule=(self.schedule or Schedule()).merge(extra))
        names = ("queue_packets", "queue_bytes") if name == "queue" else (name,)
        parsed = LinkSpec.parse(**{name: value})
        return self.replace(**{n: getattr(parsed, n) for n in names})

    @classmethod
    def parse(cls, **fields: Any) -> "LinkSpec":
        """Build from human units: rate='333mbit', delay='100ms', loss='14%', queue='1000',
        loss='ge:p,r,1-h,1-k' for Gilbert–Elliott, rate='unshaped' or None."""
        known = {"rate", "delay", "jitter", "reorder", "loss", "queue", "queue_packets",
                 "queue_bytes", "overhead", "mtu"}
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"unknown link parameter(s) {sorted(unknown)}; allowed: {sorted(known)}")
        kw: dict[str, Any] = {}
        kw["rate"] = parse_link_rate(fields.get("rate"))      # refused in the unit it was written in
        for name in ("delay", "jitter"):
            if fields.get(name) is not None:
                kw[name] = parse_delay(fields[name], name)
        if fields.get("reorder") is not None:
            kw["reorder"] = parse_bool(fields["reorder"])
        if fields.get("loss") is not None:
            kw["loss"] = parse_loss(fields["loss"])
        if fields.get("queue") is not None:
            kw["queue_packets"], kw["queue_bytes"] = parse_queue(fields["queue"])
        if fields.get("queue_packets") is not None:
            kw["queue_packets"] = parse_count(fields["queue_packets"], "queue_packets")
        if fields.get("queue_bytes") is not None:
            kw["queue_bytes"] = parse_size(fields["queue_bytes"])
        if fields.get("overhead") is not None:
            kw["overhead"] = parse_size(fields["overhead"])
        if fields.get("mtu") is not None:
            kw["mtu"] = parse_size(fields["mtu"])
        return cls(**kw)

    def describe(self) -> str:
        """One line: the rate (with a trace, the trace in its place: it gives the rate from the
        origin on), delay, jitter, loss, queue and what the schedule holds besides."""
        trace = self.schedule.trace if self.schedule is not None else None
        parts = [f"trace {trace.source or '(inline)'} ({format_rate(trace.mean_rate)} mean; "
                 f"{format_rate(self.rate)} until the origin)" if trace else format_rate(self.rate),
                 f"delay {format_time(self.delay)}"]
        if self.jitter:
            parts.append(f"jitter {format_time(self.jitter)}{' (reorder)' if self.reorder else ''}")
        if isinstance(self.loss, Bernoulli):
            if self.loss.p:
                parts.append(f"loss {100 * self.loss.p:.4g}%")       # as --set and topo list write it
        else:
            parts.append(f"loss {self.loss}")
        q = self.queue_limit_packets
        if self.queue_bytes is not None:
            parts.append(f"queue {self.queue_bytes}B")
        elif q is not None:
            parts.append(f"queue {q}p")
        sch = self.schedule
        if sch is not None and (sch.steps or sch.outages or sch.events):
            parts.append(f"schedule: {counted(len(sch.steps), 'step')}, {counted(len(sch.outages), 'outage')}, "
                         f"{counted(len(sch.events), 'event')}")
        return ", ".join(parts)
