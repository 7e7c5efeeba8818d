"""``topo up`` time: host configuration over netlink (testbed.host.netlink) against one process per
setting (the peer: ``sysctl -w``, ``ip route replace``, ``ip neigh replace`` through mnexec, as
bring-up did before), measured in the same run, alternating.

    .venv/bin/python benchmarks/topo_up.py [--topo relay] [--backend userspace] [--rounds 5]

Prints per round and arm the bring-up time (``Testbed.__enter__``: Mininet build, host
configuration, static ARP, backend setup, metadata) and the medians, with /proc/loadavg: the
machine is shared, so absolute figures move with its load; the ratio is the figure to read.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from testbed.host import namespace as hosts  # noqa: E402


def spawn_set_sysctls(node, values):
    for key, value in values.items():
        hosts.run_in(node, ["sysctl", "-q", "-w", f"{key}={value}"])


def spawn_read_sysctls(node, keys):
    keys = list(keys)
    return dict(zip(keys, hosts.run_in(node, ["sysctl", "-n", *keys]).stdout.splitlines()))


def spawn_configure_routes(node, routes):
    for prefix, via in routes:
        hosts.run_in(node, ["ip", "route", "replace", prefix, "via", via])


def spawn_static_arp(links):
    count = 0
    for link in links:
        for here, there in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
            if here.IP() and there.IP():
                hosts.run_in(here.node, ["ip", "neigh", "replace", there.IP(), "lladdr", there.MAC(),
                                         "dev", here.name, "nud", "permanent"])
                count += 1
    return count


@contextlib.contextmanager
def spawning():
    """Bring-up with one process per setting (the peer); the emulator node's own two sysctls
    stay on netlink in both arms."""
    real = hosts.netlink.in_netns

    def in_netns(pid, fn, what):
        if what.endswith(": routes"):
            node = next(n for n in _nodes if n.pid == pid)
            return spawn_configure_routes(node, _routes[node.name])
        return real(pid, fn, what)
    with mock.patch.object(hosts, "set_sysctls", spawn_set_sysctls), \
            mock.patch.object(hosts, "read_sysctls", spawn_read_sysctls), \
            mock.patch("testbed.run.network.read_sysctls", spawn_read_sysctls), \
            mock.patch("testbed.run.network.static_arp", spawn_static_arp), \
            mock.patch.object(hosts.netlink, "in_netns", in_netns):
        yield


_nodes: list = []
_routes: dict = {}


def bring_up(topo: str, backend: str, results: Path) -> float:
    from testbed.run.network import Testbed
    tb = Testbed(topo, backend=backend, results_root=results)
    for name in tb.topo.hosts():
        _routes[name] = list(tb.topo.nodeInfo(name).get("routes", ()))
    orig = hosts.configure_host

    def configure(node, *a, **k):
        _nodes.append(node)
        return orig(node, *a, **k)
    t0 = time.perf_counter()
    with mock.patch("testbed.run.network.configure_host", configure):
        tb.__enter__()
    up = time.perf_counter() - t0
    tb.close()
    _nodes.clear()
    return up


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topo", default="relay", help="topology to bring up")
    p.add_argument("--backend", default="userspace", help="link backend")
    p.add_argument("--rounds", type=int, default=5, help="bring-ups per arm, alternated")
    p.add_argument("--results", default="/tmp/topo-up-bench", help="directory of the bring-ups' results")
    a = p.parse_args()
    times: dict[str, list[float]] = {"netlink": [], "spawn": []}
    bring_up(a.topo, a.backend, Path(a.results))           # warm caches (provenance, imports)
    for r in range(a.rounds):
        for arm in (("netlink", "spawn") if r % 2 == 0 else ("spawn", "netlink")):
            with (spawning() if arm == "spawn" else contextlib.nullcontext()):
                t = bring_up(a.topo, a.backend, Path(a.results))
            times[arm].append(t)
            print(f"round {r} {arm:8} {t:.3f} s   load {open('/proc/loadavg').read().split()[:3]}")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{a.topo} with {a.backend}: topo up median netlink {med['netlink']:.3f} s, "
          f"one process per setting {med['spawn']:.3f} s, ratio {med['netlink'] / med['spawn']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
