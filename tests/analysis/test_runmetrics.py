"""Run metrics that describe the sender come from a capture at the data sender, whatever the
direction: a download's from the server's capture (the client's sees fewer retransmissions),
left out and said so when only the receiver was captured; an upload's from the client's own."""
import json

import numpy as np
import pytest

pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, Raw, wrpcap  # noqa: E402

from analysis import report  # noqa: E402
from analysis.runmetrics import SENDER_METRICS, run_metrics  # noqa: E402
from tests.analysis.test_tcp import eth  # noqa: E402

C, S = "10.0.0.1", "10.0.0.2"
ISN_C, ISN_S = 5000, 90000
LOST = {"s2", "s4", "s4 again"}       # dropped on the path: in the sender's capture only


def _download():
    """(name, t_ms, packet) of a download: the server sends s1..s5; s2 and s4 are lost, s2 is
    sent again after SACKs, s4 twice (the first resend lost too) — 3 retransmissions."""
    def srv(seq, n=100, name=""):
        return name, IP(src=S, dst=C) / TCP(sport=80, dport=1000, flags="PA", seq=ISN_S + seq,
                                            ack=ISN_C + 1, window=1000) / Raw(b"d" * n)

    def ack(a, sacks=()):
        opts = [("NOP", None), ("NOP", None),
                ("SAck", tuple(ISN_S + x for b in sacks for x in b))] if sacks else []
        return "", IP(src=C, dst=S) / TCP(sport=1000, dport=80, flags="A", seq=ISN_C + 1,
                                         ack=ISN_S + a, window=1000, options=opts)
    rows = [
        (0, ("", IP(src=C, dst=S) / TCP(sport=1000, dport=80, flags="S", seq=ISN_C))),
        (10, ("", IP(src=S, dst=C) / TCP(sport=80, dport=1000, flags="SA", seq=ISN_S,
                                         ack=ISN_C + 1))),
        (10.1, ack(1)),
        (20, srv(1)), (20.1, srv(101, name="s2")), (20.2, srv(201)),
        (20.3, srv(301, name="s4")), (20.4, srv(401)),
        (30, ack(101)), (30.2, ack(101, [(201, 301)])), (30.4, ack(101, [(201, 301), (401, 501)])),
        (30.5, srv(101)),
        (40.5, ack(301, [(401, 501)])),
        (40.6, srv(301, name="s4 again")),
        (300, srv(301)),
        (310, ack(501)),
    ]
    return [(name, t, p) for t, (name, p) in rows]


def _write(path, rows):
    pkts = []
    for _, t, p in rows:
        p = eth() / p
        p.time = 1000 + t / 1000
        pkts.append(p)
    wrpcap(str(path), pkts)
    return path


def _run_dir(tmp_path, captured=("client", "server")):
    d = tmp_path / "run"
    (d / "pcap").mkdir(parents=True)
    rows = _download()
    if "client" in captured:
        _write(d / "pcap" / "client-client-eth0.pcap", [r for r in rows if r[0] not in LOST])
    if "server" in captured:
        _write(d / "pcap" / "server-server-eth0.pcap", rows)
    (d / "manifest.json").write_text(json.dumps({"roles": {"client": "client", "server": "server"}}))
    (d / "metadata.json").write_text(json.dumps({"hosts": {
        "client": {"ips": {"client-eth0": f"{C}/24"}},
        "server": {"ips": {"server-eth0": f"{S}/24"}}}}))
    return d


def _retransmissions(pcap):
    (flow,) = report.analyze_file(pcap)["flows"]
    return flow["retransmissions"]["total"]


def test_a_download_counts_the_senders_retransmissions(tmp_path):
    d = _run_dir(tmp_path)
    at_sender = _retransmissions(d / "pcap" / "server-server-eth0.pcap")
    at_receiver = _retransmissions(d / "pcap" / "client-client-eth0.pcap")
    assert (at_sender, at_receiver) == (3, 2)          # the receiver never saw the lost copies
    out = run_metrics(d)
    assert out["metrics"]["retransmissions"] == at_sender
    assert out["metrics"]["max_in_flight_bytes"] == 500
    (flow,) = report.analyze_file(d / "pcap" / "server-server-eth0.pcap")["flows"]
    assert out["metrics"]["max_pipe_bytes"] == flow["in_flight"]["pipe_max"] == 500   # s1..s5 out at once
    # flights of new bytes: s1..s5 in one flight; the resends add none
    assert out["metrics"]["flight_bytes"][0] == 500 and sum(out["metrics"]["flight_bytes"]) == 500
    assert out["metrics"]["cumulative_5"] == [500]
    assert "sender_metrics" not in out["checks"]
    assert out["metrics"]["handshake_ms"] == [pytest.approx(10.1)]    # the client's own view


