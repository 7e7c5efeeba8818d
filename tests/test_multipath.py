"""multipath and duplicate apps without root: the split arithmetic, loopback runs, garbage peers."""
import json
import socket
import subprocess
import sys

import pytest

from analysis.multipath import duplicate_metrics
from testbed.apps.multipath import shares


def test_shares_follow_the_weights_and_sum_to_the_total():
    assert shares(30_000_000, [20e6, 10e6]) == [20_000_000, 10_000_000]
    assert sum(shares(1001, [1, 1, 1])) == 1001
    with pytest.raises(ValueError):
        shares(10, [1, 0])


def _server(module, tmp_path, *extra):
    proc = subprocess.Popen([sys.executable, "-m", module, "server", "--listen", "127.0.0.1:0",
                             "--log", str(tmp_path / "server.jsonl"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("ready"), proc.stderr.read()
    return proc, int(line.split(":")[-1])


def _events(path, name):
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == name]


def test_multipath_server_survives_garbage_then_serves(tmp_path):
    proc, port = _server("testbed.apps.multipath", tmp_path, "--scheme", "single")
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        r = subprocess.run([sys.executable, "-m", "testbed.apps.multipath", "client", "--server",
                            f"127.0.0.1:{port}", "--log", str(tmp_path / "client.jsonl"),
                            "--scheme", "single", "--size", "1MB", "--paths", "127.0.0.1"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert _events(tmp_path / "server.jsonl", "peer_error")
    assert _events(tmp_path / "client.jsonl", "transfer_done")[0]["bytes"] == 1_000_000


def test_duplicate_dedups_by_chunk_number_and_logs_garbage(tmp_path):
    proc, port = _server("testbed.apps.duplicate", tmp_path)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"junk", ("127.0.0.1", port))
        r = subprocess.run([sys.executable, "-m", "testbed.apps.duplicate", "client", "--server",
                            f"127.0.0.1:{port}", "--log", str(tmp_path / "client.jsonl"),
                            "--chunks", "10", "--tau", "2ms", "--paths", "127.0.0.1,127.0.0.2",
                            "--linger", "200ms"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "sent 10 chunks" in r.stdout and "2 copies each" in r.stdout
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    m = duplicate_metrics(tmp_path)["metrics"]
    assert m["delivered"] == 10 and m["duplicates"] == 10 and m["lost"] == []
    assert _events(tmp_path / "server.jsonl", "peer_error")


def test_mptcp_scheme_refuses_to_touch_the_hosts_own_path_manager(tmp_path):
    r = subprocess.run([sys.executable, "-m", "testbed.apps.multipath", "client", "--server",
                        "127.0.0.1:1", "--log", str(tmp_path / "c.jsonl"), "--scheme", "mptcp"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "inside a testbed namespace" in r.stderr and "Traceback" not in r.stderr
