"""``testbed analyze``: JSON layout, plots, app-log join, errors."""
import argparse
import json
from pathlib import Path

import pytest

pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, Raw  # noqa: E402
from tests.analysis.test_damage import _offsets  # noqa: E402
from tests.analysis.test_tcp import ISN_A, ISN_B, Trace, eth  # noqa: E402

from analysis import report  # noqa: E402
from testbed.cli import analyze as cli  # noqa: E402


def _run(argv, capsys):
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["analyze", *argv])
    code = args.func(args)
    return code, capsys.readouterr().out


def _srv(tr, t_ms, seq_rel, n, ack_rel):
    p = eth() / IP(src="10.0.0.2", dst="10.0.0.1") / TCP(
        sport=80, dport=1000, flags="PA", seq=ISN_B + seq_rel, ack=(ISN_A + ack_rel) % 2**32,
        window=1000) / Raw(b"r" * n)
    tr._add(p, t_ms)


def _cli(tr, t_ms, seq_rel, ack_rel, n=0):
    p = eth() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(
        sport=1000, dport=80, flags="PA" if n else "A", seq=(ISN_A + seq_rel) % 2**32,
        ack=ISN_B + ack_rel, window=1000)
    tr._add(p / Raw(b"q" * n) if n else p, t_ms)


@pytest.fixture
def rr_pcap(tmp_path):
    """Client 10.0.0.1 sends two 10-byte requests; server answers 300 and 200 bytes."""
    tr = Trace()
    tr.a(0, 0, flags="S")
    tr.b(10, 1, flags="SA")
    tr.a(10.1, 1)
    _cli(tr, 11, 1, 1, n=10)                 # request 0
    tr.b(21, 11)                             # pure ACK of the request
    for k in range(3):                       # response 0: 3 x 100 B
        _srv(tr, 22 + 0.1 * k, 1 + 100 * k, 100, 11)
    _cli(tr, 32, 11, 301)
    _cli(tr, 40, 11, 301, n=10)              # request 1
    _srv(tr, 50, 301, 100, 21)
    _srv(tr, 50.1, 401, 100, 21)
    _cli(tr, 60, 21, 501)
    f = tr.write(tmp_path / "rr.pcap")
    log = tmp_path / "app.jsonl"
    t0 = int(1000 * 1e9)  # the pcap's clock; no sidecar, so give the app log the same clock
    events = [{"t": 0, "event": "clock", "realtime_minus_monotonic_ns": 0},
              {"t": t0 + int(10.5e6), "event": "request_issued", "req": 0, "sport": 1000},
              {"t": t0 + int(33e6), "event": "last_response_byte", "req": 0, "sport": 1000},
              {"t": t0 + int(39e6), "event": "request_issued", "req": 1, "sport": 1000},
              {"t": t0 + int(61e6), "event": "last_response_byte", "req": 1, "sport": 1000},
              {"t": t0 + int(5e6), "event": "tcp_info", "snd_cwnd": 10, "snd_mss": 100,
               "src": "10.0.0.2", "sport": 80},
              {"t": t0 + int(99e9), "event": "elsewhere", "sport": 5555}]
    log.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    return f, log


