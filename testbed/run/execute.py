"""``execute(spec, out_dir) -> RunResult``: one run, from a RunSpec to a run directory.

    from testbed.run.execute import execute
    from testbed.spec.runspec import RunSpec
    r = execute(RunSpec(topology="relay", workload="reqresp", params={"path": "relay"}), "out/r1")
    r.metrics["completion_ms"], r.checks["cc"], r.fidelity["verdict"]

Steps: resolve the spec into its Plan (``testbed.run.plan``; UsageError, nothing created) and
check that this machine can run it (root, backend, socket factors); bring the topology up in ``out_dir``
(or use ``testbed``, an already-up Testbed whose topology, links, seed and backend match);
apply the host factors in both end hosts (route options, sysctls, tcp_metrics flush; read
back); start captures on the spec's hosts; start the server (and for ``path=relay`` the gateway
pair) and wait for their ``ready`` lines (``testbed.host.ready``); run the client until it exits or
``spec.timeout``; keep capturing for ``drain_time``; stop everything this run started; tear
down what it brought up; write ``manifest.json``; compute metrics (``Workload.metrics``, the
code ``testbed analyze RUN_DIR`` runs) and the fidelity verdict; write the manifest again.
Metrics that fail on the run's data (ValueError, OSError) leave it complete with
``checks.metrics_error``; metrics that raise anything else or are not ``{"metrics": {...},
"checks": {...}}`` leave the run ``failed`` (its files kept), the error naming the workload's
metrics file: RunError.

``session(spec, topology, results_root)`` is the same record for a topology brought up without a
workload (``testbed topo up``): captures on the spec's hosts around whatever runs in it (outside
programs, Mininet's CLI), the manifest (workload ``exec``: the metrics of
``analysis.runmetrics.run_metrics``, the fidelity verdict, the inventory) written after teardown.

A setup or run failure writes the manifest with status ``failed`` and the error, then raises
SetupError / RunError (``.result`` is the RunResult).  Never sees argparse or sys.argv.

Files in the run directory: ``manifest.json``; ``metadata.json`` (the Testbed's provenance);
Link schedules (``LinkSpec.schedule``) start when the client does (``session``: when the block
starts): ``Testbed.set_link_origin``; the manifest's ``link_changes`` holds the origin, when the
client finished (``workload_end_ns``; ``session``: when the block ended), every change that took
effect (configured and actual moment) per direction, and warnings derived from those records
once the links have stopped: changes that took effect after the client finished (during drain
or teardown: not on the measured workload) and items that never took effect.

``client.jsonl``, ``server.jsonl`` (``cgw.jsonl``, ``sgw.jsonl``) event logs and
``<role>.stdout``/``.stderr``; ``pcap/<host>-<iface>.pcap`` with ``.meta.json`` and
``.tcpdump.log``; ``emulator/`` (userspace backend: ``config.json``, ``<direction>.frames``
(``<direction>.changes.jsonl`` for a scheduled one), ``origin``/``origin.ack``,
``summary.json``, ``forwarder.log``); ``exec-<n>-<host>.stdout``/``.stderr`` (``session``: the
outside programs' output).
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from testbed.spec import factors
from testbed.spec.plugins import source_of
from testbed.spec.errors import RunError, SetupError, TestbedError, UsageError
from testbed.host.lifecycle import interruption, new_run_id, signals_raise
from testbed.host.ready import wait_ready
from testbed.spec.runresult import RunResult
from testbed.spec.runspec import RunSpec
from testbed.run.plan import Plan, resolve

log = logging.getLogger(__name__)
PY = [sys.executable, "-m"]
TUNNEL_PORT, SOCKS_PORT = 7000, 1080
#: the workload of a ``session``'s manifest: outside programs, not a registered workload
EXEC_WORKLOAD = "exec"


def execute(spec: RunSpec | Plan, out_dir: Path | str, *, testbed: Any = None,
            run_id: str | None = None, checked: bool = False) -> RunResult:
    """Run ``spec`` (a RunSpec, resolved here once, or its Plan) into the run directory
    ``out_dir`` (created; must not exist or be empty); see the module docstring.  ``run_id``: the
    id recorded (default: a new one); ``checked``: the caller ran ``plan.preflight()`` already
    (the experiment runner, once per level)."""
    plan = spec if isinstance(spec, Plan) else resolve(spec)
    spec = plan.spec
    if not checked:
        plan.preflight(backend=testbed is None)  # before the run directory: bad input, not a failed run
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise UsageError(f"run directory {out_dir} exists and is not empty")
    if testbed is not None:
        _check_matches(plan, testbed)
    workload = plan.workload
    out_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(run_id or new_run_id(), out_dir, spec, "failed", None, time.time(), 0.0,
                       roles=plan.roles)
    phases: dict[str, float] = {}
    error: BaseException | None = None
    bed = testbed
    try:
        with _phase(phases, "total_s"):
            with contextlib.ExitStack() as stack:
                with _phase(phases, "bring_up_s"):
                    if bed is None:
                        bed = _bring_up(plan, out_dir, result.run_id, stack)
                _run(plan, bed, result, phases)
                t_down = time.monotonic()
            phases["teardown_s"] = time.monotonic() - t_down
    except TestbedError as exc:
        error = exc
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        error = RunError(f"{type(exc).__name__}: {exc}")
    except BaseException as exc:       # Ctrl-C, SIGTERM: record, then let it end the program
        result.error = interruption(exc) or f"stopped ({exc!r})"
        _finish(result, bed, phases, workload.metrics, compute=False)
        raise
    if error is not None:
        result.error = str(error)
    _finish(result, bed, phases, workload.metrics, compute=error is None)
    if error is not None:
        error.run_dir, error.result = out_dir, result
        raise error
    return result


@contextlib.contextmanager
def session(spec: RunSpec, topology: Any = None, *,
            results_root: Path | str = "results") -> Iterator[tuple[Any, RunResult]]:
    """A topology up as one run directory (``testbed topo up``), ``results_root/<run id>``:
    yields ``(testbed, result)`` with captures running on ``spec.capture.hosts`` (headers only
    unless ``full_payload``); whatever runs in the block is the run (record its programs in
    ``result.apps``; set ``result.error`` for a failure that should not raise).  On leaving:
    captures kept for ``drain_time``, stopped, the topology torn down, then the manifest written
    (status ``complete`` unless the block raised or set an error; metrics of
    ``analysis.runmetrics.run_metrics``; the link backend's fidelity verdict).  ``topology``: the
    built topology of ``spec`` (default: built here).  ``spec.workload`` is ``EXEC_WORKLOAD``."""
    from analysis.runmetrics import run_metrics
    from testbed.run.network import Testbed
    from testbed.run.plan import build_topology
    if spec.workload != EXEC_WORKLOAD:
        raise ValueError(f"a session's spec has workload {EXEC_WORKLOAD!r}, not {spec.workload!r}")
    topo = topology or build_topology(spec.topology, spec.topology_params, spec.links)
    hosts = set(topo.hosts())
    if isinstance(spec.capture.hosts, tuple):
        bad = [h for h in spec.capture.hosts if h not in hosts]
        if bad:
            raise UsageError(f"capture host(s) {bad} not in topology {spec.topology!r}; "
                             f"hosts: {', '.join(sorted(hosts))}")
    bed = Testbed(topo, backend=spec.backend, seed=spec.seed, results_root=results_root)
    result = RunResult(bed.run_.id, bed.dir, spec, "failed", None, time.time(), 0.0, roles=dict(topo.roles))
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        with bed:
            phases["bring_up_s"] = time.monotonic() - t0
            caps: list = []
            cpu: list = []
            try:
                with contextlib.ExitStack() as stack:   # captures stop when it closes
                    names = [] if spec.capture.hosts == "none" else (
                        sorted(hosts) if spec.capture.hosts == "all" else list(spec.capture.hosts))
                    if names:
                        from testbed.host.capture import capture_hosts
                        caps = stack.enter_context(capture_hosts(
                            bed, names, directory=bed.dir, full_payload=spec.capture.full_payload))
                    t1 = time.monotonic()
                    origin = _start_schedules(bed, result)
                    try:
                        yield bed, result
                        _workload_end(result, origin)
                        if caps:
                            time.sleep(drain_time(bed))
                    finally:
                        _workload_end(result, origin)
                        phases["session_s"] = time.monotonic() - t1
                        cpu = [_cpu_seconds(c.proc.pid) for c in caps]
            finally:
                result.capture = _capture_summary(caps, cpu, bed.dir)
                t_down = time.monotonic()
        phases["teardown_s"] = time.monotonic() - t_down
    except BaseException as exc:
        if bed.dir.is_dir():
            result.error = result.error or interruption(exc) or str(exc) or type(exc).__name__
            phases["total_s"] = time.monotonic() - t0
            _finish(result, bed, phases, run_metrics, compute=False)
        raise
    phases["total_s"] = time.monotonic() - t0
    _finish(result, bed, phases, run_metrics, compute=result.error is None)


# --- steps -----------------------------------------------------------------------------------

@contextlib.contextmanager
def _phase(phases: dict, name: str):
    label = name.removesuffix("_s").replace("_", " ")     # `testbed -v run …` shows progress
    if name != "total_s":
        log.info("%s …", label)
    t0 = time.monotonic()
    try:
        yield
    finally:
        phases[name] = time.monotonic() - t0
        log.info("%s: %.2f s", label, phases[name])


def _check_matches(plan: Plan, tb: Any) -> None:
    topo, spec = tb.topo, plan.spec
    problems = [what for what, ok in (
        ("topology", topo.name == spec.topology),
        ("topology_params", plan.loopback or topo.values == plan.topology.values),
        ("links", topo.link_overrides == dict(spec.links)), ("seed", tb.seed == spec.seed),
        ("backend", spec.backend in ("auto", tb.backend.name))) if not ok]
    if problems:
        raise UsageError(f"the given testbed does not match the spec in {', '.join(problems)}")


def _bring_up(plan: Plan, out_dir: Path, run_id: str, stack: contextlib.ExitStack):
    """The run's own testbed, its cleanup record and ``metadata.json`` under the run's id."""
    if plan.loopback:
        from testbed.run.loopback import Loopback
        return stack.enter_context(Loopback(run_dir=out_dir, run_id=run_id))
    from testbed.run.network import Testbed
    return stack.enter_context(Testbed.from_plan(plan, run_dir=out_dir, run_id=run_id))


def _run(plan: Plan, tb, result: RunResult, phases: dict) -> None:
    from testbed.apps.tcpopts import HostFactors
    spec, workload, params = plan.spec, plan.workload, plan.params
    out = result.dir
    client, server = plan.client, plan.server
    loopback = plan.loopback
    server_ip = tb.ip(server)
    host_factors: dict[str, Any] = {}
    result.checks["host_factors"] = host_factors
    if not loopback:
        with _phase(phases, "host_factors_s"):
            fields = factors.host_fields(spec.host)
            for host, peer in ((client, server_ip), (server, tb.ip(client))):
                host_factors[host] = _host_apply(tb, host, HostFactors(peer, **fields))
    sock_argv = factors.socket_argv(spec.socket, spec.host)
    started: list[tuple[str, subprocess.Popen]] = []
    caps, cpu = [], []
    try:
        with contextlib.ExitStack() as stack:
            hosts = _capture_hosts(plan, tb)
            if hosts:
                from testbed.host.capture import capture_hosts
                caps = stack.enter_context(capture_hosts(tb, hosts, directory=out,
                                                         full_payload=spec.capture.full_payload))
            sargv = PY + workload.server_argv(params, out / "server.jsonl") + sock_argv
            result.apps["server"] = sargv
            proc = tb.popen(server, sargv, name=f"{workload.name} server")
            started.append(("server", proc))
            wait_ready(proc, f"{workload.name} server on {server}")
            socks = None
            if getattr(params, "path", "direct") == "relay":
                socks = _start_relay(tb, params, spec, result, started)
            cargv = PY + workload.client_argv(params, f"{server_ip}:{workload.port}",
                                              out / "client.jsonl", socks) + sock_argv
            result.apps["client"] = cargv
            with _phase(phases, "workload_s"):
                origin = _start_schedules(tb, result)
                cproc = tb.popen(client, cargv, name=f"{workload.name} client",
                                 stdin=subprocess.DEVNULL)
                started.append(("client", cproc))
                try:
                    cproc.wait(timeout=spec.timeout)
                except subprocess.TimeoutExpired:
                    raise RunError(f"{workload.name} client on {client} did not finish within "
                                   f"{spec.timeout:g} s") from None
                finally:
                    _workload_end(result, origin)
            with _phase(phases, "drain_s"):
                if caps:
                    time.sleep(drain_time(tb))
            cpu = [_cpu_seconds(c.proc.pid) for c in caps]
    finally:
        for role, proc in reversed(started):
            _stop(proc, out / role)
    result.capture = _capture_summary(caps, cpu, out)
    rc = started[-1][1].returncode if started and started[-1][0] == "client" else None
    if rc:
        err = _last_line(out / "client.stderr")
        raise RunError(f"{workload.name} client on {client} exited {rc}: {err}")


def _start_schedules(tb, result: RunResult) -> int | None:
    """Start the links' schedules now (``Testbed.set_link_origin``; the client starts right
    after); records the origin in ``result.link_changes``; returns it (None: no schedule)."""
    set_origin = getattr(tb, "set_link_origin", None)
    applied = set_origin() if set_origin is not None else None
    if applied is None:
        return None
    result.link_changes["origin"] = applied
    return applied["origin_requested_ns"]


def _workload_end(result: RunResult, origin: int | None) -> None:
    """Record, once, when the workload ended (the client exited or was stopped; a session's block
    ended): ``result.link_changes["workload_end_ns"]`` (CLOCK_MONOTONIC, as the origin)."""
    if origin is not None:
        result.link_changes.setdefault("workload_end_ns", time.monotonic_ns())


def _direction_keys(links: list[dict], recorded: dict) -> list[tuple[str, str | None, dict]]:
    """(``LINK.DIR``, its name among the ``recorded`` changes' directions or None, the recorded
    schedule) of every scheduled link direction of the metadata's ``links``.  A backend names a
    direction ``src-dst``, and the userspace one ``src-dst.N`` where several links join the same
    two hosts: those are matched in the links' order; one ``src-dst`` record where several
    scheduled links join them (the kernel backend's) is none of theirs (None)."""
    dirs = [(f"{rec.get('name') or rec['a'] + '-' + rec['b']}.{d}", f"{src}-{dst}", sch)
            for rec in links
            for d, key, src, dst in (("up", "a_to_b", rec["a"], rec["b"]), ("down", "b_to_a", rec["b"], rec["a"]))
            if (sch := (rec.get(key) or {}).get("schedule"))]
    out: list[tuple[str, str | None, dict]] = []
    for label, pair, sch in dirs:
        peers = [lab for lab, p, _ in dirs if p == pair]
        if pair in recorded:        # one record for several links (the kernel's): none is theirs
            out.append((label, pair if len(peers) == 1 else None, sch))
            continue
        numbered = sorted((k for k in recorded if k.rpartition(".")[0] == pair and k.rpartition(".")[2].isdigit()),
                          key=lambda k: int(k.rpartition(".")[2]))
        out.append((label, numbered[peers.index(label)] if len(numbered) == len(peers) else None, sch))
    return out


def _schedule_warnings(result: RunResult, metadata: dict, recorded: dict[str, list[dict]]) -> None:
    """Warnings from what the links recorded (``recorded``: the manifest's
    ``link_changes["changes"]``, read once the links had stopped), logged and kept in
    ``result.link_changes["warnings"]``, per scheduled link direction (``Schedule.item_effects``
    against ``workload_end_ns``): the items that took effect only after the workload ended
    (during drain or teardown, so not on the measured workload), and those that never did, or
    only in part (the links stopped first, or a frame or byte count was never reached).  Without a
    record of the direction's changes, the time-tied items configured after the workload's end."""
    lc = result.link_changes
    origin = (lc.get("origin") or {}).get("origin_requested_ns")
    if origin is None:
        return
    from testbed.spec.schedule import Schedule
    end = lc.get("workload_end_ns")
    who = "the session's block ended" if result.spec.workload == EXEC_WORKLOAD else "the client finished"
    end_s = (end - origin) / 1e9 if end is not None else None
    has_summary = bool((metadata.get("backend_summary") or {}).get("directions"))
    warnings = lc["warnings"] = []
    for label, key, table in _direction_keys(metadata.get("links") or [], recorded):
        try:
            schedule = Schedule.from_dict(table)
        except ValueError as exc:
            warnings.append(f"link {label}: its recorded schedule cannot be read ({exc})")
            continue
        changes = recorded.get(key) if key is not None else None
        if changes is None:
            why = ("no link backend summary" if not has_summary else
                   "the backend recorded none that is this link's alone")
            line = f"link {label}: none of its schedule's changes are recorded ({why}), so what took effect is unknown"
            later = [item.text for item in schedule.items()
                     if item.moment is not None and end_s is not None and item.moment > end_s]
            if later:
                line += (f"; configured after {who} ({end_s:.2f} s from the origin), so not on the "
                         f"measured workload: {'; '.join(later)}")
            warnings.append(line)
            continue
        effects = schedule.item_effects(changes, end)
        late = [item.text for item, effect in effects if effect == "after"]
        if late:
            warnings.append(f"link {label}: {who} {end_s:.2f} s from the origin; these took effect "
                            "(in full) only after it, while the run drained or was torn down, not on "
                            f"the measured workload: {'; '.join(late)}")
        never = [f"the up of {item.text} (the link was still down when it stopped)" if effect == "partly"
                 else item.text for item, effect in effects if effect in ("partly", "never")]
        if never:
            stop_s = (time.monotonic_ns() - origin) / 1e9
            warnings.append(f"link {label}: never took effect by the time the links stopped "
                            f"(at most {stop_s:.2f} s from the origin): {'; '.join(never)}")
    for line in warnings:
        log.warning("%s", line)


def _link_changes(metadata: dict) -> dict[str, list[dict]]:
    """Direction -> the schedule changes that took effect, from the emulator's summary."""
    dirs = (metadata.get("backend_summary") or {}).get("directions") or {}
    return {name: d["schedule"]["changes"] for name, d in dirs.items() if d.get("schedule")}


def _host_apply(tb, host: str, h) -> dict:
    import json
    r = tb.run(host, PY + ["testbed.apps.tcpopts", "host", *h.argv()], timeout=30, name="tcpopts")
    if r.returncode:
        raise SetupError(f"applying host factors on {host} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def _start_relay(tb, params, spec: RunSpec, result: RunResult, started: list) -> str:
    """Gateways on the relay hosts joined by one tuned tunnel; returns the SOCKS5 address."""
    from testbed.apps.tcpopts import HostFactors
    from testbed.spec.units import parse_size
    out = result.dir
    cgw, sgw = params.relay_hosts.split(",")
    cgw_ip = tb.ip(cgw)                                   # where the application connects
    cgw_tunnel_ip, sgw_ip = _link_ips(tb, cgw, sgw)       # the tunnel's two ends
    buffers = str(parse_size(params.tunnel_buffers))
    tunnel = ["--sndbuf", buffers, "--rcvbuf", buffers, "--cc", params.tunnel_cc]
    keep = factors.host_fields(spec.host)["keep_metrics"]
    for host, peer in ((cgw, sgw_ip), (sgw, cgw_tunnel_ip)):
        h = HostFactors(peer, initcwnd=params.tunnel_initcwnd, initrwnd=params.tunnel_initcwnd,
                        slow_start_after_idle=False, keep_metrics=keep)
        result.checks["host_factors"][host] = _host_apply(tb, host, h)
    sargv = PY + ["testbed.apps.relay", "server-gw", "--listen", f"0.0.0.0:{TUNNEL_PORT}",
                  "--log", str(out / "sgw.jsonl"), *tunnel]
    result.apps["sgw"] = sargv
    proc = tb.popen(sgw, sargv, name="relay server-gw")
    started.append(("sgw", proc))
    wait_ready(proc, f"server gateway on {sgw}")
    cargv = PY + ["testbed.apps.relay", "client-gw", "--socks", f"0.0.0.0:{SOCKS_PORT}",
                  "--tunnel", f"{sgw_ip}:{TUNNEL_PORT}", "--log", str(out / "cgw.jsonl"), *tunnel,
                  "--connect", params.connect_mode]
    result.apps["cgw"] = cargv
    proc = tb.popen(cgw, cargv, name="relay client-gw")
    started.append(("cgw", proc))
    wait_ready(proc, f"client gateway on {cgw}")
    return f"{cgw_ip}:{SOCKS_PORT}"


def _link_ips(tb, a: str, b: str) -> tuple[str, str]:
    """IP addresses of ``a`` and ``b`` on the link joining them."""
    links = tb.net.linksBetween(tb.host(a), tb.host(b))
    if not links:
        raise UsageError(f"no link between {a} and {b}; relay_hosts names the two gateways")
    by_node = {end.node.name: end.IP() for end in (links[0].intf1, links[0].intf2)}
    return by_node[a], by_node[b]


def _capture_hosts(plan: Plan, tb) -> list[str]:
    hosts = plan.spec.capture.hosts
    if plan.loopback or hosts == "none":
        return []
    return sorted(tb.hosts) if hosts == "all" else list(hosts)


def drain_time(tb) -> float:
    """Seconds to keep capturing after the workload ends, so its last ACKs and FINs are on file:
    twice the sum of every link direction's delay and jitter (an upper bound on any path's RTT)
    plus 100 ms."""
    total = sum(spec["delay"] + spec["jitter"] for link in tb.metadata["links"]
                for spec in (link["a_to_b"], link["b_to_a"]) if spec)
    return 2 * total + 0.1


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process (fields 14, 15 of /proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _capture_summary(caps: list, cpu: list, run_dir: Path) -> dict:
    """The manifest's ``capture``: the tcpdumps' CPU seconds and kernel drops in all, and per
    interface that has a result its pcap (relative to the run directory, which an experiment
    renames), packets captured and dropped, CPU seconds and warnings; {} without captures."""
    records = [{"pcap": os.path.relpath(c.result.pcap, run_dir), "interface": c.result.interface,
                "captured": c.result.captured, "dropped_by_kernel": c.result.dropped_by_kernel,
                "cpu_s": x, "warnings": c.result.warnings} for c, x in zip(caps, cpu) if c.result]
    if not records:
        return {}
    return {"cpu_s": sum(r["cpu_s"] or 0 for r in records),
            "dropped_by_kernel": sum(r["dropped_by_kernel"] or 0 for r in records), "interfaces": records}


def _stop(proc: subprocess.Popen, stem: Path) -> None:
    """End a process this run started (its whole group) and save its output."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    else:
        out, err = proc.communicate()
    for data, suffix in ((out, ".stdout"), (err, ".stderr")):
        if data:
            Path(f"{stem}{suffix}").write_bytes(data if isinstance(data, bytes) else data.encode())


def _last_line(path: Path) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no error output"


# --- the record ------------------------------------------------------------------------------

def _finish(result: RunResult, bed, phases: dict, metrics, compute: bool) -> None:
    """Write the manifest (status, timings, environment, fidelity, inventory); when ``compute``,
    add ``metrics(run_dir)``'s metrics and checks and write it again.  Metrics that cannot read
    the run's data (ValueError, OSError: a damaged capture) leave it complete, the reason in
    ``checks.metrics_error`` and a warning; metrics that raise anything else or return the wrong
    shape (``_metrics_shape``): status failed, the error naming the metrics' file and what went
    wrong, RunError (the run directory is kept; an interruption is re-raised)."""
    result.timings = phases
    from testbed.run.provenance import provenance
    metadata = getattr(bed, "metadata", {}) or {}
    result.environment = {**provenance(), **{k: v for k, v in metadata.items()
                                             if k not in ("backend_summary", "run_id")}}
    result.fidelity = _fidelity(metadata)
    changes = _link_changes(metadata)
    if changes:
        result.link_changes["changes"] = changes
    _schedule_warnings(result, metadata, changes)     # from what the links recorded, once they stopped
    result.files = inventory(result)
    result.finished = time.time()
    result.status = "complete" if compute else "failed"
    result.write()
    if not compute:
        return
    with _phase(phases, "metrics_s"):
        try:
            with signals_raise():           # SIGTERM/SIGHUP as Ctrl-C: recorded below
                computed = metrics(result.dir)
            problem = _metrics_shape(computed)
        except BaseException as exc:
            if interruption(exc) or not isinstance(exc, Exception):    # Ctrl-C, SIGTERM: not complete
                result.status = "failed"
                result.error = (f"{interruption(exc)} while its metrics were computed (the run itself "
                                "finished: testbed analyze RUN_DIR computes them)" if interruption(exc) else
                                f"its metrics could not be computed: {exc!r}")
                result.write()
                raise
            if isinstance(exc, (ValueError, OSError)):     # the run's data (a damaged capture): said, kept
                log.warning("metrics of %s could not be computed: %s", result.dir, exc)
                computed, problem = {"metrics": {}, "checks": {"metrics_error": str(exc)}}, None
            else:                                           # a fault of the metrics code
                problem = f"raised {type(exc).__name__}: {exc}"
        if problem:     # a run without its metrics is not complete; its files stay for testbed analyze
            result.status = "failed"
            result.error = (f"the metrics of workload {result.spec.workload!r} ({source_of(metrics)}) "
                            f"{problem}; the run itself finished and its captures and logs are kept "
                            "(testbed analyze RUN_DIR computes the metrics once that is fixed)")
            result.write()
            raise RunError(result.error, run_dir=result.dir, result=result)
    result.metrics = computed.get("metrics", {})
    result.checks.update(computed.get("checks", {}))
    if not result.spec.capture.keep:
        for pcap in result.files_of("pcap"):
            pcap.unlink(missing_ok=True)
        result.files = inventory(result)
    result.write()


def _metrics_shape(computed: Any) -> str | None:
    """What is wrong with what a workload's ``metrics(run_dir)`` returned (None: nothing): it must
    be ``{"metrics": {NAME: value}, "checks": {NAME: value}}`` (``checks`` may be left out)."""
    allowed = 'allowed: {"metrics": {NAME: value, ...}, "checks": {NAME: value, ...}}'
    if not isinstance(computed, dict):
        return f"returned {type(computed).__name__} {_short(computed)}, not a dict; {allowed}"
    extra = sorted(map(str, set(computed) - {"metrics", "checks"}))
    if extra or "metrics" not in computed:
        what = f"key(s) {', '.join(extra)}" if extra else "no key metrics"
        return f"returned a dict with {what}; {allowed}"
    for key in ("metrics", "checks"):
        part = computed.get(key, {})
        if not isinstance(part, dict) or not all(isinstance(k, str) for k in part):
            return f"returned {key} {_short(part)}, not a dict of names; {allowed}"
    return None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _fidelity(metadata: dict) -> dict:
    """The link backend's verdict on this run (``testbed.emulator.fidelity.verdict``; unknown
    without a summary: loopback, a testbed shared between runs, or a backend without one)."""
    from testbed.emulator import fidelity
    summary = metadata.get("backend_summary")
    return {"backend": metadata.get("backend"), "engine": (summary or {}).get("engine"),
            **fidelity.verdict(summary, metadata.get("links"))}


KINDS = (("manifest.json", "manifest"), ("metadata.json", "metadata"), (".pcap", "pcap"),
         (".pcap.meta.json", "pcap_meta"), (".tcpdump.log", "capture_log"), (".jsonl", "eventlog"),
         (".frames", "framelog"), (".changes.jsonl", "link_changes"), ("summary.json", "emulator_summary"),
         ("config.json", "emulator_config"), ("forwarder.log", "emulator_log"),
         (".stdout", "output"), (".stderr", "output"))


def inventory(result: RunResult) -> list[dict]:
    """Every file of the run directory: path (relative), kind, and the host and interface it
    was recorded on where one applies (frame logs: the emulator direction as interface)."""
    roles = {**result.roles, "cgw": "cgw", "sgw": "sgw"}
    out = []
    for path in sorted(p for p in result.dir.rglob("*") if p.is_file()):
        rel = path.relative_to(result.dir).as_posix()
        kind = next((k for suffix, k in sorted(KINDS, key=lambda x: -len(x[0]))
                     if path.name.endswith(suffix)), "other")
        host = interface = None
        if kind in ("pcap", "pcap_meta", "capture_log"):
            stem = path.name.split(".pcap")[0]
            host, _, interface = stem.partition("-")
            interface = interface or None
        elif kind in ("eventlog", "output"):
            stem = path.name.split(".")[0]
            host = roles.get(stem) or (stem.split("-", 2)[2] if stem.startswith("exec-")
                                       and stem.count("-") >= 2 else None)
        elif kind == "framelog":
            interface = path.stem
        elif kind == "link_changes":
            interface = path.name.removesuffix(".changes.jsonl")
        out.append({"path": rel, "kind": kind, "host": host, "interface": interface,
                    "bytes": path.stat().st_size})
    return out
