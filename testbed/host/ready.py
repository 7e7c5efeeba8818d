"""The one readiness handshake: a process started in a host prints ``ready HOST:PORT`` on
stdout once it listens (apps via ``testbed.apps.sockets.announce_ready``, probe listeners via
``testbed.calibrate.probe``); the starter waits for that line, or for the process's exit and its error."""
from __future__ import annotations

import contextlib
import select
import subprocess
import time

from testbed.spec.errors import SetupError


#: how long a process whose stdout closed is given to exit, so that its error can be read
EXIT_GRACE_S = 5.0


def wait_ready(proc: subprocess.Popen, what: str, timeout: float = 15.0) -> str:
    """Return the HOST:PORT of the ``ready`` line; SetupError with the process's last stderr
    line when it exits first (its stdout closing: it is given ``EXIT_GRACE_S`` to exit) or
    prints nothing in ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    fd = proc.stdout
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            line = fd.readline()
            line = line.decode() if isinstance(line, bytes) else line
            if line.startswith("ready"):
                parts = line.split()
                return parts[1] if len(parts) > 1 else ""
            if not line:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(EXIT_GRACE_S)
                break
    err = proc.stderr.read() if proc.poll() is not None else b""
    err = err.decode(errors="replace") if isinstance(err, bytes) else (err or "")
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    raise SetupError(f"{what} did not start: {lines[-1] if lines else 'no ready line in time'}")
