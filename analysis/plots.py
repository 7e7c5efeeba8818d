"""Figures (matplotlib, Agg backend), each written as PNG, SVG and PDF (:data:`FORMATS`; within
:func:`formats`, as it says).

- :func:`time_sequence`: tcptrace's time-sequence graph for one data direction:
  each segment a vertical bar from its first to its last sequence number
  (black; retransmissions red), the cumulative-ACK line (green step), the
  receive-window line = ACK + advertised window (yellow step), SACK blocks as
  purple bars at the time of the ACK carrying them.  Sequence numbers relative
  to the sender's ISN.
- :func:`in_flight`: outstanding bytes and RFC 6675 pipe as step functions,
  with the sender's cwnd where an application log has TCP_INFO samples
  (``snd_cwnd`` x ``snd_mss`` bytes) or a qlog has ``cwnd``.
- :func:`swimlane`: handshake, completion and application events on one lane
  per host (and one per application log role), one marker per kind of event.
- :func:`delivery`: cumulative bytes delivered per stream (per request and
  response for TCP, per QUIC stream for qlog) over time.
- :func:`steps`: any step series (QUIC bytes_in_flight and cwnd from qlog).
- :func:`trace_rate`: a Mahimahi link trace's rate over one loop, per window.

Every one takes ``markers``: [(seconds from ``t0``, text)], drawn by :func:`mark` as dashed
vertical lines with their text (a link's changes during the run: ``plotset.link_markers``; the
texts of changes at the same moment joined into one label), and
``steps`` (``spans`` for :func:`steps`): the run's timed steps (``analysis.applog.Step``, on
the capture's clock), drawn by :func:`shade_steps` as shaded spans labelled with their name
where the label fits.  A figure of several panels per column draws a marker's line in each and
its text once, across the line inside the top panel (:func:`mark_texts`).
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.fonttype"] = "none"      # SVG text stays text (searchable, editable)
    plt.rcParams["pdf.fonttype"] = 42          # TrueType in the PDF, text selectable
    plt.rcParams["axes.formatter.useoffset"] = False   # ticks read as values, not "+2.001e2" offsets
    _reuse_font_subsets()
    return plt


def writable_formats() -> list[str]:
    """The file formats (suffixes) a figure can be written as: what matplotlib's Agg canvas
    writes (``png``, ``pdf``, ``svg``, ``eps``, ``jpg``, …) but :data:`NOT_WRITTEN`."""
    _plt()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    return sorted(set(FigureCanvasAgg.get_supported_filetypes()) - set(NOT_WRITTEN))


def parse_formats(text: str) -> tuple[str, ...]:
    """``"png,pdf"`` -> ("png", "pdf"): a comma list of :func:`writable_formats` (any case,
    each once, in the order given); a ValueError naming what is wrong and what is allowed."""
    return _checked_formats(text.split(","), repr(text))


def _checked_formats(items, what: str) -> tuple[str, ...]:
    """``items`` (suffixes) as :func:`parse_formats` takes them, ``what`` naming them in the
    ValueError's message."""
    allowed = writable_formats()
    items = [str(f).strip().lower().removeprefix(".") for f in items]
    if not items:
        raise ValueError(f"{what}: no format; give one or more of {', '.join(allowed)} (e.g. png,pdf)")
    if not all(items):
        raise ValueError(f"{what}: an empty format in the list; give a comma list of "
                         f"{', '.join(allowed)} (e.g. png,pdf)")
    bad = list(dict.fromkeys(f for f in items if f not in allowed))
    if bad:
        why = " (pgf needs a LaTeX installation)" if "pgf" in bad else ""
        raise ValueError(f"{what}: {', '.join(map(repr, bad))} "
                         f"{'is not a format' if len(bad) == 1 else 'are not formats'} a figure "
                         f"can be written as{why}; give a comma list of {', '.join(allowed)} (e.g. png,pdf)")
    return tuple(dict.fromkeys(items))


@contextmanager
def formats(fmts):
    """Within it, :func:`_save` (every figure function here, and ``experiments.plots``') writes
    each figure as ``fmts`` instead of :data:`FORMATS`: suffixes (e.g. ("png",)) or a comma
    list (``"png,pdf"``), checked and normalised as :func:`parse_formats` does — a ValueError
    on entering it for none, an empty one or one a figure cannot be written as."""
    what = repr(fmts)
    chosen = _checked_formats(fmts.split(",") if isinstance(fmts, str) else list(fmts), what)
    token = _formats.set(chosen)
    try:
        yield
    finally:
        _formats.reset(token)


#: at most this many font subsets kept by :func:`_reuse_font_subsets` (some 15 kB each)
FONT_SUBSETS = 256


