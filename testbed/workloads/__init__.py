"""The workload registry: one record per workload (``WORKLOADS``).

A ``Workload`` is: ``name``, ``help``, the in-host ``module`` (its server; ``client_module``
when the client is another program), a ``params`` dataclass (defaults, and per field metadata:
``help``, ``side`` = which process gets it as ``--name`` — ``client``, ``server``, ``both`` —
or ``run`` for the orchestrator only, ``choices``, ``unit`` = size | time for validation,
``transport`` = the only transport the field applies to, see below), the server's ``port``, how
its argv are built (``client_argv``/``server_argv``), how its run directory becomes metrics
(``metrics(run_dir) -> {"metrics": {...}, "checks": {...}}``, default
``analysis.runmetrics.run_metrics``), and an optional ``check(params, spec, topology)`` that
raises UsageError for a combination the workload cannot run.

Transports: a params dataclass with a ``transport`` field (reqresp: ``tcp`` | ``udp``) runs each
transport with its own record, registered under the same name with ``transport`` set (reqresp
over the testbed's UDP transport: ``testbed/workloads/udpreq.py``); ``Workload.for_params``
picks it.  A field declared with ``transport=`` goes only to that transport's programs, and giving
it with another transport is a UsageError naming the fields that apply.  ``ALIASES``: other
names of a workload with parameters fixed (``udpreq`` = reqresp with transport udp).

Both command lines are derived from the params dataclass with ``add_params``: ``testbed run
NAME`` (every field) and the app's own parser (the fields of its side), so a default is written
once and ``--help`` shows it.  A new workload: its app module + one ``register_workload`` call
here (or in a module listed in ``PLUGINS``).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from testbed.spec.errors import UsageError
from testbed.spec.units import parse_bool, parse_size, parse_time

SIDES = ("client", "server", "both", "run")


def param(default: Any, help: str, side: str = "client", choices: tuple | None = None,
          unit: str | None = None, transport: str | None = None) -> Any:
    """A params-dataclass field with its command-line metadata."""
    if side not in SIDES:
        raise ValueError(f"side {side!r}; allowed: {', '.join(SIDES)}")
    return field(default=default, metadata={"help": help, "side": side, "choices": choices,
                                            "unit": unit, "transport": transport})


def applies(f: dataclasses.Field, transport: str | None) -> bool:
    """Whether field ``f`` applies to ``transport`` (None: any)."""
    return transport is None or f.metadata.get("transport") in (None, transport)


def transport_of(p: Any) -> str:
    """The transport params ``p`` run over (``tcp`` when the workload has no choice)."""
    return getattr(p, "transport", "tcp")


def _check_units(p: Any) -> None:
    for f in dataclasses.fields(p):
        value, meta = getattr(p, f.name), f.metadata
        if value is None:
            continue
        if meta.get("choices") and value not in meta["choices"]:
            raise ValueError(f"{f.name} {value!r}; allowed: {', '.join(map(str, meta['choices']))}")
        unit = meta.get("unit")
        for part in (str(value).split(",") if unit else ()):
            (parse_size if unit == "size" else parse_time)(part)


# --- parameter dataclasses ------------------------------------------------------------------

@dataclass(frozen=True)
class Common:
    sample: str = param("10ms", "TCP_INFO sampling interval during transfers (0: start/end only)",
                        side="both", unit="time", transport="tcp")


@dataclass(frozen=True)
class ReqRespParams(Common):
    mode: str = param("new", "a new connection (udp: socket and transport endpoint) per request, "
                      "or one kept, warmed connection", choices=("new", "reuse"))
    requests: int = param(1, "timed requests K")
    think: str = param("0", "pause between requests", unit="time")
    warmup: int = param(10, "at most this many untimed requests to warm the kept connection "
                        "(mode reuse; warm: tcp cwnd ≥ 2 × request or two equal times, udp the "
                        "loss rate measured)")
    size: str = param("354640", "request body N (the fixed generated file)", unit="size")
    reply_size: str = param("1000", "reply size M", unit="size")
    process: str = param("30ms", "server processing time T", unit="time")
    transport: str = param("tcp", "tcp: the kernel's TCP; udp: the testbed's own transport "
                           "(testbed/transport: ARQ or RaptorQ FEC)", side="run", choices=("tcp", "udp"))
    write: str = param("one", "request write pattern: one send() or 64 KiB blocks",
                       choices=("one", "blocks"), transport="tcp")
    tls: bool = param(False, "TLS 1.3 (self-signed certificate made at run time)", side="both",
                      transport="tcp")
    resume: bool = param(False, "TLS session resumption (mode new)", transport="tcp")
    path: str = param("direct", "direct, or through the SOCKS5 gateway pair (topology relay)",
                      side="run", choices=("direct", "relay"), transport="tcp")
    relay_hosts: str = param("cgw,sgw", "client-side,server-side gateway hosts (path relay)", side="run",
                             transport="tcp")
    tunnel_buffers: str = param("16MB", "SO_SNDBUF/SO_RCVBUF of the tunnel (path relay)", side="run",
                                unit="size", transport="tcp")
    tunnel_initcwnd: int = param(256, "route initcwnd/initrwnd between the gateways (path relay; "
                                 "256 ≥ the 245 segments of the request)", side="run", transport="tcp")
    tunnel_cc: str = param("cubic", "TCP_CONGESTION of the tunnel (path relay)", side="run",
                           transport="tcp")
    connect_mode: str = param("confirmed", "relay: answer the SOCKS5 CONNECT after the far "
                              "gateway connected (confirmed) or at once (optimistic)", side="run",
                              choices=("confirmed", "optimistic"), transport="tcp")
    request_timeout: str = param("60s", "give up on a request after this long", unit="time",
                                 transport="udp")
    fec: str = param("off", "off | fixed:R | adaptive[:TARGET] (smallest r with "
                     "P(Binomial(k+r, p) <= r) >= TARGET, default 0.999)", side="both", transport="udp")
    ack_policy: str = param("every", "ACK policy: every | n:N | t:TIME | n:N,t:TIME", side="both",
                            transport="udp")
    pacing: str = param("rate:333mbit", "off | rate:R | estimate (max delivery rate x gain)",
                        side="both", transport="udp")
    loss_prior: str = param("0", "loss rate adaptive FEC assumes until it measured 100 packets",
                            side="both", transport="udp")
    backoff: bool = param(False, "halve the pacing rate once per RTT with a loss", side="both",
                          transport="udp")

    def validate(self) -> None:
        if self.requests < 1:
            raise ValueError(f"requests {self.requests} must be >= 1")
        if self.warmup < 0:
            raise ValueError(f"warmup {self.warmup} must be >= 0")
        if self.resume and not self.tls:
            raise ValueError("resume (TLS session resumption) needs tls: add --tls")
        if self.resume and self.mode != "new":
            raise ValueError("resume needs mode new: a kept-alive connection makes one handshake")
        if len(self.relay_hosts.split(",")) != 2:
            raise ValueError(f"relay_hosts {self.relay_hosts!r}: give two hosts, e.g. cgw,sgw")
        if not 1 <= self.tunnel_initcwnd <= 65535:
            raise ValueError(f"tunnel_initcwnd {self.tunnel_initcwnd} must be in 1..65535")
        if self.transport == "udp":
            from testbed.transport.config import TransportConfig
            TransportConfig.from_factors(self.fec, self.ack_policy, self.pacing, self.loss_prior,
                                         self.backoff)


@dataclass(frozen=True)
class BulkParams(Common):
    direction: str = param("up", "up: the client sends; down: the server sends", choices=("up", "down"))
    size: str | None = param(None, "bytes to transfer, e.g. 30MB (or give duration)", unit="size")
    duration: str | None = param(None, "or: transfer for this long, e.g. 10s", unit="time")

    def validate(self) -> None:
        if (self.size is None) == (self.duration is None):
            raise ValueError("bulk needs exactly one of --size or --duration")


@dataclass(frozen=True)
class AudioParams:
    transport: str = param("tcp", "transport of the stream", side="both", choices=("tcp", "udp"))
    rate: int = param(24000, "sample rate, Hz")
    sample_bytes: int = param(2, "bytes per (mono) sample")
    chunk: str = param("20ms", "chunk duration τ", unit="time")
    duration: str = param("2s", "stream length", unit="time")
    process: str = param("12ms", "server processing per chunk m", unit="time")
    buffer: str = param("40ms,45ms", "initial buffer(s) J of the players, comma-separated", unit="time")
    sample: str = param("10ms", "TCP_INFO sampling interval of the server while streaming (TCP)",
                        side="server", unit="time")


@dataclass(frozen=True)
class AgentParams(Common):
    rounds: int = param(30, "rounds N")
    screenshot: str = param("0.8MB", "upload S per round", unit="size")
    model: str = param("2s", "server think time T per round", unit="time")
    action: str = param("200", "action size A returned", unit="size")
    terminal: str = param("0.3s", "terminal work W between rounds", unit="time")
    reuse: bool = param(False, "one connection for all rounds")
    tls: bool = param(False, "TLS 1.3", side="both")

    def validate(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds {self.rounds} must be >= 1")


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
    transport: str | None = None     # set: this record runs workload ``name`` over that transport

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
            except ValueError as exc:
                raise UsageError(f"{self.name} parameter {name}={value!r}: {exc}") from None
        try:
            p = self.params(**kw)
            _check_units(p)
        except ValueError as exc:
            raise UsageError(f"{self.name}: {exc}") from None
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
            raise UsageError(f"{self.name}: {exc}") from None
        return p

    def for_params(self, p: Any) -> "Workload":
        """The record that runs ``p``: the one registered for its transport, else this one."""
        _load_plugins()
        return TRANSPORTS.get((self.name, transport_of(p)), self)

    def validate_spec(self, spec: Any, topo: Any) -> None:
        """Checks that need the spec and the topology (None: loopback), by the record that runs
        the spec's params (e.g. path relay needs the gateways, udp takes no TCP factors)."""
        p = self.make_params(spec.params)
        check = self.for_params(p).check
        if check is not None:
            check(p, spec, topo)

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
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError("expected an integer") from None
    return str(value)


