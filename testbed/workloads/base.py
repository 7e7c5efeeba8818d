"""Workload records and their registry ``WORKLOADS``: what a workload is, how its parameters
become command lines, how it is looked up.

A ``Workload`` is: ``name``, ``help``, the in-host ``module`` (its server; ``client_module``
when the client is another program), a ``params`` dataclass (defaults, and per field metadata:
``help``, ``side`` = which process gets it as ``--name`` — ``client``, ``server``, ``both`` —
or ``run`` for the orchestrator only, ``choices``, ``unit`` = size | time for validation,
``transport`` = the only transport the field applies to, see below), the server's ``port``, how
its argv are built (``client_argv``/``server_argv``), how its run directory becomes metrics
(``metrics(run_dir) -> {"metrics": {...}, "checks": {...}}``, default
``analysis.runmetrics.run_metrics``), an optional ``check(params, spec, topology)`` that
raises UsageError for a combination the workload cannot run, and an optional ``links(params, spec,
topology)``: the link settings its parameters imply (``LINK.DIR.FIELD`` → value, as ``--link``
takes them; e.g. the agent's per-round uplinks are the server link's uplink schedule), which the
resolution adds to the spec's ``links`` where the spec does not set them (so the manifest records
them) before the check.  One module per workload holds its
params, its record(s) and its check, registered where they are defined::

    BULK = WORKLOADS.register(Workload("bulk", "bulk transfer ...", "testbed.apps.bulk", BulkParams, 5001))

Transports: a params dataclass with a ``transport`` field (reqresp: ``tcp`` | ``udp``) runs each
transport with its own record, registered under the same name with ``transport`` set (reqresp
over the testbed's UDP transport: ``testbed/workloads/udpreq.py``); ``Workload.for_params``
picks it.  A field declared with ``transport=`` goes only to that transport's programs, and giving
it with another transport is a UsageError naming the fields that apply.  ``ALIASES``: other
names of a workload with parameters fixed (``udpreq`` = reqresp with transport udp), kept with
the RunSpec that resolves them (``testbed.spec.runspec``).

Both command lines are derived from the params dataclass with ``add_params``: ``testbed run
NAME`` (every field) and the app's own parser (the fields of its side), so a default is written
once and ``--help`` shows it.

A value refused is a ``ParamError`` (a UsageError) that knows which parameters its message names:
its text names them as a RunSpec, an experiment definition or a sweep writes them
(``params.think``); the command line renders them as its options (``--think``,
``ParamError.render``).  A params dataclass's ``validate`` raises one with the parameters as
``{name}`` in the message (``ParamError("{duration} 5ms is shorter than ...", "duration")``), or a
plain ValueError whose message names no parameter.
"""
from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from testbed.spec import plugins
from testbed.spec.errors import UsageError
from testbed.spec.registry import Registry
from testbed.spec.runspec import ALIASES, resolve_alias  # noqa: F401  (re-exported)
from testbed.spec.units import parse_bool, parse_size, parse_time, written

SIDES = ("client", "server", "both", "run")
UNITS = ("size", "time")      # what ``param(unit=...)`` checks a value as (None: nothing)


def param(default: Any, help: str, side: str = "client", choices: tuple | None = None,
          unit: str | None = None, transport: str | None = None) -> Any:
    """A params-dataclass field with its command-line metadata; ValueError naming what is allowed
    for an unknown ``side`` or ``unit`` (a plugin file that declares one fails to load, named)."""
    if side not in SIDES:
        raise ValueError(f"param side {side!r}; allowed: {', '.join(SIDES)}")
    if unit is not None and unit not in UNITS:
        raise ValueError(f"param unit {unit!r}; allowed: {', '.join(UNITS)} or none")
    return field(default=default, metadata={"help": help, "side": side, "choices": choices,
                                            "unit": unit, "transport": transport})


def applies(f: dataclasses.Field, transport: str | None) -> bool:
    """Whether field ``f`` applies to ``transport`` (None: any)."""
    return transport is None or f.metadata.get("transport") in (None, transport)


def transport_of(p: Any) -> str:
    """The transport params ``p`` run over (``tcp`` when the workload has no choice)."""
    return getattr(p, "transport", "tcp")


def option(name: str) -> str:
    """The command-line option of params field ``name``: ``--chunk-bytes`` for chunk_bytes."""
    return "--" + name.replace("_", "-")


def spec_path(name: str) -> str:
    """Params field ``name`` as a RunSpec, a definition file or ``--set`` names it: ``params.NAME``."""
    return f"params.{name}"


