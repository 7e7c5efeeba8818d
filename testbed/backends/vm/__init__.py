"""The testbed's VM: a Debian guest booted by qemu, with the kernel backend and real netem inside.

The image (``testbed/backends/vm/image.py``) is Debian's packages from the host's suite with the
package list of ``scripts/install.sh``; the guest boots its kernel directly (``-kernel``,
``-initrd``) with the image as a virtio disk opened with ``snapshot=on`` (the guest's writes go to
a temporary overlay: the cached image never changes and several guests may share it).  Its PID 1
is ``testbed/backends/vm/agent.py``, read from a private control directory the host shares over
9p; the checkout, the virtualenv (when outside it), the working directory and the results root
are shared over 9p too, read-write, at the same paths, so the guest runs the host's interpreter
and tree.  Commands go through the control directory as JSON jobs (an argv list, never a shell
string); their output streams back while they run.  No network device: nothing listens anywhere.

Acceleration is detected, not assumed: with ``/dev/kvm`` usable, a KVM guest must be ready within
``KVM_BOOT_TIMEOUT`` s, else it is ended and the guest boots with TCG (``-accel
tcg,thread=multi``: one host thread per virtual CPU).  The outcome is cached per host kernel, CPU
model and qemu binary in ``CACHE_DIR/accel.json`` (``TESTBED_VM_ACCEL=kvm|tcg`` forces one), and
every ``Machine`` records the accelerator it runs on.

Files: the image cache ``CACHE_DIR`` (``/var/cache/testbed/vm``); one run directory per guest
under ``RUN_DIR`` (``/run/testbed/vm``: the control share, ``state.json`` with qemu's PID and
start time); the serial console in a log file (``CACHE_DIR/console-<name>.log`` for ``testbed vm
up``, the results root's ``vm-console.log`` for ``--backend netem-vm``).  ``testbed vm up`` leaves
one guest, ``main``, running until ``testbed vm down`` or ``testbed clean``; ``--backend
netem-vm`` uses it when it is up and its shares hold the command's paths, else boots a guest for
the command alone (recorded in a ``testbed.host.lifecycle.Run``, so that ``testbed clean`` ends it
if its caller was killed).

Division of labour: boots, runs commands in and powers off guests; knows nothing of what the
commands do.  Imports ``testbed.spec``, ``testbed.host`` and ``testbed.backends.guest``; imported
by the CLI.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from testbed.backends.guest import GuestError, guest_cli_argv, host_key
from testbed.backends.vm import image as vm_image
from testbed.host.git import host_git_env
from testbed.host import lifecycle
from testbed.host.lifecycle import ProcessRecord, end_process, proc_start_time
from testbed.spec.errors import RunError, SetupError

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
AGENT = Path(__file__).resolve().with_name("agent.py")
BACKEND = "netem-vm"       # the CLI's --backend value that re-runs a command in the VM
MAIN = "main"              # the guest ``testbed vm up`` starts
QEMU = "qemu-system-x86_64"
ACCELS = ("kvm", "tcg")
KVM_BOOT_TIMEOUT = 60.0    # s for a KVM guest to be ready before TCG is tried
TCG_BOOT_TIMEOUT = 300.0   # s for a TCG guest (one host thread per vCPU, on a busy host)
POWEROFF_TIMEOUT = 30.0
MODULES = ("sch_htb", "sch_netem", "sch_tbf", "ifb", "veth", "tcp_bbr")
DEFAULT_MEM = "2G"
#: Under TCG the clocksource watchdog finds the emulated TSC unsteady against the emulated HPET and
#: switches to the HPET, whose every read is an emulated device access (5 µs: ~190,000 clock
#: reads/s from Python); qemu derives both from the host's clock, so the TSC is kept.
KERNEL_CLOCK = "clocksource=tsc tsc=reliable"
CONSOLE = "vm-console.log"


MAX_CPUS = 64
#: the guest's memory (qemu's -m) from this (the Debian guest and the testbed's Python need it)
#: up to this host's memory
MIN_MEM_MIB = 256


def host_mem_mib() -> int:
    """This host's physical memory in MiB."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20


