"""The factor registry ``FACTORS``: one ``Factor`` record per TCP factor a run can set.

A record says everything about its factor, once:

* its ``name`` (the key in ``RunSpec.socket`` / ``RunSpec.host``; dashed, the option of
  ``testbed run`` and of every in-host program) and ``where`` it applies (``socket``: on every
  socket of both ends before listen/connect; ``host``: in both end hosts' namespaces);
* how its value is parsed: ``parse`` (value as given → canonical value; a canonical value parses
  to itself) and ``allowed`` (what a bad value is told: ``initcwnd 'abc': a segment count in
  1..65535``), ``help``, ``default`` (None: the kernel's own), ``flag`` (a bare ``--name``);
* how it is applied.  A socket factor: ``sockopt`` (one ``SockOpt``: setsockopt, read back with
  getsockopt) or ``apply(sock, value)`` and ``read(sock)``.  A host factor: a ``route`` option on
  the route towards the peer, a ``sysctl``, or ``apply(value)`` run in the namespace (it returns
  what reads back).  ``implies``: the values (as given) of other factors this one stands for
  (``window`` → ``sndbuf``, ``rcvbuf``, ``window_clamp``; ``ack max:T`` → ``delack_max``);
* the key of its effect in the read-back (``readback``, default its name): in every socket's
  ``factors`` event (``testbed.apps.tcpopts.read_back``) or in a host's
  ``RunResult.checks["host_factors"]`` (``testbed.apps.tcpopts.apply_host``);
* how an experiment checks it took effect (``check``): ``True`` for "the read-back equals the
  level" (on every socket of the run, or in both hosts' namespaces), a ``Verify`` of its own, or
  None (an experiment over the factor is refused).  ``experiments/checks.py`` takes the check of
  ``socket.NAME`` / ``host.NAME`` from here.

The in-host programs' options and argv (``add_arguments``, ``socket_argv``,
``testbed.apps.tcpopts``), RunSpec validation and the manipulation check all follow from the
records, so a new factor is one ``FACTORS.register(Factor(...))`` — here, or in a ``*.py`` file
of the user's own on ``TESTBED_PATH`` (see docs/adding-a-factor.md).

The records' ``apply``/``read`` functions and ``SockOpt.set``/``get`` do I/O; only the in-host
programs (``testbed.apps.tcpopts``) and the socket preflight call them.
"""
from __future__ import annotations

import argparse
import socket as _socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from testbed.spec import plugins
from testbed.spec.errors import UsageError
from testbed.spec.registry import Registry
from testbed.spec.units import parse_bool, parse_size, parse_time

WHERE = ("socket", "host")
CC_PATH = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
ALLOWED_CC_PATH = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
TCP_DELACK_MAX_US = getattr(_socket, "TCP_DELACK_MAX_US", 46)       # Linux >= 6.15
SO_SNDBUFFORCE = getattr(_socket, "SO_SNDBUFFORCE", 32)
SO_RCVBUFFORCE = getattr(_socket, "SO_RCVBUFFORCE", 33)


@dataclass(frozen=True)
class SockOpt:
    """A socket option set with setsockopt(level, option) and read back with getsockopt.
    ``kind``: int, bool or str (a NUL-terminated name such as TCP_CONGESTION's); ``force``: a
    privileged variant tried first (SO_SNDBUFFORCE lifts net.core.wmem_max), the plain option
    without CAP_NET_ADMIN."""
    level: int
    option: int
    kind: type = int
    force: int | None = None

    def set(self, sock: _socket.socket, value: Any) -> None:
        raw = value.encode() if self.kind is str else int(value)
        if self.force is not None:
            try:
                sock.setsockopt(self.level, self.force, raw)
                return
            except PermissionError:
                pass
        sock.setsockopt(self.level, self.option, raw)

    def get(self, sock: _socket.socket) -> Any:
        if self.kind is str:
            return sock.getsockopt(self.level, self.option, 16).split(b"\0")[0].decode()
        return self.kind(sock.getsockopt(self.level, self.option))


