"""The apps as separate processes on 127.0.0.1 (no root): events, modes, TLS, relay, errors."""
import socket

import pytest

from tests.fixtures.apps import events, run, server
from testbed.apps import eventlog as ev
from testbed.apps import payload
from testbed.apps.reqresp import WARM_STEADY

# the apps set TCP_CONGESTION cubic by default, which an unprivileged socket may not
pytestmark = pytest.mark.root

RR = "testbed.apps.reqresp"
CLIENT_EVENTS = [ev.REQUEST_ISSUED, ev.TCP_CONNECTED, ev.FIRST_REQUEST_BYTE_SENT,
                 ev.LAST_REQUEST_BYTE_SENT, ev.FIRST_RESPONSE_BYTE, ev.LAST_RESPONSE_BYTE]


def timeline(log, req):
    return [e for e in events(log) if e.get("req") == req and e["event"] != ev.TCP_INFO]


def test_reqresp_new_connection_per_request(tmp_path):
    with server(RR, "--log", str(tmp_path / "s.jsonl")) as (_, port):
        r = run(RR, "client", "--server", f"127.0.0.1:{port}", "--requests", "3", "--log",
                str(tmp_path / "c.jsonl"), "--cc", "reno", "--process", "20ms")
    assert r.returncode == 0, r.stderr
    log = tmp_path / "c.jsonl"
    for k in range(3):
        names = [e["event"] for e in timeline(log, k)]
        assert [n for n in names if n in CLIENT_EVENTS] == CLIENT_EVENTS
        t = {e["event"]: e["t"] for e in timeline(log, k)}
        assert t[ev.LAST_RESPONSE_BYTE] - t[ev.LAST_REQUEST_BYTE_SENT] >= 20e6   # server's T
    conns = events(log, ev.CONN)
    assert len({c["sport"] for c in conns}) == 3                   # a new 5-tuple each time
    assert all(f["readback"]["cc"] == "reno" for f in events(log, ev.FACTORS))   # reno: allowed without root
    assert events(log, ev.TCP_INFO), "TCP_INFO sampled during transfers"
    server_digests = {e["sha256"] for e in events(tmp_path / "s.jsonl", ev.REQUEST_COMPLETE)}
    assert server_digests == {payload.digest(payload.body())}      # same bytes every run
    summary = events(log, ev.SUMMARY)[0]
    assert summary["requests"] == 3 and summary["median_ms"] >= 20
    # what the client prints is what the run's metrics compute: request_issued → last_response_byte
    issued = {e["req"]: e["t"] for e in events(log, ev.REQUEST_ISSUED)}
    done = {e["req"]: e["t"] for e in events(log, ev.LAST_RESPONSE_BYTE)}
    assert summary["completion_ms"] == [round((done[k] - issued[k]) / 1e6, 3) for k in range(3)]


def test_reqresp_reuse_keeps_one_connection(tmp_path):
    with server(RR, "--log", str(tmp_path / "s.jsonl")) as (_, port):
        r = run(RR, "client", "--server", f"127.0.0.1:{port}", "--mode", "reuse", "--requests", "4",
                "--think", "10ms", "--log", str(tmp_path / "c.jsonl"))
    assert r.returncode == 0, r.stderr
    log = tmp_path / "c.jsonl"
    assert len(events(log, ev.CONN)) == 1
    warm = events(log, ev.WARMUP_DONE)[0]
    assert warm["warm"] and 1 <= warm["requests"] <= 10
    took = warm["took_ms"]  # warm by cwnd, or by two requests alike (on loopback, often the latter)
    assert warm["snd_cwnd"] >= warm["cwnd_wanted"] or (
        len(took) >= 2 and abs(took[-1] - took[-2]) <= WARM_STEADY * took[-2] + 0.001), warm
    assert len(events(tmp_path / "s.jsonl", ev.REQUEST_COMPLETE)) == warm["requests"] + 4
    issued = events(log, ev.REQUEST_ISSUED)
    assert [e["req"] for e in issued] == [0, 1, 2, 3]
    assert all(e.get("warmup") for e in events(log, ev.LAST_RESPONSE_BYTE) if e["req"] == "warmup0")
    assert not any(e["req"] == 0 for e in events(log, ev.TCP_CONNECTED))  # connected before timing
    conn = events(log, ev.CONN)[0]
    snap = events(log, ev.SOCKETS_CC)[0]["sockets"]                       # ss -ti at the end
    mine = [x for x in snap if x["local"] == f"{conn['src']}:{conn['sport']}"]
    assert mine and mine[0]["cc"] == events(log, ev.FACTORS)[-1]["readback"]["cc"]


