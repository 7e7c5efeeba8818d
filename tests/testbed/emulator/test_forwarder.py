"""The emulator's I/O side: config, frame log, and real traffic through the forwarder process."""
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

from conftest import received_ip_ids
from testbed.emulator import linklog
from testbed.emulator.config import DirectionConfig, ForwarderConfig
from testbed.spec.linkspec import DropList, LinkSpec


# --- config ----------------------------------------------------------------------------------
def test_config_round_trip(tmp_path):
    spec = LinkSpec.parse(rate="20mbit", delay="10ms", loss="ge:1%,30%")
    cfg = ForwarderConfig((DirectionConfig("a-b", "tbe0a", "tbe0b", spec, 7, "air"),
                           DirectionConfig("b-a", "tbe0b", "tbe0a",
                                           LinkSpec(loss=DropList(frozenset({3}))), 8, "air")),
                          str(tmp_path), media={"air": {"name": "air"}})
    cfg.write(tmp_path / "c.json")
    back = ForwarderConfig.read(tmp_path / "c.json")
    assert back == cfg
    assert back.interfaces == ["tbe0a", "tbe0b"]


@pytest.mark.parametrize("change, message", [
    (dict(in_ifname="x" * 16), "1 to 15"),
    (dict(out_ifname="tbe0a"), "both"),
    (dict(medium="nope"), "not in media"),
])
def test_config_rejects(tmp_path, change, message):
    d = dict(name="a-b", in_ifname="tbe0a", out_ifname="tbe0b", spec=LinkSpec(), seed=1)
    d.update(change)
    with pytest.raises(ValueError, match=message):
        ForwarderConfig((DirectionConfig(**d),), str(tmp_path))


def test_config_rejects_two_readers_of_one_interface(tmp_path):
    d = [DirectionConfig(n, "tbe0a", o, LinkSpec(), 1) for n, o in (("x", "tbe0b"), ("y", "tbe1b"))]
    with pytest.raises(ValueError, match="only one direction"):
        ForwarderConfig(tuple(d), str(tmp_path))


# --- frame log -------------------------------------------------------------------------------
def _frames():
    from scapy.all import ARP, IP, TCP, UDP, Ether, raw
    return {
        "tcp": raw(Ether() / IP(src="10.0.0.2", dst="10.0.0.1", id=4242)
                   / TCP(sport=5201, dport=40000, seq=123456789)),
        "udp": raw(Ether() / IP(src="10.0.0.1", dst="10.0.0.2", id=7) / UDP(sport=1, dport=5600)
                   / (b"x" * 100)),
        "frag": raw(Ether() / IP(src="10.0.0.1", dst="10.0.0.2", id=9, frag=185, proto=17) / (b"y" * 40)),
        "arp": raw(Ether() / ARP()),
    }


@pytest.mark.parametrize("debugfs,cmdline,config,expected", [
    ("none (voluntary) full lazy", "preempt=full", "CONFIG_PREEMPT_NONE=y", ("voluntary", "debugfs")),
    (None, "quiet preempt=full", "CONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y", ("full", "cmdline")),
    (None, "quiet", "CONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y", ("none", "config")),
    (None, "", "# CONFIG_PREEMPT_NONE is not set\nCONFIG_PREEMPT=y", ("full", "config")),
    (None, "", "CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT_LAZY=y", ("rt", "config")),
    (None, "preempt=bogus", None, (None, "unknown")),
])
def test_preemption_mode_sources_in_order(debugfs, cmdline, config, expected):
    from testbed.emulator.forwarder import preemption_mode
    assert preemption_mode(debugfs, cmdline, config) == expected


def test_parse_key_fields():
    f = _frames()
    assert linklog.parse_key(f["tcp"]) == (0x0A000002, 0x0A000001, 123456789, 0x0800, 4242, 5201, 40000, 6)
    assert linklog.parse_key(f["udp"]) == (0x0A000001, 0x0A000002, 0, 0x0800, 7, 1, 5600, 17)
    # a non-first fragment has no ports: its payload must not be read as a UDP header
    assert linklog.parse_key(f["frag"]) == (0x0A000001, 0x0A000002, 0, 0x0800, 9, 0, 0, 17)
    assert linklog.parse_key(f["arp"])[3] == 0x0806
    assert linklog.parse_key(b"\x00" * 10) == (0,) * 8


