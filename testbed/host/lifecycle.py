"""Run lifecycle: what a testbed run creates, recorded so that it can always be removed.

Every run gets an id (``tb-YYYYmmdd-HHMMSS-xxxx``), a results directory and a state file in
``STATE_DIR`` (``/run/testbed``, a tmpfs that vanishes with the namespaces on reboot; for
another user than root, its own directory).  The state
file lists the processes the run started (PID plus kernel start time, so a reused PID is never
mistaken for ours), the network namespaces those processes hold (by inode), and temporary
directories.  ``Run.close()`` ends them on normal exit, exceptions, SIGINT, SIGTERM and SIGHUP;
``clean()`` does the same for runs whose owner died (SIGKILL, power loss of the shell...).
Both first decide everything (a ``Plan``: ``plan_removal``, ``plan_clean``), then execute it;
``testbed clean --dry-run`` describes the same plan instead.

Namespaces: Mininet hosts are unnamed namespaces held by their shell processes; ending every
process inside a namespace frees it, and the kernel then deletes its veths.  Processes inside a
testbed namespace were all started by the testbed (nothing else enters it), so teardown also
ends processes it finds there, identified by the namespace inode recorded for the run.  The
kernel reuses a freed namespace's inode at once, so an inode names the run's namespace only
while something holds that namespace: a live run holds each one open (a file descriptor, from
the moment it records a process there until its close), and ``clean()`` first opens the
namespaces a recorded process of the crashed run still holds; processes in a recorded inode
that nothing of the run holds any more are named and left alone.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)
# root: /run/testbed; another user (loopback runs need no root) keeps its own runs' state apart
STATE_DIR = Path(os.environ.get("TESTBED_STATE_DIR") or (
    "/run/testbed" if os.geteuid() == 0 else
    f"{os.environ.get('XDG_RUNTIME_DIR') or '/tmp'}/testbed-{os.geteuid()}"))
PREFIX = "tb"
LEFT_ALONE = "left alone:"   # how remove_state begins a line about processes it did not end


class RunInterrupted(SystemExit):
    """Raised in the main thread when SIGTERM/SIGHUP arrives, so ``with`` blocks unwind."""


def proc_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat);
    None when there is no such process or it is a zombie (it has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


@dataclass
class ProcessRecord:
    pid: int
    start_time: int
    what: str
    group: bool = False  # the process leads its own process group: end the whole group

    def alive(self) -> bool:
        return proc_start_time(self.pid) == self.start_time


@dataclass
class RunState:
    run_id: str
    owner_pid: int
    owner_start_time: int
    results_dir: str
    processes: list[ProcessRecord] = field(default_factory=list)
    netns_inodes: list[int] = field(default_factory=list)
    tmpdirs: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> "RunState":
        d = json.loads(path.read_text())
        d["processes"] = [ProcessRecord(**p) for p in d.get("processes", [])]
        return cls(**d)


def new_run_id() -> str:
    return f"{PREFIX}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


class Run:
    """One testbed run. Use as a context manager; see the module docstring."""

    def __init__(self, results_root: Path | str | None = "results", run_id: str | None = None,
                 run_dir: Path | str | None = None):
        """``results_root`` None: a run that writes no results of its own (only records);
        ``run_dir``: the results directory itself (instead of ``results_root/<id>``)."""
        self.id = run_id or new_run_id()
        if run_dir is not None:
            self.dir = Path(run_dir).resolve()
        else:
            self.dir = Path(results_root).resolve() / self.id if results_root is not None else None
        self.state_path = STATE_DIR / f"{self.id}.json"
        self.state = RunState(self.id, os.getpid(), proc_start_time(os.getpid()) or 0,
                              str(self.dir or ""))
        self._cleanups: list[Callable[[], None]] = []
        self._old_handlers: dict[int, object] = {}
        self._closed = False
        self._netns: dict[int, int] = {}        # inode -> an open descriptor of that namespace

    # --- recording ------------------------------------------------------------------------
    def _save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.state), indent=1))
        os.replace(tmp, self.state_path)

    def record_pid(self, pid: int, what: str, group: bool = False) -> None:
        """Record a process this run started (``group``: it leads its own process group)."""
        start = proc_start_time(pid)
        if start is None:
            return
        rec = ProcessRecord(pid, start, what, group)
        self.state.processes.append(rec)
        inode = netns_inode(pid)
        if inode is not None and inode != netns_inode(os.getpid()):
            if inode not in self.state.netns_inodes:
                self.state.netns_inodes.append(inode)
            if inode not in self._netns:        # also when an earlier process there exited first
                self._netns.update(hold_namespaces([rec], {inode}))
        self._save()

    def record_tmpdir(self, path: Path) -> None:
        """Record a temporary directory this run made; removed at close and by ``clean``."""
        self.state.tmpdirs.append(str(path))
        self._save()

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` at close, last added first, before recorded processes are ended."""
        self._cleanups.append(fn)

    # --- context ----------------------------------------------------------------------------
    def __enter__(self) -> "Run":
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
        self._save()
        self._old_handlers = _raise_on_term()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def _on_signal(signum, frame):
        raise RunInterrupted(128 + signum)

    def close(self) -> None:
        """Tear down: cleanups, then every recorded process, temp dirs, the state file.

        Signals are deferred while this runs, so a second Ctrl-C cannot leave a half-torn-down run.
        """
        if self._closed:
            return
        self._closed = True
        try:
            with _signals_deferred():
                for fn in reversed(self._cleanups):
                    try:
                        fn()
                    except Exception as exc:  # keep tearing down: one failure must not leak the rest
                        log.warning("teardown step failed: %r", exc)
                for line in remove_state(self.state, self._netns):
                    if line.startswith(LEFT_ALONE):
                        log.warning("%s: %s", self.id, line)
        finally:        # after the deferral has put back what it replaced: the Run's own handlers
            self._netns = {}
            _restore(self._old_handlers)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    pending: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    try:
        old = {s: signal.signal(s, lambda n, f: pending.append(n)) for s in sigs}
    except ValueError:  # not in the main thread
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if pending:
            raise RunInterrupted(128 + pending[0])