def cpus_refusal(cpus) -> str | None:
    """Why ``cpus`` (virtual CPUs) is refused, or None: a whole number from 1 to ``MAX_CPUS``."""
    if isinstance(cpus, int) and not isinstance(cpus, bool) and 1 <= cpus <= MAX_CPUS:
        return None
    return f"{cpus!r}: give a whole number of virtual CPUs from 1 to {MAX_CPUS}"


def mem_refusal(mem) -> str | None:
    """Why ``mem`` (qemu's -m, e.g. '2G', '1536M') is refused, or None: a whole number of
    M or G from ``MIN_MEM_MIB`` to this host's memory."""
    most = host_mem_mib()
    allowed = f"give a whole number of M or G from {MIN_MEM_MIB}M to {most}M (this host's memory), e.g. 2G"
    match = re.fullmatch(r"([1-9][0-9]{0,8})([MG])", mem, re.IGNORECASE) if isinstance(mem, str) else None
    if match is None:
        return f"{mem!r}: {allowed}"
    mib = int(match.group(1)) << (10 if match.group(2) in "Gg" else 0)
    if not MIN_MEM_MIB <= mib <= most:
        return f"{mem!r} is {mib} MiB: {allowed}"
    return None


def cache_dir() -> Path:
    return vm_image.CACHE_DIR


def run_dir() -> Path:
    return lifecycle.STATE_DIR / "vm"


def default_cpus(accel: str) -> int:
    """Virtual CPUs: with KVM 2 where the host has two or more; with TCG 1 — two vCPUs there
    reordered netem's output (the qdisc's timer fires on either vCPU and each hands frames to its
    own backlog) and carried no more (docs/vm.md)."""
    return min(2, os.cpu_count() or 1) if accel == "kvm" else 1


def qemu_available() -> tuple[bool, str]:
    """(ok, reason): can this host boot the VM at all (root, qemu, an image tool)?"""
    if os.geteuid() != 0:
        return False, "needs root (qemu's 9p shares run as root; the image is built as root)"
    if shutil.which(QEMU) is None:
        return False, f"{QEMU} is not installed (scripts/install.sh installs qemu-system-x86)"
    return True, shutil.which(QEMU)


# --- acceleration ----------------------------------------------------------------------------
def _accel_key() -> str:
    q = Path(shutil.which(QEMU) or QEMU)
    try:
        st = q.stat()
        ident = f"{q} {st.st_size} {int(st.st_mtime)}"
    except OSError:
        ident = str(q)
    return f"{host_key()} | {ident}"


def _accel_cache() -> dict:
    try:
        return json.loads((cache_dir() / "accel.json").read_text())
    except (OSError, ValueError):
        return {}


def _store_accel(entry: dict) -> None:
    cache = _accel_cache()
    cache[_accel_key()] = entry
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        tmp = cache_dir() / ".accel.json.tmp"
        tmp.write_text(json.dumps(cache, indent=1))
        os.replace(tmp, cache_dir() / "accel.json")
    except OSError:
        pass


def kvm_usable() -> tuple[bool, str]:
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is not readable and writable"
    return True, "/dev/kvm"


def accel_candidates() -> list[str]:
    """Accelerators to try, in order: ``TESTBED_VM_ACCEL`` if set, else KVM (unless /dev/kvm is
    missing or a KVM guest was seen not to boot on this host and qemu) then TCG."""
    forced = os.environ.get("TESTBED_VM_ACCEL", "auto")
    if forced in ACCELS:
        return [forced]
    if forced != "auto":
        raise ValueError(f"TESTBED_VM_ACCEL={forced!r}: allowed auto, kvm, tcg")
    ok, _ = kvm_usable()
    seen = _accel_cache().get(_accel_key(), {}).get("kvm")
    if ok and (seen is None or seen.get("booted")):
        return ["kvm", "tcg"]
    return ["tcg"]


