"""Runs of an experiment on many machines: the Dask executor of :mod:`experiments.runner`.

``DaskCluster(ADDRESS)`` is the runner's ``where=``: entered, it starts a ``LocalCluster``
(``local:N``: N worker processes on this machine, for trying it and for the tests) or connects to
a scheduler (``tcp://HOST:PORT`` on a loopback address only, ``tls://HOST:PORT`` with the
certificates of Dask's configuration, ``distributed.comm.tls.*``: tasks run as root on the
workers, so a scheduler reachable from other machines must authenticate them).  Then:

* **Admission**: every worker's :func:`facts` (git revision and whether the tree is dirty, kernel,
  Python, netem/htb in its kernel, the native emulator engine) must equal the coordinator's; a
  worker that differs is refused before its first run, one line naming what differs, and closed.
  A block that reaches a worker which joined later checks the same facts first
  (:class:`Refused`; the block is then sent elsewhere).
* **Blocks kept together**: one task per repetition block (the arms of one repetition, A B or
  A B B A), so the arms meet on one machine back to back; each task asks for the worker resource
  ``testbed=1`` (``testbed worker`` starts a worker with one thread and that resource), and holds
  the machine lock (:func:`machine_lock`: ``flock`` on ``testbed.host.lifecycle.STATE_DIR``)
  while it runs, so two workers on one machine (``local:2``) take turns instead of running two
  topologies against each other on the same CPUs.
* **Gathered run by run**: the task runs the block into a temporary directory on the worker
  with :func:`experiments.runner.run_block`; as each run ends it packs the run directory (tar)
  with its SHA-256, keeps the pack in the worker's memory (``Client.scatter``) and puts its
  future in the campaign's Dask ``Queue``; at the end it deletes the temporary directory and
  returns the packs.  The coordinator takes each pack as it comes, and from the block's result
  those whose sent copy was lost with its worker (scattered data has no lineage; a result has),
  checks the checksum, unpacks into ``runs/.partial-NNN-LEVEL`` and renames it, as a local run
  does — so a coordinator stopped mid-block keeps the block's finished runs.  A run gathered
  once is finished: when a block is started again (below), the copies of runs already gathered
  are dropped.
* **Nothing lost**: a worker that dies mid-block has the block started again on another worker by
  the scheduler (what the dead run left on its machine — processes, namespaces — is removed by
  :func:`reap_blocks` before the next block there and when the workers stop); the coordinator
  counts the starts (worker events ``testbed-block``) and records
  them in each run's ``experiment.json`` (``attempts``, ``lost_on``).  A block that killed more
  than :data:`ALLOWED_FAILURES` workers is not retried: its runs are recorded as failed with that reason
  (the scheduler's ``distributed.scheduler.allowed-failures``; ``local:N`` sets it).  With no
  worker at all for :data:`WAIT_WORKERS_S`, the campaign stops with one line (what was gathered
  is kept for ``--resume``).

``distributed`` is imported only here and only when a ``DaskCluster`` is entered: the default
in-process path needs nothing of it (the ``[cluster]`` extra of setup.cfg).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import ipaddress
import json
import logging
import os
import platform
import shutil
import signal
import socket
import sys
import tarfile
import tempfile
import time
import uuid
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable

from testbed.host.logs import log_to_stderr, logging_set_up
from testbed.spec.errors import SetupError, UsageError
from testbed.spec.runresult import RunResult

from experiments.definition import Experiment
from experiments.order import Slot
from experiments.runner import RUN_INFO, InProcess, _write_json, promote, run_block

log = logging.getLogger(__name__)

#: the worker resource one run needs; a ``testbed worker`` has exactly one
RESOURCE = "testbed"
#: workers a block may kill and still be started again; one more and its runs are recorded as
#: failed (local:N; a scheduler of your own reads ``distributed.scheduler.allowed-failures``)
ALLOWED_FAILURES = 2
#: seconds to wait for the first worker of a scheduler, and for one while no worker is left
WAIT_WORKERS_S = 60
#: seconds between looks at the workers while blocks run
POLL_S = 5
#: seconds a sent run's pack may take to come from its worker before its block's result is
#: waited for instead (a pack lost with its worker never comes)
FETCH_S = 60
EVENTS = "testbed-block"
INSTALL = "--cluster needs Dask distributed: pip install -e '.[cluster]' (scripts/install.sh installs it)"


class Refused(RuntimeError):
    """A block reached a worker whose facts differ from the coordinator's."""


