"""An experiment is data: one TOML file naming a base RunSpec, ONE factor and its levels.

    name = "reuse"
    description = "new connection per request vs one kept-alive connection (C7, direct path)"
    factor = "params.mode"             # a RunSpec path (RunSpec.set / RunSpec.get)
    levels = ["new", "reuse"]          # two or more arms ("default" = the key unset: the registry's
                                       # default); --levels may narrow a run to one arm (repetitions
                                       # of one configuration, no comparison)
    metrics = ["completion_ms_median", "handshake_ms"]   # the first is the primary metric
    reps = 10                          # repetitions per level (valid or not)
    warmup = 1                         # warm-up runs per level, run first, never analysed
    order = "alternate"                # alternate (A B A B) | abba | random (randomized blocks)
    seed = 1                           # experiment seed: every repetition's link seed derives from it
    keep_pcaps = "representative"      # all | representative (run closest to each median) | none
    accept_degraded = true             # keep runs the emulator rated "degraded" (listed in the report)
    [base]                             # RunSpec.from_dict(base), see testbed/spec/runspec.py
    topology = "longhaul"
    [base.params]
    requests = 10
    [base.capture]
    hosts = ["client"]                 # capture only where metrics and checks need packets

``levels`` is a list or a range: ``{ from = "0%", to = "5%", step = "1%" }`` (linear: from, from +
step, ... up to to, never past it; step in the unit of from and to) or ``{ from = "1ms", to =
"100ms", n = 5, log = true }`` (``n`` points, log-spaced).  Each key's type is :data:`KEYS`'s; an
experiment has at most MAX_ARMS arms and MAX_RUNS runs.
``cross = { factor = "socket.cc", levels = ["reno", "cubic", "bbr"] }`` crosses a second factor
with the first (full factorial: every level of one with every level of the other; a run's arm,
its *cell*, is labelled ``CROSS@LEVEL``; each repetition block runs every cell once).  The
statistics compare the levels of ``factor`` within each level of ``cross``; the curve draws one
line per level of ``cross``.  ``check = "none"`` runs a factor that has no manipulation check,
its runs marked unverified.  ``[[models]]`` entries draw a closed-form model
(``analysis/models``) on the curve: ``model``, ``output``, ``x`` (the model parameter the level
sets, times ``scale``: 2 turns a one-way delay into an RTT), ``params`` (the others, human units;
``"=cross"``: the crossed level, one model line per crossed level; ``"=base:PATH"`` or
``"=base:PATH*K"``: the base spec's value, so ``--set`` moves the model too), ``label``.
``log_x = true`` draws the level axis logarithmic.

A link's schedule is a factor like any link field: ``factor = "links.cell.down.schedule"`` with
levels ``"none"`` (no schedule: removes the topology's default), inline items (``"down=2s+0.5s"``,
``"down=2s+0.5s;rate=4mbit@3s"``) or schedule files (TOML/JSON, relative to the definition's
directory, read as absolute paths; a file's level is named by its file name);
``links.LINK.DIR.trace`` takes Mahimahi trace files.  Each run records the schedule
it ran in its manifest (``environment.links``) and the changes that took effect (``link_changes``).

Whether the topology may stay up across runs is derived from the factor (see
:func:`Experiment.topology_may_stay_up`), never declared.  ``topology`` may be a path to a
topology file of the user's own (``topology = "chain.py"``), relative to the definition's
directory; it is read as that file's absolute path.

``EXPERIMENTS`` holds every definition by name: the built-ins (``experiments/definitions/*.toml``)
and the ``*.toml`` files in the directories on ``TESTBED_PATH`` (``testbed.spec.plugins``).
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from testbed.spec import plugins
from testbed.spec.errors import UsageError
from testbed.spec.registry import Registry
from testbed.spec.runspec import MAX_SEED, SEED_RANGE
from testbed.spec.schedule import SCHEDULE_FIELDS
from testbed.spec.units import counted, delay_as_written

BUILTIN_DIR = Path(__file__).resolve().parent / "definitions"
ORDERS = ("alternate", "abba", "random")
KEEP_PCAPS = ("all", "representative", "none")
DEFAULT = "default"
#: Run-level metric names of RunResult.metrics (docs/reference/metrics.md); ms for times, Mbit/s for rates.
METRICS = ("completion_ms", "completion_ms_median", "handshake_ms", "first_byte_ms", "goodput_mbps",
           "retransmissions", "retransmitted_bytes", "max_in_flight_bytes", "max_pipe_bytes", "data_per_ack",
           "bdp_bytes", "stalls", "stall_ms",
           # runmetrics: counts in the timed window, flights, SOCKS5 reply, TCP_INFO limits
           "packets_c2s", "packets_s2c", "data_packets_c2s", "data_packets_s2c", "wire_bytes",
           "flights", "flight_period_ms", "flight_bytes", "cumulative_5", "socks_ms", "socks_ms_median",
           "rwnd_limited_ms", "busy_ms",
           # agent: the whole run (testbed/apps/agent.py summary)
           "total_s", "setup_s", "round_s", "redo_s", "disconnect_s",
           # streams / duplicate / airbulk (analysis/streams.py, multipath.py, airtime.py)
           "audio_cross_wait_max_ms", "audio_order_wait_max_ms", "audio_on_time", "audio_done_ms",
           "image_done_ms", "path_done_ms",
           "delivered_fraction", "delay_ms_median", "ack_airtime_ms", "ack_airtime_ms_model",
           "ack_exchanges", "data_airtime_ms",
           # C8/C10 reproduce: the image's repair, the air medium's busy intervals
           "image_gaps", "image_repair_ms", "image_longest_gap_close_ms", "air_busy_ms", "air_data_busy_ms",
           "air_feedback_busy_ms",
           "air_data_frames", "air_feedback_frames",
           # audio playback (analysis/audio.py)
           "audio_first_play_ms", "audio_late_arrival_ms", "audio_stall_ms", "audio_min_start_ms",
           "audio_lasts_ms",
           # duplicate (analysis/multipath.py)
           "failed_fraction", "attempt_failed", "received_bytes")
#: What a definition's metrics may be, as an error message says it (the names are too many for
#: its one line; ``testbed experiment metrics`` prints them).
ALLOWED_METRICS = f"one of the {len(METRICS)} metrics `testbed experiment metrics` lists"
CHECK_MODES = ("auto", "none")
#: RunSpec paths whose change needs a topology rebuilt between runs.
REBUILD_PREFIXES = ("topology", "topology_params", "links", "backend", "seed", "client_host",
                    "server_host")
#: At most this many arms (levels x cross levels) and runs ((warm-ups + repetitions) x arms): more
#: than a real experiment has (100000 runs of 5 s take a week), few enough to validate at once.
MAX_ARMS = 1000
MAX_RUNS = 100_000
#: Each key of a definition: the types its value may have and what is allowed (the message of
#: a value of another type; a boolean is not a number).
KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "a string of letters, digits, '-' and '_'"),
    "description": ((str,), "a string"),
    "factor": ((str,), "a RunSpec path (a string), e.g. params.mode"),
    "levels": ((list, tuple, Mapping), "a list or a range { from, to, step }"),
    "base": ((Mapping,), "a table [base]: the RunSpec every run starts from"),
    "metrics": ((list, tuple), "a list of metric names, the first the primary"),
    "reps": ((int,), "a whole number >= 1"),
    "warmup": ((int,), "a whole number >= 0"),
    "order": ((str,), ", ".join(ORDERS)),
    "seed": ((int,), SEED_RANGE),
    "keep_pcaps": ((str,), ", ".join(KEEP_PCAPS)),
    "accept_degraded": ((bool,), "true or false"),
    "cross": ((Mapping, type(None)), "cross = { factor = PATH, levels = [...] }"),
    "check": ((str,), ", ".join(CHECK_MODES)),
    "models": ((list, tuple), "an array of tables [[models]], each with model, output and x"),
    "log_x": ((bool,), "true or false"),
}


def level_label(value: Any) -> str:
    """A level's name on the command line and in run directory names (``max:10ms`` -> ``max-10ms``,
    ``0.5%`` -> ``0.5pct``, a file ``/a/b/cell-edge.toml`` -> ``cell-edge.toml``, a negative value
    ``-2s`` -> ``minus2s``: never ``2s``, the label of ``2s``, nor an option ``-2s``)."""
    text = str(value).lower() if isinstance(value, bool) else str(value).replace("%", "pct")
    if isinstance(value, str) and "/" in value and "=" not in value:
        text = Path(value).name
    if text.startswith("-"):
        text = "minus" + text[1:]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "level"


_QUANTITY = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z%/]*)\s*$")


def _quantity(value: Any, what: str) -> tuple[float, str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), ""
    m = _QUANTITY.match(str(value))
    if not m:
        raise UsageError(f"level range: {what} {value!r} is not a number with an optional unit "
                         "(e.g. 0%, 10ms, 20mbit)")
    return float(m.group(1)), m.group(2)


def _written(r: Mapping[str, Any]) -> str:
    """A range as a definition file writes it (a TOML inline table)."""
    return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in r.items()) + "}"


def expand_range(r: Mapping[str, Any]) -> tuple:
    """The levels of a range ``{from, to, step}`` (linear: from, from + step, ... up to to, never
    past it; step in the unit of from and to) or ``{from, to, n, log = true}`` (``n`` log-spaced
    points; ``n`` without ``log`` is linear too); at most MAX_ARMS levels."""
    allowed = "from, to and step (linear) or n (with log = true: log-spaced)"
    unknown = sorted(set(r) - {"from", "to", "step", "n", "log"})
    if unknown or "from" not in r or "to" not in r or ("step" in r) == ("n" in r):
        raise UsageError(f"level range {_written(r)}: give {allowed}")
    lo, unit = _quantity(r["from"], "from")
    hi, unit_hi = _quantity(r["to"], "to")
    if unit_hi != unit:
        raise UsageError(f"level range {_written(r)}: from and to must have one unit ({unit!r} vs {unit_hi!r})")
    log = bool(r.get("log", False))
    if "step" in r:
        if log:
            raise UsageError(f"level range {_written(r)}: a log-spaced range takes n, not step")
        step, unit_s = _quantity(r["step"], "step")
        if unit_s != unit or step <= 0 or hi < lo:
            raise UsageError(f"level range {_written(r)}: step must be > 0 and in the unit of from and to "
                             f"({unit or 'none'}), and from <= to")
        count = (hi - lo) / step + 1
    else:
        count = r["n"]
        if not isinstance(count, int) or isinstance(count, bool) or count < 2:
            raise UsageError(f"level range {_written(r)}: n must be a whole number >= 2")
        if log and (lo <= 0 or hi <= 0):
            raise UsageError(f"level range {_written(r)}: a log-spaced range needs from, to > 0")
    if count > MAX_ARMS:
        raise UsageError(f"level range {_written(r)}: more than {MAX_ARMS} levels; allowed: at most {MAX_ARMS} "
                         "(a larger step, a smaller n)")
    if "step" in r:             # from, from + step, ... never past to
        values = [lo + i * step for i in range(int(count + 1e-9))]
    else:
        import numpy as np
        values = list(np.geomspace(lo, hi, count) if log else np.linspace(lo, hi, count))
    ints = unit == "" and all(isinstance(r.get(k, 0), int) for k in ("from", "to", "step"))
    out = []
    for v in values:
        v = float(f"{v:.3g}" if log else f"{v:.10g}")
        out.append(int(round(v)) if ints and v == round(v) else f"{v:g}{unit}")
    return tuple(dict.fromkeys(out))


def parse_levels(value: Any, what: str = "levels") -> tuple:
    """A definition's levels: a list as given, or a range table (:func:`expand_range`)."""
    if isinstance(value, Mapping):
        return expand_range(value)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise UsageError(f"{what} {value!r}: give a list or a range {{ from, to, step }}")


