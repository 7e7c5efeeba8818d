"""The vectorised reader against scapy's dissection of crafted captures."""
import pytest

scapy = pytest.importorskip("scapy.all")
from scapy.all import (IP, TCP, UDP, IPv6, Raw, CookedLinux, Dot1Q,  # noqa: E402
                       PcapWriter, PcapNgWriter, wrpcap)

from analysis import pcap  # noqa: E402
from tests.analysis.test_tcp import eth  # noqa: E402


def _packets():
    opts_syn = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1000, 0)), ("NOP", None),
                ("WScale", 7)]
    opts_sack = [("NOP", None), ("NOP", None), ("Timestamp", (1234, 5678)), ("NOP", None),
                 ("NOP", None), ("SAck", (3000, 4000, 5000, 6000, 7000, 8000))]
    return [
        IP(src="10.0.0.1", dst="10.0.0.2", id=7) / TCP(sport=40000, dport=80, flags="S",
                                                        seq=4294967000, options=opts_syn),
        IP(src="10.0.0.2", dst="10.0.0.1", id=8) / TCP(sport=80, dport=40000, flags="A",
                                                        ack=2000, window=500, options=opts_sack),
        IP(src="10.0.0.1", dst="10.0.0.2", id=9) / TCP(sport=40000, dport=80, flags="PA",
                                                        seq=1, ack=1) / Raw(b"\x16\x03\x01\x00\x10\x01" + b"x" * 100),
        IP(src="10.0.0.1", dst="10.0.0.3") / UDP(sport=5000, dport=443) / Raw(b"q" * 33),
        IPv6(src="fd00::1", dst="fd00::2") / TCP(sport=1, dport=2, flags="SA", seq=5, ack=6,
                                                 options=[("WScale", 14)]),
    ]