class ParamError(UsageError):
    """A workload parameter's value (or a combination) refused.  ``template`` is the message
    with each parameter it names written ``{name}`` (``names``); ``workload``, when known,
    leads the message.  ``str()`` names the parameters as ``spec_path`` does (``params.think``);
    ``render(option)`` as the command line's options (``--think``)."""

    def __init__(self, template: str, *names: str, workload: str | None = None):
        self.template, self.names, self.workload = template, names, workload
        super().__init__(self.render(spec_path))

    def render(self, name: Callable[[str], str]) -> str:
        """The message with every parameter it names written as ``name(parameter)``."""
        text = re.sub(r"\{(\w+)\}", lambda m: name(m[1]) if m[1] in self.names else m[0], self.template)
        return f"{self.workload}: {text}" if self.workload else text

    def of(self, workload: str) -> "ParamError":
        """This error, led by the name of the workload whose parameters these are."""
        return ParamError(self.template, *self.names, workload=workload)


def _check_value(f: dataclasses.Field, value: Any) -> None:
    """``value`` (coerced) of field ``f`` against its ``choices`` and ``unit`` (each of a
    comma-separated list); ValueError saying what is allowed."""
    meta = f.metadata
    if value is None:
        return
    if meta.get("choices") and value not in meta["choices"]:
        raise ValueError(f"allowed: {', '.join(map(str, meta['choices']))}")
    unit = meta.get("unit")
    for part in (str(value).split(",") if unit else ()):
        (parse_size if unit == "size" else parse_time)(part)


# --- parameters shared by workloads ------------------------------------------------------

@dataclass(frozen=True)
class Common:
    """Parameters every TCP workload of the testbed shares."""
    sample: str = param("10ms", "TCP_INFO sampling interval during transfers (0: start/end only)",
                        side="both", unit="time", transport="tcp")


# --- the record -------------------------------------------------------------------------------

def _default_metrics(run_dir: Path) -> dict:
    from analysis.runmetrics import run_metrics
    return run_metrics(run_dir)


@dataclass(frozen=True)
class Workload:
    name: str
    help: str
    module: str
    params: type
    port: int
    client_module: str | None = None
    client_command: tuple[str, ...] = ("client",)   # subcommand of the client module
    metrics: Callable[[Path], dict] = _default_metrics
    check: Callable[[Any, Any, Any], None] | None = None   # (params, spec, topology) → UsageError
    links: Callable[[Any, Any, Any], dict[str, str]] | None = None  # (params, spec, topology) → implied
    transport: str | None = None     # set: this record runs workload ``name`` over that transport
    socket_factors: bool = True      # False: its programs set no TCP socket factors (--cc, ...)

    def __post_init__(self) -> None:
        """A field of the wrong kind (a port as text, params without ``@dataclass``, metrics
        that is not a function) refused here, naming the field and what it takes (a plugin
        file that makes one fails to load, named), not later in a run."""
        def refuse(what: str, allowed: str) -> None:
            raise UsageError(f"workload {self.name!r}: {what}; allowed: {allowed}")
        if not isinstance(self.name, str) or not self.name:
            refuse(f"name {self.name!r}", "a non-empty string")
        for key in ("help", "module"):
            if not isinstance(getattr(self, key), str):
                refuse(f"{key} {getattr(self, key)!r}", "a string")
        if not self.module:
            refuse("module ''", "the module its programs run as (python -m MODULE)")
        if not (isinstance(self.params, type) and "__dataclass_fields__" in vars(self.params)):
            refuse(f"params {getattr(self.params, '__name__', self.params)!r} is not a dataclass "
                   "(a class with @dataclass of its own)",
                   "a class decorated with @dataclass(frozen=True), its fields param(...)")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            refuse(f"port {self.port!r}", "a whole number 1..65535 (the server's TCP/UDP port)")
        if not callable(self.metrics):
            refuse(f"metrics {self.metrics!r}", 'a function run_dir -> {"metrics": {...}, "checks": {...}}')
        for key in ("check", "links"):
            if getattr(self, key) is not None and not callable(getattr(self, key)):
                refuse(f"{key} {getattr(self, key)!r}", "a function (params, spec, topology) or None")

    def make_params(self, values: Mapping[str, Any] = {}) -> Any:
        """The params dataclass from ``values`` (field → value as given); UsageError names the
        allowed fields or what is wrong with a value."""
        fields = {f.name: f for f in dataclasses.fields(self.params)}
        unknown = set(values) - set(fields)
        if unknown:
            raise UsageError(f"workload {self.name!r} has no parameter(s) {sorted(unknown)}; "
                             f"allowed: {', '.join(fields)}")
        kw = {}
        for name, value in values.items():
            try:
                kw[name] = _coerce(fields[name], value)
                _check_value(fields[name], kw[name])
            except ValueError as exc:
                raise ParamError(f"{{{name}}} {written(value)}: {exc}", name, workload=self.name) from None
        try:
            p = self.params(**kw)
        except ValueError as exc:
            raise self._refused(exc) from None
        transport = transport_of(p)
        wrong = [n for n in values if not applies(fields[n], transport)]
        if wrong:
            allowed = [n for n, f in fields.items() if applies(f, transport)]
            raise UsageError(f"{self.name} over transport {transport}: {', '.join(wrong)} "
                             f"appl{'ies' if len(wrong) == 1 else 'y'} to transport "
                             f"{fields[wrong[0]].metadata['transport']} only; allowed: {', '.join(allowed)}")
        try:
            if hasattr(p, "validate"):
                p.validate()
        except ValueError as exc:
            raise self._refused(exc) from None
        return p

    def _refused(self, exc: ValueError) -> UsageError:
        """``exc``, raised by the params dataclass, led by this workload's name: a ParamError
        keeps the parameters it names (``ParamError.of``), a plain ValueError names none."""
        return exc.of(self.name) if isinstance(exc, ParamError) else UsageError(f"{self.name}: {exc}")

    def for_params(self, p: Any) -> "Workload":
        """The record that runs ``p``: the one registered for its transport, else this one."""
        return WORKLOADS.for_transport(self.name, transport_of(p)) or self

    def client_argv(self, p: Any, server: str, log: Path | str, socks: str | None = None) -> list[str]:
        """Module and arguments of the client (``python -m`` + this)."""
        return [self.client_module or self.module, *self.client_command, "--server", server,
                "--log", str(log), *(["--socks", socks] if socks else []), *params_argv(p, "client")]

    def server_argv(self, p: Any, log: Path | str, port: int | None = None) -> list[str]:
        return [self.module, "server", "--listen", f"0.0.0.0:{port or self.port}", "--log", str(log),
                *params_argv(p, "server")]


