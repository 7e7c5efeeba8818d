"""TCP factors in the in-host programs: set per run, read back, logged.

Every factor is a record of ``testbed.spec.factors`` (``FACTORS``, with the user's own from
``TESTBED_PATH``, loaded on the first lookup): this module only carries them out — the programs'
options (``add_socket_arguments``; ``main``'s ``host`` options), the setsockopt calls
(``SocketFactors.apply``), the namespace changes (``apply_host``) and the read-backs
(``read_back``, ``apply_host``'s result) all follow from the records.

Socket factors (``SocketFactors``) are set on a socket BEFORE listen()/connect() — the window
scale and initial window are fixed in the SYN, so setting buffers later silently does little;
accepted sockets inherit them from the listener.  What the kernel does with them:

* ``sndbuf``/``rcvbuf``: Linux doubles the value for overhead and reads the doubled value back;
  as root the FORCE variants lift the net.core.*mem_max cap.  Setting them turns off the
  kernel's buffer autotuning for that socket.
* ``window_clamp``: Linux >= 6.7 (seen on 6.18) overrides TCP_WINDOW_CLAMP once data flows: when
  the first full-sized segment changes the receive "scaling ratio" (payload / skb truesize), the
  kernel recomputes window_clamp = SO_RCVBUF × ratio (e.g. 64,000 → 78,000+).  Receivers
  therefore set TCP_WINDOW_CLAMP again after their first data arrived (``reassert_clamp``;
  logged as a ``factors`` event with ``when: after_first_data``), which holds from then on.
* ``delack_max``: TCP_DELACK_MAX_US (Linux >= 6.15, option 46) is stored in jiffies, so it reads
  back rounded up to the tick (HZ=250: 4 ms; 10 ms reads back 12 ms); values of one tick or less
  are refused (EINVAL).

Host factors (``HostFactors``) are applied inside the host's network namespace by
``python -m testbed.apps.tcpopts host --peer IP [--FACTOR VALUE ...]``: route options on a /32
route to the peer (``quickack 1`` for ``ack quick``, ``initcwnd``, ``initrwnd``, ``advmss``),
sysctls (``net.ipv4.tcp_slow_start_after_idle``) and the factors' own actions (``ip tcp_metrics
flush`` unless ``keep_metrics``).  It prints the read-back as JSON.

ACK policy (``parse_ack``): ``delayed`` (Linux default), ``quick`` (route quickack 1),
``max:<time>`` (TCP_DELACK_MAX_US).  Linux never ACKs strictly every packet under delayed ACK,
so verification measures data segments per ACK in a capture.
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from typing import Any

from testbed.spec import factors
from testbed.spec.factors import available_cc, parse_ack  # noqa: F401  (part of this module's API)


class SocketFactors:
    """The socket factors one end sets on each of its sockets: factor name → canonical value, for
    the factors of ``testbed.spec.factors`` applied on a socket (``factors.socket_fields`` expands
    ``window`` and ``ack max:T`` into them).  A value is parsed by its record (ValueError naming
    what is allowed); None leaves the factor unset.  ``sf.cc`` is the value of factor ``cc``."""

    def __init__(self, **values: Any):
        known = {f.name: f for f in factors.of("socket") if f.sets_socket}
        for name in values:
            if name not in known:
                raise ValueError(f"{name!r} is not a socket factor set on a socket; allowed: "
                                 f"{', '.join(known)}")
        self.values = {n: known[n].canonical(v) for n, v in values.items() if v is not None}

    def __getattr__(self, name: str) -> Any:
        if name != "values" and name in factors.FACTORS:
            return self.values.get(name)
        raise AttributeError(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SocketFactors) and self.values == other.values

    def __repr__(self) -> str:
        return f"SocketFactors({', '.join(f'{k}={v!r}' for k, v in self.values.items())})"

    def replace(self, **values: Any) -> "SocketFactors":
        return SocketFactors(**{**self.values, **values})

    def apply(self, sock: socket.socket) -> None:
        """Set the factors, in registry order; call before listen()/connect().  ValueError naming
        the factor the kernel refused."""
        for f in factors.of("socket"):
            if f.name in self.values:
                try:
                    f.apply(sock, self.values[f.name])
                except OSError as exc:
                    raise ValueError(f"cannot set TCP factor {f.name} {self.values[f.name]!r}: "
                                     f"{exc.strerror}") from None

    def reassert_clamp(self, sock: socket.socket) -> bool:
        """Set TCP_WINDOW_CLAMP again (see module docstring); call after the first data arrived."""
        if self.values.get("window_clamp") is None:
            return False
        factors.FACTORS.get("window_clamp").apply(sock, self.values["window_clamp"])
        return True

    def requested(self) -> dict:
        return {k: v for k, v in self.values.items() if v not in (None, False)}


def read_back(sock: socket.socket) -> dict:
    """What the kernel reports for each socket factor that reads back (its ``readback`` key;
    None where the kernel lacks the option)."""
    out = {}
    for f in factors.of("socket"):
        if f.read is not None:
            try:
                out[f.readback] = f.read(sock)
            except OSError:
                out[f.readback] = None
    return out


def add_socket_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per socket factor of the registry (``testbed/spec/factors.py``)."""
    factors.add_arguments(parser, "socket", "TCP socket factors (set before listen/connect)")


