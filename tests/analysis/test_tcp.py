"""TCP sender analysis on crafted captures with known answers (scapy writes them)."""
import numpy as np
import pytest

pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, Ether, Raw, wrpcap  # noqa: E402

from analysis import flows, handshake, pcap, tcp  # noqa: E402
from analysis.tcpsender import SenderTracker  # noqa: E402

ISN_A = 2**32 - 50          # the sender's sequence numbers wrap during the transfer
ISN_B = 7000
MS = 1_000_000


def eth():
    """Explicit MACs: scapy would otherwise resolve them (ARP, 1 s timeout)."""
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


class Trace:
    def __init__(self):
        self.pkts = []

    def a(self, t_ms, rel, n=0, flags="A", tsval=None, tsecr=0):
        opts = [("Timestamp", (tsval if tsval is not None else int(t_ms), tsecr))]
        p = eth() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(
            sport=1000, dport=80, flags=flags, seq=(ISN_A + rel) % 2**32,
            ack=ISN_B + 1 if "A" in flags else 0, window=1000, options=opts)
        self._add(p / Raw(b"d" * n) if n else p, t_ms)

    def b(self, t_ms, ack_rel, sacks=(), flags="A", tsecr=0, window=1000, seq_rel=1):
        opts = [("Timestamp", (int(t_ms), tsecr))]
        if sacks:
            opts += [("NOP", None), ("NOP", None),
                     ("SAck", tuple((ISN_A + x) % 2**32 for blk in sacks for x in blk))]
        p = eth() / IP(src="10.0.0.2", dst="10.0.0.1") / TCP(
            sport=80, dport=1000, flags=flags, seq=ISN_B + seq_rel - 1 if "S" not in flags else ISN_B,
            ack=(ISN_A + ack_rel) % 2**32, window=window, options=opts)
        self._add(p, t_ms)

    def _add(self, p, t_ms):
        p.time = 1000 + t_ms / 1000
        self.pkts.append(p)

    def write(self, path):
        wrpcap(str(path), self.pkts)
        return path


@pytest.fixture
def scenario(tmp_path):
    """Fast retransmit (s2 lost, 3 SACK dupacks), RTO retransmission that a D-SACK shows was
    spurious, and a tail loss probe."""
    tr = Trace()
    tr.a(0, 0, flags="S")
    tr.b(10, 1, flags="SA", tsecr=0)
    tr.a(10.1, 1, tsecr=10)
    for k in range(5):                       # s1..s5 = [1,101) .. [401,501)
        tr.a(20 + 0.1 * k, 1 + 100 * k, 100, tsval=20)
    tr.b(30, 101, tsecr=20)                 # s1 acked (s2 lost)
    tr.b(31, 101, [(201, 301)], tsecr=20)
    tr.b(32, 101, [(201, 401)], tsecr=20)
    tr.b(33, 101, [(201, 501)], tsecr=20)
    tr.a(33.1, 101, 100, tsval=33)          # fast retransmission of s2
    tr.b(43, 501, tsecr=33)
    tr.a(50, 501, 100, tsval=50)            # s6
    tr.a(50.1, 601, 100, tsval=50)          # s7
    tr.a(300, 501, 100, tsval=300)          # RTO retransmission of s6 ...
    tr.b(301, 701, [(501, 601)], tsecr=300)  # ... the D-SACK says it arrived twice
    tr.a(310, 701, 100, tsval=310)          # s8
    tr.a(310.1, 801, 100, tsval=310)        # s9
    tr.a(330, 801, 100, tsval=330)          # tail loss probe: s9 again, no dupack
    tr.b(340, 901, tsecr=330)
    f = tr.write(tmp_path / "s.pcap")
    pk = pcap.read(f)
    (flow,) = flows.split(pk)
    return pk, flow


def test_retransmission_kinds_and_dsack(scenario):
    pk, flow = scenario
    d = tcp.analyze_direction(pk, flow, True)
    r = d.tracker.retransmissions
    assert [x.kind for x in r] == ["fast", "rto", "probe"]
    assert [x.spurious for x in r] == [False, True, False]
    assert [(x.seq, x.end) for x in r] == [(101, 201), (501, 601), (801, 901)]
    s = d.summary()["retransmissions"]
    assert (s["total"], s["fast"], s["rto"], s["probe"], s["spurious_dsack"]) == (3, 1, 1, 1, 1)
    assert s["dupacks"] == 3
    assert s["bytes"] == 300                  # three 100-byte segments sent again