def test_json_per_flow(rr_pcap, capsys, tmp_path):
    f, log = rr_pcap
    code, out = _run([str(f), "--app-log", str(log), "--json", "--plots", str(tmp_path / "p")], capsys)
    assert code == 0
    res = json.loads(out)
    assert res["clock"] == "monotonic" and res["app_events_unmatched"] == 1
    (fl,) = res["flows"]
    assert fl["data_direction"] == "s2c"
    assert set(fl["handshake"]) >= {"syn", "synack", "ack", "first_payload_c2s", "last_payload_s2c"}
    assert fl["initial_rtt_ms"] == pytest.approx(10.1)
    comp = fl["completion"]
    assert [(c["request_bytes"], c["response_bytes"]) for c in comp] == [(10, 300), (10, 200)]
    assert comp[0]["response_first"] == pytest.approx(0.022)
    assert comp[0]["response_last"] == pytest.approx(0.0222)
    assert comp[0]["response_acked"] == pytest.approx(0.032)
    assert comp[0]["app"] == {"request_issued": pytest.approx(0.0105),
                              "last_response_byte": pytest.approx(0.033)}
    assert comp[1]["app"]["request_issued"] == pytest.approx(0.039)
    # default flight gap = initial RTT / 2 = 5.05 ms: each response went out in one flight
    assert [c["response_flights"] for c in comp] == [1, 1]
    assert [c["request_flights"] for c in comp] == [1, 1]
    assert fl["in_flight"]["max"] == 300 and fl["in_flight"]["median"] == 200
    assert fl["retransmissions"]["total"] == 0
    # SYN/ACK -> ACK (0.1 ms), last segment of each response -> its ACK
    assert fl["rtt_ms"]["karn"]["samples"] == pytest.approx([0.1, 9.8, 9.9])
    assert fl["acks"]["data_per_ack"] == pytest.approx(5 / 2)
    assert fl["goodput_mbps"] == pytest.approx(500 * 8 / 38e-3 / 1e6)
    csv = fl["in_flight"]["path"]
    assert csv and open(csv).readline().startswith("t_ns,outstanding")
    names = {p.rsplit("/", 1)[1] for p in res["plots"]}
    for kind in ("s2c-tseq", "s2c-inflight", "delivery"):
        assert any(kind + ".png" in n for n in names) and any(kind + ".svg" in n for n in names)
    assert "timeline.png" in names


def test_rtt_stats_retransmitted_bytes_and_truncation(rr_pcap, capsys, monkeypatch):
    """RTT mean/max next to the samples, 'truncated' when --samples cut the list,
    retransmitted bytes, and which implementation ran (issue 15 item 7)."""
    f, _ = rr_pcap
    for engine in ("python", "native"):
        monkeypatch.setenv("TESTBED_ANALYSIS_ENGINE", engine)
        from analysis import native
        if native.engine("auto") != engine:
            continue
        code, out = _run([str(f), "--json", "--samples", "2"], capsys)
        res = json.loads(out)
        assert code == 0 and res["engine"] == engine
        (fl,) = res["flows"]
        karn = fl["rtt_ms"]["karn"]
        assert karn["n"] == 3 and karn["samples"] == pytest.approx([0.1, 9.8]) and karn["truncated"]
        assert karn["mean"] == pytest.approx((0.1 + 9.8 + 9.9) / 3) and karn["max"] == pytest.approx(9.9)
        assert fl["retransmissions"]["bytes"] == 0
        code, out = _run([str(f), "--json"], capsys)
        assert json.loads(out)["flows"][0]["rtt_ms"]["karn"]["truncated"] is False
    with pytest.raises(ValueError, match="--samples must be >= 0"):
        _run([str(f), "--samples", "-1"], capsys)


def test_table_output(rr_pcap, capsys):
    """The data (s2c) was captured near its receiver, the client: the row says so."""
    code, out = _run([str(rr_pcap[0])], capsys)
    assert code == 0 and "tcp-10.0.0.1:1000-10.0.0.2:80" in out and " s2c* " in out
    assert out.rstrip().endswith("the receiver's view (the sender's capture gives the sender's)")
    assert cli.TABLE_KEY in out and " Mbit/s " in out          # every terse column explained


def test_bad_input(tmp_path, capsys):
    with pytest.raises(ValueError, match="no such file"):
        _run([str(tmp_path / "missing.pcap")], capsys)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    with pytest.raises(ValueError, match="not a pcap"):
        _run([str(bad)], capsys)
    with pytest.raises(ValueError, match="^/dev/null: not a regular file; give pcap"):
        _run(["/dev/null"], capsys)


@pytest.fixture
def analyze(capsys, caplog):
    """(exit code, stdout, the warnings logged) of ``testbed analyze ARGV``."""
    def run(argv):
        caplog.clear()
        p = argparse.ArgumentParser()
        cli.register(p.add_subparsers())
        args = p.parse_args(["analyze", *argv])
        code = args.func(args)
        return code, capsys.readouterr().out, "\n".join(
            r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "warning"))
    return run


