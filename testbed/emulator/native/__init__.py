"""The native (C) engine of the userspace emulator: ``libtbemu.so``, driven from Python by ctypes.

- ``tbcore.c``: the model, step for step the Python ``DirectionModel`` / ``DropTailQueue`` /
  ``Serializer`` / loss generators / ``AirMedium`` / ``ScheduledDirection`` (the Python model is
  the reference; the differential tests in tests/testbed/emulator/test_native_engine.py and
  test_native_schedule.py require identical verdicts and times).
  Random streams: the same MT19937 as ``random.Random``, started from the Python generator's
  own state (``random.Random(...).getstate()``), with ``random()``'s 53-bit construction, so a
  seed gives the same draws in both engines.
- ``tbloop.c``: the I/O loop (a memory-mapped receive ring per socket, or recvmmsg batches, with
  kernel timestamps; a send per departure; a timed epoll wait + bounded polling of the rings
  before departures; the same frame log records).  The Python side
  (``emulator.forwarder``) opens sockets and logs, calls ``run``, and writes the summary.
  It also holds ``send_train``: a paced train of one frame through a socket and nothing else,
  the floor under the loop's send path, which ``benchmarks/emulator.py`` measures beside it.

Link schedules (``LinkSpec.schedule``): a direction whose spec has one is
``schedule_model.ScheduledDirection`` in C (``tbcore.c``, differential test
tests/testbed/emulator/test_native_schedule.py): same verdicts (``DROP_OUTAGE``, ``DROP_EVENT``
too), times, counters and change records.  The calls parallel the Python model's:

- ``Engine(directions, media)``: ``directions`` are (spec, seed, medium name or None), as for
  ``make_direction``; a schedule on a shared medium is refused as the model refuses it;
- ``Engine.arrive(i, now_ns, frame_len, frame=None)`` -> (verdict, t_ns) (``frame``: the bytes,
  which an event's ``copies_until`` reads; the I/O loop always passes them); ``arrive_batch``
  over arrays (lengths only);
- ``Engine.set_origin(i, t_ns)``: once, ``t_ns`` >= ``Engine.last_arrival(i)`` (ValueError
  otherwise); nothing on a direction without a schedule;
- ``Engine.drain_changes(i, now_ns=None)`` -> list of ``schedule_model.ScheduleChange`` (same
  fields and texts; [] without a schedule);
- ``Engine.stats(i)`` -> dict of ``DirectionStats`` plus, with a schedule, ``ScheduleStats``'
  fields (dropped_outage, dropped_event, delayed_event, changes); ``schedule_stats(i)``;
- ``Engine.direction(i)`` / ``make_direction(spec, seed)``: a ``NativeDirection`` with the
  model's own calls (``arrive``, ``set_origin``, ``drain_changes``, ``stats``, ``schedule_stats``).

While the I/O loop (``tb_run``) runs, only these calls may come from another thread:
``Engine.request_origin(t_ns)`` (once; the loop, woken through an eventfd, gives every direction
``set_origin(max(t_ns, its last arrival))`` at its next iteration, between frames) and
``Engine.applied_origin(i)`` (that origin, None until then; also set by ``set_origin``).  The
changes are drained after ``tb_run`` returns, with the stop time (a time-tied record carries its
own moment, so nothing is lost by draining late).  Frames dropped by an outage or an event are
logged ``dropped_outage`` / ``dropped_event``.

Built by ``python -m testbed.emulator.native.build`` (scripts/install.sh runs it; system gcc,
no download; rebuilt when a source changes).  ``available()`` says whether the library is built and loadable.
"""
from __future__ import annotations

import ctypes
import os
import random
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from testbed.spec.linkspec import MIN_DEFAULT_QUEUE, Bernoulli, DropList, GilbertElliott, LinkSpec

LIB_PATH = Path(__file__).with_name("libtbemu.so")
LOSS_NONE, LOSS_ALWAYS, LOSS_BERNOULLI, LOSS_GE, LOSS_DROPLIST = range(5)
_MT = ctypes.c_uint32 * 625
_i64, _i32, _dbl = ctypes.c_int64, ctypes.c_int32, ctypes.c_double


