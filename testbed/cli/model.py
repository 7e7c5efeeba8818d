"""``testbed model NAME [--PARAM VALUE ...] [--json]``: evaluate one closed-form model of
CHAPTER12.md (``analysis.models``) for any parameters; ``testbed model list`` lists them.

Each model's options are derived from its parameter dataclass: one ``--name`` per field, the
field's unit deciding how a value parses (``20mbit``, ``100ms``, ``30MB``, ``14%``, ``a,b,c``
for lists, ``true``/``false``), its default shown in ``--help``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json

from testbed.cli.options import OneLineParser, add_json


class _OneLineParser(OneLineParser):
    """The CLI's one-line errors, naming the model's valid options for an unknown one."""

    def error(self, message):
        valid = [a.option_strings[-1] for a in self._actions
                 if a.option_strings and a.dest not in ("help",)]
        if not message.startswith("unrecognized arguments"):
            valid = []      # a bad value says what the option allows instead (``_named``)
        # not super(): register() binds this to the `model` command's parser too
        OneLineParser.error(self, message + (f"; valid: {', '.join(valid)}" if valid else ""))

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _named(name: str, fn):
    """``fn`` for argparse: "invalid <name> value: 'x'" and why (what the unit allows); the
    range of a value that parses is checked by the model's parameters (``analysis.models.base``)."""
    def parse(text):
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"invalid {name} value: {text!r} ({exc})") from None
    return parse


def _parser_for(unit: str):
    from testbed.spec import units

    def listed(one):
        return lambda text: tuple(one(x) for x in text.split(",") if x.strip())

    def boolean(text):
        low = text.lower()
        if low not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError("give true/false, 1/0 or yes/no")
        return low in ("true", "1", "yes")

    def count(text):
        try:
            value = float(text)
        except ValueError:
            raise ValueError("give a whole number, e.g. 10") from None
        return int(value) if value.is_integer() else value    # 1.5, inf: the range check says why
    def size(t):
        return float(units.parse_size(t))
    fn = {"B": size, "bit/s": units.parse_rate, "s": units.parse_time,
          "1": units.parse_probability, "count": count, "choice": str, "bool": boolean,
          "B list": listed(size), "s list": listed(units.parse_time),
          "bit/s list": listed(units.parse_rate)}[unit]
    return _named({"B": "size", "bit/s": "rate", "s": "time", "1": "number", "count": "whole number",
                   "bool": "true/false", "B list": "size list", "s list": "time list",
                   "bit/s list": "rate list"}.get(unit, unit), fn)


def _fmt_one(v, unit: str) -> str:
    if unit.startswith("B") and v:
        for div, suffix in ((1e6, "MB"), (2**20, "MiB"), (1e3, "KB")):
            if v >= div and v % div == 0:
                return f"{v / div:g}{suffix}"
    if unit.startswith("bit/s") and v:
        for div, suffix in ((1e6, "mbit"), (1e3, "kbit")):
            if v >= div and (v / div) == round(v / div, 3):
                return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _metavar(unit: str) -> str:
    """The option's value placeholder: the unit (``S``, ``BIT/S``), ``X`` for a pure number."""
    return "X" if unit == "1" else unit.upper().replace(" ", "_")


def _fmt_default(value, unit: str) -> str:
    """A default as the user would type it (30MB, 20mbit, 0.1)."""
    if value is None:
        return "derived"
    if isinstance(value, tuple):
        return ",".join(_fmt_one(v, unit) for v in value)
    if isinstance(value, (bool, str)):
        return str(value).lower()
    return _fmt_one(value, unit)


def register(sub) -> None:
    from analysis.models import MODELS
    p = sub.add_parser("model", help="evaluate a closed-form model of the chapter (what if?)",
                       description="Evaluate one model of CHAPTER12.md for any parameters. "
                                   "'testbed model list' lists the models.")
    p.error = _OneLineParser.error.__get__(p)   # "testbed model nosuch": one line too
    models = p.add_subparsers(dest="model_name", metavar="NAME", parser_class=_OneLineParser)
    models.required = True
    lst = models.add_parser("list", help="list the models")
    add_json(lst)
    lst.set_defaults(func=run_list)
    for m in MODELS.values():
        mp = models.add_parser(m.name, help=_titled(m.case, m.help),
                               description=f"{_titled(m.case, m.help)} (model: {m.fn.__module__}).")
        for f in dataclasses.fields(m.params):
            meta = f.metadata
            mp.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=argparse.SUPPRESS,
                            type=_parser_for(meta["unit"]),
                            choices=meta["choices"] or None,
                            metavar=None if meta["choices"] else _metavar(meta["unit"]),
                            help=f"{meta['help']} [{meta['unit']}]" + (
                                "" if "(default:" in meta["help"]
                                else f" (default: {_fmt_default(f.default, meta['unit'])})"))
        add_json(mp, "print JSON")
        mp.set_defaults(func=run)


def _titled(case: str, text: str) -> str:
    """``C6: text``, or ``text`` for a model that models no chapter case (``case=""``)."""
    return f"{case}: {text}" if case else text


def run_list(args) -> int:
    from analysis.models import MODELS
    if args.json:
        print(json.dumps([{"name": m.name, "case": m.case, "help": m.help} for m in MODELS.values()],
                         indent=1))
        return 0
    width = max(map(len, MODELS))
    for m in MODELS.values():
        print(f"{m.name:<{width}}  {m.case:<7} {m.help}")
    return 0


def _show(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ", ".join(_show(v) for v in value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def run(args) -> int:
    from analysis.models import get
    model = get(args.model_name)
    names = {f.name for f in dataclasses.fields(model.params)}
    overrides = {k: v for k, v in vars(args).items() if k in names}
    params = model.params(**overrides)
    outputs = model.outputs(params)          # a dict of Q, or one line naming the model's file
    if args.json:
        print(json.dumps({"model": model.name, "case": model.case, "params": params.to_dict(),
                          "outputs": {k: q.to_dict() for k, q in outputs.items()}}, indent=1))
        return 0
    print(f"{model.name} ({model.case}): {model.help}" if model.case else f"{model.name}: {model.help}")
    units = {f.name: f.metadata["unit"] for f in dataclasses.fields(model.params)}
    set_ = ", ".join(f"{k}={_fmt_default(v, units[k]) if isinstance(v, tuple) else _show(v)}"
                     for k, v in overrides.items())   # a list as typed: 6.4mbit,3.2mbit
    print(f"parameters: {set_ or 'the chapter defaults'}")
    width = max(map(len, outputs))
    for k, q in outputs.items():
        print(f"  {k:<{width}}  {_show(q.value):>14} {q.unit:<8} {q.help}")
    return 0