def end_process(rec: ProcessRecord, grace: float = 2.0) -> None:
    """SIGTERM the recorded process (its group if it leads one), SIGKILL after ``grace`` s."""
    if not rec.alive():
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
        with contextlib.suppress(ProcessLookupError):
            if rec.group and os.getpgid(rec.pid) == rec.pid:
                os.killpg(rec.pid, sig)
            else:
                os.kill(rec.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(rec.pid)
            if not rec.alive():
                return
            time.sleep(0.02)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def processes_in_netns(inodes: set[int]) -> list[int]:
    """PIDs of all processes whose network namespace is one of ``inodes`` (none: no scan)."""
    if not inodes:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            if netns_inode(int(entry.name)) in inodes:
                found.append(int(entry.name))
    return found


def hold_namespaces(processes: list[ProcessRecord], inodes: set[int]) -> dict[int, int]:
    """``{inode: open descriptor}`` of each namespace of ``inodes`` that one of ``processes``
    (alive, by its start time) is in: while the descriptor is open the namespace cannot be freed,
    so its inode cannot name another one (module docstring)."""
    held: dict[int, int] = {}
    for rec in processes:
        inode = netns_inode(rec.pid)
        if inode not in inodes or inode in held:
            continue
        try:
            fd = os.open(f"/proc/{rec.pid}/ns/net", os.O_RDONLY)
        except OSError:
            continue
        if rec.alive() and os.fstat(fd).st_ino == inode:    # still that process: not a reused PID
            held[inode] = fd
        else:
            os.close(fd)
    return held


def command_line(pid: int) -> str:
    """The process's command line (``/proc/PID/cmdline``, its arguments joined by spaces), its
    name in brackets when it has none (a kernel thread, a zombie); ``?`` when it is gone."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        if argv != [b""]:
            return " ".join(a.decode(errors="replace") for a in argv)
        return f"[{Path(f'/proc/{pid}/comm').read_text().strip()}]"
    except OSError:
        return "?"


@dataclass
class Action:
    """One step of a :class:`Plan`: ``would``, the lines saying what it would do (``testbed clean
    --dry-run``); ``do``, which does it and returns the lines saying what it did (none when there
    was nothing left to do); ``do`` None for something left alone, said in the same lines either way."""
    would: list[str]
    do: Callable[[], list[str]] | None = None

    def indented(self, prefix: str = "  ") -> "Action":
        do = self.do
        return Action([prefix + line for line in self.would],
                      None if do is None else lambda: [prefix + line for line in do()])


@dataclass
class Plan:
    """What ``clean`` (or a run's teardown) removes and ends, decided before anything is:
    :meth:`execute` does it, :meth:`describe` only says it.  ``fds``: descriptors of the namespaces
    the plan holds so that their inodes keep naming them (module docstring), closed by either."""
    actions: list[Action] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)

    def extend(self, other: "Plan", prefix: str = "") -> "Plan":
        self.actions += [a.indented(prefix) for a in other.actions] if prefix else other.actions
        self.fds += other.fds
        return self

    def execute(self) -> list[str]:
        """Do every action, in order; a line per thing done (and per thing left alone)."""
        try:
            return [line for a in self.actions for line in (a.do() if a.do else a.would)]
        finally:
            self.release()

    def describe(self) -> list[str]:
        """What :meth:`execute` would do, nothing done: a line per thing found."""
        self.release()
        return [line for a in self.actions for line in a.would]

    def release(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def ending(rec: ProcessRecord, label: str) -> Action:
    """End ``rec`` (``end_process``) if it is still alive then; ``label`` names it in the lines
    (``server (pid 12)``), the would-line with its command line."""
    def do() -> list[str]:
        if not rec.alive():
            return []
        end_process(rec)
        return [f"ended {label}"]
    return Action([f"would end {label}: {command_line(rec.pid)}"], do)


def removing(path: Path | str) -> Action:
    """Remove the directory ``path`` if it is still there then."""
    def do() -> list[str]:
        if not Path(path).exists():
            return []
        shutil.rmtree(path, ignore_errors=True)
        return [f"removed {path}"]
    return Action([f"would remove {path}"], do)


def remove_state(state: RunState, held: dict[int, int] | None = None) -> list[str]:
    """End everything ``state`` records (:func:`plan_removal`); return a line per thing removed."""
    return plan_removal(state, held, listing=False).execute()


def plan_removal(state: RunState, held: dict[int, int] | None = None, listing: bool = True) -> Plan:
    """What ending everything ``state`` records takes: its recorded processes still alive, then
    the processes in the recorded namespaces — only in those held (``held``: inode -> open
    descriptor, from the live run; else opened here through the recorded processes still in
    them; the plan closes them) — its temporary directories and its state file.  Processes in a
    recorded namespace nothing of the run holds any more are named and left alone (module
    docstring).  The processes in the held namespaces are found again when the plan is executed,
    after the recorded ones have ended; those of now are the ones it says it would end (not
    looked for without ``listing``: a plan executed at once says nothing before)."""
    held = dict(held or {})
    held.update(hold_namespaces(state.processes, set(state.netns_inodes) - set(held)))
    plan = Plan(fds=list(held.values()))
    try:
        alive = [rec for rec in reversed(state.processes) if rec.alive()]
        plan.actions += [ending(rec, f"{rec.what} (pid {rec.pid})") for rec in alive]
        if held:
            ours = {rec.pid for rec in alive}
            now = [pid for pid in processes_in_netns(set(held)) if pid not in ours] if listing else []
            plan.actions.append(Action(
                [f"would end process {pid} left in a testbed namespace: {command_line(pid)}" for pid in now],
                lambda: _end_in_namespaces(set(held))))
        unsure = processes_in_netns(set(state.netns_inodes) - set(held))
        if unsure:
            plan.actions.append(Action([
                f"{LEFT_ALONE} processes {', '.join(map(str, unsure))} in a namespace whose inode the run "
                "recorded but none of its processes holds any more (the kernel reuses inodes): end "
                "them by hand if they are the run's"]))
        plan.actions += [removing(d) for d in state.tmpdirs if Path(d).exists()]
        path = STATE_DIR / f"{state.run_id}.json"
        plan.actions.append(Action([f"would remove its state file {path}"] if path.exists() else [],
                                   lambda: _unlink(path)))
    except BaseException:
        plan.release()
        raise
    return plan


def _end_in_namespaces(inodes: set[int]) -> list[str]:
    """End every process in the namespaces ``inodes`` (held by the plan: they are the run's)."""
    done = []
    for pid in processes_in_netns(inodes):
        start = proc_start_time(pid)
        if start is not None:
            end_process(ProcessRecord(pid, start, "process in a testbed namespace"))
            done.append(f"ended process {pid} left in a testbed namespace")
    return done


def _unlink(path: Path) -> list[str]:
    path.unlink(missing_ok=True)
    return []


def clean(force: bool = False) -> list[str]:
    """Remove what crashed runs left behind (:func:`plan_clean`).  Returns human-readable lines
    describing what was done."""
    return plan_clean(force).execute() or ["nothing to clean"]


def plan_clean(force: bool = False) -> Plan:
    """What ``testbed clean`` removes and ends: the probe namespaces of gone processes
    (:func:`plan_probe_namespaces`), then per state file in ``STATE_DIR`` an unreadable one, or
    everything a run whose owner is gone recorded (:func:`plan_removal`).  Live runs (owner still
    running) are left alone unless ``force``, the probe namespaces of live processes always."""
    plan = plan_probe_namespaces(force)
    if not STATE_DIR.exists():
        return plan
    try:
        for path in sorted(STATE_DIR.glob(f"{PREFIX}-*.json")):
            try:
                state = RunState.load(path)
            except (OSError, ValueError, TypeError) as exc:
                said = f"{path}: unreadable state file ({exc})"
                plan.actions.append(Action([f"{said}; would be removed"],
                                           lambda path=path, said=said: _unlink(path) + [f"{said}; removed"]))
                continue
            owner_alive = proc_start_time(state.owner_pid) == state.owner_start_time
            if owner_alive and state.owner_pid != os.getpid() and not force:
                plan.actions.append(Action([f"{state.run_id}: still running (pid {state.owner_pid}); left alone"]))
                continue
            why = f"its owner (pid {state.owner_pid}) is " + ("running: --force" if owner_alive else "gone")
            plan.actions.append(Action([f"{state.run_id}: would be cleaned ({why})"],
                                       lambda run_id=state.run_id: [f"{run_id}: cleaning"]))
            plan.extend(plan_removal(state), prefix="  ")
    except BaseException:
        plan.release()
        raise
    return plan


# --- signals outside a Run, and the backend probe's namespaces -------------------------------

@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """In the block SIGTERM and SIGHUP raise ``RunInterrupted``, as in a ``Run`` (Ctrl-C raises
    KeyboardInterrupt anyway), so its ``finally`` clauses run; the handlers are put back after.
    Outside the main thread nothing changes (the caller handles signals)."""
    old = _raise_on_term()
    try:
        yield
    finally:
        _restore(old)


def _raise_on_term() -> dict:
    """SIGTERM and SIGHUP raise ``RunInterrupted`` from now on; the handlers they had (none
    replaced outside the main thread, where the caller handles signals)."""
    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):
            old[sig] = signal.signal(sig, Run._on_signal)
    return old


def _restore(handlers: dict) -> None:
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def signal_of(exc: BaseException) -> signal.Signals | None:
    """The signal an exception stands for: SIGINT for KeyboardInterrupt, the one a
    ``RunInterrupted`` carries (SIGTERM, SIGHUP; SIGINT when it came during teardown); None
    when ``exc`` is no signal's."""
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT
    if isinstance(exc, RunInterrupted) and isinstance(exc.code, int):
        with contextlib.suppress(ValueError):
            return signal.Signals(exc.code - 128)
    return None


def interruption(exc: BaseException) -> str | None:
    """How a run's manifest names the signal that ended it (:func:`signal_of`): ``interrupted
    (SIGINT)``, ``interrupted (SIGTERM)``, ``interrupted (SIGHUP)``; None for no signal's."""
    sig = signal_of(exc)
    return None if sig is None else f"interrupted ({sig.name})"


NETNS_DIR = Path("/var/run/netns")      # where `ip netns add NAME` makes NAME
PROBE_NETNS = "tbprobe"


def probe_netns_name() -> str:
    """A name for a throwaway namespace of this process (``ip netns add``, the kernel backend's
    probe): ``tbprobe-<pid>-<start time>-<random>``, so that ``clean`` removes one whose process
    is gone (a SIGKILL) and never one of a live process, even after the PID is reused."""
    return f"{PROBE_NETNS}-{os.getpid()}-{proc_start_time(os.getpid())}-{secrets.token_hex(3)}"


def delete_netns(name: str) -> str | None:
    """``ip netns del NAME`` when it exists, further signals deferred until done (a second Ctrl-C
    cannot leave it); the error ``ip`` printed, else None."""
    if not (NETNS_DIR / name).exists():
        return None
    with _signals_deferred():
        out = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True, timeout=10)
    return (out.stderr.strip() or f"exit {out.returncode}") if out.returncode else None


def _probe_owner(name: str) -> tuple[int, int] | None:
    """(PID, start time) that a probe namespace's name gives (``probe_netns_name``); None for
    an older testbed's ``tbprobe-XXXXXX``."""
    owner = name.split("-")[1:3]
    return (int(owner[0]), int(owner[1])) if len(owner) == 2 and all(map(str.isdigit, owner)) else None


def clean_probe_namespaces(force: bool = False) -> list[str]:
    """Delete the probe namespaces whose process is gone (:func:`plan_probe_namespaces`); a line
    per namespace found."""
    return plan_probe_namespaces(force).execute()


def plan_probe_namespaces(force: bool = False) -> Plan:
    """Delete the probe namespaces (``probe_netns_name``) whose process is gone; never one of a
    live process, not even with ``force`` (its probe would fail and pick the wrong backend); one
    of an older testbed (``tbprobe-XXXXXX``, no process named) only with ``force``.  An action
    per namespace found."""
    plan = Plan()
    for path in sorted(NETNS_DIR.glob(f"{PROBE_NETNS}-*")):
        owner = _probe_owner(path.name)
        if owner is None and not force:
            plan.actions.append(Action([f"{path.name}: probe namespace naming no process (an older "
                                        "testbed's); left alone (--force removes it)"]))
            continue
        if owner is not None and proc_start_time(owner[0]) == owner[1]:
            plan.actions.append(Action([f"{path.name}: probe namespace of a running process (pid "
                                        f"{owner[0]}); left alone"]))
            continue

        def do(name: str = path.name) -> list[str]:
            error = delete_netns(name)
            return [f"{name}: probe namespace " + (f"not removed: {error}" if error else "removed")]
        plan.actions.append(Action([f"{path.name}: probe namespace would be removed (ip netns del)"], do))
    return plan
