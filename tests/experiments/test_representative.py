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
    assert title[2] == "captured at client: as the data's RECEIVER saw it"
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
