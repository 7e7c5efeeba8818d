"""What the per-capture figures draw and how they are laid out: the directions that carry data
(an upload's delivery, no figure for a 16-byte reply), link-change labels at the same moment
joined, a figure title clear of the panel titles; crafted captures (scapy), no root."""
from pathlib import Path

import pytest

pytest.importorskip("scapy.all")
from scapy.all import wrpcap  # noqa: E402
from tests.analysis.test_steps import _pkt  # noqa: E402

from analysis import plots, plotset, report  # noqa: E402

DELAY = 25.0        # one way, ms
SEGMENTS = 20       # of 1000 B


def transfer(path: Path, upload: bool, at: str) -> Path:
    """A connection as the capture at ``at`` ("client" or "server") saw it: the handshake, a
    10-byte request, then 20 kB from the client (``upload``: a 3 MB upload in miniature, then a
    16-byte reply) or from the server (a download), ACKed every second segment by the receiver;
    one way takes :data:`DELAY`."""
    sent = []            # (when sent, from the client, flags, seq, ack, payload)
    sent += [(0.0, True, "S", 100, 0, 0), (DELAY, False, "SA", 900, 101, 0),
             (2 * DELAY, True, "A", 101, 901, 0), (2 * DELAY + 0.01, True, "PA", 101, 901, 10)]
    start = 3 * DELAY + 1 if not upload else 2 * DELAY + 0.02
    base = 111 if upload else 901
    for i in range(SEGMENTS):
        t = start + 0.1 * i
        seq = base + 1000 * i
        sent.append((t, upload, "PA", seq, 901 if upload else 111, 1000))
        if i % 2:        # the receiver's ACK when the segment arrives
            sent.append((t + DELAY + 0.01, not upload, "A", 901 if upload else 111, seq + 1000, 0))
    if upload:           # the server's reply once everything arrived
        last = start + 0.1 * (SEGMENTS - 1) + DELAY + 0.02
        sent.append((last, False, "PA", 901, base + 1000 * SEGMENTS, 16))
        sent.append((last + DELAY + 0.01, True, "A", base + 1000 * SEGMENTS, 917, 0))
    here = at == "client"
    pk = [_pkt(t if frm == here else t + DELAY, frm, flags, seq, ack, n) for t, frm, flags, seq, ack, n in sent]
    wrpcap(str(path), sorted(pk, key=lambda p: p.time))
    return path


def test_an_uploads_figures_draw_the_upload_not_the_reply(tmp_path, monkeypatch):
    """The delivery figure of an upload draws the request's bytes (20,010 B here), not the 16-byte
    reply; the reply's direction gets no time-sequence or in-flight figure of its own."""
    res = report.analyze_file(transfer(tmp_path / "up.pcap", upload=True, at="client"), keep=True)
    drawn = {}
    real = plots.delivery
    monkeypatch.setattr(plots, "delivery",
                        lambda streams, *a, **kw: (drawn.update(streams), real(streams, *a, **kw))[1])
    plots.LAYOUT_PROBLEMS.clear()
    names = {Path(p).name for p in plotset.write(res, tmp_path / "p")}
    assert plots.LAYOUT_PROBLEMS == []
    flow = res["flows"][0]["flow"].replace(":", "_")
    assert f"{flow}-c2s-tseq.png" in names and f"{flow}-c2s-inflight.png" in names
    assert not {f"{flow}-s2c-tseq.png", f"{flow}-s2c-inflight.png"} & names
    assert f"{flow}-s2c-inflight.csv" in names          # its series stay
    assert list(drawn) == ["request 0"] and drawn["request 0"][1].max() == 10 + 1000 * SEGMENTS


def test_a_download_still_draws_its_responses(tmp_path):
    res = report.analyze_file(transfer(tmp_path / "down.pcap", upload=False, at="server"), keep=True)
    obj = res["_objects"]["flows"][0]
    assert plotset.carries_data(obj, "s2c") and not plotset.carries_data(obj, "c2s")
    assert list(plotset._delivered(obj)) == ["response 0"]


def test_link_changes_at_the_same_moment_get_one_label_a_line_each(tmp_path):
    """Both directions down at 5 s, up and a rate step at 5.5 s: one label per moment (its lines
    in time order), none over another nor across the frame."""
    plt = plots._plt()
    changes = [(2.0, "server-client: rate=4mbit"), (5.0, "client-server: down drop"),
               (5.0, "server-client: down drop"), (5.5, "client-server: up"),
               (5.5, "server-client: rate=30mbit"), (5.5, "server-client: up")]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot([0, 8], [0, 1])
    ax.set(xlabel="time (s)", ylabel="delivered (kB)")
    plots.mark(ax, changes)
    plots.LAYOUT_PROBLEMS.clear()
    plots._save(fig, tmp_path / "marks")
    assert plots.LAYOUT_PROBLEMS == []
    assert sorted(t.get_text() for t in ax.texts) == [
        "client-server: down drop\nserver-client: down drop",
        "client-server: up\nserver-client: rate=30mbit\nserver-client: up",
        "server-client: rate=4mbit"]
    assert len(ax.lines) == 1 + len(changes)          # every change keeps its own line