def cli_levels(text: str, what: str = "--levels") -> list:
    """``--levels`` (or ``what``): comma-separated values, or one range ``FROM:TO:STEP`` /
    ``FROM:TO:logN``; none (an empty text) is refused.  A ``hold`` after an outage is that
    outage's flag: ``none,down=2s+0.5s,hold`` is two levels, as ``2s+0.5s,hold,3s+1s`` (levels of
    ``links.LINK.DIR.down``)."""
    parts = text.split(":")
    if len(parts) == 3 and all(_QUANTITY.match(p) for p in parts[:2]):
        if parts[2].startswith("log"):
            n = parts[2][3:]
            if not n.isdigit():
                raise UsageError(f"--levels {text}: a log range is FROM:TO:logN, e.g. 1ms:100ms:log5")
            return list(expand_range({"from": parts[0], "to": parts[1], "n": int(n), "log": True}))
        return list(expand_range({"from": parts[0], "to": parts[1], "step": parts[2]}))
    if len(parts) == 2 and all(_QUANTITY.match(p) for p in parts):
        raise UsageError(f"{what} {text}: a range is FROM:TO:STEP or FROM:TO:logN, e.g. "
                         f"{text}:1{_QUANTITY.match(parts[0])[2]}")
    levels: list[str] = []
    for x in (x.strip() for x in text.split(",")):
        if re.match(r"hold\s*(;|$)", x) and levels and re.search(r"((^|;)\s*down=[^;,]*|^[^=;,]+\+[^=;,]+)$",
                                                               levels[-1]):
            levels[-1] += "," + x       # an outage's flag (down=2s+0.5s,hold; a down level 2s+0.5s,hold)
        elif x:
            levels.append(x)
    if not levels:
        raise UsageError(f"{what} {text!r}: no level; give levels, comma-separated, or a range FROM:TO:STEP")
    return levels