def kvm_not_used(failures: list[dict]) -> str | None:
    """Why a guest that booted with TCG did not use KVM: its KVM boot failing now
    (``failures``), ``TESTBED_VM_ACCEL``, no usable /dev/kvm, or a KVM boot that failed before
    on this host and qemu (cached in ``accel.json``)."""
    for f in failures:
        if f["accel"] == "kvm":
            return f"a KVM guest did not boot: {f['reason']}"
    if os.environ.get("TESTBED_VM_ACCEL") == "tcg":
        return "TESTBED_VM_ACCEL=tcg"
    ok, why = kvm_usable()
    if not ok:
        return why
    seen = _accel_cache().get(_accel_key(), {}).get("kvm") or {}
    when = (time.strftime("%Y-%m-%d %H:%M", time.localtime(seen["checked"])) if seen.get("checked")
            else "when last tried")
    return (f"a KVM guest did not boot on this host and qemu ({when}: {seen.get('reason')}; cached "
            f"in {cache_dir() / 'accel.json'}, TESTBED_VM_ACCEL=kvm tries again)")


def accel_report() -> dict:
    """What is known about acceleration here: kvm usable, the cached KVM boot check."""
    ok, why = kvm_usable()
    return {"kvm_device": ok, "kvm_device_reason": why,
            "kvm_boot": _accel_cache().get(_accel_key(), {}).get("kvm"),
            "candidates": accel_candidates()}


# --- one guest -------------------------------------------------------------------------------
def _shares(paths: list[Path]) -> list[Path]:
    """Distinct directories to share, none inside another, parents first."""
    out: list[Path] = []
    for p in sorted({Path(p).resolve() for p in paths}, key=lambda p: len(p.parts)):
        if str(p) == "/":
            raise ValueError("the VM cannot share / (give a directory)")
        if "," in str(p):
            raise ValueError(f"{p}: qemu's 9p shares cannot take a path with a comma")
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def default_shares(*extra: Path) -> list[Path]:
    """The checkout, the interpreter's prefix (the virtualenv), and ``extra``."""
    return _shares([REPO, Path(sys.prefix), *extra])


def guest_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONPATH": str(REPO),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "TESTBED_IN_VM": "1"}
    env.update(extra or {})
    return env