class MediumCfg(ctypes.Structure):
    _fields_ = [("difs_ns", _i64), ("tail_ns", _i64), ("slot_ns", _i64), ("preamble_ns", _i64),
                ("symbol_ns", _i64), ("cw", _i32), ("mac_overhead", _i32), ("ndbps", _i32),
                ("pad", _i32), ("mt_state", _MT)]


class DirCfg(ctypes.Structure):
    _fields_ = [("rate_num", _i64), ("rate_unit", _i64), ("overhead", _i64), ("delay_ns", _i64),
                ("jitter_span", _i64), ("qlim_packets", _i64), ("qlim_bytes", _i64),
                ("medium", _i32), ("reorder", _i32), ("shaped", _i32), ("loss_kind", _i32),
                ("p", _dbl), ("r", _dbl), ("loss_bad", _dbl), ("loss_good", _dbl),
                ("drop_idx", ctypes.POINTER(_i64)), ("n_drop", _i64),
                ("mt_loss", _MT), ("mt_jitter", _MT)]


class DirStats(ctypes.Structure):
    _fields_ = [(n, _i64) for n in ("frames_in", "delivered", "dropped_loss", "dropped_queue",
                                    "queue_max_packets", "queue_max_bytes", "bytes_in",
                                    "bytes_delivered", "airtime_ns")]


class StepCfg(ctypes.Structure):
    _fields_ = [("at_kind", _i32), ("mask", _i32), ("at", _i64), ("rate_num", _i64), ("rate_unit", _i64),
                ("rate", _dbl), ("delay", _dbl), ("delay_ns", _i64), ("jitter_span", _i64),
                ("reorder", _i64), ("queue_packets", _i64), ("queue_bytes", _i64),
                ("loss_kind", _i32), ("pad", _i32), ("p", _dbl), ("r", _dbl), ("loss_bad", _dbl),
                ("loss_good", _dbl), ("drop_idx", ctypes.POINTER(_i64)), ("n_drop", _i64)]


class OutageCfg(ctypes.Structure):
    _fields_ = [("at_kind", _i32), ("hold", _i32), ("at", _i64), ("duration_ns", _i64)]


class EventCfg(ctypes.Structure):
    _fields_ = [(n, _i64) for n in ("frame", "count", "min_bytes", "start_ns", "end_ns", "delay_ns",
                                    "until_ns")] + [("drop", _i32), ("copies", _i32)]


class SchedCfg(ctypes.Structure):
    _fields_ = [("frame_bytes", _i64), ("min_queue", _i64), ("base", StepCfg), ("n_steps", _i64),
                ("n_outages", _i64), ("n_events", _i64), ("n_ms", _i64), ("period_ns", _i64),
                ("steps", ctypes.POINTER(StepCfg)), ("outages", ctypes.POINTER(OutageCfg)),
                ("events", ctypes.POINTER(EventCfg)), ("ms_ns", ctypes.POINTER(_i64))]


class Change(ctypes.Structure):
    _fields_ = [("kind", _i32), ("item", _i32), ("configured_ns", _i64), ("actual_ns", _i64),
                ("frames_before", _i64), ("has_configured", _i32), ("pad", _i32)]


class SchedStats(ctypes.Structure):
    _fields_ = [(n, _i64) for n in ("dropped_outage", "dropped_event", "delayed_event", "changes")]


class MediumStats(ctypes.Structure):
    _fields_ = [("exchanges", _i64), ("backoff_slots", _i64)]


class IoCfg(ctypes.Structure):
    _fields_ = [("in_fd", _i32), ("out_fd", _i32), ("log_fd", _i32), ("ring_frame_size", _i32),
                ("ring_frame_nr", _i32), ("pad", _i32)]


class RunCfg(ctypes.Structure):
    _fields_ = [("late_ns", _i64), ("spin_ns", _i64), ("early_ns", _i64), ("stall_ns", _i64),
                ("stalls", ctypes.POINTER(_i64)), ("stall_cap", _i64), ("busy_share_pct", _i64),
                ("demote", _i64), ("slow_send_ns", _i64)]


