"""The factor registry: one record per TCP factor a run can set (``FACTORS``).

A factor has a ``name`` (the key in ``RunSpec.socket`` / ``RunSpec.host`` and, dashed, the
command-line option of ``testbed run`` and of every app), ``where`` it applies (``socket``: on
every socket of both ends before listen/connect; ``host``: in both end hosts' namespaces), a
``parse`` (value as given → canonical value, ValueError naming what is allowed), ``help``, a
``default`` (None: the kernel's own), the key under which its effect is ``readback`` (in
``tcpopts.read_back`` for a socket, ``tcpopts.apply_host`` for a host), and what it sets:
``socket_fields`` (→ ``tcpopts.SocketFactors``) and/or ``host_fields`` (→ ``tcpopts.HostFactors``).

Adding a socket option such as TCP_NOTSENT_LOWAT: one record here and one field + setsockopt +
read-back line in ``testbed/apps/tcpopts.py``; both CLIs, RunSpec validation and the apps' argv
follow from the record.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from testbed.spec.errors import UsageError
from testbed.spec.units import parse_bool, parse_size, parse_time


@dataclass(frozen=True)
class Factor:
    name: str
    where: str
    parse: Callable[[Any], Any]
    help: str
    default: Any = None
    readback: str | None = None
    socket_fields: Callable[[Any], dict] = field(default=lambda v: {})
    host_fields: Callable[[Any], dict] = field(default=lambda v: {})
    flag: bool = False          # a boolean given on the command line as a bare --name

    def __post_init__(self):
        if self.where not in ("socket", "host"):
            raise ValueError(f"factor {self.name}: where {self.where!r} must be socket or host")

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


FACTORS: dict[str, Factor] = {}


def register_factor(f: Factor) -> Factor:
    if f.name in FACTORS:
        raise ValueError(f"factor {f.name!r} is already registered")
    FACTORS[f.name] = f
    return f



def _segments(value: Any) -> int:
    n = int(value)
    if not 1 <= n <= 65535:
        raise ValueError(f"{n} must be a segment count in 1..65535")
    return n


def _advmss(value: Any) -> int:
    n = int(value)
    if not 536 <= n <= 65495:
        raise ValueError(f"advmss {n} must be bytes in 536..65495")
    return n


def _size(value: Any) -> int:
    n = parse_size(value)
    if n <= 0:
        raise ValueError(f"size {value!r} must be > 0 bytes")
    return n


CC_PATH = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def available_cc() -> list[str]:
    return CC_PATH.read_text().split()


def parse_ack(text: str) -> tuple[bool, int | None]:
    """ACK policy → (route quickack, TCP_DELACK_MAX_US or None)."""
    if text == "delayed":
        return False, None
    if text in ("quick", "quickack", "immediate"):
        return True, None
    if text.startswith("max:"):
        return False, int(round(parse_time(text[4:]) * 1e6))
    raise ValueError(f"unknown ACK policy {text!r}; allowed: delayed, quick, max:<time> (e.g. max:10ms)")


def _cc(value: Any) -> str:
    name = str(value)
    if name not in available_cc():
        raise ValueError(f"congestion control {name!r} is not available on this kernel; "
                         f"allowed: {', '.join(available_cc())}")
    return name


def _delack_us(value: Any) -> int:
    us = int(round(parse_time(value) * 1e6))
    if not 0 < us < 1_000_000:
        raise ValueError(f"delayed-ACK cap {value!r} is outside (0, 1 s)")
    return us


def _ack(value: Any) -> str:
    parse_ack(str(value))
    return str(value)


def _ack_socket(value: str) -> dict:
    delack = parse_ack(value)[1]
    return {} if delack is None else {"delack_max_us": delack}


for _f in (
    Factor("cc", "socket", _cc, "TCP_CONGESTION, e.g. reno, cubic, bbr (set on every socket, so "
           "results never depend on the namespace's default)", default="cubic", readback="cc",
           socket_fields=lambda v: {"cc": v}),
    Factor("window", "socket", _size, "shorthand: SO_SNDBUF = SO_RCVBUF = TCP_WINDOW_CLAMP = this size",
           readback="window_clamp",
           socket_fields=lambda v: {"sndbuf": v, "rcvbuf": v, "window_clamp": v}),
    Factor("sndbuf", "socket", _size, "SO_SNDBUF (FORCE as root) in bytes, e.g. 4MB", readback="sndbuf",
           socket_fields=lambda v: {"sndbuf": v}),
    Factor("rcvbuf", "socket", _size, "SO_RCVBUF (FORCE as root) in bytes", readback="rcvbuf",
           socket_fields=lambda v: {"rcvbuf": v}),
    Factor("window_clamp", "socket", _size, "TCP_WINDOW_CLAMP, the largest window advertised",
           readback="window_clamp", socket_fields=lambda v: {"window_clamp": v}),
    Factor("nodelay", "socket", parse_bool, "TCP_NODELAY (Nagle off)", default=False, readback="nodelay",
           socket_fields=lambda v: {"nodelay": v}, flag=True),
    Factor("delack_max", "socket", _delack_us, "TCP_DELACK_MAX_US as a time, e.g. 10ms (read back "
           "rounded up to the kernel tick)", readback="delack_max_us",
           socket_fields=lambda v: {"delack_max_us": v}),
    Factor("ack", "host", _ack, "ACK policy: delayed (Linux default) | quick (route quickack 1) | "
           "max:<time> (TCP_DELACK_MAX_US on every socket)", default="delayed", readback="quickack",
           socket_fields=_ack_socket,
           host_fields=lambda v: {"quickack": v in ("quick", "quickack", "immediate")}),
    Factor("initcwnd", "host", _segments, "route option initcwnd towards the peer (segments)",
           readback="initcwnd", host_fields=lambda v: {"initcwnd": v}),
    Factor("initrwnd", "host", _segments, "route option initrwnd towards the peer (segments)",
           readback="initrwnd", host_fields=lambda v: {"initrwnd": v}),
    Factor("advmss", "host", _advmss, "route option advmss towards the peer: the MSS this host "
           "advertises in its SYN, so the peer's segments carry at most advmss − 12 B of payload with "
           "TCP timestamps (1180: the chapter's 1168 B payloads; Linux default at MTU 1500: 1460)",
           readback="advmss", host_fields=lambda v: {"advmss": v}),
    Factor("slow_start_after_idle", "host", parse_bool, "net.ipv4.tcp_slow_start_after_idle (0/1) in "
           "both namespaces", default=True, readback="slow_start_after_idle",
           host_fields=lambda v: {"slow_start_after_idle": v}),
    Factor("keep_metrics", "host", parse_bool, "do not flush tcp_metrics before the run", default=False,
           readback="tcp_metrics_flushed", host_fields=lambda v: {"flush_metrics": not v}, flag=True),
):
    register_factor(_f)


def parse_all(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Canonical values of ``values`` (factor name → value as given); UsageError for an unknown
    name or a bad value."""
    names = [n for n, f in FACTORS.items() if f.where == where]
    out = {}
    for name, value in values.items():
        f = FACTORS.get(name)
        if f is None or f.where != where:
            raise UsageError(f"unknown {where} factor {name!r}; allowed: {', '.join(names)}")
        try:
            out[name] = f.parse(value)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"{where} factor {name}={value!r}: {exc}") from None
    return out


