"""An experiment's representative figure: drawn from the capture at the data's sender when the
run kept one (a download's server), else from the client's, labelled as the receiver's view; a
crossed experiment's panels named by both factors' levels.  Crafted captures, no root."""
import json

import pytest

pytest.importorskip("scapy.all")
from tests.analysis.test_figure_content import transfer  # noqa: E402

from analysis import plots  # noqa: E402
from experiments import plots as xplots  # noqa: E402
from testbed.spec.runresult import RunResult  # noqa: E402
from testbed.spec.runspec import RunSpec  # noqa: E402

SUMMARY = {"experiment": "loss-cc", "factor": "links.bottleneck.down.loss", "cross": "socket.cc",
           "primary": "goodput_mbps",
           "by_level": {"reno@0pct": {"level": "0%", "cross": "reno", "representative": "run"}}}


def _download(tmp_path, hosts=("client", "server")):
    """A run directory of a download captured at ``hosts``."""
    d = tmp_path / "run"
    (d / "pcap").mkdir(parents=True)
    for h in hosts:
        transfer(d / "pcap" / f"{h}-{h}-eth0.pcap", upload=False, at=h)
    (d / "metadata.json").write_text(json.dumps({"hosts": {h: {"ips": {f"{h}-eth0": ip}} for h, ip in
                                                           (("client", "10.0.0.1"), ("server", "10.0.0.2"))}}))
    RunResult(run_id="r", dir=d, spec=RunSpec(), status="complete", error=None, started=0.0, finished=0.0,
              roles={"client": "client", "server": "server"},
              files=[{"path": f"pcap/{h}-{h}-eth0.pcap", "kind": "pcap", "host": h} for h in hosts]).write()
    return d