def test_damaged_capture_warned_listed_and_strict(rr_pcap, analyze, tmp_path):
    """A capture cut in the middle of a record: a warning naming the file and the byte,
    ``damage`` in the JSON, exit 1 with --strict (0 without)."""
    f, _ = rr_pcap
    data = f.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-20])
    code, out, err = analyze([str(cut), "--json"])
    (d,) = json.loads(out)["damage"]
    assert code == 0 and d["kind"] == "truncated"
    assert err.startswith(f"{cut}: the last record, at byte {d['offset']}, is cut short")
    code, out, err = analyze([str(cut), "--strict"])
    assert code == 1 and "cut short" in err
    code, out, err = analyze([str(f), "--strict", "--json"])
    assert code == 0 and err == "" and json.loads(out)["damage"] == []


def _run_dir(tmp_path, pcap_src=None, **manifest):
    d = tmp_path / "tb-run"
    (d / "pcap").mkdir(parents=True)
    if pcap_src is not None:
        (d / "pcap" / "client-eth0.pcap").write_bytes(pcap_src.read_bytes())
    (d / "manifest.json").write_text(json.dumps({"schema": 1, "status": "complete", **manifest}))
    return d


def test_wrong_arguments_say_what_was_given(rr_pcap, capsys, tmp_path):
    f, _ = rr_pcap
    plain = tmp_path / "exec-result"
    (plain / "pcap").mkdir(parents=True)
    (plain / "pcap" / "h1-eth0.pcap").write_bytes(f.read_bytes())
    with pytest.raises(ValueError, match=r"exec-result: a directory without manifest.json, not a "
                                         r"run directory; .*its 1 capture file\(s\) can be given"):
        _run([str(plain)], capsys)
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ValueError, match="got 2 directories"):
        _run([str(plain), str(other)], capsys)
    with pytest.raises(ValueError, match=r"got the directory .*exec-result and 1 more argument"):
        _run([str(plain), str(f)], capsys)
    exp = tmp_path / "exp"
    (exp / "runs").mkdir(parents=True)
    (exp / "manifest.json").write_text("{}")
    with pytest.raises(ValueError, match="an experiment directory; give one of its runs"):
        _run([str(exp)], capsys)


def test_run_dir_without_a_workload(rr_pcap, analyze, tmp_path):
    """A run directory whose manifest names no workload (no app logs), only captures."""
    f, _ = rr_pcap
    d = _run_dir(tmp_path, f, spec={"topology": "image"}, roles={"client": "client"})
    code, out, err = analyze([str(d), "--json"])
    res = json.loads(out)
    assert code == 0 and err == ""
    assert [c["file"] for c in res["captures"]] == [str(d / "pcap" / "client-eth0.pcap")]
    assert res["captures"][0]["flows"][0]["data_direction"] == "s2c"


def test_a_workloads_metrics_that_raise_are_one_line_naming_their_file(rr_pcap, tmp_path, capsys,
                                                                      monkeypatch, restore_logging):
    """A plugin workload's metrics() with a bug: `testbed analyze RUN_DIR` printed a traceback."""
    from testbed.cli import main

    def faulty(run_dir):
        return {}["completion"]
    monkeypatch.setattr(cli, "_workload_metrics", lambda manifest: faulty)
    d = _run_dir(tmp_path, rr_pcap[0], spec={"topology": "image"}, roles={"client": "client"})
    assert main(["analyze", str(d)]) == 1
    err = capsys.readouterr().err
    assert err == (f"testbed: error: {d}: the workload's metrics ({__file__}) raised KeyError: "
                   "'completion'\n"), err


def _experiment(tmp_path, keep_pcaps="representative", representative="runs/001-b"):
    """An experiment directory holding the run ``runs/000-a`` (its manifest made by the test)."""
    exp = tmp_path / "exp"
    (exp / "runs").mkdir(parents=True)
    (exp / "manifest.json").write_text(json.dumps(
        {"kind": "experiment", "definition": {"keep_pcaps": keep_pcaps}, "schedule": []}))
    (exp / "summary.json").write_text(json.dumps({"by_level": {"a": {"representative": representative}}}))
    return exp / "runs" / "000-a"