@dataclass(frozen=True)
class Route:
    """A route option (``ip route replace PEER/32 … OPTION VALUE``) on the route towards the peer.
    ``value(canonical)`` is the option's value (None: not set); ``unset`` reads back when the route
    carries no such option."""
    option: str
    value: Callable[[Any], Any] = lambda v: v
    unset: Any = None


@dataclass(frozen=True)
class Sysctl:
    """A per-namespace sysctl (``net.ipv4.tcp_slow_start_after_idle``), written as
    ``value(canonical)`` and read back as an int."""
    key: str
    value: Callable[[Any], Any] = int

    @property
    def path(self) -> Path:
        return Path("/proc/sys", *self.key.split("."))


@dataclass(frozen=True)
class Verify:
    """A manipulation check: ``fn(level, checks)`` is None when the factor took effect in a run
    whose ``RunResult.checks`` are ``checks``, else the reason the run is invalid; ``needs``: the
    keys of the checks it reads (one present suffices); ``rule``: the rule in words (reports)."""
    rule: str
    needs: tuple[str, ...]
    fn: Callable[[Any, dict], str | None]


def _nothing(value: Any) -> dict:
    """``Factor.implies`` of a factor that stands only for itself."""
    return {}


@dataclass(frozen=True)
class Factor:
    """One factor (see the module docstring for every field)."""
    name: str
    where: str
    parse: Callable[[Any], Any]
    allowed: str | Callable[[], str]
    help: str
    default: Any = None
    flag: bool = False
    readback: str = ""
    implies: Callable[[Any], dict] = _nothing
    sockopt: SockOpt | None = None
    apply: Callable[..., Any] | None = None
    read: Callable[[_socket.socket], Any] | None = None
    route: Route | None = None
    sysctl: Sysctl | None = None
    check: Verify | bool | None = None

    def __post_init__(self):
        self._check_fields()
        if self.where not in WHERE:
            raise ValueError(f"factor {self.name}: where {self.where!r} must be socket or host")
        if not self.readback:
            object.__setattr__(self, "readback", self.name)
        if self.sockopt is not None:
            if self.where != "socket":
                raise ValueError(f"factor {self.name}: a sockopt is for a socket factor")
            object.__setattr__(self, "apply", self.apply or self.sockopt.set)
            object.__setattr__(self, "read", self.read or self.sockopt.get)
        if self.where == "host" and (self.read is not None):
            raise ValueError(f"factor {self.name}: a host factor reads back through route, "
                             "sysctl or what its apply returns")
        if self.where == "socket" and (self.route or self.sysctl):
            raise ValueError(f"factor {self.name}: route and sysctl are for a host factor")
        if all(e is None for e in (self.apply, self.route, self.sysctl)) and self.implies is _nothing:
            raise ValueError(f"factor {self.name}: give how it is applied (sockopt or apply; "
                             "host: route, sysctl or apply) or what it implies")
        if self.check is True and self.where == "socket" and self.read is None:
            raise ValueError(f"factor {self.name}: check=True compares the read-back with the "
                             "level; give read (or a sockopt)")
        if self.check is True:
            object.__setattr__(self, "check", _readback_check(self))
        elif self.check is False:
            object.__setattr__(self, "check", None)

    def _check_fields(self) -> None:
        """A field of the wrong kind (``parse`` and ``allowed`` swapped, ``sysctl="net.ipv4.…"``
        for ``Sysctl("net.ipv4.…")``) refused here, naming the field, not later in a run."""
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"factor {self.name!r}: a name is letters, digits and _ (its option "
                             "dashes it)")

        def refuse(field: str, what: str) -> None:
            raise ValueError(f"factor {self.name}: {field} must be {what}, not "
                             f"{getattr(self, field)!r}")
        if not callable(self.parse):
            refuse("parse", "a function (value as given -> canonical value)")
        if not (isinstance(self.allowed, str) or callable(self.allowed)):
            refuse("allowed", "a string or a function returning one")
        if not isinstance(self.help, str):
            refuse("help", "a string")
        if self.implies is None:
            object.__setattr__(self, "implies", _nothing)
        for field in ("implies", "apply", "read"):
            value = getattr(self, field)
            if value is not None and not callable(value):
                refuse(field, "a function or None")
        for field, kind in (("sockopt", SockOpt), ("route", Route), ("sysctl", Sysctl)):
            value = getattr(self, field)
            if value is not None and not isinstance(value, kind):
                refuse(field, f"a {kind.__name__}(...)")
        if not (self.check is None or isinstance(self.check, (bool, Verify))):
            refuse("check", "True, False, None or a Verify(...)")

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def sets_socket(self) -> bool:
        """Applied on a socket itself (not only through the factors it implies)."""
        return self.where == "socket" and self.apply is not None

    def allowed_text(self) -> str:
        return self.allowed() if callable(self.allowed) else self.allowed

    def canonical(self, value: Any) -> Any:
        """``parse(value)``; UsageError ``NAME VALUE: allowed`` for a bad value."""
        try:
            return self.parse(value)
        except (ValueError, TypeError):
            raise UsageError(f"{self.name} {value!r}: {self.allowed_text()}") from None

    def default_text(self) -> str:
        """The default as ``--help`` shows it: a boolean as the 1/0 its option takes."""
        return str(int(self.default)) if isinstance(self.default, bool) else str(self.default)

    def text(self, value: Any) -> str:
        """``value`` as its option's argument (parses back to it)."""
        return str(value).lower() if isinstance(value, bool) else str(value)


