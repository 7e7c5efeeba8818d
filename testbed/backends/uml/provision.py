"""Make sure a User-Mode Linux guest boots here; provision one from Debian's packages if not.

    python -m testbed.backends.uml.provision [--update]   (run by ``make install``, as root)

With ``TESTBED_UML`` unset or ``auto``: if the system's ``user-mode-linux`` boots a guest (a real
boot, see ``testbed/backends/uml/builds.py``), nothing more happens.  If it does not (Linux 6.1/6.12 on
hosts with Intel AMX), or with ``TESTBED_UML=provision`` (to test this path on any host), this
fetches ``user-mode-linux`` and the ``libc6`` it was built against from one Debian suite
(``TESTBED_UML_SUITE``, default unstable; mirror ``TESTBED_UML_MIRROR``) with ``apt-get`` using
a temporary sources list, package lists and cache under ``STATE_DIR/apt`` — the machine's apt
sources, its package state and its libc are not touched.  The packages are unpacked into
``STATE_DIR/<package version>/root``; the kernel's ELF interpreter is pointed at the unpacked
loader and its library path at the unpacked libc (``patchelf``; from the machine's own suite,
unpacked alongside when not installed).  Kernel, modules release directory and loader are found
in the unpacked tree, not assumed.  ``STATE_DIR/build.json`` then describes the build, which is
boot-checked before it is reported usable; an existing build is kept (``--update``: fetch the
suite's current versions).  ``TESTBED_UML=system``: nothing is provisioned.
``TESTBED_UML_MODE=seccomp`` with a system UML that has no seccomp mode: one line saying so,
nothing fetched (``TESTBED_UML=provision`` fetches a build that has it).

Offline, refused or failing: one clear line on stderr and exit status 0 (the rest of the
testbed does not need a guest; ``--backend netem-uml`` and its tests then say why not).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from testbed.backends.uml import builds as ub
from testbed.backends.uml import HIDDEN_IN_GUEST, boot_check

DEFAULT_MIRROR = "http://deb.debian.org/debian"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
PACKAGE = "user-mode-linux"


class ProvisionError(RuntimeError):
    """Provisioning failed; the message says at which step and why."""


def _run(argv: list[str], what: str, cwd: Path | None = None, timeout: float = 600) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"{what}: {exc}") from None
    if out.returncode != 0:
        lines = [line for line in out.stderr.splitlines() if line.strip()] or [out.stdout.strip()]
        errors = [line for line in lines if line.startswith(("E:", "W:", "Err:"))] or lines
        raise ProvisionError(f"{what} failed (exit {out.returncode}): {errors[-1]}")
    return out.stdout


class Apt:
    """``apt-get`` / ``apt-cache`` with a private sources list, lists and cache under ``root``."""

    def __init__(self, root: Path, suite: str, mirror: str):
        self.root = root
        etc = root / "etc"
        for d in (etc / "sources.list.d", etc / "preferences.d", root / "lists" / "partial",
                  root / "cache" / "archives" / "partial"):
            d.mkdir(parents=True, exist_ok=True)
        self.sources = f"{mirror} {suite}"
        (etc / "sources.list").write_text(f"deb [signed-by={KEYRING}] {mirror} {suite} main\n")
        self.options = [f"-oDir::Etc::SourceList={etc / 'sources.list'}",
                        f"-oDir::Etc::SourceParts={etc / 'sources.list.d'}",
                        f"-oDir::Etc::Preferences={etc / 'preferences'}",
                        f"-oDir::Etc::PreferencesParts={etc / 'preferences.d'}",
                        f"-oDir::State::Lists={root / 'lists'}", f"-oDir::Cache={root / 'cache'}",
                        "-oDir::State::status=/dev/null",  # installed versions are no candidates
                        "-oAPT::Sandbox::User=root", "-oDebug::NoLocking=1",
                        "-oAcquire::Retries=2", "-oAcquire::http::Timeout=30"]

    def update(self) -> None:
        out = subprocess.run(["apt-get", *self.options, "-q", "update"], capture_output=True,
                             text=True, timeout=600, stdin=subprocess.DEVNULL)
        if not any((self.root / "lists").glob("*_Packages*")):  # apt-get may exit 0 offline
            lines = out.stderr.splitlines()
            why = ([x for x in lines if "Failed to fetch" in x or x.startswith("Err:")]
                   or [x for x in lines if x.startswith(("E:", "W:"))] or ["no lists"])[0]
            raise ProvisionError(f"could not fetch the package lists of {self.sources} (offline or "
                                 f"refused?): {why.strip().rstrip('.')}")

    def candidate(self, package: str) -> dict[str, str]:
        """Fields of the package's candidate version in this suite (Version, Depends, ...)."""
        version = re.search(r"Candidate: (\S+)", _run(["apt-cache", *self.options, "policy", package],
                                                       f"apt-cache policy {package}"))
        if not version or version.group(1) == "(none)":
            raise ProvisionError(f"{package} is not in the temporary sources")
        text = _run(["apt-cache", *self.options, "show", f"{package}={version.group(1)}"],
                    f"apt-cache show {package}")
        return dict(re.findall(r"^([\w-]+): (.*)$", text.split("\n\n")[0], re.M))

    def download(self, spec: str, dest: Path) -> Path:
        _run(["apt-get", *self.options, "-q", "download", spec], f"apt-get download {spec}", cwd=dest)
        name = spec.split("=")[0]
        debs = sorted(dest.glob(f"{name}_*.deb"))
        if not debs:
            raise ProvisionError(f"apt-get download {spec} left no {name}_*.deb in {dest}")
        return debs[-1]


