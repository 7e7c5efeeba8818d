"""``analysis.plots``: which files a figure is written as (``formats``, ``parse_formats``) and
the font subsets its PDFs share (``_reuse_font_subsets``)."""
from pathlib import Path

import pytest

from analysis import plots


def _figure(text: str):
    plt = plots._plt()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [1, 3, 2], label=text)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("in flight (kB)")
    ax.set_title(text)
    return fig


def test_formats_choose_the_files_and_the_default_is_back_after(tmp_path):
    with plots.formats(("png",)):
        assert plots._save(_figure("first flight"), tmp_path / "a") == [str(tmp_path / "a.png")]
    assert plots._save(_figure("first flight"), tmp_path / "b") == [
        str(tmp_path / f"b.{ext}") for ext in plots.FORMATS]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.pdf", "b.png", "b.svg"]


def test_parse_formats():
    assert plots.parse_formats(" PNG,pdf,.svg,png") == ("png", "pdf", "svg")
    assert {"png", "pdf", "svg", "eps", "jpg"} <= set(plots.writable_formats())
    assert "pgf" not in plots.writable_formats()
    for bad, says in (("", "an empty format"), ("png,", "an empty format"), ("doc", "'doc' is not")):
        with pytest.raises(ValueError, match=says):
            plots.parse_formats(bad)


def test_a_pdf_embeds_the_font_matplotlib_makes_subset_once_per_glyph_set(tmp_path, monkeypatch):
    """Two figures with the same text share one subset of the font; the PDFs are byte for byte
    what matplotlib writes subsetting the font for each (Type 42: TrueType, text selectable)."""
    from matplotlib.backends import _backend_pdf_ps as pdf_ps
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")      # no creation date in the files
    plots._plt()
    reuse = pdf_ps.get_glyphs_subset
    assert getattr(reuse, "reused", False)
    title = "glyphs of this test only: ŽŁŒ ĦĲ"
    with plots.formats(("pdf",)):
        monkeypatch.setattr(pdf_ps, "get_glyphs_subset", reuse.real)
        plots._save(_figure(title), tmp_path / "plain")
        monkeypatch.setattr(pdf_ps, "get_glyphs_subset", reuse)
        before = len(reuse.cache)
        plots._save(_figure(title), tmp_path / "one")
        subsets = len(reuse.cache)
        plots._save(_figure(title), tmp_path / "two")
    assert subsets > before and len(reuse.cache) == subsets      # the second figure: none more
    one, two, plain = ((tmp_path / f"{n}.pdf").read_bytes() for n in ("one", "two", "plain"))
    assert one == two == plain
    assert b"/FontFile2" in one and b"DejaVuSans" in one        # TrueType embedded, Type 42


def _plain_pdf(path, title, monkeypatch):
    """``_figure(title)`` saved as a PDF by matplotlib's own font subsetting, no cache."""
    from matplotlib.backends import _backend_pdf_ps as pdf_ps
    reuse = pdf_ps.get_glyphs_subset
    with monkeypatch.context() as m, plots.formats("pdf"):
        m.setattr(pdf_ps, "get_glyphs_subset", reuse.real)
        plots._save(_figure(title), path)
    return Path(f"{path}.pdf").read_bytes()


def test_a_failing_font_cache_leaves_the_pdf_to_matplotlib(tmp_path, monkeypatch):
    """Where the cache's own part fails — ``font_as_file`` raising for it (another matplotlib's
    internals), or a kept subset that no longer opens — the PDF is still written, byte for byte
    as matplotlib's own function makes it, and the cache is not used again."""
    import sys

    from matplotlib.backends import _backend_pdf_ps as pdf_ps
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    plots._plt()
    reuse = pdf_ps.get_glyphs_subset
    monkeypatch.setattr(reuse, "broken", False)         # put back as it was after the test
    title = "a broken cache: ĀĒĪŌŪ ŊŦ"
    plain = _plain_pdf(tmp_path / "plain", title, monkeypatch)
    as_file = pdf_ps.font_as_file

    def changed(font):
        if sys._getframe(1).f_globals.get("__name__") == plots.__name__:
            raise AttributeError("'TTFont' object has no attribute of another version")
        return as_file(font)
    before = dict(reuse.cache)
    with monkeypatch.context() as m, plots.formats("pdf"):
        m.setattr(pdf_ps, "font_as_file", changed)
        plots._save(_figure(title), tmp_path / "broken")
    assert reuse.broken and reuse.cache == before
    assert (tmp_path / "broken.pdf").read_bytes() == plain

    monkeypatch.setattr(reuse, "broken", False)
    with plots.formats("pdf"):
        plots._save(_figure(title), tmp_path / "kept")      # the subsets kept this time
    new = [k for k in reuse.cache if k not in before]
    assert new and not reuse.broken
    for key in new:
        monkeypatch.setitem(reuse.cache, key, (b"not a font", reuse.cache[key][1]))
    with plots.formats("pdf"):
        plots._save(_figure(title), tmp_path / "reopened")
    assert reuse.broken
    assert (tmp_path / "kept.pdf").read_bytes() == (tmp_path / "reopened.pdf").read_bytes() == plain


def test_formats_are_checked_on_entering(tmp_path):
    """``formats`` takes what ``parse_formats`` does (any case, a comma string) and refuses,
    before anything is written, none at all or one a figure cannot be written as."""
    with plots.formats(("PNG", ".Svg", "png")):
        assert plots._formats.get() == ("png", "svg")
    with plots.formats("pdf,png"):
        assert plots._formats.get() == ("pdf", "png")
    assert plots._formats.get() is None
    for bad, says in (((), r"\(\): no format; give one or more of .*png"), ("doc", "'doc' is not a format"),
                      (("png", ""), "an empty format"), (["bmp", "pgf"], "'bmp', 'pgf' are not formats")):
        with pytest.raises(ValueError, match=says), plots.formats(bad):
            plots._save(_figure("never written"), tmp_path / "a")
    assert not list(tmp_path.iterdir())


def test_write_qlog_writes_the_formats_asked_for(tmp_path):
    """``plotset.write_qlog(..., formats=)``: its figures as those files only; the default after."""
    import json

    from analysis import plotset, qlog
    ms = 1_800_000_000_000.0
    ev = [{"name": "transport:packet_received", "time": ms + 2 * k,
           "data": {"header": {"packet_type": "1RTT", "packet_number": k}, "raw": {"length": 1200},
                    "frames": [{"frame_type": "stream", "stream_id": 3, "offset": 1000 * k,
                                "length": 1000, "fin": k == 9}]}} for k in range(10)]
    ev += [{"name": "recovery:metrics_updated", "time": ms + t, "data": {"bytes_in_flight": b, "cwnd": 12000}}
           for t, b in ((1, 1200), (5, 2400), (9, 0))]
    f = tmp_path / "c.qlog"
    f.write_text(json.dumps({"qlog_version": "0.3",
                             "traces": [{"vantage_point": {"type": "client"}, "events": ev}]}))
    written = plotset.write_qlog(qlog.load(f), tmp_path / "q", "c", formats=("SVG",))
    assert sorted(Path(p).name for p in written) == ["c-delivery.svg", "c-inflight.svg"]
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == ["c-delivery.svg", "c-inflight.svg"]
    assert plots._formats.get() is None