FACTORS: Registry[Factor] = Registry("factor")
FACTORS.add_loader(plugins.load)          # factors of the user's own (TESTBED_PATH)


# --- checks -------------------------------------------------------------------------------

def _norm(v: Any) -> str:
    """1/True/"1"/"true" compare equal; anything else as its string."""
    text = str(v).lower()
    return {"true": "1", "false": "0"}.get(text, text)


def _host_values(checks: Mapping[str, Any], key: str) -> list:
    """Read-back ``key`` of every host whose host factors were applied."""
    return [h.get(key) for h in (checks.get("host_factors") or {}).values() if isinstance(h, dict)]


def _readback_check(f: Factor) -> Verify:
    """``check=True``: the read-back equals the level (parsed) everywhere the run reports it."""
    if f.where == "socket":
        rule = f"every socket's {f.readback} read back equals the level"
        needs = ("socket_readback",)

        def got_of(checks):
            return (checks.get("socket_readback") or {}).get(f.readback)
    else:
        rule = f"{f.readback} read back in both hosts' namespaces equals the level"
        needs = ("host_factors",)

        def got_of(checks):
            return _host_values(checks, f.readback)

    def fn(level, checks):
        try:
            want = f.parse(level)
        except (ValueError, TypeError):
            want = level
        got = got_of(checks)
        vals = set(map(_norm, got if isinstance(got, (list, tuple)) else [got]))
        return None if got and vals == {_norm(want)} else f"{f.name} {level} but read back {got}"
    return Verify(rule, needs, fn)


def _cc_check(level, ch):
    seen = sorted(set(ch["cc"]))
    return None if seen == [level] else f"cc {level} but read back {', '.join(seen) or 'nothing'}"


def _window_check(level, ch):
    adv = int(ch["max_adv_window"])
    if level in (None, "default"):
        return None
    w = parse_size(level)
    # 1.3: the kernel's window_clamp recomputation (64,000 -> ~78,000, see apps/tcpopts.py)
    return None if adv <= 1.3 * w else f"window {level} but largest advertised window {adv} B"


def _ack_check(level, ch):
    spa = float(ch["data_segments_per_ack"])
    if level == "quick" and spa > 1.05:
        return f"ack quick but {spa:.2f} data segments per ACK (want <= 1.05)"
    if level != "quick" and spa <= 1.05:
        return f"ack {level} but {spa:.2f} data segments per ACK (want > 1.05: ACKs delayed)"
    return None


