"""The model registry ``MODELS``: one record per model, parameters as a frozen dataclass, outputs
with units.

A model is a plain function ``fn(params) -> dict[str, Q]`` (no I/O).  Its parameter dataclass
declares every field with :func:`param`: the default (the chapter's value, CHAPTER12.md), the unit
and a help text.  Units of parameters are base units — ``B`` (bytes), ``bit/s``, ``s``, ``1``
(dimensionless), ``count`` — so human strings parse with :mod:`testbed.spec.units` (``20mbit``,
``100ms``, ``30MB``, ``14%``).  Outputs carry their own, reader-friendly unit (ms, Mbit/s, ...).

    evaluate("fec", loss=0.05, packets=100)["fec_repair"].value   # -> 14 repair symbols
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from testbed.spec import plugins
from testbed.spec.registry import Registry

#: parameter units -> what a value means; "choice" and "bool" are not numbers.
PARAM_UNITS = ("B", "bit/s", "s", "1", "count", "choice", "bool", "B list", "s list", "bit/s list")
#: the largest value of a number of each unit (of a list's items too) where :func:`param` gives
#: no ``high``: generous (the chapter's values are at most thousands of rounds, chunks or packets
#: and sizes of ~100 MB) and small enough that every model evaluates in about a second
UNIT_HIGH = {"count": 100_000, "B": 1e12, "bit/s": 1e12, "s": 1e6, "1": 1e6}


def param(default: Any, unit: str, help: str, *, low: float | None = 0, high: float | None = None,
          choices: tuple = (), positive: bool = False):
    """A model parameter: default, unit (one of PARAM_UNITS), help, and its valid range (``high``
    defaults to the unit's ``UNIT_HIGH``)."""
    if unit not in PARAM_UNITS:
        raise ValueError(f"unknown parameter unit {unit!r}; allowed: {PARAM_UNITS}")
    meta = {"unit": unit, "help": help, "low": low, "high": high, "choices": choices,
            "positive": positive}
    if isinstance(default, (list, tuple)):
        return field(default=tuple(default), metadata=meta)
    return field(default=default, metadata=meta)


def _check(name: str, value: Any, meta: dict) -> None:
    unit = meta["unit"]
    if unit == "choice":
        if value not in meta["choices"]:
            raise ValueError(f"--{name.replace('_', '-')} {value!r} is not allowed; "
                             f"allowed: {', '.join(meta['choices'])}")
        return
    if unit == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"--{name.replace('_', '-')} {value!r} must be true or false")
        return
    if value is None:
        return  # "derived from the other parameters"
    values = value if unit.endswith("list") else (value,)
    if unit.endswith("list") and not values:
        raise ValueError(f"--{name.replace('_', '-')} needs at least one value")
    low, high = meta["low"], meta["high"]
    if high is None:
        high = UNIT_HIGH[unit.removesuffix(" list")]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or (unit == "count" and v != int(v)) or (low is not None and v < low) or v > high \
                or (meta["positive"] and v <= 0):
            rng = f"{'>' if meta['positive'] else '>='} {low} and " if low is not None else ""
            raise ValueError(f"--{name.replace('_', '-')} {v!r} out of range; must be "
                             f"{'a whole number ' if unit == 'count' else ''}{rng}<= {high:g}"
                             + (f" ({unit})" if unit != "1" else ""))