def _coerce(f: dataclasses.Field, value: Any) -> Any:
    typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    if value is None:
        return None
    if typ.startswith("bool"):
        return parse_bool(value)
    if typ.startswith("int"):
        if isinstance(value, float) and value.is_integer():
            return int(value)           # 5.0 from a TOML file or a --set; 2.7 and inf are refused
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            return int(str(value))
        except ValueError:
            raise ValueError("expected an integer") from None
    return str(value)


def params_argv(p: Any, side: str) -> list[str]:
    """``--name value`` for every field of ``side`` (and ``both``); booleans as bare flags."""
    argv: list[str] = []
    for f in dataclasses.fields(p):
        if f.metadata.get("side") not in (side, "both") or not applies(f, transport_of(p)):
            continue
        value = getattr(p, f.name)
        if value is True:
            argv.append(option(f.name))
        elif value is not None and value is not False:      # 0 is a value (0 == False)
            argv += [option(f.name), str(value)]
    return argv


def add_params(parser: argparse.ArgumentParser, params: type, sides: tuple[str, ...] = SIDES,
               defaults: bool = True, transport: str | None = None) -> None:
    """One option per field whose side is in ``sides`` (and that applies to ``transport``, None:
    every field, each marked with the transport it is for); ``--help`` shows each default.
    ``defaults=False`` leaves unset options None (the host CLI then records only what was given)."""
    for f in dataclasses.fields(params):
        meta = f.metadata
        if meta.get("side", "client") not in sides or not applies(f, transport):
            continue
        shown = f" (default: {f.default})" if f.default not in (None, False) else ""
        if transport is None and meta.get("transport") and "transport" in params.__dataclass_fields__:
            shown += f" [transport {meta['transport']} only]"
        kw: dict[str, Any] = {"dest": f.name, "help": meta.get("help", "") + shown}
        if isinstance(f.default, bool):
            kw.update(action="store_true", default=f.default if defaults else None)
        else:
            kw.update(default=f.default if defaults else None,       # --think TIME, --size SIZE
                      metavar={"time": "TIME", "size": "SIZE"}.get(meta.get("unit"), f.name.upper()))
            if meta.get("choices"):
                kw.update(choices=meta["choices"], metavar="|".join(meta["choices"]))
            if isinstance(f.default, int):
                kw["type"] = int
        parser.add_argument(option(f.name), **kw)