def test_reqresp_tls13_with_resumption(tmp_path):
    with server(RR, "--tls", "--log", str(tmp_path / "s.jsonl")) as (_, port):
        r = run(RR, "client", "--server", f"127.0.0.1:{port}", "--tls", "--tls-resume", "--requests", "3",
                "--log", str(tmp_path / "c.jsonl"))
    assert r.returncode == 0, r.stderr
    done = events(tmp_path / "c.jsonl", ev.TLS_DONE)
    assert [d["version"] for d in done] == ["TLSv1.3"] * 3
    assert [d["resumed"] for d in done] == [False, True, True]


def test_relay_socks5_one_tunnel_many_streams(tmp_path):
    with server(RR, "--log", str(tmp_path / "s.jsonl")) as (_, port), \
         server("testbed.apps.relay", "--log", str(tmp_path / "sgw.jsonl"), role="server-gw") as (_, tport):
        socks_port = _free_port()
        import subprocess
        import sys
        cgw = subprocess.Popen([sys.executable, "-m", "testbed.apps.relay", "client-gw", "--socks",
                                f"127.0.0.1:{socks_port}", "--tunnel", f"127.0.0.1:{tport}",
                                "--window", "4MB", "--log", str(tmp_path / "cgw.jsonl")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert cgw.stdout.readline().startswith("ready")
            r = run(RR, "client", "--server", f"127.0.0.1:{port}", "--socks", f"127.0.0.1:{socks_port}",
                    "--requests", "3", "--log", str(tmp_path / "c.jsonl"))
            bad = run(RR, "client", "--server", f"127.0.0.1:{_free_port()}", "--socks",
                      f"127.0.0.1:{socks_port}", "--log", str(tmp_path / "bad.jsonl"))
        finally:
            cgw.terminate()
            cgw.wait(5)
    assert r.returncode == 0, r.stderr
    assert len(events(tmp_path / "c.jsonl", ev.SOCKS_DONE)) == 3
    assert len(events(tmp_path / "sgw.jsonl", ev.TUNNEL_UP)) == 1          # exactly one tunnel
    assert len(events(tmp_path / "cgw.jsonl", ev.TUNNEL_UP)) == 1
    assert [e["code"] for e in events(tmp_path / "cgw.jsonl", ev.SOCKS_REPLY)] == [0, 0, 0, 5]
    closes = events(tmp_path / "cgw.jsonl", ev.STREAM_CLOSE)
    assert [c["out"] for c in closes] == [354_640 + 20] * 3 and [c["in"] for c in closes] == [1000] * 3
    assert events(tmp_path / "s.jsonl", ev.REQUEST_COMPLETE)[0]["sha256"] == payload.digest(payload.body())
    assert bad.returncode == 1 and "reply code 5" in bad.stderr and "Traceback" not in bad.stderr
    tunnel = [e for e in events(tmp_path / "cgw.jsonl", ev.FACTORS)][0]["readback"]
    assert tunnel["nodelay"] and tunnel["rcvbuf"] == 8_000_000


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bulk_both_directions(tmp_path):
    with server("testbed.apps.bulk", "--log", str(tmp_path / "s.jsonl")) as (_, port):
        up = run("testbed.apps.bulk", "client", "--server", f"127.0.0.1:{port}", "--size", "5MB",
                 "--log", str(tmp_path / "up.jsonl"))
        down = run("testbed.apps.bulk", "client", "--server", f"127.0.0.1:{port}", "--duration",
                   "0.3s", "--direction", "down", "--log", str(tmp_path / "down.jsonl"))
    assert up.returncode == 0 and down.returncode == 0, up.stderr + down.stderr
    assert events(tmp_path / "up.jsonl", ev.SUMMARY)[0]["bytes"] == 5_000_000
    d = events(tmp_path / "down.jsonl", ev.SUMMARY)[0]
    assert d["bytes"] > 0 and d["seconds"] >= 0.3


@pytest.mark.parametrize("direction", ["up", "down"])
def test_bulk_duration_goodput_over_the_window_drain_apart(tmp_path, direction):
    """A 64 KB receive window caps what is read per window; the sender's 4 MB send buffer then
    drains after the window, and the goodput counts only the window's bytes."""
    with server("testbed.apps.bulk", "--log", str(tmp_path / "s.jsonl"), "--rcvbuf", "64KB") as (_, port):
        r = run("testbed.apps.bulk", "client", "--server", f"127.0.0.1:{port}", "--duration", "0.5s",
                "--direction", direction, "--sndbuf", "4MB", "--rcvbuf", "64KB",
                "--log", str(tmp_path / "c.jsonl"))
    assert r.returncode == 0, r.stderr
    s = events(tmp_path / "c.jsonl", ev.SUMMARY)[0]
    assert s["window_s"] == 0.5 and 0 < s["window_bytes"] <= s["bytes"]
    assert s["goodput_bps"] == pytest.approx(8 * s["window_bytes"] / 0.5)
    assert s["drain_bytes"] == s["bytes"] - s["window_bytes"]
    assert s["drain_s"] == pytest.approx(s["seconds"] - 0.5, abs=1e-3)
    assert "window" in r.stdout and "drained" in r.stdout


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_audio_stream_on_c9_schedule(tmp_path, transport):
    with server("testbed.apps.audio", "--transport", transport, "--log", str(tmp_path / "s.jsonl")) as (_, port):
        r = run("testbed.apps.audio", "client", "--server", f"127.0.0.1:{port}", "--transport",
                transport, "--duration", "0.2s", "--buffer", "40ms", "--log", str(tmp_path / "c.jsonl"))
    assert r.returncode == 0, r.stderr
    arrivals = events(tmp_path / "c.jsonl", ev.CHUNK_ARRIVAL)
    assert [a["seq"] for a in arrivals] == list(range(10)) and arrivals[0]["bytes"] >= 960
    # chunk i is ready at (i+1)·20 ms and processed for 12 ms: it cannot arrive before that
    assert all(a["arrival_ms"] >= (a["seq"] + 1) * 20 + 12 for a in arrivals)
    if transport == "tcp":
        assert events(tmp_path / "s.jsonl", ev.TCP_INFO), "TCP_INFO sampled while streaming"
    plays = events(tmp_path / "c.jsonl", ev.PLAYBACK)
    assert {p["player"] for p in plays} == {"wait", "skip"}
    assert plays[0]["first_play"] == pytest.approx(arrivals[0]["arrival_ms"] + 40)
    # the processing is a timed step per chunk on the server's timeline: 12 ms, after its ready time
    steps = events(tmp_path / "s.jsonl", ev.STEP)
    assert [s["seq"] for s in steps] == list(range(10)) and {s["ms"] for s in steps} == {12.0}
    assert all(s["t"] - s["start"] >= 12e6 for s in steps)


def test_agent_rounds_reuse_vs_new(tmp_path):
    with server(RR, "--log", str(tmp_path / "s.jsonl")) as (_, port):
        for flag in ("--reuse", None):
            args = ["--server", f"127.0.0.1:{port}", "--rounds", "3", "--screenshot", "100KB",
                    "--model", "20ms", "--terminal", "10ms", "--log", str(tmp_path / f"{flag}.jsonl")]
            r = run("testbed.apps.agent", *args, *([flag] if flag else []))
            assert r.returncode == 0, r.stderr
            assert len(events(tmp_path / f"{flag}.jsonl", ev.ROUND_END)) == 3
            assert len(events(tmp_path / f"{flag}.jsonl", ev.CONN)) == (1 if flag else 3)


def test_agent_timed_steps_are_logged_and_in_the_whole_run(tmp_path):
    """Preparation once, encoding and terminal work per round: each a step event of its
    configured length, and the summary's total = setup + the whole rounds."""
    from analysis.runmetrics import run_metrics
    log = tmp_path / "client.jsonl"
    with server(RR, "--log", str(tmp_path / "s.jsonl")) as (_, port):
        r = run("testbed.apps.agent", "--server", f"127.0.0.1:{port}", "--rounds", "2",
                "--screenshot", "10KB", "--model", "20ms", "--terminal", "50ms", "--encode", "30ms",
                "--prep", "100ms", "--reuse", "--log", str(log))
    assert r.returncode == 0, r.stderr
    steps = events(log, ev.STEP)
    assert [(s["name"], s["round"], s["ms"]) for s in steps] == [
        ("prep", None, 100), ("encode", 0, 30), ("terminal", 0, 50), ("encode", 1, 30), ("terminal", 1, 50)]
    assert all(s["t"] - s["start"] >= s["ms"] * 1e6 for s in steps)
    m = run_metrics(tmp_path)["metrics"]
    assert m["setup_s"] >= 0.1 and all(x >= 0.02 + 0.03 + 0.05 for x in m["round_s"])
    assert m["total_s"] == pytest.approx(m["setup_s"] + sum(m["round_s"]), abs=0.01)


@pytest.mark.parametrize("args, code, message", [
    (["reqresp", "client", "--server", "127.0.0.1:1", "--cc", "nosuchcc"], 2,
     "cc 'nosuchcc': not available on this kernel; available: "),
    (["reqresp", "client", "--server", "127.0.0.1:1", "--size", "-5"], 2, "size"),
    (["reqresp", "client", "--server", "127.0.0.1:1"], 1, "connection refused"),
    (["bulk", "client", "--server", "127.0.0.1:1"], 2, "exactly one of --size"),
    (["audio", "client", "--server", "127.0.0.1:1", "--chunk", "0.1ms", "--rate", "44100"], 2, "whole"),
    (["reqresp", "client", "--server", "127.0.0.1:1", "--window", "64 parsecs"], 2, "unit"),
])
def test_bad_input_is_one_clear_line(args, code, message):
    r = run("testbed.apps." + args[0], *args[1:], "--log", "/dev/null")
    assert r.returncode == code, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_port_in_use_is_one_clear_line(tmp_path):
    with server(RR, "--log", str(tmp_path / "s.jsonl")) as (_, port):
        r = run(RR, "server", "--listen", f"127.0.0.1:{port}", "--log", "/dev/null")
    assert r.returncode == 1 and "already in use" in r.stderr and "Traceback" not in r.stderr


def _testbed_run(tmp_path, monkeypatch, *argv):
    import argparse
    from testbed.host import lifecycle
    from testbed.cli import run as cli
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path / "state")
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["run", *argv, "--results", str(tmp_path / "results")])
    return args.func(args)