@dataclass
class Machine:
    """A running guest: its run directory (the control share) and what ``state.json`` holds:
    pid, start_time (qemu's), accel, cpus, mem, console, shares, image, kernel, ready (the
    agent's ready.json), boot_seconds (host wall time from starting qemu to the agent ready),
    tried (the accelerators that failed in this boot), kvm_not_used (why not KVM, or None),
    owner_pid and owner_start_time (the process that booted it for one command; None for
    ``testbed vm up``)."""
    dir: Path
    state: dict

    @property
    def name(self) -> str:
        return self.dir.name

    def record(self) -> ProcessRecord:
        return ProcessRecord(self.state["pid"], self.state["start_time"], "qemu VM", group=True)

    def alive(self) -> bool:
        return self.record().alive()

    def describe(self) -> dict:
        """What a run made in the guest records (``TESTBED_VM_GUEST``)."""
        return {k: self.state.get(k) for k in ("accel", "cpus", "mem", "kernel", "boot_seconds",
                                               "image")}

    def save(self) -> None:
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(self.state, indent=1))
        os.replace(tmp, self.dir / "state.json")

    @classmethod
    def load(cls, name: str = MAIN) -> "Machine | None":
        d = run_dir() / name
        try:
            return cls(d, json.loads((d / "state.json").read_text()))
        except (OSError, ValueError):
            return None

    def holds(self, path: Path) -> bool:
        """Is ``path`` inside one of the guest's shares?"""
        p = Path(path).resolve()
        return any(p == Path(s) or Path(s) in p.parents for s in self.state["shares"])

    # commands ---------------------------------------------------------------------------
    def exec(self, argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
             stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
             timeout: float | None = None) -> int:
        """Run ``argv`` in the guest as root; its output is copied to ``stdout``/``stderr``
        (default: this process's) as it comes; returns its exit status (negative: killed by
        that signal).  Ctrl-C or a timeout ends the command's process group in the guest.
        The command runs in ``cwd`` (default: ours) when the guest shares it, else in the checkout,
        said in one line on ``stderr``; the host's git revision goes with it (``HOST_GIT_ENV``:
        the image has no git)."""
        if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"argv must be a non-empty list of strings, got {argv!r}")
        if timeout is not None and not 0 < timeout < math.inf:
            raise ValueError(f"timeout {timeout!r}: give seconds > 0 (finite), or None for no limit")
        out = stdout or sys.stdout.buffer
        err = stderr or sys.stderr.buffer
        cwd = Path(cwd or os.getcwd()).resolve()
        if not self.holds(cwd):
            err.write(f"testbed vm: {cwd} is not shared with the VM (shared: "
                      f"{', '.join(self.state['shares'])}); the command runs in {REPO}\n".encode())
            err.flush()
            cwd = REPO
        jobs = self.dir / "jobs"
        jobs.mkdir(exist_ok=True)
        jid = secrets.token_hex(4)
        base = jobs / jid
        tmp = jobs / f"{jid}.tmp"
        tmp.write_text(json.dumps({"argv": list(argv), "cwd": str(cwd), "env": guest_env({
            "TESTBED_VM_GUEST": json.dumps(self.describe()), **host_git_env(REPO), **(env or {})})}))
        os.replace(tmp, base.with_suffix(".json"))
        pos = {".out": 0, ".err": 0}
        deadline = None if timeout is None else time.monotonic() + timeout
        cancelled = None

        def drain() -> None:
            for suffix, sink in ((".out", out), (".err", err)):
                try:
                    with open(str(base) + suffix, "rb") as f:
                        f.seek(pos[suffix])
                        data = f.read()
                except FileNotFoundError:
                    continue
                if data:
                    pos[suffix] += len(data)
                    sink.write(data)
                    sink.flush()
        try:
            while True:
                drain()
                rc_path = Path(str(base) + ".rc.json")
                if rc_path.exists():
                    drain()
                    rc = json.loads(rc_path.read_text())["returncode"]
                    break
                if not self.alive():
                    raise self._died("ended while running a command")
                if deadline is not None and time.monotonic() > deadline and cancelled is None:
                    cancelled = "timeout"
                    Path(str(base) + ".cancel").touch()
                time.sleep(0.05)
        except BaseException:   # Ctrl-C, SIGTERM (a Run's RunInterrupted), the guest gone
            try:
                Path(str(base) + ".cancel").touch()
            except FileNotFoundError:   # the guest's run directory is gone with it
                pass
            end = time.monotonic() + 10
            while time.monotonic() < end and not Path(str(base) + ".rc.json").exists() and self.alive():
                time.sleep(0.05)
            raise
        finally:
            for suffix in (".json", ".out", ".err", ".rc.json", ".cancel"):
                Path(str(base) + suffix).unlink(missing_ok=True)
        if cancelled:
            raise RunError(f"{argv[0]} did not finish within {timeout:g} s in the VM and was ended")
        return rc

    def _died(self, what: str) -> GuestError:
        console = Path(self.state["console"])
        reason = console_reason(console)
        return GuestError(f"the VM ({self.state['accel']}) {what}: {reason}; console log: {console}",
                          reason=reason, console=console)

    def shutdown(self) -> None:
        """Power the guest off (the agent syncs first), end qemu if it does not exit, remove
        the run directory."""
        try:
            if self.alive():
                (self.dir / "poweroff").touch()
                end = time.monotonic() + POWEROFF_TIMEOUT
                while self.alive() and time.monotonic() < end:
                    _reap(self.state["pid"])
                    time.sleep(0.05)
                end_process(self.record())
            _reap(self.state["pid"])        # our child: no zombie left
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def console_reason(console: Path) -> str:
    """The console's line that says why the guest stopped: the first kernel panic or agent
    traceback's last line, else the last non-empty line."""
    try:
        lines = [x.strip() for x in console.read_bytes().decode("utf-8", "replace").splitlines()
                 if x.strip()]
    except OSError:
        return "no console log"
    for i, line in enumerate(lines):
        if "Kernel panic" in line:
            return line
        if line.startswith("Traceback"):
            tail = [x for x in lines[i + 1:] if not x.startswith(("File ", "^"))]
            return tail[-1] if tail else line
    return lines[-1] if lines else "the console is empty"


