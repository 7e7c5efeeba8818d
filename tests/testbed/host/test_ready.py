"""The readiness handshake: a ready line, or the process's own error when it ends first."""
import subprocess
import sys

import pytest

from testbed.host.ready import wait_ready
from testbed.spec.errors import SetupError


def _start(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_ready_line_gives_the_address():
    proc = _start("print('ready 10.0.0.2:5000', flush=True); import time; time.sleep(5)")
    try:
        assert wait_ready(proc, "server") == "10.0.0.2:5000"
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_ends_first_is_named_with_its_error():
    """Its stdout closes before it exits (here 0.5 s later): the error must still be read,
    not "no ready line in time" (a plugin's parser refusing --cc read so)."""
    proc = _start("import os, sys, time\n"
                  "print('usage: x\\nx server: error: unrecognized arguments: --cc bbr', file=sys.stderr, flush=True)\n"
                  "os.close(1); time.sleep(0.5); sys.exit(2)")
    with pytest.raises(SetupError, match="server did not start: x server: error: unrecognized arguments: --cc bbr"):
        wait_ready(proc, "server")


def test_a_silent_process_times_out():
    proc = _start("import time; time.sleep(5)")
    try:
        with pytest.raises(SetupError, match="no ready line in time"):
            wait_ready(proc, "server", timeout=0.3)
    finally:
        proc.kill()
        proc.wait()
