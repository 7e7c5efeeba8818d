"""A link's schedule changes as markers on the figures."""
from testbed.emulator import linklog


def test_link_markers_read_the_change_files_in_time_order(tmp_path):
    from analysis.plotset import link_markers
    a, b = tmp_path / "a-b.frames", tmp_path / "b-a.frames"
    linklog.write_changes(a, {"origin_ns": 0}, [{"kind": "step", "actual_ns": 3_000, "what": "rate=10mbit"}])
    linklog.write_changes(b, {"origin_ns": 0}, [{"kind": "down", "actual_ns": 1_000, "what": "down drop"},
                                                 {"kind": "up", "actual_ns": 2_000, "what": "up"}])
    c = tmp_path / "c-d.frames"    # no schedule: no change file
    assert link_markers([a, b, c]) == [(1_000, "b-a: down drop"), (2_000, "b-a: up"),
                                       (3_000, "a-b: rate=10mbit")]


def test_mark_draws_the_markers_inside_the_data_range_only():
    from analysis.plots import _place_mark_texts, _plt, mark
    plt = _plt()
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 4])
    lo, hi = ax.get_xlim()
    mark(ax, [(1.0, "step"), (50.0, "later"), (-9.0, "before")])
    _place_mark_texts(ax)                   # as the figure's _save does once it is laid out
    assert [t.get_text() for t in ax.texts] == ["step"]
    assert len(ax.lines) == 2 and ax.get_xlim() == (lo, hi)
    plt.close(fig)
