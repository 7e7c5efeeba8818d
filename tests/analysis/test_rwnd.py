"""Receiver-window events (analysis.rwnd) on crafted captures with known answers: zero windows,
a zero-window probe, window-full segments and window updates, with and without the handshake
(window scale signalled, unknown), checked against tshark's tcp.analysis.* when it is there."""
import json
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, Ether, Raw, wrpcap  # noqa: E402

from analysis import flows, pcap, report, rwnd, tcp  # noqa: E402
from testbed.cli.analyze import _table  # noqa: E402

ISN_A = 2**32 - 150         # the sender's sequence numbers wrap during the transfer
ISN_B = 7000
SHIFT = 2                   # the receiver's window scale: a raw window of 75 is 300 bytes


class Trace:
    def __init__(self):
        self.pkts = []

    def _add(self, p, t_ms):
        p = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / p
        p.time = 1000 + t_ms / 1000
        self.pkts.append(p)

    def a(self, t_ms, rel, n=0, flags="A", ack_rel=1):
        """From the data sender (client), ``n`` payload bytes at relative sequence ``rel``."""
        opts = [("WScale", 7)] if "S" in flags else []
        p = IP(src="10.0.0.1", dst="10.0.0.2") / TCP(
            sport=1000, dport=80, flags=flags, seq=(ISN_A + rel) % 2**32,
            ack=ISN_B + ack_rel if "A" in flags else 0, window=512, options=opts)
        self._add(p / Raw(b"d" * n) if n else p, t_ms)

    def b(self, t_ms, ack_rel, window=75, flags="A"):
        """From the receiver (server): ACK ``ack_rel``, raw window field ``window``."""
        opts = [("WScale", SHIFT)] if "S" in flags else []
        p = IP(src="10.0.0.2", dst="10.0.0.1") / TCP(
            sport=80, dport=1000, flags=flags, seq=ISN_B + (0 if "S" in flags else 1),
            ack=(ISN_A + ack_rel) % 2**32, window=window, options=opts)
        self._add(p, t_ms)


def scenario(path, handshake=True):
    """Frames (1-based) of each event, as Wireshark flags them."""
    tr = Trace()
    if handshake:
        tr.a(0, 0, flags="S")
        tr.b(10, 1, window=300, flags="SA")     # SYN/ACK: its window is never scaled
        tr.a(10.1, 1)
    else:                                       # mid-stream: the scale is unknown
        tr.a(9, 1)
        tr.b(10, 1, window=75)
    for k in range(3):                          # 1..301: the third reaches ack 1 + 75 << 2
        tr.a(20 + k, 1 + 100 * k, 100)
    tr.b(30, 301, window=0)                     # zero window
    tr.a(200, 301, 1)                           # zero-window probe: 1 byte at nextseq
    tr.b(201, 301, window=0)                    # zero window (the probe's answer)
    tr.b(400, 301, window=50)                   # window update: 200 bytes
    tr.a(401, 301, 100)
    tr.a(402, 401, 100)                         # window full: 401 + 100 = 301 + 50 << 2
    tr.b(410, 501, window=75)
    tr.a(411, 501, 100, flags="FA")             # a FIN is never window-full
    tr.b(420, 602, flags="FA")
    wrpcap(str(path), tr.pkts)
    first = 3 if handshake else 2
    return {"zero_window": [first + 4, first + 6], "zero_window_probe": [first + 5],
            "window_full": [first + 3, first + 9] if handshake else [],
            "window_update": [first + 7]}


def _events(path):
    pk = pcap.read(path)
    (flow,) = flows.split(pk)
    d = tcp.analyze_direction(pk, flow, True)
    ev = d.window_events
    return d, {k: (flow.index[getattr(ev, k)] + 1).tolist() for k in rwnd.KINDS}


def test_events_with_handshake(tmp_path):
    want = scenario(tmp_path / "w.pcap")
    d, got = _events(tmp_path / "w.pcap")
    assert got == want
    s = d.summary()["receiver_window"]
    assert (s["scale"], s["scaling"]) == (SHIFT, "signalled")
    assert {k: s[k]["count"] for k in rwnd.KINDS} == {
        "zero_window": 2, "zero_window_probe": 1, "window_full": 2, "window_update": 1}
    assert s["zero_window"]["t"] == [0.03, 0.201] and not s["zero_window"]["truncated"]
    assert s["window_full"]["t"] == [0.022, 0.402]


