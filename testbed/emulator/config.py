"""Configuration of one emulator process (``python -m testbed.emulator.forwarder CONFIG.json``).

One process serves a whole topology: every emulated link contributes two *directions*, each
reading frames from one interface of the emulator's namespace and sending them out of another.
Directions whose ``medium`` names the same entry of ``media`` share one air interface.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from testbed.spec.linkspec import LinkSpec

IFNAMSIZ = 15  # longest Linux interface name
ENGINES = ("native", "python")
ENGINE_ENV = "TESTBED_ENGINE"  # the userspace backend's engine when none is given
#: the origin of link schedules: the run writes ``{"t_ns": CLOCK_MONOTONIC ns}`` to this file of
#: the log directory, then sends ORIGIN_SIGNAL to the forwarder, which answers with ORIGIN_ACK
ORIGIN_FILE, ORIGIN_ACK = "origin", "origin.ack"
ORIGIN_SIGNAL = signal.SIGUSR1


def native_schedules() -> bool:
    """Whether the native engine applies link schedules, in its model and in its loop; until it
    does, a topology with a scheduled link runs the Python engine.  What the forwarder needs of
    ``native.Engine``: ``drain_changes(direction, now_ns)`` (after the loop ended) and, callable
    from another thread while the C loop runs, ``request_origin(t_ns)`` (the loop applies it to
    every direction at its next iteration, at the earliest each one's last arrival) and
    ``applied_origin(direction)`` (the origin applied, None until then)."""
    from testbed.emulator import native
    return all(hasattr(native.Engine, name) for name in ("request_origin", "applied_origin",
                                                        "drain_changes"))


class EngineOption(argparse.Action):
    """``--engine native|python``: sets ``$TESTBED_ENGINE`` for the userspace backend (and for
    child processes), so every command that brings up a topology accepts it unchanged."""

    def __call__(self, parser, namespace, values, option_string=None):
        os.environ[ENGINE_ENV] = values
        setattr(namespace, self.dest, values)


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    """``--engine`` on a command that brings up topologies (directly or through runs it starts)."""
    parser.add_argument("--engine", choices=ENGINES, action=EngineOption,
                        help="userspace emulator engine (default: native where built, else python)")


@dataclass(frozen=True)
class DirectionConfig:
    """One direction: frames read on ``in_ifname`` leave, once the model allows, on ``out_ifname``.

    seed: seed of this direction's random loss/jitter (recorded in the summary).
    medium: name of a shared air interface in ``ForwarderConfig.media``, or None.
    """
    name: str
    in_ifname: str
    out_ifname: str
    spec: LinkSpec
    seed: int
    medium: str | None = None

    def __post_init__(self):
        if not self.name or "/" in self.name:
            raise ValueError(f"direction name {self.name!r} must be non-empty without '/'")
        for ifname in (self.in_ifname, self.out_ifname):
            if not (0 < len(ifname) <= IFNAMSIZ) or "/" in ifname or " " in ifname:
                raise ValueError(f"interface name {ifname!r} must have 1 to {IFNAMSIZ} characters, "
                                 "no '/' or space")
        if self.in_ifname == self.out_ifname:
            raise ValueError(f"direction {self.name}: in and out interface are both {self.in_ifname}")
        if not isinstance(self.spec, LinkSpec):
            raise ValueError(f"direction {self.name}: spec must be a LinkSpec, not {self.spec!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "in_ifname": self.in_ifname, "out_ifname": self.out_ifname,
                "spec": self.spec.to_dict(), "seed": self.seed, "medium": self.medium}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DirectionConfig":
        d = dict(d)
        d["spec"] = LinkSpec.from_dict(d["spec"])
        return cls(**d)


@dataclass(frozen=True)
class ForwarderConfig:
    """Everything the forwarder process needs.

    media: shared air interfaces, name -> ``AirtimeSpec.to_dict()``.
    log_dir: per-direction frame logs, ``summary.json``, ``ready`` and ``forwarder.log`` go here.
    late_ns: a frame sent more than this after its scheduled time is a *late departure*
        (counted and reported; the frame is still delivered).
    spin_ns: wake up this long before the next departure and poll without sleeping until it
        is due: hides the timer's wake-up latency (p50 30–200 µs from an idle vCPU on the 2-core
        VM this was measured on) for up to this much CPU per departure.  Default 0: with 100 µs
        the p50 scheduling error fell from ~25 µs to ~1.3 µs, but the loop took a whole core
        from 100 Mbit/s up and, spinning as SCHED_FIFO, made the p99 far worse at ≥ 200 Mbit/s
        (softirq work and the endpoints starved on the other core).
    early_ns: when awake, also send the frames due within this much time (and arm the timer
        this much before the next departure): fewer timer wake-ups, frames at most this early.
    rcvbuf, sndbuf: socket buffer bytes per interface (SO_RCVBUFFORCE/SO_SNDBUFFORCE).
    realtime: run the loop with SCHED_FIFO priority 10 (native: 11), ahead of the TCP endpoints (on 2 cores
        it halved the p99 scheduling error at 333 Mbit/s).  The loop sleeps whenever no departure
        is due; the native loop with a CPU of its own stays under the kernel's RT cap by demoting
        itself to SCHED_OTHER while over it (``forwarder.busy_policy``), the others by sleeping.
    engine: ``"python"`` (the loop in forwarder.py) or ``"native"`` (the C loop and model in
        ``emulator/native``; same model, log and summary).  A direction with a link schedule
        (``LinkSpec.schedule``) runs ``schedule_model.make_direction``'s model; the native engine
        takes it only where ``emulator.native`` applies schedules (``schedules_supported``).
    cpu_latency: hold a 0 µs CPU wake-up latency request (PM QoS, ``/dev/cpu_dma_latency``, as
        cyclictest does) while running, so idle CPUs poll instead of halting.  On the 2-core
        Firecracker VM this was measured on (cpuidle driver haltpoll), a timer woke an idle vCPU
        100–300 µs late at p99: calibrate at 20 Mbit/s had a p99 scheduling error of 77–227 µs
        without it and 11–22 µs with it.  Released when the process ends.
    cpu: pin the loop to this CPU (``sched_setaffinity``); None: wherever the scheduler puts it.
        The userspace backend picks the last CPU and steers the endpoints' receive processing to
        the others (``testbed.host.steering``).
    """
    directions: tuple[DirectionConfig, ...]
    log_dir: str
    media: dict[str, dict[str, Any]] = field(default_factory=dict)
    late_ns: int = 1_000_000
    spin_ns: int = 0
    early_ns: int = 0
    rcvbuf: int = 32 << 20
    sndbuf: int = 4 << 20
    realtime: bool = True
    engine: str = "python"
    cpu_latency: bool = True
    cpu: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "directions", tuple(self.directions))
        if not self.directions:
            raise ValueError("the emulator needs at least one direction")
        names = [d.name for d in self.directions]
        if len(set(names)) != len(names):
            raise ValueError(f"direction names must be unique, got {names}")
        ins = [d.in_ifname for d in self.directions]
        if len(set(ins)) != len(ins):
            raise ValueError(f"each interface can feed only one direction, got in_ifnames {ins}")
        for d in self.directions:
            if d.medium is not None and d.medium not in self.media:
                raise ValueError(f"direction {d.name}: medium {d.medium!r} is not in media "
                                 f"{sorted(self.media)}")
        if self.engine not in ENGINES:
            raise ValueError(f"emulator engine {self.engine!r} is unknown; allowed: {', '.join(ENGINES)}")
        for name in ("late_ns", "spin_ns", "early_ns", "rcvbuf", "sndbuf"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    @property
    def interfaces(self) -> list[str]:
        """Every interface the emulator reads or writes, in first-use order."""
        seen: dict[str, None] = {}
        for d in self.directions:
            seen.setdefault(d.in_ifname)
            seen.setdefault(d.out_ifname)
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["directions"] = [d.to_dict() for d in self.directions]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ForwarderConfig":
        d = dict(d)
        d["directions"] = tuple(DirectionConfig.from_dict(x) for x in d["directions"])
        return cls(**d)

    def write(self, path: Path | str) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def read(cls, path: Path | str) -> "ForwarderConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))
