"""Host configuration inside a host's network namespace without spawning a process per setting:
sysctls through ``/proc/sys``, routes and neighbour entries through netlink (pyroute2).

Each call runs in a short-lived thread that joins the namespace of the process holding it
(``setns`` on ``/proc/PID/ns/net`` changes only the calling thread's namespace; the thread's
netlink socket and its ``/proc/sys/net`` files belong to that namespace), so the caller's own
namespace never changes.  Failures become ``SetupError`` naming the host and the setting.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from testbed.spec.errors import SetupError

CLONE_NEWNET = 0x40000000
NUD_PERMANENT = 0x80


def in_netns(pid: int, fn: Callable[[], Any], what: str) -> Any:
    """``fn()`` run in a thread inside the network namespace of process ``pid``."""
    from pyroute2.netns import setns
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            setns(f"/proc/{pid}/ns/net", flags=CLONE_NEWNET)
            box["result"] = fn()
        except BaseException as exc:   # re-raised in the caller's thread
            box["error"] = exc
    thread = threading.Thread(target=work, name=f"netns-{pid}")
    thread.start()
    thread.join()
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, SetupError):
            raise exc
        raise SetupError(f"{what}: {type(exc).__name__}: {exc}") from exc
    return box.get("result")


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def write_sysctls(values: dict[str, str]) -> None:
    """In the current thread's namespace (call through ``in_netns``)."""
    for key, value in values.items():
        try:
            _sysctl_path(key).write_text(f"{value}\n")
        except OSError as exc:
            raise SetupError(f"sysctl {key}={value}: {exc.strerror}") from None


def read_sysctls(keys: Iterable[str]) -> dict[str, str]:
    """Values as ``sysctl -n`` prints them (tabs between the fields of a vector value)."""
    return {key: _sysctl_path(key).read_text().strip() for key in keys}


def replace_routes(routes: Iterable[tuple[str, str]]) -> None:
    """``ip route replace PREFIX via GATEWAY`` for each (prefix, gateway); 'default' allowed."""
    from pyroute2 import IPRoute
    with IPRoute() as ipr:
        for prefix, via in routes:
            dst = "0.0.0.0/0" if prefix == "default" else prefix
            try:
                ipr.route("replace", dst=dst, gateway=via)
            except Exception as exc:   # pyroute2's NetlinkError and socket errors
                raise SetupError(f"route {prefix} via {via}: {exc}") from None


def permanent_neighbours(entries: Iterable[tuple[str, str, str]]) -> int:
    """``ip neigh replace IP lladdr MAC dev IFNAME nud permanent`` for each (ip, mac, ifname)."""
    from pyroute2 import IPRoute
    n = 0
    with IPRoute() as ipr:
        for ip, mac, ifname in entries:
            try:
                (index,) = ipr.link_lookup(ifname=ifname)
                ipr.neigh("replace", dst=ip, lladdr=mac, ifindex=index, state=NUD_PERMANENT)
            except Exception as exc:
                raise SetupError(f"neighbour {ip} lladdr {mac} dev {ifname}: {exc}") from None
            n += 1
    return n
