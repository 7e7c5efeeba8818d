"""Damaged captures are reported, never read silently: a record cut short, a bad record
header, headers cut by the snap length — by both readers (the Python reference and the
native one), with the same finding, the byte offset where reading stopped and the packets
read before it.  The captures are made by cutting and flipping bytes of a written trace
(the writer of test_native); the real capture is cut in test_damage_root."""
import json
import random
import struct

import numpy as np
import pytest

from analysis import native, pcap, report
from tests.analysis.test_native import random_trace, write_pcap, write_pcapng

ENGINES = ["python"] + (["native"] if native.engine("auto") == "native" else [])


def _offsets(data: bytes) -> list[int]:
    """Byte offset of every record of a little-endian pcap."""
    out, pos = [], 24
    while pos + 16 <= len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return out


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    path = write_pcap(tmp_path_factory.mktemp("d") / "whole.pcap", random_trace(5, n=600))
    return path, path.read_bytes()


def _read_both(path):
    got = [pcap.read(path, engine=e) for e in ENGINES]
    for other in got[1:]:
        assert other.damage == got[0].damage
        for name in pcap.ARRAYS:
            assert np.array_equal(getattr(got[0], name), getattr(other, name)), name
    return got[0]


def test_a_sound_capture_has_no_damage(whole):
    assert _read_both(whole[0]).damage == []


def test_cut_in_the_middle_of_a_record(whole, tmp_path):
    path, data = whole
    offs = _offsets(data)
    k = len(offs) * 4 // 7
    cut = offs[k] + 16 + 10                 # ten bytes into the data of record k
    (tmp_path / "cut.pcap").write_bytes(data[:cut])
    pk = _read_both(tmp_path / "cut.pcap")
    (d,) = pk.damage
    assert d["kind"] == "truncated" and d["offset"] == offs[k] and d["packets_read"] == k == len(pk)
    assert f"at byte {offs[k]}" in d["message"] and "cut short" in d["message"]
    full = pcap.read(path, engine="python")
    assert np.array_equal(pk.ts_ns, full.ts_ns[:k]) and np.array_equal(pk.seq, full.seq[:k])
    (tmp_path / "head.pcap").write_bytes(data[:offs[k] + 7])      # inside the record header
    (d,) = _read_both(tmp_path / "head.pcap").damage
    assert d["kind"] == "truncated" and d["offset"] == offs[k] and "7 bytes into" in d["message"]


@pytest.mark.parametrize("field,value,says", [
    (8, 0xFFFFFFF0, "captured length 4294967280 exceeds the snap length 65535"),
    (4, 1_500_000, "timestamp fraction 1500000 is not below one second"),
    (12, 20, "exceeds the packet's length on the wire (20)"),
])
def test_bad_record_header(whole, tmp_path, field, value, says):
    path, data = whole
    offs = _offsets(data)
    k = 250
    bad = bytearray(data)
    struct.pack_into("<I", bad, offs[k] + field, value)
    (tmp_path / "bad.pcap").write_bytes(bad)
    pk = _read_both(tmp_path / "bad.pcap")
    (d,) = pk.damage
    assert d["kind"] == "bad_record" and d["offset"] == offs[k] and d["packets_read"] == k == len(pk)
    assert says in d["message"] and f"bad record header at byte {offs[k]}" in d["message"]
    assert f"{len(data) - offs[k]} of {len(data)} bytes unread" in d["message"]


@pytest.mark.parametrize("seed", range(8))
def test_random_flips_are_found(whole, tmp_path, seed):
    """200 random bytes flipped: a bad record header stops the reading, or the lengths of a
    record and its IP header disagree — both readers alike."""
    path, data = whole
    rng = random.Random(seed)
    bad = bytearray(data)
    for i in rng.sample(range(24, len(data)), 200):
        bad[i] ^= rng.randrange(1, 256)
    (tmp_path / "flip.pcap").write_bytes(bad)
    pk = _read_both(tmp_path / "flip.pcap")
    assert {d["kind"] for d in pk.damage} & {"bad_record", "length"}
    for stop in (d for d in pk.damage if d["kind"] == "bad_record"):
        assert stop["packets_read"] == len(pk) < len(_offsets(data))


