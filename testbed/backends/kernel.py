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

A direction with a schedule (``LinkSpec.schedule``) gets the tree that fits every value it will
set and a ``ScheduleRunner`` from ``KernelBackend.set_origin`` on, which applies the changes
``tc_schedule.TcSchedule`` plans at their moments and records how late each one was.
"""
from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from functools import lru_cache
from typing import Any

from mininet.link import Link

from testbed.backends import tc_schedule
from testbed.backends.tc_schedule import netem_args, netem_limit  # noqa: F401  (the netem parameters live there)
from testbed.emulator.schedule_model import ScheduleChange
from testbed.host.lifecycle import delete_netns, probe_netns_name, signals_raise
from testbed.host.netlink import CLONE_NEWNET
from testbed.host.namespace import run_in
from testbed.spec.linkspec import LinkSpec

def qdisc_commands(ifname: str, spec: LinkSpec, seed: int | None = None) -> list[list[str]]:
    """tc argv lists that impose ``spec`` on the egress of ``ifname`` (with a schedule: the tree
    every value in force fits, ``tc_schedule``'s module docstring)."""
    cmds = []
    netem_parent = ["root"]
    if tc_schedule.shaped(spec):
        cmds.append(["tc", "qdisc", "replace", "dev", ifname, "root", "handle", "1:", "htb",
                     "default", "1"])
        cmds.append(list(tc_schedule.htb_change(ifname, spec, tc_schedule.htb_rate(spec), "add")))
        netem_parent = ["parent", "1:1"]
    verb = "replace" if netem_parent == ["root"] else "add"
    cmds.append(["tc", "qdisc", verb, "dev", ifname, *netem_parent, "handle", "10:", "netem",
                 *netem_args(spec, seed)])
    if tc_schedule.fifo_child(spec):
        cmds.append(["tc", "qdisc", "add", "dev", ifname, "parent", "10:1", "handle", "11:",
                     "pfifo", "limit", str(tc_schedule.fifo_limit(spec))])
    return cmds


class NetemLink(Link):
    """A veth link with ``spec_ab`` on node1's egress and ``spec_ba`` on node2's; ``schedules``:
    (node, the direction's name ``src-dst``, its ``TcSchedule``) of each scheduled direction."""

    def __init__(self, node1, node2, spec_ab: LinkSpec | None = None,
                 spec_ba: LinkSpec | None = None, seed: int | None = None, medium: Any = None,
                 **params: Any):
        if medium is not None:
            raise ValueError("the shared Wi-Fi medium exists only in the userspace emulator; "
                             "use --backend userspace")
        names = [f"{a.name}-{b.name}" for a, b in ((node1, node2), (node2, node1))]
        for spec, name in zip((spec_ab, spec_ba), names):   # refuse before anything is built
            why = tc_schedule.refusal(spec, f"link {node1.name}–{node2.name}, direction {name}") if spec else None
            if why:
                raise ValueError(why)
        super().__init__(node1, node2, **params)
        self.specs = (spec_ab, spec_ba)
        self.schedules: list[tuple[Any, str, tc_schedule.TcSchedule]] = []
        for intf, spec, salt, name in ((self.intf1, spec_ab, 0, names[0]), (self.intf2, spec_ba, 1, names[1])):
            if spec is None or (spec.unimpaired and spec.schedule is None):
                continue
            dseed = None if seed is None else seed + salt
            if spec.schedule is not None:
                self.schedules.append((intf.node, name, tc_schedule.TcSchedule(intf.name, spec, dseed, name)))
            for argv in qdisc_commands(intf.name, spec, dseed):
                run_in(intf.node, argv)


def netem_arrivals(ipr, index: int) -> int | None:
    """Packets that reached netem (handle 10:) on interface ``index`` so far: sent + dropped +
    queued, from its counters (``ipr``: a pyroute2 IPRoute of the interface's namespace)."""
    for q in ipr.get_qdiscs(index=index):
        if q["handle"] == 0x100000:
            st = q.get_attr("TCA_STATS") or {}
            return int(st.get("packets", 0)) + int(st.get("drop", 0)) + int(st.get("qlen", 0))
    return None


#: a batch line tc refuses while parsing it (no kernel call: a device lookup by an unknown name
#: made the kernel look for a module, ~150 ms in the UML guest): the end of an action's lines
MARKER = "qdisc show tb-marker"
MARKER_TIMEOUT = 10.0           # s to wait for tc to get through one action


def _until_marker(tc: subprocess.Popen, line_no: int, pending: bytes) -> tuple[list[str] | None, bytes]:
    """Read tc's stderr up to the failure of batch line ``line_no`` (the marker, whose only
    output is its failure, which tc always prints; a show that succeeds may print nothing);
    (the other lines read: what failed, [] when nothing did; None when tc ended or took longer
    than ``MARKER_TIMEOUT``), and the bytes read past the marker."""
    fd, seen, end = tc.stderr.fileno(), [], f"Command failed -:{line_no}"
    deadline = time.monotonic() + MARKER_TIMEOUT
    while True:
        while b"\n" in pending:
            raw, pending = pending.split(b"\n", 1)
            line = raw.decode(errors="replace").strip()
            if line == end:
                return seen, pending
            if line and '"tb-marker"' not in line:
                seen.append(line)
        if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return None, pending
        data = os.read(fd, 65536)
        if not data:
            return None, pending
        pending += data


class ScheduleRunner:
    """The I/O loop of one scheduled direction: a thread in the namespace of ``node`` that feeds
    each ``TcAction`` of ``schedule`` to one ``tc -force -batch -`` started there beforehand
    (``start()``, when the topology is up: no process per change, nothing to start at the
    origin; in a UML guest spawning ``tc`` took ~60 ms), when it is due, ``origin_ns + at`` on
    CLOCK_MONOTONIC (``set_origin``).  After an action's lines it sends ``MARKER`` (a line tc
    refuses) and takes that line's failure on stderr as the moment the
    action's commands had all returned (tc runs a batch in order, with ``-force`` past
    failures); anything else on stderr by then is a failed command.  Per action a
    ``ScheduleChange``: configured_ns the moment, actual_ns that return, frames_before the
    packets netem had seen since the origin (``netem_arrivals``, read after the change).  A
    failed command ends the loop (``error``); ``stop()`` ends it between actions."""

    def __init__(self, node, name: str, schedule: "tc_schedule.TcSchedule"):
        self.node, self.name, self.schedule = node, name, schedule
        self.origin_ns: int | None = None
        self.changes: list[ScheduleChange] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._origin = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tc-schedule-{name}", daemon=True)

    def start(self) -> "ScheduleRunner":
        self._thread.start()
        return self

    def set_origin(self, t_ns: int) -> None:
        self.origin_ns = t_ns
        self._origin.set()

    def stop(self) -> None:
        self._stop.set()
        self._origin.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        from pyroute2 import IPRoute
        from pyroute2.netns import setns
        try:
            setns(f"/proc/{self.node.pid}/ns/net", flags=CLONE_NEWNET)
            with IPRoute() as ipr, subprocess.Popen(
                    ["tc", "-force", "-batch", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE, text=True, bufsize=1) as tc:
                try:
                    self._loop(ipr, tc)
                finally:
                    tc.stdin.close()
                    try:
                        tc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        tc.kill()
        except Exception as exc:   # a thread's failure is recorded, not lost on stderr
            self.error = f"{self.name}: {type(exc).__name__}: {exc}; later changes not applied"

    def _loop(self, ipr, tc: subprocess.Popen) -> None:
        index = ipr.link_lookup(ifname=self.schedule.ifname)[0]
        self._origin.wait()
        if self._stop.is_set():
            return
        base = netem_arrivals(ipr, index) or 0
        written, pending = 0, b""
        for action in self.schedule.actions():
            due = self.origin_ns + round(action.at * 1e9)
            if self._stop.wait(max(0, due - time.monotonic_ns()) / 1e9):
                return
            lines = [" ".join(argv[1:]) for argv in action.argv]   # argv[0] is "tc"
            tc.stdin.write("".join(f"{line}\n" for line in lines) + f"{MARKER}\n")
            written += len(lines) + 1
            failed, pending = _until_marker(tc, written, pending)
            actual = time.monotonic_ns()
            if failed is None:
                self.error = f"{self.name}: tc ended or hung (exit {tc.poll()}); later changes not applied"
                return
            if failed:
                self.error = (f"{self.name}: tc {' | '.join(lines)} failed: "
                              f"{' '.join(failed)}; later changes not applied")
                return
            seen = netem_arrivals(ipr, index)
            self.changes.append(ScheduleChange(action.kind, action.item, action.label, due,
                                               actual, (seen or 0) - base, action.what))

    def record(self) -> dict[str, Any]:
        """What the summary keeps: the origin, the trace resolution, the changes, the error."""
        late = [c.actual_ns - c.configured_ns for c in self.changes]
        return {"applied_by": "tc", "origin_ns": self.origin_ns,
                "trace_resolution": self.schedule.resolution, "error": self.error,
                "late_max_ms": max(late) / 1e6 if late else None,
                "changes": [c.to_dict() for c in self.changes]}


def netem_seed_supported(node) -> bool:
    """Whether tc and the kernel accept netem's ``seed`` (iproute2 and Linux ≥ 6.5; Debian 12's
    tc answers 'What is "seed"?'), tried on the loopback of ``node``'s namespace."""
    ok = run_in(node, ["tc", "qdisc", "replace", "dev", "lo", "root", "netem", "delay", "0ms",
                       "seed", "1"], check=False).returncode == 0
    run_in(node, ["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    return ok


class KernelBackend:
    """Without netem seed support the loss pattern is not reproducible; ``summary()`` says so.
    ``set_origin(t_ns)`` starts every scheduled direction's ``ScheduleRunner``; ``summary()``
    records each one's changes under ``directions`` (as the userspace backend does).  The
    runners start (``setup``) once the topology is up and wait for the origin."""
    name = "netem"

    def __init__(self, seed: int = 1):
        self.seed = seed
        self.seeded: bool | None = None
        self._links: list[NetemLink] = []
        self._runners: list[ScheduleRunner] = []
        self._origin: dict[str, Any] | None = None

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
        """A ``ScheduleRunner`` per scheduled direction, ready (tc started) before the origin."""
        self._runners = [ScheduleRunner(node, name, sch).start()
                         for link in self._links for node, name, sch in link.schedules]

    def set_origin(self, t_ns: int) -> dict[str, Any] | None:
        """Start every scheduled direction's changes, counted from CLOCK_MONOTONIC ``t_ns``
        (once; a second call returns the first origin); None when no direction has a schedule."""
        if self._origin is not None or not self._runners:
            return self._origin
        for runner in self._runners:
            runner.set_origin(t_ns)
        self._origin = {"origin_requested_ns": t_ns, "applied_at_ns": time.monotonic_ns(),
                        "origin_ns": {r.name: t_ns for r in self._runners}}
        return self._origin

    def teardown(self) -> None:
        for runner in self._runners:
            runner.stop()

    def summary(self) -> dict[str, Any]:
        qdiscs = {}
        for link in self._links:
            for intf in (link.intf1, link.intf2):
                out = run_in(intf.node, ["tc", "-s", "qdisc", "show", "dev", intf.name], check=False)
                qdiscs[f"{intf.node.name}:{intf.name}"] = out.stdout
        out = {"backend": self.name, "seed": self.seed, "loss_seeded": self.seeded, "qdiscs": qdiscs}
        if self._runners:
            out["directions"] = {r.name: {"schedule": r.record()} for r in self._runners}
            out["warnings"] = [r.error for r in self._runners if r.error]
        return out


@lru_cache(maxsize=1)
def probe_qdiscs() -> dict[str, Any]:
    """Try netem and htb on a throwaway veth in a throwaway namespace; report what works.  The
    namespace is made inside the block that deletes it on the way out, Ctrl-C, SIGTERM and
    SIGHUP included (``lifecycle.signals_raise``); one a SIGKILL leaves is named after this
    process, and ``testbed clean`` deletes it once the process is gone (``probe_netns_name``)."""
    ns = probe_netns_name()
    result: dict[str, Any] = {"netns": False, "veth": False, "netem": False, "htb": False, "errors": {}}

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=10)

    with signals_raise():
        try:
            created = run("ip", "netns", "add", ns)
            if created.returncode != 0:
                result["errors"]["netns"] = created.stderr.strip()
                return result
            result["netns"] = True
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
            delete_netns(ns)
    return result