def test_pruned_captures_named_as_the_reason(rr_pcap, analyze, tmp_path):
    f, _ = rr_pcap
    files = [{"path": "pcap/client-eth0.pcap", "kind": "pcap"},
             {"path": "pcap/server-eth0.pcap", "kind": "pcap"}]
    run = _run_dir(tmp_path, None, spec={"workload": None, "capture": {"hosts": "all", "keep": True}},
                   files=files)
    d = _experiment(tmp_path)
    run.rename(d)
    (d / "experiment.json").write_text("{}")
    code, out, err = analyze([str(d)])              # no record of the pruning: missing, maybe pruned
    assert "2 of the run's 2 captures are missing" in err and "no pruned.json says" in err
    (d / "pruned.json").write_text(json.dumps({"files": [p["path"] for p in files], "when": "2025-01-02T03:04:05+00:00",
                                               "keep_pcaps": "representative", "representatives": ["runs/001-b"]}))
    code, out, err = analyze([str(d), "--plots", str(tmp_path / "plots")])
    assert code == 0
    assert ("2 of the run's 2 captures were pruned by its experiment" in err
            and 'keep_pcaps = "representative"' in err
            and "pcap/client-eth0.pcap, pcap/server-eth0.pcap" in err)
    assert "no per-flow analysis, no plots" in err
    assert f"--plots {tmp_path / 'plots'}: no figure written" in err
    code, out, err = analyze([str(d), "--html", str(tmp_path / "page.html")])
    assert code == 0 and "captures were pruned" in (tmp_path / "page.html").read_text()
    code, out, err = analyze([str(d), "--json", "--strict"])
    assert code == 1 and json.loads(out)["missing_captures"]["files"] == [p["path"] for p in files]
    d2 = _run_dir(tmp_path / "b", None, spec={"capture": {"hosts": "all", "keep": False}})
    (d2 / "pcap" / "client-eth0.pcap.meta.json").write_text("{}")
    code, out, err = analyze([str(d2)])
    assert "1 of the run's 1 captures were deleted" in err and "capture.keep = false" in err
    d3 = _run_dir(tmp_path / "c", None, spec={"capture": {"hosts": "none"}})
    code, out, err = analyze([str(d3), "--strict"])
    assert code == 0 and "the run has no captures (capture.hosts = none)" in err


def test_a_capture_without_tcp_or_udp_says_so(tmp_path, capsys):
    from scapy.all import ICMP, wrpcap
    f = tmp_path / "ping.pcap"
    wrpcap(str(f), [eth() / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP()])
    code, out = _run([str(f)], capsys)
    assert code == 0 and out.splitlines()[1] == "  no TCP or UDP flow in this capture"


def test_a_damaged_manifest_is_named_not_read_as_a_run(rr_pcap, analyze, tmp_path):
    """A manifest that is not JSON or not an object is refused naming the file; one of another
    schema (or ``{}``) is analysed with a warning that --strict counts."""
    f, _ = rr_pcap
    d = _run_dir(tmp_path, f, spec={"topology": "image"})
    for text, says in (("[1, 2]", "a JSON list, not a manifest's object"), ("{", "not valid JSON"),
                       (b'{"x": "\xff"}', r"not UTF-8 text \(byte 0xff at offset 7\), not a manifest's JSON")):
        (d / "manifest.json").write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(ValueError, match=f"{d / 'manifest.json'}: {says}.*; the run's captures can still "
                                             f"be given as files \\({d}/pcap/\\*.pcap\\)"):
            analyze([str(d)])
    (d / "manifest.json").write_text("{}")
    code, out, err = analyze([str(d), "--strict"])
    assert code == 1 and "not a run manifest of schema 1 (schema None)" in err


def test_a_run_capture_cut_on_a_record_boundary_is_damaged(rr_pcap, analyze, tmp_path):
    f, _ = rr_pcap
    d = _run_dir(tmp_path, f, spec={"topology": "image"})
    pcap = d / "pcap" / "client-eth0.pcap"
    (d / "pcap" / "client-eth0.pcap.meta.json").write_text(json.dumps(
        {"offset_start_ns": 0, "offset_stop_ns": 0, "captured": 20}))
    code, out, err = analyze([str(d), "--strict"])
    assert code == 1 and f"{pcap}: the file holds 13 packets, its capture wrote 20" in err


