"""``resolve(spec) -> Plan``: a RunSpec checked against the registries once, and what that found.

    from testbed.run.plan import resolve
    plan = resolve(RunSpec(topology="relay", params={"path": "relay"}))
    plan.workload.name, plan.params.path, plan.topology.hosts(), plan.roles

A ``RunSpec`` is a value (names and strings as given); its ``Plan`` is the same run with every
name looked up and every value parsed: the workload record that runs the params (reqresp over
transport udp is the transport's record, ``Workload.for_params``), the params dataclass, the
topology instance with its parameters and link overrides applied (None for loopback), the parsed
socket and host factors, and the client and server hosts.  ``execute``, the experiment runner and
``testbed analyze RUN_DIR`` take a plan, so nothing is looked up or parsed twice; bad input is
one UsageError naming what is wrong and what is allowed, before anything is created.

``Plan.preflight()`` is what only this machine can answer: root (for a topology), the backend
(netem needs the kernel's qdiscs), and the socket factors on a socket here (what only the kernel
knows, such as TCP_DELACK_MAX_US ticks).  ``execute`` runs it unless the caller already did —
an experiment runs it once per level, not once per run.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping

from testbed import workloads
from testbed.spec import factors, plugins
from testbed.spec.errors import SetupError, UsageError
from testbed.spec.runspec import LOOPBACK, RunSpec

#: RunSpec paths a plan does not depend on: a spec differing from the plan's only here reuses it
#: (``capture.full_payload`` is not one: ``resolve`` refuses it with capture none)
UNRESOLVED = ("seed", "timeout", "capture.keep")


def require_root(what: str) -> None:
    """Raise SetupError, one line, when not root: namespaces, veths and captures need it."""
    if os.geteuid() != 0:
        raise SetupError(f"{what} needs root (network namespaces, veths, captures): run it as "
                         "root, e.g. sudo .venv/bin/testbed …")


def build_topology(name: str, params: Mapping[str, Any] | None = None,
                   links: Mapping[str, Any] | None = None):
    """The topology ``name`` (a Mininet Topo description, no namespaces) with its parameters and
    link overrides applied; UsageError for an unknown name, parameter, link or bad value."""
    from topologies import topology_class
    try:
        return topology_class(name)(links=dict(links or {}), **dict(params or {}))
    except UsageError:
        raise
    except (ValueError, LookupError) as exc:
        raise UsageError(str(exc)) from None


def check_topology(name: str) -> None:
    """``name`` is a run's topology: ``loopback``, a registered one or a file that registers one;
    UsageError naming them all (``topology_class``'s for a file)."""
    if name == LOOPBACK:
        return
    from topologies import TOPOLOGIES, topology_class
    if not plugins.is_path(name) and name not in TOPOLOGIES:
        raise UsageError(f"unknown topology {name!r}; allowed: {', '.join(TOPOLOGIES.names())}, "
                         f"{LOOPBACK} (no topology: 127.0.0.1, no root) (or {TOPOLOGIES.also})")
    try:
        topology_class(name)
    except (ValueError, LookupError) as exc:
        raise UsageError(str(exc)) from None


def workload_record(name: str, params: Mapping[str, Any]) -> tuple[Any, Any]:
    """(the record that runs ``params``, the params dataclass) of workload ``name``: reqresp
    over transport udp is the transport's record; UsageError for an unknown name or value."""
    w = workloads.get(name)
    p = w.make_params(params)
    return w.for_params(p), p


@dataclass(frozen=True)
class Plan:
    """One run, resolved: see the module docstring.  Made by ``resolve``."""
    spec: RunSpec
    workload: Any                 # the Workload record that runs ``params``
    params: Any                   # its params dataclass
    topology: Any                 # a topologies.base.TestbedTopo; None for loopback
    socket: dict[str, Any]        # socket factors, parsed (factor name → canonical value)
    host: dict[str, Any]          # host factors, parsed
    client: str                   # host of the client
    server: str                   # host of the server

    @property
    def loopback(self) -> bool:
        return self.topology is None

    @property
    def roles(self) -> dict[str, str]:
        return {"client": self.client, "server": self.server}

    def with_spec(self, spec: RunSpec) -> "Plan":
        """The plan of ``spec``: this one with ``spec`` in it when the two specs differ only in
        paths the resolution does not read (``UNRESOLVED``: the seed, the timeout, whether the
        pcaps are kept), else ``resolve(spec)``."""
        if all(path in UNRESOLVED for path in self.spec.diff(spec)):
            return dataclasses.replace(self, spec=spec)
        return resolve(spec)

    def preflight(self, *, backend: bool = True) -> None:
        """Refuse, before anything is created, what this machine cannot run: a topology without
        root, a backend the kernel lacks (``backend=False``: the caller brings its own up), socket
        factors the kernel refuses.  SetupError / UsageError."""
        if not self.loopback:
            require_root(f"topology {self.spec.topology!r}")
            if backend:
                from testbed.backends import check_available
                check_available(self.spec.backend)
        import socket
        from testbed.apps.tcpopts import SocketFactors
        try:
            sf = SocketFactors(**factors.socket_fields(self.spec.socket, self.spec.host))
            with socket.socket() as probe:
                sf.apply(probe)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def check_capture(capture) -> None:
    """UsageError for a ``CaptureSpec`` that contradicts itself: whole frames (``full_payload``)
    of no capture (``hosts`` none)."""
    if capture.full_payload and capture.hosts == "none":
        raise UsageError("--capture none with --full-payload (capture.hosts none, capture.full_payload "
                         "true): nothing is captured, so no whole frames either; capture on hosts "
                         "(--capture all or HOST,...) or drop --full-payload")


def resolve(spec: RunSpec) -> Plan:
    """``spec`` checked against every registry (workloads, topologies, links, factors) and
    resolved into a Plan; UsageError naming what is wrong and what is allowed.  Needs no root.
    The topology's name is checked first (a typo in it is reported before any other option)."""
    check_topology(spec.topology)
    check_capture(spec.capture)
    record, params = workload_record(spec.workload, spec.params)
    socket = factors.parse_all(spec.socket, "socket")
    host = factors.parse_all(spec.host, "host")
    if spec.topology == LOOPBACK:
        namespaced = factors.namespace_effects(spec.host)
        if namespaced:
            raise UsageError(f"topology 'loopback' has no namespaces: host factors "
                             f"({', '.join(namespaced)}) need a topology")
        topo, client, server = None, "client", "server"
    else:
        topo = build_topology(spec.topology, spec.topology_params, spec.links)
        if record.links is not None:  # the link settings the params imply, recorded with the spec's
            implied = {k: v for k, v in record.links(params, spec, topo).items() if k not in spec.links}
            if implied:               # own and checked with them below (hosts, backend)
                spec = dataclasses.replace(spec, links={**spec.links, **implied})
                topo = build_topology(spec.topology, spec.topology_params, spec.links)
        hosts = set(topo.hosts())
        for name in ("client_host", "server_host"):
            given = getattr(spec, name)
            if given is not None and given not in hosts:
                raise UsageError(f"{name} {given!r} is not a host of topology {spec.topology!r}; "
                                 f"hosts: {', '.join(sorted(hosts))}")
        if isinstance(spec.capture.hosts, tuple):
            bad = [h for h in spec.capture.hosts if h not in hosts]
            if bad:
                raise UsageError(f"capture host(s) {bad} not in topology {spec.topology!r}; "
                                 f"hosts: {', '.join(sorted(hosts))}")
        if spec.backend == "netem":
            from testbed.backends.tc_schedule import topology_refusal
            why = topology_refusal(topo)
            if why:
                raise UsageError(why)
        client = spec.client_host or topo.roles["client"]
        server = spec.server_host or topo.roles["server"]
        if client == server:
            raise UsageError(f"client and server are both on host {client!r}: no link of topology "
                             f"{spec.topology!r} between them; give two of its hosts: "
                             f"{', '.join(sorted(hosts))}")
    if spec.socket and not record.socket_factors:
        raise UsageError(f"workload {spec.workload}: its programs set no socket factors; "
                         f"{', '.join(sorted(spec.socket))} cannot apply")
    if record.check is not None:
        record.check(params, spec, topo)
    return Plan(spec, record, params, topo, socket, host, client, server)
