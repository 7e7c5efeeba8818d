"""``Testbed``: a topology brought up on Mininet with one backend, torn down without leftovers.

    with Testbed("longhaul", backend="userspace", overrides={"rate_down": "20mbit"}) as tb:
        server = tb.popen("server", [...])        # inside the host's namespace, PID recorded
        result = tb.run("client", [...], timeout=30)

Hosts are Mininet ``Host``s (unnamed network namespaces held by their shells).  Every host gets
the per-host configuration of ``testbed.host.namespace`` (offloads off, sysctls, routes, forwarding on
routers) and resolves every other host by name (its own ``/etc/hosts``, bind-mounted in its
mount namespace: ``testbed.host.namespace.host_names``).  The run's metadata (``tb.metadata``,
written to ``metadata.json`` in ``tb.dir``) records what a reader needs to trust or redo the run.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from testbed.spec.errors import RunError, SetupError, TestbedError, UsageError
from testbed.host.namespace import (DEFAULT_SYSCTLS, SYSTEM_HOSTS, configure_host, host_names,
                                    hosts_file_text, ns_argv, private_hosts_file, read_sysctls,
                                    static_arp)
from testbed.host.lifecycle import Run
from testbed.run.plan import build_topology, require_root
from testbed.run.provenance import provenance

log = logging.getLogger(__name__)


def substitute_hosts(argv: Sequence[str], addresses: Mapping[str, str]) -> list[str]:
    """``argv`` with each ``{host}`` replaced by ``addresses[host]``; a ValueError naming the
    hosts for a name that is none of them, or a brace that is no substitution."""
    try:
        return [arg.format(**addresses) for arg in argv]
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"bad {{host}} substitution ({exc}); hosts: {', '.join(sorted(addresses))}") from None


class Testbed:
    def __init__(self, topo: Any, backend: str = "auto", overrides: dict[str, Any] | None = None,
                 results_root: Path | str = "results", seed: int = 1, sysctls: dict[str, str] | None = None,
                 links: dict[str, str] | None = None, run_dir: Path | str | None = None,
                 run_id: str | None = None):
        """``overrides``: the topology's parameters (``--set``); ``links``: named-link overrides
        ``{"LINK.DIR.FIELD": "VALUE"}`` (``--link``); ``run_dir``: the results directory
        (default ``results_root/<run id>``); ``run_id``: the run's id, in ``metadata.json`` and
        the cleanup record (default: a new one)."""
        from topologies.base import TestbedTopo
        if isinstance(topo, str):
            topo = build_topology(topo, overrides, links)
        elif overrides or links:
            raise ValueError("overrides and links apply to a topology given by name")
        if not isinstance(topo, TestbedTopo):
            raise TypeError(f"topology must be a name or a TestbedTopo, not {type(topo).__name__}")
        self.topo = topo
        self.backend_name = backend
        self.seed = seed
        self.sysctls = dict(sysctls or {})
        self.run_ = Run(results_root, run_id=run_id, run_dir=run_dir)
        self.net = None
        self.backend = None
        self.metadata: dict[str, Any] = {}
        self.names: dict[str, dict[str, str]] = {}     # host → {name: address it reaches}

    @classmethod
    def from_plan(cls, plan: Any, **kwargs: Any) -> "Testbed":
        """The Testbed of a run's Plan (``testbed.run.plan``): its topology instance, backend and
        seed; ``kwargs`` as above (``run_dir``, ``run_id``, ``results_root``, ``sysctls``)."""
        return cls(plan.topology, backend=plan.spec.backend, seed=plan.spec.seed, **kwargs)

    # --- access -----------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self.run_.dir

    @property
    def hosts(self) -> dict[str, Any]:
        return {h.name: h for h in self.net.hosts}

    def host(self, name: str):
        try:
            return self.hosts[name]
        except KeyError:
            raise ValueError(f"no host {name!r} in topology {self.topo.name!r}; hosts: "
                             f"{', '.join(self.hosts)}") from None

    def ip(self, name: str) -> str:
        return self.host(name).IP()

    def popen(self, host: str, argv: Sequence[str], name: str = "process", **kwargs: Any) -> subprocess.Popen:
        """Start argv inside ``host`` in its own process group; recorded, ended at teardown."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen(ns_argv(self.host(host), argv), start_new_session=True, **kwargs)
        self.run_.record_pid(proc.pid, f"{name} on {host}", group=True)
        return proc

    def run(self, host: str, argv: Sequence[str], timeout: float = 60, check: bool = False,
            name: str = "command", input: str | None = None) -> subprocess.CompletedProcess:
        """Run argv inside ``host`` and wait; text output captured. On timeout the process group
        is ended and ``subprocess.TimeoutExpired`` raised."""
        proc = self.popen(host, argv, name=name, text=True,
                          stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        result = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
        if check and result.returncode:
            raise RunError(f"{host}: {' '.join(argv)} exited {result.returncode}: {err.strip()}")
        return result

    def run_programs(self, commands: Sequence[tuple[str, Sequence[str]]]) -> list[dict[str, Any]]:
        """Run outside programs, each ``(host, argv)`` in its host (argv without a shell;
        ``{host}`` in an argument becomes that host's address): all but the last in the
        background (servers, given 0.5 s to bind), the last in the foreground; each one's output
        in ``exec-<n>-<host>.stdout``/``.stderr`` of the run directory.  Returns per program
        ``{"host", "argv" (substituted), "stdout", "stderr" (paths), "returncode"}`` (a background
        one's: None while it still runs); UsageError for an unknown host or substitution,
        SetupError for a program that cannot start, RunError for a background one that exits at
        once."""
        hosts = set(self.hosts)
        ips = {h: self.ip(h) for h in hosts}
        programs = []
        for host, argv in commands:
            if host not in hosts or not argv:
                raise UsageError(f"program {' '.join([host, *argv])!r}: expected HOST CMD [ARG...] "
                                 f"with HOST one of {', '.join(sorted(hosts))}")
            try:
                argv = substitute_hosts(argv, ips)
            except ValueError as exc:
                raise UsageError(f"program {' '.join([host, *argv])!r}: {exc}") from None
            stem = self.dir / f"exec-{len(programs)}-{host}"
            programs.append({"host": host, "argv": argv, "stdout": Path(f"{stem}.stdout"),
                             "stderr": Path(f"{stem}.stderr"), "returncode": None})
        background = []
        for n, prog in enumerate(programs):
            with open(prog["stdout"], "wb") as out, open(prog["stderr"], "wb") as err:
                try:
                    proc = self.popen(prog["host"], prog["argv"], name=f"exec {prog['argv'][0]}",
                                      stdout=out, stderr=err, stdin=subprocess.DEVNULL)
                except OSError as exc:
                    raise SetupError(f"on {prog['host']}: cannot start {prog['argv'][0]}: "
                                     f"{exc.strerror}") from None
            if n < len(programs) - 1:
                background.append((prog, proc))
                time.sleep(0.5)        # let a server bind before the next program connects
                if proc.poll() is not None:
                    raise RunError(f"on {prog['host']}: {' '.join(prog['argv'])} exited "
                                   f"{proc.returncode} at once; see {prog['stderr']}")
            else:
                prog["returncode"] = proc.wait()
        for prog, proc in background:  # a server that ends with its client (iperf3 -s -1) flushes
            with contextlib.suppress(subprocess.TimeoutExpired):
                prog["returncode"] = proc.wait(timeout=2)
        return programs

    def set_link_origin(self, t_ns: int | None = None) -> dict[str, Any] | None:
        """Start the links' schedules (``LinkSpec.schedule``) at CLOCK_MONOTONIC ``t_ns`` (default
        now); the origin as the backend applied it, None when no link has a schedule or the
        backend does not apply schedules."""
        set_origin = getattr(self.backend, "set_origin", None)
        if set_origin is None:
            return None
        try:
            return set_origin(time.monotonic_ns() if t_ns is None else t_ns)
        except (RuntimeError, OSError) as exc:
            raise SetupError(f"starting the link schedules failed: {exc}", run_dir=self.dir) from exc

    # --- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> "Testbed":
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Host
        from testbed.backends import check_available, select_backend

        require_root(f"topology {self.topo.name!r}")
        check_available(self.backend_name)
        setLogLevel("error")
        self.run_.__enter__()
        try:
            self.backend = select_backend(self.backend_name, seed=self.seed)
            self.run_.add_cleanup(self._stop)
            run = self.run_

            class RecordedHost(Host):
                """A Mininet host whose shell (the holder of its namespace) is recorded at birth."""
                def startShell(self, *args, **kwargs):
                    super().startShell(*args, **kwargs)
                    run.record_pid(self.pid, f"mininet host {self.name}", group=True)

            self.net = Mininet(topo=self.topo, controller=None, host=RecordedHost,
                               link=self.backend.link_class(), build=False, autoSetMacs=True)
            self.net.build()
            for host in self.net.hosts:
                info = self.topo.nodeInfo(host.name)
                configure_host(host, {**self.sysctls, **info.get("sysctls", {})},
                               router=info.get("router", False), routes=info.get("routes", ()),
                               commands=info.get("commands", ()))
            self.arp_entries = static_arp(self.net.links)
            self.names = self._name_hosts()
            self.backend.setup(self.net, self.run_)
            self.metadata = self._metadata()
            (self.dir / "metadata.json").write_text(json.dumps(self.metadata, indent=1, default=str))
        except BaseException as exc:
            self.run_.close()
            if isinstance(exc, TestbedError):
                raise
            if isinstance(exc, ValueError):
                raise UsageError(f"topology {self.topo.name!r}: {exc}") from exc
            if isinstance(exc, (RuntimeError, OSError, subprocess.SubprocessError, LookupError)):
                raise SetupError(f"bringing up topology {self.topo.name!r} with backend "
                                 f"{self.backend_name!r} failed: {exc}", run_dir=self.dir) from exc
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.run_.close()

    def _stop(self) -> None:
        if self.backend is not None:
            self.backend.teardown()
            summary = self.backend.summary()
            self.metadata["backend_summary"] = summary
            for warning in summary.get("warnings", []):
                log.warning("%s backend: %s", self.backend.name, warning)
            if self.dir.exists():
                (self.dir / "metadata.json").write_text(json.dumps(self.metadata, indent=1, default=str))
        if self.net is not None:
            self.net.stop()

    def _name_hosts(self) -> dict[str, dict[str, str]]:
        """Give every host a hosts file of its own naming every host of the topology (the
        address facing it), bind-mounted over /etc/hosts in its mount namespace; the files live
        in a temporary directory of the run (removed at teardown; a mount keeps its file)."""
        names = host_names(self.net.hosts, self.net.links)
        if not SYSTEM_HOSTS.is_file():
            log.warning("no %s to mount over: host names do not resolve inside the hosts",
                        SYSTEM_HOSTS)
            return names
        system = SYSTEM_HOSTS.read_text(errors="replace")
        directory = Path(tempfile.mkdtemp(prefix=f"{self.run_.id}-hosts-"))
        self.run_.record_tmpdir(directory)
        for host in self.net.hosts:
            path = directory / host.name
            path.write_text(hosts_file_text(names[host.name], system))
            path.chmod(0o644)
            private_hosts_file(host, path)
        return names

    def _metadata(self) -> dict[str, Any]:
        keys = sorted(set(DEFAULT_SYSCTLS) | set(self.sysctls) | {"net.ipv4.ip_forward",
                      "net.ipv4.tcp_congestion_control"})
        return {
            **provenance(),
            "run_id": self.run_.id,
            "topology": {"name": self.topo.name, "params": self.topo.values,   # links: as in effect
                         "link_overrides": dict(self.topo.link_overrides)},
            "backend": self.backend.name,
            "seed": self.seed,
            "static_arp_entries": self.arp_entries,
            "links": self.topo.link_records(),
            "hosts": {h.name: {"ips": {i.name: i.IP() for i in h.intfList() if i.name != "lo"},
                               "sysctls": read_sysctls(h, keys),
                               "names": self.names.get(h.name, {})} for h in self.net.hosts},
        }