def _reuse_font_subsets() -> None:
    """Make matplotlib subset a font for a PDF's Type 42 embedding once per set of glyphs in
    this process, not once per figure: fontTools' subsetting of DejaVu Sans (its GSUB/GPOS
    tables read each time) took some 0.05 s per font per PDF, a third of what writing the
    figures cost, and the figures of a run share few glyph sets (the 72 PDFs of a run of six
    captures: 100 subsets, 23 different; a ligature, "fl" of "in flight", is a font of its own).
    The fonts embedded stay byte for byte the ones matplotlib makes: the first subset of each
    set is matplotlib's own, kept as the file it writes (``font_as_file``) once that file,
    opened again, is seen to be written as the same bytes, and handed out again opened from it.

    It wraps matplotlib's private ``_backend_pdf_ps.get_glyphs_subset`` for the whole process,
    and only where all it relies on has the shape it expects (matplotlib 3.11's: a function of
    ``(fontfile, glyphs)`` returning a context manager of a ``SubsetResults(font,
    glyph_index_map)``, ``font_as_file``, fontTools' ``TTFont``); else nothing changes.  Should
    its own part fail all the same (another matplotlib's internals), that call and every later
    one go to matplotlib's function: the PDF as without the cache, never a failed save.  An error
    of matplotlib's function is raised as it is."""
    import inspect
    import logging
    from io import BytesIO
    try:
        from fontTools.ttLib import TTFont
        from matplotlib.backends import _backend_pdf_ps as pdf_ps
        real = pdf_ps.get_glyphs_subset
        if getattr(real, "reused", False):
            return
        fits = (list(inspect.signature(real).parameters) == ["fontfile", "glyphs"]
                and getattr(pdf_ps.SubsetResults, "_fields", None) == ("font", "glyph_index_map")
                and callable(pdf_ps.font_as_file)
                and {"recalcBBoxes", "recalcTimestamp"} <= set(inspect.signature(TTFont).parameters))
    except (ImportError, AttributeError, TypeError, ValueError):
        return
    if not fits:
        return                      # another matplotlib's internals: its own way, unchanged
    cache: dict = {}

    def opened(data: bytes):
        return TTFont(BytesIO(data), recalcBBoxes=False, recalcTimestamp=False)

    def keep(key, made) -> None:
        """Keep the subset matplotlib ``made`` (its context manager) in the cache."""
        with made as sub:
            if not isinstance(sub.font, TTFont):
                raise TypeError(f"a subset font of {type(sub.font)}, not fontTools' TTFont")
            data = pdf_ps.font_as_file(sub.font).getvalue()
            index = dict(sub.glyph_index_map)
        with opened(data) as font:
            if pdf_ps.font_as_file(font).getvalue() != data:
                raise ValueError("a subset font opened again is not written as the same bytes")
        cache[key] = (data, index)
        while len(cache) > FONT_SUBSETS:
            cache.pop(next(iter(cache)))

    @contextmanager
    def closing_font(results):
        """What ``SubsetResults._as_cm`` makes of ``results``: them, the font closed after."""
        try:
            yield results
        finally:
            results.font.close()

    def get_glyphs_subset(fontfile, glyphs):
        glyphs = frozenset(glyphs)
        if get_glyphs_subset.broken:
            return real(fontfile, glyphs)
        try:
            key = (str(fontfile), getattr(fontfile, "face_index", 0), glyphs)
            known = key in cache
        except Exception:
            return fall_back(fontfile, glyphs)
        if not known:
            made = real(fontfile, glyphs)       # an error of matplotlib's own: raised as it is
            try:
                keep(key, made)
            except Exception:
                return fall_back(fontfile, glyphs)
        try:
            data, index = cache[key]
            return closing_font(pdf_ps.SubsetResults(opened(data), dict(index)))
        except Exception:
            return fall_back(fontfile, glyphs)

    def fall_back(fontfile, glyphs):
        get_glyphs_subset.broken = True
        logging.getLogger(__name__).debug("PDF font subsets made for every figure again: the "
                                          "cache of matplotlib's failed", exc_info=True)
        return real(fontfile, glyphs)

    get_glyphs_subset.reused, get_glyphs_subset.real, get_glyphs_subset.cache = True, real, cache
    get_glyphs_subset.broken = False
    pdf_ps.get_glyphs_subset = get_glyphs_subset


#: figures written since the list was last cleared whose layout :func:`layout_problems` faulted
#: (path of the figure's first file, the PNG by default, problems); ``_save`` also logs each as a
#: warning
LAYOUT_PROBLEMS: list[tuple[str, list[str]]] = []
#: the files each figure is written as by default (:func:`formats` chooses others)
FORMATS = ("png", "svg", "pdf")
#: what matplotlib writes that :func:`parse_formats` refuses: PGF needs a LaTeX installation
NOT_WRITTEN = ("pgf",)
_formats: ContextVar[tuple[str, ...] | None] = ContextVar("formats", default=None)
LINE_STYLES = ("-", "--", ":", "-.")   # one per ten lines of a figure: colours repeat past ten
LANE_SPREAD = 0.6                       # of a swimlane's height, over which its event kinds spread
DPI = 150
#: the share of a figure's height a :func:`figure_legend` may take before the figure grows by the
#: rest (the axes keep their height)
TALL_LEGEND = 0.2


