"""Userspace backend: every impaired link passes through the emulator process.

Layout.  The backend owns one extra namespace, the emulator node ``tbemu`` (a Mininet ``Node``,
not a host: it is not in ``net.hosts``).  An emulated link a–b is two veth pairs,
``a-ethN <-> tbeKa`` and ``b-ethM <-> tbeKb``, with the ``tbeK*`` ends inside ``tbemu``; the
hosts' interfaces keep Mininet's names and are configured as for a plain ``Link``.  One
forwarder process (``testbed.emulator.forwarder``) runs inside ``tbemu`` and serves all links:
direction a→b reads ``tbeKa`` and writes ``tbeKb`` with ``spec_ab``, b→a the reverse with
``spec_ba``.  A link whose two specs are unimpaired and that has no ``medium`` stays a plain veth.
Links given the same ``medium=AirtimeSpec`` (same ``name``) share one air interface.

Offloads: TSO/GSO/GRO and TX checksum offload are switched off and verified on both ends of
every emulated pair (otherwise AF_PACKET reads frames with partial checksums that the receiver
drops after forwarding).  The emulator's ends get the largest MTU, so only the hosts'
interfaces limit frame sizes.

Accounting: ``summary()`` is the forwarder's ``summary.json`` (see ``emulator.forwarder``) plus
the drop counters of the hosts' ends of emulated links over the run, which are added to
``unintended_drops``, with the run's ``fidelity`` verdict (``emulator.fidelity.apply``) written
again over those totals: ``overload`` and ``warnings`` are the verdict's, worded by severity and
naming the cause (the machine or the engine); the engine's own observations are
``engine_warnings``.
The forwarder runs SCHED_FIFO; see ``emulator.config`` for the knobs.

Engines: the forwarder runs the ``native`` C loop (``emulator.native``) where it is built,
else the ``python`` one; ``engine=`` or ``$TESTBED_ENGINE`` (``--engine``) chooses.  Both apply
the same model and write the same logs and summary, which records the engine.

CPUs: on a machine with two CPUs or more the forwarder is pinned to the last one and the
receive processing of the hosts' ends of emulated links is steered to the others (RPS,
``testbed.host.steering``), so a ``send()`` into a veth does not run the receiving host's TCP on the
forwarder's CPU; ``summary()`` records both (``cpu``, ``rps_cpus``).

Link schedules: a link whose spec has a ``schedule`` runs the engine that applies schedules
(the Python one until ``emulator.native`` does, said in one log line); ``set_origin(t_ns)``
starts every schedule at CLOCK_MONOTONIC ``t_ns`` (the run calls it when the client starts) and
waits for the forwarder to confirm it.

Seeds: direction k (in link order, a→b then b→a) gets ``seed + k``; recorded in ``summary()``.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mininet.link import Link
from mininet.util import makeIntfPair

from testbed.emulator.config import ENGINE_ENV, ENGINES, ORIGIN_ACK, ORIGIN_FILE, ORIGIN_SIGNAL
from testbed.host.namespace import ns_argv, offloads_off, run_in, set_sysctls
from testbed.spec.linkspec import LinkSpec
from testbed.host.steering import set_rps

log = logging.getLogger(__name__)
EMU_NODE = "tbemu"
# The native loop polls this long before each departure instead of trusting the timer's
# wake-up (30-200 µs late from an idle vCPU); in C the polling costs no more than this much CPU
# per departure.
NATIVE_SPIN_NS = 50_000
EMU_MTU = 65535
READY_TIMEOUT = 15.0
ORIGIN_TIMEOUT = 5.0
STOP_TIMEOUT = 30.0
_OFFLOAD_FEATURES = ("tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload",
                     "generic-receive-offload")


def offloads(node: Any, ifname: str) -> dict[str, str]:
    """The offload features that must be off, as ``ethtool -k`` reports them."""
    out = run_in(node, ["ethtool", "-k", ifname]).stdout
    found = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in _OFFLOAD_FEATURES:
            found[key.strip()] = value.split()[0] if value.split() else ""
    return found


def verify_offloads_off(node: Any, ifname: str) -> None:
    on = {k: v for k, v in offloads(node, ifname).items() if v != "off"}
    if on:
        raise RuntimeError(f"{node.name}:{ifname}: offloads still on after ethtool -K: {on}; the "
                           "emulator would forward frames with partial checksums")


def interface_drops(node: Any) -> dict[str, int]:
    """ifname -> rx_dropped + tx_dropped inside ``node``'s namespace (/proc/net/dev)."""
    text = run_in(node, ["cat", "/proc/net/dev"]).stdout
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        cols = rest.split()
        out[name.strip()] = int(cols[3]) + int(cols[11])
    return out