def resolved(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Canonical values with defaults filled in (factors without a default left out)."""
    out = {n: f.default for n, f in FACTORS.items() if f.where == where and f.default is not None}
    out.update(parse_all(values, where))
    return out


def namespace_effects(host: Mapping[str, Any]) -> list[str]:
    """The host factors in ``host`` that change a namespace (not only sockets, as ``ack max:T``)."""
    out = []
    for name, value in parse_all(host, "host").items():
        f = FACTORS[name]
        if f.host_fields(value) != (f.host_fields(f.default) if f.default is not None else {}):
            out.append(name)
    return out


def socket_fields(socket: Mapping[str, Any], host: Mapping[str, Any] = {}) -> dict[str, Any]:
    """``tcpopts.SocketFactors`` keyword arguments: the socket factors (in registry order, so
    ``window`` is overridden by ``sndbuf``/``rcvbuf``/``window_clamp``) and what host factors
    imply for sockets (``ack max:T``)."""
    values = {**resolved(socket, "socket"), **resolved(host, "host")}
    out: dict[str, Any] = {}
    for name, f in FACTORS.items():
        if name in values:
            out.update(f.socket_fields(values[name]))
    return out


def host_fields(host: Mapping[str, Any]) -> dict[str, Any]:
    """``tcpopts.HostFactors`` keyword arguments (without ``peer``)."""
    values = resolved(host, "host")
    out: dict[str, Any] = {}
    for name, f in FACTORS.items():
        if name in values:
            out.update(f.host_fields(values[name]))
    return out


def socket_argv(socket: Mapping[str, Any], host: Mapping[str, Any] = {}) -> list[str]:
    """App command-line options carrying the socket factors (as given) to an in-host app;
    ``ack max:T`` becomes ``--delack-max T``."""
    values = dict(socket)
    ack = host.get("ack")
    if ack is not None and str(ack).startswith("max:") and "delack_max" not in values:
        values["delack_max"] = str(ack)[4:]
    argv: list[str] = []
    for name, value in values.items():
        f = FACTORS[name]
        if f.flag:
            argv += [f.option] if f.parse(value) else []
        else:
            argv += [f.option, str(value)]
    return argv


def add_arguments(parser: argparse.ArgumentParser, where: str, title: str | None = None) -> None:
    """One option per factor of ``where``; the value is kept as given (see ``from_args``)."""
    g = parser.add_argument_group(title or f"{where} factors")
    for f in FACTORS.values():
        if f.where != where:
            continue
        default = ("" if f.default is False or (f.default is None and f.flag) else
                   " (default: not set, the kernel's own)" if f.default is None else f" (default: {f.default})")
        if f.flag:
            g.add_argument(f.option, dest=f.name, action="store_true", default=None,
                           help=f.help + default)
        else:
            g.add_argument(f.option, dest=f.name, default=None, metavar="VALUE", help=f.help + default)


def from_args(args: argparse.Namespace, where: str) -> dict[str, Any]:
    """The factors of ``where`` given on the command line (name → value as given)."""
    return {n: getattr(args, n) for n, f in FACTORS.items()
            if f.where == where and getattr(args, n, None) is not None}