def layout_problems(fig) -> list[str]:
    """What a reviewer would reject in ``fig``'s layout, as drawn: a text (title, axis label,
    tick label, legend, annotation) that reaches outside the canvas, tick labels of one axis
    that overlap each other, a figure text (the figure's title) or legend over an axes' title,
    axis label or tick label, annotations of one axes that overlap each other or straddle its
    frame (a value written above a bar struck through by the top spine), a legend inside
    an axes over its data (:func:`_legend_over_data`), and an axis with numbers on it that has
    no label (its own or that of an axes sharing it) or whose label names no unit
    (:func:`_axis_label_problems`).  [] when there is none."""
    fig.draw_without_rendering()       # ticks and texts laid out as drawn, no pixels
    r = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    out = []

    def outside(t, what):
        if not t.get_visible() or not t.get_text().strip():
            return
        b = t.get_window_extent(r)
        if b.x0 < -1 or b.y0 < -1 or b.x1 > W + 1 or b.y1 > H + 1:
            out.append(f"{what} {t.get_text()[:40]!r} outside the canvas")
    labels = [t for ax in fig.axes if ax.get_visible() and ax.axison
              for t in (ax.xaxis.label, ax.yaxis.label, ax.title, ax._left_title, ax._right_title,
                        *_tick_labels(ax, "x"), *_tick_labels(ax, "y"))
              if t.get_visible() and t.get_text().strip()]
    for t in fig.texts:
        outside(t, "figure text")
        if t.get_visible() and t.get_text().strip():
            box = t.get_window_extent(r)
            out += [f"figure text {t.get_text()[:30]!r} over {u.get_text()[:40]!r}" for u in labels
                    if _overlap(box, u.get_window_extent(r))]
    for leg in fig.legends:
        box = leg.get_window_extent(r)
        for t in leg.get_texts():
            outside(t, "legend entry")
        for t in labels:
            if box.overlaps(t.get_window_extent(r)):
                out.append(f"figure legend over {t.get_text()[:40]!r}")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label):
            outside(t, "label")
        texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        for t in texts:
            outside(t, "annotation")
        boxes = [(t, t.get_window_extent(r)) for t in texts]
        frame = ax.get_window_extent(r)
        out += [f"annotation {t.get_text()[:30]!r} across the axes' frame" for t, b in boxes
                if _overlap(b, frame) and not _inside(b, frame)]
        out += [f"annotations overlap ({a.get_text()[:30]!r}, {b.get_text()[:30]!r})"
                for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if _overlap(ba, bb)]
        if ax.get_legend() is not None:
            for t in ax.get_legend().get_texts():
                outside(t, "legend entry")
            if _legend_over_data(ax, r):
                out.append(f"legend over the data ({ax.get_title()[:30] or 'axes'})")
        out += _axis_label_problems(ax)
        for name in ("x", "y"):
            shown = _tick_labels(ax, name)
            boxes = sorted((t.get_window_extent(r) for t in shown), key=lambda b: (b.x0, b.y0))
            for t in shown:
                outside(t, f"{name} tick label")
            for a, b in zip(boxes, boxes[1:]):
                if _overlap(a, b):
                    out.append(f"{name} tick labels overlap ({ax.get_title()[:30] or 'axes'})")
                    break
    return out


#: words of an axis label that say its numbers have no unit (a share, an index, a count)
DIMENSIONLESS = ("fraction", "probability", "share", "index", "number", "count", "chunk", "request",
                 "round", "ratio", "lane")
#: a tick label that is a number: 1,250 / −0.5 / 2.5e3 / 40% / 10^{-1} (a log axis), not 10.0.0.1
_NUMBER = re.compile(r"\s*(?:[\u2212+\-]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][\u2212+\-]?\d+)?\s*%?"
                     r"|\d+\^\{[\u2212\-]?\d+\})\s*")


def _axis_label_problems(ax) -> list[str]:
    """An axis of ``ax`` whose drawn tick labels are numbers but that has no label — neither its
    own nor one of an axes sharing it (a column of panels labels its x axis once) — or whose
    label names no unit: none in parentheses and no word of :data:`DIMENSIONLESS`."""
    out = []
    for name in ("x", "y"):
        ticks = [t.get_text().replace("\\mathdefault", "").replace("$", "") for t in _tick_labels(ax, name)]
        if not ticks or not all(_NUMBER.fullmatch(t) for t in ticks):
            continue
        shared = (ax.get_shared_x_axes() if name == "x" else ax.get_shared_y_axes()).get_siblings(ax)
        labels = [(a.xaxis if name == "x" else a.yaxis).label.get_text().strip() for a in shared]
        label = next((lab for lab in labels if lab), "")
        where = ax.get_title()[:30] or "axes"
        if not label:
            out.append(f"{name} axis without a label ({where})")
        elif not re.search(r"\(.+\)", label) and not any(w in label.lower() for w in DIMENSIONLESS):
            out.append(f"{name} axis label {label[:40]!r} names no unit ({where})")
    return out


def _legend_over_data(ax, renderer) -> bool:
    """Whether the legend of ``ax``, where it lies inside the axes, covers its data: a line (a
    step line as drawn), a marker, an error bar or a bar; shading drawn lighter than 0.6 and
    reference lines spanning the whole axes (``axhline``/``axvline``) do not count."""
    from matplotlib import cbook
    from matplotlib.collections import LineCollection
    from matplotlib.path import Path as MPath
    from matplotlib.patches import Rectangle
    leg = ax.get_legend()
    box = leg.get_window_extent(renderer)
    inside = box.intersection(box, ax.get_window_extent(renderer))
    if inside is None or inside.width < 2 or inside.height < 2:
        return False
    inside = inside.padded(-2)
    for line in ax.lines:
        xy = np.asarray(line.get_xydata(), float)
        if not line.get_visible() or not len(xy) or line.get_transform() != ax.transData:
            continue            # axhline / axvline span the axes in axes coordinates
        if line.get_drawstyle().startswith("steps") and len(xy) > 1:
            xy = np.column_stack(cbook.STEP_LOOKUP_MAP[line.get_drawstyle()](xy[:, 0], xy[:, 1]))
        xy = line.get_transform().transform(xy[np.isfinite(xy).all(axis=1)])
        if not len(xy):
            continue
        if line.get_marker() not in (None, "None", "", " ") and inside.count_contains(xy):
            return True
        if line.get_linestyle() not in ("None", "", " ") and len(xy) > 1 and \
                MPath(xy).intersects_bbox(inside, filled=False):
            return True
    for c in ax.collections:
        if isinstance(c, LineCollection) and c.get_visible() and (c.get_alpha() or 1) >= 0.6:
            for seg in c.get_segments():
                seg = c.get_transform().transform(np.asarray(seg, float))
                if len(seg) > 1 and MPath(seg).intersects_bbox(inside, filled=False):
                    return True
    return any(isinstance(p, Rectangle) and p.get_visible() and (p.get_alpha() or 1) >= 0.6
               and _overlap(p.get_window_extent(renderer), inside) for p in ax.patches)