@dataclass(frozen=True)
class Params:
    """Base of every parameter dataclass: validates each field against its :func:`param` metadata."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            _check(f.name, getattr(self, f.name), f.metadata)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class Q:
    """One model output: value (number, bool or list of numbers), unit, and what it is."""
    value: Any
    unit: str
    help: str = ""

    def to_dict(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"value": value, "unit": self.unit, "help": self.help}


#: names a model or a parameter cannot take: ``testbed model list`` is a command, and the
#: options and attributes of ``testbed model NAME`` (``--json``, ``--help``) are its own
RESERVED_MODEL_NAMES = ("list",)
RESERVED_PARAM_NAMES = ("json", "help", "model_name", "func", "command", "verbose", "quiet", "to_dict")


@dataclass(frozen=True)
class Model:
    """name: CLI name; case: chapter case(s) (e.g. "C6", or ""); help: one line; params: the
    dataclass (a ``Params`` subclass decorated with ``@dataclass(frozen=True)``, every field a
    :func:`param`); fn: params -> dict of named outputs (Q).  A record of the wrong shape is
    refused when it is made (ValueError naming the model and what is allowed; a plugin file
    that makes one fails to load, named); outputs of the wrong shape when it runs
    (:meth:`outputs`: UsageError naming the model's file)."""
    name: str
    case: str
    help: str
    params: type
    fn: Callable[[Any], dict[str, Q]]

    def __post_init__(self):
        def refuse(what: str, allowed: str) -> None:
            raise ValueError(f"model {self.name!r}: {what}; allowed: {allowed}")
        if not isinstance(self.name, str) or not self.name or self.name in RESERVED_MODEL_NAMES:
            refuse(f"name {self.name!r}", "a non-empty name other than " + ", ".join(RESERVED_MODEL_NAMES))
        for key in ("case", "help"):
            if not isinstance(getattr(self, key), str):
                refuse(f"{key} {getattr(self, key)!r}", "a string (case: the chapter case, e.g. C6, or '')")
        params = self.params
        if not (isinstance(params, type) and issubclass(params, Params)):
            refuse(f"params {getattr(params, '__name__', params)!r} is not a Params subclass",
                   "@dataclass(frozen=True) class XParams(Params) with fields param(default, unit, help)")
        if "__dataclass_fields__" not in vars(params):
            refuse(f"params {params.__name__} has no @dataclass of its own (its fields would be "
                   "plain class attributes: no parameters)",
                   f"@dataclass(frozen=True) on the line before class {params.__name__}")
        for f in dataclasses.fields(params):
            if "unit" not in f.metadata:
                refuse(f"parameter {f.name} of {params.__name__} is not declared with param()",
                       f"{f.name}: float = param(default, unit, help), unit one of {', '.join(PARAM_UNITS)}")
            if f.name in RESERVED_PARAM_NAMES:
                refuse(f"parameter name {f.name!r} (an option or attribute of testbed model itself)",
                       "any other name, not " + ", ".join(RESERVED_PARAM_NAMES))
        if not callable(self.fn):
            refuse(f"fn {self.fn!r}", "a function params -> {name: Q(value, unit, help)}")

    def outputs(self, params: Any) -> dict[str, Q]:
        """``fn(params)``, checked: a dict of output names to ``Q``; UsageError naming the model,
        its file, the output and what is allowed otherwise."""
        from testbed.spec.errors import UsageError
        out = self.fn(params)
        where = f"model {self.name!r} ({plugins.source_of(self.fn)})"
        allowed = "allowed: a dict {name: Q(value, unit, help)}"
        if not isinstance(out, dict) or not out:
            raise UsageError(f"{where} returned {type(out).__name__} {out!r:.60}; {allowed}")
        for key, q in out.items():
            if not isinstance(key, str) or not isinstance(q, Q):
                raise UsageError(f"{where}: output {key!r} is {type(q).__name__} {q!r:.60}, "
                                 f"not a Q; {allowed}")
        return out

    def evaluate(self, **overrides) -> dict[str, Q]:
        known = {f.name for f in dataclasses.fields(self.params)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"model {self.name}: unknown parameter(s) {', '.join(unknown)}; "
                             f"valid: {', '.join(sorted(known))}")
        return self.outputs(self.params(**overrides))


#: every model by name: the built-ins (``analysis/models/__init__.py`` imports their modules)
#: and the user's own (``testbed.spec.plugins``)
MODELS: Registry[Model] = Registry("model")
MODELS.add_loader(plugins.load)


def register(name: str, case: str, help: str, params: type):
    """Decorator: register ``fn`` as model ``name`` (a ``Model`` in ``MODELS``)."""
    def wrap(fn):
        MODELS.register(Model(name, case, help, params, fn))
        return fn
    return wrap


def get(name: str) -> Model:
    """The model named ``name``; UsageError naming the allowed ones."""
    return MODELS.get(name)


def evaluate(name: str, **overrides) -> dict[str, Q]:
    """Evaluate model ``name`` with parameter overrides (base units)."""
    return get(name).evaluate(**overrides)