def _initcwnd_check(level, ch):
    n = int(level)
    if ch.get("first_flight_segments") is None:
        got = _host_values(ch, "initcwnd")
        return None if got and all(v == n for v in got) else f"initcwnd {n} but routes read back {got}"
    first = int(ch["first_flight_segments"])
    return None if n / 2 < first <= n else f"initcwnd {n} but first flight {first} segments (want ({n / 2:g}, {n}])"


# --- parsers ------------------------------------------------------------------------------

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


def _ack(value: Any) -> str:
    parse_ack(str(value))
    return str(value)


def _cc(value: Any) -> str:
    name = str(value)
    if name not in available_cc():
        raise ValueError(name)
    return name


def count(lo: int, hi: int) -> Callable[[Any], int]:
    """A parser of whole numbers in lo..hi (ValueError otherwise, also for 1.5 and booleans)."""
    def parse(value: Any) -> int:
        if isinstance(value, float) and not value.is_integer() or isinstance(value, bool):
            raise ValueError(value)
        n = int(value)
        if not lo <= n <= hi:
            raise ValueError(n)
        return n
    return parse


def positive_size(value: Any) -> int:
    """Bytes > 0 from 16384, '16KB', '4MB' (``units.parse_size``)."""
    n = parse_size(value)
    if n <= 0:
        raise ValueError(value)
    return n


def _delack(value: Any) -> float:
    seconds = parse_time(value)
    if not 0 < seconds < 1:
        raise ValueError(value)
    return seconds


#: what ``positive_size``, ``parse_bool`` and ``count(1, 65535)`` accept, as ``Factor.allowed``
SIZE = "a size > 0 bytes, e.g. 64KB or 4MB (units B, KB, MB, GB, KiB, MiB, GiB)"
BOOL = "true or false (yes/no, on/off, 1/0)"
SEGMENTS = "a segment count in 1..65535"


# --- applying ------------------------------------------------------------------------------

def _set_cc(sock: _socket.socket, name: str) -> None:
    try:
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_CONGESTION, name.encode())
    except PermissionError:
        raise ValueError(f"congestion control {name!r} needs CAP_NET_ADMIN; without it allowed: "
                         f"{ALLOWED_CC_PATH.read_text().strip()}") from None


def _set_delack(sock: _socket.socket, seconds: float) -> None:
    try:
        sock.setsockopt(_socket.IPPROTO_TCP, TCP_DELACK_MAX_US, int(round(seconds * 1e6)))
    except OSError as exc:
        raise ValueError(f"cannot set TCP_DELACK_MAX_US to {seconds * 1e6:g} us: {exc.strerror}; it "
                         "needs Linux >= 6.15 and more than one kernel timer tick (4 ms at HZ=250)") from None


def _tcp_metrics(keep: bool) -> bool:
    """Flush the namespace's tcp_metrics (cached ssthresh/RTT of earlier runs) unless ``keep``;
    read back: whether they were flushed."""
    if not keep:
        subprocess.run(["ip", "tcp_metrics", "flush"], check=False, capture_output=True)
    return not keep


SNDBUF = SockOpt(_socket.SOL_SOCKET, _socket.SO_SNDBUF, force=SO_SNDBUFFORCE)
RCVBUF = SockOpt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, force=SO_RCVBUFFORCE)