def _tick_labels(ax, name: str) -> list:
    """The tick labels of ``ax``'s ``name`` ("x"/"y") axis that are drawn: visible, not empty,
    at a tick inside the view (matplotlib keeps labels of ticks just outside it, undrawn)."""
    axis = ax.xaxis if name == "x" else ax.yaxis
    lo, hi = sorted((ax.viewLim.x0, ax.viewLim.x1) if name == "x" else (ax.viewLim.y0, ax.viewLim.y1))
    slack = 1e-9 * abs(hi - lo)
    return [t for t, loc in zip(axis.get_ticklabels(), axis.get_ticklocs())
            if t.get_visible() and t.get_text().strip() and lo - slack <= loc <= hi + slack]


def _inside(a, b) -> bool:
    """Whether window extent ``a`` lies within ``b`` (a pixel of slack)."""
    return a.x0 >= b.x0 - 1 and a.y0 >= b.y0 - 1 and a.x1 <= b.x1 + 1 and a.y1 <= b.y1 + 1


def _overlap(a, b) -> bool:
    """Whether two window extents share more than a pixel each way (touching is no overlap)."""
    both = a.intersection(a, b)
    return both is not None and both.width > 1 and both.height > 1


def figure_legend(fig, axes=None, max_cols: int = 7, **kwargs):
    """One legend below the axes of ``fig``: every distinct label of ``axes`` (default: all of
    the figure's) once, in as many columns (at most ``max_cols``) as fit the figure's width, so
    that a narrow figure (one arm) gets more rows instead of entries cut off; ``_save`` keeps its
    height free below the axes; its rows are filled evenly (eight entries in two rows of four,
    not seven and one).  ``kwargs`` go to ``Figure.legend``.  None (no legend) when the axes
    have no labelled artist."""
    handles, names = [], []
    for ax in fig.axes if axes is None else axes:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    if not names:
        return None
    renderer = fig.canvas.get_renderer()
    ncol = max(1, min(len(names), max_cols))
    ncol = max(1, -(-len(names) // -(-len(names) // ncol)))        # the same rows, evenly filled
    while True:
        leg = fig.legend(handles, names, loc="lower center", ncol=ncol, frameon=False, **kwargs)
        if ncol == 1 or leg.get_window_extent(renderer).width <= fig.bbox.width - 8:
            return leg
        leg.remove()
        ncol -= 1


def _place_suptitle(fig) -> None:
    """Wrap the figure's suptitle onto as many lines as it needs to fit the figure's width and
    put its top a few points below the canvas' top edge, where ``tight_layout`` reserves its
    room (matplotlib's default, 2 % of the height below the edge, reaches into the axes' titles
    on a tall figure)."""
    import textwrap
    title = fig._suptitle
    if title is None or not title.get_text():
        return
    renderer = fig.canvas.get_renderer()
    text = " ".join(title.get_text().split())
    chars = len(text)
    while title.get_window_extent(renderer).width > fig.bbox.width - 8 and chars > 20:
        chars = int(chars * 0.9)
        title.set_text(textwrap.fill(text, chars))
    title.set_verticalalignment("top")
    title.set_y(1 - 4 / 72 / fig.get_figheight())


def _save(fig, base: Path) -> list[str]:
    """Lay out ``fig`` (its suptitle placed by :func:`_place_suptitle`, a :func:`figure_legend`'s
    height kept free below the axes and the figure taller where that passes
    :data:`TALL_LEGEND`, :func:`mark_texts` and :func:`label_point` texts placed), write it as
    PNG (``DPI``), SVG and PDF (text as text) next to ``base`` (or as :func:`formats` says),
    close it; a layout :func:`layout_problems` faults is logged and kept in
    ``LAYOUT_PROBLEMS``."""
    import logging
    renderer = fig.canvas.get_renderer()
    legends = [leg.get_window_extent(renderer).height / fig.bbox.height for leg in fig.legends]
    if legends and max(legends) > TALL_LEGEND:       # many entries (marker tags): the figure grows
        fig.set_figheight(fig.get_figheight() * (1 + max(legends) - TALL_LEGEND))
        legends = [leg.get_window_extent(renderer).height / fig.bbox.height for leg in fig.legends]
    _place_suptitle(fig)
    fig.tight_layout(**({"rect": (0, max(legends) + 0.01, 1, 1)} if legends else {}))
    _layout_final(fig)
    for ax in fig.axes:
        _place_mark_texts(ax)
        _label_points(ax)
        _label_steps(ax)
    base.parent.mkdir(parents=True, exist_ok=True)
    problems = layout_problems(fig)
    out = []
    chosen = _formats.get()
    for ext in FORMATS if chosen is None else chosen:
        p = Path(f"{base}.{ext}")
        fig.savefig(p, dpi=DPI)
        out.append(str(p))
    if problems:
        LAYOUT_PROBLEMS.append((out[0], problems))
        logging.getLogger(__name__).warning("%s: %s", out[0], "; ".join(problems))
    _plt().close(fig)
    return out


def _layout_final(fig) -> None:
    """Tell matplotlib that ``fig``'s layout is done: ``tight_layout`` leaves a placeholder
    layout engine on the figure, and for a figure with an engine every ``savefig`` draws it once
    more, without output, before the draw that writes the file (up to a third of a file's
    cost); the placeholder does nothing at that draw.  Left as it is where the rcParams ask for a layout
    engine on every figure (``figure.autolayout``, ``figure.constrained_layout.use``)."""
    import matplotlib
    from matplotlib.layout_engine import PlaceHolderLayoutEngine
    rc = matplotlib.rcParams
    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine) and not (
            rc["figure.autolayout"] or rc["figure.constrained_layout.use"]):
        fig.set_layout_engine(None)


def mark(ax, markers) -> None:
    """``markers`` [(x in the axes' data units, text)] as dashed purple vertical lines, their
    texts by :func:`mark_texts`; those outside the x range the data span are left out (the range
    stays the data's)."""
    lo, hi = ax.get_xlim()
    shown = [(x, text) for x, text in markers if lo <= x <= hi]
    for x, _ in shown:
        ax.axvline(x, zorder=1, **MARK_LINE)
    mark_texts(ax, shown)
    ax.set_xlim(lo, hi)


#: at most this many moments of one axes get their marker's text written beside the line
#: (:func:`mark_texts`); past it each line gets a numbered tag, the texts listed in the legend
MAX_MARK_TEXTS = 3
#: the style of a marker's line (:func:`mark`, the representative figure's arms)
MARK_LINE = {"color": "tab:purple", "lw": 0.9, "ls": "--"}
#: the style of a marker's text or tag: purple like its line, on a light box that keeps it
#: readable where it lies over data
MARK_TEXT = {"fontsize": 7, "color": "tab:purple", "zorder": 6,
             "bbox": {"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8}}


def mark_texts(ax, marks, legend_ax=None) -> None:
    """The texts of vertical markers ``marks`` [(x in data units, text)] whose lines the caller
    drew (on ``ax`` and the panels below it): texts at the same moment joined (a line each),
    each written horizontally inside ``ax`` beside its line by :func:`_place_mark_texts` once the
    layout is final — wrapped to the room beside the line, on the side with more room, moved
    down where it would overlap another label, never across the axes' frame.  Past
    :data:`MAX_MARK_TEXTS` moments each line gets a numbered tag instead and the legend an entry
    "N: text" (drawn on ``legend_ax``, default ``ax``; one number per text in the figure)."""
    moments: dict = {}
    for x, text in marks:
        moments.setdefault(float(x), [])
        if text not in moments[float(x)]:
            moments[float(x)].append(text)
    if not moments:
        return
    pending = ax.__dict__.setdefault("_mark_texts", [])
    if len(moments) + len(pending) <= MAX_MARK_TEXTS:
        pending += [(x, "\n".join(texts)) for x, texts in sorted(moments.items())]
        return
    tags = ax.figure.__dict__.setdefault("_mark_tags", {})
    target = legend_ax if legend_ax is not None else ax
    for x, texts in sorted(moments.items()):
        text = "; ".join(texts)
        if text not in tags:
            tags[text] = len(tags) + 1
            target.plot([], [], label=f"{tags[text]}: {text}", **MARK_LINE)
        pending.append((x, str(tags[text])))


def _take_pending(ax, name: str):
    """The texts queued on ``ax`` under ``name`` to be placed once the layout is final, taken
    off it, with the renderer, the axes' frame and the extents of the texts already on it, in
    pixels; None when there are none."""
    pending = getattr(ax, name, None)
    if not pending:
        return None
    setattr(ax, name, [])
    r = ax.figure.canvas.get_renderer()
    placed = [t.get_window_extent(r) for t in ax.texts if t.get_visible() and t.get_text().strip()]
    return pending, r, ax.get_window_extent(r), placed


def _place_mark_texts(ax) -> None:
    """Write the pending :func:`mark_texts` of ``ax`` in time order, each at the highest place
    beside its line where it lies inside the axes, crosses no other marker's line and keeps
    clear of the texts written before by a gap of a few characters to the side, so that two
    labels on one row do not read as one (the texts of lines closer than a text's height are
    joined into one at the latest of them, a line each in time order); a text is wrapped to the
    room on its side, the side with more room tried first.  Where no place crosses no line
    (markers closer than their labels are wide), one that crosses lines is taken.  A text whose
    line lies outside the view is left out."""
    import textwrap
    from matplotlib.transforms import Bbox
    taken = _take_pending(ax, "_mark_texts")
    if taken is None:
        return
    pending, r, frame, placed = taken
    pt = ax.figure.dpi / 72
    gap = 24 * pt                                       # to the side of another label, px
    lines = [ax.transData.transform((x, 0))[0] for x, _ in pending]
    joined: list = []               # lines closer than a text's height: one text, a line each
    for x, text in sorted(pending, key=lambda p: p[0]):
        if joined and ax.transData.transform((x, 0))[0] - ax.transData.transform((joined[-1][0], 0))[0] < 8 * pt:
            joined[-1] = (x, f"{joined[-1][1]}\n{text}")
        else:
            joined.append((x, text))

    def free(b, px, strict):
        if not _inside(b, frame) or any(_overlap(Bbox.from_extents(b.x0 - gap, b.y0 - 1, b.x1 + gap, b.y1 + 1), p)
                                        for p in placed):
            return False
        return not strict or not any(b.x0 - 2 < lx < b.x1 + 2 for lx in lines if abs(lx - px) > 0.5)

    for x, text in joined:
        px = ax.transData.transform((x, 0))[0]
        if not frame.x0 - 1 <= px <= frame.x1 + 1:
            continue
        room = {"left": px - frame.x0 - 6 * pt, "right": frame.x1 - px - 6 * pt}
        t = ax.annotate(text, (x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -2),
                        textcoords="offset points", va="top", **MARK_TEXT)
        best = None
        for strict in (True, False):
            for side in sorted(room, key=room.get, reverse=True):
                t.set_horizontalalignment("left" if side == "right" else "right")
                dx = 3 if side == "right" else -3
                width = max(len(line) for line in text.split("\n"))
                t.set_text(text)
                t.xyann = (dx, -2)
                while t.get_window_extent(r).width > room[side] and width > 12:
                    width = int(width * 0.85)
                    t.set_text("\n".join(textwrap.fill(line, width) for line in text.split("\n")))
                step = max(t.get_window_extent(r).height / 4, 2.0)
                drop = 0.0
                while True:
                    t.xyann = (dx, -2 - drop / pt)
                    b = t.get_window_extent(r)
                    if b.y0 < frame.y0:
                        break
                    if free(b, px, strict):
                        best = b
                        break
                    drop += step
                if best is not None:
                    break
            if best is not None:
                break
        if best is None:            # no room left: at the top, where the layout check will say so
            t.xyann = (t.xyann[0], -2)
            best = t.get_window_extent(r)
        placed.append(best)


def label_point(ax, x, y, text) -> None:
    """``text`` written right of the point (x, y) of ``ax`` (data units), else left of and below
    it, once the layout is final (:func:`_label_points`): left out where both would reach
    outside the axes or over another text."""
    ax.__dict__.setdefault("_point_labels", []).append((x, y, text))


def _label_points(ax) -> None:
    taken = _take_pending(ax, "_point_labels")
    if taken is None:
        return
    pending, r, frame, placed = taken
    for x, y, text in pending:
        for off, ha, va in (((4, 0), "left", "center"), ((-3, -3), "right", "top")):
            t = ax.annotate(text, (x, y), xytext=off, textcoords="offset points", ha=ha, va=va,
                            fontsize=6, color="0.2", zorder=6)
            b = t.get_window_extent(r)
            if _inside(b, frame) and not any(_overlap(b, p) for p in placed):
                placed.append(b.padded(1))
                break
            t.remove()


def note(ax, text: str, width: int = 60) -> None:
    """A centred note inside ``ax`` saying why it has no data (wrapped to ``width`` characters)."""
    import textwrap
    ax.text(0.5, 0.5, textwrap.fill(text, width), transform=ax.transAxes, ha="center", va="center",
            fontsize=8, color="0.3", wrap=False)


#: fill colours of the step spans, one per (step name, log), light so that data drawn over stays
#: readable
STEP_COLOURS = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5",
                "#ffed6f")


def shade_steps(ax, spans, t0: int, lanes: dict | None = None, scale: float = 1e9,
                keep_xlim: bool = True) -> None:
    """Timed steps (``analysis.applog.Step``) as shaded spans from start to start + ms, x in
    units of ``scale`` ns from ``t0``: across the whole height of the axes, or with ``lanes``
    ({log: y}) as a bar on the lane of the log that ran it.  One colour (the same on every
    axes of the figure) and legend entry (``step <name> (<log>)``) per name and log; each
    span's name is written inside it by :func:`_save` once the layout is final, where it fits
    and overlaps no other label.
    ``keep_xlim``: spans outside the x range the data span are left out (the range stays)."""
    if not spans:
        return
    lo, hi = ax.get_xlim()
    groups: dict = {}
    for s in spans:
        groups.setdefault((s.name, s.log), []).append(s)
    pending = getattr(ax, "_step_labels", [])
    colours = ax.figure.__dict__.setdefault("_step_colours", {})   # one colour per step in a figure
    for (name, log), group in groups.items():
        xr = [((s.start_ns - t0) / scale, s.ms * 1e6 / scale) for s in group]
        if keep_xlim:
            xr = [(a, w) for a, w in xr if a + w >= lo and a <= hi]
        if not xr:
            continue
        colour = colours.setdefault((name, log), STEP_COLOURS[len(colours) % len(STEP_COLOURS)])
        # the outline in the fill's colour keeps a span narrower than a pixel visible as a line
        style = {"facecolors": colour, "edgecolor": colour, "linewidth": 0.8,
                 "alpha": 0.5 if lanes else 0.35, "zorder": 0, "label": f"step {name} ({log})"}
        if lanes is None:
            ax.broken_barh(xr, (0, 1), transform=ax.get_xaxis_transform(), **style)
        else:
            ax.broken_barh(xr, (lanes[log] - 0.35, 0.7), **style)
        y = None if lanes is None else lanes[log]
        pending += [(a, w, name, y) for a, w in xr]
    ax._step_labels = pending
    if keep_xlim:
        ax.set_xlim(lo, hi)


def _label_steps(ax) -> None:
    """Write each pending step span's name (:func:`shade_steps`) centred in it: inside its
    lane, or near the bottom of the axes for a full-height span; a name wider than its span,
    reaching outside the axes or overlapping a text already there (a name written before, a
    :func:`mark` label) is left out (the legend names the colour)."""
    taken = _take_pending(ax, "_step_labels")
    if taken is None:
        return
    pending, r, box, placed = taken
    for a, w, name, y in sorted(pending, key=lambda p: p[0]):
        x0, x1 = (ax.transData.transform((v, 0))[0] for v in (a, a + w))
        if abs(x1 - x0) < 8:
            continue
        if y is None:
            t = ax.text(a + w / 2, 0.02, name, transform=ax.get_xaxis_transform(), fontsize=6,
                        ha="center", va="bottom", color="0.25", zorder=5)
        else:
            t = ax.text(a + w / 2, y, name, fontsize=6, ha="center", va="center", color="0.25",
                        zorder=5)
        b = t.get_window_extent(r)
        if (b.width > abs(x1 - x0) or b.x0 < box.x0 or b.x1 > box.x1
                or any(b.overlaps(p) for p in placed)):
            t.remove()
        else:
            placed.append(b.expanded(1.0, 1.0).padded(2))


def sentence_if_degenerate(values, what: str) -> str | None:
    """The sentence that replaces a plot of ``values`` that would show nothing: none at all,
    all zero, or one single value; None when a plot is worth drawing."""
    vals = [v for v in values if v is not None]
    if not vals:
        return f"{what}: no value recorded, nothing to plot."
    if all(v == 0 for v in vals):
        return f"{what}: 0 in all {len(vals)} values, nothing to plot."
    if len(set(vals)) == 1:
        return f"{what}: {vals[0]:g} in all {len(vals)} values, nothing to plot."
    return None


def time_sequence(direction, t0: int, base: Path, title: str = "",
                  markers: list[tuple[float, str]] = (), steps=()) -> list[str]:
    from matplotlib.collections import LineCollection
    plt = _plt()
    tr = direction.trace
    t = (tr["t"] - t0) / 1e9
    fwd, seq, end = tr["fwd"], tr["seq"], tr["end"]
    data = fwd & (end > seq)
    rtx = np.isin(tr["index"], tr["rtx_packets"])
    fig, ax = plt.subplots(figsize=(10, 6))
    for mask, color, label in ((data & ~rtx, "black", "segment"),
                               (data & rtx, "red", "retransmission")):
        if mask.any():
            segs = np.stack([np.column_stack([t[mask], seq[mask] / 1e3]),
                             np.column_stack([t[mask], end[mask] / 1e3])], axis=1)
            ax.add_collection(LineCollection(segs, colors=color, linewidths=1.2, label=label,
                                             zorder=3))
    acks = tr["has_ack"]
    if acks.any():
        ta, a = t[acks], np.maximum.accumulate(tr["ack"][acks])
        ax.step(ta, a / 1e3, where="post", color="green", lw=0.8, label="cumulative ACK")
        ax.step(ta, (a + tr["win"][acks]) / 1e3, where="post", color="goldenrod", lw=0.8,
                label="receive window")
    if len(tr["sack"]):
        s = tr["sack"]
        ts = (s[:, 0] - t0) / 1e9
        segs = np.stack([np.column_stack([ts, s[:, 1] / 1e3]), np.column_stack([ts, s[:, 2] / 1e3])], axis=1)
        ax.add_collection(LineCollection(segs, colors="purple", linewidths=2.5, label="SACK block"))
    ax.autoscale()
    mark(ax, markers)
    shade_steps(ax, steps, t0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("sequence number from the ISN (kB)")
    ax.set_title(title or f"time-sequence, data from {direction.sender}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    return _save(fig, base)


def in_flight(direction, t0: int, base: Path, cwnd: tuple | None = None, title: str = "",
              markers: list[tuple[float, str]] = (), steps=()) -> list[str]:
    """``cwnd`` = (t_ns array, bytes array) or None."""
    plt = _plt()
    tr = direction.tracker
    t = (np.asarray(tr.series_t, np.int64) - t0) / 1e9
    fig, ax = plt.subplots(figsize=(10, 4.5))
    # outstanding wide and light below, pipe thin and dashed on top: without loss they are equal,
    # and the pipe drawn over an outstanding line of the same width hid it
    ax.step(t, np.asarray(tr.series_outstanding) / 1e3, where="post", lw=2.4, alpha=0.45,
            color="tab:blue", label="outstanding (SND.MAX - SND.UNA)")
    ax.step(t, np.asarray(tr.series_pipe) / 1e3, where="post", lw=0.9, ls="--", color="tab:orange",
            label="pipe (RFC 6675)")
    if cwnd is not None and len(cwnd[0]):
        ax.step((np.asarray(cwnd[0]) - t0) / 1e9, np.asarray(cwnd[1]) / 1e3, where="post", lw=1.2,
                color="black", label="cwnd (sender, TCP_INFO)")
    mark(ax, markers)
    shade_steps(ax, steps, t0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("in flight (kB)")
    ax.set_title(title or f"in flight, data from {direction.sender}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    return _save(fig, base)


def swimlane(lanes: dict, t0: int, base: Path, title: str = "timeline",
             markers: list[tuple[float, str]] = (), steps=(), step_lanes: dict | None = None) -> list[str]:
    """lanes: {lane name: [(t_ns, label), ...]}; a label's kind is its text before ``#`` or
    ``:`` (``request_first#2:40312`` -> ``request_first``): one marker and colour per kind,
    named in a legend beside the axes (no text at the points, which overlapped where events
    cluster), each kind of a lane on a row of its own within the lane (:data:`LANE_SPREAD`), so
    events at one moment do not hide each other.  ``markers``: [(seconds, text)] drawn as
    vertical lines (events that are not packets, e.g. a link's change).  ``steps`` are drawn on
    the lane ``step_lanes`` names for their log (a lane added when absent); the x range grows
    to show them all."""
    plt = _plt()
    step_lanes = step_lanes or {}
    for s in steps:
        lanes.setdefault(step_lanes.get(s.log, s.log), [])
    names = list(lanes)
    kinds = list(dict.fromkeys(_kind(lab) for evs in lanes.values() for _, lab in evs))
    shapes = "o^sDv<>ph*Xd"
    per_lane = max((len({_kind(lab) for _, lab in evs}) for evs in lanes.values()), default=1)
    fig, ax = plt.subplots(figsize=(11, max(1.6 + max(0.6, 0.1 * per_lane) * len(names),
                                            1.0 + 0.17 * len(kinds))))
    for y, name in enumerate(names):
        here = [kind for kind in kinds if any(_kind(lab) == kind for _, lab in lanes[name])]
        for k, kind in enumerate(kinds):
            x = [(tt - t0) / 1e9 for tt, lab in lanes[name] if _kind(lab) == kind]
            if x:               # each kind on its own row within the lane: coincident events stay apart
                dy = LANE_SPREAD * (here.index(kind) / max(len(here) - 1, 1) - 0.5) if len(here) > 1 else 0.0
                ax.plot(x, [y + dy] * len(x), shapes[k % len(shapes)], ms=5, alpha=0.8,
                        color=f"C{k % 10}", label=kind if kind not in ax.get_legend_handles_labels()[1] else None)
    shade_steps(ax, steps, t0, lanes={s.log: names.index(step_lanes.get(s.log, s.log)) for s in steps},
                keep_xlim=False)
    mark(ax, markers)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.5, len(names) - 0.5)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(title, fontsize=10)
    if kinds or steps:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                  title="event", title_fontsize=7)
    return _save(fig, base)


def _kind(label: str) -> str:
    return label.split("#")[0].split(":")[0]


def delivery(streams: dict, t0: int, base: Path, title: str = "delivery per stream",
             markers: list[tuple[float, str]] = (), steps=()) -> list[str]:
    """streams: {name: (t_ns array, cumulative bytes array)}, each drawn over its own span only
    (:func:`active_span`: from just before its first byte to its last, a dot where it completes),
    so that the flat starts and ends of many streams do not lie on each other at 0 and at the
    common size; past ten streams the colours repeat with another line style, so no two share a
    legend entry's look."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for k, (name, (tt, b)) in enumerate(streams.items()):
        if len(tt):
            tt, b = active_span(np.asarray(tt), np.asarray(b))
            x = (tt - t0) / 1e9
            line, = ax.step(x, b / 1e3, where="post", label=str(name), color=f"C{k % 10}",
                            ls=LINE_STYLES[k // 10 % len(LINE_STYLES)])
            ax.plot(x[-1:], b[-1:] / 1e3, "o", ms=3, color=line.get_color())
    mark(ax, markers)
    shade_steps(ax, steps, t0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("delivered in order (kB)")
    ax.set_title(title, fontsize=10)
    if streams:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, base)


def active_span(t: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The part of a cumulative series (times ``t``, values ``b``) that changes: from the last
    sample before its first rise to the first that reaches its final value (all of it when it
    never rises)."""
    if len(b) < 2 or b.max() <= b[0]:
        return t, b
    first = max(int(np.argmax(b > b[0])) - 1, 0)
    last = int(np.argmax(b >= b.max()))
    return t[first:last + 1], b[first:last + 1]


def steps(series: dict, t0: int, base: Path, ylabel: str, title: str, scale: float = 1.0,
          markers: list[tuple[float, str]] = (), spans=()) -> list[str]:
    """Generic step functions: {name: (t_ns array, values)}, values times ``scale`` (the unit
    ``ylabel`` names)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name, (tt, v) in series.items():
        if len(tt):
            ax.step((np.asarray(tt) - t0) / 1e9, np.asarray(v) * scale, where="post", lw=0.9, label=name)
    mark(ax, markers)
    shade_steps(ax, spans, t0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if series:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, base)


def trace_rate(trace, base: Path, window: float = 1.0, title: str = "") -> list[str]:
    """A link trace (``testbed.spec.schedule.Trace``) as its rate in Mbit/s over one loop:
    one step per window of ``window`` s (``testbed.spec.traces.rate_series``) and the loop's
    mean as a dashed line."""
    from testbed.spec.traces import rate_series
    series = rate_series(trace, window)
    w = min(window, trace.period_ms / 1000)
    t = np.array([s for s, _ in series] + [series[-1][0] + w])
    r = np.array([v for _, v in series] + [series[-1][1]]) / 1e6
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.step(t, r, where="post", lw=1.0, label=f"rate per {w:g} s window")
    ax.axhline(trace.mean_rate / 1e6, color="gray", lw=0.9, ls="--",
               label=f"mean {trace.mean_rate / 1e6:.3g} Mbit/s")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time from the origin (s), one loop")
    ax.set_ylabel("rate (Mbit/s)")
    ax.set_title(title or f"trace {trace.source}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, base)
