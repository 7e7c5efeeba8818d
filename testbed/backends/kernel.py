"""Kernel backend: htb for the rate, netem for delay, jitter, loss and limit, per direction.

Each direction a→b is shaped on a's egress interface (Mininet's TCLink applies one parameter set
to both ends and cannot express the asymmetric long-haul path).  For a LinkSpec the qdisc tree is

    root  1:   htb default 1            (only when rate is set)
    class 1:1  htb rate R ceil R quantum <frame> overhead O
    leaf  10:  netem delay D' [J'] loss ... limit L [seed S]      (parent 1:1, or root)
    leaf  11:  pfifo limit L            (parent 10:1, only with jitter and reorder=False)

* Delay and jitter: LinkSpec's extra delay is uniform in [0, jitter]; netem's ``delay D J`` is
  uniform in [D−J, D+J], so D' = delay + jitter/2 and J' = jitter/2.  netem reorders jittered
  packets (its tfifo sorts by send time); a pfifo child makes it release in arrival order, each
  packet waiting for the one ahead — the LinkSpec's no-reorder semantics (tc-netem(8)).
* Loss: ``loss random P%`` or ``loss gemodel p% r% 1-h% 1-k%``.  netem drops at enqueue, so a lost
  packet does not use the htb rate (the userspace emulator drops after serialization).
* Limit: netem holds the packets of the delay line *and* those waiting for htb, so its limit is
  the delay line in full-size frames (rate × (delay + jitter)) plus the LinkSpec's bottleneck
  buffer.  netem's default of 1000 packets would silently drop on the long-haul path.
  Byte limits and drop lists cannot be expressed here: they are rejected with a clear error.
"""
from __future__ import annotations

import secrets
import subprocess
from functools import lru_cache
from typing import Any

from mininet.link import Link

from testbed.host.namespace import run_in
from testbed.spec.linkspec import Bernoulli, DropList, GilbertElliott, LinkSpec

UNSHAPED_LIMIT = 100_000  # netem limit when the rate is unshaped: the delay line is unbounded


def _pct(p: float) -> str:
    return f"{p * 100:.6g}%"


def _usec(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}us"


def netem_limit(spec: LinkSpec) -> int:
    if spec.queue_bytes is not None and spec.queue_packets is None:
        raise ValueError("the netem backend limits queues in packets; give the queue in packets "
                         "(e.g. queue=5000) or use --backend userspace for a byte limit")
    if spec.rate is None:
        return UNSHAPED_LIMIT
    return spec.delay_line_packets + (spec.queue_limit_packets or 0)


def netem_args(spec: LinkSpec, seed: int | None = None) -> list[str]:
    """The netem parameters for ``spec`` (after ``netem``)."""
    args = ["delay", _usec(spec.delay + spec.jitter / 2)]
    if spec.jitter:
        args.append(_usec(spec.jitter / 2))
    loss = spec.loss
    if isinstance(loss, DropList):
        raise ValueError("drop lists exist only in the userspace emulator; use --backend userspace")
    if isinstance(loss, GilbertElliott):
        args += ["loss", "gemodel", _pct(loss.p), _pct(loss.r), _pct(loss.loss_bad),
                 _pct(loss.loss_good)]
    elif isinstance(loss, Bernoulli) and loss.p > 0:
        args += ["loss", "random", _pct(loss.p)]
    args += ["limit", str(netem_limit(spec))]
    if seed is not None:
        args += ["seed", str(seed)]
    return args


def qdisc_commands(ifname: str, spec: LinkSpec, seed: int | None = None) -> list[list[str]]:
    """tc argv lists that impose ``spec`` on the egress of ``ifname``."""
    cmds = []
    netem_parent = ["root"]
    if spec.rate is not None:
        cmds.append(["tc", "qdisc", "replace", "dev", ifname, "root", "handle", "1:", "htb",
                     "default", "1"])
        cmds.append(["tc", "class", "add", "dev", ifname, "parent", "1:", "classid", "1:1", "htb",
                     "rate", f"{spec.rate:.0f}bit", "ceil", f"{spec.rate:.0f}bit",
                     "quantum", str(spec.frame_bytes), "overhead", str(spec.overhead)])
        netem_parent = ["parent", "1:1"]
    verb = "replace" if netem_parent == ["root"] else "add"
    cmds.append(["tc", "qdisc", verb, "dev", ifname, *netem_parent, "handle", "10:", "netem",
                 *netem_args(spec, seed)])
    if spec.jitter and not spec.reorder:
        cmds.append(["tc", "qdisc", "add", "dev", ifname, "parent", "10:1", "handle", "11:",
                     "pfifo", "limit", str(netem_limit(spec))])
    return cmds


