"""The VM's disk image: a Debian root file system built from Debian's packages with mmdebstrap.

The packages are the host's suite (``VERSION_CODENAME`` of /etc/os-release) from the host's own
apt sources, with the package list of ``scripts/install.sh`` (``sh scripts/install.sh
--packages`` prints it: one list for the host, the Vagrant box and this image) plus a kernel
(``linux-image-amd64``).  The checkout and its virtualenv are not copied in: the guest mounts them
over 9p at the same paths, and runs the host's ``.venv`` with the image's ``/usr/bin/python3``
(the same suite, so the same Python).

The image is cached under ``CACHE_DIR`` (``/var/cache/testbed/vm``, ``TESTBED_VM_CACHE``) as
``<key>/`` with ``root.img`` (raw ext4), ``vmlinuz``, ``initrd.img`` and ``image.json``; ``key``
is a hash of install.sh's package list and of this recipe, so changing either builds a new image
(older ones are removed once it is complete).  A build works in ``<key>.build-*`` and removes it
on any failure or interruption.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.spec.errors import SetupError

REPO = Path(__file__).resolve().parents[3]
INSTALL_SH = REPO / "scripts" / "install.sh"
CACHE_DIR = Path(os.environ.get("TESTBED_VM_CACHE") or "/var/cache/testbed/vm")
#: what the guest needs beyond install.sh's list: its kernel, and what the init stub uses
EXTRA_PACKAGES = ("linux-image-amd64", "initramfs-tools", "kmod", "udev")
#: the init the kernel starts (``init=``): mounts what the agent needs, then hands over to the
#: agent the host put into the control share (so the agent can change without a new image)
INIT_STUB = """#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755 tmpfs /run
modprobe -q 9pnet_virtio; modprobe -q 9p
mkdir -p /run/tbctl
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 tbctl /run/tbctl || {
  echo "tb-init: cannot mount the control share"; echo o > /proc/sysrq-trigger; }
exec /usr/bin/python3 /run/tbctl/agent.py
"""
INIT_PATH = "/sbin/tb-init"
#: dpkg leaves these out of the image (documentation and translations)
EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
BUILD_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Image:
    """A built image: its directory and what ``image.json`` says (key, suite, packages,
    kernel release, build seconds, size)."""
    dir: Path
    meta: dict

    @property
    def root(self) -> Path:
        return self.dir / "root.img"

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    def disk_bytes(self) -> int:
        """What the image's files take on disk: less than ``meta["size_bytes"]`` (the root
        file system's apparent size), as ``root.img`` is sparse."""
        return sum(p.stat().st_blocks * 512 for p in self.dir.iterdir() if p.is_file())


def install_packages() -> list[str]:
    """The Debian packages ``scripts/install.sh`` installs (``--packages`` prints them)."""
    out = subprocess.run(["sh", str(INSTALL_SH), "--packages"], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0 or not out.stdout.split():
        raise SetupError(f"{INSTALL_SH} --packages printed no package list: {out.stderr.strip()}")
    return out.stdout.split()


def host_suite() -> str:
    text = Path("/etc/os-release").read_text()
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", text, re.M)
    if not m:
        raise SetupError("/etc/os-release names no VERSION_CODENAME: the VM image is built from "
                         "the host's Debian suite")
    return m.group(1)


def host_sources(suite: str) -> list[Path]:
    """The host's apt source files that name ``suite`` (one-line or deb822)."""
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list")),
             *sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]
    out = []
    for f in files:
        try:
            if re.search(rf"(^|\s){re.escape(suite)}(\s|$)", f.read_text(), re.M):
                out.append(f)
        except OSError:
            continue
    return out


def image_key() -> str:
    """Names the image: a hash of install.sh's package list and of this recipe."""
    h = hashlib.sha256(json.dumps([install_packages(), EXTRA_PACKAGES, INIT_STUB, EXCLUDES]).encode())
    return h.hexdigest()[:12]


def cached(cache_dir: Path | None = None) -> Image | None:
    """The complete image for the current key, or None."""
    d = (cache_dir or CACHE_DIR) / image_key()
    try:
        meta = json.loads((d / "image.json").read_text())
    except (OSError, ValueError):
        return None
    img = Image(d, meta)
    return img if all(p.is_file() for p in (img.root, img.kernel, img.initrd)) else None


