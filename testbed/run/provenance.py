"""What a reader needs to trust or redo a run: git revision, kernel, tool versions, command line.

In the testbed's VM the image has no git: the host passes its checkout's revision in
``HOST_GIT_ENV`` (``testbed.host.git``), and ``git_revision`` records it, marked as
the host's."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from testbed.host.git import FROM_HOST, HOST_GIT_ENV, local_git

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"tcpdump": ["tcpdump", "--version"], "tshark": ["tshark", "--version"],
         "iperf3": ["iperf3", "--version"], "iproute2": ["ip", "-V"], "ethtool": ["ethtool", "--version"]}


def _first_line(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def git_revision() -> dict[str, Any]:
    """``{"revision", "dirty"}`` of the checkout; where this machine's git cannot say (the VM's
    image has none) but the host passed its own in ``HOST_GIT_ENV``, that one with ``"source":
    FROM_HOST`` (the guest runs the host's checkout, shared at the same path)."""
    local = local_git(REPO)
    passed = os.environ.get(HOST_GIT_ENV)
    if local["revision"] is None and passed:
        try:
            host = json.loads(passed)
        except ValueError:
            return local
        if isinstance(host, dict):
            return {"revision": host.get("revision"), "dirty": host.get("dirty"), "source": FROM_HOST}
    return local


@lru_cache(maxsize=1)
def _static() -> dict[str, Any]:
    versions: dict[str, Any] = {name: _first_line(argv) for name, argv in TOOLS.items()}
    versions["python"] = sys.version.split()[0]
    for module in ("numpy", "mininet.net", "scapy", "aioquic"):
        try:
            mod = __import__(module, fromlist=["VERSION"])
            versions[module.split(".")[0]] = getattr(mod, "__version__", getattr(mod, "VERSION", None))
        except ImportError:
            versions[module.split(".")[0]] = None
    # In a UML guest (testbed/backends/uml/__init__.py): the build and mode (seccomp/ptrace) it runs on; else null.
    uml_guest = json.loads(os.environ.get("TESTBED_UML_GUEST") or "null")
    # In the testbed's VM (testbed/backends/vm/__init__.py): accel (kvm/tcg), vCPUs, memory, kernel; else null.
    vm_guest = json.loads(os.environ.get("TESTBED_VM_GUEST") or "null")
    return {"kernel": platform.release(), "kernel_version": platform.version(),
            "machine": platform.machine(), "hostname": platform.node(), "tools": versions,
            "uml_guest": uml_guest, "vm_guest": vm_guest}


def provenance() -> dict[str, Any]:
    return {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv,
            "git": git_revision(), **_static()}
