"""Timed steps (``step`` events) as shaded spans on a run's figures and listed by ``testbed
analyze``: a crafted capture (scapy) and event logs on the same clock, no root."""
import json
from pathlib import Path

import pytest

pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, Ether, Raw, wrpcap  # noqa: E402

from analysis import applog, plots, plotset, report  # noqa: E402

T0 = 5_000_000_000          # the first packet, CLOCK_MONOTONIC ns
OFFSET = 1_700_000_000_000_000_000   # realtime - monotonic
MS = 1_000_000


def _pkt(t_ms, client, flags, seq, ack, n=0):
    ip = IP(src="10.0.0.1", dst="10.0.0.2") if client else IP(src="10.0.0.2", dst="10.0.0.1")
    tcp = TCP(sport=40000, dport=80, flags=flags, seq=seq, ack=ack) if client else \
        TCP(sport=80, dport=40000, flags=flags, seq=seq, ack=ack)
    p = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip / tcp
    p = p / Raw(b"x" * n) if n else p
    p.time = (T0 + OFFSET + t_ms * MS) / 1e9          # pcaps carry CLOCK_REALTIME
    return p


@pytest.fixture
def run_dir(tmp_path):
    """A run: handshake, a 500 B request at 10 ms, the server's processing 40 ms, a 2000 B reply
    at 52 ms; the client prepared 100 ms before the first packet and encoded 5 ms before the
    request."""
    d = tmp_path / "run"
    (d / "pcap").mkdir(parents=True)
    pk = [_pkt(0, True, "S", 100, 0), _pkt(1, False, "SA", 900, 101), _pkt(2, True, "A", 101, 901),
          _pkt(10, True, "PA", 101, 901, 500), _pkt(11, False, "A", 901, 601),
          _pkt(52, False, "PA", 901, 601, 1000), _pkt(52.1, False, "PA", 1901, 601, 1000),
          _pkt(53, True, "A", 601, 2901), _pkt(60, True, "FA", 601, 2901),
          _pkt(61, False, "FA", 2901, 602), _pkt(62, True, "A", 602, 2902)]
    cap = d / "pcap" / "client-client-eth0.pcap"
    wrpcap(str(cap), pk)
    (d / "pcap" / "client-client-eth0.pcap.meta.json").write_text(
        json.dumps({"offset_start_ns": OFFSET, "offset_stop_ns": OFFSET}))
    clock = {"t": 1, "event": "clock", "realtime_ns": OFFSET + 1, "monotonic_ns": 1,
             "realtime_minus_monotonic_ns": OFFSET}
    at = lambda ms: T0 + int(ms * MS)   # noqa: E731
    client = [clock, {"t": at(-10), "event": "step", "name": "prep", "start": at(-100), "ms": 90.0},
              {"t": at(9), "event": "step", "name": "encode", "start": at(4), "ms": 5.0, "req": 0}]
    server = [clock, {"t": at(51), "event": "step", "name": "process", "start": at(11), "ms": 40.0,
                      "conn": 0, "req": 0}]
    for name, evs in (("client.jsonl", client), ("server.jsonl", server)):
        (d / name).write_text("".join(json.dumps(e) + "\n" for e in evs))
    (d / "manifest.json").write_text(json.dumps({"status": "complete", "spec": {}}))
    return d


def _events(d):
    return applog.load(d / "client.jsonl") + applog.load(d / "server.jsonl")


def test_steps_and_their_totals(run_dir):
    got = applog.steps(_events(run_dir))
    assert [(s.name, s.log, s.start_ns, s.end_ns, s.index) for s in got] == [
        ("prep", "client.jsonl", T0 - 100 * MS, T0 - 10 * MS, None),
        ("encode", "client.jsonl", T0 + 4 * MS, T0 + 9 * MS, 0),
        ("process", "server.jsonl", T0 + 11 * MS, T0 + 51 * MS, 0)]
    assert applog.step_totals(got + got[1:2]) == {
        "prep": {"count": 1, "total_ms": 90.0, "logs": ["client.jsonl"]},
        "encode": {"count": 2, "total_ms": 10.0, "logs": ["client.jsonl"]},
        "process": {"count": 1, "total_ms": 40.0, "logs": ["server.jsonl"]}}
    with pytest.raises(ValueError, match="step 'x' needs an integer start"):
        applog.steps([{"t": 1, "event": "step", "name": "x", "ms": 3, "log": "a.jsonl"}])