def params_argv(p: Any, side: str) -> list[str]:
    """``--name value`` for every field of ``side`` (and ``both``); booleans as bare flags."""
    argv: list[str] = []
    for f in dataclasses.fields(p):
        if f.metadata.get("side") not in (side, "both") or not applies(f, transport_of(p)):
            continue
        value = getattr(p, f.name)
        option = "--" + f.name.replace("_", "-")
        if value is True:
            argv.append(option)
        elif value is not None and value is not False:      # 0 is a value (0 == False)
            argv += [option, str(value)]
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
        option = "--" + f.name.replace("_", "-")
        shown = f" (default: {f.default})" if f.default not in (None, False) else ""
        if transport is None and meta.get("transport") and "transport" in params.__dataclass_fields__:
            shown += f" [transport {meta['transport']} only]"
        kw: dict[str, Any] = {"dest": f.name, "help": meta.get("help", "") + shown}
        if isinstance(f.default, bool):
            kw.update(action="store_true", default=f.default if defaults else None)
        else:
            kw.update(default=f.default if defaults else None, metavar=f.name.upper())
            if meta.get("choices"):
                kw.update(choices=meta["choices"], metavar="|".join(meta["choices"]))
            if isinstance(f.default, int):
                kw["type"] = int
        parser.add_argument(option, **kw)