class NetemLink(Link):
    """A veth link with ``spec_ab`` on node1's egress and ``spec_ba`` on node2's."""

    def __init__(self, node1, node2, spec_ab: LinkSpec | None = None,
                 spec_ba: LinkSpec | None = None, seed: int | None = None, medium: Any = None,
                 **params: Any):
        if medium is not None:
            raise ValueError("the shared Wi-Fi medium exists only in the userspace emulator; "
                             "use --backend userspace")
        super().__init__(node1, node2, **params)
        self.specs = (spec_ab, spec_ba)
        for intf, spec, salt in ((self.intf1, spec_ab, 0), (self.intf2, spec_ba, 1)):
            if spec is not None and not spec.unimpaired:
                for argv in qdisc_commands(intf.name, spec, None if seed is None else seed + salt):
                    run_in(intf.node, argv)


def netem_seed_supported(node) -> bool:
    """Whether tc and the kernel accept netem's ``seed`` (iproute2 and Linux ≥ 6.5; Debian 12's
    tc answers 'What is "seed"?'), tried on the loopback of ``node``'s namespace."""
    ok = run_in(node, ["tc", "qdisc", "replace", "dev", "lo", "root", "netem", "delay", "0ms",
                       "seed", "1"], check=False).returncode == 0
    run_in(node, ["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    return ok


class KernelBackend:
    """Without netem seed support the loss pattern is not reproducible; ``summary()`` says so."""
    name = "netem"

    def __init__(self, seed: int = 1):
        self.seed = seed
        self.seeded: bool | None = None
        self._links: list[NetemLink] = []

    def link_class(self):
        def make(node1, node2, **params):
            if self.seeded is None:
                self.seeded = netem_seed_supported(node1)
            seed = self.seed + 2 * len(self._links) if self.seeded else None
            link = NetemLink(node1, node2, seed=seed, **params)
            self._links.append(link)
            return link
        return make

    def setup(self, net, run) -> None:
        pass

    def teardown(self) -> None:
        pass

    def summary(self) -> dict[str, Any]:
        qdiscs = {}
        for link in self._links:
            for intf in (link.intf1, link.intf2):
                out = run_in(intf.node, ["tc", "-s", "qdisc", "show", "dev", intf.name], check=False)
                qdiscs[f"{intf.node.name}:{intf.name}"] = out.stdout
        return {"backend": self.name, "seed": self.seed, "loss_seeded": self.seeded, "qdiscs": qdiscs}


@lru_cache(maxsize=1)
def probe_qdiscs() -> dict[str, Any]:
    """Try netem and htb on a throwaway veth in a throwaway namespace; report what works."""
    ns = f"tbprobe-{secrets.token_hex(3)}"
    result: dict[str, Any] = {"netns": False, "veth": False, "netem": False, "htb": False, "errors": {}}

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=10)

    created = run("ip", "netns", "add", ns)
    if created.returncode != 0:
        result["errors"]["netns"] = created.stderr.strip()
        return result
    result["netns"] = True
    try:
        veth = run("ip", "-n", ns, "link", "add", "tbp0", "type", "veth", "peer", "name", "tbp1")
        result["veth"] = veth.returncode == 0
        if veth.returncode:
            result["errors"]["veth"] = veth.stderr.strip()
            return result
        for kind, argv in (("netem", ["netem", "delay", "1ms"]), ("htb", ["htb", "default", "1"])):
            out = run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "tbp0", "root", *argv)
            result[kind] = out.returncode == 0
            if out.returncode:
                result["errors"][kind] = out.stderr.strip()
    finally:
        run("ip", "netns", "del", ns)
    return result