def test_every_figure_shades_the_steps_on_the_capture_clock(run_dir, tmp_path, monkeypatch):
    figs = {}
    real = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, base: (
        figs.__setitem__(base.name, fig), real(fig, base))[1])
    events = _events(run_dir)
    res = report.analyze_file(run_dir / "pcap" / "client-client-eth0.pcap", events=events, keep=True)
    assert res["clock"] == "monotonic"
    plots.LAYOUT_PROBLEMS.clear()
    plotset.write(res, tmp_path / "plots", steps=applog.steps(events))
    assert plots.LAYOUT_PROBLEMS == []
    flow = next(n.removesuffix("-delivery") for n in figs if n.endswith("-delivery"))
    assert {"timeline", f"{flow}-s2c-tseq", f"{flow}-s2c-inflight", f"{flow}-c2s-tseq"} <= set(figs)

    def spans(ax):
        """{legend label: [(x0, x1, y0, y1)]} of the step spans."""
        out = {}
        for c in ax.collections:
            if c.get_label().startswith("step "):
                for p in c.get_paths():
                    v = p.vertices
                    out.setdefault(c.get_label(), []).append(
                        tuple(round(float(x), 6) for x in (v[:, 0].min(), v[:, 0].max(),
                                                           v[:, 1].min(), v[:, 1].max())))
        return out

    ax = figs["timeline"].axes[0]
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    y = {log: lanes.index(f"app {log}") for log in ("client.jsonl", "server.jsonl")}
    assert spans(ax) == {   # s from the first packet, on the lane of the log that ran it
        "step prep (client.jsonl)": [(-0.1, -0.01, y["client.jsonl"] - 0.35, y["client.jsonl"] + 0.35)],
        "step encode (client.jsonl)": [(0.004, 0.009, y["client.jsonl"] - 0.35, y["client.jsonl"] + 0.35)],
        "step process (server.jsonl)": [(0.011, 0.051, y["server.jsonl"] - 0.35, y["server.jsonl"] + 0.35)]}
    assert ax.get_xlim()[0] <= -0.1            # the timeline grows to show the preparation
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"step prep (client.jsonl)", "step process (server.jsonl)"} <= set(legend)
    assert "step" not in legend                # the span replaces the step's point marker
    labels = [t for t in ax.texts if t.get_text() in ("prep", "encode", "process")]
    assert {t.get_text() for t in labels} >= {"prep", "process"}
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    r = FigureCanvasAgg(figs["timeline"]).get_renderer()     # the figure was closed when saved
    boxes = [t.get_window_extent(r) for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])

    ts = figs[f"{flow}-s2c-tseq"].axes[0]
    got = spans(ts)            # full height; the preparation lies outside the flow's range
    assert got["step process (server.jsonl)"] == [(0.011, 0.051, 0.0, 1.0)]
    assert "step prep (client.jsonl)" not in got
    assert "step process (server.jsonl)" in [t.get_text() for t in ts.get_legend().get_texts()]


def test_a_capture_off_the_logs_clock_gets_no_spans(run_dir, tmp_path):
    events = _events(run_dir)
    res = report.analyze_file(run_dir / "pcap" / "client-client-eth0.pcap", events=events, keep=True)
    res["clock"] = "realtime"
    assert plotset._on_clock(res, applog.steps(events)) == []