def _check(table, pkts, t0=1.5):
    assert len(table) == len(pkts)
    for i, p in enumerate(pkts):
        ip = p[IP] if IP in p else p[IPv6]
        assert pcap.format_addr(table.src[i]) == ip.src
        assert pcap.format_addr(table.dst[i]) == ip.dst
        l4 = p[TCP] if TCP in p else p[UDP]
        assert (table.sport[i], table.dport[i]) == (l4.sport, l4.dport)
        payload = len(l4.payload)
        assert table.payload_len[i] == payload
        if TCP in p:
            assert table.seq[i] == l4.seq and table.ack[i] == l4.ack
            assert table.flags[i] == int(l4.flags) and table.win[i] == l4.window
            o = dict((k, v) for k, v in l4.options)
            assert table.wscale[i] == o.get("WScale", -1)
            assert table.mss[i] == o.get("MSS", 0)
            assert table.has_ts[i] == ("Timestamp" in o)
            if "Timestamp" in o:
                assert (table.tsval[i], table.tsecr[i]) == o["Timestamp"]
            blocks = o.get("SAck", ())
            assert table.nsack[i] == len(blocks) // 2
            assert list(table.sack[i, :len(blocks) // 2].ravel()) == list(blocks)
        if IP in p:
            assert table.ip_id[i] == p[IP].id and table.ip_len[i] == p[IP].len
        assert table.ts_ns[i] == int(round((t0 + i * 0.001) * 1e9))


def _stamp(pkts, t0=1.5):
    for i, p in enumerate(pkts):
        p.time = t0 + i * 0.001
    return pkts


@pytest.mark.parametrize("link", ["ether", "vlan", "sll", "raw"])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng", "pcap-ns"])
def test_reader_matches_scapy(tmp_path, link, fmt):
    base = _packets()
    wrap = {"ether": lambda p: eth() / p, "vlan": lambda p: eth() / Dot1Q(vlan=3) / p,
            "sll": lambda p: CookedLinux(proto=0x86DD if IPv6 in p else 0x0800) / p,
            "raw": lambda p: p}[link]
    pkts = _stamp([wrap(p.__class__(bytes(p))) for p in base])
    f = tmp_path / "c.pcap"
    if fmt == "pcapng":
        w = PcapNgWriter(str(f))
    else:
        w = PcapWriter(str(f), nano=(fmt == "pcap-ns"), linktype=101 if link == "raw" else None)
    for p in pkts:
        w.write(p)
    w.close()
    _check(pcap.read(f), pkts)


def test_snaplen_truncation_keeps_header_fields(tmp_path):
    pkts = _stamp([eth() / p.__class__(bytes(p)) for p in _packets()])
    f = tmp_path / "s.pcap"
    wrpcap(str(f), pkts, snaplen=96)  # scapy writes full data; emulate tcpdump -s by cutting below
    raw = f.read_bytes()
    # rewrite with records cut to 96 bytes, keeping orig_len
    import struct
    out, pos = bytearray(raw[:24]), 24
    while pos < len(raw):
        sec, us, incl, orig = struct.unpack_from("<IIII", raw, pos)
        keep = min(incl, 96)
        out += struct.pack("<IIII", sec, us, keep, orig) + raw[pos + 16:pos + 16 + keep]
        pos += 16 + incl
    f.write_bytes(bytes(out))
    t = pcap.read(f)
    assert list(t.payload_len) == [0, 0, 106, 33, 0]
    assert t.caplen.max() == 96 and t.tcp_hdr_ok[[0, 1, 2, 4]].all()
    assert bytes(t.head[2, :6]) == b"\x16\x03\x01\x00\x10\x01"


def test_truncated_last_record_is_ignored(tmp_path):
    pkts = _stamp([eth() / p.__class__(bytes(p)) for p in _packets()])
    f = tmp_path / "t.pcap"
    wrpcap(str(f), pkts)
    f.write_bytes(f.read_bytes()[:-10])
    assert len(pcap.read(f)) == len(pkts) - 1


def test_a_view_held_elsewhere_does_not_fail_the_read(tmp_path, monkeypatch):
    """Another thread may hold a frame, and with it a view of the mapped file, for a moment (a
    sampling profiler such as Dask's): the map cannot close then; the read still succeeds."""
    pkts = _stamp([eth() / p.__class__(bytes(p)) for p in _packets()])
    f = tmp_path / "t.pcap"
    wrpcap(str(f), pkts)
    held, records = [], pcap.native.pcap_records
    monkeypatch.setattr(pcap.native, "pcap_records", lambda b, *a: held.append(b) or records(b, *a))
    assert len(pcap.read(f)) == len(pkts) and held


def test_a_non_capture_reads_as_header_damage(tmp_path):
    """No packets, never a guess; ``testbed analyze`` refuses it given on its own."""
    f = tmp_path / "x.pcap"
    f.write_bytes(b"hello world")
    pk = pcap.read(f)
    assert len(pk) == 0 and [d["kind"] for d in pk.damage] == ["header"]
    assert pk.damage[0]["message"].startswith("not a pcap or pcapng file")


def test_flows_split_both_directions(tmp_path):
    from analysis import flows
    pk_list = [
        eth() / IP(src="10.0.0.2", dst="10.0.0.1") / TCP(sport=80, dport=1000, flags="A"),  # before SYN
        eth() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1000, dport=80, flags="S"),
        eth() / IP(src="10.0.0.3", dst="10.0.0.1") / UDP(sport=53, dport=999),
        eth() / IP(src="10.0.0.2", dst="10.0.0.1") / TCP(sport=80, dport=1000, flags="SA"),
        eth() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1001, dport=80, flags="S"),
        eth() / IP(src="10.0.0.1", dst="10.0.0.3") / UDP(sport=999, dport=53),
    ]
    f = tmp_path / "f.pcap"
    wrpcap(str(f), _stamp(pk_list))
    fl = flows.split(pcap.read(f))
    assert [x.key.name for x in fl] == ["tcp-10.0.0.1:1000-10.0.0.2:80", "udp-10.0.0.3:53-10.0.0.1:999",
                                        "tcp-10.0.0.1:1001-10.0.0.2:80"]
    assert [list(x.index) for x in fl] == [[0, 1, 3], [2, 5], [4]]
    assert flows.FlowKey(pcap.TCP, "fd00::1", 1000, "10.0.0.2", 80).name == "tcp-[fd00::1]:1000-10.0.0.2:80"
    assert [list(x.fwd) for x in fl] == [[False, True, False], [True, False], [True]]
    assert fl[0].key.matches("10.0.0.2", 80, None, None) and not fl[0].key.matches(None, 1001, None, None)