def qemu_argv(img: vm_image.Image, ctl: Path, shares: list[Path], accel: str, cpus: int, mem: str,
              console: Path) -> list[str]:
    argv = [QEMU, "-name", "testbed-vm", "-machine", "q35", "-nodefaults", "-display", "none",
            "-no-reboot", "-m", mem, "-smp", str(cpus),
            "-accel", "kvm" if accel == "kvm" else "tcg,thread=multi",
            "-cpu", "host" if accel == "kvm" else "max",
            "-serial", f"file:{console}", "-monitor", "none",
            "-kernel", str(img.kernel), "-initrd", str(img.initrd),
            "-append", f"root=/dev/vda rw console=ttyS0 init={vm_image.INIT_PATH} panic=-1 quiet "
            + KERNEL_CLOCK,
            "-drive", f"file={img.root},format=raw,if=virtio,snapshot=on",
            "-virtfs", f"local,path={ctl},mount_tag=tbctl,security_model=passthrough,id=tbctl"]
    for i, path in enumerate(shares):
        argv += ["-virtfs", f"local,path={path},mount_tag=s{i},security_model=passthrough,"
                            f"multidevs=remap,id=s{i}"]
    return argv


def _boot_once(img: vm_image.Image, d: Path, shares: list[Path], accel: str, cpus: int, mem: str,
               console: Path, timeout: float, run: lifecycle.Run | None) -> tuple[subprocess.Popen | None, str, dict]:
    """Start qemu and wait for the agent: (proc, '', ready) or (None, reason, {})."""
    (d / "ready.json").unlink(missing_ok=True)
    argv = qemu_argv(img, d, shares, accel, cpus, mem, console)
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(d / "qemu-stderr.txt", "wb"), start_new_session=True,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": "/var/tmp"})
    if run is not None:
        run.record_pid(proc.pid, f"qemu VM ({accel})", group=True)
    try:
        while time.monotonic() - start < timeout:
            if (d / "ready.json").exists():
                ready = json.loads((d / "ready.json").read_text())
                ready["boot_seconds"] = round(time.monotonic() - start, 2)
                return proc, "", ready
            if proc.poll() is not None:
                qerr = (d / "qemu-stderr.txt").read_text(errors="replace").strip().splitlines()
                why = qerr[-1] if qerr else console_reason(console)
                return None, f"qemu exited {proc.returncode}: {why}", {}
            time.sleep(0.1)
        reason = f"not ready within {timeout:g} s (last console line: {console_reason(console)})"
    except BaseException:
        _end(proc)
        raise
    _end(proc)
    return None, reason, {}