def socket_factors(args: argparse.Namespace) -> SocketFactors:
    """The SocketFactors of an app's command line (registry defaults for what was not given)."""
    return SocketFactors(**factors.socket_fields(factors.from_args(args, "socket")))


class HostFactors:
    """Namespace-wide factors for traffic towards ``peer``: host factor name → canonical value,
    the registry's defaults for those not given (ValueError naming what is allowed)."""

    def __init__(self, peer: str, **values: Any):
        self.peer = peer
        self.values = factors.resolved({k: v for k, v in values.items() if v is not None}, "host")

    def __repr__(self) -> str:
        return f"HostFactors({self.peer!r}, {', '.join(f'{k}={v!r}' for k, v in self.values.items())})"

    def route_options(self) -> list[str]:
        """The host factors' options on the route towards the peer, in registry order."""
        opts = []
        for f in factors.of("host"):
            if f.route is not None and f.name in self.values:
                value = f.route.value(self.values[f.name])
                if value is not None:
                    opts += [f.route.option, str(value)]
        return opts

    def argv(self) -> list[str]:
        """Options for ``python -m testbed.apps.tcpopts host``: the peer and every factor whose
        value is not the default."""
        given = {n: v for n, v in self.values.items() if v != factors.FACTORS.get(n).default}
        return ["--peer", self.peer] + factors.argv_of(given, "host")


def route_argv(peer: str, route: dict, options: list[str]) -> list[str]:
    """``ip route replace`` for a /32 route to ``peer`` via the path ``ip route get`` chose."""
    argv = ["ip", "route", "replace", f"{peer}/32", "dev", route["dev"]]
    if "gateway" in route:
        argv += ["via", route["gateway"]]
    if "prefsrc" in route:
        argv += ["src", route["prefsrc"]]
    return argv + options


def _ip_json(argv: list[str]) -> list[dict]:
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out) if out.strip() else []


def apply_host(h: HostFactors) -> dict:
    """Apply ``h`` in the current network namespace (the route towards the peer, always replaced
    so options of an earlier run on the same hosts are gone; sysctls; the factors' own
    ``apply``); return the peer, the route and each host factor's read-back."""
    route = _ip_json(["ip", "-j", "route", "get", h.peer])[0]
    options = h.route_options()
    if route.get("dev") == "lo":
        if options:
            raise ValueError(f"peer {h.peer} is local (dev lo): route options need a real path; "
                             "run inside a topology host")
    else:
        subprocess.run(route_argv(h.peer, route, options), check=True, capture_output=True, text=True)
    applied = {}
    for f in factors.of("host"):
        if f.name not in h.values:
            continue
        if f.sysctl is not None:
            f.sysctl.path.write_text(f"{f.sysctl.value(h.values[f.name])}\n")
        if f.apply is not None:
            applied[f.name] = f.apply(h.values[f.name])
    after = _ip_json(["ip", "-j", "route", "get", h.peer])[0]
    metrics = {k: v for m in after.get("metrics", []) for k, v in m.items()}
    out = {"peer": h.peer, "route": after}
    for f in factors.of("host"):
        if f.route is not None:
            out[f.readback] = metrics.get(f.route.option, f.route.unset)
        elif f.sysctl is not None:
            out[f.readback] = int(f.sysctl.path.read_text())
        elif f.apply is not None:
            out[f.readback] = applied.get(f.name)
    return out


def main(argv: list[str] | None = None) -> int:
    from testbed.apps.appmain import guarded
    p = argparse.ArgumentParser(prog="python -m testbed.apps.tcpopts", description="Apply host-wide "
                                "TCP factors in this namespace; print the read-back as JSON.")
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("host")
    h.add_argument("--peer", required=True, help="the other end's IP address")
    factors.add_arguments(h, "host", "host factors (testbed/spec/factors.py)")
    args = p.parse_args(argv)

    def run() -> int:
        result = apply_host(HostFactors(args.peer, **factors.from_args(args, "host")))
        json.dump(result, sys.stdout)
        print()
        return 0
    return guarded(run)


if __name__ == "__main__":
    raise SystemExit(main())