for _f in (
    Factor("cc", "socket", _cc,
           lambda: f"not available on this kernel; available: {', '.join(available_cc())}",
           "TCP_CONGESTION, e.g. reno, cubic, bbr (set on every socket, so results never depend on "
           "the namespace's default)", default="cubic",
           sockopt=SockOpt(_socket.IPPROTO_TCP, _socket.TCP_CONGESTION, kind=str), apply=_set_cc,
           check=Verify("every socket's TCP_INFO congestion control equals the level", ("cc",),
                        _cc_check)),
    Factor("window", "socket", positive_size, SIZE,
           "shorthand: SO_SNDBUF = SO_RCVBUF = TCP_WINDOW_CLAMP = this size", readback="window_clamp",
           implies=lambda v: {"sndbuf": v, "rcvbuf": v, "window_clamp": v},
           check=Verify("largest advertised window <= 1.3 x the level (default: unchecked)",
                        ("max_adv_window",), _window_check)),
    Factor("sndbuf", "socket", positive_size, SIZE, "SO_SNDBUF (FORCE as root) in bytes, e.g. 4MB "
           "(Linux reads back twice the value)", sockopt=SNDBUF),
    Factor("rcvbuf", "socket", positive_size, SIZE, "SO_RCVBUF (FORCE as root) in bytes", sockopt=RCVBUF),
    Factor("window_clamp", "socket", positive_size, SIZE, "TCP_WINDOW_CLAMP, the largest window advertised",
           sockopt=SockOpt(_socket.IPPROTO_TCP, _socket.TCP_WINDOW_CLAMP)),
    Factor("nodelay", "socket", parse_bool, BOOL, "TCP_NODELAY (Nagle off)", default=False, flag=True,
           sockopt=SockOpt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, kind=bool)),
    Factor("delack_max", "socket", _delack, "a time in (0, 1 s), e.g. 10ms",
           "TCP_DELACK_MAX_US as a time, e.g. 10ms (read back in us, rounded up to the kernel tick)",
           readback="delack_max_us", apply=_set_delack,
           read=SockOpt(_socket.IPPROTO_TCP, TCP_DELACK_MAX_US).get),
    Factor("ack", "host", _ack, "delayed, quick or max:<time> (e.g. max:10ms)",
           "ACK policy: delayed (Linux default) | quick (route quickack 1) | max:<time> "
           "(TCP_DELACK_MAX_US on every socket)", default="delayed", readback="quickack",
           route=Route("quickack", lambda v: 1 if parse_ack(v)[0] else None, unset=0),
           implies=lambda v: {"delack_max": v[4:]} if v.startswith("max:") else {},
           check=Verify("quick: <= 1.05 data segments per ACK; delayed / max:T: > 1.05",
                        ("data_segments_per_ack",), _ack_check)),
    Factor("initcwnd", "host", count(1, 65535), SEGMENTS,
           "route option initcwnd towards the peer (segments)", route=Route("initcwnd"),
           check=Verify("first flight in (N/2, N] segments (without a first-flight measurement: the "
                        "route's initcwnd read back on both hosts equals N)",
                        ("first_flight_segments", "host_factors"), _initcwnd_check)),
    Factor("initrwnd", "host", count(1, 65535), SEGMENTS,
           "route option initrwnd towards the peer (segments)", route=Route("initrwnd")),
    Factor("advmss", "host", count(536, 65495), "bytes in 536..65495",
           "route option advmss towards the peer: the MSS this host advertises in its SYN, so the "
           "peer's segments carry at most advmss − 12 B of payload with TCP timestamps (1180: the "
           "chapter's 1168 B payloads; Linux default at MTU 1500: 1460)", route=Route("advmss")),
    Factor("slow_start_after_idle", "host", parse_bool, BOOL, "net.ipv4.tcp_slow_start_after_idle "
           "(0/1) in both namespaces", default=True, sysctl=Sysctl("net.ipv4.tcp_slow_start_after_idle"),
           check=True),
    Factor("keep_metrics", "host", parse_bool, BOOL, "do not flush tcp_metrics before the run",
           default=False, flag=True, readback="tcp_metrics_flushed", apply=_tcp_metrics),
):
    FACTORS.register(_f)


# --- what the rest of the testbed calls ------------------------------------------------------

def of(where: str) -> list[Factor]:
    """The factors of ``where``, in registry order."""
    return [f for f in FACTORS.values() if f.where == where]