@pytest.mark.parametrize("argv,says", [
    (["--bin", "inf"], r"--bin inf s: give a number of seconds from 1e-09 \(1 ns\) to 1e\+06"),
    (["--bin", "nan"], r"--bin nan s: give a number of seconds from 1e-09 \(1 ns\) to 1e\+06"),
    (["--gap", "inf"], r"--gap inf s: give a number of seconds from 0 to 1e\+06"),
    (["--bin", "1e-12"], r"--bin 1e-12 s: give .* from 1e-09 \(1 ns\)"),     # 0 ns: was a ZeroDivisionError
    (["--bin", "1e300"], r"--bin 1e\+300 s: give .* to 1e\+06"),            # was an OverflowError
    (["--gap", "1e300"], r"--gap 1e\+300 s: give .* to 1e\+06"),
])
def test_bin_and_gap_must_be_finite(rr_pcap, capsys, argv, says):
    with pytest.raises(ValueError, match=says):
        _run([*argv, str(rr_pcap[0])], capsys)


def test_the_library_refuses_a_bin_of_no_whole_nanosecond(rr_pcap):
    with pytest.raises(ValueError, match="bin 1e-12 s"):
        report.analyze_file(rr_pcap[0], bin_s=1e-12)


@pytest.mark.parametrize("argv", [[""], ["{pcap}", "--app-log", ""], ["{pcap}", "--link-log", ""]])
def test_an_empty_path_is_refused_not_read_as_the_current_directory(rr_pcap, capsys, argv):
    with pytest.raises(ValueError, match=r"an empty path \(''\): give capture files"):
        _run([a.format(pcap=rr_pcap[0]) for a in argv], capsys)


def test_non_text_logs_are_named(rr_pcap, capsys, tmp_path):
    f, _ = rr_pcap
    with pytest.raises(ValueError, match=f"{f}: not text; an event log is JSON lines"):
        _run(["--app-log", str(f), str(f)], capsys)
    q = tmp_path / "bad.qlog"
    q.write_text("not json")
    with pytest.raises(ValueError, match=f"{q}: not a qlog JSON file"):
        _run([str(q)], capsys)


def test_damaged_run_metadata_and_frame_logs_are_named(rr_pcap, analyze, tmp_path):
    f, _ = rr_pcap
    d = _run_dir(tmp_path, f, spec={"topology": "image"})
    for text, says in (("[1]", "a JSON list, not an object"), ("{", "not valid JSON")):
        (d / "metadata.json").write_text(text)
        with pytest.raises(ValueError, match=f"{d / 'metadata.json'}: {says}"):
            analyze([str(d)])
    with pytest.raises(ValueError, match="--app-log and --link-log go with capture files"):
        analyze(["--app-log", str(f), str(d)])


def test_a_frame_log_cut_short_is_named_and_strict_fails(rr_pcap, analyze, tmp_path):
    import numpy as np

    from testbed.emulator.linklog import LogWriter, dtype, read_log
    path = tmp_path / "client-server.frames"
    log = LogWriter(path, {"direction": "client-server"})
    log.close()
    header, records = read_log(path)
    assert "damage" not in header and len(records) == 0
    with open(path, "ab") as fh:                 # two whole records and part of a third
        fh.write(np.zeros(2, dtype=dtype()).tobytes() + b"\0" * 7)
    header, records = read_log(path)
    assert len(records) == 2 and header["damage"].startswith("cut short: 7 bytes of a record after the 2")
    code, out, err = analyze(["--link-log", str(path), "--strict", str(rr_pcap[0])])
    assert code == 1 and f"{path}: cut short: 7 bytes" in err
    path.write_bytes(path.read_bytes()[:12] + b"{abcd" + path.read_bytes()[17:])
    with pytest.raises(ValueError, match=f"{path}: the frame log's header is damaged"):
        read_log(path)