def test_cli_run_on_loopback(tmp_path, monkeypatch, capsys):
    assert _testbed_run(tmp_path, monkeypatch, "reqresp", "--topo", "loopback", "--mode", "reuse",
                        "--requests", "2", "--cc", "reno", "--ack", "max:10ms") == 0
    (run_dir,) = (tmp_path / "results").iterdir()
    assert {"client.jsonl", "server.jsonl", "manifest.json"} <= {p.name for p in run_dir.iterdir()}
    assert events(run_dir / "client.jsonl", ev.SUMMARY)[0]["requests"] == 2
    readback = [f["readback"] for f in events(run_dir / "server.jsonl", ev.FACTORS) if f.get("conn") is not None]
    assert readback and all(r["cc"] == "reno" and r["delack_max_us"] == 12_000 for r in readback)
    assert "median" in capsys.readouterr().out
    assert not list((tmp_path / "state").glob("*.json"))           # the run was torn down


@pytest.mark.parametrize("argv, message", [
    (["reqresp", "--topo", "loopback", "--ack", "quick"], "needs a topology|need a topology"),
    (["reqresp", "--topo", "loopback", "--cc", "nosuchcc"],
     "cc 'nosuchcc': not available on this kernel; available: "),
    (["bulk", "--topo", "loopback"], "exactly one of --size"),
    (["reqresp", "--topo", "loopback", "--ack", "max:2ms"], "timer tick"),
])
def test_cli_bad_input(tmp_path, monkeypatch, argv, message):
    with pytest.raises(ValueError, match=message):
        _testbed_run(tmp_path, monkeypatch, *argv)