def check_address(address: str, what: str = "--cluster", local: bool = True) -> tuple[str, str | int]:
    """``("local", N)`` (where ``local``) or ``("remote", address)``; a usage error for anything
    else, and for a ``tcp://`` scheduler whose host is not a loopback address (tasks run as root
    there)."""
    remote = "tcp://HOST:PORT (loopback only) or tls://HOST:PORT"
    if not local and not address.startswith(("tcp://", "tls://")):
        raise UsageError(f"{what} {address}: give the scheduler's address, {remote}")
    if address.startswith("local:"):
        n = address.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"{what} {address}: local:N needs N ≥ 1 workers (local:2)")
        return "local", int(n)
    scheme, sep, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if not sep or scheme not in ("tcp", "tls") or not host or not port.isdigit():
        raise UsageError(f"{what} {address}: give {'local:N, ' if local else ''}{remote}")
    if scheme == "tcp" and not _loopback(host.strip("[]")):
        raise UsageError(f"{what} {address}: a scheduler on a non-loopback address needs TLS "
                         "(tls://…, certificates in Dask's configuration; docs/campaigns.md): the "
                         "runs execute as root on the workers")
    return "remote", address


def check_tls(address: str, role: str, what: str = "--cluster") -> None:
    """For a ``tls://`` address: a usage error, one line, unless Dask's configuration names the CA
    and ``role``'s certificate (``distributed.comm.tls.ca-file``, ``….{role}.cert``; Dask would
    otherwise fail with a TypeError deep in its TLS connector) and every file it names exists."""
    if not address.startswith("tls://"):
        return
    from distributed.security import Security
    tls = Security().get_tls_config_for_role(role)
    keys = {"ca_file": "distributed.comm.tls.ca-file", "cert": f"distributed.comm.tls.{role}.cert",
            "key": f"distributed.comm.tls.{role}.key"}
    missing = [keys[k] for k in ("ca_file", "cert") if not tls.get(k)]
    if missing:
        raise UsageError(f"{what} {address}: TLS needs {' and '.join(missing)} in Dask's configuration "
                         "(~/.config/dask/distributed.yaml or DASK_DISTRIBUTED__COMM__TLS__… variables; "
                         "docs/campaigns.md#security)")
    for k, key in keys.items():
        v = tls.get(k)
        if v and "\n" not in v and not Path(v).is_file():
            raise UsageError(f"{what} {address}: {key} names {v}, which is no file")


def _loopback(host: str) -> bool:
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def facts() -> dict:
    """What a worker must share with the coordinator for its runs to be comparable: the git
    revision and dirty flag of the checkout, the kernel release, Python's version, whether netem
    and htb work in this kernel (None when not root), and whether the native emulator engine
    loads.  Computed anew each time (a checkout may move under a long-lived worker)."""
    from testbed.emulator.native import available
    from testbed.run.provenance import git_revision
    probe = {"netem": None, "htb": None}
    if os.geteuid() == 0:
        from testbed.backends.kernel import probe_qdiscs
        probe = probe_qdiscs()
    git = git_revision()
    return {"revision": git["revision"], "dirty": git["dirty"], "kernel": platform.release(),
            "python": sys.version.split()[0], "netem": probe["netem"], "htb": probe["htb"],
            "native_engine": available()[0]}


def _facts_there() -> dict:
    """:func:`facts` as a worker computes them (sent by reference: the worker's own module)."""
    return facts()


def differences(theirs: dict, ours: dict) -> str:
    """``kernel 6.1.0 there, 6.18.0 here; ...`` (empty when equal)."""
    return "; ".join(f"{k} {theirs.get(k)} there, {ours.get(k)} here"
                     for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k))