def _panels(plt, blocks: int):
    """A tall figure of ``blocks`` rows of three panels, each titled on three lines (an
    experiment's representative runs), under one figure title."""
    fig, axes = plt.subplots(3 * blocks, 3, figsize=(17, 7.8 * blocks))
    for ax in axes.flat:
        ax.set(xlabel="time (s)", ylabel="in flight (kB)")
    for ax in axes[::3].flat:
        ax.set_title("links.bottleneck.down.loss = 0%, socket.cc = reno\nruns/000-reno@0pct\n"
                     "captured at server, the data's sender", fontsize=9)
    fig.suptitle("loss-cc: the representative run of each arm (closest to the median of goodput_mbps)",
                 fontsize=10)
    return fig


def test_the_figure_title_stays_clear_of_the_panel_titles_of_a_tall_figure(tmp_path):
    """matplotlib puts a figure title 2 % of the height below the top, which on a figure of
    four blocks of panels reaches into the first row's titles; the layout check finds that, and
    ``_save`` places the title where ``tight_layout`` keeps its room."""
    plt = plots._plt()
    fig = _panels(plt, 4)
    fig.tight_layout()
    assert any(p.startswith("figure text 'loss-cc") and "over 'links.bottleneck" in p
               for p in plots.layout_problems(fig))
    plt.close(fig)
    for blocks in (1, 4):
        fig = _panels(plt, blocks)
        plots.LAYOUT_PROBLEMS.clear()
        plots._save(fig, tmp_path / f"tall{blocks}")
        assert plots.LAYOUT_PROBLEMS == [], plots.LAYOUT_PROBLEMS


def test_tick_labels_are_values_not_an_offset():
    """Handshakes of 200.04–200.10 ms read as such, not as 0.04–0.10 beside a "+2.001e2"."""
    plt = plots._plt()
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [200.04, 200.07, 200.10])
    fig.canvas.draw()
    assert ax.yaxis.get_offset_text().get_text() == ""
    assert any(t.get_text().startswith("200.") for t in ax.get_yticklabels())
    plt.close(fig)


def test_eleven_delivery_streams_do_not_share_a_look(tmp_path, monkeypatch):
    """Colours repeat past ten: the eleventh stream had request 0's blue line."""
    import numpy as np
    figs = []
    real = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    streams = {f"request {k}": (np.array([0, 10**9]), np.array([0, 1000 * (k + 1)])) for k in range(11)}
    plots.delivery(streams, 0, tmp_path / "d")
    looks = [(line.get_color(), line.get_linestyle()) for line in figs[0].axes[0].lines
             if not line.get_label().startswith("_")]
    assert len(looks) == 11 and len(set(looks)) == 11


def test_coincident_events_of_a_lane_do_not_hide_each_other(tmp_path, monkeypatch):
    """ack, first_app_data and request_first at one moment were drawn on one spot."""
    figs = []
    real = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    lanes = {"10.0.0.1": [(10**8, "ack:1000"), (10**8, "first_app_data:1000"), (10**8, "request_first#0")]}
    plots.swimlane(lanes, 0, tmp_path / "t")
    spots = {(line.get_xdata()[0], line.get_ydata()[0]) for line in figs[0].axes[0].lines}
    assert len(spots) == 3


