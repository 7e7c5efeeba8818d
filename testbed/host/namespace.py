"""Commands inside a host's network namespace, and the per-host configuration every topology gets.

Names: every host resolves every other host of its topology by name (``host_names``,
``private_hosts_file``): a hosts file of its own, bind-mounted over ``/etc/hosts`` in the host's
mount namespace (Mininet starts each host's shell with ``mnexec -n``: new network *and* mount
namespaces, mounts private), so the machine's ``/etc/hosts`` is never written and the mount
vanishes with the namespace.

Sysctls, routes and neighbour entries are set in the host's namespace without a process per
setting (``testbed.host.netlink``: /proc/sys and netlink through pyroute2); everything else runs as
argv lists through ``mnexec -a PID`` (Mininet's namespace-attach helper), never through the
host's interactive shell.
"""
from __future__ import annotations

import subprocess
from collections import deque
from pathlib import Path
from typing import Any, Iterable, Sequence

from testbed.host import netlink
from testbed.spec.errors import SetupError

# Sysctls set in every host's namespace unless the topology or the user overrides them.
# tcp_no_metrics_save: no cached ssthresh/RTT carries over from one run to the next.
# tcp_rmem/tcp_wmem max 64 MiB: autotuning can reach the long-haul BDP x2 (16.65 MB, C5).
# The default congestion control is not set here: in a non-initial namespace Linux only accepts
# algorithms listed in the root namespace's tcp_allowed_congestion_control (EPERM otherwise), so
# the workloads set TCP_CONGESTION on every socket instead, and the namespace default is recorded.
# disable_ipv6: no router solicitations or MLD reports in the captures and emulator counts.
DEFAULT_SYSCTLS: dict[str, str] = {
    "net.ipv4.tcp_no_metrics_save": "1",
    "net.ipv4.tcp_slow_start_after_idle": "1",
    "net.ipv4.tcp_rmem": "4096 131072 67108864",
    "net.ipv4.tcp_wmem": "4096 16384 67108864",
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
}
OFFLOADS_OFF = ["tso", "off", "gso", "off", "gro", "off", "tx", "off"]


def ns_argv(node: Any, argv: Sequence[str]) -> list[str]:
    """argv that runs ``argv`` inside ``node``'s namespaces."""
    return ["mnexec", "-a", str(node.pid), *argv]


def run_in(node: Any, argv: Sequence[str], check: bool = True, timeout: float = 30,
           **kwargs: Any) -> subprocess.CompletedProcess:
    """Run argv in ``node`` and wait; on failure raise SetupError with the command's stderr."""
    result = subprocess.run(ns_argv(node, argv), capture_output=True, text=True, timeout=timeout,
                            **kwargs)
    if check and result.returncode != 0:
        raise SetupError(f"{node.name}: {' '.join(argv)} failed ({result.returncode}): "
                           f"{result.stderr.strip() or result.stdout.strip()}")
    return result


def set_sysctls(node: Any, values: dict[str, str]) -> None:
    netlink.in_netns(node.pid, lambda: netlink.write_sysctls(values), f"{node.name}: sysctls")


def read_sysctls(node: Any, keys: Iterable[str]) -> dict[str, str]:
    keys = list(keys)
    return netlink.in_netns(node.pid, lambda: netlink.read_sysctls(keys), f"{node.name}: sysctls")


def offloads_off(node: Any, ifname: str) -> None:
    """TSO/GSO/GRO and TX checksum offload off, so qdiscs, the emulator and captures see
    wire-sized frames with complete checksums."""
    run_in(node, ["ethtool", "-K", ifname, *OFFLOADS_OFF])


def configure_host(node: Any, sysctls: dict[str, str], router: bool = False,
                   routes: Iterable[tuple[str, str]] = (),
                   commands: Iterable[Sequence[str]] = ()) -> None:
    values = dict(DEFAULT_SYSCTLS)
    if router:
        values["net.ipv4.ip_forward"] = "1"
    values.update(sysctls)
    set_sysctls(node, values)
    for intf in node.intfList():
        if intf.name != "lo":
            offloads_off(node, intf.name)
    routes = list(routes)
    if routes:
        netlink.in_netns(node.pid, lambda: netlink.replace_routes(routes), f"{node.name}: routes")
    for argv in commands:
        run_in(node, argv)


def static_arp(links: Iterable[Any]) -> int:
    """Permanent neighbour entries for both ends of every link, so no packet waits for address
    resolution (at 100 ms one-way delay an ARP exchange would add a round trip to the first
    connection of a run, and a lost ARP reply seconds).  Returns the number of entries."""
    entries: dict[Any, list[tuple[str, str, str]]] = {}
    for link in links:
        for here, there in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
            if here.IP() and there.IP():
                entries.setdefault(here.node, []).append((there.IP(), there.MAC(), here.name))
    return sum(netlink.in_netns(node.pid, lambda e=e: netlink.permanent_neighbours(e),
                                f"{node.name}: static ARP") for node, e in entries.items())


SYSTEM_HOSTS = Path("/etc/hosts")


def host_names(hosts: Iterable[Any], links: Iterable[Any]) -> dict[str, dict[str, str]]:
    """For each host, every host's name → the address it reaches that host at: the address
    facing it (the interface by which a breadth-first walk over the links from it first reaches
    that host: on a shared link, that link's address), else the host's default address; its own
    name → its default address.  ``hosts``, ``links``: Mininet nodes and links."""
    hosts = list(hosts)
    names = {h.name for h in hosts}
    adjacent: dict[str, list[tuple[str, str | None]]] = {h.name: [] for h in hosts}
    for link in links:
        a, b = link.intf1, link.intf2
        if a.node.name in names and b.node.name in names:
            adjacent[a.node.name].append((b.node.name, b.IP()))
            adjacent[b.node.name].append((a.node.name, a.IP()))
    default = {h.name: h.IP() for h in hosts}
    out = {}
    for h in hosts:
        seen = {h.name: default[h.name]}
        todo = deque([h.name])
        while todo:
            here = todo.popleft()
            for there, ip in adjacent[here]:
                if there not in seen:
                    seen[there] = ip or default[there]
                    todo.append(there)
        out[h.name] = {n: seen.get(n) or default[n] for n in sorted(names) if seen.get(n) or default[n]}
    return out


def hosts_file_text(names: dict[str, str], system: str = "") -> str:
    """A hosts file: ``names`` (name → address) first, then the lines of ``system`` (the
    machine's /etc/hosts) that name none of them, so localhost and the machine's own name
    still resolve."""
    lines = ["# testbed: the topology's hosts, as this host reaches them"]
    lines += [f"{ip}\t{name}" for name, ip in names.items()]
    kept = [line for line in system.splitlines()
            if not set(line.split("#", 1)[0].split()[1:]) & set(names)]
    if not any(line.split("#", 1)[0].split()[1:2] for line in kept):
        kept = ["127.0.0.1\tlocalhost", "::1\tlocalhost"]
    return "\n".join(lines + ["# the machine's /etc/hosts"] + kept) + "\n"


def private_hosts_file(node: Any, path: Path, target: Path = SYSTEM_HOSTS) -> None:
    """Bind-mount ``path`` over ``target`` (/etc/hosts) in ``node``'s mount namespace only."""
    run_in(node, ["mount", "--bind", str(path), str(target)])