def test_a_wire_length_the_ip_header_contradicts(whole, tmp_path):
    path, data = whole
    offs = _offsets(data)
    bad = bytearray(data)
    wire = struct.unpack_from("<I", data, offs[40] + 12)[0]
    struct.pack_into("<I", bad, offs[40] + 12, wire + 1000)
    (tmp_path / "len.pcap").write_bytes(bad)
    pk = _read_both(tmp_path / "len.pcap")
    (d,) = pk.damage
    assert d["kind"] == "length" and d["first_packet"] == 40 and d["packets"] == 1
    assert f"{wire + 1000} bytes on the wire" in d["message"] and len(pk) == len(offs)


def test_windowed_native_reading_stops_at_the_same_record(whole, tmp_path, monkeypatch):
    if "native" not in ENGINES:
        pytest.skip("analysis/native not built")
    path, data = whole
    offs = _offsets(data)
    (tmp_path / "cut.pcap").write_bytes(data[:offs[400] + 30])
    bad = bytearray(data)
    struct.pack_into("<I", bad, offs[300] + 8, 1 << 30)
    (tmp_path / "bad.pcap").write_bytes(bad)
    want = {n: pcap.read(tmp_path / n, engine="native").damage for n in ("cut.pcap", "bad.pcap")}
    monkeypatch.setattr(pcap, "WINDOW", 100)
    for n, d in want.items():
        assert pcap.read(tmp_path / n, engine="native").damage == d != []


def test_headers_cut_by_the_snap_length(tmp_path):
    pk = random_trace(7, n=100)
    path = write_pcap(tmp_path / "s.pcap", pk, snap=54)     # Ethernet + IPv4 + 20 bytes of TCP
    got = _read_both(path)
    (d,) = got.damage
    assert d["kind"] == "headers_cut" and d["packets"] > 0
    assert "without their whole TCP header" in d["message"]
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 16, 40)                     # the file header's snap length
    (tmp_path / "s40.pcap").write_bytes(data)
    kinds = [d["kind"] for d in _read_both(tmp_path / "s40.pcap").damage]
    assert kinds == ["snaplen", "headers_cut"]


def test_pcapng_cut_and_bad_block(tmp_path):
    path = write_pcapng(tmp_path / "n.pcapng", random_trace(9, n=100))
    data = path.read_bytes()
    n = len(pcap.read(path))
    (tmp_path / "cut.pcapng").write_bytes(data[:-30])
    (d,) = _read_both(tmp_path / "cut.pcapng").damage
    assert d["kind"] == "truncated" and d["packets_read"] == n - 1
    bad = bytearray(data)
    last = len(data) - struct.unpack_from("<I", data, len(data) - 4)[0]
    struct.pack_into("<I", bad, last + 4, 13)
    (tmp_path / "bad.pcapng").write_bytes(bad)
    (d,) = _read_both(tmp_path / "bad.pcapng").damage
    assert d["kind"] == "bad_record" and d["offset"] == last and "block length 13" in d["message"]


def test_the_summary_carries_the_damage(whole, tmp_path):
    path, data = whole
    (tmp_path / "cut.pcap").write_bytes(data[:len(data) - 5])
    res = report.analyze_file(tmp_path / "cut.pcap")
    assert [d["kind"] for d in res["damage"]] == ["truncated"]
    assert report.analyze_file(path)["damage"] == []


def test_a_cut_on_a_record_boundary_is_found_by_the_sidecars_count(whole, tmp_path):
    """Cut between two records a pcap reads as sound; its capture's sidecar says how many
    packets it wrote."""
    path, data = whole
    offs = _offsets(data)
    cut = tmp_path / "client-client-eth0.pcap"
    cut.write_bytes(data[:offs[300]])
    sidecar = {"offset_start_ns": 0, "offset_stop_ns": 0, "captured": len(offs)}
    (tmp_path / "client-client-eth0.pcap.meta.json").write_text(json.dumps(sidecar))
    assert pcap.read(cut).damage == []
    (d,) = report.analyze_file(cut)["damage"]
    assert d["kind"] == "count" and d["packets_read"] == 300
    assert f"holds 300 packets, its capture wrote {len(offs)}" in d["message"]
    (tmp_path / "client-client-eth0.pcap.meta.json").write_text(json.dumps({**sidecar, "captured": 300}))
    assert report.analyze_file(cut)["damage"] == []


def test_a_corrupt_sidecar_is_named(whole, tmp_path):
    f = tmp_path / "c.pcap"
    f.write_bytes(whole[1])
    for text, says in (("{", "not valid JSON"), ("[1, 2]", "a JSON list, not")):
        (tmp_path / "c.pcap.meta.json").write_text(text)
        with pytest.raises(ValueError, match=f"c.pcap.meta.json: {says}"):
            report.analyze_file(f)


