"""netem's parameters for a LinkSpec (``netem_args``, ``netem_limit``; the qdisc tree is
``testbed.backends.kernel``'s) and link schedules on the kernel backend: a direction's
``Schedule`` as timed ``tc`` commands.

``TcSchedule(ifname, spec, seed)`` checks that netem can apply ``spec.schedule`` and turns it into
``TcAction``s: at ``at`` seconds after the run's origin, run these ``tc`` argv lists on the egress
of ``ifname``.  Nothing here runs a command or reads a clock (``KernelBackend`` is the I/O loop
around it); ``actions()`` yields them in time order.  The qdisc tree is the one of
``testbed.backends.kernel`` with two additions for a scheduled direction: htb is there when any
value in force needs a rate (its rate while unshaped is ``UNSHAPED_RATE``), and the pfifo child
of netem is there when any value in force has jitter without reorder.

What a change does:

* a step: ``tc class change`` of htb's 1:1 when the rate changes; ``tc qdisc change`` of netem
  10: with every netem parameter in force (a change replaces them all), its ``limit``
  recomputed as at setup (``netem_limit``: the delay line at the rate in force plus the
  queue, whose default follows rate and delay as in the model);
* an outage: netem's loss set to 100 % at ``down`` and back to the loss in force at ``up``.
  Not ``ip link set down``: that removes the interface's routes (the topology's static routes
  would not come back at ``up``), makes senders fail locally (ENETUNREACH, ENOBUFS) instead of
  losing frames on the path, and flushes what is queued.  netem drops at enqueue, as the model
  drops a frame arriving during an outage; unlike the model, frames queued before ``down``
  keep leaving during the outage;
* a trace: rate steps every ``resolution`` s (``Trace.resolution``, default
  ``TRACE_RESOLUTION``): from k·r s after the origin, htb gets the rate that carries the
  opportunities with timestamps in (k·r, (k+1)·r] (``traces.rate_series``' windows) as
  full-size frames, ``opportunities × (frame_bytes +
  overhead) × 8 / r`` (a 1514-byte frame uses one 1504-byte opportunity in Mahimahi), at least
  ``MIN_RATE`` (htb has no rate 0); an action only where the rate differs from the window
  before.  The trace loops, so ``actions()`` never ends with one.  ``Trace.exact`` asks for the
  exact replay, which only the userspace emulator gives: refused.

netem reseeds its loss generator at every change (with the given seed, or a random one); change
k (1, 2, … in time order) gives it ``(seed << 20) + k``, so a run is reproducible, and every
change restarts the loss pattern (the model restarts it only at a ``loss`` step).

Refused, in one line naming the direction and what is allowed: frame- or byte-indexed moments,
per-frame events (``copies_until`` named), outages with ``hold``, steps that set ``reorder``,
exact trace replay; and what ``netem_args`` refuses for any value in force (byte queue limits,
drop lists).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from testbed.spec.linkspec import Bernoulli, DropList, GilbertElliott, LinkSpec
from testbed.spec.schedule import OPPORTUNITY_BYTES, Schedule
from testbed.spec.units import format_rate

UNSHAPED_LIMIT = 100_000  # netem limit when the rate is unshaped: the delay line is unbounded


def _pct(p: float) -> str:
    return f"{p * 100:.6g}%"


def _usec(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}us"


def netem_limit(spec: LinkSpec) -> int:
    if spec.queue_bytes is not None and spec.queue_packets is None:
        raise ValueError("the netem backend limits queues in packets; give the queue in packets "
                         "(e.g. queue=5000) or use --backend userspace for a byte limit")
    if spec.rate is None:
        return UNSHAPED_LIMIT
    return spec.delay_line_packets + (spec.queue_limit_packets or 0)


def netem_args(spec: LinkSpec, seed: int | None = None) -> list[str]:
    """The netem parameters for ``spec`` (after ``netem``)."""
    args = ["delay", _usec(spec.delay + spec.jitter / 2)]
    if spec.jitter:
        args.append(_usec(spec.jitter / 2))
    loss = spec.loss
    if isinstance(loss, DropList):
        raise ValueError("drop lists exist only in the userspace emulator; use --backend userspace")
    if isinstance(loss, GilbertElliott):
        args += ["loss", "gemodel", _pct(loss.p), _pct(loss.r), _pct(loss.loss_bad),
                 _pct(loss.loss_good)]
    elif isinstance(loss, Bernoulli) and loss.p > 0:
        args += ["loss", "random", _pct(loss.p)]
    args += ["limit", str(netem_limit(spec))]
    if seed is not None:
        args += ["seed", str(seed)]
    return args


UNSHAPED_RATE = 10e9   # bit/s of htb while a scheduled direction is unshaped
MIN_RATE = 8000.0      # bit/s of htb for a trace window without opportunities
TRACE_RESOLUTION = 0.1  # s, the default trace window
SEED_SHIFT = 20


@dataclass(frozen=True)
class TcAction:
    """At ``at`` s after the origin run ``argv`` (tc argv lists, in order).  ``kind``, ``item``,
    ``label`` (the configured moment as written) and ``what`` are those of the
    ``schedule_model.ScheduleChange`` it records; a trace window's item is its index k."""
    at: float
    kind: str
    item: int
    label: str
    what: str
    argv: tuple[tuple[str, ...], ...]

    def __post_init__(self):
        if any(not t or t.split() != [t] or set(t) & set("\"'\\#") for a in self.argv for t in a):
            raise ValueError(f"tc argv {self.argv!r}: every argument is one word without quotes")


