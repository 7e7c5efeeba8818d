"""streams workload (C8) without root: the sans-I/O core, the analysis, and loopback runs
(TCP and QUIC), including peers that send garbage."""
import json
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from analysis.streams import covered_at, delivery_series, gaps, run_metrics
from testbed.protocols.streammux import AUDIO, IMAGE, Decoder, Plan, ProtocolError, Scheduler

PLAN = Plan(image_bytes=40000, frame_bytes=16384, chunks=3, chunk_bytes=960, tau_ns=20_000_000,
            audio_start_ns=0, deadline_ns=400_000_000)


def test_fifo_sends_the_whole_image_first_priority_the_ready_audio():
    fifo, prio = Scheduler(PLAN, "fifo"), Scheduler(PLAN, "priority")
    for s in (fifo, prio):
        s.poll(0)
    assert fifo.next() == (IMAGE, 0) and prio.next() == (AUDIO, 0)
    assert prio.next() == (IMAGE, 0)
    prio.poll(20_000_000)
    assert prio.next() == (AUDIO, 1)
    order = [fifo.next() for _ in range(3)]
    assert order == [(IMAGE, 1), (IMAGE, 2), (AUDIO, 0)]
    assert fifo.wake() == 20_000_000


def test_decoder_splits_frames_across_reads_with_offsets():
    data = PLAN.frame(AUDIO, 0) + PLAN.frame(IMAGE, 2)
    d = Decoder()
    got = d.feed(data[:5]) + d.feed(data[5:1000]) + d.feed(data[1000:])
    assert got == [(AUDIO, 0, 0, 969), (IMAGE, 2, 969, len(data))]
    with pytest.raises(ProtocolError):
        Decoder().feed(b"GET / HTTP/1.1\r\n")


def test_request_mismatch_is_a_protocol_error():
    other = Plan(1, 1, 1, 1, 1, 0, 0)
    with pytest.raises(ProtocolError, match="does not match"):
        PLAN.check_request(other.request())


def test_covered_at_needs_every_byte_in_any_order():
    t = np.array([1, 2, 3, 4])
    s = np.array([0, 200, 100, 300])
    e = np.array([100, 300, 200, 400])
    assert covered_at(t, s, e, 150, 250) == 3          # 100-200 arrives last (t=3)
    assert covered_at(t, s, e, 0, 100) == 1
    assert covered_at(t, s, e, 350, 500) is None


def test_gaps_open_on_a_hole_and_close_on_its_repair():
    t = np.array([1, 2, 3, 4])
    s = np.array([0, 200, 300, 100])
    e = np.array([100, 300, 400, 200])
    assert gaps(t, s, e) == [(2, 4)]
    # restricted to ranges: bytes outside them (another stream on the connection) do not count
    assert gaps(t, s, e, [(0, 100), (200, 400)]) == []


def _serve(transport, tmp_path, *extra):
    port = _free_port()
    log = tmp_path / "server.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.apps.streams", "server", "--listen",
                             f"127.0.0.1:{port}", "--log", str(log), "--transport", transport,
                             "--image", "100KB", "--schedule", "priority", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("ready")
    return proc, port


def _client(transport, tmp_path, port):
    return subprocess.run([sys.executable, "-m", "testbed.apps.streams", "client", "--server",
                           f"127.0.0.1:{port}", "--log", str(tmp_path / "client.jsonl"),
                           "--transport", transport, "--image", "100KB", "--timeout", "30s"],
                          capture_output=True, text=True, timeout=60)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_longest_gap_counts_an_open_one_longest():
    from analysis.streams import longest_gap
    assert longest_gap([]) is None
    assert longest_gap([(0, 10), (20, 90), (100, 150)]) == (20, 90)
    assert longest_gap([(0, 500), (600, None)]) == (600, None)


