"""Wireshark's bytes_in_flight (SenderTracker *wireshark* series) on a crafted capture with known
answers, each checked against tshark's tcp.analysis.bytes_in_flight when tshark is installed.

The capture contains the cases where Wireshark's value is not SND.MAX - SND.UNA - SACKed: a
spurious retransmission after an ACK that covered everything sent (Wireshark's segment list
restarted empty), a value of 0 (no field), a capture gap (no field until the next ACK), more than
3 SACK blocks (only 3 stored) and a FIN (one less)."""
import shutil
import subprocess

import pytest

pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, Ether, Raw, wrpcap  # noqa: E402

from analysis import flows, pcap, tcp  # noqa: E402

ISN_A, ISN_B = 2**32 - 300, 7000     # the sender's sequence numbers wrap


class Trace:
    """Packets without timestamps (room for 4 SACK blocks), 1 ms apart in file order."""

    def __init__(self):
        self.pkts = []

    def _add(self, p):
        p.time = 1000 + len(self.pkts) / 1000
        self.pkts.append(p)

    def a(self, rel, n=0, flags="A"):
        p = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(
            src="10.0.0.1", dst="10.0.0.2") / TCP(
            sport=1000, dport=80, flags=flags, seq=(ISN_A + rel) % 2**32,
            ack=ISN_B + 1 if "A" in flags else 0, window=1000,
            options=[("SAckOK", b"")] if "S" in flags else [])
        self._add(p / Raw(b"d" * n) if n else p)

    def b(self, ack_rel, sacks=(), flags="A"):
        opts = [("SAckOK", b"")] if "S" in flags else []
        if sacks:
            opts = [("SAck", tuple((ISN_A + x) % 2**32 for blk in sacks for x in blk))]
        self._add(Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01") / IP(
            src="10.0.0.2", dst="10.0.0.1") / TCP(
            sport=80, dport=1000, flags=flags, seq=ISN_B if "S" in flags else ISN_B + 1,
            ack=(ISN_A + ack_rel) % 2**32, window=1000, options=opts))


def build():
    """Returns the trace and {frame number: expected bytes_in_flight or None (no field)}."""
    tr, want = Trace(), {}

    def data(rel, n, expect, flags="A"):
        tr.a(rel, n, flags)
        want[len(tr.pkts)] = expect

    tr.a(0, flags="S")
    tr.b(1, flags="SA")
    tr.a(1)
    for k in range(5):                              # s1..s5 = [1,101) .. [401,501); s2 lost
        data(1 + 100 * k, 100, 100 * (k + 1))
    for r in (301, 401, 501):
        tr.b(101, [(201, r)])
    data(1, 100, 200)        # s1 again: list [1,501) - SACKed 300
    tr.b(101, [(1, 101), (201, 501)])               # D-SACK for s1, deletes it from the list
    data(101, 100, None)     # fast retransmission of s2: 400 - 100 (D-SACK) - 300 = 0: no field
    tr.b(501)                                        # everything ACKed: the list is empty
    data(201, 100, 100)      # spurious retransmission of s3: only itself (SND.MAX - seq = 300)
    data(301, 100, 200)      # and of s4: [201,401)
    data(501, 100, 400)      # new data s6: [201,601)
    tr.b(601)
    data(701, 100, None)     # [601,701) not captured: gap, no field ...
    data(801, 100, None)     # ... until the next ACK
    tr.b(601, [(701, 901)])
    data(601, 100, 100)      # [601,901) - 200
    for r in (1001, 1101, 1201, 1301):
        data(r - 100, 100, r - 601 - 200)
    # 4 SACK blocks: Wireshark stores the first 3 only
    tr.b(601, [(701, 901), (1001, 1101), (1201, 1301), (901, 1001)])
    data(1301, 100, 800 - 200 - 100 - 100)
    data(1401, 100, 901 - 400 - 1, flags="FA")      # with FIN: [601,1502) - 400, minus one
    tr.b(1502, flags="FA")
    tr.a(1502)
    return tr, want


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    tr, want = build()
    path = tmp_path_factory.mktemp("bif") / "bif.pcap"
    wrpcap(str(path), tr.pkts)
    pk = pcap.read(path)
    (flow,) = flows.split(pk)
    return path, tcp.analyze_direction(pk, flow, True), want


def test_known_values(crafted):
    _, d, want = crafted
    tr = d.tracker
    got = {p + 1: tr.series_wireshark[i] if tr.series_wireshark_shown[i] else None
           for i, p in d.data_events}
    assert got == want


@pytest.mark.skipif(not shutil.which("tshark"), reason="needs tshark")
def test_matches_tshark(crafted):
    path, d, want = crafted
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number",
                          "-e", "tcp.analysis.bytes_in_flight"],
                         capture_output=True, text=True, check=True).stdout
    theirs = {int(n): int(v) if v else None for n, v in (ln.split("\t") for ln in out.splitlines())}
    assert {n: theirs[n] for n in want} == want
    # no field on any other frame (SYN, pure ACKs, the payload-less ACK after the FIN)
    assert all(v is None for n, v in theirs.items() if n not in want)


def test_segment_cap():
    """Wireshark lists at most 10000 unacknowledged transmissions; later ones are not added."""
    from analysis.tcpsender import WS_MAX_SEGMENTS, SenderTracker
    tr = SenderTracker(smss=10)
    tr.segment(0, 0, 1, syn=True)
    tr.ack(1, 1, win=1000)
    for k in range(WS_MAX_SEGMENTS + 2):
        tr.segment(2 + k, 1 + 10 * k, 11 + 10 * k)
    assert tr.series_wireshark[-3] == 10 * WS_MAX_SEGMENTS
    assert tr.series_wireshark[-1] == 10 * WS_MAX_SEGMENTS
    assert tr.series_outstanding[-1] == 10 * (WS_MAX_SEGMENTS + 2)