def _inside(root: Path, path: str) -> Path:
    """``path`` (absolute, as the unpacked system would see it) resolved inside ``root``: symlinks
    are followed within ``root``; /lib64 and /lib also as /usr/lib64, /usr/lib (merged /usr)."""
    for candidate in (path, "/usr" + path):
        p = Path(candidate)
        for _ in range(40):
            here = root / p.relative_to("/")
            if here.is_symlink():
                target = Path(os.readlink(here))
                p = target if target.is_absolute() else Path(os.path.normpath(p.parent / target))
                continue
            break
        if here.is_file():
            return here
    raise ProvisionError(f"{path} is not in the unpacked packages ({root})")


def _patchelf(work: Path) -> str:
    found = shutil.which("patchelf")
    if found:
        return found
    # From the machine's own suite, unpacked, never installed.
    _run(["apt-get", "-q", "-oAPT::Sandbox::User=root", "download", "patchelf"],
         "apt-get download patchelf (machine's sources)", cwd=work)
    debs = sorted(work.glob("patchelf_*.deb"))
    if not debs:
        raise ProvisionError("apt-get download patchelf left no patchelf_*.deb")
    _run(["dpkg-deb", "-x", str(debs[-1]), str(work / "patchelf")], "dpkg-deb -x patchelf")
    return str(work / "patchelf" / "usr" / "bin" / "patchelf")