def from_args(args: argparse.Namespace, params: type) -> dict[str, Any]:
    """The params given on a command line parsed with ``add_params(defaults=False)``."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(params)
            if getattr(args, f.name, None) is not None}


# --- registry -----------------------------------------------------------------------------------

WORKLOADS: dict[str, Workload] = {}
TRANSPORTS: dict[tuple[str, str], Workload] = {}   # (name, transport) → the record running it
#: other names of a workload with parameters fixed: ``udpreq`` was reqresp over the UDP transport
#: before the transport became a parameter (experiments/fec.toml and older manifests use it)
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {"udpreq": ("reqresp", {"transport": "udp"})}
PLUGINS: tuple[str, ...] = ("testbed.workloads.udpreq", "testbed.workloads.streams")   # modules calling register_workload


# ``testbed run`` options every workload shares (testbed/cli/run.py); factor names are taken too
RESERVED = ("topo", "overrides", "link", "backend", "seed", "engine", "results", "client_host",
            "server_host", "capture", "full_payload", "discard_pcaps", "timeout", "json",
            "workload", "func", "command", "verbose", "quiet")


def register_workload(w: Workload) -> Workload:
    """Add ``w``; its parameter names must not collide with ``testbed run``'s own options
    (``RESERVED``) or a factor name (``testbed.spec.factors.FACTORS``).  With ``transport`` set, ``w``
    runs the registered workload of its name (same params) over that transport."""
    from testbed.spec.factors import FACTORS
    if w.transport is not None:
        base = WORKLOADS.get(w.name)
        if base is None or base.params is not w.params or (w.name, w.transport) in TRANSPORTS:
            raise ValueError(f"workload {w.name!r} over {w.transport}: register it once, after "
                             f"{w.name!r}, with the same params")
        TRANSPORTS[(w.name, w.transport)] = w
        return w
    if w.name in WORKLOADS:
        raise ValueError(f"workload {w.name!r} is already registered")
    taken = sorted({f.name for f in dataclasses.fields(w.params)} & (set(RESERVED) | set(FACTORS)))
    if taken:
        raise ValueError(f"workload {w.name!r}: parameter name(s) {', '.join(taken)} collide with "
                         "`testbed run` options or factor names; rename them (e.g. request_timeout)")
    WORKLOADS[w.name] = w
    return w


def get(name: str) -> Workload:
    _load_plugins()
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}; allowed: {', '.join(WORKLOADS)}") from None


def resolve_alias(name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(workload, params) for ``name``: an alias becomes its workload with its fixed parameters
    (UsageError when ``params`` give one of them another value)."""
    if name not in ALIASES:
        return name, dict(params)
    target, fixed = ALIASES[name]
    clash = [k for k, v in fixed.items() if k in params and params[k] != v]
    if clash:
        raise UsageError(f"workload {name!r} is {target} with " + ", ".join(
            f"{k} {v}" for k, v in fixed.items()) + f"; it cannot take {clash[0]}={params[clash[0]]!r}")
    return target, {**params, **fixed}