#: fields of an :class:`Experiment` that only say how many runs each arm has: a :meth:`replace`
#: of these alone keeps the arms' resolved plans (any other change resolves them again)
RUN_COUNT_FIELDS = frozenset({"reps", "warmup"})


@dataclass(frozen=True)
class Experiment:
    name: str
    factor: str
    levels: tuple
    base: Mapping[str, Any]
    metrics: tuple[str, ...]
    description: str = ""
    reps: int = 10
    warmup: int = 1
    order: str = "alternate"
    seed: int = 1
    keep_pcaps: str = "representative"
    accept_degraded: bool = True
    cross: Mapping[str, Any] | None = None     # {"factor": PATH, "levels": (...)}
    check: str = "auto"                        # auto | none
    models: tuple = ()                         # model curves (see the module docstring)
    log_x: bool = False
    source: str = field(default="", compare=False)

    def __post_init__(self):
        def bad(what, allowed):
            raise UsageError(f"experiment {self.name!r}: {what}; allowed: {allowed}")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", self.name or ""):
            bad(f"bad name {self.name!r}", "letters, digits, '-' and '_'")
        if not self.levels:
            bad(f"factor {self.factor!r} has no level", "one or more levels")
        labels = [level_label(v) for v in self.levels]
        if len(set(labels)) != len(labels):
            bad(f"levels {labels} are not distinct", "distinct level names")
        if self.cross is not None:
            if set(self.cross) != {"factor", "levels"} or not isinstance(self.cross["factor"], str):
                bad(f"cross {dict(self.cross)}", "cross = { factor = PATH, levels = [...] }")
            if self.cross["factor"] == self.factor:
                bad(f"cross factor {self.factor!r} is the factor itself", "another RunSpec path")
            cl = [level_label(v) for v in self.cross["levels"]]
            if not cl or len(set(cl)) != len(cl):
                bad(f"cross levels {cl} are empty or not distinct", "distinct level names")
        if self.check not in CHECK_MODES:
            bad(f"check {self.check!r}", ", ".join(CHECK_MODES))
        for m in self.models:
            if not isinstance(m, Mapping) or not {"model", "output", "x"} <= set(m) \
                    or set(m) - {"model", "output", "x", "params", "label", "scale"}:
                bad(f"models entry {m!r}", "tables with model, output, x and optional params, label, scale")
        if not self.metrics:
            bad("no metrics", ALLOWED_METRICS)
        for m in self.metrics:
            if m not in METRICS:
                close = difflib.get_close_matches(m, METRICS, n=3)
                bad(f"unknown metric {m!r}", ALLOWED_METRICS + (f" (closest: {', '.join(close)})" if close else ""))
        if self.order not in ORDERS:
            bad(f"unknown order {self.order!r}", ", ".join(ORDERS))
        if self.keep_pcaps not in KEEP_PCAPS:
            bad(f"unknown keep_pcaps {self.keep_pcaps!r}", ", ".join(KEEP_PCAPS))
        if self.reps < 1 or self.warmup < 0 or not 0 <= self.seed <= MAX_SEED:
            bad(f"reps={self.reps} warmup={self.warmup} seed={self.seed}",
                f"reps >= 1, warmup >= 0, seed {SEED_RANGE}")
        arms = len(self.levels) * (len(self.cross_levels) or 1)
        runs = (self.warmup + self.reps) * arms
        if arms > MAX_ARMS or runs > MAX_RUNS:
            bad(f"{runs} runs = ({self.warmup} warm-up + {self.reps} repetitions) x {arms} arms",
                f"at most {MAX_ARMS} arms and {MAX_RUNS} runs")

    @property
    def cross_levels(self) -> tuple:
        return tuple(self.cross["levels"]) if self.cross else ()

    @property
    def cells(self) -> tuple[tuple[str, Any, Any], ...]:
        """Every arm as ``(label, level, cross level or None)``: the levels in order, and within
        each level every cross level (``CROSS@LEVEL``)."""
        if not self.cross:
            return tuple((level_label(v), v, None) for v in self.levels)
        return tuple((f"{level_label(c)}@{level_label(v)}", v, c)
                     for v in self.levels for c in self.cross_levels)

    @property
    def labels(self) -> tuple[str, ...]:
        """The arms' labels (the levels', or with ``cross`` the cells')."""
        return tuple(c[0] for c in self.cells)

    def factors(self) -> tuple[str, ...]:
        return (self.factor, self.cross["factor"]) if self.cross else (self.factor,)

    def structural_factors(self) -> tuple[str, ...]:
        """The factors that change what the topology is built with — the topology, its
        parameters, a link, the backend or the link seed (:data:`REBUILD_PREFIXES`) — so that it
        is rebuilt for every run."""
        return tuple(f for f in self.factors() if f.split(".")[0] in REBUILD_PREFIXES)

    def scheduled_links(self) -> tuple[str, ...]:
        """The link directions (``LINK.DIR``) with a schedule or trace in some arm
        (``TestbedTopo.scheduled_links``): it starts at each run's start, so the topology is
        rebuilt for every run."""
        return tuple(sorted({key for plan in self.validate().values() if plan.topology is not None
                             for key in plan.topology.scheduled_links()}))

    def rebuilt_why(self) -> str:
        """Why the topology is rebuilt for every run, ``--keep-topology`` or not ("" when it may
        stay up across the runs of a repetition): :func:`rebuilt_why` of
        :meth:`structural_factors` and :meth:`scheduled_links`."""
        return rebuilt_why(self.structural_factors(), self.scheduled_links())

    def topology_may_stay_up(self) -> bool:
        """The topology may stay up across runs (with ``--keep-topology``; by default it is
        rebuilt for every run) iff nothing forces a rebuild (:meth:`rebuilt_why`)."""
        return not self.rebuilt_why()

    def base_spec(self):
        from testbed.spec.runspec import RunSpec
        return RunSpec.from_dict(dict(self.base))

    def spec(self, level, seed: int | None = None, cross=None):
        """The RunSpec of one run: the base with the factor set to ``level`` (``"default"``
        unsets it: the registry's default), the cross factor to ``cross`` and the link seed."""
        spec = self.base_spec()
        spec = spec.set(self.factor, None if level == DEFAULT else level)
        if self.cross:
            spec = spec.set(self.cross["factor"], None if cross == DEFAULT else cross)
        return spec if seed is None else spec.set("seed", int(seed))

    def cell(self, label: str) -> tuple[Any, Any]:
        """(level, cross level) of an arm's label."""
        for lab, v, c in self.cells:
            if label == lab:
                return v, c
        if not self.cross:
            return self.level(label), None
        raise UsageError(f"experiment {self.name!r}: unknown arm {label!r}; arms: {', '.join(self.labels)}")

    def cell_spec(self, label: str, seed: int | None = None):
        v, c = self.cell(label)
        return self.spec(v, seed, c)

    def level(self, label: str):
        for v in self.levels:
            if label in (level_label(v), str(v)):   # the label, or the value `experiment show` prints
                return v
        raise UsageError(f"experiment {self.name!r}: unknown level {label!r}; "
                         f"levels: {', '.join(level_label(v) for v in self.levels)}")

    @property
    def named(self) -> str:
        """How an error names this experiment: ``FILE: experiment 'NAME'`` when it was read from a
        file (:func:`read_definition`), else ``experiment 'NAME'``."""
        return f"{self.source}: experiment {self.name!r}" if self.source else f"experiment {self.name!r}"

    def validate(self) -> dict:
        """Refuse, before anything runs, a factor without a manipulation check (unless ``check =
        "none"``), a model the registry does not know and a spec the registries cannot take;
        return each arm's Plan (``testbed.run.plan``) by label, resolved once (:attr:`_plans`)."""
        from analysis.models.base import MODELS
        from experiments.checks import check_for
        for m in self.models:
            if m["model"] not in MODELS.names():
                raise UsageError(f"{self.named}: unknown model {m['model']!r}; allowed: "
                                 f"{', '.join(MODELS.names())} (testbed model list)")
        plans = self._plans         # first: a misspelt factor is named as such, not as unchecked
        if self.check != "none":
            self._refuse_unverifiable_link_levels()
        for f in self.factors():
            if self.check != "none" and check_for(f) is None:
                raise UsageError(f"{self.named}: no manipulation check for factor {f!r}; "
                                 "allowed: a factor with one (`testbed experiment factors` lists them), "
                                 "or this one unverified, its runs marked so in the report: set "
                                 "check = \"none\" in the definition")
        return plans

    def _refuse_unverifiable_link_levels(self) -> None:
        """Refuse link levels whose check would exclude every run: a step (``5mbit@1s``) as a
        plain field's level (its check reads a rate, not a step); ``default`` as a level of a
        schedule field (``schedule``, ``trace``, ``down``: no item to verify); a ``schedule`` or
        ``trace`` factor on a direction whose schedule something else sets too (the cross factor,
        ``[base.links]``: their check asks for the level's items and no others); a ``down``
        factor where ``[base.links]`` sets that direction's schedule to none (it removes the
        outage)."""
        base = self.base.get("links") or {}
        setters: dict[str, list[str]] = {}
        for key, value in base.items():
            if key.rpartition(".")[2] in SCHEDULE_FIELDS or (isinstance(value, str) and "@" in value):
                setters.setdefault(key.rpartition(".")[0], []).append(f"[base.links] {key!r}")
        exact = {}
        for f, levels in self._factor_levels():
            parts = re.fullmatch(r"links\.([^.]+\.[^.]+)\.(\w+)", f)
            if not parts:
                continue
            where, name = parts[1], parts[2]
            step = next((v for v in levels if isinstance(v, str) and "@" in v), None)
            if name not in SCHEDULE_FIELDS and step is not None:
                raise UsageError(f"{self.named}: level {step!r} of factor {f!r} is a schedule step, "
                                 f"which the {name}'s check cannot verify; allowed: plain {name} "
                                 f"levels, or steps as levels of links.{where}.schedule (e.g. "
                                 f"'{name}={step}'), whose check verifies each took effect")
            if name in SCHEDULE_FIELDS and DEFAULT in levels:
                raise UsageError(f"{self.named}: level 'default' of factor {f!r} gives no item to "
                                 f"verify; allowed: its items as levels (no {name}: links.{where}."
                                 "schedule level 'none')")
            if name == "down" and str(base.get(f"{where}.schedule", "")).strip().lower() == "none":
                raise UsageError(f"{self.named}: [base.links] '{where}.schedule' = 'none' removes the "
                                 f"outage of factor {f!r}; allowed: no schedule there, or one with items")
            if name in SCHEDULE_FIELDS:
                setters.setdefault(where, []).append(f"factor {f!r}")
                if name != "down":
                    exact[where] = f
        for where, f in exact.items():
            if len(setters[where]) > 1:
                raise UsageError(f"{self.named}: {' and '.join(setters[where])} both set link {where}'s "
                                 f"schedule, and the check of {f!r} asks for its level's items and no "
                                 "others; allowed: one of them (an outage and steps in one schedule "
                                 "level: 'down=2s+0.5s;rate=4mbit@3s')")

    def _factor_levels(self) -> tuple[tuple[str, tuple], ...]:
        """(factor, its levels), and the cross factor's when there is one."""
        return ((self.factor, self.levels),) + (((self.cross["factor"], self.cross_levels),) if self.cross else ())

    @functools.cached_property
    def _plans(self) -> dict:
        """Each arm's Plan by label, resolved on first use and kept (with the experiment: a
        :meth:`replace` of :data:`RUN_COUNT_FIELDS` alone keeps them too)."""
        from testbed.run.plan import resolve
        plans = {}
        for lab, v, c in self.cells:
            try:
                plans[lab] = resolve(self.spec(v, cross=c))
            except UsageError as exc:
                raise UsageError(f"{self.named}, level {lab!r}: {exc}") from None
        return plans

    def draws_at_random(self) -> bool:
        """True when a frame of some arm meets a random draw on its topology
        (``TestbedTopo.draws_at_random``: random loss, jitter, a random backoff); False when
        the runs of one arm can differ only by the hosts' scheduling."""
        return any(plan.topology is not None and plan.topology.draws_at_random()
                   for plan in self.validate().values())

    def replace(self, **changes) -> "Experiment":
        new = dataclasses.replace(self, **changes)
        if "_plans" in self.__dict__ and set(changes) <= RUN_COUNT_FIELDS:
            new.__dict__["_plans"] = self._plans        # the arms' specs are the same
        return new

    def _known_or_new(self, given: list, known: tuple) -> tuple:
        """Each of ``given`` as the definition's level it names (label or value), else as a new
        value (checked when the experiment is validated)."""
        out = []
        for g in given:
            out.append(next((v for v in known if str(g) in (level_label(v), str(v))), g))
        return tuple(out)

    def with_overrides(self, *, levels: list[str] | None = None, reps: int | None = None,
                       seed: int | None = None, sets: Mapping[str, Any] | None = None,
                       warmup: int | None = None, cross_levels: list[str] | None = None) -> "Experiment":
        """The command line's ``--levels --cross-levels --reps --warmup --seed
        --set/--link/--backend`` applied.  ``--levels`` names levels of the definition or new
        values of the factor.  A ``--set`` of a factor is refused (it would erase the difference
        between arms)."""
        exp = self
        if levels:
            exp = exp.replace(levels=self._known_or_new(levels, self.levels))
        if cross_levels:
            if not self.cross:
                raise UsageError(f"--cross-levels: experiment {self.name!r} crosses no second factor")
            exp = exp.replace(cross={"factor": self.cross["factor"],
                                     "levels": self._known_or_new(cross_levels, self.cross_levels)})
        if reps is not None:
            exp = exp.replace(reps=reps)
        if warmup is not None:
            exp = exp.replace(warmup=warmup)
        if seed is not None:
            exp = exp.replace(seed=seed)
        if sets:
            spec = exp.base_spec()
            for path, value in sets.items():
                for f in exp.factors():
                    if path == f or path.startswith(f + "."):
                        raise UsageError(f"--set {path}: that is a factor of {exp.name!r}; "
                                         "choose levels with --levels")
                spec = spec.set(path, value)
            exp = exp.replace(base=spec.to_dict())
        return exp

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["levels"], d["metrics"], d["base"] = list(self.levels), list(self.metrics), dict(self.base)
        d["cross"] = {"factor": self.cross["factor"], "levels": list(self.cross_levels)} if self.cross else None
        d["models"] = [dict(m) for m in self.models]
        d.pop("source")
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "") -> "Experiment":
        """The experiment of a definition's keys (a TOML file's, a manifest's): an unknown key, a
        missing one or a value of another type than :data:`KEYS` allows is refused."""
        who = d["name"] if isinstance(d.get("name"), str) else ""
        unknown = sorted(set(d) - set(KEYS))
        if unknown:
            raise UsageError(f"experiment {who!r}: unknown key(s) "
                             f"{', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
        missing = [k for k in ("name", "factor", "levels", "base", "metrics") if k not in d]
        if missing:
            raise UsageError(f"experiment {who!r}: missing {', '.join(missing)}")
        for key, value in d.items():
            types, allowed = KEYS[key]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise UsageError(f"experiment {who!r}: {key} {value!r}; allowed: {allowed}")
        d = dict(d)
        d["levels"], d["metrics"] = parse_levels(d["levels"]), tuple(d["metrics"])
        if d.get("cross") is not None:
            c = d["cross"]
            if not isinstance(c, Mapping) or "levels" not in c:
                raise UsageError(f"experiment {who!r}: cross {c!r}; "
                                 "allowed: cross = { factor = PATH, levels = [...] }")
            d["cross"] = {**c, "levels": parse_levels(c["levels"], "cross levels")}
        if "models" in d:
            d["models"] = tuple(d["models"])
        return cls(**d, source=source)


def rebuilt_why(structural_factors, scheduled_links) -> str:
    """Why a topology is rebuilt for every run, in words ("" for no reason): what it is built
    with differs between the arms (``structural_factors``), or its links change during a run
    (``scheduled_links``)."""
    why = []
    if structural_factors:
        why.append("what it is built with (the topology, its parameters, a link, the backend or the "
                   f"link seed) differs between the arms: {', '.join(structural_factors)}")
    if scheduled_links:
        why.append("its links change during a run, from the run's start (a schedule or trace): "
                   f"{', '.join(scheduled_links)}")
    return "; ".join(why)


def file_value(path: str, value: Any, source: str | Path) -> Any:
    """``value`` of the RunSpec ``path`` as the definition file ``source`` wrote it: a schedule or
    trace file (``links.*.*.schedule``, ``links.*.*.trace``; a value without ``=`` other than
    ``none``) that exists relative to the file's directory made that file's absolute path; a
    number for a topology's or link's delay or jitter as its text (``units.delay_as_written``: a
    bare number above 1 s is refused, as on the command line); else as given."""
    parts = path.split(".")
    if parts[0] in ("topology_params", "links"):
        value = delay_as_written(path, value)
    if (len(parts) != 4 or parts[0] != "links" or parts[3] not in ("schedule", "trace") or not source
            or not isinstance(value, str) or "=" in value or value.lower() == "none"):
        return value
    there = Path(source).parent / value
    return str(there.resolve()) if not Path(value).is_absolute() and there.is_file() else value


def read_definition(path: Path | str) -> Experiment:
    """The experiment defined by the TOML file ``path`` (a topology given as a path is made
    absolute, relative to the file's directory); UsageError naming the file (``FILE: experiment
    'NAME': what is wrong; allowed: ...``), as :meth:`Experiment.validate` names it."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read experiment file {p}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                         f"{exc.start}); allowed: a TOML file, which is UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{p}: not valid TOML: {exc}") from None
    base = data.get("base")
    if isinstance(base, dict) and isinstance(base.get("topology"), str) and plugins.is_path(base["topology"]):
        data["base"] = {**base, "topology": str((p.parent / base["topology"]).resolve())}
    for table in ("topology_params", "links"):
        if isinstance(base, dict) and isinstance(base.get(table), dict):
            data["base"] = {**data["base"], table: {k: file_value(f"{table}.{k}", v, p)
                                                    for k, v in base[table].items()}}
    if isinstance(data.get("factor"), str) and isinstance(data.get("levels"), list):
        data["levels"] = [file_value(data["factor"], v, p) for v in data["levels"]]
    cross = data.get("cross")
    if isinstance(cross, dict) and isinstance(cross.get("factor"), str) and isinstance(cross.get("levels"), list):
        data["cross"] = {**cross, "levels": [file_value(cross["factor"], v, p) for v in cross["levels"]]}

    def too_few(what: str, factor: Any, levels: Any, option: str) -> None:
        # a definition compares; --levels (--cross-levels) may narrow a run to one arm
        if isinstance(levels, (list, tuple)) and len(levels) < 2:
            raise UsageError(f"{p}: experiment {data.get('name')!r}: {what} {factor!r} has "
                             f"{counted(len(levels), 'level')}; allowed: two or more levels (narrow a run "
                             f"to one with {option})")
    too_few("factor", data.get("factor"), data.get("levels"), "--levels")
    if isinstance(cross, dict):
        too_few("cross factor", cross.get("factor"), cross.get("levels"), "--cross-levels")
    try:
        exp = Experiment.from_dict(data, source=str(p))
    except UsageError as exc:
        raise UsageError(f"{p}: {exc}") from None
    too_few("factor", exp.factor, exp.levels, "--levels")
    if exp.cross is not None:
        too_few("cross factor", exp.cross["factor"], exp.cross_levels, "--cross-levels")
    return exp


def _register_definitions() -> None:
    """Register the built-in definitions, then those in the ``TESTBED_PATH`` directories."""
    for d in (BUILTIN_DIR, *plugins.search_path()):
        for p in sorted(d.glob("*.toml")):
            exp = read_definition(p)
            try:
                EXPERIMENTS.register(exp)
            except ValueError:
                raise UsageError(f"{p}: experiment {exp.name!r} is already defined by "
                                 f"{EXPERIMENTS.get(exp.name).source}") from None


#: every experiment definition by name (see the module docstring)
EXPERIMENTS: Registry[Experiment] = Registry("experiment", also="a path to a .toml file")
EXPERIMENTS.add_loader(plugins.load)
EXPERIMENTS.add_loader(_register_definitions)


def builtin_names() -> list[str]:
    """The names of the built-in definitions (``experiments/definitions``)."""
    return sorted(n for n, e in EXPERIMENTS.items() if Path(e.source).parent == BUILTIN_DIR)


def load_definition(name_or_file: str | Path) -> Experiment:
    """An experiment by name (``EXPERIMENTS``; a copy, so that the plans it resolves are its
    own, not the registry's for the rest of the process) or a TOML file by path."""
    p = Path(name_or_file)
    if p.suffix == ".toml" or p.is_file():
        return read_definition(p)
    return dataclasses.replace(EXPERIMENTS.get(str(name_or_file)))