def test_only_the_receiver_captured_leaves_the_sender_metrics_out(tmp_path):
    out = run_metrics(_run_dir(tmp_path, captured=("client",)))
    assert not set(SENDER_METRICS) & set(out["metrics"])
    assert "data_segments_per_ack" not in out["checks"]
    assert "no capture at the data sender server" in out["checks"]["sender_metrics"]
    assert out["metrics"]["handshake_ms"] and out["checks"]["max_payload"] == 100


def test_an_upload_needs_only_the_clients_capture(tmp_path):
    """The same trace seen as an upload (the data sender is the client host): its own
    capture is at the sender."""
    d = _run_dir(tmp_path, captured=("server",))
    (d / "pcap" / "server-server-eth0.pcap").rename(d / "pcap" / "client-client-eth0.pcap")
    (d / "manifest.json").write_text(json.dumps({"roles": {"client": "client", "server": "x"}}))
    (d / "metadata.json").write_text(json.dumps({"hosts": {
        "client": {"ips": {"eth0": f"{S}/24"}}, "x": {"ips": {"eth0": f"{C}/24"}}}}))
    out = run_metrics(d)
    assert out["metrics"]["retransmissions"] == 3 and "sender_metrics" not in out["checks"]


def test_a_damaged_capture_is_named_in_the_checks(tmp_path):
    d = _run_dir(tmp_path)
    server = d / "pcap" / "server-server-eth0.pcap"
    server.write_bytes(server.read_bytes()[:-20])       # the last record cut short
    out = run_metrics(d)
    (msg,) = out["checks"]["capture_damage"]["server-server-eth0.pcap"]
    assert "cut short" in msg
    assert "client-client-eth0.pcap" not in out["checks"]["capture_damage"]
    assert "capture_damage" not in run_metrics(_run_dir(tmp_path / "sound"))["checks"]


def _upload(lost: tuple = ()):
    """(name, t_ms, packet) of an upload of 400 segments of 1000 B, one per ms (the bottleneck's
    rate: 1 MB/s), each ACKed 100 ms after it was sent (the RTT, no queue): the path's BDP is
    100,000 B.  ``lost``: segments lost, SACKed past; after the last segment the sender sends each
    again, 101 ms apart, and each one's ACK moves the cumulative ACK to the next hole."""
    def seg(k, t):
        return t, IP(src=C, dst=S) / TCP(sport=1000, dport=80, flags="A", seq=ISN_C + 1 + 1000 * k,
                                         ack=ISN_S + 1, window=60000) / Raw(b"u" * 1000)

    def ack(t, a, got=()):
        blocks = []                          # the received ranges above the cumulative ACK
        for k in got:
            if blocks and blocks[-1][1] == 1000 * k:
                blocks[-1][1] += 1000
            else:
                blocks.append([1000 * k, 1000 * (k + 1)])
        opts = [("NOP", None), ("NOP", None),
                ("SAck", tuple(ISN_C + 1 + x for b in blocks[-3:] for x in b))] if blocks else []
        return t, IP(src=S, dst=C) / TCP(sport=80, dport=1000, flags="A", seq=ISN_S + 1,
                                         ack=ISN_C + 1 + a, window=60000, options=opts)
    rows = [(0, IP(src=C, dst=S) / TCP(sport=1000, dport=80, flags="S", seq=ISN_C)),
            (100, IP(src=S, dst=C) / TCP(sport=80, dport=1000, flags="SA", seq=ISN_S, ack=ISN_C + 1)),
            (100, IP(src=C, dst=S) / TCP(sport=1000, dport=80, flags="A", seq=ISN_C + 1, ack=ISN_S + 1))]
    for k in range(400):
        rows.append(seg(k, 100 + k))
        if k in lost:
            continue
        holes = [h for h in lost if h < k]
        rows.append(ack(200 + k, 1000 * holes[0], [x for x in range(holes[0], k + 1) if x not in lost])
                    if holes else ack(200 + k, 1000 * (k + 1)))
    for i, h in enumerate(lost):
        nxt = lost[i + 1] if i + 1 < len(lost) else 400
        above = [x for x in range(nxt + 1, 400) if x not in lost]
        rows += [seg(h, 600 + 101 * i), ack(700 + 101 * i, 1000 * nxt, above)]
    return [("", t, p) for t, p in sorted(rows, key=lambda r: r[0])]