@pytest.mark.parametrize("dependent", [False, True])
def test_reqresp_blocks_are_answered_as_they_arrive_or_after_the_last(tmp_path, dependent):
    """Three blocks of 100 ms processing each: independent, the first reply comes after the
    first block's processing; with a global dependency only after all of it.  The codec: half
    the body on the wire, the encoding a timed step inside the request's time."""
    log = tmp_path / "c.jsonl"
    with server(RR, "--log", str(tmp_path / "s.jsonl")) as (_, port):
        r = run(RR, "client", "--server", f"127.0.0.1:{port}", "--mode", "reuse", "--warmup", "0",
                "--size", "300KB", "--blocks", "3", "--reply-size", "10KB,20KB,20KB",
                "--process", "300ms", "--compress", "0.5", "--encode", "50ms", "--decode", "30ms",
                "--log", str(log),
                *(["--dependent"] if dependent else []))
    assert r.returncode == 0, r.stderr
    t = {e["event"]: e["t"] for e in timeline(log, 0)}
    first, done = (t[ev.FIRST_RESPONSE_BYTE] - t[ev.REQUEST_ISSUED]) / 1e6, \
        (t[ev.LAST_RESPONSE_BYTE] - t[ev.REQUEST_ISSUED]) / 1e6
    assert done >= 50 + 300
    assert (first >= 50 + 300) if dependent else (50 + 100 <= first < 50 + 250)
    assert [e["bytes"] for e in events(log, ev.BLOCK_SENT)] == [50_000] * 3
    replies = [e["bytes"] for e in events(log, ev.BLOCK_REPLY)]
    assert replies == ([50_000] if dependent else [10_000, 20_000, 20_000])
    assert [(s["name"], s["ms"]) for s in events(log, ev.STEP)] == [("encode", 50)]
    got = events(tmp_path / "s.jsonl", ev.REQUEST_COMPLETE)
    assert sum(e["bytes"] for e in got) == 150_000 and len(got) == 3
    # decoding is part of the server's processing: 300 ms + 30 ms in all
    assert sum(e["process_us"] for e in events(tmp_path / "s.jsonl", ev.REQUEST_RECEIVED)) == 330_000