@pytest.mark.parametrize("field,value,says", [
    ("spec", "x", "spec is a JSON string, where a run's manifest has an object"),
    ("files", 5, "files is a JSON number, where a run's manifest has an array"),
    ("files", [1], "files holds an entry that is no object with a path and a kind"),
    ("roles", [1], "roles is a JSON array, where a run's manifest has an object"),
    ("link_changes", 7, "link_changes is a JSON number"),
])
def test_a_manifest_field_of_the_wrong_type_is_named(rr_pcap, analyze, tmp_path, field, value, says):
    """Valid JSON with a field of another type than a run writes was a traceback."""
    f, _ = rr_pcap
    d = _run_dir(tmp_path, f, run_id="tb-x", **{"spec": {"topology": "image"}, field: value})
    with pytest.raises(ValueError, match=f"{d / 'manifest.json'}: {says}"):
        analyze([str(d)])


def test_a_missing_capture_is_not_blamed_on_an_experiment(rr_pcap, analyze, tmp_path):
    """Only captures a run's pruned.json names were pruned by its experiment; any other gone
    capture is missing, named (in an experiment with keep_pcaps = "representative", with a word that
    a testbed older than the record may have pruned it)."""
    from tests.analysis.test_native import random_trace, write_pcapng
    f, _ = rr_pcap
    files = [{"path": "pcap/client-eth0.pcap", "kind": "pcap"},
             {"path": "pcap/server-eth0.pcap", "kind": "pcap"}]
    d = _run_dir(tmp_path, f, spec={"topology": "image"}, files=files)
    code, out, err = analyze([str(d), "--strict"])
    assert code == 1 and "pruned" not in err
    assert "1 of the run's 2 captures are missing: pcap/server-eth0.pcap (deleted or moved" in err
    write_pcapng(d / "pcap" / "server-eth0.pcapng", random_trace(3, n=50))
    code, out, err = analyze([str(d), "--json"])
    assert "found instead: pcap/server-eth0.pcapng" in err
    assert [c["file"] for c in json.loads(out)["captures"]] == [
        str(d / "pcap" / "client-eth0.pcap"), str(d / "pcap" / "server-eth0.pcapng")]
    (d / "pcap" / "server-eth0.pcapng").unlink()
    for keep, representative in (("all", "runs/001-b"), ("representative", "runs/000-a")):
        run = _experiment(tmp_path / keep / representative.replace("/", "-"), keep, representative)
        d = d.rename(run)
        (d / "experiment.json").write_text("{}")
        code, out, err = analyze([str(d)])
        assert "were pruned" not in err and "1 of the run's 2 captures are missing" in err
        assert ("no pruned.json says" in err) == (keep == "representative")
    for p in (d / "pcap").iterdir():
        p.unlink()
    (d / "pcap").rmdir()
    code, out, err = analyze([str(d)])
    assert "2 of the run's 2 captures are missing: pcap/client-eth0.pcap, pcap/server-eth0.pcap" in err


def test_metrics_held_against_the_manifest(rr_pcap, analyze, tmp_path):
    """The run's metrics recomputed from damaged files that differ from its manifest's are
    warned about, manifest beside now; those the files no longer give are the manifest's,
    marked as such."""
    from analysis.runmetrics import run_metrics
    f, _ = rr_pcap
    d = _run_dir(tmp_path, f, spec={"topology": "image"}, roles={"client": "client"},
                 files=[{"path": "pcap/client-eth0.pcap", "kind": "pcap"}])
    computed = run_metrics(d)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest.update(metrics=computed["metrics"], checks={**computed["checks"], "host_factors": {}})
    (d / "manifest.json").write_text(json.dumps(manifest))
    code, out, err = analyze([str(d), "--json", "--strict"])
    res = json.loads(out)
    assert code == 0 and err == "" and "from_manifest" not in res and "differs_from_manifest" not in res
    assert res["metrics"] == manifest["metrics"] and res["checks"] == manifest["checks"]

    pcap = d / "pcap" / "client-eth0.pcap"
    data = f.read_bytes()
    pcap.write_bytes(data[:_offsets(data)[4] + 20])         # cut before the 100-byte responses
    code, out, err = analyze([str(d), "--json", "--strict"])
    res = json.loads(out)
    assert code == 1 and res["from_manifest"] == {"checks": ["max_adv_window", "sender_metrics"]}
    assert res["differs_from_manifest"] == {"checks": {"max_payload": {"manifest": 100, "recomputed": 10}}}
    assert ("1 metrics and checks recomputed from the files differ from the run's manifest (a file "
            "damaged or changed since the run, or other metrics code): max_payload 10 (manifest 100)") in err
    code, out, err = analyze([str(d)])
    assert "  max_payload              10  (manifest: 100)" in out.splitlines()

    pcap.unlink()
    code, out, err = analyze([str(d), "--json"])
    res = json.loads(out)
    assert res["from_manifest"] == {"metrics": ["handshake_ms"], "checks": [
        "wscale", "syn_mss", "max_adv_window", "max_payload", "sender_metrics"]}
    assert res["metrics"] == manifest["metrics"] and res["checks"] == manifest["checks"]
    assert "6 metrics and checks are the manifest's, marked (manifest): the files no longer give " \
           "them (captures gone: 1, named above): handshake_ms, wscale, syn_mss" in err
    code, out, err = analyze([str(d)])
    assert f"  handshake_ms             {manifest['metrics']['handshake_ms']}  (manifest)" in out.splitlines()