def default_engine() -> str:
    """``$TESTBED_ENGINE`` if set (``--engine`` sets it), else ``native`` when the C engine is
    built and loads, else ``python``."""
    if os.environ.get(ENGINE_ENV):
        return os.environ[ENGINE_ENV]
    from testbed.emulator.native import available
    return "native" if available()[0] else "python"


def _mac() -> str:
    """A random locally administered unicast MAC address."""
    return ":".join(f"{b:02x}" for b in bytes([0x02]) + secrets.token_bytes(5))


class EmulatedLink(Link):
    """A Mininet link whose two directions pass through the backend's emulator (see module doc)."""

    def __init__(self, backend: "UserspaceBackend", node1, node2, spec_ab: LinkSpec | None = None,
                 spec_ba: LinkSpec | None = None, medium: Any = None, **params: Any):
        self.specs = (spec_ab or LinkSpec(), spec_ba or LinkSpec())
        self.medium = medium
        self.emulated = medium is not None or not all(s.unimpaired for s in self.specs)
        self.emu_ends: tuple[str, str] | None = None
        if self.emulated:
            self.backend = backend
            self.index = len(backend.links)
            params["fast"] = True  # create the pairs directly in the namespaces
        super().__init__(node1, node2, **params)
        if self.emulated:
            backend.links.append(self)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=True):
        if not self.emulated:
            return makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2,
                                deleteIntfs=deleteIntfs)
        emu = self.backend.emu_node()
        ends = (f"tbe{self.index}a", f"tbe{self.index}b")
        makeIntfPair(intfname1, ends[0], addr1 or _mac(), _mac(), node1, emu, deleteIntfs=False)
        makeIntfPair(intfname2, ends[1], addr2 or _mac(), _mac(), node2, emu, deleteIntfs=False)
        self.emu_ends = ends
        return None