@pytest.mark.parametrize("lost", [(), (200, 250)])
def test_the_bdp_is_the_delivery_rate_over_one_rtt_times_the_rtt(tmp_path, lost):
    """1 MB/s × 100 ms.  With two holes, the last retransmission's ACK acknowledges 150 segments
    SACKed long before, 101 ms after the partial ACK of the first: no delivery rate (1.49 MB/s),
    so the rate is taken before the first retransmission."""
    d = tmp_path / "run"
    (d / "pcap").mkdir(parents=True)
    _write(d / "pcap" / "client-client-eth0.pcap", _upload(lost))
    (d / "manifest.json").write_text(json.dumps({"roles": {"client": "client", "server": "server"}}))
    out = run_metrics(d)
    assert out["metrics"]["retransmissions"] == len(lost)
    assert out["metrics"]["bdp_bytes"] == pytest.approx(100_000, rel=0.011)
    assert out["metrics"]["max_in_flight_bytes"] == (100_000 if not lost else 200_000)


def test_a_control_connection_opened_first_is_not_the_first_data_connection(tmp_path):
    """iperf3 opens a control connection (a few hundred bytes) before its data: the BDP and the
    flights are the upload's, not the control connection's 37-byte flights."""
    ctl = [(-50, IP(src=C, dst=S) / TCP(sport=999, dport=80, flags="S", seq=7, options=[("WScale", 7)])),
           (-40, IP(src=S, dst=C) / TCP(sport=80, dport=999, flags="SA", seq=70, ack=8)),
           (-40, IP(src=C, dst=S) / TCP(sport=999, dport=80, flags="A", seq=8, ack=71)),
           (-39, IP(src=C, dst=S) / TCP(sport=999, dport=80, flags="PA", seq=8, ack=71) / Raw(b"c" * 37)),
           (-29, IP(src=S, dst=C) / TCP(sport=80, dport=999, flags="A", seq=71, ack=45))]
    d = tmp_path / "run"
    (d / "pcap").mkdir(parents=True)
    _write(d / "pcap" / "client-client-eth0.pcap", [("", t, p) for t, p in ctl] + _upload())
    (d / "manifest.json").write_text(json.dumps({"roles": {"client": "client", "server": "server"}}))
    out = run_metrics(d)
    m = out["metrics"]
    assert m["bdp_bytes"] == pytest.approx(100_000, rel=0.011)
    assert m["flight_bytes"][0] > 37 and m["cumulative_5"][0] == 37 and len(m["cumulative_5"]) == 2
    assert out["checks"]["wscale"]["client"] == -1          # the upload's SYN, not the control's (7)


def test_max_delivery_rate():
    from analysis.tcp import max_delivery_rate
    t = np.array([0, 10, 20, 30, 40]) * 1_000_000
    delivered = np.array([0, 1000, 2000, 6000, 7000])
    assert max_delivery_rate(t, delivered, 20_000_000) == pytest.approx(5000 / 0.02)   # 10 → 30 ms
    assert max_delivery_rate(t, delivered, 40_000_000) == pytest.approx(7000 / 0.04)
    assert max_delivery_rate(t, delivered, 50_000_000) is None
    assert max_delivery_rate(t[:1], delivered[:1], 1) is None


def test_a_request_issued_without_its_last_byte_is_named_not_silently_dropped(tmp_path):
    """A client log cut after request 2 was issued (the app killed, the file copied short): the
    completions of 0 and 1 are the metric, and the check says request 2 has no answer."""
    d = tmp_path / "run"
    d.mkdir()
    events = [{"t": 1000 * r + dt, "event": ev, "req": r} for r in range(3)
              for dt, ev in ((0, "request_issued"), (300, "last_response_byte"))
              if (r, ev) != (2, "last_response_byte")]
    (d / "client.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = run_metrics(d)
    assert out["metrics"]["completion_ms"] == [0.0003, 0.0003]
    assert out["checks"]["unanswered_requests"] == [2]
    (d / "client.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[:4]))
    assert "unanswered_requests" not in run_metrics(d)["checks"]
    (d / "client.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[:4]) + '{"t": 5')
    (msg,) = run_metrics(d)["checks"]["log_damage"]["client.jsonl"]     # a cut last line: said
    assert msg.startswith("cut short: line 5")