def test_a_log_gone_or_changed_since_the_run_is_named_not_silently_analysed(rr_pcap, analyze, tmp_path):
    """A file of the manifest's inventory other than a capture (an event log, a frame log,
    metadata.json, a capture's sidecar) that is gone, or whose size is not the inventory's, is
    named in a warning and the JSON's ``changed_files`` and counts for --strict; the values its
    absence changes are the manifest's, marked.  Deleting client.jsonl was silent before."""
    from analysis.runmetrics import run_metrics
    f, log = rr_pcap
    d = _run_dir(tmp_path, f, spec={"topology": "image"}, roles={"client": "client"})
    (d / "client.jsonl").write_bytes(log.read_bytes())
    (d / "client.stdout").write_text("done\n")
    computed = run_metrics(d)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest.update(metrics=computed["metrics"], checks=computed["checks"], files=[
        {"path": p.relative_to(d).as_posix(), "kind": kind, "bytes": p.stat().st_size}
        for p, kind in ((d / "client.jsonl", "eventlog"), (d / "client.stdout", "output"),
                        (d / "pcap" / "client-eth0.pcap", "pcap"))])
    (d / "manifest.json").write_text(json.dumps(manifest))
    assert "completion_ms" in manifest["metrics"]
    code, out, err = analyze([str(d), "--json", "--strict"])
    assert code == 0 and err == "" and "changed_files" not in json.loads(out)

    (d / "client.stdout").write_text("done, and more\n")
    (d / "client.jsonl").unlink()
    code, out, err = analyze([str(d), "--json", "--strict"])
    res = json.loads(out)
    assert code == 1
    assert res["changed_files"] == {"missing": ["client.jsonl"], "resized": [["client.stdout", 15, 5]]}
    assert (f"{d}: 1 of the files its manifest lists are missing: client.jsonl (deleted or moved "
            "since the run)") in err
    assert "1 of the files its manifest lists have changed size since the run: client.stdout 15 " \
           "bytes (at the run 5)" in err
    assert "completion_ms" in res["from_manifest"]["metrics"]
    assert res["metrics"] == manifest["metrics"]
    assert "the files no longer give them (files gone: 1, named above): completion_ms" in err
    assert analyze([str(d)])[0] == 0


