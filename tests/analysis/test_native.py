"""The native fast path (analysis/native, C + numpy) against the Python reference: identical
packet tables, sender series, retransmissions, RTT samples, exchanges and JSON summaries, on
crafted edge cases (SACK renege, sequence wrap-around, D-SACK, zero window, out-of-order
capture timestamps, capture gaps, keep-alives, RST) written as pcap and pcapng with several
link types, and on random traces.  The real lossy captures are compared in
tests/test_analysis_real.py (root) with :func:`assert_engines_agree`."""
import random
import struct

import numpy as np
import pytest

from analysis import flows, handshake, native, pcap, report, tcp

pytestmark = pytest.mark.skipif(native.engine("auto") != "native",
                                reason="analysis/native not built (make -C analysis/native)")

SERIES = ("series_t", "series_outstanding", "series_pipe", "series_sacked", "series_wireshark",
          "series_wireshark_shown", "rtt_karn", "rtt_ts", "data_events", "rtx")


def assert_engines_agree(path) -> int:
    """Both engines give the same result on ``path``, step by step; returns the number of
    series points compared."""
    a, b = pcap.read(path, engine="python"), pcap.read(path, engine="native")
    for name in pcap.ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.damage == b.damage
    points = 0
    for flow in flows.split(a):
        if flow.key.proto != pcap.TCP:
            continue
        assert handshake.exchanges(a, flow, "python") == handshake.exchanges(a, flow, "native")
        for from_client in (True, False):
            dp = tcp.analyze_direction(a, flow, from_client, engine="python")
            dn = tcp.analyze_direction(a, flow, from_client, engine="native")
            for name in SERIES:
                x, y = getattr(dp.tracker, name), getattr(dn.tracker, name)
                assert x.dtype == y.dtype and np.array_equal(x, y), (flow.key.name, name)
            for name in ("retransmissions", "dupack_count", "data_start"):
                assert getattr(dp.tracker, name) == getattr(dn.tracker, name), name
            assert np.array_equal(dp.flights, dn.flights)
            points += len(dp.tracker.series_t)
    rp, rn = (report.analyze_file(path, engine=e) for e in ("python", "native"))
    assert (rp.pop("engine"), rn.pop("engine")) == ("python", "native")
    for r in (rp, rn):
        for f in r["flows"]:
            for d in f.get("directions", {}).values():
                d.pop("engine")
    assert rp == rn
    return points


# -- a small pcap / pcapng writer -----------------------------------------------------------

def _opts(mss=None, ws=None, sack_ok=False, ts=None, sacks=()):
    o = b""
    if mss is not None:
        o += struct.pack("!BBH", 2, 4, mss)
    if ws is not None:
        o += struct.pack("!BBB", 3, 3, ws) + b"\x01"
    if sack_ok:
        o += b"\x04\x02"
    if ts is not None:
        o += b"\x01\x01" + struct.pack("!BBII", 8, 10, *ts)
    if sacks:
        o += b"\x01\x01" + struct.pack("!BB", 5, 2 + 8 * len(sacks)) + b"".join(
            struct.pack("!II", l % 2**32, r % 2**32) for l, r in sacks)
    return o + b"\x00" * (-len(o) % 4)


