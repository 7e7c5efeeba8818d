"""A real download over a lossy path: the run's retransmissions are the sender's own count —
its capture's, and the sender's kernel's (TCP_INFO total_retrans at the end of the
connection, in the server's event log) — not the receiver's view, which misses the copies lost
on the way."""
import pytest

from analysis import applog, report
from testbed.run.execute import execute
from testbed.spec.runspec import CaptureSpec, RunSpec

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("isolated_state")]

PATH = {"delay": "10ms", "loss_up": "0%", "loss_down": "3%", "rate_up": "50mbit",
        "rate_down": "50mbit"}


def _only_flow(pcap):
    (flow,) = [f for f in report.analyze_file(pcap)["flows"] if f["proto"] == "tcp"]
    return flow


def test_a_downloads_retransmissions_are_the_senders(tmp_path):
    spec = RunSpec(topology="longhaul", topology_params=PATH, backend="userspace",
                   workload="bulk", params={"direction": "down", "size": "3MB"},
                   capture=CaptureSpec(("client", "server")))
    r = execute(spec, tmp_path / "run")
    assert r.status == "complete", r.error
    assert r.capture["dropped_by_kernel"] == 0       # every packet of both captures on file
    samples = [e for e in applog.load(r.dir / "server.jsonl") if e["event"] == "tcp_info"]
    kernel = samples[-1]["total_retrans"]
    (server_pcap,) = (r.dir / "pcap").glob("server-*.pcap")
    (client_pcap,) = (r.dir / "pcap").glob("client-*.pcap")
    at_sender = _only_flow(server_pcap)["retransmissions"]["total"]
    at_receiver = _only_flow(client_pcap)["retransmissions"]["total"]
    assert kernel > 0
    assert r.metrics["retransmissions"] == at_sender == kernel
    assert at_receiver <= at_sender
    assert r.metrics["max_in_flight_bytes"] == _only_flow(server_pcap)["in_flight"]["max"]
    # the bytes still in the network: below the outstanding once SACKed bytes wait behind holes
    assert r.metrics["max_pipe_bytes"] == _only_flow(server_pcap)["in_flight"]["pipe_max"]
    assert 0 < r.metrics["max_pipe_bytes"] <= r.metrics["max_in_flight_bytes"]
    assert "sender_metrics" not in r.checks


def test_a_download_captured_at_the_receiver_only_says_so(tmp_path):
    spec = RunSpec(topology="longhaul", topology_params=PATH, backend="userspace",
                   workload="bulk", params={"direction": "down", "size": "500KB"},
                   capture=CaptureSpec(("client",)))
    r = execute(spec, tmp_path / "run")
    assert r.status == "complete", r.error
    assert "retransmissions" not in r.metrics and "max_in_flight_bytes" not in r.metrics
    assert "no capture at the data sender server" in r.checks["sender_metrics"]
    assert r.metrics["goodput_mbps"] > 0
