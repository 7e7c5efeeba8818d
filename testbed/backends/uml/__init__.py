"""Run one command inside a User-Mode Linux guest, to get real sch_netem/sch_htb on a host without them.

A UML kernel runs as an ordinary process; which one (Debian's ``user-mode-linux`` as installed, or
one provisioned from Debian's packages: ``testbed/backends/uml/builds.py``) and in which mode (seccomp or
ptrace) is decided by ``choose``: the first candidate that really booted a guest here
(``boot_check``: ``true`` run in a guest, with the modules loaded; cached in
``STATE_DIR/boot-cache.json`` per host kernel release, CPU model, build (kernel path, size, mtime)
and mode; ``refresh=True`` boots again).  The guest boots with the host's root filesystem over
hostfs, **read-only**; the guest's init (``testbed/backends/uml/guest_init.py``) gives it its own proc/sys/dev and
tmpfs on /tmp, /run, /var/tmp, /dev/shm (so ``ip netns`` and Mininet write nothing to the host),
loads sch_htb, sch_netem, veth, tcp_bbr and ipv6 (those not built in) from the build's modules
directory, mounts ``results_dir`` read-write at the same path, runs the command (an argv list,
handed over as JSON, never through a shell) with the same Python interpreter and repository as the
caller, and powers off.

Files written: ``results_dir`` (the command's own output plus ``uml-stdout.txt``,
``uml-stderr.txt``, ``uml-status.json``, ``uml-console.log``, and ``uml-host-cpu.jsonl``: how the
host scheduled the guest's threads, sampled every 0.1 s, ``HostCPU``) and one private directory
``tb*`` (in /dev/shm, where UML also keeps the guest's memory file), removed on return.
Processes: ``linux.uml`` starts in a new session; it and its helper processes share that
process group, which is ended (SIGTERM, then SIGKILL) on timeout, on any exception and checked
to be empty before returning.  A Ctrl-C or SIGTERM/SIGHUP (``RunInterrupted``) while the guest
runs is passed on to the command in the guest (through ``uml-cancel`` in ``results_dir``, which
the guest's init watches), which gets ``INTERRUPT_GRACE`` s to tear down and write its record
before the guest is ended.  A guest that fails raises ``GuestError`` (a ``SetupError``) with
one line: what failed, the console's reason line and where the full console log is.
With ``output=``, the command's output reaches the caller while the guest runs
(``testbed/backends/uml/stream.py``: the host reads the two files every 0.2 s); ``testbed …
--backend netem-uml`` prints it so.

The guest has one virtual CPU and HZ=100; see docs/uml.md for what the
guest itself adds to RTT and where its throughput ceiling is.  If the calling process is killed
with SIGKILL, the guest runs on until its command ends, then powers itself off.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from testbed.spec.errors import RunError
from testbed.backends.guest import GuestError, guest_cli_argv, host_key
from testbed.backends.uml import builds as uml_builds  # its STATE_DIR is read at each call: tests point it elsewhere
from testbed.backends.uml import stream as uml_stream
from testbed.backends.uml.builds import (INSTALL_HINT, MODES, MODULES, ModeUnsupported, UMLBuild,
                                         UMLUnavailable, candidates, check, modes, require_mode)

if TYPE_CHECKING:
    from testbed.host.lifecycle import Run

REPO = Path(__file__).resolve().parents[3]
INIT_SCRIPT = Path(__file__).resolve().with_name("guest_init.py")
# Guest paths that the init covers with its own filesystems; host paths under them must be
# mounted explicitly to be visible in the guest.
HIDDEN_IN_GUEST = ("/tmp", "/run", "/var/run", "/var/tmp", "/dev")
RESULT_FILES = ("uml-stdout.txt", "uml-stderr.txt", "uml-status.json", "uml-console.log",
                "uml-host-cpu.jsonl")
CANCEL_FILE = "uml-cancel"   # the host writes a signal number here for the command in the guest
INTERRUPT_GRACE = 30.0       # s for an interrupted command in the guest to tear down
HOST_CPU_FILE = "uml-host-cpu.jsonl"   # the guest's processes as the host scheduled them
HOST_CPU_INTERVAL = 0.1                # seconds between its samples
TERM_GRACE = 5.0  # seconds between SIGTERM and SIGKILL of the guest's process group
BACKEND = "netem-uml"  # the CLI's --backend value that re-runs a command in a guest with netem
BOOT_TIMEOUT = 120.0  # seconds for a boot check's guest


class GuestTimeout(RunError):
    """The guest did not finish within the timeout; it was killed and cleaned up."""

    def __init__(self, message: str, result: "GuestResult", *, reason: str, console: Path):
        super().__init__(message, result=result)
        self.reason, self.console = reason, console


# Console lines that every UML guest prints and that explain nothing when it fails.
BENIGN = re.compile(r"ubd device|find_iomem|SELinux|checkreqprot|reboot: System halted|^\s*$")


def console_reason(text: str) -> str:
    """The line of a guest's console that says why it failed: the last informative line before
    the first kernel panic (e.g. "userspace - ptrace set fp regs failed, errno = 14"), else the
    panic line, else the last informative line."""
    lines = [line.strip() for line in text.splitlines()]
    informative = [i for i, line in enumerate(lines) if not BENIGN.search(line)]
    panic = next((i for i in informative if lines[i].startswith("Kernel panic")), None)
    if panic is not None:
        before = [i for i in informative if i < panic and "Kernel panic" not in lines[i]]
        return lines[before[-1]] if before else lines[panic]
    return lines[informative[-1]] if informative else "the console is empty"


@dataclass(frozen=True)
class GuestResult:
    """Outcome of one command in the guest.

    returncode: the command's exit status (negative: killed by that signal), None on timeout.
    stdout, stderr: the command's output, decoded as UTF-8 (invalid bytes replaced).
    uml: the build and mode that ran it (``Guest.describe()``: source, kernel, package, release,
        mode).
    duration: host wall time in seconds from starting linux.uml until it exited (boot, module
        loading, the command, shutdown).
    command_time: guest wall time in seconds of the command alone (None if it did not finish).
    """
    returncode: int | None
    stdout: str
    stderr: str
    duration: float
    command_time: float | None = None
    uml: dict | None = None


@dataclass(frozen=True)
class Guest:
    """The build and mode the testbed boots, with the boot check that proved it."""
    build: UMLBuild
    mode: str
    release: str
    boot_seconds: float

    def describe(self) -> dict:
        return {**self.build.describe(), "release": self.release, "mode": self.mode,
                "boot_seconds": self.boot_seconds}


def availability(refresh: bool = False) -> tuple[bool, str]:
    """(ok, reason) for ``testbed doctor`` and the tests: does a guest boot here (boot checks
    are cached, see ``boot_check``)?"""
    if os.geteuid() != 0:
        return False, "needs root (the guest's network namespaces and qdiscs are set up as root)"
    try:
        guest = choose(refresh)
    except (UMLUnavailable, OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    return True, (f"{guest.build.source} User-Mode Linux {guest.release} ({guest.mode}) boots in "
                  f"{guest.boot_seconds:.1f} s, with {', '.join(MODULES)}")


def _guest_env(extra: dict[str, str] | None) -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",   # the root is read-only anyway
        "PYTHONPATH": str(REPO),
        "TESTBED_IN_UML": "1",  # TESTBED_UML_GUEST: the build and mode, as GuestResult.uml
    }
    env.update(extra or {})
    return env


def _host_paths(results_dir: Path, cwd: Path) -> list[tuple[str, bool]]:
    """(path, writable) to mount over hostfs in the guest, parents first."""
    paths = {str(results_dir): True}
    for p in (REPO, Path(sys.prefix).resolve(), Path(sys.executable).resolve().parent, cwd):
        s = str(p)
        if s not in paths and any(s == h or s.startswith(h + "/") for h in HIDDEN_IN_GUEST):
            paths[s] = False
    return sorted(paths.items(), key=lambda kv: kv[0].count("/"))


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid:  # fields after comm: state ppid pgrp ...
            members.append(int(entry.name))
    return members


def _end_group(proc: subprocess.Popen) -> None:
    """End linux.uml (session leader ``proc.pid``) and every process of its group."""
    pgid = proc.pid
    if proc.poll() is None:
        try:
            os.killpg(pgid, signal.SIGTERM)  # UML's own handler stops the guest and its helpers
        except ProcessLookupError:
            pass
        try:
            proc.wait(TERM_GRACE)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + TERM_GRACE
    while _group_members(pgid) or proc.poll() is None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"UML process group {pgid} still has processes "
                               f"{_group_members(pgid)} after SIGKILL")
        time.sleep(0.05)


def _schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Per thread of ``pid``: (ns on a CPU, ns runnable but waiting for one) from
    /proc/PID/task/TID/schedstat; {} when the process is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run_ns, wait_ns = f.read().split()[:2]
        except (OSError, ValueError):
            continue
        out[int(tid)] = (int(run_ns), int(wait_ns))
    return out


class HostCPU:
    """Samples, every ``interval`` s until stopped, how the host scheduled the guest: the summed
    CPU time and run-queue wait (time runnable but waiting for a host CPU — what the guest
    loses to a busy host, its steal) of every thread of the guest's process group (linux.uml
    and its helpers: in ptrace mode one host process per guest process), as JSON lines
    ``{"t": CLOCK_REALTIME s, "cpu_s", "wait_s", "threads", "load1"}`` appended to ``path``.
    A UML guest's clock follows the host's, so a command in the guest reads the lines of its
    own time window (``window``).  Threads that ended keep their last sample."""

    def __init__(self, pgid: int, path: Path, interval: float = HOST_CPU_INTERVAL):
        import threading
        self.pgid, self.path, self.interval = pgid, path, interval
        self.last: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="uml-host-cpu", daemon=True)

    def start(self) -> "HostCPU":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> dict:
        for pid in _group_members(self.pgid):
            self.last.update(_schedstat(pid))
        try:
            load1 = float(Path("/proc/loadavg").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            load1 = None
        return {"t": time.time(), "cpu_s": sum(r for r, _ in self.last.values()) / 1e9,
                "wait_s": sum(w for _, w in self.last.values()) / 1e9,
                "threads": len(self.last), "load1": load1}

    def _run(self) -> None:
        with open(self.path, "a") as f:
            while not self._stop.is_set():
                f.write(json.dumps(self.sample()) + "\n")
                f.flush()
                self._stop.wait(self.interval)


def host_cpu_window(path: Path | str, start: float, end: float) -> dict | None:
    """How the host scheduled the guest between CLOCK_REALTIME ``start`` and ``end`` (s), from
    ``HostCPU``'s samples: ``cpu_share`` and ``wait_share`` (CPU seconds and run-queue seconds
    of the guest's threads per second of the samples' span), the span, and the host's 1-minute
    load average; None when no two samples bracket the window (read in the guest: the path in
    ``TESTBED_UML_HOST_CPU``)."""
    try:
        samples = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    before = [x for x in samples if x["t"] <= start]
    after = [x for x in samples if x["t"] >= end]
    if not before or not after:
        return None
    a, b = before[-1], after[0]
    span = b["t"] - a["t"]
    if span <= 0:
        return None
    return {"cpu_share": round((b["cpu_s"] - a["cpu_s"]) / span, 3),
            "wait_share": round((b["wait_s"] - a["wait_s"]) / span, 3),
            "span_s": round(span, 3), "load1": b["load1"]}


def _wait_ticking(proc: subprocess.Popen, seconds: float, tick: Callable[[], None] | None) -> None:
    """``proc.wait(seconds)``, calling ``tick()`` every ``stream.INTERVAL`` s meanwhile."""
    if tick is None:
        proc.wait(seconds)
        return
    deadline = time.monotonic() + seconds
    while True:
        try:
            proc.wait(min(uml_stream.INTERVAL, max(0.0, deadline - time.monotonic())))
            return
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, seconds) from None
        tick()


def _wait(proc: subprocess.Popen, timeout: float, cancel: Path,
          tick: Callable[[], None] | None = None) -> bool:
    """Wait up to ``timeout`` s for linux.uml: whether it exited.  On Ctrl-C, SIGTERM or SIGHUP
    the command in the guest gets that signal (``cancel`` holds its number) and
    ``INTERRUPT_GRACE`` s to end and write its record; then the interrupt is raised again, for
    every caller (the guest has ended or is ended on the way out).  ``tick``: called every
    ``stream.INTERVAL`` s while waiting (the command's output so far)."""
    from testbed.host.lifecycle import RunInterrupted, signal_of
    try:
        _wait_ticking(proc, timeout, tick)
        return True
    except subprocess.TimeoutExpired:
        return False
    except (KeyboardInterrupt, RunInterrupted) as exc:
        tmp = cancel.with_name(cancel.name + ".tmp")
        tmp.write_text(str(int(signal_of(exc) or signal.SIGTERM)))
        os.replace(tmp, cancel)
        with contextlib.suppress(subprocess.TimeoutExpired):
            _wait_ticking(proc, INTERRUPT_GRACE, tick)
        raise


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def run_in_guest(argv: list[str], *, results_dir: Path, mem: str = "768M", timeout: float = 300.0,
                 build: UMLBuild | None = None, mode: str | None = None, cwd: Path | None = None,
                 env: dict[str, str] | None = None, run: Run | None = None,
                 output: uml_stream.Sink | None = None) -> GuestResult:
    """Boot a UML guest, run ``argv`` in it as root with the kernel modules loaded, power off.

    results_dir: existing host directory, read-write in the guest at the same path; receives
        uml-stdout.txt, uml-stderr.txt, uml-status.json, uml-console.log (overwritten).
    mem: guest memory as UML's ``mem=`` (e.g. '768M').  timeout: seconds for the whole guest.
    build, mode: the UML build and 'seccomp' or 'ptrace'; default: ``choose()`` (a
        build that boots here, booting it once per host and build to find out), and ptrace
        with a ``build`` given.  'seccomp' on a build without it (no ``seccomp=`` option in its
        ``--help``) raises ModeUnsupported: it would boot in ptrace mode.
    cwd: the command's working directory (default: the caller's); env: extra environment
        variables on top of a fixed minimal one (PATH starts with this interpreter's bin dir).
    run: a ``testbed.host.lifecycle.Run`` to record the guest's process group and private directory
        in, so that ``testbed clean`` ends a guest whose caller was killed.
    output: ``output(name, data)`` gets the command's output while the guest runs ("stdout" or
        "stderr", the new whole lines of its file every ``stream.INTERVAL`` s), then the rest
        once the guest has ended (also on a timeout or an interrupt): each file's content
        exactly (``stream.console`` prints it).  An exception it raises stops the output, not
        the guest, and is raised once the guest is done.
    Interrupted (Ctrl-C, SIGTERM, SIGHUP), the command gets the signal and ``INTERRUPT_GRACE`` s
    to end and write its record; then the interrupt is raised again.
    Raises UMLUnavailable (ModeUnsupported), GuestError (boot or setup failed), GuestTimeout
    (guest killed).
    """
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"argv must be a non-empty list of strings, got {argv!r}")
    if not re.fullmatch(r"[1-9][0-9]*[KMG]", mem):
        raise ValueError(f"mem {mem!r}: give a size like '768M' or '1G'")
    if not timeout > 0:
        raise ValueError(f"timeout {timeout!r} must be > 0 s")
    results_dir = Path(results_dir).resolve()
    if not results_dir.is_dir():
        raise ValueError(f"results_dir {results_dir} is not an existing directory")
    if mode not in (None, *MODES):
        raise ValueError(f"mode {mode!r}: allowed {', '.join(MODES)}")
    cancel = results_dir / CANCEL_FILE
    for name in (*RESULT_FILES, CANCEL_FILE):       # before anything can fail: no stale output
        (results_dir / name).unlink(missing_ok=True)
    cwd = Path(cwd or os.getcwd()).resolve()
    asked = mode
    if build is None:
        guest = choose()
        build, mode = guest.build, mode or guest.mode
    release, modules = check(build)
    mode = mode or "ptrace"
    if asked is not None:       # what the guest records (GuestResult.uml, a run's uml_guest)
        require_mode(build, mode, f"mode={mode!r}", "pass mode='ptrace' or leave it out")
    uml = {**build.describe(), "release": release, "mode": mode}

    shm = Path("/dev/shm")
    private = Path(tempfile.mkdtemp(prefix="tb", dir=shm if os.access(shm, os.W_OK) else None))
    if run is not None:
        run.record_tmpdir(private)
    stream = uml_stream.GuestOutput(results_dir, output) if output is not None else None
    try:
        init = private / "init.py"
        shutil.copyfile(INIT_SCRIPT, init)
        init.chmod(0o755)
        job = private / "job.json"
        job.write_text(json.dumps({
            "argv": list(argv), "cwd": str(cwd),
            "env": {**_guest_env(env), "TESTBED_UML_GUEST": json.dumps(uml),
                    "TESTBED_UML_HOST_CPU": str(results_dir / HOST_CPU_FILE)},
            "results_dir": str(results_dir), "cancel": str(cancel),
            "host_paths": _host_paths(results_dir, cwd),
            "modules_root": str(build.modules_root), "modules": modules,
        }))
        cmdline = [str(build.kernel), f"mem={mem}", "root=/dev/root", "rootfstype=hostfs", "rootflags=/",
                   "ro", f"init={init}", "devtmpfs.mount=0", "con=null", "con0=null,fd:1",
                   "ssl=null", f"uml_dir={private}", f"umid={private.name}", "quiet",
                   f"tbjob={job}", *(["seccomp=on"] if mode == "seccomp" else [])]
        host_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": str(private)}
        start = time.monotonic()
        with open(results_dir / "uml-console.log", "wb") as console:
            proc = subprocess.Popen(cmdline, stdin=subprocess.DEVNULL, stdout=console,
                                    stderr=subprocess.STDOUT, cwd=private, env=host_env,
                                    start_new_session=True)
            if run is not None:
                run.record_pid(proc.pid, "UML guest", group=True)
            sampler = HostCPU(proc.pid, results_dir / HOST_CPU_FILE).start()
            try:
                timed_out = not _wait(proc, timeout, cancel,
                                      stream.pump if stream is not None else None)
            finally:
                sampler.stop()
                _end_group(proc)
        duration = time.monotonic() - start
    finally:
        shutil.rmtree(private, ignore_errors=True)
        cancel.unlink(missing_ok=True)
        if stream is not None:
            stream.finish()     # what the command wrote since the last pump: once, also when interrupted
    if stream is not None and stream.error is not None:
        raise stream.error

    stdout, stderr = (_read(results_dir / uml_stream.STREAMS[name]) for name in ("stdout", "stderr"))
    console = results_dir / "uml-console.log"
    what = f"{build.source} UML {release} ({mode}, {build.kernel})"
    if timed_out:
        reason = f"no exit within {timeout:g} s"
        raise GuestTimeout(f"{what} did not finish within {timeout:g} s and was killed; "
                           f"console log: {console}", GuestResult(None, stdout, stderr, duration,
                                                                   uml=uml),
                           reason=reason, console=console)
    try:
        status = json.loads((results_dir / "uml-status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        reason = console_reason(_read(console))
        raise GuestError(f"{what} died before running the command (exit {proc.returncode}): "
                         f"{reason}; console log: {console}", reason=reason, console=console) from None
    if status.get("error"):
        reason = status["error"].strip().splitlines()[-1]
        raise GuestError(f"{what}: guest setup failed: {reason}; traceback in {console}",
                         reason=reason, console=console)
    command_time = (status["done_ns"] - status["ready_ns"]) / 1e9
    return GuestResult(status["returncode"], stdout, stderr, duration, command_time, uml)


def _load_cache() -> dict:
    try:
        return json.loads((uml_builds.STATE_DIR / "boot-cache.json").read_text())
    except (OSError, ValueError):
        return {}


def _store(key: str, entry: dict) -> None:
    state = uml_builds.STATE_DIR
    try:
        state.mkdir(parents=True, exist_ok=True)
        cache = _load_cache()
        cache[key] = entry
        fd, tmp = tempfile.mkstemp(dir=state, prefix=".boot-cache")
        with os.fdopen(fd, "w") as f:
            json.dump(cache, f, indent=1)
        os.replace(tmp, state / "boot-cache.json")
    except OSError:
        pass  # not root: no cache, the next call boots again


def boot_check(build: UMLBuild, mode: str, refresh: bool = False) -> dict:
    """Boot ``build`` in ``mode`` running ``true`` (cached, see the module docstring).

    Returns {booted, boot_seconds (host wall time: start of linux.uml to its exit, modules
    loaded), release, reason (the console's reason line when it did not boot), console (path of
    the boot's full console log), checked (UNIX time), cached (this call did not boot)}.
    """
    release, _ = check(build)
    require_mode(build, mode, f"mode={mode!r}", "boot-check it in ptrace mode")  # before the cache:
    key = f"{host_key()} | {build.identity()} | {mode}"     # an entry made before this check is not used
    if not refresh and key in _load_cache():
        return {**_load_cache()[key], "cached": True}
    state = uml_builds.STATE_DIR
    logdir = state if _mkdir(state) and os.access(state, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="tb-uml-boot", dir=logdir) as tmp:
        entry = {"booted": False, "boot_seconds": None, "release": release, "reason": None,
                 "console": None, "checked": time.time()}
        try:
            res = run_in_guest(["true"], results_dir=Path(tmp), build=build, mode=mode,
                               timeout=BOOT_TIMEOUT)
            entry.update(booted=res.returncode == 0, boot_seconds=round(res.duration, 3))
            if res.returncode != 0:
                entry["reason"] = f"`true` exited {res.returncode} in the guest"
        except (GuestError, GuestTimeout) as exc:
            entry["reason"] = exc.reason
        if logdir is not None:
            console = logdir / f"boot-{build.source}-{mode}.log"
            os.replace(Path(tmp) / "uml-console.log", console)
            entry["console"] = str(console)
    _store(key, entry)
    return {**entry, "cached": False}


def _mkdir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        return True
    except OSError:
        return False


def survey(refresh: bool = False) -> tuple[Guest | None, list[dict]]:
    """(the guest to use or None, every attempt in order: build, mode, boot check or error)."""
    attempts = []
    for build in candidates():
        try:
            for mode in modes(build):
                res = boot_check(build, mode, refresh)
                attempts.append({**build.describe(), "mode": mode, **res})
                if res["booted"]:
                    return Guest(build, mode, res["release"], res["boot_seconds"]), attempts
        except ModeUnsupported as exc:      # not booted: it would not run in the mode asked for
            attempts.append({**build.describe(), "release": exc.release, "mode": exc.mode,
                             "booted": False, "unsupported": True, "reason": str(exc)})
        except (UMLUnavailable, OSError, subprocess.SubprocessError) as exc:
            attempts.append({**build.describe(), "booted": False, "reason": str(exc)})
    return None, attempts


def failure_summary(attempts: list[dict]) -> str:
    if not attempts:
        return f"no UML kernel found; {INSTALL_HINT}"
    return "; ".join(f"{a['source']} UML {a.get('release', '')} ({a.get('mode', 'not booted')}): "
                     f"{a['reason']}" + (f" (console: {a['console']})" if a.get("console") else "")
                     for a in attempts)


def choose(refresh: bool = False) -> Guest:
    """The guest to boot; raise UMLUnavailable with every build's reason when none boots."""
    guest, attempts = survey(refresh)
    if guest is None:
        if attempts and all(a.get("unsupported") for a in attempts):   # none has the mode asked for
            raise UMLUnavailable("; ".join(a["reason"] for a in attempts))
        raise UMLUnavailable(f"no UML guest boots on this host: {failure_summary(attempts)}")
    return guest


def doctor_report(refresh: bool = False) -> dict:
    """``testbed doctor``'s netem_uml entry: available, reason, uml (the build in use: source,
    kernel, package, release, mode, boot_seconds), booted, boot_seconds, attempts (every build
    and mode tried: booted, boot_seconds, reason = the console's reason line, console = its log,
    cached), and ``lines`` to print."""
    unavailable = {"available": False, "booted": None, "uml": None, "boot_seconds": None,
                   "attempts": [], "lines": []}
    if os.environ.get("TESTBED_UML_GUEST"):
        return {**unavailable, "reason": "this is a UML guest: "
                + os.environ["TESTBED_UML_GUEST"]}
    if os.environ.get("TESTBED_VM_GUEST"):     # its kernel has netem: no UML boot check there
        return {**unavailable, "reason": "this is the testbed's VM: "
                + os.environ["TESTBED_VM_GUEST"]}
    if os.geteuid() != 0:
        return {**unavailable, "reason": "needs root (the guest's namespaces and qdiscs are set "
                "up as root)"}
    try:
        guest, attempts = survey(refresh)
    except UMLUnavailable as exc:
        guest, attempts = None, [{"source": "", "booted": False, "reason": str(exc)}]
    lines = []
    for a in attempts:
        head = (" ".join(str(a[k]) for k in ("source", "release", "mode") if a.get(k)) or "UML") \
            + (f" ({a['kernel']})" if a.get("kernel") else "")
        if a["booted"]:
            lines.append(f"{head}: boots in {a['boot_seconds']:.2f} s"
                         + (" (cached boot check; --refresh boots again)" if a.get("cached") else ""))
        elif a.get("unsupported"):
            lines.append(f"{head}: not booted: {a['reason']}")
        else:
            lines.append(f"{head}: does not boot: {a['reason']}"
                         + (f" (console: {a['console']})" if a.get("console") else ""))
    return {"available": guest is not None, "booted": guest is not None,
            "uml": guest.describe() if guest else None,
            "boot_seconds": guest.boot_seconds if guest else None, "attempts": attempts,
            "reason": (f"{guest.build.source} UML {guest.release} ({guest.mode})" if guest
                       else f"no UML guest boots here: {failure_summary(attempts)}"),
            "lines": lines}


def run_cli_in_guest(argv: list[str], *, results_root: Path | str = "results", mem: str = "768M",
                     timeout: float = 3600.0) -> int:
    """Run ``testbed ARGV`` (with ``--backend netem-uml``) inside a guest with ``--backend netem``.

    The command runs from the caller's working directory with the same interpreter; its results
    root (created if missing) is the guest's writable directory, where the guest's console log
    and the command's output files (uml-*.txt) are kept too.  The command's stdout and stderr
    are printed as it writes them (whole lines, read every ``stream.INTERVAL`` s; the command's
    Python runs with ``-u``, so its prints are not held in its buffer), the rest when the guest
    is done, also when it was interrupted (Ctrl-C, SIGTERM: passed on to the command, which tears
    down and writes its record as on the host; ``run_in_guest``); its exit code is returned."""
    from testbed.host.lifecycle import Run
    root = Path(results_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    with Run(None) as run:
        res = run_in_guest([sys.executable, "-u", "-m", "testbed", *guest_cli_argv(argv, BACKEND)],
                           results_dir=root, mem=mem, timeout=timeout, run=run,
                           output=uml_stream.console)
    return res.returncode
