"""reqresp --transport udp over loopback (no root): execute() runs it like any workload; a live
server survives random datagrams; bad factor values and TCP-only options are refused with one
line."""
import random
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO
from testbed.host import lifecycle
from testbed import workloads
from testbed.run.plan import resolve
from testbed.spec.errors import UsageError
from testbed.run.execute import execute
from testbed.spec.runspec import CaptureSpec, RunSpec

from tests.fixtures.apps import events

SPEC = RunSpec(topology="loopback", workload="reqresp", capture=CaptureSpec("none"),
               params={"transport": "udp", "requests": 2, "fec": "fixed:8", "process": "1ms"})


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path / "state")


@pytest.mark.root
def test_reqresp_over_udp_through_execute_on_loopback(tmp_path):
    r = execute(SPEC, tmp_path / "run")
    assert r.status == "complete"
    assert r.apps["client"][2] == "testbed.apps.udpreq" and "--fec" in r.apps["server"]
    assert not {"--sample", "--write", "--tls"} & set(r.apps["client"] + r.apps["server"])
    assert len(r.metrics["completion_ms"]) == 2
    # all 245 source packets of each request; of the 8 repair packets, those sent before the
    # server's ACK saying the message was delivered (it comes after the 245th, on a busy host
    # sometimes before the sender got to the repair packets: they are then not needed)
    assert r.checks["source_packets"] == 2 * 245 and r.checks["repair_packets"] <= 2 * 8
    done = events(r.dir / "server.jsonl", "request_complete")
    assert {e["sha256"] for e in done} == {events(r.dir / "client.jsonl", "request_body")[0]["sha256"]}
    # the processing (1 ms) is a timed step from each request's delivery, as over TCP
    steps = events(r.dir / "server.jsonl", "step")
    assert [(s["name"], s["ms"], s["req"]) for s in steps] == [("process", 1.0, e["req"]) for e in done]
    assert all(s["start"] >= e["t"] for s, e in zip(steps, done))


def test_tcp_socket_factors_and_bad_levels_are_refused(tmp_path):
    for path, value in (("socket.cc", "bbr"), ("socket.nodelay", True), ("host.initcwnd", 10)):
        with pytest.raises(UsageError, match=r"TCP factors \(" + path.split(".")[1] + r"\) do not apply"):
            resolve(SPEC.set("topology", "longhaul").set(path, value))
    with pytest.raises(UsageError, match="fixed:R"):
        execute(SPEC.set("params.fec", "fixed"), tmp_path / "b")
    with pytest.raises(UsageError, match="ACK policy"):
        execute(SPEC.set("params.ack_policy", "sometimes"), tmp_path / "c")