class UserspaceBackend:
    name = "userspace"

    def __init__(self, seed: int = 1, late_ns: int = 1_000_000, spin_ns: int | None = None,
                 early_ns: int = 0, realtime: bool = True, python: str = sys.executable,
                 engine: str | None = None, steer: bool = True):
        """Timing knobs as in ``emulator.config.ForwarderConfig``; ``python`` runs the forwarder.

        engine: ``native`` or ``python`` (None: native where it is built, see ``default_engine``).
        spin_ns None: ``NATIVE_SPIN_NS`` for the native engine, 0 for the Python one.
        steer: on a machine with two CPUs or more, pin the forwarder to the last CPU and steer the
        receive processing of the hosts' ends of emulated links to the others (``testbed.host.steering``).
        """
        self.engine = engine or default_engine()
        if self.engine not in ENGINES:
            raise ValueError(f"emulator engine {self.engine!r} is unknown; allowed: {', '.join(ENGINES)}")
        if self.engine == "native":
            from testbed.emulator.native import load
            load()  # a clear error now rather than a forwarder that does not start
        if spin_ns is None:
            spin_ns = NATIVE_SPIN_NS if self.engine == "native" else 0
        self.seed = seed
        self.late_ns, self.spin_ns, self.early_ns, self.realtime = late_ns, spin_ns, early_ns, realtime
        self.python = python
        self.steer = steer
        self.cpu: int | None = None
        self.rps: dict[str, str] = {}
        self._affinity0: set[int] = set()
        self.links: list[EmulatedLink] = []
        self.emu = None
        self.proc: subprocess.Popen | None = None
        self.log_dir: Path | None = None
        self.config = None
        self._summary: dict[str, Any] = {}
        self._drops0: dict[str, dict[str, int]] = {}

    # --- building -----------------------------------------------------------------------------
    def link_class(self):
        def make(node1, node2, **params):
            return EmulatedLink(self, node1, node2, **params)
        return make

    def emu_node(self):
        """The emulator's namespace, created on first use (IPv6 off: no stray frames of its own)."""
        if self.emu is None:
            from mininet.node import Node
            self.emu = Node(EMU_NODE, inNamespace=True)
            set_sysctls(self.emu, {"net.ipv6.conf.all.disable_ipv6": "1",
                                   "net.ipv6.conf.default.disable_ipv6": "1"})
        return self.emu

    def forwarder_config(self, log_dir: Path):
        from testbed.emulator.config import DirectionConfig, ForwarderConfig
        directions, media = [], {}
        if self.engine == "native" and any(s.schedule is not None for lk in self.links for s in lk.specs):
            from testbed.emulator.config import native_schedules
            if not native_schedules():   # a warning when native was asked for, else a note
                log.log(logging.WARNING if os.environ.get(ENGINE_ENV) else logging.INFO,
                        "a link has a schedule, which the native engine does not apply yet: "
                        "the emulator runs the python engine")
                self.engine = "python"
                self.spin_ns = 0 if self.spin_ns == NATIVE_SPIN_NS else self.spin_ns
        pairs = [frozenset((lk.intf1.node.name, lk.intf2.node.name)) for lk in self.links]
        for link in self.links:
            a, b = link.intf1.node.name, link.intf2.node.name
            ea, eb = link.emu_ends
            if link.medium is not None:
                d = link.medium.to_dict()
                if media.setdefault(link.medium.name, d) != d:
                    raise ValueError(f"two different air interfaces are both named {link.medium.name!r}")
            medium = link.medium.name if link.medium is not None else None
            for src, dst, i, o, spec in ((a, b, ea, eb, link.specs[0]), (b, a, eb, ea, link.specs[1])):
                name = f"{src}-{dst}" + (f".{link.index}" if pairs.count(pairs[link.index]) > 1 else "")
                directions.append(DirectionConfig(name, i, o, spec, self.seed + len(directions), medium))
        return ForwarderConfig(tuple(directions), str(log_dir), media, late_ns=self.late_ns,
                               spin_ns=self.spin_ns, early_ns=self.early_ns, realtime=self.realtime,
                               engine=self.engine, cpu=self.cpu)

    # --- running ------------------------------------------------------------------------------
    def setup(self, net, run) -> None:
        if not self.links:
            return
        emu = self.emu
        run.record_pid(emu.pid, f"mininet node {EMU_NODE}", group=True)
        for link in self.links:
            for end in link.emu_ends:  # largest MTU: only the hosts' interfaces limit frame sizes
                run_in(emu, ["ip", "link", "set", "dev", end, "mtu", str(EMU_MTU), "up"])
                offloads_off(emu, end)
                verify_offloads_off(emu, end)
            for intf in (link.intf1, link.intf2):
                offloads_off(intf.node, intf.name)
                verify_offloads_off(intf.node, intf.name)
        self._steer()
        self._drops0 = self._host_drops()
        self.log_dir = Path(run.dir) / "emulator"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.config = self.forwarder_config(self.log_dir)
        cfg_path = self.log_dir / "config.json"
        self.config.write(cfg_path)
        for stale in ("ready", "summary.json", ORIGIN_FILE, ORIGIN_ACK):
            (self.log_dir / stale).unlink(missing_ok=True)
        with open(self.log_dir / "forwarder.log", "wb") as out:
            argv = [self.python, "-m", "testbed.emulator.forwarder", str(cfg_path)]
            self.proc = subprocess.Popen(ns_argv(emu, argv), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        run.record_pid(self.proc.pid, "emulator", group=True)
        deadline = time.monotonic() + READY_TIMEOUT
        while not (self.log_dir / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.log_dir / "forwarder.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"emulator did not start (exit {self.proc.poll()}): {log}")
            time.sleep(0.01)

    @property
    def scheduled(self) -> bool:
        """Whether a link of this topology has a schedule (``set_origin`` then matters)."""
        return any(s.schedule is not None for lk in self.links for s in lk.specs)

    def set_origin(self, t_ns: int) -> dict[str, Any] | None:
        """Start the links' schedules at CLOCK_MONOTONIC ``t_ns``: write it for the forwarder,
        signal it, wait for its answer; returns the origin as applied (None: no schedule)."""
        if not self.scheduled or self.proc is None:
            return None
        ack = self.log_dir / ORIGIN_ACK
        if ack.exists():
            raise RuntimeError("the link schedules of this topology already started (at an earlier "
                               "run's client); a topology kept up between runs cannot start them "
                               "again: bring it up for each run (no --keep-topology)")
        tmp = self.log_dir / (ORIGIN_FILE + ".tmp")
        tmp.write_text(json.dumps({"t_ns": int(t_ns)}))
        os.replace(tmp, self.log_dir / ORIGIN_FILE)
        os.kill(self.proc.pid, ORIGIN_SIGNAL)
        deadline = time.monotonic() + ORIGIN_TIMEOUT
        while not ack.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the emulator did not take the schedules' origin within "
                                   f"{ORIGIN_TIMEOUT:g} s (exit {self.proc.poll()}); see forwarder.log")
            time.sleep(0.001)
        return json.loads(ack.read_text())

    def _steer(self) -> None:
        cpus = sorted(os.sched_getaffinity(0))
        if not self.steer or len(cpus) < 2:
            return
        self.cpu = cpus[-1]
        self._affinity0 = set(cpus)
        os.sched_setaffinity(0, cpus[:-1])  # what this process starts in the hosts inherits it
        ends: dict[Any, list[str]] = {}
        for link in self.links:
            for intf in (link.intf1, link.intf2):
                ends.setdefault(intf.node, []).append(intf.name)
        for node, names in ends.items():
            os.sched_setaffinity(node.pid, cpus[:-1])  # the node's shell (Mininet's node.cmd)
            mask = set_rps(node, names, cpus[:-1])
            self.rps.update({f"{node.name}:{name}": mask for name in names})

    def _host_drops(self) -> dict[str, dict[str, int]]:
        nodes = {intf.node for link in self.links for intf in (link.intf1, link.intf2)}
        return {node.name: interface_drops(node) for node in nodes}

    def teardown(self) -> None:
        """Stop the forwarder (it writes its summary), read drop counters, end the emulator node."""
        if self._affinity0:
            os.sched_setaffinity(0, self._affinity0)
            self._affinity0 = set()
        if self.proc is not None:
            proc, self.proc = self.proc, None
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            self._summary = self._collect(proc.returncode)
        if self.emu is not None:
            emu, self.emu = self.emu, None
            emu.terminate()
            if emu.shell is not None:
                emu.shell.wait()

    def _collect(self, returncode: int | None) -> dict[str, Any]:
        path = self.log_dir / "summary.json"
        summary: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
            "error": f"forwarder exited {returncode} without a summary; see forwarder.log",
            "unintended_drops": None}
        summary["exit_code"] = returncode
        try:  # drops of the hosts' ends of emulated links (the emulator counts its own ends)
            after = self._host_drops()
            host_drops = {f"{node}:{intf.name}": after[node][intf.name] - self._drops0[node][intf.name]
                          for link in self.links for intf in (link.intf1, link.intf2)
                          for node in [intf.node.name]}
        except (RuntimeError, KeyError, OSError) as exc:
            host_drops = {"error": repr(exc)}
        summary["host_interface_drops"] = host_drops
        if summary.get("unintended_drops") is not None and "error" not in host_drops:
            summary["unintended_drops"] += sum(host_drops.values())
            summary["strict_overload"] = bool(summary.get("strict_overload") or summary["unintended_drops"])
        return summary

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.name, "engine": self.engine, "seed": self.seed,
                               "emulated_links": len(self.links), "rps_cpus": self.rps}
        if self.config is not None:
            out["seeds"] = {d.name: d.seed for d in self.config.directions}
            out["log_dir"] = str(self.log_dir)
        out.update(self._summary)
        if self._summary:   # overload and warnings: the run's fidelity verdict (emulator.fidelity)
            from testbed.emulator.fidelity import apply
            out.setdefault("engine_warnings", [])
            apply(out)
        return out