def tcp_packet(c2s, seq, ack, flags, payload=0, win=1000, v6=False, **opts):
    o = _opts(**opts)
    ports = (1000, 80) if c2s else (80, 1000)
    th = struct.pack("!HHIIBBHHH", *ports, seq % 2**32, ack % 2**32, (5 + len(o) // 4) << 4,
                     flags, win, 0, 0) + o + b"d" * payload
    if v6:
        a, b = bytes(15) + b"\x01", bytes(15) + b"\x02"
        src, dst = (a, b) if c2s else (b, a)
        return b"\x86\xdd", struct.pack("!IHBB", 6 << 28, len(th), 6, 64) + src + dst + th
    src, dst = (b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02")
    src, dst = (src, dst) if c2s else (dst, src)
    return b"\x08\x00", struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(th), 7, 0, 64, 6, 0) + src + dst + th


LINKS = {"eth": 1, "vlan": 1, "sll": 113, "sll2": 276, "null": 0, "raw": 101}


def frame(link, et, ip):
    if link == "eth":
        return bytes(12) + et + ip
    if link == "vlan":
        return bytes(12) + b"\x81\x00\x00\x05" + et + ip
    if link == "sll":
        return bytes(14) + et + ip
    if link == "sll2":
        return et + bytes(18) + ip
    if link == "null":
        return struct.pack("<I", 2 if et == b"\x08\x00" else 30) + ip
    return ip


def write_pcap(path, pkts, link="eth", snap=None, nano=False, tail=b"", order="<"):
    out = [struct.pack(order + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, 65535,
                       LINKS[link])]
    for t_ns, (et, ip) in pkts:
        data = frame(link, et, ip)
        cap = data[:snap] if snap else data
        frac = t_ns % 10**9 if nano else t_ns % 10**9 // 1000
        out.append(struct.pack(order + "IIII", t_ns // 10**9, frac, len(cap), len(data)) + cap)
    path.write_bytes(b"".join(out) + tail)
    return path


def write_pcapng(path, pkts, link="eth"):
    def block(btype, body):
        body += b"\x00" * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)
    out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
           block(1, struct.pack("<HHI", LINKS[link], 0, 0)
                 + struct.pack("<HHB", 9, 1, 9) + b"\x00" * 3 + struct.pack("<HH", 0, 0))]
    for t_ns, (et, ip) in pkts:
        data = frame(link, et, ip)
        out.append(block(6, struct.pack("<IIIII", 0, t_ns >> 32, t_ns & 0xFFFFFFFF, len(data),
                                        len(data)) + data))
    path.write_bytes(b"".join(out))
    return path


# -- traces -----------------------------------------------------------------------------------

def random_trace(seed, n=600, v6=False):
    """A sender near the sequence wrap with random loss, retransmissions (fast, timeout,
    spurious, partial, keep-alive), SACK blocks that are later reneged, D-SACKs, zero and
    changing windows, capture gaps, a reordered clock, data from the server, and an RST."""
    rng = random.Random(seed)
    isn, risn = 2**32 - rng.randrange(1, 20000), rng.randrange(2**32)
    t = 1_000_000_000_000
    pk = []

    def add(c2s, seq, ack, flags, payload=0, **kw):
        nonlocal t
        t += rng.choice((1000, 20_000, 300_000, 5_000_000))
        stamp = t - rng.randrange(2_000_000) if rng.random() < 0.03 else t   # out of order
        pk.append((stamp, tcp_packet(c2s, seq, ack, flags, payload, v6=v6, **kw)))

    tsv = [1]
    add(True, isn, 0, 0x02, mss=1000, ws=2, sack_ok=True, ts=(1, 0))
    add(False, risn, isn + 1, 0x12, mss=1000, ws=3, sack_ok=True, ts=(7, 1))
    add(True, isn + 1, risn + 1, 0x10, ts=(2, 7))
    nxt, acked, rnxt, sent = 1, 1, 1, []
    for _ in range(n):
        x = rng.random()
        if x < 0.45:                                        # new data (sometimes past a gap)
            size = rng.choice((1000, 1000, 500, 1))
            if rng.random() < 0.03:
                nxt += 1000
            tsv.append(tsv[-1] + rng.randrange(2))
            add(True, isn + nxt, risn + rnxt, 0x18, size, ts=(tsv[-1], 7))
            sent.append((nxt, nxt + size))
            nxt += size
        elif x < 0.55 and sent:                             # retransmission of something sent
            s, e = rng.choice(sent[-30:])
            if rng.random() < 0.2:
                s = max(s, e - 300)                         # partial
            if rng.random() < 0.1:
                s, e = nxt - 1, nxt                         # keep-alive shape
            add(True, isn + s, risn + rnxt, 0x10, e - s, ts=(tsv[-1], 7))
        elif x < 0.93:                                      # an ACK, maybe with SACK blocks
            if rng.random() < 0.5:
                acked = min(nxt, acked + rng.choice((0, 0, 500, 1000, 3000)))
            ack = acked if rng.random() > 0.05 else max(1, acked - 1000)   # old ACK
            blocks = []
            for _ in range(rng.choice((0, 0, 1, 2, 3, 4))):
                l = rng.randrange(ack - 2000, max(ack + 1, nxt))
                blocks.append((isn + l, isn + l + rng.choice((500, 1000, 2000))))
            if rng.random() < 0.1:                          # D-SACK below the ACK
                blocks.insert(0, (isn + ack - 1000, isn + ack))
            win = rng.choice((1000, 1000, 1000, 0, 40))
            echo = rng.choice(tsv[-5:])
            kw = {"ts": (9, echo)} if len(blocks) <= 3 else {}
            add(False, risn + rnxt, isn + ack, 0x10, win=win, sacks=blocks[:4], **kw)
        elif x < 0.98:                                      # the server sends data
            add(False, risn + rnxt, isn + acked, 0x18, 300, ts=(9, tsv[-1]))
            rnxt += 300
        else:
            add(True, isn + nxt, risn + rnxt, 0x10, ts=(tsv[-1], 7))   # pure ACK from the sender
    add(True, isn + nxt, risn + rnxt, 0x11, ts=(tsv[-1], 7))
    add(False, risn + rnxt, isn + nxt + 1, 0x11)
    if seed % 3 == 0:
        add(False, risn + rnxt + 1, isn + nxt + 1, 0x14)   # RST
    return pk


def renege_trace():
    """The receiver SACKs [2001,4001) and later reports only [3001,4001) (renege); a D-SACK
    inside the second block (nothing retransmitted there) and one below the ACK (marks the
    timeout retransmission inside the fast episode spurious); a zero window and its probe;
    a timeout retransmission outside any episode."""
    isn, risn, pk, t = 2**32 - 1500, 5, [], [10**12]

    def add(c2s, seq, ack, flags, payload=0, dt=1_000_000, **kw):
        t[0] += dt
        pk.append((t[0], tcp_packet(c2s, isn + seq if c2s else risn + seq,
                                    risn + ack if c2s else isn + ack, flags, payload, **kw)))
    add(True, 0, 0, 0x02, mss=1000, sack_ok=True)
    add(False, 0, 1, 0x12, mss=1000, sack_ok=True)
    add(True, 1, 1, 0x10)
    for k in range(5):
        add(True, 1 + 1000 * k, 1, 0x18, 1000, dt=10_000)
    add(False, 1, 1001, 0x10, sacks=[(isn + 2001, isn + 4001)])
    add(False, 1, 1001, 0x10, sacks=[(isn + 3001, isn + 4001)])            # renege
    add(False, 1, 1001, 0x10, sacks=[(isn + 3001, isn + 5001)])
    add(True, 1001, 1, 0x18, 1000)                                          # fast
    add(False, 1, 2001, 0x10, win=0, sacks=[(isn + 3001, isn + 3501), (isn + 3001, isn + 5001)])
    add(True, 2001, 1, 0x18, 1000, dt=300_000_000)      # timeout, inside the fast episode
    add(False, 1, 5001, 0x10, win=0, sacks=[(isn + 2001, isn + 3001)])     # D-SACK below the ACK
    add(True, 5001, 1, 0x10, 0, dt=200_000_000)                             # zero-window probe
    add(False, 1, 5001, 0x10, win=1000)
    add(True, 5001, 1, 0x18, 1000)
    add(True, 5001, 1, 0x18, 1000, dt=300_000_000)                          # timeout: rto
    add(False, 1, 6001, 0x10)
    add(True, 6001, 1, 0x11)
    add(False, 1, 6002, 0x11)
    return pk


@pytest.mark.parametrize("seed", range(12))
def test_random_traces(tmp_path, seed):
    pk = random_trace(seed, v6=seed % 4 == 1)
    path = write_pcap(tmp_path / "r.pcap", pk, nano=seed % 2 == 0, order="<>"[seed % 3 == 2])
    assert assert_engines_agree(path) > 500


def test_renege_dsack_zero_window(tmp_path):
    path = write_pcap(tmp_path / "renege.pcap", renege_trace())
    assert assert_engines_agree(path) > 10
    d = tcp.analyze_direction(pcap.read(path), flows.split(pcap.read(path))[0], True)
    assert [r.kind for r in d.tracker.retransmissions] == ["fast", "fast", "rto"]
    assert [r.spurious for r in d.tracker.retransmissions] == [False, True, False]


@pytest.mark.parametrize("link", sorted(LINKS))
def test_link_types_and_pcapng(tmp_path, link):
    pk = random_trace(100 + len(link), n=150, v6=link == "sll")
    assert assert_engines_agree(write_pcap(tmp_path / "l.pcap", pk, link=link))
    assert assert_engines_agree(write_pcapng(tmp_path / "l.pcapng", pk, link=link))


def test_snaplen_and_cut_last_record(tmp_path):
    """Headers cut by the snaplen (options and SACK blocks lost), a record cut short."""
    pk = random_trace(7, n=200)
    for snap in (40, 54, 62, 70, 90):
        path = write_pcap(tmp_path / f"s{snap}.pcap", pk, snap=snap, tail=b"\x01" * 20)
        assert assert_engines_agree(path) > 0
    assert len(pcap.read(path, engine="native")) == len(pk)


def test_windowed_reading(tmp_path, monkeypatch):
    """Records cut by a window's end start the next window; a record larger than the window
    widens it."""
    path = write_pcap(tmp_path / "c.pcap", random_trace(3, n=300))
    whole = pcap.read(path, engine="native")
    monkeypatch.setattr(pcap, "WINDOW", 100)
    cut = pcap.read(path, engine="native")
    for name in pcap.ARRAYS:
        assert np.array_equal(getattr(whole, name), getattr(cut, name)), name
    assert whole.damage == cut.damage


def test_reference_runs_when_the_library_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "LIB", tmp_path / "libtbanalysis.so")
    monkeypatch.setattr(native, "_lib", None)
    assert native.engine() == "python"
    with pytest.raises(ValueError, match="not built"):
        native.engine("native")
    path = write_pcap(tmp_path / "r.pcap", random_trace(1, n=100))
    assert report.analyze_file(path)["engine"] == "python"