def provision(state_dir: Path = ub.STATE_DIR, suite: str | None = None,
              mirror: str | None = None) -> ub.UMLBuild:
    """Fetch, unpack and patch the suite's user-mode-linux + libc6 into ``state_dir``; return the
    build (described in ``state_dir/build.json``).  Idempotent: a build of the same package
    versions already there is kept."""
    suite = suite or os.environ.get("TESTBED_UML_SUITE") or "unstable"
    mirror = mirror or os.environ.get("TESTBED_UML_MIRROR") or DEFAULT_MIRROR
    state_dir = state_dir.resolve()
    if any(state_dir == Path(h) or Path(h) in state_dir.parents for h in HIDDEN_IN_GUEST):
        raise ProvisionError(f"{state_dir} is under a directory the guest covers with its own "
                             "tmpfs; choose TESTBED_UML_DIR elsewhere (default /var/lib/testbed/uml)")
    state_dir.mkdir(parents=True, exist_ok=True)
    apt = Apt(state_dir / "apt", suite, mirror)
    try:
        apt.update()
        uml = apt.candidate(PACKAGE)
        libc = apt.candidate("libc6")
        package = f"{PACKAGE} {uml['Version']}, libc6 {libc['Version']} ({suite})"
        build_dir = state_dir / re.sub(r"[^\w.+-]", "_", f"{uml['Version']}-libc{libc['Version']}")
        current = ub.provisioned_build(state_dir)
        if current is not None and current.package == package and current.kernel.is_file():
            return current
        with tempfile.TemporaryDirectory(dir=state_dir, prefix=".fetch") as tmp:
            work = Path(tmp)
            debs = [apt.download(f"{PACKAGE}={uml['Version']}", work),
                    apt.download(f"libc6={libc['Version']}", work)]
            patchelf = _patchelf(work)
            root = work / "root"
            for deb in debs:
                _run(["dpkg-deb", "-x", str(deb), str(root)], f"dpkg-deb -x {deb.name}")
            if build_dir.exists():
                shutil.rmtree(build_dir)
            build_dir.mkdir()
            os.replace(root, build_dir / "root")
            root = build_dir / "root"
            kernel = _inside(root, "/usr/bin/linux.uml")
            deps = [Path(p).parent for p in root.glob("usr/lib/uml/modules/*/modules.dep")]
            if len(deps) != 1:
                raise ProvisionError(f"expected one modules release directory under "
                                     f"{root / 'usr/lib/uml/modules'}, found {len(deps)}")
            interp = _run([patchelf, "--print-interpreter", str(kernel)],
                          "patchelf --print-interpreter").strip()
            loader = _inside(root, interp).resolve()
            libcs = sorted(root.rglob("libc.so.6"))
            if not libcs:
                raise ProvisionError(f"no libc.so.6 in the unpacked libc6 ({root})")
            libdir = libcs[0].resolve().parent
            _run([patchelf, "--set-interpreter", str(loader), "--set-rpath", str(libdir),
                  str(kernel)], "patchelf --set-interpreter")
        build = ub.UMLBuild("provisioned", kernel, deps[0].parent, package)
        release, _ = ub.check(build)  # runs the patched kernel (--version) and finds the modules
        if release != deps[0].name:
            raise ProvisionError(f"kernel says release {release}, modules are for {deps[0].name}")
        manifest = {**build.describe(), "loader": str(loader), "libdir": str(libdir),
                    "release": release, "suite": suite, "mirror": mirror}
        (state_dir / "build.json.new").write_text(json.dumps(manifest, indent=1))
        os.replace(state_dir / "build.json.new", state_dir / "build.json")
        for old in state_dir.iterdir():  # earlier builds
            if old.is_dir() and old != build_dir and old.name not in ("apt",) \
                    and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
        return build
    finally:
        shutil.rmtree(state_dir / "apt", ignore_errors=True)


def main() -> int:
    choice = os.environ.get("TESTBED_UML", "auto") or "auto"
    if choice not in ub.CHOICES:
        print(f"uml_provision: TESTBED_UML={choice!r}: allowed {', '.join(ub.CHOICES)}", file=sys.stderr)
        return 0
    if choice == "system":
        print("uml_provision: TESTBED_UML=system: using the system's user-mode-linux only")
        return 0
    if choice == "auto":
        try:
            system = ub.system_build()
            checks = [boot_check(system, mode) for mode in ub.modes(system)]
        except ub.ModeUnsupported as exc:   # it boots, not in the mode asked for: no download for that
            print(f"uml_provision: {exc}", file=sys.stderr)
            return 0
        except (ub.UMLUnavailable, OSError, subprocess.SubprocessError) as exc:
            checks = [{"booted": False, "reason": str(exc)}]
        good = [c for c in checks if c["booted"]]
        if good:
            print(f"uml_provision: the system's UML {good[0]['release']} boots "
                  f"({good[0]['boot_seconds']:.1f} s); nothing to provision")
            return 0
        print(f"uml_provision: the system's UML does not boot here: {checks[-1]['reason']}; "
              "provisioning one from Debian's packages")
    try:
        build = ub.provisioned_build()
        refresh = build is None or "--update" in sys.argv[1:]
        if refresh:
            build = provision()
        guest, attempts = None, []
        for mode in ub.modes(build):
            res = boot_check(build, mode, refresh=refresh)
            attempts.append(res)
            if res["booted"]:
                guest = res
                break
    except (ProvisionError, ub.UMLUnavailable, OSError) as exc:
        print(f"uml_provision: could not provision a UML guest: {str(exc).rstrip('.')}. Everything but "
              "`--backend netem-uml` works; its tests will be skipped with this reason",
              file=sys.stderr)
        return 0
    if guest is None:
        print(f"uml_provision: {build.package} in {build.kernel.parent} does not boot either: "
              f"{attempts[-1]['reason']} (console: {attempts[-1]['console']})", file=sys.stderr)
        return 0
    print(f"uml_provision: {build.package}: UML {guest['release']} boots in "
          f"{guest['boot_seconds']:.1f} s ({mode}; kernel {build.kernel})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
