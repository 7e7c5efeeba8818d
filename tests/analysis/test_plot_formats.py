"""``analysis.plots``: which files a figure is written as (``formats``, ``parse_formats``) and
the font subsets its PDFs share (``_reuse_font_subsets``)."""
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