@pytest.mark.parametrize("commit", ["keep", "lose"])
def test_agent_disconnect_redoes_what_the_commit_log_lost_and_never_executes_an_op_twice(tmp_path, commit):
    """4 rounds, disconnect after round 3: keep redoes round 3 with the same operation id (the
    server answers without running the model again), lose redoes rounds 1-3 in a new session."""
    from analysis.runmetrics import run_metrics
    log, slog = tmp_path / "client.jsonl", tmp_path / "s.jsonl"
    with server(RR, "--log", str(slog)) as (_, port):
        r = run("testbed.apps.agent", "--server", f"127.0.0.1:{port}", "--rounds", "4",
                "--screenshot", "10KB", "--model", "200ms", "--terminal", "10ms", "--reuse",
                "--disconnect", f"3:{commit}", "--reconnect", "300ms", "--log", str(log))
    assert r.returncode == 0, r.stderr
    (cut,) = events(log, ev.DISCONNECT)
    assert (cut["round"], cut["kept"], cut["redo"]) == ((2, 2, 1) if commit == "keep" else (2, 0, 3))
    rounds = [e["round"] for e in events(log, ev.ROUND_START)]
    assert rounds == ([0, 1, 2, 2, 3] if commit == "keep" else [0, 1, 2, 0, 1, 2, 3])
    got = events(slog, ev.REQUEST_RECEIVED)
    ops = [e["op"] for e in got]
    executed = [e["op"] for e in got if not e["retry"]]
    assert len(set(executed)) == len(executed)                   # no operation executed twice
    assert sum(e["retry"] for e in got) == (1 if commit == "keep" else 0)
    # the server's processing is a timed step of the model's time, once per executed operation
    process = [e for e in events(slog, ev.STEP) if e["name"] == "process"]
    assert len(process) == len(executed) and all(e["ms"] == 200 for e in process)
    assert len(set(ops)) == (4 if commit == "keep" else 7)
    # the retried round is answered without the model's 200 ms; the others take it
    t = {e["req"]: e["round_ms"] for e in events(log, ev.ROUND_END)}
    assert (t[3] < 150) if commit == "keep" else all(ms >= 200 for ms in t.values())
    m = run_metrics(tmp_path)["metrics"]
    assert len(m["round_s"]) == 4 and len(m["redo_s"]) == cut["redo"] and m["disconnect_s"] >= 0.3
    assert m["total_s"] == pytest.approx(m["setup_s"] + sum(m["round_s"]) + sum(m["redo_s"])
                                         + m["disconnect_s"], abs=0.02)