@pytest.mark.parametrize("engine", ENGINES)
def test_analysing_a_flipped_capture_never_crashes(whole, tmp_path, engine):
    """Whatever 200 flipped bytes make of a flow (a time years off, a flag or sequence number
    that contradicts the rest), the analysis ends: the flows it cannot analyse are named."""
    path, data = whole
    for seed in range(40):
        rng = random.Random(1000 + seed)
        bad = bytearray(data)
        for i in rng.sample(range(24, len(data)), 200):
            bad[i] ^= rng.randrange(1, 256)
        f = tmp_path / f"flip{seed}.pcap"
        f.write_bytes(bad)
        res = report.analyze_file(f, engine=engine)
        assert res["damage"]
        assert all("damaged" in n["reason"] for n in res["flows_not_analysed"])


@pytest.mark.parametrize("cut,says", [
    (0, "an empty file (0 bytes)"),
    (3, "not a capture file: 3 bytes"),
    (10, "the pcap file header is cut short: 10 of its 24 bytes"),
])
def test_a_pcap_without_its_file_header_is_damage_not_an_error(whole, tmp_path, cut, says):
    """Empty or cut inside the file header: no packets and ``header`` damage (was a
    ValueError, which stopped a whole run's analysis at one empty capture)."""
    (tmp_path / "h.pcap").write_bytes(whole[1][:cut])
    pk = _read_both(tmp_path / "h.pcap")
    (d,) = pk.damage
    assert len(pk) == 0 and d["kind"] == "header" and d["packets_read"] == 0
    assert d["message"].startswith(says)


def test_a_pcapng_cut_in_its_section_header_and_a_foreign_file_are_header_damage(tmp_path):
    data = write_pcapng(tmp_path / "n.pcapng", random_trace(9, n=20)).read_bytes()
    (tmp_path / "cut.pcapng").write_bytes(data[:20])
    (d,) = _read_both(tmp_path / "cut.pcapng").damage
    assert d["kind"] == "header" and "section header block" in d["message"]
    (tmp_path / "idb.pcapng").write_bytes(data[:30])     # whole section header, cut interface block
    (d,) = _read_both(tmp_path / "idb.pcapng").damage
    assert d["kind"] == "truncated" and d["offset"] == 28 and d["packets_read"] == 0
    (tmp_path / "text.pcap").write_text("not a capture at all")
    (d,) = _read_both(tmp_path / "text.pcap").damage
    assert d["kind"] == "header" and d["message"] == "not a pcap or pcapng file (magic 6e6f7420)"


def test_refused_on_its_own(whole, tmp_path):
    (tmp_path / "e.pcap").write_bytes(b"")
    with pytest.raises(ValueError, match=f"{tmp_path / 'e.pcap'}: an empty file"):
        report.refuse_unreadable(report.analyze_file(tmp_path / "e.pcap"))
    report.refuse_unreadable(report.analyze_file(whole[0]))


def test_the_count_finding_says_the_rest_was_lost_where_reading_stopped(whole, tmp_path):
    path, data = whole
    cut = tmp_path / "c.pcap"
    cut.write_bytes(data[:len(data) - 5])
    (tmp_path / "c.pcap.meta.json").write_text(json.dumps(
        {"offset_start_ns": 0, "offset_stop_ns": 0, "captured": len(_offsets(data))}))
    kinds = {d["kind"]: d["message"] for d in report.analyze_file(cut)["damage"]}
    assert kinds["count"].endswith("the rest lost where reading stopped")


def test_a_pcapng_with_two_timestamp_units_is_unsupported_damage_not_an_error(tmp_path):
    """Its second interface in ms beside the first in ns: nothing read, said as damage (one
    capture of a run), refused when given on its own — never a traceback mid-run."""
    f = write_pcapng(tmp_path / "two.pcapng", [])
    second = struct.pack("<HHI", 1, 0, 0) + struct.pack("<HHB", 9, 1, 3) + b"\x00" * 3 + struct.pack("<HH", 0, 0)
    f.write_bytes(f.read_bytes() + struct.pack("<II", 1, len(second) + 12) + second
                  + struct.pack("<I", len(second) + 12))
    pk = pcap.read(f)
    assert len(pk) == 0 and [d["kind"] for d in pk.damage] == ["unsupported"]
    with pytest.raises(ValueError, match="different timestamp units"):
        report.refuse_unreadable(report.analyze_file(f))