class IoStats(ctypes.Structure):
    _fields_ = [("send_errors", _i64), ("records", _i64), ("flush_max_ns", _i64), ("oom_drops", _i64)]


class RunStats(ctypes.Structure):
    _fields_ = [("iterations", _i64), ("timer_wakeups", _i64), ("poll_idle_ns", _i64),
                ("send_ns", _i64), ("read_ns", _i64), ("stall_count", _i64), ("demotions", _i64),
                ("demoted_ns", _i64), ("log_waits", _i64), ("send_calls", _i64),
                ("slow_sends", _i64), ("slow_send_ns", _i64), ("send_max_ns", _i64)]


class Rec(ctypes.Structure):  # linklog.RECORD
    _pack_ = 1
    _fields_ = [("t_arrival", _i64), ("t_read", _i64), ("t_sched", _i64), ("t_sent", _i64),
                ("src", ctypes.c_uint32), ("dst", ctypes.c_uint32), ("seq", ctypes.c_uint32),
                ("ethertype", ctypes.c_uint16), ("ip_id", ctypes.c_uint16),
                ("sport", ctypes.c_uint16), ("dport", ctypes.c_uint16), ("proto", ctypes.c_uint8),
                ("length", ctypes.c_uint16), ("verdict", ctypes.c_uint8)]


_lib: Any = None
_error: str | None = None


def load():
    """The loaded library (RuntimeError saying how to build it when it is missing, or why this
    kernel cannot run it)."""
    global _lib, _error
    if _lib is None and _error is None:
        try:
            lib = ctypes.CDLL(str(LIB_PATH))
        except OSError as exc:
            _error = (f"native emulator engine not built ({exc}); build it with "
                      "`.venv/bin/python -m testbed.emulator.native.build` (or `make install`)")
        else:
            probe = lib.tb_probe()
            if probe != 0:
                _error = (f"native emulator engine unusable: this kernel lacks epoll_pwait2 "
                          f"({os.strerror(-probe)}; Linux >= 5.11 needed)")
        if _error is None:
            lib.tb_engine_new.restype = ctypes.c_void_p
            lib.tb_engine_new.argtypes = [ctypes.c_int, ctypes.POINTER(DirCfg), ctypes.c_int,
                                          ctypes.POINTER(MediumCfg)]
            lib.tb_engine_free.argtypes = [ctypes.c_void_p]
            lib.tb_arrive.argtypes = [ctypes.c_void_p, ctypes.c_int, _i64, _i64, ctypes.POINTER(_i64)]
            lib.tb_arrive_frame.argtypes = [ctypes.c_void_p, ctypes.c_int, _i64, _i64, ctypes.c_char_p,
                                            ctypes.c_uint32, ctypes.POINTER(_i64)]
            lib.tb_arrive_batch.restype = _i64
            lib.tb_arrive_batch.argtypes = [ctypes.c_void_p, _i64] + [ctypes.c_void_p] * 5
            lib.tb_schedule.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(SchedCfg)]
            lib.tb_set_origin.argtypes = [ctypes.c_void_p, ctypes.c_int, _i64]
            lib.tb_drain_changes.restype = _i64
            lib.tb_drain_changes.argtypes = [ctypes.c_void_p, ctypes.c_int, _i64, ctypes.c_int,
                                             ctypes.POINTER(Change), _i64]
            lib.tb_request_origin.argtypes = [ctypes.c_void_p, _i64]
            lib.tb_applied_origin.restype = _i64
            lib.tb_applied_origin.argtypes = [ctypes.c_void_p, ctypes.c_int]
            lib.tb_last_arrival.restype = _i64
            lib.tb_last_arrival.argtypes = [ctypes.c_void_p, ctypes.c_int]
            lib.tb_sched_stats_get.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(SchedStats)]
            lib.tb_dir_stats_get.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(DirStats)]
            lib.tb_medium_stats_get.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                                ctypes.POINTER(MediumStats)]
            lib.tb_parse_key.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(Rec)]
            lib.tb_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(IoCfg), ctypes.POINTER(RunCfg),
                                   ctypes.POINTER(IoStats), ctypes.POINTER(RunStats)]
            lib.tb_send_train.argtypes = [ctypes.c_int, ctypes.c_char_p, _i32, _i64, _i64, _i32,
                                          ctypes.POINTER(_i64)]
            _lib = lib
    if _lib is None:
        raise RuntimeError(_error)
    return _lib