def test_the_layout_check_finds_a_legend_over_data_an_unlabelled_axis_and_a_label_without_unit():
    """What a reviewer rejects beyond overlapping text: a legend inside the axes over a line
    or a bar, numbers on an axis that nothing names, an axis label without its unit, a value
    written above a bar that the top spine strikes through."""
    plt = plots._plt()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar([0, 1], [3, 1], label="measured")
    ax.legend(loc="upper left")
    ax.annotate("3.0", (0, 3), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom")
    ax.set_ylabel("completion")
    got = plots.layout_problems(fig)
    assert "legend over the data (axes)" in got
    assert "x axis without a label (axes)" in got
    assert "y axis label 'completion' names no unit (axes)" in got
    assert any(p.startswith("annotation '3.0' across the axes' frame") for p in got)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar([0, 1], [3, 1], label="measured")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))       # beside the axes: no data hidden
    ax.margins(y=0.15)
    ax.annotate("3.0", (0, 3), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom")
    ax.set(xlabel="arm (index)", ylabel="completion (ms)")
    fig.tight_layout()
    assert plots.layout_problems(fig) == []
    plt.close(fig)


def test_a_shared_axis_is_labelled_once_and_host_names_are_no_numbers():
    """A column of panels sharing its time axis labels it under the last; lanes named by
    address (10.0.0.1) are names, not numbers wanting a unit."""
    plt = plots._plt()
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(5, 4))
    top.plot([0, 1], [0, 1])
    top.set_ylabel("in flight (kB)")
    bottom.plot([0, 1], [0, 1])
    bottom.set_yticks([0, 1], ["10.0.0.1", "10.0.0.2"])
    bottom.set_xlabel("time (s)")
    fig.tight_layout()
    assert plots.layout_problems(fig) == []
    plt.close(fig)


def test_each_delivery_stream_is_drawn_over_its_own_span_only(tmp_path, monkeypatch):
    """Twelve requests of a kept connection, each delivered in its turn: drawn from zero to the
    end each, they lay on each other at 0 and at the common size (the legend named lines no one
    could see); drawn from just before the first byte to the last, each is its own stroke."""
    import numpy as np
    figs = []
    real = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    t = np.arange(0, 13) * 10**9
    streams = {f"request {k}": (t, np.clip((np.arange(13) - k) * 1000, 0, 1000)) for k in range(12)}
    plots.delivery(streams, 0, tmp_path / "d")
    lines = [line for line in figs[0].axes[0].lines if not line.get_label().startswith("_")]
    for k, line in enumerate(lines):
        x = line.get_xdata()
        assert (x.min(), x.max()) == (k, k + 1), (k, x)
    assert plots.active_span(np.array([0, 1, 2]), np.array([5, 5, 5]))[0].tolist() == [0, 1, 2]


def test_outstanding_stays_visible_under_an_equal_pipe(tmp_path, monkeypatch):
    """Without loss pipe equals outstanding: drawn alike, the pipe hid the outstanding line
    that the legend names."""
    res = report.analyze_file(transfer(tmp_path / "down.pcap", upload=False, at="server"), keep=True)
    figs = []
    real = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    obj = res["_objects"]["flows"][0]
    plots.in_flight(obj["directions"]["s2c"], res["flows"][0]["t0_ns"], tmp_path / "f")
    out, pipe = figs[0].axes[0].lines[:2]
    assert out.get_linewidth() > 2 * pipe.get_linewidth() and pipe.get_linestyle() != out.get_linestyle()


def test_marker_texts_lie_inside_the_top_panel_beside_their_lines(tmp_path):
    """The texts of a column's link events: once, in its top panel, written across (not along)
    their lines, wrapped to the room beside the line, moved down where they would overlap —
    even in a panel too short for a text written upwards — and never across a frame; the lines
    near the right edge put theirs on the left."""
    plt = plots._plt()
    fig, axes = plt.subplots(3, 1, figsize=(5.2, 4), sharex=True)
    for ax, name in zip(axes, ("sequence (kB)", "in flight (kB)", "request")):
        ax.plot([0, 10], [0, 1])
        ax.set_ylabel(name)
    axes[-1].set_xlabel("time (s)")
    marks = [(1.0, "server-client: frame 1290 of 1500 B: drop, and until 7.0s TCP resends of its bytes "
                   "(UDP: the frame only)"),
             (1.6, "client-server: down drop"), (9.5, "server-client: rate=30mbit, its last step")]
    for ax in axes:
        for x, _ in marks:
            ax.axvline(x, ls="--")
    plots.mark_texts(axes[0], marks)
    plots.LAYOUT_PROBLEMS.clear()
    plots._save(fig, tmp_path / "marks")
    assert plots.LAYOUT_PROBLEMS == []
    texts = axes[0].texts
    assert sorted(t.get_text().replace("\n", " ") for t in texts) == sorted(text for _x, text in marks)
    assert all(t.get_rotation() == 0 for t in texts) and not axes[1].texts and not axes[2].texts
    assert [t.get_horizontalalignment() for t in sorted(texts, key=lambda t: t.xy[0])][-1] == "right"


def test_a_figure_legend_of_axes_without_labels_is_none():
    """The evenly filled rows divided by zero when no artist had a label (a UDP run whose
    capture holds no transport packet)."""
    plt = plots._plt()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert plots.figure_legend(fig) is None and not fig.legends
    plt.close(fig)