def all_workloads() -> dict[str, Workload]:
    _load_plugins()
    return WORKLOADS


def _load_plugins() -> None:
    """Import the plugin modules; one that fails to register is reported and left out."""
    for module in PLUGINS:
        try:
            importlib.import_module(module)
        except (ValueError, ImportError) as exc:
            logging.getLogger(__name__).error("workload plugin %s left out: %s", module, exc)


def _check_reqresp(p: ReqRespParams, spec: Any, topo: Any) -> None:
    if p.path == "relay" and topo is not None:
        hosts = set(topo.hosts())
        missing = [h for h in p.relay_hosts.split(",") if h not in hosts]
        if missing:
            raise UsageError(f"path relay needs the gateway hosts {p.relay_hosts} (topology relay); "
                             f"topology {spec.topology!r} has no {', '.join(missing)}")


register_workload(Workload("reqresp", "request/response (C7)", "testbed.apps.reqresp", ReqRespParams,
                           5000, check=_check_reqresp))
register_workload(Workload("bulk", "bulk transfer by size or duration, either direction",
                           "testbed.apps.bulk", BulkParams, 5001))
register_workload(Workload("audio", "streaming audio (C9) with the playback model", "testbed.apps.audio",
                           AudioParams, 5002))
register_workload(Workload("agent", "screenshot agent loop (C13)", "testbed.apps.reqresp", AgentParams,
                           5000, client_module="testbed.apps.agent", client_command=()))