def send_train(fd: int, frame: bytes, count: int, gap_ns: int, batch: int = 1) -> list[int]:
    """Send ``frame`` ``count`` times through socket ``fd``, one due every ``gap_ns`` (0: back
    to back), ``batch`` frames per call (1: ``send``, else ``sendmmsg`` once the last is due);
    per frame, the ns inside its call divided by the call's frames (``tbloop.c``).  OSError
    when a send fails or ``batch`` is outside 1..SEND_BATCH."""
    out = (_i64 * count)()
    ret = load().tb_send_train(fd, frame, len(frame), count, gap_ns, batch, out)
    if ret < 0:
        raise OSError(-ret, f"send_train: {os.strerror(-ret)}")
    return list(out)


def available() -> tuple[bool, str]:
    """(built and loadable, reason/path)."""
    try:
        load()
    except RuntimeError as exc:
        return False, str(exc)
    return True, str(LIB_PATH)


def _mt_state(seed: Any) -> Any:
    """The MT19937 state of ``random.Random(seed)`` (624 words + index)."""
    return _MT(*random.Random(seed).getstate()[1])


def medium_cfg(spec: Any, seed: int) -> MediumCfg:
    """``AirMedium(spec, seed)`` as the C engine's configuration (same rounding as airtime.py)."""
    from testbed.emulator.airtime import PREAMBLE, SYMBOL, _bits_per_symbol, _ns
    return MediumCfg(difs_ns=_ns(spec.difs),
                     tail_ns=_ns(spec.sifs) + spec.ppdu_ns(spec.ack_bytes, spec.control_rate),
                     slot_ns=_ns(spec.slot), preamble_ns=_ns(PREAMBLE), symbol_ns=_ns(SYMBOL),
                     cw=spec.cw_min, mac_overhead=spec.mac_overhead,
                     ndbps=_bits_per_symbol(spec.data_rate), mt_state=_mt_state(seed))


def _loss_fields(c: Any, loss: Any) -> Any:
    """Set ``c``'s loss_kind, p, r, loss_bad, loss_good, drop_idx, n_drop (a DirCfg or StepCfg)
    as ``loss.make_loss(loss)`` behaves; returns the drop-list array to keep alive (or None)."""
    if isinstance(loss, Bernoulli):
        c.loss_kind = LOSS_NONE if loss.p == 0.0 else LOSS_ALWAYS if loss.p == 1.0 else LOSS_BERNOULLI
        c.p = loss.p
    elif isinstance(loss, GilbertElliott):
        c.loss_kind, c.p, c.r = LOSS_GE, loss.p, loss.r
        c.loss_bad, c.loss_good = loss.loss_bad, loss.loss_good
    elif isinstance(loss, DropList):
        idx = sorted(i for i in loss.indices if i >= 0)
        c.loss_kind = LOSS_DROPLIST
        keep = (_i64 * max(1, len(idx)))(*idx)
        c.drop_idx, c.n_drop = ctypes.cast(keep, ctypes.POINTER(_i64)), len(idx)
        return keep
    else:
        raise ValueError(f"unknown loss model {loss!r}")
    return None


def _rate_fraction(rate: float) -> tuple[int, int]:
    """(num, unit) of ``serializer.Serializer`` for ``rate`` bit/s, within the engine's range."""
    frac = Fraction(rate).limit_denominator(10**6)
    num, unit = frac.numerator, 8 * 10**9 * frac.denominator
    if not (0 < num < 2**62 and unit < 2**62):
        raise ValueError(f"rate {rate!r} is outside the native engine's range")
    return num, unit


