import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTBED = [sys.executable, "-m", "testbed"]


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, Mininet, or the default "
                                   "congestion control cubic, which unprivileged sockets may not set)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def isolated_state(tmp_path, monkeypatch):
    """Runs keep their state files in the test's own directory, and every run is torn down."""
    from testbed.host import lifecycle
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path / "state")
    yield
    assert not list((tmp_path / "state").glob("*.json"))


@pytest.fixture
def results_root(tmp_path):
    return tmp_path / "results"


def received_ip_ids(sock) -> list[int]:
    """IP ids of the Ethernet frames waiting on a non-blocking socket, in arrival order."""
    from scapy.all import IP
    ids = []
    while True:
        try:
            ids.append(IP(sock.recv(2048)[14:]).id)
        except BlockingIOError:
            return ids


def sigint_default() -> None:
    """``preexec_fn`` for a child a test will Ctrl-C: SIGINT at its default, as in a terminal's
    foreground job.  A background job of a non-interactive shell (``make test &`` in a script)
    inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
