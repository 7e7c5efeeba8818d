"""Real Linux TCP with random loss between two namespaces, captured at the sender with
tcpdump, analysed, and checked against tshark's tcp.analysis.* on the same file.

Where the definitions differ (see analysis.tcpsender): Wireshark's bytes_in_flight spans its
list of unacknowledged transmissions and subtracts the bytes in the latest ACK's SACK blocks
(our "wireshark" series reproduces it; our "outstanding" does not subtract, and our
"sacked"/"pipe" use the cumulative scoreboard); Wireshark splits retransmissions into
retransmission / fast_retransmission / spurious_retransmission / out_of_order, whose union is
our set of retransmissions; Wireshark's "fast" needs >= 2 duplicate ACKs and the segment at the
cumulative ACK, ours >= 1 duplicate ACK or SACK, so Wireshark's fast set is a subset of ours.
"""
import shutil
import subprocess

import pytest

from analysis import applog, flows, pcap, report, tcp
from testbed.host.capture import Capture
from tests.fixtures.vethpair import veth_pair

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not shutil.which("tshark") or not shutil.which("tcpdump"),
                                 reason="needs tshark and tcpdump")]

FIELDS = ["frame.number", "tcp.analysis.retransmission", "tcp.analysis.fast_retransmission",
          "tcp.analysis.spurious_retransmission", "tcp.analysis.out_of_order",
          "tcp.analysis.bytes_in_flight", "tcp.analysis.initial_rtt"]


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    with veth_pair("r") as p:
        p.loss(4, 5201)
        cap = Capture(d / "loss.pcap", "tbt0", popen=lambda argv, **kw: p.popen(p.a, argv, **kw))
        cap.start()
        p.transfer("sink", 5201, 3_000_000)
        res_loss = cap.stop()
        dropped = p.dropped()
        cap = Capture(d / "rr.pcap", "tbt0", popen=lambda argv, **kw: p.popen(p.a, argv, **kw))
        cap.start()
        lines = p.transfer("rr", 5202, 4, 200_000)
        res_rr = cap.stop()
    (d / "rr.jsonl").write_text("\n".join(lines) + "\n")
    return {"loss": d / "loss.pcap", "rr": d / "rr.pcap", "app": d / "rr.jsonl",
            "dropped": dropped, "results": (res_loss, res_rr)}


def tshark(path):
    argv = ["tshark", "-r", str(path), "-T", "fields"] + [x for f in FIELDS for x in ("-e", f)]
    rows = {}
    for line in subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines():
        c = line.split("\t")
        rows[int(c[0])] = c
    return rows


def _data_direction(path):
    pk = pcap.read(path)
    (flow,) = [f for f in flows.split(pk) if f.key.proto == pcap.TCP]
    return pk, flow, tcp.analyze_direction(pk, flow, True)


def test_capture_counters(captures):
    for r in captures["results"]:
        assert r.exit_code == 0 and r.dropped_by_kernel == 0 and r.captured > 0
        assert len(pcap.read(r.pcap)) == r.captured


def test_retransmissions_match_tshark(captures):
    pk, flow, d = _data_direction(captures["loss"])
    rows = tshark(captures["loss"])
    theirs = {n for n, c in rows.items() if any(c[1:5])}
    ours = {r.packet + 1 for r in d.tracker.retransmissions}
    assert captures["dropped"] > 0
    assert ours == theirs
    assert len(ours) >= captures["dropped"]      # every dropped segment was sent again
    ws_fast = {n for n, c in rows.items() if c[2]}
    our_fast = {r.packet + 1 for r in d.tracker.retransmissions if r.kind == "fast"}
    assert ws_fast <= our_fast


def test_bytes_in_flight_match_tshark(captures):
    """Every data frame: tshark shows bytes_in_flight exactly where the model says Wireshark
    shows it (see analysis.tcpsender *wireshark*: not when <= 0), with the same value."""
    pk, flow, d = _data_direction(captures["loss"])
    rows = tshark(captures["loss"])
    tr = d.tracker
    shown = 0
    for i, packet in d.data_events:
        ws = rows[packet + 1][5]
        assert tr.series_wireshark_shown[i] == bool(ws), packet + 1
        if ws:
            assert tr.series_wireshark[i] == int(ws), packet + 1
            shown += 1
    assert len(d.data_events) == d.data_segments > 1000
    assert shown > 1000


def test_initial_rtt_matches_tshark(captures):
    for name in ("loss", "rr"):
        res = report.analyze_file(captures[name])
        rows = tshark(captures[name])
        ws = {c[6] for c in rows.values() if c[6]}
        assert len(ws) == 1
        assert res["flows"][0]["initial_rtt_ms"] == pytest.approx(float(ws.pop()) * 1e3, abs=1e-6)


def test_completion_joined_with_app_log(captures):
    events = applog.load(captures["app"])
    res = report.analyze_file(captures["rr"], events=events)
    assert res["clock"] == "monotonic" and res["app_events_unmatched"] == 0
    (f,) = res["flows"]
    assert f["data_direction"] == "s2c"
    comp = f["completion"]
    assert [c["response_bytes"] for c in comp] == [200_000] * 4
    for c in comp:
        app = c["app"]
        # the app's own clock brackets what the client-side capture saw on the wire
        assert app["request_start"] <= c["request_first"] < c["response_first"]
        assert c["response_first"] <= c["response_last"] <= app["request_done"]


def test_native_engine_agrees_with_reference(captures):
    """The fast path (analysis/native) and the Python reference, series by series."""
    from analysis import native
    if native.engine("auto") != "native":
        pytest.skip("analysis/native not built")
    from tests.analysis.test_native import assert_engines_agree
    for name in ("loss", "rr"):
        assert assert_engines_agree(captures[name]) > 1000