def dir_cfg(spec: LinkSpec, seed: int, medium: int = -1) -> tuple[DirCfg, Any]:
    """(``DirectionModel(spec, seed)`` as the C configuration, the drop-list array to keep alive)."""
    c = DirCfg(medium=medium, reorder=int(spec.reorder), overhead=spec.overhead,
               delay_ns=round(spec.delay * 1e9), jitter_span=round(spec.jitter * 1e9) + 1,
               mt_loss=_mt_state(f"{seed}:loss"), mt_jitter=_mt_state(f"{seed}:jitter"))
    if medium >= 0 and spec.rate is not None:
        raise ValueError("a direction on a shared medium must be unshaped")
    if spec.rate is not None:
        c.rate_num, c.rate_unit = _rate_fraction(spec.rate)
    c.shaped = int(spec.rate is not None or medium >= 0)
    lim_p, lim_b = spec.queue_limit_packets, spec.queue_bytes
    c.qlim_packets = -1 if lim_p is None else lim_p
    c.qlim_bytes = -1 if lim_b is None else lim_b
    keep = _loss_fields(c, spec.loss)
    return c, keep


_FIELD_BITS = {"rate": 1, "delay": 2, "jitter": 4, "reorder": 8, "loss": 16, "queue_packets": 32,
               "queue_bytes": 64}
_AT_KINDS = {"time": 0, "frames": 1, "bytes": 2}
CHANGE_KINDS = ("step", "down", "up", "event", "trace")


def _moment(at: Any) -> tuple[int, int]:
    """(at_kind, at) of a ``schedule.Moment``: ns after the origin, or a count."""
    return _AT_KINDS[at.kind], round(at.value * 1e9) if at.kind == "time" else int(at.value)


def _step_cfg(changes: dict[str, Any], keep: list) -> StepCfg:
    """A step's (or, with every field, the base LinkSpec's) values, rounded as the model does."""
    c = StepCfg(queue_packets=-1, queue_bytes=-1)
    for name, value in changes.items():
        c.mask |= _FIELD_BITS[name]
        if name == "rate":
            if value is not None:
                c.rate_num, c.rate_unit = _rate_fraction(value)
                c.rate = value
        elif name == "delay":
            c.delay, c.delay_ns = value, round(value * 1e9)
        elif name == "jitter":
            c.jitter_span = round(value * 1e9) + 1
        elif name == "reorder":
            c.reorder = int(value)
        elif name == "loss":
            keep.append(_loss_fields(c, value))
        else:
            setattr(c, name, -1 if value is None else value)
    return c


def sched_cfg(spec: LinkSpec, keep: list) -> SchedCfg:
    """``spec.schedule`` as the C configuration (arrays appended to ``keep``, to keep alive)."""
    sch = spec.schedule
    base = {name: getattr(spec, name) for name in _FIELD_BITS}
    c = SchedCfg(frame_bytes=spec.frame_bytes, min_queue=MIN_DEFAULT_QUEUE, base=_step_cfg(base, keep),
                 n_steps=len(sch.steps), n_outages=len(sch.outages), n_events=len(sch.events))
    steps = (StepCfg * max(1, len(sch.steps)))()
    for i, step in enumerate(sch.steps):
        steps[i] = _step_cfg(dict(step.changes), keep)
        steps[i].at_kind, steps[i].at = _moment(step.at)
    outages = (OutageCfg * max(1, len(sch.outages)))()
    for i, o in enumerate(sch.outages):
        kind, at = _moment(o.down)
        outages[i] = OutageCfg(kind, int(o.hold), at, round(o.duration * 1e9))
    events = (EventCfg * max(1, len(sch.events)))(*[
        EventCfg(e.frame or 0, e.count, e.min_bytes,
                 round(e.start * 1e9) if e.start is not None else 0,
                 round(e.end * 1e9) if e.end is not None else 0, round(e.delay * 1e9),
                 round(e.copies_until * 1e9) if e.copies_until is not None else 0, int(e.drop),
                 int(e.copies_until is not None))
        for e in sch.events])
    trace = sch.trace
    ms = (_i64 * (len(trace.ms) if trace else 1))(*([m * 1_000_000 for m in trace.ms] if trace else []))
    if trace is not None:
        c.n_ms, c.period_ns = len(trace.ms), trace.period_ms * 1_000_000
    c.steps, c.outages = ctypes.cast(steps, ctypes.POINTER(StepCfg)), ctypes.cast(outages, ctypes.POINTER(OutageCfg))
    c.events, c.ms_ns = ctypes.cast(events, ctypes.POINTER(EventCfg)), ctypes.cast(ms, ctypes.POINTER(_i64))
    keep.extend([steps, outages, events, ms])
    return c