@contextmanager
def machine_lock():
    """One run of any worker at a time on this machine: ``flock`` on the testbed's state
    directory (released by the kernel when the holder dies)."""
    from testbed.host.lifecycle import STATE_DIR
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(STATE_DIR, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def reap_blocks() -> list[str]:
    """End what runs of blocks left on this machine when their worker died or was stopped
    mid-run (``testbed clean``'s work, for the lifecycle records of runs in a block's scratch
    directory whose owner is gone); a line per thing removed."""
    from testbed.host.lifecycle import STATE_DIR, RunState, proc_start_time, remove_state
    done = []
    for path in sorted(STATE_DIR.glob("tb-*.json")):
        try:
            state = RunState.load(path)
        except (OSError, ValueError, TypeError):
            continue
        if "/testbed-block-" in state.results_dir and \
                proc_start_time(state.owner_pid) != state.owner_start_time:
            done += remove_state(state)
    return done


def pack(d: Path) -> tuple[bytes, str]:
    """A run directory as an uncompressed tar (paths relative to it) and its SHA-256."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(d, arcname=".")
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def unpack(data: bytes, sha256: str, dest: Path) -> None:
    """Check ``data`` against ``sha256`` and extract it into ``dest`` (made anew)."""
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise SetupError(f"{dest.name}: the packed run directory arrived damaged (SHA-256 {got[:12]}…, "
                         f"sent {sha256[:12]}…)")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for m in tar.getmembers():        # what pack() makes: plain files and directories inside
            if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in Path(m.name).parts:
                raise SetupError(f"{dest.name}: the packed run directory holds {m.name!r}, not a plain "
                                 "file or directory inside it")
        tar.extractall(dest)


def _wanted(worker, key: str) -> bool:
    """Whether the task ``key`` running on ``worker`` is still wanted: the scheduler cancels it
    when its coordinator cancels it or goes away (distributed's worker state machine)."""
    ts = worker.state.tasks.get(key)
    return ts is not None and ts.state not in ("cancelled", "released", "forgotten")


def remote_block(exp_dict: dict, slots: list[dict], executor: Callable, kw: dict, want: dict,
                 key: str, queue: str, log_level: int = logging.WARNING) -> list[dict]:
    """The task of one repetition block, on a worker: check the facts, take the machine lock,
    run the block into a temporary directory, send each run directory packed as it ends (the
    future of ``{"key", "index", "data", "sha256"}``, held here, into the Dask queue
    ``queue``), keep nothing on disk; the packs, returned too: the task's result, which Dask
    computes again should this worker die before the coordinator has it, brings any run whose
    sent copy was lost with the worker.  ``log_level``: the coordinator's, logged as it does
    (``testbed.host.logs.log_to_stderr``) in a worker process whose own set-up never ran (a local
    cluster's, spawned); a ``testbed worker`` logs at its own -v or -q."""
    from distributed import Queue, get_client, get_worker
    if not logging_set_up():        # a spawned worker; a `testbed worker` keeps its own -v, -q
        log_to_stderr(log_level)
    worker = get_worker()
    mine = facts()
    if mine != want:
        raise Refused(f"worker {worker.address} ({socket.gethostname()}) refused: {differences(mine, want)}")
    exp = Experiment.from_dict(exp_dict)
    plans = exp.validate()
    if kw.get("checked"):
        for plan in plans.values():
            plan.preflight()
    block = [Slot(d["index"], d["level"], d["rep"], d["warmup"], d["seed"]) for d in slots]
    with machine_lock():
        for line in reap_blocks():          # a run of a worker that died here before
            log.warning("before block %s: %s", key, line)
        # the start reaches the scheduler before the block runs: a call answered by the scheduler,
        # not Worker.log_event, whose batched stream a worker killed at once never sends
        get_client().log_event(EVENTS, {"key": key, "worker": worker.address, "pid": os.getpid()})
        tmp = Path(tempfile.mkdtemp(prefix="testbed-block-", dir=worker.local_directory))
        client, packs = get_client(), []
        try:
            (tmp / "runs").mkdir()
            for slot, _ in run_block(exp, plans, block, tmp, executor, kw, None, {"worker": worker.address}):
                if not _wanted(worker, key):    # the coordinator stopped: nobody would take it
                    log.warning("block %s: its coordinator stopped; the block ends after %s", key, slot.dirname)
                    break
                data, sha = pack(tmp / "runs" / slot.dirname)
                packs.append({"key": key, "index": slot.index, "data": data, "sha256": sha})
                # the pack stays here until the coordinator fetches it; the queue, on the
                # scheduler, holds its future only (Dask: "not wise to send large objects")
                (held,) = client.scatter([packs[-1]], workers=[worker.address], hash=False)
                Queue(queue, client=client).put(held)
            return packs
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class DaskCluster:
    """The runner's ``where=`` for Dask (see the module's docstring).  Use as a context manager:
    entering starts or connects and admits the workers; leaving closes the client and every
    process it started, also on Ctrl-C, SIGTERM and errors."""

    def __init__(self, address: str, allowed_failures: int = ALLOWED_FAILURES):
        self.kind, self.target = check_address(address)
        self.address = address
        self.allowed_failures = allowed_failures
        self.client = self.cluster = None
        self.refused: list[str] = []
        self._refused_addrs: set[str] = set()
        self.life = None
        self._log_level = logging.NOTSET

    def __enter__(self) -> "DaskCluster":
        try:
            import dask
            import distributed
        except ImportError:
            raise UsageError(INSTALL) from None
        from testbed.host.lifecycle import Run
        # a lifecycle record: SIGTERM/SIGHUP unwind this block, and `testbed clean` removes what a
        # killed coordinator left (its scratch directory; its workers end with it by themselves)
        self.life = Run(results_root=None).__enter__()
        self.life.add_cleanup(self._close)
        quiet = logging.getLogger().getEffectiveLevel() > logging.INFO      # testbed -v shows Dask's
        self._log_level = logging.getLogger("distributed").level
        logging.getLogger("distributed").setLevel(logging.ERROR if quiet else logging.INFO)
        try:
            if self.kind == "local":
                scratch = tempfile.mkdtemp(prefix="testbed-dask-")
                self.life.record_tmpdir(Path(scratch))
                with dask.config.set({"distributed.scheduler.allowed-failures": self.allowed_failures,
                                      "distributed.worker.daemon": False, "temporary-directory": scratch}):
                    self.cluster = distributed.LocalCluster(
                        n_workers=self.target, threads_per_worker=1, processes=True, host="127.0.0.1",
                        resources={RESOURCE: 1}, dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR,
                        local_directory=scratch)
                self.client = distributed.Client(self.cluster)
                for pid in self.client.run(os.getpid).values():
                    self.life.record_pid(pid, "dask worker")
            else:
                check_tls(self.target, "client")
                try:
                    self.client = distributed.Client(self.target, timeout=WAIT_WORKERS_S)
                except (OSError, TimeoutError) as exc:
                    raise SetupError(f"--cluster {self.address}: no scheduler answered ({exc})") from None
                try:
                    self.client.wait_for_workers(1, timeout=WAIT_WORKERS_S)
                except TimeoutError:
                    raise SetupError(f"--cluster {self.address}: no worker joined within "
                                     f"{WAIT_WORKERS_S} s (start one with `testbed worker "
                                     f"{self.address}`)") from None
            self.admit()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.life is not None:
            life, self.life = self.life, None
            life.close()        # _close, then any worker process still there, then the scratch space

    def _close(self) -> None:
        for obj in (self.client, self.cluster):
            if obj is not None:
                try:
                    obj.close()
                except Exception as err:   # noqa: BLE001 - keep closing the rest
                    log.warning("closing %s failed: %r", type(obj).__name__, err)
        if self.kind == "local":            # a run its worker was stopped in: what it left
            reap_blocks()
        self.client = self.cluster = None
        logging.getLogger("distributed").setLevel(self._log_level)

    def admit(self) -> list[str]:
        """Close every worker whose facts differ from ours (one line each); the workers kept."""
        want = facts()
        theirs = self.client.run(_facts_there)
        bad = {addr: differences(f, want) for addr, f in theirs.items() if f != want}
        for addr, why in bad.items():
            self._refuse(f"worker {addr} refused: {why}", addr)
        kept = [a for a in theirs if a not in bad]
        if not kept:
            raise SetupError(f"--cluster {self.address}: no worker has this machine's facts "
                             f"({'; '.join(self.refused)})")
        return kept

    def _refuse(self, line: str, addr: str) -> None:
        """Report and close a refusing worker, once: blocks it refused before it was closed
        are sent elsewhere without a second line."""
        if addr in self._refused_addrs:
            return
        self._refused_addrs.add(addr)
        self.refused.append(line)
        print(f"testbed: {line}", file=sys.stderr)
        self.client.retire_workers([addr], close_workers=True, remove=True)

    def prepare(self, plans: dict, checked: bool, keep: Callable | None) -> None:
        """Before the experiment's directory is made: what a worker must have is checked by each
        worker before its block; a topology kept up across a block is not offered here."""
        if keep is not None:
            raise UsageError("--keep-topology is not available with --cluster (each worker brings its "
                             "topology up per run)")

    def run(self, exp: Experiment, plans: dict, blocks: list[list[Slot]], out: Path, executor: Callable,
            kw: dict, keep: Callable | None):
        """Yield ``(slot, RunResult, sha256)`` per gathered run, as each run ends on its worker."""
        from distributed import Queue, wait
        from distributed.client import CancelledError
        from distributed.scheduler import KilledWorker
        want, exp_dict = facts(), exp.to_dict()
        queue = Queue(f"testbed-runs-{uuid.uuid4().hex}", client=self.client)
        by_key, gathered = {}, set()

        def submit(block):
            key = f"block-{exp.name}-{'w' if block[0].warmup else 'r'}{block[0].rep}-{uuid.uuid4().hex[:8]}"
            by_key[key] = block
            return self.client.submit(remote_block, exp_dict, [s.to_dict() for s in block], executor, kw,
                                      want, key, queue.name, logging.getLogger().getEffectiveLevel(), key=key,
                                      resources={RESOURCE: 1}, pure=False,
                                      retries=0)

        def gather(p: dict):
            """A run's pack, gathered unless its run is gathered already."""
            slot = next(s for s in by_key[p["key"]] if s.index == p["index"])
            if slot.index in gathered:          # a block started again, or its result: finished
                return
            gathered.add(slot.index)
            yield slot, self._gather(out, slot, p, self._starts(p["key"])), p["sha256"]

        def take():
            """The runs the queue holds now, gathered (a lookup that never waits: a waiting one
            that times out prints the scheduler's traceback).  A pack lost with its worker
            (scattered data Dask cannot compute again) is left to its block's result."""
            for fut in queue.get(batch=True):
                if fut.status == "pending":     # the client has not heard of it yet
                    with contextlib.suppress(TimeoutError):
                        wait([fut], timeout=POLL_S)
                if fut.status != "finished":    # lost with its worker
                    continue
                try:
                    p = fut.result(timeout=FETCH_S)
                except (CancelledError, TimeoutError, OSError):
                    continue
                yield from gather(p)

        remaining, alone_since = {submit(b) for b in blocks}, None
        try:
            while remaining:
                yield from take()
                try:
                    done, remaining = wait(remaining, timeout=POLL_S, return_when="FIRST_COMPLETED")
                except TimeoutError:            # still running; give up only when no worker is left
                    if self.client.scheduler_info()["workers"]:
                        alone_since = None
                    elif alone_since is None:
                        alone_since = time.monotonic()
                    elif time.monotonic() - alone_since > WAIT_WORKERS_S:
                        raise SetupError(f"--cluster {self.address}: no worker for {WAIT_WORKERS_S} s, "
                                         f"{len(remaining)} blocks not run (the runs gathered are kept; "
                                         "continue with --resume)") from None
                    continue
                yield from take()               # what the blocks that ended sent last
                for fut in done:
                    block = by_key[fut.key]
                    if fut.status == "finished" and all(s.index in gathered for s in block):
                        continue                # every run came as it ended: no second transfer
                    try:
                        packs = fut.result()
                    except Refused as exc:             # a worker that joined after admission
                        self._refuse(str(exc), str(exc).split()[1])
                        remaining.add(submit(block))
                        continue
                    except KilledWorker as exc:
                        failed = [s for s in block if s.index not in gathered]
                        gathered.update(s.index for s in failed)     # recorded: a late pack is dropped
                        yield from self._killed(exp, out, failed, self._starts(fut.key), exc)
                        continue
                    for p in packs:                   # those whose sent copy did not come
                        yield from gather(p)
        finally:
            self.client.cancel(list(remaining))
            with contextlib.suppress(Exception):   # release what a stopped campaign left queued
                queue.get(batch=True)

    def _starts(self, key: str) -> list[str]:
        """The workers that started block ``key``, in order (its worker events)."""
        for _ in range(20):             # the event travels apart from the result: wait a moment
            got = [m["worker"] for _, m in self.client.get_events(EVENTS) if m.get("key") == key]
            if got:
                return got
            time.sleep(0.05)
        return []

    def _gather(self, out: Path, slot: Slot, p: dict, starts: list[str]) -> RunResult:
        final, tmp = out / "runs" / slot.dirname, out / "runs" / f".partial-{slot.dirname}"
        unpack(p["data"], p["sha256"], tmp)
        info = json.loads((tmp / RUN_INFO).read_text())
        _write_json(tmp / RUN_INFO, {**info, "attempts": max(1, len(starts)), "lost_on": starts[:-1]})
        return promote(tmp, final)

    def _killed(self, exp: Experiment, out: Path, block: list[Slot], starts: list[str], exc):
        """Record each run of a block that killed too many workers as failed, with the reason."""
        why = (f"killed {len(starts) or self.allowed_failures + 1} workers (a block is started at most "
               f"{self.allowed_failures + 1} times): {', '.join(starts) or exc}")
        for slot in block:
            final, tmp = out / "runs" / slot.dirname, out / "runs" / f".partial-{slot.dirname}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            now = time.time()
            result = RunResult(run_id=f"lost-{slot.dirname}", dir=tmp, spec=exp.cell_spec(slot.level, slot.seed),
                               status="failed", error=why, started=now, finished=now)
            result.write()
            _write_json(tmp / RUN_INFO, {**slot.to_dict(), "wall_s": None, "setup_s": None, "loadavg": None,
                                         "kept_topology": False, "topology_dir": None, "disk_mb": 0.0,
                                         "machine": None, "worker": None, "attempts": len(starts),
                                         "lost_on": starts})
            yield slot, promote(tmp, final), None


def place(cluster: str | None):
    """The executor for ``--cluster``: ``experiments.runner.InProcess()`` for None, else a
    :class:`DaskCluster` — a context manager either way (enter it around the runs; leaving it ends
    every process it started)."""
    return nullcontext(InProcess()) if cluster is None else DaskCluster(cluster)


def serve_worker(address: str, name: str | None = None) -> None:
    """``testbed worker``: a Dask worker (under a nanny that restarts it if a run kills it) with
    one thread and the resource ``testbed=1``, until Ctrl-C or SIGTERM."""
    import asyncio
    _, target = check_address(address, "testbed worker", local=False)
    try:
        import dask
        from distributed import Nanny
    except ImportError:
        raise UsageError(INSTALL.replace("--cluster", "testbed worker")) from None
    check_tls(target, "worker", "testbed worker")

    async def serve(scratch):
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        level = "info" if logging.getLogger().getEffectiveLevel() <= logging.INFO else "error"
        logging.getLogger("distributed").setLevel(level.upper())
        with dask.config.set({"distributed.worker.daemon": False, "temporary-directory": scratch,
                              "logging.distributed": level}):
            async with Nanny(target, nthreads=1, resources={RESOURCE: 1}, local_directory=scratch,
                             name=name or socket.gethostname(), silence_logs=getattr(logging, level.upper())
                             ) as nanny:
                print(f"testbed: worker {nanny.worker_address} of {target} ready", file=sys.stderr)
                ended = asyncio.ensure_future(nanny.finished())
                await asyncio.wait([ended, asyncio.ensure_future(stop.wait())],
                                   return_when=asyncio.FIRST_COMPLETED)
        print("testbed: worker stopped", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="testbed-dask-") as scratch:
        try:
            asyncio.run(serve(scratch))
        except RuntimeError as exc:         # Dask's "Nanny failed to start.": say why
            cause = exc
            while cause.__cause__ is not None:
                cause = cause.__cause__
            raise SetupError(f"testbed worker: no worker started for the scheduler {target}: "
                             f"{str(cause) or type(cause).__name__} (is `dask scheduler` running "
                             "there? docs/campaigns.md)") from None
        finally:
            reap_blocks()                   # a run the stopped worker was in the middle of
