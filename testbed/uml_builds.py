"""Which User-Mode Linux kernel the ``netem-uml`` backend uses, and proof that it boots here.

Two builds can exist:

* ``system``: Debian's ``user-mode-linux`` package as installed (``/usr/bin/linux.uml``, modules
  in ``/usr/lib/uml/modules/<release>``).  Linux 6.1 (Debian 12) and 6.12 (Debian 13) die at boot
  on hosts whose XSAVE area is larger than they expect (Intel AMX): "ptrace set fp regs failed,
  errno = 14".
* ``provisioned``: a newer ``user-mode-linux`` from Debian's packages with its matching ``libc6``,
  unpacked by ``python -m testbed.uml_provision`` into ``STATE_DIR`` (outside /tmp: the guest
  mounts its own tmpfs there) and described by ``STATE_DIR/build.json``.

A build is used only after a guest really booted with it (``boot_check``: ``true`` run in a guest,
with the modules loaded).  The result is cached in ``STATE_DIR/boot-cache.json`` per host kernel
release, CPU model, build (kernel path, size, mtime) and mode; ``refresh=True`` boots again.

The choice follows ``TESTBED_UML``: ``auto`` (default: the system build if it boots, else the
provisioned one), ``system`` or ``provision`` (only that build).  Mode: ``seccomp`` (UML ≥ 6.14's
``seccomp=on``: the guest's processes trap their own syscalls instead of being ptraced) where the
build supports it and boots with it, else ``ptrace``; ``TESTBED_UML_MODE=ptrace`` forces ptrace.
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import SetupError

STATE_DIR = Path(os.environ.get("TESTBED_UML_DIR") or "/var/lib/testbed/uml")
SYSTEM_KERNEL = Path("/usr/bin/linux.uml")
SYSTEM_MODULES = Path("/usr/lib/uml/modules")
GUEST_PYTHON = Path("/usr/bin/python3")  # interpreter of the guest's init (host's system Python)
MODULES = ("sch_htb", "sch_netem", "veth", "tcp_bbr", "ipv6")
CHOICES = {"auto": ("system", "provisioned"), "system": ("system",),
           "provision": ("provisioned",), "provisioned": ("provisioned",)}
MODES = ("seccomp", "ptrace")  # preference order (benchmarks/uml_guest.py measures both)
INSTALL_HINT = "install it with `apt-get install user-mode-linux`"
PROVISION_HINT = "provision one with `TESTBED_UML=provision make install`"
BOOT_TIMEOUT = 120.0


class UMLUnavailable(SetupError):
    """No usable UML: a kernel, its modules or the guest's init interpreter is missing, or no
    build boots on this host.  The message names what and how to fix it."""


@dataclass(frozen=True)
class UMLBuild:
    """One UML kernel with its modules.

    source: 'system' or 'provisioned'; kernel: the linux.uml executable; modules_root: directory
    holding ``<release>/modules.dep``; package: the Debian package(s) it came from, e.g.
    'user-mode-linux 7.2um1, libc6 2.43-7 (unstable)'.
    """
    source: str
    kernel: Path
    modules_root: Path
    package: str | None = None

    def identity(self) -> str:
        st = self.kernel.stat()
        return f"{self.kernel}:{st.st_size}:{st.st_mtime_ns}"

    def describe(self) -> dict:
        return {"source": self.source, "kernel": str(self.kernel),
                "modules_root": str(self.modules_root), "package": self.package}


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


def system_build() -> UMLBuild:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "user-mode-linux"],
                         capture_output=True, text=True)
    package = f"user-mode-linux {out.stdout}" if out.returncode == 0 and out.stdout else None
    return UMLBuild("system", SYSTEM_KERNEL, SYSTEM_MODULES, package)


def provisioned_build(state_dir: Path | None = None) -> UMLBuild | None:
    try:
        m = json.loads(((state_dir or STATE_DIR) / "build.json").read_text())
    except (OSError, ValueError):
        return None
    return UMLBuild("provisioned", Path(m["kernel"]), Path(m["modules_root"]), m.get("package"))


def kernel_release(kernel: Path) -> str:
    """The UML kernel's release (``linux.uml --version``, which does not boot)."""
    out = subprocess.run([str(kernel), "--version"], capture_output=True, text=True, timeout=10,
                         stdin=subprocess.DEVNULL)
    version = out.stdout.strip()
    if out.returncode != 0 or not re.fullmatch(r"[\w.+-]+", version):
        reason = (out.stderr.strip().splitlines() or [f"printed {out.stdout!r}"])[-1]
        raise UMLUnavailable(f"{kernel} --version failed (exit {out.returncode}): {reason}")
    return version


def builtin_modules(moddir: Path) -> set[str]:
    """Names built into the kernel: ``modules.builtin`` and, for options that are no longer
    tristate (ipv6 in 7.x), the prefixes of ``modules.builtin.modinfo``."""
    names = set()
    builtin = moddir / "modules.builtin"
    if builtin.is_file():
        names |= {Path(line).name.split(".ko")[0] for line in builtin.read_text().split()}
    modinfo = moddir / "modules.builtin.modinfo"
    if modinfo.is_file():
        names |= {entry.split(".", 1)[0] for entry in modinfo.read_bytes().decode("utf-8", "replace")
                  .split("\0") if "." in entry}
    return {n.replace("-", "_") for n in names}