class Engine:
    """The C model of a set of directions (and their shared media); mirrors ``make_models``.

    ``directions``: (spec, seed, medium name or None); ``media``: name -> (AirtimeSpec, seed).
    A direction whose spec has a ``schedule`` is ``schedule_model.ScheduledDirection`` in C.
    """

    def __init__(self, directions: Sequence[tuple[LinkSpec, int, str | None]],
                 media: dict[str, tuple[Any, int]] | None = None):
        lib = load()
        media = media or {}
        names = list(media)
        mcfg = (MediumCfg * max(1, len(names)))(*[medium_cfg(*media[n]) for n in names])
        built = [dir_cfg(spec.replace(schedule=None), seed, names.index(m) if m is not None else -1)
                 for spec, seed, m in directions]
        dcfg = (DirCfg * len(built))(*[c for c, _ in built])
        self._lib = lib
        self.n_dirs, self.medium_names = len(built), names
        self.specs = [spec for spec, _, _ in directions]
        self._keep: list = []      # arrays the C schedules point into
        self.ptr = lib.tb_engine_new(len(built), dcfg, len(names), mcfg)
        if not self.ptr:
            raise MemoryError("tb_engine_new failed")
        for i, (spec, _, m) in enumerate(directions):
            if spec.schedule is None:
                continue
            if m is not None:
                from testbed.emulator.schedule_model import check_on_medium
                check_on_medium(spec.schedule, i, m)
            if lib.tb_schedule(self.ptr, i, ctypes.byref(sched_cfg(spec, self._keep))) < 0:
                raise MemoryError("tb_schedule failed")

    def arrive(self, direction: int, now_ns: int, frame_len: int, frame: bytes | None = None) -> tuple[int, int]:
        """``ScheduledDirection.arrive``: ``frame``, the frame's bytes, for an event's ``copies_until``."""
        t = _i64()
        if frame is None:
            v = self._lib.tb_arrive(self.ptr, direction, now_ns, frame_len, ctypes.byref(t))
        else:
            v = self._lib.tb_arrive_frame(self.ptr, direction, now_ns, frame_len, frame, len(frame),
                                          ctypes.byref(t))
        if v < 0:
            raise MemoryError("native engine out of memory")
        return v, t.value

    def arrive_batch(self, direction, now_ns, frame_len):
        """Vectorised ``arrive`` over numpy arrays (int32, int64, int64): (verdicts u8, times i64)."""
        import numpy as np
        d = np.ascontiguousarray(direction, dtype=np.int32)
        now = np.ascontiguousarray(now_ns, dtype=np.int64)
        ln = np.ascontiguousarray(frame_len, dtype=np.int64)
        verdict = np.empty(len(d), dtype=np.uint8)
        t = np.empty(len(d), dtype=np.int64)
        if self._lib.tb_arrive_batch(self.ptr, len(d), d.ctypes.data, now.ctypes.data, ln.ctypes.data,
                                     verdict.ctypes.data, t.ctypes.data) < 0:
            raise MemoryError("native engine out of memory")
        return verdict, t

    def set_origin(self, direction: int, t_ns: int) -> None:
        """``ScheduledDirection.set_origin`` of one direction (nothing on a constant one)."""
        r = self._lib.tb_set_origin(self.ptr, direction, t_ns)
        if r == -1:
            raise ValueError(f"direction {direction}: the origin is already set")
        if r == -2:
            raise ValueError(f"direction {direction}: origin {t_ns} ns is before the last arrival "
                             f"({self.last_arrival(direction)} ns)")

    def drain_changes(self, direction: int, now_ns: int | None = None) -> list:
        """``ScheduledDirection.drain_changes``: the ``ScheduleChange`` records since the last
        call (time-tied ones due by ``now_ns`` first); [] on a constant direction."""
        from testbed.emulator.schedule_model import ScheduleChange, describe_change
        sch = self.specs[direction].schedule
        if sch is None:
            return []
        cap = 2 + len(sch.steps) + 2 * len(sch.outages) + len(sch.events)
        buf = (Change * cap)()
        n = self._lib.tb_drain_changes(self.ptr, direction, now_ns or 0, now_ns is not None, buf, cap)
        out = []
        for c in buf[:n]:
            kind = CHANGE_KINDS[c.kind]
            at, what = describe_change(sch, kind, c.item)
            out.append(ScheduleChange(kind, c.item, at, c.configured_ns if c.has_configured else None,
                                      c.actual_ns, c.frames_before, what))
        return out

    def request_origin(self, t_ns: int) -> None:
        """Ask the running loop for the origin ``t_ns`` (see the module docstring); thread-safe."""
        self._lib.tb_request_origin(self.ptr, t_ns)

    def applied_origin(self, direction: int) -> int | None:
        """The origin ``direction`` was given (ns), None until then; thread-safe."""
        t = self._lib.tb_applied_origin(self.ptr, direction)
        return None if t == -(1 << 63) else t

    def last_arrival(self, direction: int) -> int | None:
        """The last arrival given to ``direction`` (ns), None before the first."""
        t = self._lib.tb_last_arrival(self.ptr, direction)
        return None if t == -(1 << 63) else t

    def stats(self, direction: int) -> dict[str, int]:
        """``DirectionStats`` of a direction, as a dict; a scheduled one adds its
        ``ScheduleStats`` (dropped_outage, dropped_event, delayed_event, changes)."""
        s = DirStats()
        self._lib.tb_dir_stats_get(self.ptr, direction, ctypes.byref(s))
        out = {name: getattr(s, name) for name, _ in DirStats._fields_}
        if self.specs[direction].schedule is not None:
            out.update(self.schedule_stats(direction))
        return out

    def schedule_stats(self, direction: int) -> dict[str, int]:
        """``ScheduleStats`` of a direction, as a dict (zeros on a constant one)."""
        s = SchedStats()
        self._lib.tb_sched_stats_get(self.ptr, direction, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in SchedStats._fields_}

    def direction(self, index: int) -> "NativeDirection":
        return NativeDirection(self, index)

    def medium_stats(self, index: int) -> dict[str, int]:
        s = MediumStats()
        self._lib.tb_medium_stats_get(self.ptr, index, ctypes.byref(s))
        return {"exchanges": s.exchanges, "backoff_slots": s.backoff_slots}

    def close(self) -> None:
        if self.ptr:
            self._lib.tb_engine_free(self.ptr)
            self.ptr = None

    def __del__(self):
        self.close()


