"""TCP factors: set per run, read back, logged.

Socket factors (``SocketFactors``; set on a socket BEFORE listen()/connect() — the window
scale and initial window are fixed in the SYN, so setting buffers later silently does little;
accepted sockets inherit them from the listener):

* ``cc``: TCP_CONGESTION (one of /proc/sys/net/ipv4/tcp_available_congestion_control).
* ``sndbuf``/``rcvbuf``: SO_SNDBUF/SO_RCVBUF in bytes (Linux doubles the value for overhead
  and reads the doubled value back; as root the FORCE variants lift the net.core.*mem_max cap).
  Setting them turns off the kernel's buffer autotuning for that socket.  ``window_clamp``: TCP_WINDOW_CLAMP, the largest window
  this end advertises.  ``--window W`` sets all three to W.
  Linux >= 6.7 (seen on 6.18) overrides TCP_WINDOW_CLAMP once data flows: when the first
  full-sized segment changes the receive "scaling ratio" (payload / skb truesize), the kernel
  recomputes window_clamp = SO_RCVBUF × ratio (e.g. 64,000 → 78,000+).  Receivers therefore set
  TCP_WINDOW_CLAMP again after their first data arrived (``reassert_clamp``; logged as a
  ``factors`` event with ``when: after_first_data``), which holds from then on.
* ``nodelay``: TCP_NODELAY (Nagle off).
* ``delack_max_us``: TCP_DELACK_MAX_US (Linux >= 6.15, option 46): caps how long the receiver
  delays an ACK.  Stored in jiffies, so it reads back rounded up to the tick (HZ=250: 4 ms;
  10 ms reads back 12 ms); values of one tick or less are refused (EINVAL).

Host factors (``HostFactors``; applied inside the host's network namespace by
``python -m testbed.apps.tcpopts host ...``):

* route options on a /32 route to the peer: ``quickack 1`` (ACK every segment at once — the
  "immediate" ACK policy), ``initcwnd``, ``initrwnd`` (segments), ``advmss`` (the MSS option
  this host's SYNs carry; set on both hosts it bounds both directions' segments).
* ``net.ipv4.tcp_slow_start_after_idle`` (per namespace).
* ``ip tcp_metrics flush`` (forget cached ssthresh/RTT from earlier runs).

ACK policy (``parse_ack``): ``delayed`` (Linux default), ``quick`` (route quickack 1),
``max:<time>`` (TCP_DELACK_MAX_US).  Linux never ACKs strictly every packet under delayed ACK,
so verification measures data segments per ACK in a capture.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from testbed.spec import factors
from testbed.spec.factors import available_cc, parse_ack  # noqa: F401  (parse_ack: part of this module's API)

TCP_DELACK_MAX_US = getattr(socket, "TCP_DELACK_MAX_US", 46)
ALLOWED_CC_PATH = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SSAI_PATH = Path("/proc/sys/net/ipv4/tcp_slow_start_after_idle")




@dataclass(frozen=True)
class SocketFactors:
    cc: str | None = None
    sndbuf: int | None = None
    rcvbuf: int | None = None
    window_clamp: int | None = None
    nodelay: bool = False
    delack_max_us: int | None = None

    def __post_init__(self):
        if self.cc is not None and self.cc not in available_cc():
            raise ValueError(f"congestion control {self.cc!r} is not available on this kernel; "
                             f"allowed: {', '.join(available_cc())}")
        for name in ("sndbuf", "rcvbuf", "window_clamp"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} {value} must be a positive size in bytes")
        if self.delack_max_us is not None and not 0 < self.delack_max_us < 1_000_000:
            raise ValueError(f"delayed-ACK cap {self.delack_max_us} us is outside (0, 1 s)")

    def apply(self, sock: socket.socket) -> None:
        """Set the factors; call before listen()/connect()."""
        try:
            if self.cc is not None:
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.cc.encode())
                except PermissionError:
                    raise ValueError(f"congestion control {self.cc!r} needs CAP_NET_ADMIN; without "
                                     f"it allowed: {ALLOWED_CC_PATH.read_text().strip()}") from None
            if self.sndbuf is not None:
                _set_buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF, self.sndbuf)
            if self.rcvbuf is not None:
                _set_buffer(sock, SO_RCVBUFFORCE, socket.SO_RCVBUF, self.rcvbuf)
            if self.window_clamp is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, self.window_clamp)
            if self.nodelay:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.delack_max_us is not None:
                sock.setsockopt(socket.IPPROTO_TCP, TCP_DELACK_MAX_US, self.delack_max_us)
        except OSError as exc:
            hint = ("; TCP_DELACK_MAX_US needs more than one kernel timer tick (4 ms at HZ=250)"
                    if self.delack_max_us is not None else "")
            raise ValueError(f"cannot set TCP factors {self.requested()}: {exc.strerror}{hint}") from None

    def reassert_clamp(self, sock: socket.socket) -> bool:
        """Set TCP_WINDOW_CLAMP again (see module docstring); call after the first data arrived."""
        if self.window_clamp is None:
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, self.window_clamp)
        return True

    def requested(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, False)}


def _set_buffer(sock: socket.socket, force: int, plain: int, size: int) -> None:
    """SO_*BUFFORCE (ignores net.core.[rw]mem_max; needs CAP_NET_ADMIN), else SO_*BUF."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, force, size)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, plain, size)