@pytest.mark.root
@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_loopback_run_survives_a_garbage_peer(transport, tmp_path):
    proc, port = _serve(transport, tmp_path)
    try:
        if transport == "tcp":
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                s.settimeout(10)
                try:
                    assert s.recv(100) == b""      # dropped by the server: FIN ...
                except ConnectionResetError:       # ... or RST (unread bytes)
                    pass
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                for junk in (b"\x00" * 3, b"\xff" * 1200, b"hello"):
                    s.sendto(junk, ("127.0.0.1", port))
            time.sleep(0.3)
        r = _client(transport, tmp_path, port)
        assert r.returncode == 0, r.stderr
        assert "8 chunks, 100000 image bytes" in r.stdout
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    server = [json.loads(x) for x in (tmp_path / "server.jsonl").read_text().splitlines()]
    assert any(e["event"] == "peer_error" for e in server)
    if transport == "quic":
        assert any((tmp_path / "client.qlog").glob("*.qlog"))
        assert "CLIENT_HANDSHAKE_TRAFFIC_SECRET" in (tmp_path / "client.keylog").read_text()
        m = run_metrics(tmp_path, 0)
        assert m["checks"]["complete_from"] == "qlog" and m["metrics"]["audio_chunks"] == 8
        series = delivery_series(tmp_path)
        assert series["audio delivered"][1][-1] == 8 * (960 + 9)
        assert series["image complete"][1][-1] == 100_000 + 7 * 9      # 7 frames of <= 16 KB


@pytest.mark.root
def test_client_given_garbage_by_the_server_says_so_without_a_traceback(tmp_path):
    with socket.socket() as ls:
        ls.bind(("127.0.0.1", 0))
        ls.listen()
        proc = subprocess.Popen([sys.executable, "-m", "testbed.apps.streams", "client", "--server",
                                 f"127.0.0.1:{ls.getsockname()[1]}", "--log", str(tmp_path / "c.jsonl")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        conn, _ = ls.accept()
        with conn:
            conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" * 4)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "Traceback" not in err and "bad frame header" in err
    assert "bad frame header" in (tmp_path / "c.jsonl").read_text()


def test_quic_resumed_connection_sends_its_request_as_0rtt(tmp_path):
    proc, port = _serve("quic", tmp_path)
    try:
        r = subprocess.run([sys.executable, "-m", "testbed.apps.streams", "client", "--server",
                            f"127.0.0.1:{port}", "--log", str(tmp_path / "client.jsonl"), "--transport",
                            "quic", "--image", "100KB", "--resume", "--timeout", "30s"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    m = run_metrics(tmp_path, 0)
    assert m["checks"]["tls_resumed"] == 1.0 and m["checks"]["early_data_accepted"] is True
    assert m["metrics"]["first_byte_ms"] > 0
    assert len(list((tmp_path / "client.qlog").glob("*.qlog"))) == 1      # the timed connection only


def _covered_brute(t, start, end, lo, hi):
    for ti in sorted(set(t.tolist())):
        have = sorted((max(s, lo), min(e, hi)) for s, e, tj in zip(start, end, t) if tj <= ti and e > lo and s < hi)
        reach = lo
        for a, b in have:
            if a > reach:
                break
            reach = max(reach, b)
        if reach >= hi:
            return ti
    return None


def test_covered_at_and_gaps_match_a_brute_force_on_reordered_arrivals():
    rng = np.random.default_rng(3)
    start = np.arange(0, 60 * 1000, 1000)
    end = start + 1000
    t = np.arange(len(start)) * 10 + rng.integers(0, 40, len(start))   # reordered
    t[17] += 5000                                                       # one segment repaired late
    for lo, hi in ((0, 60_000), (16_500, 18_200), (0, 9000), (59_000, 60_000)):
        assert covered_at(t, start, end, lo, hi) == _covered_brute(t, start, end, lo, hi)
    g = gaps(t, start, end)
    assert g and g[-1][1] == t[17]                     # the last hole closes with the late segment
    assert gaps(t, start, end, [(0, 17_000), (18_000, 60_000)])[-1][1] < t[17]   # not counted