def test_a_capture_without_its_file_header_is_one_damaged_capture_of_the_run(rr_pcap, analyze, tmp_path):
    """Empty, a pcap cut inside its 24-byte header, a pcapng cut inside its section header:
    in a run directory a warning each and the rest analysed; given on its own, refused."""
    from tests.analysis.test_native import random_trace, write_pcapng
    f, _ = rr_pcap
    d = _run_dir(tmp_path, f, spec={"topology": "image"})
    ng = write_pcapng(tmp_path / "n.pcapng", random_trace(3, n=50)).read_bytes()
    cut = {"empty.pcap": b"", "ten.pcap": f.read_bytes()[:10], "thirty.pcapng": ng[:20]}
    for name, data in cut.items():
        (d / "pcap" / name).write_bytes(data)
    code, out, err = analyze([str(d), "--json"])
    res = {Path(c["file"]).name: c for c in json.loads(out)["captures"]}
    assert code == 0 and res["client-eth0.pcap"]["flows"] and res["client-eth0.pcap"]["damage"] == []
    for name in cut:
        assert [x["kind"] for x in res[name]["damage"]] == ["header"] and res[name]["packets"] == 0
    assert f"{d / 'pcap' / 'empty.pcap'}: an empty file (0 bytes)" in err
    assert f"{d / 'pcap' / 'ten.pcap'}: the pcap file header is cut short: 10 of its 24 bytes" in err
    assert f"{d / 'pcap' / 'thirty.pcapng'}: the pcapng file header (section header block) is damaged" in err
    assert analyze([str(d), "--strict"])[0] == 1
    for name in cut:
        with pytest.raises(ValueError, match=f"{d / 'pcap' / name}: (an empty file|the pcap)"):
            analyze([str(d / "pcap" / name)])


def test_formats_png_writes_only_pngs(rr_pcap, capsys, tmp_path):
    """``--formats png``: every figure as a PNG and nothing else (the series CSVs stay)."""
    f, log = rr_pcap
    out = tmp_path / "p"
    code, text = _run([str(f), "--app-log", str(log), "--json", "--plots", str(out), "--formats", "png"],
                      capsys)
    assert code == 0
    written = {Path(p).suffix for p in json.loads(text)["plots"]}
    on_disk = {p.suffix for p in out.iterdir()}
    assert written == on_disk == {".png", ".csv"}
    assert {p.stem for p in out.glob("*.png")} >= {"timeline", "tcp-10.0.0.1_1000-10.0.0.2_80-delivery"}
    code, text = _run([str(f), "--json", "--plots", str(tmp_path / "q"), "--formats", "PDF,svg,pdf"], capsys)
    assert {Path(p).suffix for p in json.loads(text)["plots"]} == {".pdf", ".svg", ".csv"}


@pytest.mark.parametrize("value, says", [
    ("png,jpgx", r"--formats 'png,jpgx': 'jpgx' is not a format a figure can be written as; "
                 r"give a comma list of .*pdf, png.*svg"),
    ("png,,pdf", r"--formats 'png,,pdf': an empty format in the list; give a comma list of "),
    ("pgf", r"'pgf' is not a format"),                  # matplotlib writes it, with LaTeX only
    ("bmp,tga", r"'bmp', 'tga' are not formats"),
])
def test_bad_formats_are_refused_before_anything_is_read(rr_pcap, capsys, tmp_path, value, says):
    with pytest.raises(ValueError, match=says):
        _run([str(rr_pcap[0]), "--plots", str(tmp_path / "p"), "--formats", value], capsys)
    assert not (tmp_path / "p").exists()


def test_formats_without_plots_is_one_line_exit_2(rr_pcap, capsys, restore_logging, tmp_path):
    from testbed.cli import main
    for argv, says in ((["--formats", "png"], "--formats png goes with --plots DIR"),
                       (["--plots", str(tmp_path), "--formats", "gif,jpgx"], "'jpgx' is not a format")):
        assert main(["analyze", str(rr_pcap[0]), *argv]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1 and "png" in err


def test_html_draws_png_only(rr_pcap, analyze, tmp_path, monkeypatch):
    """``--html``: the page embeds PNGs, so its figures are drawn as PNG and nothing else."""
    from matplotlib.figure import Figure
    saved = []
    savefig = Figure.savefig

    def spy(fig, fname, *args, **kwargs):
        saved.append(Path(fname).suffix)
        return savefig(fig, fname, *args, **kwargs)
    monkeypatch.setattr(Figure, "savefig", spy)
    d = _run_dir(tmp_path, rr_pcap[0], spec={"topology": "image"}, roles={"client": "client"})
    code, out, err = analyze([str(d), "--html", str(tmp_path / "page.html")])
    assert code == 0 and saved and set(saved) == {".png"}
    assert "data:image/png" in (tmp_path / "page.html").read_text()