def refusal(spec: LinkSpec, where: str) -> str | None:
    """Why netem cannot apply ``spec.schedule`` (one line naming ``where``), or None."""
    sch = spec.schedule
    if sch is None:
        return None
    allowed = ("netem applies steps and outages at times after the run's start (3s, 250ms) and "
               "traces as rate steps; use --backend userspace for")
    moments = [str(s.at) for s in sch.steps if s.at.kind != "time"]
    moments += [str(o.down) for o in sch.outages if o.down.kind != "time"]
    if moments:
        return f"{where}: moment(s) {', '.join(moments)} count frames or bytes; {allowed} those"
    if sch.events:
        copies = sum(e.copies_until is not None for e in sch.events)
        return (f"{where}: {len(sch.events)} per-frame event(s)"
                + (f", {copies} with copies_until (TCP copies of a dropped frame dropped until a "
                   "moment)" if copies else "") + f"; {allowed} events")
    if any(o.hold for o in sch.outages):
        return f"{where}: an outage with hold (frames kept until up); {allowed} hold, or drop hold"
    if any("reorder" in dict(s.changes) for s in sch.steps):
        return f"{where}: a step sets reorder (netem's FIFO child is fixed for the run); {allowed} it"
    if sch.trace is not None and sch.trace.exact:
        return (f"{where}: the trace asks for exact replay (exact = true); {allowed} it, or drop "
                f"exact to replay it as rate steps every {sch.trace.resolution:g} s")
    return None


def topology_refusal(topo) -> str | None:
    """The first ``refusal`` among the named link directions of a topology (a
    ``topologies.base.TestbedTopo``), naming it ``link NAME.DIR``, or a shared medium (wifi),
    which only the userspace emulator models (``kernel.NetemLink`` refuses it too, but only once
    the topology is being built: in a guest, after it booted); None when netem can apply all."""
    for name, info in topo.named.items():
        if info.get("medium") is not None:
            return (f"topology {type(topo).name!r}: the shared Wi-Fi medium (link {name}) exists "
                    "only in the userspace emulator; use --backend userspace")
        for direction, key in (("up", "spec_ab"), ("down", "spec_ba")):
            why = info.get(key) and refusal(info[key], f"link {name}.{direction}")
            if why:
                return why
    return None


def _states(spec: LinkSpec) -> list[LinkSpec]:
    """The base values and the values after every step (no schedule)."""
    cur = spec.replace(schedule=None)
    out = [cur]
    for step in spec.schedule.steps if spec.schedule else ():
        cur = cur.replace(**dict(step.changes))
        out.append(cur)
    return out


def shaped(spec: LinkSpec) -> bool:
    """Whether the direction needs htb: a rate now, in a step, or from a trace."""
    sch = spec.schedule
    return (any(s.rate is not None for s in _states(spec))
            or (sch is not None and sch.trace is not None))


def fifo_child(spec: LinkSpec) -> bool:
    """Whether netem needs the pfifo child: jitter without reorder, now or after a step."""
    return not spec.reorder and any(s.jitter for s in _states(spec))


def fifo_limit(spec: LinkSpec) -> int:
    return max(netem_limit(s) for s in _states(spec))


def htb_rate(spec: LinkSpec) -> float:
    """The htb rate of ``spec``'s values (``UNSHAPED_RATE`` when unshaped)."""
    return UNSHAPED_RATE if spec.rate is None else spec.rate


