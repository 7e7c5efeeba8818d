"""What the two guests that run a whole command with real netem share: ``--backend netem-uml``
(a User-Mode Linux kernel, testbed/backends/uml/) and ``--backend netem-vm`` (a qemu VM,
testbed/backends/vm/).

Either re-runs ``testbed ARGV`` inside its guest with ``--backend netem`` (``guest_cli_argv``), from
the caller's working directory and interpreter, with the results root writable in the guest at the
same path, and returns the command's exit status.  A guest that does not boot or set up raises
``GuestError``: one line saying what failed, the console's reason line and the console log's path.

Division of labour: the pieces both guests use; imported only by them.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from testbed.spec.errors import SetupError


class GuestError(SetupError):
    """The guest did not run the command (boot or setup failed).  The message is one line; the
    console's reason line is ``reason``, the full console log ``console``."""

    def __init__(self, message: str, *, reason: str, console: Path):
        super().__init__(message)
        self.reason, self.console = reason, console


def guest_cli_argv(argv: list[str], backend: str) -> list[str]:
    """``testbed`` arguments with ``--backend BACKEND`` turned into ``--backend netem``."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == f"--backend={backend}":
            out[i] = "--backend=netem"
        elif arg == backend and i > 0 and out[i - 1] == "--backend":
            out[i] = "netem"
    if out == list(argv):
        raise ValueError(f"no '--backend {backend}' in {argv!r}")
    return out


def host_key() -> str:
    """The host kernel release and CPU model: what a cached boot check holds for."""
    cpu = "unknown CPU"
    try:
        cpu = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1)
    except (OSError, AttributeError):
        pass
    return f"{os.uname().release} | {cpu}"