def _end(proc: subprocess.Popen) -> None:
    start = proc_start_time(proc.pid)
    if start is not None:
        end_process(ProcessRecord(proc.pid, start, "qemu VM", group=True))
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def boot(name: str = MAIN, *, shares: list[Path] | None = None, cpus: int | None = None,
         mem: str = DEFAULT_MEM, console: Path | None = None, owner: bool = False,
         run: lifecycle.Run | None = None) -> Machine:
    """Boot a guest named ``name`` with the cached image (built first when missing: ``testbed
    vm build``) and wait for its agent; the accelerator as ``accel_candidates`` says, KVM falling back to TCG.

    shares: host directories the guest mounts at the same paths (default ``default_shares()``).
    cpus: virtual CPUs (default ``default_cpus(accel)``); mem: qemu's -m (e.g. '2G').
    console: the serial console's log file (default ``CACHE_DIR/console-<name>.log``).
    owner: the calling process owns the guest (``clean`` leaves it alone while it lives).
    run: a lifecycle Run recording qemu and the run directory.
    Raises SetupError (qemu missing, the image cannot be built) or GuestError (no accelerator
    booted it: one line with the console log's path)."""
    if cpus is not None and (why := cpus_refusal(cpus)):
        raise ValueError(f"cpus {why}")
    if why := mem_refusal(mem):
        raise ValueError(f"mem {why}")
    d = run_dir() / name
    if (old := Machine.load(name)) is not None and old.alive():
        raise SetupError(f"a VM named {name} is already running (pid {old.state['pid']}); "
                         "`testbed vm down` ends it")
    ok, why = qemu_available()
    if not ok:
        raise SetupError(f"the VM cannot start: {why}")
    img = vm_image.cached()
    if img is None:             # first use, or install.sh's package list changed
        log.warning("building the VM image first (minutes, once; `testbed vm build`)")
        img, _ = vm_image.build(log=log.info)
    shares = _shares(shares if shares is not None else default_shares())
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True, mode=0o700)
    if run is not None:
        run.record_tmpdir(d)
    try:
        shutil.copyfile(AGENT, d / "agent.py")
        (d / "jobs").mkdir()
        (d / "boot.json").write_text(json.dumps({
            "shares": [[f"s{i}", str(p), True] for i, p in enumerate(shares)],
            "modules": list(MODULES), "hostname": f"testbed-vm-{name}"}))
        console = Path(console or cache_dir() / f"console-{name}.log")
        console.parent.mkdir(parents=True, exist_ok=True)
        failures = []
        for accel in accel_candidates():
            timeout = KVM_BOOT_TIMEOUT if accel == "kvm" else TCG_BOOT_TIMEOUT
            n = cpus or default_cpus(accel)
            log.info("booting the VM with %s (%d vCPU, %s; up to %g s)", accel, n, mem, timeout)
            proc, reason, ready = _boot_once(img, d, shares, accel, n, mem, console, timeout, run)
            if accel == "kvm":
                kept = None
                if proc is None:
                    kept = cache_dir() / "console-kvm-check.log"
                    shutil.copyfile(console, kept)
                _store_accel({"kvm": {"booted": proc is not None, "reason": reason or None,
                                      "console": str(kept) if kept else None,
                                      "checked": time.time()}})
            if proc is not None:
                machine = Machine(d, {
                    "pid": proc.pid, "start_time": proc_start_time(proc.pid), "accel": accel,
                    "cpus": n, "mem": mem, "console": str(console),
                    "shares": [str(p) for p in shares], "image": img.meta["key"],
                    "kernel": ready["kernel"], "ready": ready, "boot_seconds": ready["boot_seconds"],
                    "owner_pid": os.getpid() if owner else None,
                    "owner_start_time": proc_start_time(os.getpid()) if owner else None,
                    "tried": failures,
                    "kvm_not_used": kvm_not_used(failures) if accel != "kvm" else None})
                machine.save()
                return machine
            failures.append({"accel": accel, "reason": reason})
        raise GuestError("the VM did not boot: " + "; ".join(f"{f['accel']}: {f['reason']}"
                                                             for f in failures)
                         + f"; console log: {console}", reason=failures[-1]["reason"],
                         console=console)
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise


# --- what the CLI calls ----------------------------------------------------------------------
def up(*, cpus: int | None = None, mem: str = DEFAULT_MEM, shares: list[Path] | None = None) -> Machine:
    """``testbed vm up``: boot the ``main`` guest (left running)."""
    return boot(MAIN, shares=shares, cpus=cpus, mem=mem)


def running(name: str = MAIN) -> Machine:
    m = Machine.load(name)
    if m is None or not m.alive():
        raise SetupError("no VM is up: `testbed vm up` starts one")
    return m


def down(name: str = MAIN) -> str:
    """``testbed vm down``: power the guest off and remove its run state."""
    m = Machine.load(name)
    if m is None:
        return "no VM is up"
    m.shutdown()
    return f"the VM ({m.state['accel']}, pid {m.state['pid']}) is powered off"


def clean(force: bool = False) -> list[str]:
    """For ``testbed clean``: end every guest whose owner is gone (:func:`plan_clean`)."""
    return plan_clean(force).execute()