class NativeDirection:
    """One direction of an ``Engine`` with the calls of the Python model
    (``schedule_model.make_direction``'s): ``arrive``, ``set_origin``, ``drain_changes``,
    ``stats`` and ``schedule_stats`` (dicts here)."""

    def __init__(self, engine: Engine, index: int):
        self.engine, self.index = engine, index
        self.spec = engine.specs[index]

    def arrive(self, now_ns: int, frame_len: int, frame: bytes | None = None) -> tuple[int, int]:
        return self.engine.arrive(self.index, now_ns, frame_len, frame)

    def set_origin(self, t_ns: int) -> None:
        self.engine.set_origin(self.index, t_ns)

    def drain_changes(self, now_ns: int | None = None) -> list:
        return self.engine.drain_changes(self.index, now_ns)

    @property
    def stats(self) -> dict[str, int]:
        return self.engine.stats(self.index)

    @property
    def schedule_stats(self) -> dict[str, int]:
        return self.engine.schedule_stats(self.index)


def make_direction(spec: LinkSpec, seed: int) -> NativeDirection:
    """``schedule_model.make_direction(spec, seed)`` in C (a one-direction ``Engine``)."""
    return Engine([(spec, seed, None)]).direction(0)


def parse_key(frame: bytes) -> tuple[int, ...]:
    """The C ``linklog.parse_key`` (for the differential test)."""
    r = Rec()
    load().tb_parse_key(frame, len(frame), ctypes.byref(r))
    return (r.src, r.dst, r.seq, r.ethertype, r.ip_id, r.sport, r.dport, r.proto)