def read_back(sock: socket.socket) -> dict:
    """What the kernel reports for each factor on this socket."""
    out = {
        "cc": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode(),
        "sndbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        "window_clamp": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP),
        "nodelay": bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
    }
    try:
        out["delack_max_us"] = sock.getsockopt(socket.IPPROTO_TCP, TCP_DELACK_MAX_US)
    except OSError:
        out["delack_max_us"] = None
    return out


def add_socket_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per socket factor of the registry (``testbed/spec/factors.py``)."""
    factors.add_arguments(parser, "socket", "TCP socket factors (set before listen/connect)")


def socket_factors(args: argparse.Namespace) -> SocketFactors:
    """The SocketFactors of an app's command line (registry defaults for what was not given)."""
    return SocketFactors(**factors.socket_fields(factors.from_args(args, "socket")))


@dataclass(frozen=True)
class HostFactors:
    """Namespace-wide factors for traffic towards ``peer``."""
    peer: str
    quickack: bool = False
    initcwnd: int | None = None
    initrwnd: int | None = None
    advmss: int | None = None
    slow_start_after_idle: bool | None = None
    flush_metrics: bool = True

    def __post_init__(self):
        for name in ("initcwnd", "initrwnd"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= 65535:
                raise ValueError(f"{name} {value} must be a segment count in 1..65535")

    def route_options(self) -> list[str]:
        opts = []
        if self.quickack:
            opts += ["quickack", "1"]
        if self.initcwnd is not None:
            opts += ["initcwnd", str(self.initcwnd)]
        if self.initrwnd is not None:
            opts += ["initrwnd", str(self.initrwnd)]
        if self.advmss is not None:
            opts += ["advmss", str(self.advmss)]
        return opts

    def argv(self) -> list[str]:
        """Flags for ``python -m testbed.apps.tcpopts host``."""
        argv = ["--peer", self.peer]
        if self.quickack:
            argv.append("--quickack")
        if self.initcwnd is not None:
            argv += ["--initcwnd", str(self.initcwnd)]
        if self.initrwnd is not None:
            argv += ["--initrwnd", str(self.initrwnd)]
        if self.advmss is not None:
            argv += ["--advmss", str(self.advmss)]
        if self.slow_start_after_idle is not None:
            argv += ["--slow-start-after-idle", str(int(self.slow_start_after_idle))]
        if not self.flush_metrics:
            argv.append("--keep-metrics")
        return argv


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
    """Apply ``h`` in the current network namespace; return what reads back."""
    route = _ip_json(["ip", "-j", "route", "get", h.peer])[0]
    if route.get("dev") == "lo":
        if h.route_options():
            raise ValueError(f"peer {h.peer} is local (dev lo): route options need a real path; "
                             "run inside a topology host")
    else:   # always replaced, so options of an earlier run on the same hosts are gone
        subprocess.run(route_argv(h.peer, route, h.route_options()), check=True,
                       capture_output=True, text=True)
    if h.slow_start_after_idle is not None:
        SSAI_PATH.write_text(f"{int(h.slow_start_after_idle)}\n")
    if h.flush_metrics:
        subprocess.run(["ip", "tcp_metrics", "flush"], check=False, capture_output=True)
    after = _ip_json(["ip", "-j", "route", "get", h.peer])[0]
    metrics = {k: v for m in after.get("metrics", []) for k, v in m.items()}
    return {"peer": h.peer, "route": after, "quickack": metrics.get("quickack", 0),
            "initcwnd": metrics.get("initcwnd"), "initrwnd": metrics.get("initrwnd"),
            "advmss": metrics.get("advmss"),
            "slow_start_after_idle": int(SSAI_PATH.read_text()),
            "tcp_metrics_flushed": h.flush_metrics}


def main(argv: list[str] | None = None) -> int:
    from testbed.apps.appmain import guarded
    p = argparse.ArgumentParser(prog="python -m testbed.apps.tcpopts",
                                description="Apply host-wide TCP factors in this namespace; print the read-back as JSON.")
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("host")
    h.add_argument("--peer", required=True, help="the other end's IP address")
    h.add_argument("--quickack", action="store_true", help="route option quickack 1")
    h.add_argument("--initcwnd", type=int)
    h.add_argument("--initrwnd", type=int)
    h.add_argument("--advmss", type=int, help="route option advmss (bytes)")
    h.add_argument("--slow-start-after-idle", type=int, choices=(0, 1))
    h.add_argument("--keep-metrics", action="store_true", help="do not flush tcp_metrics")
    args = p.parse_args(argv)

    def run() -> int:
        ssai = None if args.slow_start_after_idle is None else bool(args.slow_start_after_idle)
        result = apply_host(HostFactors(args.peer, quickack=args.quickack, initcwnd=args.initcwnd,
                                        initrwnd=args.initrwnd, advmss=args.advmss,
                                        slow_start_after_idle=ssai,
                                        flush_metrics=not args.keep_metrics))
        json.dump(result, sys.stdout)
        print()
        return 0
    return guarded(run)


if __name__ == "__main__":
    raise SystemExit(main())