def test_log_round_trip_and_summary(tmp_path):
    path = tmp_path / "d.frames"
    w = linklog.LogWriter(path, {"direction": "d"}, chunk=2)
    key = linklog.parse_key(_frames()["tcp"])
    w.buf.append(linklog.RECORD.pack(1000, 1500, 5000, 5100, *key, 54, linklog.DELIVERED))
    w.buf.append(linklog.RECORD.pack(2000, 2100, 3000, 0, *key, 54, linklog.LOSS))
    w.buf.append(linklog.RECORD.pack(3000, 3050, 9000, 9400, *key, 54, linklog.DELIVERED))
    w.buf.append(linklog.RECORD.pack(4000, 4000, 4000, 0, *key, 54, linklog.QUEUE))
    w.close()
    with open(path, "ab") as f:  # a record cut short by a crash is ignored
        f.write(b"\x01" * 10)
    header, rec = linklog.read_log(path)
    assert header["direction"] == "d" and header["clock"] == "CLOCK_MONOTONIC_ns"
    assert len(rec) == 4 and rec.dtype.itemsize == linklog.RECORD.size
    assert list(rec["ip_id"]) == [4242] * 4 and rec["seq"][0] == 123456789
    s = linklog.summarize(rec, late_ns=200)
    assert (s["frames_in"], s["delivered"], s["dropped_loss"], s["dropped_queue"]) == (4, 2, 1, 1)
    assert s["sched_error_us"]["max"] == 0.4 and s["late"] == 1  # errors 100 and 400 ns
    assert s["read_lag_us"]["max"] == 0.5


def test_read_log_rejects_other_files(tmp_path):
    (tmp_path / "x").write_bytes(b"hello")
    with pytest.raises(ValueError, match="not an emulator frame log"):
        linklog.read_log(tmp_path / "x")


# --- real traffic (root) ------------------------------------------------------------------------
SCALED = {"rate_up": "20mbit", "rate_down": "20mbit", "delay": "20ms", "loss_down": "5%"}


def _probe(*args):
    return [sys.executable, "-m", "testbed.calibrate.probe", *map(str, args)]


def _links():
    return set(subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.split("\n"))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _flow(rec, dport):
    return rec[rec["dport"] == dport]


@pytest.mark.root
@pytest.mark.slow
def test_tcp_through_emulator_log_joins_capture(results_root):
    """Linux TCP over the scaled-down long-haul path; every frame the client captured is in the
    emulator's log as delivered, joined on (IP id, TCP seq), and the log accounts for every frame."""
    from scapy.all import IP, TCP, PcapReader
    from testbed.run.network import Testbed
    links_before = _links()
    with Testbed("longhaul", backend="userspace", overrides=SCALED, results_root=results_root) as tb:
        emu_pid, emu_shell = tb.backend.proc.pid, tb.backend.emu.pid
        pcap = tb.dir / "client.pcap"
        cap = tb.popen("client", ["tcpdump", "-i", "client-eth0", "-w", str(pcap), "-U",
                                  "--immediate-mode", "tcp"], name="tcpdump")
        time.sleep(1.0)
        tb.popen("server", ["iperf3", "-s", "-1"], name="iperf3-server")
        time.sleep(0.5)
        r = tb.run("client", ["iperf3", "-c", tb.ip("server"), "-R", "-n", "2M", "-J"], timeout=60)
        assert r.returncode == 0, r.stderr
        goodput = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
        time.sleep(0.3)
        t_stop = time.monotonic_ns()
        os.killpg(cap.pid, signal.SIGINT)
        _, err = cap.communicate(timeout=10)
        stats = dict(reversed(line.split(" ", 1)) for line in err.decode().splitlines()[1:])
        assert stats["packets dropped by kernel"] == "0"
        assert stats["packets captured"] == stats["packets received by filter"]
    summary = tb.metadata["backend_summary"]
    assert 0 < goodput < 20e6
    assert summary["accounted"] and summary["unintended_drops"] == 0
    assert summary["exit_code"] == 0
    down = summary["directions"]["server-client"]
    assert down["dropped_loss"] > 0  # 5% of ~1500 data frames
    _, rec = linklog.read_log(down["log"])
    assert len(rec) == down["frames_in"] == down["model"]["frames_in"]
    data = rec[(rec["sport"] == 5201) & (rec["proto"] == 6)]
    delivered = data[data["verdict"] == linklog.DELIVERED]
    captured = [(p[IP].id, p[TCP].seq) for p in PcapReader(str(pcap))
                if IP in p and TCP in p and p[TCP].sport == 5201]
    assert len(captured) > 1000
    # every captured frame was logged as delivered, and every frame delivered while tcpdump
    # ran was captured (the iperf3 control connection may still close after the capture)
    keys = lambda r: Counter(zip(r["ip_id"].tolist(), r["seq"].tolist()))  # noqa: E731
    assert Counter(captured) <= keys(delivered)
    assert keys(delivered[delivered["t_sent"] < t_stop]) <= Counter(captured)
    # scheduled at least the 20 ms delay after arrival, and never sent before its time
    assert (delivered["t_sched"] - delivered["t_arrival"] >= 20_000_000).all()
    assert (delivered["t_sent"] >= delivered["t_sched"]).all()
    # cleanup: no veth, forwarder or emulator namespace left
    assert not _alive(emu_pid) and not _alive(emu_shell)
    assert _links() == links_before