def parse_all(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Canonical values of ``values`` (factor name → value as given); UsageError for an unknown
    name or a bad value."""
    known = {f.name: f for f in of(where)}
    out = {}
    for name, value in values.items():
        if name not in known:
            raise UsageError(f"unknown {where} factor {name!r}; allowed: {', '.join(known)}")
        out[name] = known[name].canonical(value)
    return out


def resolved(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Canonical values with defaults filled in (factors without a default left out)."""
    given = parse_all(values, where)
    return {f.name: given.get(f.name, f.default) for f in of(where)
            if f.name in given or f.default is not None}


def namespace_effects(host: Mapping[str, Any]) -> list[str]:
    """The host factors in ``host`` that change a namespace (not only sockets, as ``ack max:T``)."""
    out = []
    for name, value in parse_all(host, "host").items():
        f = FACTORS.get(name)
        touches = f.apply is not None or f.sysctl is not None or (
            f.route is not None and f.route.value(value) is not None)
        if touches and value != f.default:
            out.append(name)
    return out


def _implied(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The values (as given) that the factors in ``values`` (canonical, of ``where``) imply for
    other factors, in registry order."""
    out: dict[str, Any] = {}
    for f in of(where):
        if f.name in values:
            out.update(f.implies(values[f.name]))
    return out


def socket_fields(socket: Mapping[str, Any], host: Mapping[str, Any] = {}) -> dict[str, Any]:
    """What one end sets on each socket: the canonical values of the socket factors applied on a
    socket (``SockOpt``/``apply``), those given and those implied (``window``, ``ack max:T``; a
    factor given explicitly wins) — the keyword arguments of ``tcpopts.SocketFactors``."""
    given = resolved(socket, "socket")
    implied = {**_implied(resolved(host, "host"), "host"), **_implied(given, "socket")}
    values = {**resolved(implied, "socket"), **parse_all(socket, "socket")}
    return {f.name: values[f.name] for f in of("socket") if f.sets_socket and f.name in values}


def host_fields(host: Mapping[str, Any]) -> dict[str, Any]:
    """What a host applies in its namespace: the canonical host factors with defaults — the
    keyword arguments of ``tcpopts.HostFactors`` (besides ``peer``)."""
    return resolved(host, "host")


def socket_argv(socket: Mapping[str, Any], host: Mapping[str, Any] = {}) -> list[str]:
    """The in-host programs' options carrying the socket factors (as given) and what the host
    factors imply for sockets (``ack max:T`` → ``--delack-max T``)."""
    values = {**_implied(resolved(host, "host"), "host"), **socket}
    return argv_of(values, "socket")


def argv_of(values: Mapping[str, Any], where: str) -> list[str]:
    """Options for the factors in ``values`` (as given or canonical), in registry order:
    ``--name VALUE``, a flag bare when true."""
    parsed = parse_all(values, where)
    argv: list[str] = []
    for f in of(where):
        if f.name not in values:
            continue
        if f.flag:
            argv += [f.option] if parsed[f.name] else []
        else:
            argv += [f.option, f.text(values[f.name])]
    return argv


def add_arguments(parser: argparse.ArgumentParser, where: str, title: str | None = None) -> None:
    """One option per factor of ``where``; the value is kept as given (see ``from_args``)."""
    g = parser.add_argument_group(title or f"{where} factors")
    for f in of(where):
        default = ("" if f.default is False or (f.default is None and f.flag) else
                   " (default: not set, the kernel's own)" if f.default is None else
                   f" (default: {f.default_text()})")
        if f.flag:
            g.add_argument(f.option, dest=f.name, action="store_true", default=None,
                           help=f.help + default)
        else:
            g.add_argument(f.option, dest=f.name, default=None, metavar="VALUE", help=f.help + default)


def from_args(args: argparse.Namespace, where: str) -> dict[str, Any]:
    """The factors of ``where`` given on the command line (name → value as given)."""
    return {f.name: getattr(args, f.name) for f in of(where) if getattr(args, f.name, None) is not None}
