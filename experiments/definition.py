"""An experiment is data: one TOML file naming a base RunSpec, ONE factor and its levels.

    name = "reuse"
    description = "new connection per request vs one kept-alive connection (C7, direct path)"
    factor = "params.mode"             # a RunSpec path (RunSpec.set / RunSpec.get)
    levels = ["new", "reuse"]          # two or more arms; "default" = the key unset (registry default)
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

Whether the topology may stay up across runs is derived from the factor (see
:func:`Experiment.topology_may_stay_up`), never declared.  ``topology`` may be a path to a
topology file of the user's own (``topology = "chain.py"``), relative to the definition's
directory; it is read as that file's absolute path.

``EXPERIMENTS`` holds every definition by name: the built-ins (``experiments/definitions/*.toml``)
and the ``*.toml`` files in the directories on ``TESTBED_PATH`` (``testbed.spec.plugins``).
"""
from __future__ import annotations

import dataclasses
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

BUILTIN_DIR = Path(__file__).resolve().parent / "definitions"
ORDERS = ("alternate", "abba", "random")
KEEP_PCAPS = ("all", "representative", "none")
DEFAULT = "default"
#: Run-level metric names of RunResult.metrics (docs/reference/metrics.md); ms for times, Mbit/s for rates.
METRICS = ("completion_ms", "completion_ms_median", "handshake_ms", "first_byte_ms", "goodput_mbps",
           "retransmissions", "retransmitted_bytes", "max_in_flight_bytes", "data_per_ack",
           "stalls", "stall_ms",
           # runmetrics: counts in the timed window, flights, SOCKS5 reply, TCP_INFO limits
           "packets_c2s", "packets_s2c", "data_packets_c2s", "data_packets_s2c", "wire_bytes",
           "flights", "flight_period_ms", "socks_ms", "socks_ms_median", "rwnd_limited_ms", "busy_ms",
           # streams / duplicate / airbulk (analysis/streams.py, multipath.py, airtime.py)
           "audio_cross_wait_max_ms", "audio_order_wait_max_ms", "audio_on_time", "audio_done_ms",
           "image_done_ms", "path_done_ms",
           "delivered_fraction", "delay_ms_median", "ack_airtime_ms", "ack_airtime_ms_model",
           "ack_exchanges", "data_airtime_ms")
#: RunSpec paths whose change needs a topology rebuilt between runs.
REBUILD_PREFIXES = ("topology", "topology_params", "links", "backend", "seed", "client_host",
                    "server_host")