def plan_clean(force: bool = False) -> lifecycle.Plan:
    """For ``testbed clean`` (and ``--dry-run``): end every guest whose owner is gone (all with
    ``force``; a ``vm up`` guest has no owner) and remove its run directory."""
    plan = lifecycle.Plan()
    root = run_dir()
    if not root.is_dir():
        return plan
    for d in sorted(root.iterdir()):
        m = Machine.load(d.name)
        if m is not None and m.state.get("owner_pid") and not force and \
                proc_start_time(m.state["owner_pid"]) == m.state.get("owner_start_time"):
            plan.actions.append(lifecycle.Action(
                [f"VM {d.name}: its owner (pid {m.state['owner_pid']}) is running; left alone"]))
            continue
        if m is not None and m.alive():
            plan.actions.append(lifecycle.ending(m.record(), f"VM {d.name} (qemu pid {m.state['pid']})"))
        plan.actions.append(lifecycle.removing(d))
    return plan


def run_cli_in_guest(argv: list[str], *, results_root: Path | str = "results",
                     timeout: float | None = None) -> int:
    """Run ``testbed ARGV`` (with ``--backend netem-vm``) in the VM with ``--backend netem``:
    in the ``main`` guest when it is up and shares the working directory and the results root,
    else in a guest booted for this command (its console in the results root's
    ``vm-console.log``; when a ``main`` guest is up, one line on stderr says why it could not be
    used).  Output streams back; the command's exit status is returned."""
    root = Path(results_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    inner = [sys.executable, "-m", "testbed", *guest_cli_argv(argv, BACKEND)]
    cwd = Path.cwd()
    main = Machine.load(MAIN)
    with lifecycle.Run(None) as run:    # SIGTERM and SIGHUP unwind: the command is ended too
        if main is not None and main.alive():
            unshared = [str(p) for p in dict.fromkeys((cwd.resolve(), root)) if not main.holds(p)]
            if not unshared:
                return main.exec(inner, cwd=cwd, timeout=timeout)
            print(f"testbed: the VM that is up (pid {main.state['pid']}) does not share "
                  f"{' or '.join(unshared)} (it shares {', '.join(main.state['shares'])}); booting "
                  "a second guest for this command beside it, both loading the host (to use the "
                  "one that is up, run from a directory it shares, with --results inside one)",
                  file=sys.stderr, flush=True)
        name = f"cmd-{os.getpid()}"
        m = boot(name, shares=default_shares(cwd, root), console=root / CONSOLE, owner=True,
                 run=run)
        try:
            return m.exec(inner, cwd=cwd, timeout=timeout)
        finally:
            m.shutdown()


def doctor_report() -> dict:
    """``testbed doctor``'s netem_vm entry: available (this host can boot the VM: root, qemu),
    reason, image (its directory, or None: ``vm build`` or the first boot builds it, minutes),
    accel (what a boot would use), and ``lines`` to print."""
    if os.environ.get("TESTBED_VM_GUEST") or os.environ.get("TESTBED_UML_GUEST"):
        return {"available": False, "reason": "this is a guest", "image": None, "accel": None,
                "lines": []}
    ok, why = qemu_available()
    img = vm_image.cached()
    try:
        accel = accel_candidates()[0]
    except ValueError as exc:               # a bad TESTBED_VM_ACCEL
        accel, ok, why = None, False, str(exc)
    lines = [f"image: {img.dir} (Debian {img.meta['suite']}, kernel {img.meta['kernel_release']}, "
             f"{img.disk_bytes() >> 20} MiB on disk)" if img else
             "image: not built (`testbed vm build`, or the first boot builds it: minutes)"]
    if accel == "kvm":
        lines.append("boots with KVM (TCG if a KVM guest does not boot)")
    elif accel == "tcg":
        lines.append(f"boots with TCG (emulated CPU, slower); KVM not used: {kvm_not_used([])}")
    return {"available": ok, "reason": why, "image": str(img.dir) if img else None,
            "accel": accel, "lines": lines if ok else []}


def status() -> dict:
    """``testbed vm status``: the image, the accelerator detection and the ``main`` guest."""
    img = vm_image.cached()
    m = Machine.load(MAIN)
    return {"image": {"dir": str(img.dir), **img.meta} if img else None,
            "image_key": vm_image.image_key(), "accel": accel_report(),
            "vm": {**m.state, "alive": m.alive()} if m else None}
