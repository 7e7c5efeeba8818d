"""The User-Mode Linux kernels the ``netem-uml`` backend can use, and what each one lacks.

Two builds can exist:

* ``system``: Debian's ``user-mode-linux`` package as installed (``/usr/bin/linux.uml``, modules
  in ``/usr/lib/uml/modules/<release>``).  Linux 6.1 (Debian 12) and 6.12 (Debian 13) die at boot
  on hosts whose XSAVE area is larger than they expect (Intel AMX): "ptrace set fp regs failed,
  errno = 14".
* ``provisioned``: a newer ``user-mode-linux`` from Debian's packages with its matching ``libc6``,
  unpacked by ``python -m testbed.backends.uml.provision`` into ``STATE_DIR`` (outside /tmp: the guest
  mounts its own tmpfs there) and described by ``STATE_DIR/build.json``.

Nothing here boots a guest: which build and mode is used, proven by booting it, is
``testbed.backends.uml.choose``.  The candidates follow ``TESTBED_UML``: ``auto`` (default: the system
build if it boots, else the provisioned one), ``system`` or ``provision`` (only that build).
Modes: ``seccomp`` (UML ≥ 6.14's ``seccomp=on``: the guest's processes trap their own syscalls
instead of being ptraced) where the build supports it, then ``ptrace``;
``TESTBED_UML_MODE=ptrace`` or ``seccomp`` forces one.  A build supports seccomp when its
``--help`` lists the ``seccomp=`` option; one without it (before 6.14) takes ``seccomp=on``
for a parameter of init's and boots in ptrace mode, so asking it for seccomp is refused
(``ModeUnsupported``) rather than recorded as a mode that was not used.
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testbed.spec.errors import SetupError

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


class UMLUnavailable(SetupError):
    """No usable UML: a kernel, its modules or the guest's init interpreter is missing, or no
    build boots on this host.  The message names what and how to fix it."""


class ModeUnsupported(UMLUnavailable):
    """A mode was asked for (``TESTBED_UML_MODE``, or ``mode=``) that this build does not have.
    ``mode``: the mode asked for; ``release``: the build's kernel release (None if unknown)."""

    def __init__(self, message: str, *, mode: str, release: str | None):
        super().__init__(message)
        self.mode, self.release = mode, release


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


def supported_modes(build: UMLBuild) -> list[str]:
    """The modes ``build`` has, best first: seccomp where its ``--help`` lists the ``seccomp=``
    option (UML ≥ 6.14), and ptrace."""
    has_seccomp = "seccomp=" in _help_text(build.identity(), str(build.kernel))
    return [m for m in MODES if m != "seccomp" or has_seccomp]


def require_mode(build: UMLBuild, mode: str, asked: str, undo: str) -> None:
    """Raise ModeUnsupported when ``build`` does not have ``mode`` (ptrace: every build has it).
    ``asked``: what asked for it (e.g. 'TESTBED_UML_MODE=seccomp'); ``undo``: how not to."""
    if mode == "ptrace":
        return
    supported = supported_modes(build)
    if mode in supported:
        return
    try:
        release = kernel_release(build.kernel)
    except (UMLUnavailable, OSError, subprocess.SubprocessError):
        release = None
    name = " ".join(x for x in (build.source, "UML", release, f"({build.kernel})") if x)
    raise ModeUnsupported(
        f"{asked}, but {name} has no {mode} mode, only {' and '.join(supported)} (its --help lists "
        f"no {mode}= option: seccomp mode needs UML 6.14 or later, which "
        f"`TESTBED_UML=provision make install` provisions); it would boot in ptrace mode with "
        f"{mode}=on ignored; {undo}", mode=mode, release=release)


def modes(build: UMLBuild) -> list[str]:
    """Modes to try, best first: seccomp where this build has the ``seccomp=`` option, then
    ptrace; ``TESTBED_UML_MODE`` forces one, ModeUnsupported where this build lacks it."""
    forced = os.environ.get("TESTBED_UML_MODE")
    if forced:
        if forced not in MODES:
            raise UMLUnavailable(f"TESTBED_UML_MODE={forced!r}: allowed {', '.join(MODES)}")
        require_mode(build, forced, f"TESTBED_UML_MODE={forced}",
                     "unset TESTBED_UML_MODE (each build then boots in the best mode it has) "
                     "or set it to ptrace")
        return [forced]
    return supported_modes(build)


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