@pytest.mark.root
@pytest.mark.slow
def test_every_frame_is_accounted_for_even_under_overload(results_root):
    """Stop the forwarder while a train overflows its socket buffer: the drops must show up as
    unintended (PACKET_STATISTICS), and sent = read + counted drops, delivered = received."""
    from testbed.run.network import Testbed
    count = 40000
    with Testbed("longhaul", backend="userspace", overrides={**SCALED, "rate_down": "unshaped"},
                 results_root=results_root) as tb:
        fwd = tb.backend.proc.pid
        rx = tb.popen("client", _probe("recv", "--port", 5600, "--idle", 2, "--timeout", 60),
                      name="recv", text=True)
        assert rx.stdout.readline().startswith("ready")
        os.kill(fwd, signal.SIGSTOP)
        try:
            sent = json.loads(tb.run("server", _probe("send", "--dst", tb.ip("client"), "--port", 5600,
                                                      "--count", count, "--rate", 2e9, "--size", 1472),
                                     timeout=60, check=True).stdout)
        finally:
            os.kill(fwd, signal.SIGCONT)
        got = json.loads(rx.communicate(timeout=60)[0].strip().splitlines()[-1])["streams"]["0"]
    summary = tb.metadata["backend_summary"]
    down = summary["directions"]["server-client"]
    _, rec = linklog.read_log(down["log"])
    flow = _flow(rec, 5600)
    assert sent["sent"] == count
    assert down["socket_drops"] > 0, "the overload did not overflow the socket buffer"
    assert summary["unintended_drops"] >= down["socket_drops"]
    assert len(flow) + down["socket_drops"] == count  # no frame lost without being counted
    delivered = int((flow["verdict"] == linklog.DELIVERED).sum())
    assert got["received"] == delivered
    assert delivered + int((flow["verdict"] == linklog.LOSS).sum()) == len(flow)


