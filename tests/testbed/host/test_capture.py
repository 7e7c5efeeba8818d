"""testbed.host.capture: tcpdump lifecycle, counters, clock sidecar."""
import json
import os
import subprocess
import sys
import time

import pytest

from analysis.clock import load_meta
from testbed.host.capture import Capture
from testbed.spec.clock import clock_offset_ns

FAKE = r"""
import signal, sys, time
sys.stderr.write("tcpdump: listening on fake0, link-type EN10MB\n"); sys.stderr.flush()
def stop(*_):
    sys.stderr.write("12 packets captured\n14 packets received by filter\n2 packets dropped by kernel\n")
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
while True:
    time.sleep(0.05)
"""


def fake_popen(script):
    def popen(argv, **kw):
        assert argv[0] == "tcpdump" and "-w" in argv
        return subprocess.Popen([sys.executable, "-c", script], **kw)
    return popen


def test_stop_reads_counters_and_writes_sidecar(tmp_path):
    cap = Capture(tmp_path / "x.pcap", "fake0", popen=fake_popen(FAKE))
    cap.start()
    res = cap.stop()
    assert (res.captured, res.received_by_filter, res.dropped_by_kernel) == (12, 14, 2)
    assert not res.ok and "2 packets dropped by kernel" in res.warnings[0]
    meta = load_meta(tmp_path / "x.pcap")
    assert meta["dropped_by_kernel"] == 2 and meta["interface"] == "fake0"
    assert abs(meta["offset_stop_ns"] - meta["offset_start_ns"]) < 50_000_000


def test_start_reports_tcpdump_failure(tmp_path):
    script = "import sys; sys.stderr.write('tcpdump: fake0: No such device exists\\n'); sys.exit(1)"
    cap = Capture(tmp_path / "x.pcap", "fake0", popen=fake_popen(script))
    with pytest.raises(RuntimeError, match="No such device"):
        cap.start()


def test_argv_and_validation(tmp_path):
    cap = Capture(tmp_path / "x.pcap", "eth0")
    argv = cap.argv()
    assert argv[:3] == ["tcpdump", "-i", "eth0"] and "--time-stamp-precision=nano" in argv
    assert argv[argv.index("-s") + 1] == "192"
    assert Capture(tmp_path / "y", "eth0", full_payload=True).argv()[6] == "0"
    with pytest.raises(ValueError, match="snaplen"):
        Capture(tmp_path / "x.pcap", "eth0", snaplen=20)
    with pytest.raises(ValueError, match="interface"):
        Capture(tmp_path / "x.pcap", "-w")


def test_clock_offset_is_stable():
    a = clock_offset_ns()
    b = clock_offset_ns()
    assert abs(a - b) < 5_000_000
    assert abs(a - (time.time_ns() - time.monotonic_ns())) < 5_000_000


@pytest.mark.root
def test_real_capture_in_namespace(tmp_path):
    from analysis import clock, pcap
    ns = f"tbtestcap{os.getpid() % 10000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        popen = lambda argv, **kw: subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kw)  # noqa: E731
        f = tmp_path / "lo.pcap"
        with Capture(f, "lo", popen=popen, bpf=["udp", "port", "9999"]) as cap:
            t_start = time.monotonic_ns()
            send = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                    "for i in range(50): s.sendto(b'x' * 300, ('127.0.0.1', 9999))")
            subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", send], check=True)
            t_end = time.monotonic_ns()
        res = cap.result
        assert res.exit_code == 0 and res.dropped_by_kernel == 0 and res.captured == 50
        pk = pcap.read(f)
        assert len(pk) == 50 and (pk.payload_len == 300).all() and (pk.caplen <= 192).all()
        mono, info = clock.monotonic(pk.ts_ns, f)
        assert info["clock"] == "monotonic"
        assert t_start <= mono.min() and mono.max() <= t_end
        assert json.loads((tmp_path / "lo.pcap.meta.json").read_text())["captured"] == 50
    finally:
        subprocess.run(["ip", "netns", "del", ns])


class _Intf:
    def __init__(self, name):
        self.name = name


class _Host:
    def __init__(self, names):
        self._intfs = [_Intf(n) for n in names]

    def intfList(self):  # noqa: N802 (Mininet's name)
        return self._intfs


class _FakeTestbed:
    def __init__(self, d):
        self.dir = d
        self.hosts = {"client": _Host(["lo", "client-eth0"]), "server": _Host(["server-eth0"])}
        self.started = []

    def host(self, name):
        return self.hosts[name]

    def popen(self, host, argv, name="process", **kw):
        self.started.append((host, argv[argv.index("-i") + 1], name))
        return subprocess.Popen([sys.executable, "-c", FAKE], **kw)


def test_capture_hosts_every_interface_and_stops_on_error(tmp_path):
    from testbed.host.capture import capture_hosts
    tb = _FakeTestbed(tmp_path)
    with pytest.raises(KeyError):
        with capture_hosts(tb) as caps:
            assert [c.interface for c in caps] == ["client-eth0", "server-eth0"]
            raise KeyError("traffic failed")
    assert [(h, i) for h, i, _ in tb.started] == [("client", "client-eth0"),
                                                  ("server", "server-eth0")]
    assert all(c.result is not None and c.result.captured == 12 for c in caps)
    assert (tmp_path / "pcap" / "server-server-eth0.pcap.meta.json").exists()