def test_events_without_handshake(tmp_path):
    """No SYN in the capture: the scale is unknown, no segment is judged window-full (as
    Wireshark), zero windows and updates are still seen."""
    want = scenario(tmp_path / "m.pcap", handshake=False)
    d, got = _events(tmp_path / "m.pcap")
    assert got == want
    s = d.summary()["receiver_window"]
    assert (s["scale"], s["scaling"]) == (None, "unknown")
    assert s["window_full"]["count"] is None and s["zero_window"]["count"] == 2


def test_scale_not_used_when_a_syn_lacks_it():
    """A SYN without the option: neither side scales (Wireshark's verify_tcp_window_scaling);
    the window of the receiver's SYN/ACK is never scaled."""
    fwd = np.array([True, False, True, True, False, True])
    A = pcap.ACK
    flags = np.array([pcap.SYN, pcap.SYN | A, A, A, A, A], np.uint8)
    seq = np.array([0, 500, 1, 1, 501, 101], np.uint32)
    ack = np.array([0, 1, 501, 501, 101, 501], np.uint32)
    win = np.array([100, 100, 100, 100, 100, 100], np.uint16)
    plen = np.array([0, 0, 0, 100, 0, 100])
    for ws, want in (([-1, 3, -1, -1, -1, -1], (0, "not used", [3, 5])),     # 101 + 100
                     ([5, 3, -1, -1, -1, -1], (3, "signalled", [3]))):       # 101 + 800
        ev = rwnd.events(fwd, flags, plen, seq, seq.astype(np.int64), ack, win, np.array(ws, np.int8))
        assert (ev.scale, ev.scaling, ev.window_full.tolist()) == want



def test_the_senders_sequence_numbers_are_the_ones_given_unwrapped():
    """``events`` takes the sender's sequence numbers as ``analysis.tcp`` unwrapped them (from any
    reference) instead of unwrapping them again; only the receiver's are unwrapped here."""
    fwd = np.array([True, False, True, False, True])
    A = pcap.ACK
    flags = np.array([pcap.SYN, pcap.SYN | A, A, A, A], np.uint8)
    seq = np.array([2**32 - 1, 500, 0, 501, 0], np.uint32)     # the SYN's seq wraps
    ack = np.array([0, 0, 501, 0, 501], np.uint32)
    win = np.array([100, 100, 100, 0, 100], np.uint16)
    plen = np.array([0, 0, 0, 0, 1])
    ws = np.full(5, -1, np.int8)
    unwrapped = np.array([-1, 0, 0, 0, 0], np.int64)           # tcp's: from the SYN's seq + 1
    ev = rwnd.events(fwd, flags, plen, seq, unwrapped + 10**6, ack, win, ws)   # any reference
    assert ev.zero_window.tolist() == [3] and ev.zero_window_probe.tolist() == [4]
    moved = unwrapped + np.array([0, 0, 0, 0, 5])               # the probe 5 bytes past nextseq
    assert rwnd.events(fwd, flags, plen, seq, moved, ack, win, ws).zero_window_probe.tolist() == []


def test_report_and_table(tmp_path):
    scenario(tmp_path / "w.pcap")
    res = report.analyze_file(tmp_path / "w.pcap")
    (f,) = res["flows"]
    assert f["receiver_window"] == f["directions"]["c2s"]["receiver_window"]
    assert json.loads(json.dumps(f["receiver_window"]))["window_full"]["count"] == 2
    assert ("  c2s receiver window (scale 2): 2 zero-window, 1 zero-window probe, 2 window-full, "
            "1 window update; first zero-window 0.030 s, window-full 0.022 s") in _table(res)
    scenario(tmp_path / "m.pcap", handshake=False)
    assert ("  c2s receiver window (scale unknown: no handshake captured): 2 zero-window, "
            "1 zero-window probe, window-full unknown, 1 window update; first zero-window "
            "0.021 s") in _table(report.analyze_file(tmp_path / "m.pcap"))


@pytest.mark.skipif(not shutil.which("tshark"), reason="needs tshark")
@pytest.mark.parametrize("handshake", [True, False])
def test_scenario_matches_tshark(tmp_path, handshake):
    want = scenario(tmp_path / "w.pcap", handshake)
    out = subprocess.run(["tshark", "-r", str(tmp_path / "w.pcap"), "-T", "fields", "-e",
                          "frame.number"] + [x for k in rwnd.KINDS for x in ("-e", f"tcp.analysis.{k}")],
                         capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    theirs = {k: [int(r[0]) for r in rows if r[1 + i]] for i, k in enumerate(rwnd.KINDS)}
    assert theirs == want
