"""A real capture (tcpdump, headers only, at the sender of a lossy transfer between two
namespaces) cut in the middle of a record and with 200 bytes flipped: ``testbed analyze``
warns naming the file and the byte where reading stopped, lists the damage in --json and
exits 1 with --strict; both readers stop at the same record."""
import json
import random
import shutil
import struct

import pytest

from analysis import native, pcap
from testbed.cli import main
from testbed.host.capture import Capture
from tests.fixtures.vethpair import veth_pair

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not shutil.which("tcpdump"), reason="needs tcpdump")]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    d = tmp_path_factory.mktemp("damage")
    with veth_pair("d") as p:
        p.loss(3, 5203)
        cap = Capture(d / "real.pcap", "tbt0", popen=lambda argv, **kw: p.popen(p.a, argv, **kw))
        cap.start()
        p.transfer("sink", 5203, 4_000_000)
        cap.stop()
    return d / "real.pcap"


def _le(data: bytes) -> bool:
    return data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")


def _offsets(data: bytes) -> list[int]:
    le = _le(data)
    out, pos = [], 24
    while pos + 16 <= len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I" if le else ">I", data, pos + 8)[0]
    return out


def _analyze(argv, capsys):
    code = main(["analyze", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _engines_agree(path):
    engines = ["python"] + (["native"] if native.engine("auto") == "native" else [])
    got = [pcap.read(path, engine=e) for e in engines]
    assert all(g.damage == got[0].damage and len(g) == len(got[0]) for g in got)
    return got[0]


def test_a_real_capture_cut_short(real, tmp_path, capsys):
    data = real.read_bytes()
    assert len(data) > 300_000
    offs = _offsets(data)
    k = sum(o <= 200_000 for o in offs) - 1           # the record holding byte 200,000
    cut = offs[k] + 16 + (offs[k + 1] - offs[k] - 16) // 2   # halfway into its data
    assert offs[k] + 16 < cut < offs[k + 1]
    f = tmp_path / "cut.pcap"
    f.write_bytes(data[:cut])
    pk = _engines_agree(f)
    assert len(pk) == k and [d["kind"] for d in pk.damage] == ["truncated"]
    code, out, err = _analyze([str(f), "--json"], capsys)
    assert code == 0 and json.loads(out)["damage"][0]["offset"] == offs[k]
    assert f"testbed: warning: {f}: the last record, at byte {offs[k]}, is cut short" in err
    code, out, err = _analyze([str(f), "--strict"], capsys)
    assert code == 1 and "DAMAGED (truncated" in out
    code, _, err = _analyze([str(real), "--strict"], capsys)
    assert code == 0 and err == ""


def test_a_real_capture_with_200_bytes_flipped(real, tmp_path, capsys):
    """199 random bytes anywhere after the file header and one in a record's captured
    length: reading stops at a bad header no later than that record."""
    data = real.read_bytes()
    offs = _offsets(data)
    rng = random.Random(12)
    target = offs[rng.randrange(len(offs) // 4, len(offs) // 2)]
    flips = rng.sample(range(24, len(data)), 199) + [target + 8 + (3 if _le(data) else 0)]
    bad = bytearray(data)
    for i in flips:
        bad[i] ^= rng.randrange(1, 256) | 0x80          # the caplen's high byte: > 16 MB
    f = tmp_path / "flipped.pcap"
    f.write_bytes(bad)
    pk = _engines_agree(f)
    stop = next(d for d in pk.damage if d["kind"] == "bad_record")
    assert stop["offset"] <= target and stop["packets_read"] == len(pk) < len(offs)
    code, out, err = _analyze([str(f), "--json", "--strict"], capsys)
    assert code == 1 and any(d["kind"] == "bad_record" for d in json.loads(out)["damage"])
    assert f"bad record header at byte {stop['offset']}" in err