def from_args(args: argparse.Namespace, params: type) -> dict[str, Any]:
    """The params given on a command line parsed with ``add_params(defaults=False)``."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(params)
            if getattr(args, f.name, None) is not None}


# --- registry -----------------------------------------------------------------------------------

# ``testbed run`` options every workload shares (testbed/cli/run.py): their dests and, where the
# option is not ``--DEST``, the option's name (``--set``, ``--help``); factor names are taken too
RESERVED = ("topo", "overrides", "set", "link", "backend", "seed", "engine", "results", "client_host",
            "server_host", "capture", "full_payload", "discard_pcaps", "timeout", "json", "help",
            "workload", "func", "check_in_guest", "command", "verbose", "quiet")
# the options of a workload's own program (``testbed.apps.appcli.app_parser``, ``client_argv``):
# a parameter its program gets (side client, server or both) must not be one of them
PROGRAM_OPTIONS = ("server", "listen", "log", "socks", "role", "func", "help")


class WorkloadRegistry(Registry[Workload]):
    """``Registry`` of workloads: a record's parameter names must not collide with ``testbed
    run``'s own options (``RESERVED``), its program's (``PROGRAM_OPTIONS``: both refused when it
    registers) or a factor name (``testbed.spec.factors.FACTORS``: refused before the first
    lookup, once every record of the user's own is in; a factor of the user's own named like a
    built-in workload's parameter is the factor's fault, and a factor named like a ``testbed run``
    option is refused too); a record with ``transport`` set is kept apart: it runs the registered
    workload of its name (same params) over that transport."""

    def __init__(self) -> None:
        super().__init__("workload")
        self._transports: dict[tuple[str, str], Workload] = {}

    def register(self, w: Workload) -> Workload:
        if w.transport is not None:
            base = self._records.get(w.name)
            if base is None or base.params is not w.params or (w.name, w.transport) in self._transports:
                raise ValueError(f"workload {w.name!r} over {w.transport}: register it once, after "
                                 f"{w.name!r}, with the same params")
            self._transports[(w.name, w.transport)] = w
            return w
        _refuse_taken(w, RESERVED)
        program = sorted(f.name for f in dataclasses.fields(w.params)
                         if f.name in PROGRAM_OPTIONS and f.metadata.get("side", "client") != "run")
        if program:
            raise UsageError(f"workload {w.name!r} ({w.params.__module__}): parameter name(s) "
                             f"{', '.join(program)} collide with the options of its program "
                             f"(--{', --'.join(PROGRAM_OPTIONS[:4])}); rename them, or give them "
                             "side='run' if only the testbed reads them")
        return super().register(w)

    def for_transport(self, name: str, transport: str) -> Workload | None:
        """The record registered to run workload ``name`` over ``transport``, if any."""
        self.load()
        return self._transports.get((name, transport))

    def check_factor_names(self) -> None:
        """Refuse a parameter named like a factor (a loader: it runs after the user's records),
        blaming the newcomer: a factor of the user's own that takes the name of a built-in
        workload's parameter is refused as that factor, else the workload is."""
        from testbed.spec.factors import FACTORS
        names = set(FACTORS)
        taken = sorted(names & {*RESERVED, *PROGRAM_OPTIONS})
        if taken:
            raise UsageError(f"factor {taken[0]!r} ({_factor_origin(taken[0])}): its option "
                             f"--{taken[0].replace('_', '-')} is one of `testbed run`'s own or its "
                             "programs'; rename the factor")
        for w in self._records.values():
            clash = sorted({f.name for f in dataclasses.fields(w.params)} & names)
            if clash and _builtin(w.params.__module__):
                raise UsageError(f"factor {clash[0]!r} ({_factor_origin(clash[0])}) has the name "
                                 f"of a parameter of the built-in workload {w.name!r}: --{clash[0]} "
                                 f"would be both; rename the factor")
            _refuse_taken(w, names)


def _builtin(module: str) -> bool:
    """Whether ``module`` is one of this project's (a built-in record's), not a user's."""
    return module.split(".")[0] in ("testbed", "analysis", "experiments", "topologies")


def _factor_origin(name: str) -> str:
    """Where factor ``name`` comes from: its plugin file (``Registry.origin``), else built in."""
    from testbed.spec.factors import FACTORS
    return FACTORS.origin(name) or "built in"


def _refuse_taken(w: Workload, taken: Any) -> None:
    clash = sorted({f.name for f in dataclasses.fields(w.params)} & set(taken))
    if clash:
        raise UsageError(f"workload {w.name!r} ({w.params.__module__}): parameter name(s) "
                         f"{', '.join(clash)} collide with `testbed run` options or factor names; "
                         "rename them (e.g. request_timeout)")


#: every workload by name: the built-ins (``testbed/workloads/__init__.py`` imports their
#: modules) and the user's own (``testbed.spec.plugins``)
WORKLOADS = WorkloadRegistry()
WORKLOADS.add_loader(plugins.load)
WORKLOADS.add_loader(WORKLOADS.check_factor_names)


def get(name: str) -> Workload:
    """The workload named ``name``; UsageError naming the allowed ones."""
    return WORKLOADS.get(name)


def all_workloads() -> dict[str, Workload]:
    """Every workload by name, in the order registered."""
    return dict(WORKLOADS.items())