def test_engine_choice(monkeypatch):
    monkeypatch.setenv("TESTBED_ANALYSIS_ENGINE", "python")
    assert native.engine() == "python"
    assert native.engine("native") == "native"
    monkeypatch.setenv("TESTBED_ANALYSIS_ENGINE", "fast")
    with pytest.raises(ValueError, match="use one of auto, native, python"):
        native.engine()


def test_crafted_captures_of_the_other_tests(tmp_path):
    """The known-answer captures of test_analysis_tcp (fast, RTO, probe, D-SACK, wrap) and
    test_analysis_bif (Wireshark's list: restart, gap, 4 SACK blocks, FIN)."""
    pytest.importorskip("scapy.all")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    import test_bif as test_analysis_bif
    from scapy.all import wrpcap
    tr, _ = test_analysis_bif.build()
    wrpcap(str(tmp_path / "bif.pcap"), tr.pkts)
    assert assert_engines_agree(tmp_path / "bif.pcap") > 20
    import tests.analysis.test_tcp as test_analysis_tcp
    test_analysis_tcp.scenario.__wrapped__(tmp_path)
    assert assert_engines_agree(tmp_path / "s.pcap") > 20


def test_wireshark_list_cap():
    """More than Wireshark's 10000 unacknowledged transmissions (later ones not listed),
    then ACKs that empty the list and a retransmission below SND.UNA."""
    from analysis import senderrun
    n = 10_050
    seq = np.concatenate([[0], 1 + 10 * np.arange(n), [4001, 20_001, 50_001, 100_501, 30_001]])
    end = np.concatenate([[1], 11 + 10 * np.arange(n), [4011, 20_011, 50_001, 100_501, 30_011]])
    kind = np.concatenate([[1], np.ones(n, int), [2, 2, 2, 2, 1]]).astype(np.uint8)
    val = np.where(kind == 1, seq, seq)
    m = len(kind)
    rows = senderrun.Rows(
        kind=kind, t=np.arange(m, dtype=np.int64), val=val.astype(np.int64),
        end=end.astype(np.int64), fl=np.where(np.arange(m) == 0, 1, 4).astype(np.uint8),
        win=np.full(m, 1000, np.int64), nsack=np.zeros(m, np.uint8),
        sack=np.zeros((0, 2), np.int64), has_ts=np.zeros(m, bool),
        tsval=np.zeros(m, np.uint32), tsecr=np.zeros(m, np.uint32),
        payload=(end - seq).astype(np.int64), packet=np.arange(m, dtype=np.int64))
    a, b = senderrun.run(rows, 10, "python"), senderrun.run(rows, 10, "native")
    for name in SERIES + ("rtx",):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    # the SYN is one of the 10000 listed: [0, 1) and 9999 data segments
    assert a.series_wireshark[n] == 1 + 10 * 9_999 and a.series_outstanding[n] == 10 * n