def level_label(value: Any) -> str:
    """A level's name on the command line and in run directory names (``max:10ms`` -> ``max-10ms``)."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "level"


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
    source: str = field(default="", compare=False)

    def __post_init__(self):
        def bad(what, allowed):
            raise UsageError(f"experiment {self.name!r}: {what}; allowed: {allowed}")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", self.name or ""):
            bad(f"bad name {self.name!r}", "letters, digits, '-' and '_'")
        if len(self.levels) < 2:
            bad(f"factor {self.factor!r} has {len(self.levels)} level(s)", "two or more levels")
        labels = [level_label(v) for v in self.levels]
        if len(set(labels)) != len(labels):
            bad(f"levels {labels} are not distinct", "distinct level names")
        if not self.metrics:
            bad("no metrics", ", ".join(METRICS))
        for m in self.metrics:
            if m not in METRICS:
                bad(f"unknown metric {m!r}", ", ".join(METRICS))
        if self.order not in ORDERS:
            bad(f"unknown order {self.order!r}", ", ".join(ORDERS))
        if self.keep_pcaps not in KEEP_PCAPS:
            bad(f"unknown keep_pcaps {self.keep_pcaps!r}", ", ".join(KEEP_PCAPS))
        if self.reps < 1 or self.warmup < 0:
            bad(f"reps={self.reps} warmup={self.warmup}", "reps >= 1, warmup >= 0")

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(level_label(v) for v in self.levels)

    def topology_may_stay_up(self) -> bool:
        """The topology may stay up across runs (with ``--keep-topology``; by default it is
        rebuilt for every run) iff the factor is not structural: neither the topology, its
        parameters, a link, the backend nor the link seed."""
        head = self.factor.split(".")[0]
        return head not in REBUILD_PREFIXES

    def base_spec(self):
        from testbed.spec.runspec import RunSpec
        return RunSpec.from_dict(dict(self.base))

    def spec(self, level, seed: int | None = None):
        """The RunSpec of one run: the base with the factor set to ``level`` (``"default"``
        unsets it: the registry's default) and the link seed."""
        spec = self.base_spec()
        spec = spec.set(self.factor, None if level == DEFAULT else level)
        return spec if seed is None else spec.set("seed", int(seed))

    def level(self, label: str):
        for v, lab in zip(self.levels, self.labels):
            if label in (lab, str(v)):          # the label, or the value `experiment show` prints
                return v
        raise UsageError(f"experiment {self.name!r}: unknown level {label!r}; "
                         f"levels: {', '.join(self.labels)}")

    def validate(self) -> dict:
        """Refuse, before anything runs, a factor without a manipulation check and a spec the
        registries cannot take; return each level's Plan (``testbed.run.plan``) by label."""
        from experiments.checks import check_for, checked_factors
        from testbed.run.plan import resolve
        if check_for(self.factor) is None:
            raise UsageError(f"experiment {self.name!r}: no manipulation check for factor "
                             f"{self.factor!r} (a factor's record in testbed/spec/factors.py has "
                             f"one, others are added to experiments/checks.py); checked factors: "
                             f"{', '.join(checked_factors())}")
        plans = {}
        for v in self.levels:
            try:
                plans[level_label(v)] = resolve(self.spec(v))
            except UsageError as exc:
                raise UsageError(f"experiment {self.name!r}, level {level_label(v)!r}: {exc}") from None
        return plans

    def replace(self, **changes) -> "Experiment":
        return dataclasses.replace(self, **changes)

    def with_overrides(self, *, levels: list[str] | None = None, reps: int | None = None,
                       seed: int | None = None, sets: Mapping[str, Any] | None = None,
                       warmup: int | None = None) -> "Experiment":
        """The command line's ``--levels --reps --warmup --seed --set/--link/--backend`` applied; a
        ``--set`` of the factor itself is refused (it would erase the difference between arms)."""
        exp = self
        if levels:
            exp = exp.replace(levels=tuple(self.level(lab) for lab in levels))
        if reps is not None:
            exp = exp.replace(reps=reps)
        if warmup is not None:
            exp = exp.replace(warmup=warmup)
        if seed is not None:
            exp = exp.replace(seed=seed)
        if sets:
            spec = exp.base_spec()
            for path, value in sets.items():
                if path == exp.factor or path.startswith(exp.factor + "."):
                    raise UsageError(f"--set {path}: that is the factor of {exp.name!r}; "
                                     "choose levels with --levels")
                spec = spec.set(path, value)
            exp = exp.replace(base=spec.to_dict())
        return exp

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["levels"], d["metrics"], d["base"] = list(self.levels), list(self.metrics), dict(self.base)
        d.pop("source")
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "") -> "Experiment":
        names = {f.name for f in dataclasses.fields(cls)} - {"source"}
        unknown = sorted(set(d) - names)
        if unknown:
            raise UsageError(f"experiment {d.get('name', source)!r}: unknown key(s) "
                             f"{', '.join(unknown)}; allowed: {', '.join(sorted(names))}")
        missing = [k for k in ("name", "factor", "levels", "base", "metrics") if k not in d]
        if missing:
            raise UsageError(f"experiment {d.get('name', source)!r}: missing {', '.join(missing)}")
        d = dict(d)
        d["levels"], d["metrics"] = tuple(d["levels"]), tuple(d["metrics"])
        return cls(**d, source=source)


def read_definition(path: Path | str) -> Experiment:
    """The experiment defined by the TOML file ``path`` (a topology given as a path is made
    absolute, relative to the file's directory); UsageError naming the file."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read experiment file {p}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{p}: not valid TOML: {exc}") from None
    base = data.get("base")
    if isinstance(base, dict) and isinstance(base.get("topology"), str) and plugins.is_path(base["topology"]):
        data["base"] = {**base, "topology": str((p.parent / base["topology"]).resolve())}
    return Experiment.from_dict(data, source=str(p))


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
    """An experiment by name (``EXPERIMENTS``) or a TOML file by path."""
    p = Path(name_or_file)
    if p.suffix == ".toml" or p.is_file():
        return read_definition(p)
    return EXPERIMENTS.get(str(name_or_file))
