"""End to end through the userspace emulator: Linux TCP over the long-haul topology with
delay and loss, captured on both hosts, analysed, joined with the emulator's frame log, and
checked against tshark and against what the emulator says it did."""
import shutil
import subprocess
import sys
import time

import pytest

from tests.fixtures.vethpair import CLIENT, SERVER

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("tshark"), reason="needs tshark")]

DELAY_MS = 20


def _run(root):
    """One run: three 300 kB responses over the long-haul path (3 % lost down), captured on both
    hosts; its directory."""
    from testbed.host.capture import capture_hosts
    from testbed.run.network import Testbed
    with Testbed("longhaul", backend="userspace", results_root=root,
                 overrides={"delay": f"{DELAY_MS}ms", "loss_down": "3%", "loss_up": "0%"}) as tb:
        srv = tb.popen("server", [sys.executable, "-c", SERVER, "rr", "5300", "3"], name="server",
                       text=True)
        assert srv.stdout.readline().strip() == "ready"
        with capture_hosts(tb) as caps:
            r = tb.run("client", [sys.executable, "-c", CLIENT, "rr", tb.ip("server"), "5300", "3",
                                  "300000"], timeout=60, check=True)
            srv.wait(30)
            time.sleep(3 * DELAY_MS / 1e3)      # let the last ACKs and FINs reach the captures
        d = tb.dir
    assert all(c.result.ok for c in caps), [c.result for c in caps]
    (d / "client.jsonl").write_text(r.stdout)
    return d


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("emu"))


def _tshark(f):
    """Per frame of ``f``: its number, tshark's retransmission and out-of-order flags, its
    initial RTT."""
    out = subprocess.run(["tshark", "-r", str(f), "-T", "fields", "-e", "frame.number",
                          "-e", "tcp.analysis.retransmission", "-e", "tcp.analysis.fast_retransmission",
                          "-e", "tcp.analysis.spurious_retransmission", "-e", "tcp.analysis.out_of_order",
                          "-e", "tcp.analysis.initial_rtt"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return [x.split("\t") for x in out]


def test_server_side_capture_vs_tshark_and_emulator(run_dir, tmp_path):
    """The module's run: tshark's retransmissions and initial RTT, and the emulator's drops.  The
    initial RTT is one handshake's sample, under 2 × delay + 15 ms (0.1–0.2 ms above 2 × delay
    on a quiet machine), which a machine that does not run the emulator or a host for 15 ms around
    the handshake exceeds: it (and the Karn RTTs' minimum, under the same bound) is measured
    again, in a run of its own, up to ``attempts.ATTEMPTS`` times in all (the module's run is the
    first), until one is within it.  Neither may be below 2 × delay in any run, and a wrong
    delay misses in each."""
    from analysis import flows, linkjoin, pcap, report, tcp
    from testbed.emulator.linklog import read_log
    from tests.fixtures.attempts import attempts, report as attempts_report
    f = run_dir / "pcap" / "server-server-eth0.pcap"
    pk = pcap.read(f)
    (flow,) = [x for x in flows.split(pk) if x.key.proto == pcap.TCP]
    d = tcp.analyze_direction(pk, flow, False)          # the server sends the responses
    theirs = {int(c[0]) for c in _tshark(f) if any(c[1:5])}
    assert {r.packet + 1 for r in d.tracker.retransmissions} == theirs
    runs = [run_dir]

    def measure():
        rd = runs.pop() if runs else _run(tmp_path / f"again{len(list(tmp_path.glob('again*')))}")
        f = rd / "pcap" / "server-server-eth0.pcap"
        irtt = {c[5] for c in _tshark(f) if c[5]}
        (fl,) = [x for x in report.analyze_file(f)["flows"] if x["proto"] == "tcp"]
        assert fl["initial_rtt_ms"] == pytest.approx(float(irtt.pop()) * 1e3, abs=1e-6)
        assert fl["vantage"]["capture_near"] == "server" and fl["data_direction"] == "s2c"
        rtt = {"initial": fl["initial_rtt_ms"], "Karn min": fl["directions"]["s2c"]["rtt_ms"]["karn"]["min"]}
        print(f"\n{rd.name}: RTT ms {rtt}")
        assert all(2 * DELAY_MS <= v for v in rtt.values()), rtt     # no RTT below the path's
        return rtt

    tries = attempts(measure, lambda rtt: [f"{k} RTT {v:.3f} ms, not under {2 * DELAY_MS + 15} ms"
                                           for k, v in rtt.items() if not v < 2 * DELAY_MS + 15])
    assert not tries[-1]["misses"], attempts_report(tries)
    # the emulator's log of the server->client direction: every data segment it dropped was
    # sent again by the server, and each retransmission the capture shows repairs a drop
    header, records = read_log(run_dir / "emulator" / "server-client.frames")
    j = linkjoin.join(pk, records)
    idx, fwd = flow.index, ~flow.fwd
    data = fwd & (pk.payload_len[idx] > 0)
    lost = idx[data & (j.verdict[idx] == 1)]
    assert len(lost) > 0 and (j.verdict[idx[data]] >= 0).all()
    rtx_seqs = {int(pk.seq[r.packet]) for r in d.tracker.retransmissions}
    assert {int(pk.seq[i]) for i in lost} <= rtx_seqs
    assert len(d.tracker.retransmissions) >= len(lost)


def test_client_side_completion(run_dir):
    from analysis import applog, report
    events = applog.load(run_dir / "client.jsonl")
    res = report.analyze_file(run_dir / "pcap" / "client-client-eth0.pcap", events=events)
    (fl,) = [x for x in res["flows"] if x["proto"] == "tcp"]
    assert fl["vantage"]["capture_near"] == "client"
    comp = fl["completion"]
    assert [c["response_bytes"] for c in comp] == [300_000] * 3
    for c in comp:
        assert c["app"]["request_start"] <= c["request_first"]
        # a request needs at least one round trip before its response starts arriving
        assert c["response_first"] - c["request_first"] >= 2 * DELAY_MS / 1e3
        assert c["response_last"] <= c["app"]["request_done"]


def test_native_engine_agrees_with_reference(run_dir):
    """The fast path (analysis/native) and the Python reference on both hosts' captures."""
    from analysis import native
    if native.engine("auto") != "native":
        pytest.skip("analysis/native not built")
    from tests.analysis.test_native import assert_engines_agree
    for f in sorted((run_dir / "pcap").glob("*.pcap")):
        assert assert_engines_agree(f) > 100, f
