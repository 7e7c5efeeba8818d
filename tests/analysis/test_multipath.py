"""multipath and duplicate apps without root: the split arithmetic, loopback runs, garbage peers."""
import socket

import pytest

from analysis.multipath import duplicate_metrics
from tests.fixtures.apps import events, run, server
from testbed.apps.multipath import shares


def test_shares_follow_the_weights_and_sum_to_the_total():
    assert shares(30_000_000, [20e6, 10e6]) == [20_000_000, 10_000_000]
    assert sum(shares(1001, [1, 1, 1])) == 1001
    with pytest.raises(ValueError):
        shares(10, [1, 0])


@pytest.mark.root
def test_multipath_server_survives_garbage_then_serves(tmp_path):
    with server("testbed.apps.multipath", "--log", str(tmp_path / "server.jsonl"),
                "--scheme", "single") as (_, port):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        r = run("testbed.apps.multipath", "client", "--server", f"127.0.0.1:{port}",
                "--log", str(tmp_path / "client.jsonl"), "--scheme", "single", "--size", "1MB",
                "--paths", "127.0.0.1")
        assert r.returncode == 0, r.stderr
    assert events(tmp_path / "server.jsonl", "peer_error")
    assert events(tmp_path / "client.jsonl", "transfer_done")[0]["bytes"] == 1_000_000


def test_duplicate_dedups_by_chunk_number_and_logs_garbage(tmp_path):
    with server("testbed.apps.duplicate", "--log", str(tmp_path / "server.jsonl")) as (_, port):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"junk", ("127.0.0.1", port))
        r = run("testbed.apps.duplicate", "client", "--server", f"127.0.0.1:{port}",
                "--log", str(tmp_path / "client.jsonl"), "--chunks", "10", "--tau", "2ms",
                "--paths", "127.0.0.1,127.0.0.2", "--linger", "200ms")
        assert r.returncode == 0, r.stderr
        assert "sent 10 chunks" in r.stdout and "2 copies each" in r.stdout
    m = duplicate_metrics(tmp_path)["metrics"]
    assert m["delivered"] == 10 and m["duplicates"] == 10 and m["lost"] == []
    assert m["received_bytes"] == 2 * 10 * 640                 # both copies' payload, 640 B default
    assert m["failed_fraction"] == 0 and m["attempt_failed"] == [0] * 10
    assert events(tmp_path / "server.jsonl", "peer_error")


def test_mptcp_scheme_refuses_to_touch_the_hosts_own_path_manager(tmp_path):
    r = run("testbed.apps.multipath", "client", "--server", "127.0.0.1:1",
            "--log", str(tmp_path / "c.jsonl"), "--scheme", "mptcp")
    assert r.returncode == 1 and "inside a testbed namespace" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("scheme", ["split", "mptcp"])
def test_a_damaged_capture_is_named_in_the_checks(tmp_path, scheme):
    """The paths' bytes of a capture that lost its file header are 0: said, and not taken as an
    idle path (MPTCP's fallback is then unknown, not true)."""
    import json

    from analysis.multipath import run_metrics
    (tmp_path / "pcap").mkdir()
    (tmp_path / "pcap" / "client-client-eth1.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(6))
    (tmp_path / "client.jsonl").write_text("".join(json.dumps(e) + "\n" for e in (
        {"t": 1, "event": "transfer_start", "scheme": scheme}, {"t": 2_000_001, "event": "transfer_done"})))
    out = run_metrics(tmp_path)
    assert out["checks"].get("mptcp_fallback", "absent") == ("absent" if scheme == "split" else None)
    assert out["metrics"]["path_bytes"] == {"client-eth1": 0}
    (msg,) = out["checks"]["capture_damage"]["client-client-eth1.pcap"]
    assert "cut short" in msg