def _drawn(tmp_path, monkeypatch, summary):
    """The representative figure of ``summary``'s arms, checked for layout problems."""
    figs = []
    real = xplots._save
    monkeypatch.setattr(xplots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    plots.LAYOUT_PROBLEMS.clear()
    assert xplots.representative_figure(tmp_path, summary, tmp_path / "rep")
    assert plots.LAYOUT_PROBLEMS == [], plots.LAYOUT_PROBLEMS
    (fig,) = figs
    return fig


def _figure(tmp_path, monkeypatch):
    fig = _drawn(tmp_path, monkeypatch, SUMMARY)
    seq, in_flight = fig.axes[:2]
    peak = max(max(line.get_ydata()) for line in in_flight.lines if len(line.get_ydata()))
    return seq.get_title().split("\n"), peak


def test_a_download_is_drawn_from_the_senders_capture(tmp_path, monkeypatch):
    """The server sent 20 kB in 2 ms and heard the first ACK a round trip later: its capture
    has them all in flight; the client's, where each segment is ACKed as it arrives, about
    one.  The panel names both factors' levels, not the arm's name as the loss."""
    _download(tmp_path)
    title, peak = _figure(tmp_path, monkeypatch)
    assert title[0] == "links.bottleneck.down.loss = 0%, socket.cc = reno"
    assert title[2] == "captured at server, the data's sender"
    assert peak >= 19                                   # kB


def test_without_the_senders_capture_the_receivers_view_is_drawn_and_said(tmp_path, monkeypatch):
    _download(tmp_path, hosts=("client",))
    title, peak = _figure(tmp_path, monkeypatch)
    assert title[2:] == ["captured at client: as the data's RECEIVER saw it",
                         "in flight there: bytes received above the ACK it sent"]
    assert peak <= 2


def test_arms_are_named_by_both_factors_where_crossed():
    assert xplots.arm_label(SUMMARY, "reno@0pct") == "links.bottleneck.down.loss = 0%, socket.cc = reno"
    assert xplots.arm_label({"factor": "params.mode"}, "new") == "params.mode = new"
    assert xplots.arms_title(SUMMARY) == "socket.cc@links.bottleneck.down.loss"


def test_a_damaged_capture_is_drawn_marked_and_warned_about(tmp_path, monkeypatch, caplog):
    """A capture cut mid-packet after the run (a copy, a full disk) is drawn up to where it could
    be read, its panel says DAMAGED and a warning names the file — never a figure that looks whole."""
    d = _download(tmp_path, hosts=("client",))
    pcap = d / "pcap" / "client-client-eth0.pcap"
    pcap.write_bytes(pcap.read_bytes()[:-7])
    title, _peak = _figure(tmp_path, monkeypatch)
    assert title[2] == "captured at client: as the data's RECEIVER saw it; capture DAMAGED (truncated)"
    assert title[3].startswith("in flight there")
    assert [r.getMessage().split(":")[0] for r in caplog.records if "is damaged" in r.getMessage()] == [str(pcap)]


def test_an_event_log_damaged_after_the_run_leaves_the_figure_drawn_without_it(tmp_path, monkeypatch, caplog):
    """The run read its log whole; a bad line found later costs the figure that log's events (and
    says so), not the report."""
    d = _download(tmp_path)
    (d / "client.jsonl").write_text('{"t": 1, "event": "clock"}\nnot json\n{"t": 2, "event": "clock"}\n')
    m = json.loads((d / "manifest.json").read_text())
    m["files"].append({"path": "client.jsonl", "kind": "eventlog", "host": "client"})
    (d / "manifest.json").write_text(json.dumps(m))
    title, _peak = _figure(tmp_path, monkeypatch)
    assert title[2] == "captured at server, the data's sender"
    assert any(r.getMessage().startswith(f"{d / 'client.jsonl'}:2: not JSON") and
               r.getMessage().endswith("its figures are drawn without this log's events") for r in caplog.records)


def test_an_arms_panels_sit_close_and_its_blocks_apart(tmp_path, monkeypatch):
    """Four arms are two blocks of panels: the sequence, in-flight and request panels of one arm
    share their time axis and sit a few points apart; only between blocks is there room for the
    arms' three-line titles and the time axis (one grid for all spaced every row as far apart
    as the blocks — the complaint about the representative figure's wasted height)."""
    _download(tmp_path)
    summary = {**SUMMARY, "by_level": {f"reno@{k}pct": {"level": f"{k}%", "cross": "reno",
                                                         "representative": "run"} for k in range(4)}}
    fig = _drawn(tmp_path, monkeypatch, summary)
    inch = fig.get_figheight()
    seq, flight, lanes, below = (fig.axes[k].get_position() for k in (0, 1, 2, 9))
    assert (seq.y0 - flight.y1) * inch < 0.2 and (flight.y0 - lanes.y1) * inch < 0.2
    assert (lanes.y0 - below.y1) * inch > 0.9            # the next block's titles and this one's axis
    assert lanes.height * inch < 0.8                     # one request: a strip, not a panel
    assert fig.axes[3].yaxis.label.get_text() == "" and not any(
        t.get_visible() and t.get_text() for t in fig.axes[3].get_yticklabels())   # shared: labelled once
    first_column = ["sequence (kB)", "in flight (kB)", "request"]    # each block's first arm's
    assert [ax.get_ylabel() for ax in fig.axes] == first_column + [""] * 6 + first_column


def test_an_arm_has_one_colour_in_every_figure_of_a_crossed_experiment():
    """reno is blue in the curve (one line per crossed level); in the per-arm figures every reno
    arm is blue too, its loss told by the line style and marker."""
    summary = {"cross": "socket.cc", "levels": ["reno@0pct", "cubic@0pct", "reno@1pct", "cubic@1pct"],
               "by_level": {f"{cc}@{k}pct": {"level": f"{k}%", "cross": cc} for k in (0, 1)
                            for cc in ("reno", "cubic")}}
    look = xplots.arm_styles(summary)
    assert look["reno@0pct"]["color"] == look["reno@1pct"]["color"] == "C0"
    assert look["cubic@0pct"]["color"] == look["cubic@1pct"]["color"] == "C1"
    assert look["reno@0pct"]["ls"] != look["reno@1pct"]["ls"]
    assert [s["color"] for s in xplots.arm_styles({"levels": ["new", "reuse"]}).values()] == ["C0", "C1"]


LONG = "server-client: frame 1290 of 1500 B: drop, and until 7.0s TCP resends of its bytes (UDP: the frame only)"


def _two_arms(tmp_path, second="run"):
    return {"experiment": "c8-delivery", "factor": "params.transport", "primary": "audio_done_ms",
            "by_level": {"tcp": {"representative": "run"}, "quic": {"representative": second}}}


def _texts(ax, part):
    return [t for t in ax.texts if t.get_visible() and part in t.get_text()]


def test_a_long_marker_label_is_written_once_per_arm_inside_its_top_panel(tmp_path, monkeypatch):
    """A link event's long label was written upwards along its line, through the frames of the
    panels below (unreadable, flagged by the layout check); it is written once per arm,
    horizontally inside the arm's top panel, its line in every panel; three events a
    millisecond apart each get their text once, none over another."""
    _download(tmp_path)
    marks = [(0.030, LONG), (0.031, "client-server: rate=4mbit"), (0.032, "client-server: up")]
    figs = []
    real = xplots._save
    monkeypatch.setattr(xplots, "_save", lambda f, base: (figs.append(f), real(f, base))[1])
    plots.LAYOUT_PROBLEMS.clear()
    assert xplots.representative_figure(tmp_path, _two_arms(tmp_path), tmp_path / "rep",
                                        markers={"tcp": marks, "quic": marks[:1]})
    assert plots.LAYOUT_PROBLEMS == [], plots.LAYOUT_PROBLEMS
    (fig,) = figs
    for arm, n in ((0, 3), (1, 1)):
        top, *below = fig.axes[3 * arm:3 * arm + 3]
        labels = _texts(top, "1290")
        assert len(labels) == 1 and labels[0].get_rotation() == 0
        assert not any(_texts(ax, "1290") for ax in below)
        for ax in (top, *below):       # the dashed line in every panel of the arm
            assert sum(1 for line in ax.lines if line.get_linestyle() == "--") == n
    # each event's text once; those of lines closer than a text's height joined into one label,
    # a line each (the layout check above finds labels over each other or across a frame)
    written = " ".join(t.get_text().replace("\n", " ") for t in fig.axes[0].texts)
    assert all(written.count(text) == 1 for _x, text in marks)


def test_many_markers_become_numbered_tags_listed_in_the_legend(tmp_path, monkeypatch):
    _download(tmp_path)
    marks = [(0.01 * k, f"server-client: rate={k}mbit, a schedule's step number {k}") for k in range(1, 7)]
    figs = []
    real = xplots._save
    monkeypatch.setattr(xplots, "_save", lambda f, base: (figs.append(f), real(f, base))[1])
    plots.LAYOUT_PROBLEMS.clear()
    assert xplots.representative_figure(tmp_path, SUMMARY, tmp_path / "rep", markers={"reno@0pct": marks})
    assert plots.LAYOUT_PROBLEMS == [], plots.LAYOUT_PROBLEMS
    (fig,) = figs
    assert sorted(t.get_text() for t in fig.axes[0].texts) == [str(k) for k in range(1, 7)]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [f"{k}: {text}" for k, (_x, text) in enumerate(marks, 1)] == [t for t in legend if t[0].isdigit()]


def _quic_run(tmp_path, qlog=True):
    """A QUIC download's run directory: its capture (the client's) holds UDP only; with ``qlog``
    the client's qlog: the handshake, a 14-byte request on stream 0, 40 kB on stream 3 of which
    the frame at 8 kB arrives late (repaired)."""
    from scapy.all import IP, UDP, Ether, Raw, wrpcap
    d = tmp_path / "quic"
    (d / "pcap").mkdir(parents=True)
    t0 = 1_800_000_000.0
    pk = []
    for k in range(45):
        up = k in (0, 2)
        ip = IP(src="10.0.0.1", dst="10.0.0.2") if up else IP(src="10.0.0.2", dst="10.0.0.1")
        p = Ether() / ip / (UDP(sport=50000, dport=5004) if up else UDP(sport=5004, dport=50000)) / Raw(b"q" * 1200)
        p.time = t0 + 0.002 * k
        pk.append(p)
    wrpcap(str(d / "pcap" / "client-client-eth0.pcap"), pk)
    files = [{"path": "pcap/client-client-eth0.pcap", "kind": "pcap", "host": "client"}]
    if qlog:
        ms = t0 * 1e3

        def pkt(name, t, ptype, frames=()):
            return {"name": f"transport:packet_{name}", "time": ms + t, "data": {
                "header": {"packet_type": ptype, "packet_number": 0}, "raw": {"length": 1200},
                "frames": list(frames)}}
        ev = [pkt("sent", 0, "initial"), pkt("sent", 4, "1RTT", [{"frame_type": "stream", "stream_id": 0,
                                                               "offset": 0, "length": 14, "fin": True}])]
        order = [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 8]
        ev += [pkt("received", 6 + 2 * i, "1RTT", [{"frame_type": "stream", "stream_id": 3, "offset": 2000 * k,
                                                    "length": 2000, "fin": k == 19}]) for i, k in enumerate(order)]
        ev += [{"name": "recovery:metrics_updated", "time": ms + 1, "data": {"bytes_in_flight": 1200, "cwnd": 12000}}]
        (d / "client.qlog").mkdir()
        (d / "client.qlog" / "abc.qlog").write_text(json.dumps(
            {"qlog_version": "0.3", "traces": [{"vantage_point": {"type": "client"}, "events": ev}]}))
        files.append({"path": "client.qlog/abc.qlog", "kind": "other", "host": None})
    RunResult(run_id="q", dir=d, spec=RunSpec(), status="complete", error=None, started=0.0, finished=0.0,
              roles={"client": "client", "server": "server"}, files=files).write()
    return d


def test_a_quic_arm_is_drawn_from_its_qlog(tmp_path, monkeypatch):
    """A QUIC run's capture has no TCP flow: its panels were empty.  The client's qlog gives its
    STREAM frames (the late one red), each stream's bytes in order and the request's phases; the
    in-flight panel, which only the data's sender could fill, says so."""
    _download(tmp_path)
    _quic_run(tmp_path)
    fig = _drawn(tmp_path, monkeypatch, _two_arms(tmp_path, second="quic"))
    seq, flight, lanes = fig.axes[3:6]
    drawn = {line.get_label(): line for line in seq.lines if len(line.get_xdata())}
    assert max(drawn["QUIC STREAM frame received (qlog)"].get_ydata()) == 40        # kB
    assert list(drawn["QUIC STREAM frame filling a hole (qlog)"].get_ydata()) == [18]   # 16-18 kB
    assert max(drawn["QUIC bytes in order per stream (qlog)"].get_ydata()) == 40
    assert "QUIC from the client's qlog" in seq.get_title()
    assert _texts(flight, "no qlog of its bytes in flight") and "(server)" in flight.texts[0].get_text()
    # handshake 0-4 ms (first Initial to first 1-RTT packet), request at 4 ms, wait, response 6-44 ms
    bars = sorted((round(b.get_x() * 1e3), round(b.get_width() * 1e3)) for b in lanes.patches)
    assert [(x - bars[0][0], w) for x, w in bars] == [(0, 4), (4, 0), (4, 2), (6, 38)]


def test_a_quic_arm_without_a_qlog_says_why_its_panels_are_empty(tmp_path, monkeypatch):
    _download(tmp_path)
    _quic_run(tmp_path, qlog=False)
    fig = _drawn(tmp_path, monkeypatch, _two_arms(tmp_path, second="quic"))
    seq, flight, _lanes = fig.axes[3:6]
    for ax in (seq, flight):
        assert _texts(ax, "no TCP flow in this capture and no qlog")
        assert not any(len(line.get_xdata()) for line in ax.lines if line.get_linestyle() != "--")