def htb_change(ifname: str, spec: LinkSpec, rate: float, verb: str = "change") -> tuple[str, ...]:
    return ("tc", "class", verb, "dev", ifname, "parent", "1:", "classid", "1:1", "htb",
            "rate", f"{rate:.0f}bit", "ceil", f"{rate:.0f}bit",
            "quantum", str(spec.frame_bytes), "overhead", str(spec.overhead))


class TcSchedule:
    """The timed tc changes of one scheduled direction (see the module docstring).

    ``ifname``: the egress interface; ``spec``: the direction's LinkSpec with its schedule;
    ``seed``: netem's seed (None where tc or the kernel lacks netem's seed); ``where``: how the
    refusal names the direction.  ValueError (one line) when netem cannot apply the schedule."""

    def __init__(self, ifname: str, spec: LinkSpec, seed: int | None = None, where: str = ""):
        why = refusal(spec, where or ifname)
        if why:
            raise ValueError(why)
        self.ifname, self.spec, self.seed = ifname, spec, seed
        self.schedule: Schedule = spec.schedule or Schedule()
        self.shaped = shaped(spec)
        for s in _states(spec):
            netem_args(s)     # byte queues, drop lists: refused here, before anything is built
        trace = self.schedule.trace
        self.resolution = trace.resolution if trace is not None else None

    def _netem(self, values: LinkSpec, down: bool, k: int) -> tuple[str, ...]:
        if down:
            values = values.replace(loss=Bernoulli(1.0))
        seed = None if self.seed is None else (self.seed << SEED_SHIFT) + k
        return ("tc", "qdisc", "change", "dev", self.ifname, "handle", "10:", "netem",
                *netem_args(values, seed))

    def _timeline(self) -> Iterator[tuple[float, int, str, int, str, str, object]]:
        """(at, order, kind, item, label, what, payload) of every item, in time order; the trace
        windows last, lazily (an infinite stream merged by ``actions``)."""
        items = []
        for i, step in enumerate(self.schedule.steps):
            items.append((step.at.value, 1, "step", i, str(step.at), step.describe(), step))
        for i, o in enumerate(self.schedule.outages):
            items.append((o.down.value, 2, "down", i, str(o.down), "down drop", None))
            items.append((o.down.value + o.duration, 0, "up", i, f"{o.down}+{o.duration!r}s", "up", None))
        return iter(sorted(items, key=lambda x: (x[0], x[1])))

    def _windows(self) -> Iterator[tuple[float, int, str, int, str, str, object]]:
        trace = self.schedule.trace
        if trace is None:
            return
        r_ms = max(1, round(self.resolution * 1000))
        per_frame = (self.spec.frame_bytes + self.spec.overhead) / OPPORTUNITY_BYTES
        k, last = 0, None
        while True:
            n = trace.opportunities_before((k + 1) * r_ms + 1) - trace.opportunities_before(k * r_ms + 1)
            rate = max(MIN_RATE, n * OPPORTUNITY_BYTES * 8 * per_frame / (r_ms / 1000))
            if rate != last:
                yield (k * r_ms / 1000, 3, "trace", k, f"{k * r_ms / 1000!r}s",
                       f"rate={format_rate(rate)} ({n} opportunities in {r_ms} ms)", rate)
                last = rate
            k += 1

    def actions(self) -> Iterator[TcAction]:
        """Every change in time order (items at one moment: an up before a step before a down
        before a trace window)."""
        import heapq
        values = self.spec.replace(schedule=None)
        rate = htb_rate(values)
        down, k = False, 0
        for at, _order, kind, item, label, what, payload in heapq.merge(
                self._timeline(), self._windows(), key=lambda x: (x[0], x[1])):
            argv: list[tuple[str, ...]] = []
            netem = False
            if kind == "step":
                before = values
                values = values.replace(**dict(payload.changes))
                if self.schedule.trace is None and htb_rate(values) != rate:
                    rate = htb_rate(values)
                    argv.append(htb_change(self.ifname, values, rate))
                netem = values != before
            elif kind in ("down", "up"):
                down, netem = kind == "down", True
            else:
                rate = payload
                argv.append(htb_change(self.ifname, values, rate))
            if netem:
                k += 1
                argv.append(self._netem(values, down, k))
            if argv:
                yield TcAction(at, kind, item, label, what, tuple(argv))

    def until(self, seconds: float) -> list[TcAction]:
        """The actions at moments <= ``seconds`` (a finite list also with a trace)."""
        out = []
        for action in self.actions():
            if action.at > seconds:
                break
            out.append(action)
        return out