def test_server_counts_random_datagrams_and_still_answers(tmp_path):
    port = 5943
    log = tmp_path / "server.jsonl"
    server = subprocess.Popen([sys.executable, "-m", "testbed.apps.udpreq", "server", "--listen",
                               f"127.0.0.1:{port}", "--log", str(log), "--fec", "adaptive"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdout.readline().startswith(b"ready")
        rng = random.Random(3)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(2000):
                d = rng.randbytes(rng.randrange(0, 1500))
                if rng.random() < 0.3 and d:
                    d = b"\xfc" + bytes([rng.choice((1, 2, 3))]) + d[2:]     # valid-looking header
                s.sendto(d, ("127.0.0.1", port))
            time.sleep(0.5)
        client = subprocess.run([sys.executable, "-m", "testbed.apps.udpreq", "client", "--server",
                                 f"127.0.0.1:{port}", "--log", str(tmp_path / "client.jsonl"),
                                 "--fec", "adaptive", "--requests", "2", "--process", "1ms"],
                                cwd=REPO, capture_output=True, text=True, timeout=120)
        assert client.returncode == 0, client.stderr
        assert server.poll() is None                                  # still running
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert len(events(log, "request_complete")) == 2
    final = [e for e in events(log, "transport_stats") if e["conn"] is None]
    assert final and final[0]["unknown_peer_junk"] + final[0]["malformed"] >= 2000


def test_bad_argument_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "testbed.apps.udpreq", "client", "--server",
                          "127.0.0.1:9", "--log", str(tmp_path / "c.jsonl"), "--pacing", "fast"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "pacing" in out.stderr


@pytest.mark.root
def test_ack_every_n_keeps_its_promise_through_the_udp_loop(tmp_path):
    """One request of 245 source + up to 8 repair packets (those sent before the delivery ACK
    came back), in order on loopback: an ACK per 4 packets, one at once when the 245th completes
    the message, none for a trailing remainder."""
    r = execute(SPEC.set("params.ack_policy", "n:4").set("params.requests", 1), tmp_path / "run")
    stats = [e for e in events(r.dir / "server.jsonl", "transport_stats") if e["conn"] == 0]
    sent = [e for e in events(r.dir / "client.jsonl", "transport_stats") if e["conn"] == 0][0]
    assert sent["source_sent"] == 245 and sent["repair_sent"] <= 8 and sent["retransmitted"] == 0
    expected, unacked = 0, 0
    for i in range(sent["source_sent"] + sent["repair_sent"]):
        unacked += 1
        if unacked == 4 or i == 244:
            expected, unacked = expected + 1, 0
    assert stats[0]["acks_sent"] == expected


@pytest.mark.parametrize("given, message", [
    ({"tls": True}, "tls applies to transport tcp only; allowed: mode, requests"),
    ({"write": "blocks", "path": "relay"}, "path, write apply to transport tcp only"),
    ({"sample": "0"}, "sample applies to transport tcp only"),
])
def test_tcp_only_parameters_are_refused_naming_what_udp_takes(given, message):
    with pytest.raises(UsageError, match=message) as e:
        resolve(RunSpec(topology="loopback", workload="reqresp", params={"transport": "udp", **given}))
    assert "process, transport, request_timeout, fec, ack_policy, pacing, loss_prior, backoff" in str(e.value)


def test_udp_parameters_are_refused_over_tcp():
    with pytest.raises(UsageError, match="fec applies to transport udp only"):
        resolve(RunSpec(topology="loopback", workload="reqresp", params={"fec": "adaptive"}))


def test_udpreq_is_an_alias_of_reqresp_over_udp():
    from testbed.cli.run import spec_from_args
    from testbed.cli import build_parser
    alias = RunSpec(workload="udpreq", params={"fec": "adaptive"})
    assert alias == RunSpec(workload="reqresp", params={"transport": "udp", "fec": "adaptive"})
    assert alias.to_dict()["workload"] == "reqresp"
    args = build_parser().parse_args(["run", "udpreq", "--topo", "loopback", "--fec", "adaptive"])
    assert spec_from_args(args) == alias.set("topology", "loopback")
    with pytest.raises(UsageError, match="cannot take transport='tcp'"):
        RunSpec(workload="udpreq", params={"transport": "tcp"})
    reqresp = workloads.get("reqresp")
    udp = reqresp.for_params(reqresp.make_params(alias.params))
    assert (udp.module, udp.port, udp.transport) == ("testbed.apps.udpreq", 5003, "udp")
    assert reqresp.for_params(reqresp.make_params({})) is reqresp


@pytest.mark.root
def test_reuse_warms_the_endpoint_until_its_loss_rate_is_measured(tmp_path):
    """Mode reuse: one untimed request (245 packets ≥ 100 fates) warms the kept endpoint, though
    up to 10 are allowed; the timed requests then share its socket."""
    r = execute(SPEC.set("params.mode", "reuse"), tmp_path / "run")
    done = events(r.dir / "client.jsonl", "warmup_done")
    assert [(e["requests"], e["warm"]) for e in done] == [(1, True)] and done[0]["loss_samples"] >= 100
    assert len(events(r.dir / "client.jsonl", "conn")) == 1 and len(r.metrics["completion_ms"]) == 2