def mmdebstrap_argv(suite: str, packages: list[str], target: Path, sources: list[Path]) -> list[str]:
    argv = ["mmdebstrap", "--mode=root", "--variant=apt", "--include=" + ",".join(packages)]
    argv += [f"--dpkgopt=path-exclude={p}" for p in EXCLUDES]
    argv += ["--dpkgopt=path-include=/usr/share/doc/*/copyright",
             "--customize-hook=upload " + "{init} " + INIT_PATH,
             f"--customize-hook=chmod 0755 \"$1{INIT_PATH}\"",
             "--customize-hook=echo testbed-vm > \"$1/etc/hostname\"",
             suite, str(target), *(str(s) for s in sources)]
    return argv


def _ext4_size(tree: Path) -> int:
    used = int(subprocess.run(["du", "-sxb", str(tree)], capture_output=True, text=True,
                              check=True).stdout.split()[0])
    return int(used * 1.3) + (512 << 20)   # room for what a run writes (the disk is a snapshot)


def build(force: bool = False, cache_dir: Path | None = None, log=None) -> tuple[Image, bool]:
    """The image for the current key: (image, built now?).  Builds it with mmdebstrap and
    ``mkfs.ext4 -d`` when missing (or ``force``); ``log`` (a callable) gets progress lines."""
    cache = cache_dir or CACHE_DIR
    if not force and (img := cached(cache)) is not None:
        return img, False
    if os.geteuid() != 0:
        raise SetupError("testbed vm build: run as root (mmdebstrap builds the image as root)")
    for tool in ("mmdebstrap", "mkfs.ext4"):
        if shutil.which(tool) is None:
            raise SetupError(f"testbed vm build: {tool} is not installed (scripts/install.sh "
                             "installs it)")
    suite, packages = host_suite(), list(dict.fromkeys([*install_packages(), *EXTRA_PACKAGES]))
    sources = host_sources(suite)
    if not sources:
        raise SetupError(f"no apt source of this host names {suite}: the image is built from "
                         "the host's own Debian sources")
    key = image_key()
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=cache))
    start = time.monotonic()
    try:
        tree, stub = work / "tree", work / "tb-init"
        stub.write_text(INIT_STUB)
        argv = [a.replace("{init}", str(stub)) for a in mmdebstrap_argv(suite, packages, tree, sources)]
        if log:
            log(f"mmdebstrap {suite}: {len(packages)} packages into {tree}")
        with open(work / "mmdebstrap.log", "wb") as out:
            res = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 timeout=BUILD_TIMEOUT)
        if res.returncode != 0:
            tail = (work / "mmdebstrap.log").read_text(errors="replace").strip().splitlines()[-1:]
            keep = cache / "mmdebstrap-failed.log"
            shutil.copyfile(work / "mmdebstrap.log", keep)
            raise SetupError(f"mmdebstrap failed (exit {res.returncode}): {' '.join(tail)}; "
                             f"log: {keep}")
        kernels = sorted((tree / "boot").glob("vmlinuz-*"))
        if not kernels:
            raise SetupError("the image has no kernel in /boot (linux-image-amd64)")
        release = kernels[-1].name.removeprefix("vmlinuz-")
        shutil.copyfile(kernels[-1], work / "vmlinuz")
        shutil.copyfile(tree / "boot" / f"initrd.img-{release}", work / "initrd.img")
        size = _ext4_size(tree)
        if log:
            log(f"mkfs.ext4 -d: {size >> 20} MiB image")
        with open(work / "root.img", "wb") as f:
            f.truncate(size)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "tbroot", "-d", str(tree), str(work / "root.img")],
                       check=True, capture_output=True, timeout=BUILD_TIMEOUT)
        shutil.rmtree(tree)
        stub.unlink()
        meta = {"key": key, "suite": suite, "packages": packages, "kernel_release": release,
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - start, 1), "size_bytes": size,
                "install_sh": str(INSTALL_SH)}
        (work / "image.json").write_text(json.dumps(meta, indent=1))
        (work / "mmdebstrap.log").unlink()
        final = cache / key
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    for old in cache.iterdir():    # images of older keys, and builds that were killed
        if old.is_dir() and old.name != key and not old.name.startswith(f"{key}.build-"):
            shutil.rmtree(old, ignore_errors=True)
    return Image(final, meta), True