def check(build: UMLBuild) -> tuple[str, list[str]]:
    """(kernel release, modules to load with modprobe); raise UMLUnavailable naming what is missing."""
    hint = INSTALL_HINT if build.source == "system" else PROVISION_HINT
    if not (build.kernel.is_file() and os.access(build.kernel, os.X_OK)):
        raise UMLUnavailable(f"UML kernel {build.kernel} not found (or not executable); {hint}")
    if not os.access(GUEST_PYTHON, os.X_OK):
        raise UMLUnavailable(f"{GUEST_PYTHON} (the guest's init interpreter) not found; "
                             "install it with `apt-get install python3`")
    release = kernel_release(build.kernel)
    moddir = build.modules_root / release
    dep = moddir / "modules.dep"
    if not dep.is_file():
        raise UMLUnavailable(f"no modules for UML kernel {release}: {dep} is missing; {hint}")
    # names as in modules.dep: kernel/net/sched/sch_netem.ko (or .ko.xz, .ko.zst, ...)
    loadable = {Path(line.split(":", 1)[0]).name.split(".ko")[0].replace("-", "_")
                for line in dep.read_text().splitlines()}
    builtin = builtin_modules(moddir)
    missing = [m for m in MODULES if m not in loadable and m not in builtin]
    if missing:
        raise UMLUnavailable(f"UML kernel {release} lacks module(s) {', '.join(missing)} in "
                             f"{moddir}; {hint}")
    return release, [m for m in MODULES if m in loadable and m not in builtin]


@functools.lru_cache(maxsize=None)
def _help_text(identity: str, kernel: str) -> str:
    return subprocess.run([kernel, "--help"], capture_output=True, text=True, timeout=10,
                          stdin=subprocess.DEVNULL).stdout


def modes(build: UMLBuild) -> list[str]:
    """Modes to try, best first: seccomp where this build has the ``seccomp=`` option and
    ``TESTBED_UML_MODE`` does not say otherwise, then ptrace."""
    forced = os.environ.get("TESTBED_UML_MODE")
    if forced:
        if forced not in MODES:
            raise UMLUnavailable(f"TESTBED_UML_MODE={forced!r}: allowed {', '.join(MODES)}")
        return [forced]
    has_seccomp = "seccomp=" in _help_text(build.identity(), str(build.kernel))
    return [m for m in MODES if m != "seccomp" or has_seccomp]


def host_key() -> str:
    cpu = "unknown CPU"
    try:
        cpu = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1)
    except (OSError, AttributeError):
        pass
    return f"{os.uname().release} | {cpu}"


def _load_cache() -> dict:
    try:
        return json.loads((STATE_DIR / "boot-cache.json").read_text())
    except (OSError, ValueError):
        return {}


def _store(key: str, entry: dict) -> None:
    try:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        cache = _load_cache()
        cache[key] = entry
        fd, tmp = tempfile.mkstemp(dir=STATE_DIR, prefix=".boot-cache")
        with os.fdopen(fd, "w") as f:
            json.dump(cache, f, indent=1)
        os.replace(tmp, STATE_DIR / "boot-cache.json")
    except OSError:
        pass  # not root: no cache, the next call boots again


def boot_check(build: UMLBuild, mode: str, refresh: bool = False) -> dict:
    """Boot ``build`` in ``mode`` running ``true`` (cached, see the module docstring).

    Returns {booted, boot_seconds (host wall time: start of linux.uml to its exit, modules
    loaded), release, reason (the console's reason line when it did not boot), console (path of
    the boot's full console log), checked (UNIX time), cached (this call did not boot)}.
    """
    from .uml import GuestError, GuestTimeout, run_in_guest
    release, _ = check(build)
    key = f"{host_key()} | {build.identity()} | {mode}"
    if not refresh and key in _load_cache():
        return {**_load_cache()[key], "cached": True}
    logdir = STATE_DIR if _mkdir(STATE_DIR) and os.access(STATE_DIR, os.W_OK) else None
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


def candidates() -> list[UMLBuild]:
    choice = os.environ.get("TESTBED_UML", "auto") or "auto"
    if choice not in CHOICES:
        raise UMLUnavailable(f"TESTBED_UML={choice!r}: allowed {', '.join(CHOICES)}")
    builds = []
    for source in CHOICES[choice]:
        build = system_build() if source == "system" else provisioned_build()
        if build is None:
            if choice != "auto":
                raise UMLUnavailable(f"no provisioned UML in {STATE_DIR}; {PROVISION_HINT}")
            continue
        builds.append(build)
    return builds


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
        else:
            lines.append(f"{head}: does not boot: {a['reason']}"
                         + (f" (console: {a['console']})" if a.get("console") else ""))
    return {"available": guest is not None, "booted": guest is not None,
            "uml": guest.describe() if guest else None,
            "boot_seconds": guest.boot_seconds if guest else None, "attempts": attempts,
            "reason": (f"{guest.build.source} UML {guest.release} ({guest.mode})" if guest
                       else f"no UML guest boots here: {failure_summary(attempts)}"),
            "lines": lines}
