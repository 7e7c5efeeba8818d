import logging
import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTBED = [sys.executable, "-m", "testbed"]


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        skip_without_netem(items)
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, Mininet, or the default "
                                   "congestion control cubic, which unprivileged sockets may not set)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


def skip_without_netem(items) -> None:
    """Tests marked ``netem`` need the kernel's netem and htb; where this kernel lacks them,
    tests/testbed/backends/test_vm.py runs them inside the VM."""
    netem_items = [item for item in items if item.get_closest_marker("netem")]
    if not netem_items:
        return
    from testbed.backends.kernel import probe_qdiscs
    probe = probe_qdiscs()
    missing = [q for q in ("netem", "htb") if not probe[q]]
    if missing:
        skip = pytest.mark.skip(reason=f"this kernel has no {' and no '.join(missing)} qdisc: "
                                       "test_vm.py runs these tests inside the VM")
        for item in netem_items:
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


@pytest.fixture
def restore_logging():
    """The root logger's handlers and level, and the logger class, as they were: ``testbed.cli.main``
    sets up logging for the command it runs."""
    root = logging.getLogger()
    handlers, level, cls = root.handlers[:], root.level, logging.getLoggerClass()
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.setLoggerClass(cls)


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