def test_outstanding_and_pipe(scenario):
    pk, flow = scenario
    d = tcp.analyze_direction(pk, flow, True)
    tr = d.tracker
    at = {t: (o, p) for t, o, p in zip(tr.series_t, tr.series_outstanding, tr.series_pipe)}
    t = lambda ms: int(round((1000 + ms / 1000) * 1e9))  # noqa: E731
    assert at[t(0)] == (0, 0)                 # the SYN is not payload
    assert at[t(20.4)] == (500, 500)
    assert at[t(30)] == (400, 400)
    # 2 SACKed segments / 200 B above s2: not yet lost (needs 3 segments or > 2*SMSS bytes)
    assert at[t(32)] == (400, 200)
    # 3 SACKed segments above s2: s2 is lost, nothing else outstanding un-SACKed
    assert at[t(33)] == (400, 0)
    # after its retransmission s2 counts again (RFC 6675: retransmitted octets)
    assert at[t(33.1)] == (400, 100)
    assert at[t(43)] == (0, 0)
    assert max(tr.series_outstanding) == 500


def test_rtt_karn_and_timestamps(scenario):
    pk, flow = scenario
    d = tcp.analyze_direction(pk, flow, True)
    karn = [s / MS for _, s in d.tracker.rtt_karn]
    # SYN (10 ms) and s1 (10 ms); the ACKs covering retransmitted data give no sample
    assert karn == pytest.approx([10, 10])
    ts = [s / MS for _, s in d.tracker.rtt_ts]
    # SYN/ACK echoes the SYN's TSval 0; the ACK at 30 echoes 20 (first sent at 20.0); at 43
    # echoes 33 (sent 33.1); at 301: 300 (sent 300); at 340: 330 (the probe)
    assert ts == pytest.approx([10, 10, 9.9, 1, 10])


def test_flights(scenario):
    pk, flow = scenario
    d = tcp.analyze_direction(pk, flow, True, gap_ns=5 * MS)
    assert [f["segments"] for f in d.flights] == [5, 1, 2, 1, 2, 1]
    assert [f["bytes"] for f in d.flights] == [500, 0, 200, 0, 200, 0]


def test_handshake_times(scenario):
    pk, flow = scenario
    ev = handshake.timeline(pk, flow)
    t0 = ev["syn"]
    assert (ev["synack"] - t0, ev["ack"] - t0, ev["initial_rtt"]) == (10 * MS, int(10.1 * MS), int(10.1 * MS))
    assert ev["first_payload_c2s"] - t0 == 20 * MS
    assert ev["last_payload_c2s"] - t0 == 330 * MS


def test_unwrap32():
    v = np.array([2**32 - 10, 2**32 - 1, 5, 100, 2**32 - 5], np.uint32)
    assert list(pcap.unwrap32(v, 2**32 - 10)) == [0, 9, 15, 110, 5]


def test_keepalive_is_not_a_retransmission():
    tr = SenderTracker(smss=100)
    tr.segment(0, 0, 1, syn=True)
    tr.ack(1, 1, win=1000)
    tr.segment(2, 1, 101)
    tr.ack(3, 101, win=1000)
    assert tr.segment(4, 100, 101) is None           # keep-alive: 1 byte at SND.MAX-1
    assert tr.retransmissions == []


def test_dupack_needs_same_window_without_sack():
    tr = SenderTracker(smss=100)
    tr.segment(0, 0, 100)
    tr.segment(1, 100, 200)
    tr.ack(2, 100, win=1000)
    tr.ack(3, 100, win=2000)       # window update, not a duplicate ACK
    tr.ack(4, 100, win=2000)       # duplicate
    assert tr.dupack_count == 1
    assert tr.segment(5, 100, 200).kind == "fast"


def _lost_handshake(tmp_path, at_server: bool):
    """A handshake that lost a packet and waited 1 s, then two flights of 3 segments one RTT
    (10 ms) apart; the capture at the client (its SYN sent again) or at the server (its
    SYN/ACK sent again)."""
    tr = Trace()
    tr.a(0, 0, flags="S")
    if at_server:
        tr.b(0.05, 1, flags="SA", tsecr=0)       # lost after the capture point
        tr.b(1000, 1, flags="SA", tsecr=0)       # its retransmission
        tr.a(1010, 1, tsecr=1000)
    else:
        tr.a(1000, 0, flags="S")                 # the first SYN or its SYN/ACK was lost
        tr.b(1010, 1, flags="SA", tsecr=1000)
        tr.a(1010.1, 1, tsecr=1010)
    for start in (1020, 1030):
        for k in range(3):
            tr.a(start + 0.1 * k, 1 + 100 * (k + 3 * (start == 1030)), 100, tsval=start)
    return tr.write(tmp_path / "lost.pcap")


@pytest.mark.parametrize("at_server", [False, True])
def test_a_lost_handshake_packet_does_not_merge_the_flights(tmp_path, at_server):
    from analysis import report
    path = _lost_handshake(tmp_path, at_server)
    pk = pcap.read(path)
    (flow,) = flows.split(pk)
    ev = handshake.timeline(pk, flow)
    assert ev["initial_rtt"] >= 1000 * MS                   # Wireshark's: the timeout included
    assert ev["handshake_rtt"] == 10 * MS                   # one RTT at either end
    rec = report.analyze_file(path)["flows"][0]
    assert rec["initial_rtt_ms"] >= 1000
    fl = rec["directions"]["c2s"]["flights"]
    assert fl["gap_ms"] == 5 and fl["count"] == 2