@pytest.mark.root
@pytest.mark.slow
def test_shared_medium_and_plain_links(results_root):
    """A topology-less check of the link class: an unimpaired link stays a plain veth, links with
    the same AirtimeSpec share one medium, and the emulator's summary reports it."""
    from mininet.net import Mininet
    from mininet.node import Host
    from testbed.backends.userspace import UserspaceBackend
    from testbed.emulator.airtime import AirtimeSpec
    from testbed.host.namespace import configure_host
    from testbed.host.lifecycle import Run
    links_before = _links()
    air = AirtimeSpec(name="wlan")
    backend = UserspaceBackend(seed=5)
    with Run(results_root) as run:
        net = Mininet(controller=None, host=Host, link=backend.link_class(), build=False)
        try:
            h1, h2, h3 = (net.addHost(f"h{i}", ip=ip) for i, ip in
                          ((1, "10.0.0.1/24"), (2, "10.0.0.2/24"), (3, "10.0.1.3/24")))
            net.addLink(h1, h2, spec_ab=LinkSpec(), spec_ba=LinkSpec(), medium=air)
            net.addLink(h1, h3, params1={"ip": "10.0.1.1/24"})
            net.build()
            for h in (h1, h2, h3):
                configure_host(h, {})
            backend.setup(net, run)
            assert [lk.emulated for lk in net.links] == [True, False]
            assert "1 received" in h1.cmd("ping -c 1 -W 2 10.0.0.2")
            assert "1 received" in h1.cmd("ping -c 1 -W 2 10.0.1.3")
        finally:
            backend.teardown()
            net.stop()
    s = backend.summary()
    assert s["emulated_links"] == 1 and s["unintended_drops"] == 0
    assert s["media"]["wlan"]["exchanges"] >= 2
    assert set(s["seeds"].values()) == {5, 6}
    assert _links() == links_before


# --- the loop's per-direction logic, on datagram socket pairs (no root) --------------------------
def _direction(tmp_path, spec):
    import socket
    from testbed.emulator.direction import DirectionModel
    from testbed.emulator.forwarder import Direction
    a_in, b_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a_out, b_out = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (b_in, b_out):
        s.setblocking(False)
    cfg = DirectionConfig("a-b", "tbe0a", "tbe0b", spec, seed=3)
    d = Direction(cfg, DirectionModel(spec, seed=3), b_in, a_out,
                  linklog.LogWriter(tmp_path / "a-b.frames", {"direction": "a-b"}))
    return d, a_in, b_out


@pytest.mark.parametrize("reorder", [False, True])
def test_direction_sends_in_schedule_order_and_logs_every_frame(tmp_path, reorder):
    from scapy.all import IP, UDP, Ether, raw
    spec = LinkSpec.parse(delay="1ms", jitter="5ms", reorder=reorder, loss=DropList(frozenset({2})))
    d, feed, sink = _direction(tmp_path, spec)
    frames = [raw(Ether() / IP(id=i) / UDP(sport=1, dport=2)) for i in range(50)]
    for f in frames:
        feed.send(f)
    d.drain(None)
    assert d.send_due(0) is not None  # nothing due yet: 1 ms delay at least
    d.send_due(time.monotonic_ns() + 10**9)
    d.log.close()
    out = received_ip_ids(sink)
    _, rec = linklog.read_log(d.log.path)
    assert len(rec) == 50 and int((rec["verdict"] == linklog.LOSS).sum()) == 1
    sent = rec[rec["verdict"] == linklog.DELIVERED]
    assert list(sent["ip_id"]) == out and 2 not in out
    assert (np.diff(sent["t_sched"]) >= 0).all()  # departures in scheduled order
    assert (out != sorted(out)) == reorder  # 5 ms of jitter reorders 1 µs-spaced frames


def test_cpu_interrupts_reads_one_cpus_column_by_row():
    from testbed.emulator.forwarder import cpu_interrupts, interrupts_during
    text = ("           CPU0       CPU1       \n"
            " 36:          0      72168  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n"
            " 24:          5          0  IO-APIC   5-edge      ACPI:Ged\n"
            "LOC:     100200     300400   Local timer interrupts\n"
            "CAL:         17         29   Function call interrupts\n"
            "ERR:          0\n")
    assert cpu_interrupts(1, text) == {"36 virtio1-req.0": 72168, "24 ACPI:Ged": 0, "LOC": 300400,
                                       "CAL": 29}
    assert cpu_interrupts(0, text)["LOC"] == 100200
    assert cpu_interrupts(5, text) == {}  # not a CPU of this file (offline)
    after = {"36 virtio1-req.0": 72200, "24 ACPI:Ged": 0, "LOC": 300400, "CAL": 31}
    assert interrupts_during(cpu_interrupts(1, text), after) == {"36 virtio1-req.0": 32, "CAL": 2}