def test_analyze_lists_the_steps(run_dir, tmp_path, capsys):
    from testbed.cli import main
    assert main(["analyze", str(run_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"]["process"] == {"count": 1, "total_ms": 40.0, "logs": ["server.jsonl"]}
    assert main(["analyze", str(run_dir), "--plots", str(tmp_path / "p")]) == 0
    text = capsys.readouterr().out
    assert "step prep" in text and "1 x, 90.0 ms in all (client.jsonl)" in text
    assert (tmp_path / "p" / "timeline.png").is_file()
    assert main(["analyze", str(run_dir), "--html", str(tmp_path / "run.html")]) == 0
    page = (tmp_path / "run.html").read_text()
    assert "timed steps" in page and "server.jsonl" in page


def test_experiment_timelines_shade_the_steps(run_dir, tmp_path, monkeypatch):
    from experiments import plots as xplots
    from testbed.spec.runresult import RunResult
    from testbed.spec.runspec import RunSpec
    RunResult(run_id="r", dir=run_dir, spec=RunSpec(), status="complete", error=None, started=0.0,
              finished=0.0, metrics={}, checks={}, fidelity={}, roles={"client": "client", "server": "server"},
              files=[{"path": "pcap/client-client-eth0.pcap", "kind": "pcap", "host": "client"},
                     {"path": "client.jsonl", "kind": "eventlog", "host": "client"},
                     {"path": "server.jsonl", "kind": "eventlog", "host": "server"}]).write()
    figs = []
    real = xplots._save
    monkeypatch.setattr(xplots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    plots.LAYOUT_PROBLEMS.clear()
    summary = {"experiment": "x", "factor": "f", "primary": "completion_ms_median",
               "by_level": {lv: {"representative": run_dir.name} for lv in ("a", "b")}}
    assert xplots.representative_figure(tmp_path, summary, tmp_path / "rep")
    one_arm = {**summary, "by_level": {"a": {"representative": run_dir.name}}}   # a narrow figure
    assert xplots.representative_figure(tmp_path, one_arm, tmp_path / "rep1")
    assert xplots.request_figure([("a", run_dir)], tmp_path / "req", "one request")
    assert plots.LAYOUT_PROBLEMS == []
    for fig in figs:      # the server's processing overlaps the packets; the preparation does not
        labels = {c.get_label() for ax in fig.axes for c in ax.collections}
        assert "step process (server.jsonl)" in labels and "step prep (client.jsonl)" not in labels
        assert "step process (server.jsonl)" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_a_narrow_figure_wraps_its_title_and_gives_its_legend_rows_instead_of_cutting_entries(tmp_path):
    """One arm is a figure ~6.7 in wide: a title of an experiment's length and eight legend
    entries do not fit on one line each; both must end inside the canvas, the legend below the
    axes' labels."""
    plt = plots._plt()
    fig = plt.figure(figsize=(6.7, 6))
    ax = fig.add_subplot()
    for k, name in enumerate(("segment", "retransmission", "cumulative ACK", "step process (server.jsonl)",
                              "handshake", "request", "wait (server + propagation)", "response")):
        ax.plot([0, 1], [k, k + 1], label=name)
    ax.set_xlabel("time since the run's first packet (s)")
    ax.set_ylabel("in flight (kB)")
    legend = plots.figure_legend(fig, fontsize=8)
    assert legend._ncols < 7                      # 7 columns would be wider than the figure
    fig.suptitle("initcwnd: the representative run of each arm (closest to the median of "
                 "completion_ms_median), captured at the client", fontsize=10)
    plots.LAYOUT_PROBLEMS.clear()
    written = plots._save(fig, tmp_path / "narrow")
    assert plots.LAYOUT_PROBLEMS == [], plots.LAYOUT_PROBLEMS
    assert "\n" in fig._suptitle.get_text()
    assert {Path(p).suffix for p in written} == {".png", ".svg", ".pdf"}


def test_a_step_name_that_would_overlap_a_link_marker_is_left_out():
    from analysis.applog import Step
    plt = plots._plt()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 10], [0, 1])
    plots.mark(ax, [(5.0, "a-b: a long link change text that reaches down the axes")])
    plots.shade_steps(ax, [Step("process", "server.jsonl", 4_000_000_000, 2000.0),
                           Step("encode", "client.jsonl", 7_000_000_000, 2000.0)], 0)
    fig.tight_layout()
    plots._label_steps(ax)
    assert [t.get_text() for t in ax.texts][1:] == ["encode"]     # "process" would cross the marker's
    assert len([c for c in ax.collections if c.get_label().startswith("step ")]) == 2
    plt.close(fig)


@pytest.mark.parametrize("lanes", [None, {"server.jsonl": 0.0}])
def test_a_span_narrower_than_a_pixel_is_still_drawn(lanes):
    """A 12 ms step on a 100 s axis is a fraction of a pixel wide: it is still visible (at least
    its outline, one line wide), full height or on its lane."""
    import numpy as np
    from analysis.applog import Step
    plt = plots._plt()
    fig, ax = plt.subplots(figsize=(4, 2), dpi=100)
    ax.set_xlim(0, 100)
    ax.set_ylim(-1, 1)
    ax.set_axis_off()
    plots.shade_steps(ax, [Step("process", "server.jsonl", 50_000_000_000, 12.0)], 0, lanes=lanes)
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[:, :, :3].astype(int)
    x = round(ax.transData.transform((50.006, 0))[0])
    column = img[:, x - 1:x + 2]
    assert (column < 250).any(), "the span left no pixel in its column"
    plt.close(fig)
