"""``testbed reproduce``'s outputs: summary.json, report.md, results.csv (one row per run x metric
of its experiments) and one self-contained report.html
(:mod:`analysis.page`: figures embedded; a short table with each row's explanation one click
away; at least one figure per measured case, C7's as the chapter's figures 12-21/12-22).
Model-side figures are drawn from :mod:`analysis.models`;
the measured figure from the result rows (chapter, model and measured median with its CI).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from analysis.models import evaluate
from analysis.models.audio import AudioParams, arrivals
from analysis.models.recovery import arq_cdf
from analysis.models.transfer import BlocksParams, block_timeline
from analysis.models.window import SlowStartParams, cumulative
from analysis.page import Page, Raw, details, esc, link, setup_table
from analysis.plots import _plt, _save, figure_legend
from testbed.spec.units import counted, format_number

COLUMNS = ("id", "quantity", "unit", "chapter", "model", "measured", "ci95", "n", "tolerance", "ok",
           "note", "experiment_dir")
PHASE_COLOURS = {"upload": "tab:blue", "processing": "tab:orange", "download": "tab:green"}


def fig_c1(base: Path, measured: dict | None = None) -> list[str]:
    """Serial vs three independent blocks: upload, processing and download per block on one axis;
    ``measured``: the C1.serial_total result row, its median and 95 % CI drawn on the serial lane."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 2.8))
    serial = evaluate("serial")
    up, down = serial["upload_time"].value, serial["download_time"].value
    lanes = [("serial (one block)", [(0, up, "upload"), (up + 0.05, 0.3, "processing"),
                                     (up + 0.35, down, "download")], serial["total"].value)]
    rows = block_timeline(BlocksParams())
    p = BlocksParams()
    segs, start = [], 0.0
    for r, t, o in zip(rows, p.process, p.outputs):
        segs += [(start, r["upload_end"] - start, "upload"), (r["processed"] - t, t, "processing"),
                 (r["download_end"] - o * 8 / p.downlink, o * 8 / p.downlink, "download")]
        start = r["upload_end"]
    lanes.append(("three independent blocks", segs, rows[-1]["received"]))
    for y, (_name, parts, done) in enumerate(lanes):
        for x0, w, kind in parts:
            ax.barh(y, w, left=x0, height=0.5, color=PHASE_COLOURS[kind], edgecolor="white")
        ax.plot([done, done], [y - 0.35, y + 0.35], color="black", lw=2)
        ax.annotate(f"done {done:.2f} s", (done, y + 0.3), xytext=(4, 0), textcoords="offset points",
                    fontsize=8, va="bottom")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in PHASE_COLOURS.values()]
    names = list(PHASE_COLOURS)
    right = 14.5
    if measured and measured["measured"] is not None:
        m = measured["measured"]
        lo, hi = measured["ci95"] or (m, m)
        handles.append(ax.errorbar([m], [-0.42], xerr=[[m - lo], [hi - m]], fmt="v", color="tab:red",
                                   capsize=3, ms=6))
        names.append(f"measured, serial (median {m:.2f} s, 95 % CI, n={measured['n']})")
        right = max(right, hi * 1.05)
    ax.set_yticks(range(len(lanes)), [lane[0] for lane in lanes])
    ax.set_xlabel("time from the request's start (s)")
    ax.set_xlim(0, right)
    ax.set_ylim(-0.6, len(lanes) - 0.1)
    ax.legend(handles, names, loc="upper left", fontsize=8, ncol=2)
    ax.set_title("C1: serial vs three blocks (30 MB up at 20 Mbit/s, 5 MB down at 100 Mbit/s, RTT 0.1 s)")
    return _save(fig, base)


def fig_c4(base: Path, measured: dict | None = None) -> list[str]:
    """Bytes sent per slow-start round and cumulative, against the request size; ``measured``:
    {row id: result row} — C4.first_round drawn as the first flight's bytes (segments x MSS) and
    C4.rounds as the measured number of flights (medians)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    p = SlowStartParams()
    cum = np.array(cumulative(p))
    per = np.diff(np.concatenate([[0], cum]))
    x = np.arange(1, len(cum) + 1)
    ax.bar(x, per / 1e3, color="tab:blue", label="sent in the round")
    ax.plot(x, cum / 1e3, "o-", color="tab:orange", label="cumulative")
    ax.axhline(p.size / 1e3, color="black", ls="--", lw=1, label=f"request {p.size:,.0f} B")
    first, rounds = ((measured or {}).get(k) for k in ("C4.first_round", "C4.rounds"))
    if first and first["measured"] is not None:
        ax.plot([1], [first["measured"] * p.mss / 1e3], "D", color="tab:red", ms=7,
                label=f"measured first flight: {first['measured']:g} segments (median, n={first['n']})")
    if rounds and rounds["measured"] is not None:
        ax.axvline(rounds["measured"], color="tab:red", ls=":", lw=1.5,
                   label=f"measured: {rounds['measured']:g} flights (median, n={rounds['n']})")
    ax.set_xticks(x)
    ax.set_xlabel("round (one RTT each)")
    ax.set_ylabel("data sent (kB, 10³ B)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title(f"C4: slow start from {p.iw} x {p.mss} B, doubling: {len(cum)} rounds")
    return _save(fig, base)


def _measured_c6(rows: list[dict]) -> dict[str, list[float]]:
    """Per-request completions (s) of the fec experiment's arms, if this report measured them."""
    from experiments.reproduce.run import pooled_values
    row = next((r for r in rows if r["id"] == "C6.arq_mean" and r["experiment_dir"]), None)
    if row is None:
        return {}
    d = Path(row["experiment_dir"])
    summary = json.loads((d / "summary.json").read_text())
    out = {}
    for level, label in (("off", "ARQ measured"), ("adaptive", "FEC measured")):
        vals = pooled_values(d, summary, level, "completion_ms")
        if vals:
            out[f"{label} (udpreq, n={len(vals)})"] = sorted(v / 1e3 for v in vals)
    return out


def fig_c6(base: Path, measured: dict[str, list[float]] | None = None) -> list[str]:
    """Completion CDF of ideal selective repeat vs the FEC completion time and TCP at the
    Mathis bound, on a log time axis as the chapter's figure 12-18; measured ECDFs of the fec
    experiment's requests on top when given."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.8))
    # each scheme one colour, the model's and the measured line alike: ARQ blue, FEC green; the
    # measured ECDF wide and light under the model's thin line
    for label, vals in (measured or {}).items():
        colour = "tab:green" if label.startswith("FEC") else "tab:blue"
        ax.step([0] + vals, np.arange(len(vals) + 1) / len(vals), where="post", color=colour,
                lw=4, alpha=0.4, label=label)
    out = evaluate("fec")
    n, p, rtt = out["packets"].value, 0.14, 0.2
    budget = out["serial_budget"].value / 1e3
    ks = np.arange(1, 9)
    ts = budget + (ks - 1) * rtt
    mathis = evaluate("longhaul")["mathis_transfer"].value
    end = max([mathis * 1.3] + [v[-1] * 1.3 for v in (measured or {}).values()])
    cdf = [arq_cdf(k, n, p) for k in ks]
    ax.step(np.concatenate([[0], ts, [end]]), np.concatenate([[0], cdf, [cdf[-1]]]),
            where="post", color="tab:blue", label="model: ideal selective repeat, P(done by t)")
    fec_t = out["fec_completion"].value / 1e3
    ax.step([0, fec_t, end], [0, 0.999, 0.999], where="post", color="tab:green",
            label=f"model: FEC, r = {out['fec_repair'].value} ({out['fec_redundancy'].value:.1%}), ≥ 0.999")
    ax.axvline(out["arq_mean"].value, color="tab:blue", ls=":", lw=1,
               label=f"model: ARQ mean {out['arq_mean'].value:.3f} s")
    ax.axvline(out["arq_quantile"].value, color="tab:blue", ls="--", lw=1,
               label=f"model: ARQ p99 {out['arq_quantile'].value:.2f} s")
    ax.axvline(mathis, color="black", ls="-.", lw=1,
               label=f"model: TCP at the Mathis bound (p = 0.14), {mathis:.1f} s")
    ax.set_xscale("log")
    ax.set_xlabel("completion time (s, log scale)")
    ax.set_ylabel("probability completed")
    ax.set_ylim(0, 1.05)
    ax.set_xlim(0.1, end)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(f"C6: {n} packets, p = {p}, RTT {rtt * 1e3:.0f} ms")
    return _save(fig, base)


def fig_c9(base: Path) -> list[str]:
    """Playback timeline: arrivals, slots and play-out for J = 40 ms and J = 45 ms."""
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.6), sharex=True)
    for ax, j in zip(axes, (0.040, 0.045)):
        p = AudioParams(start_delay=j, chunks=8)
        out = evaluate("audio", start_delay=j, chunks=8)
        r = np.array(arrivals(p)) * 1e3
        plays = np.array(out["play_times"].value)
        slots = plays[0] + np.arange(len(plays)) * p.tau * 1e3
        for i, (t, s) in enumerate(zip(plays, slots)):
            late = t > s + 1e-6
            ax.barh(i, p.tau * 1e3, left=t, height=0.6, color="tab:red" if late else "tab:green",
                    alpha=0.8)
        ax.plot(r, range(len(r)), "kv", ms=5, label="arrival r_i")
        ax.plot(slots, range(len(slots)), "|", color="tab:blue", ms=12, mew=2, label="slot p_0 + i·τ")
        ax.set_ylabel("chunk i")
        ax.set_yticks(range(len(r)))
        ax.set_title(f"J = {j * 1e3:.0f} ms: {out['stalls'].value} stall(s), "
                     f"{out['stall_total'].value:.0f} ms", fontsize=9)
        ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color="tab:green"), plt.Rectangle((0, 0), 1, 1, color="tab:red")]
    h, lab = axes[0].get_legend_handles_labels()
    axes[0].legend(h + handles, lab + ["played on its slot", "played late (after a stall)"],
                   fontsize=7, loc="upper right", ncol=2)
    axes[1].set_xlabel("time (ms)")
    fig.suptitle("C9: 20 ms chunks, processing 12 ms, send 1 ms, 5 ms one way; chunk 2 at 50 ms")
    return _save(fig, base)


def fig_c10(base: Path) -> list[str]:
    """Airtime of one exchange by part, for a data packet, an end-to-end ACK and a full frame."""
    from testbed.emulator.airtime import AirtimeSpec
    plt = _plt()
    spec = AirtimeSpec()
    fig, ax = plt.subplots(figsize=(9, 2.8))
    labels = []
    for y, (name, ip) in enumerate((("data, 1228 B IP", 1228), ("e2e ACK, 92 B IP", 92),
                                    ("full frame, 1500 B IP", 1500))):
        parts = [("DIFS", spec.difs * 1e6, "tab:gray"),
                 ("data PPDU", spec.ppdu_ns(ip + spec.mac_overhead, spec.data_rate) / 1e3, "tab:blue"),
                 ("SIFS", spec.sifs * 1e6, "lightgray"),
                 ("MAC ACK", spec.ppdu_ns(spec.ack_bytes, spec.control_rate) / 1e3, "tab:orange")]
        x = 0.0
        for part, w, c in parts:
            ax.barh(y, w, left=x, color=c, edgecolor="white", label=part if y == 0 else None)
            x += w
        ax.annotate(f"{x:.0f} µs", (x, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=8)
        labels.append(name)
    ax.set_yticks(range(3), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 500)
    ax.set_xlabel("airtime of one exchange (µs), 802.11a, 54/6 Mbit/s, no backoff")
    ax.legend(fontsize=8, ncol=1, loc="center right")
    ax.set_title("C10: airtime per exchange")
    return _save(fig, base)


def fig_c11(base: Path, measured: dict | None = None) -> list[str]:
    """Completion vs the fraction split onto path 1, with and without the shared egress;
    ``measured``: {fraction on path 1: result row} (C11.fast_only at 1, C11.split at 2/3) drawn
    as medians with their 95 % CI."""
    from analysis.models.multipath import SplitParams, split_time
    plt = _plt()
    p = SplitParams()
    xs = np.linspace(0, 1, 201)
    t = np.array([split_time(x, p) for x in xs])
    fig, ax = plt.subplots(figsize=(7, 4.6))
    ax.plot(xs, t, color="tab:blue", label="independent paths: max(xS/B1, (1−x)S/B2)")
    ax.plot(xs, np.maximum(t, p.size * 8 / p.egress), color="tab:red", ls="--",
            label=f"into a shared {p.egress / 1e6:.0f} Mbit/s egress")
    best = evaluate("split")
    ax.plot([best["fraction"].value], [best["split_time"].value], "ko",
            label=f"best x = {best['fraction'].value:.2f}: {best['split_time'].value:.0f} s")
    ci = "95 % CI" if any(r["ci95"] for r in (measured or {}).values()) else "no CI: fewer than 5 runs"
    for i, (x, r) in enumerate(sorted((measured or {}).items())):
        lo, hi = r["ci95"] or (r["measured"], r["measured"])
        ax.errorbar([x], [r["measured"]], yerr=[[r["measured"] - lo], [hi - r["measured"]]], fmt="s",
                    color="tab:green", capsize=4,
                    label=f"measured, egress unshaped (multipath experiment, median; {ci})" if i == 0 else None)
    ax.set_xlabel("fraction x on path 1 (20 Mbit/s); the rest on path 2 (10 Mbit/s)")
    ax.set_ylabel("completion (s)")
    ax.set_ylim(0, 26)
    figure_legend(fig, [ax], max_cols=2, fontsize=8)     # below the axes: the lines span its width
    ax.set_title("C11: splitting 30 MB over two paths")
    return _save(fig, base)


C7_CELLS = (("C7.direct_new", "new connection per request", "direct"),
            ("C7.relay_new", "new connection per request", "relay"),
            ("C7.direct_keepalive", "kept alive", "direct"),
            ("C7.relay_keepalive", "kept alive", "relay"))


def fig_c7(rows: list[dict], base: Path) -> list[str]:
    """The chapter's C7 medians (its figures 12-21 and 12-22): per connection mode a panel, per
    path the chapter's median, the model's bound and the measured median with its 95 % CI, all
    on one ms axis.  [] when none of the four cells is in ``rows``."""
    by = {r["id"]: r for r in rows}
    if not any(cid in by for cid, _, _ in C7_CELLS):
        return []
    plt = _plt()
    fig, axes = plt.subplots(1, 2, sharey=True, figsize=(11, 4.2))
    width = 0.26
    for ax, mode, fig_no in zip(axes, ("new connection per request", "kept alive"), ("12-21", "12-22")):
        cells = [(cid, path) for cid, m, path in C7_CELLS if m == mode and cid in by]
        for j, (cid, _path) in enumerate(cells):
            r = by[cid]
            ax.bar(j - width, r["chapter"], width, color="tab:gray", label="chapter (its author's median)")
            if r["model"] is not None:
                ax.bar(j, r["model"], width, color="tab:blue", label="model (lower bound)")
            if r["measured"] is not None:
                colour = "tab:green" if r["ok"] else "tab:red"
                ax.bar(j + width, r["measured"], width, color=colour,
                       label="measured, within tolerance" if r["ok"] else "measured, outside tolerance")
                if r["ci95"]:
                    lo, hi = r["ci95"]
                    ax.errorbar([j + width], [r["measured"]], yerr=[[r["measured"] - lo], [hi - r["measured"]]],
                                color="black", capsize=4, lw=1.2, label="95 % CI of the measured median")
            top = max(r["ci95"][1], r["measured"]) if r["measured"] is not None and r["ci95"] else r["measured"]
            for x, v, at in ((j - width, r["chapter"], r["chapter"]), (j, r["model"], r["model"]),
                             (j + width, r["measured"], top)):
                if v is not None:      # above the CI's whisker, not struck through by it
                    ax.annotate(f"{v:.0f}", (x, at), xytext=(0, 2), textcoords="offset points",
                                ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(cells)), [f"{path}\n(n={by[cid]['n']} requests)" if by[cid]["measured"] is not None
                                          else f"{path}\n(not measured)" for cid, path in cells])
        ax.margins(y=0.12)            # the values written above the bars stay inside the axes
        ax.set_title(f"{mode} (chapter figure {fig_no})", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("median completion per request (ms)")
    figure_legend(fig, axes, max_cols=3, fontsize=8)
    fig.suptitle("C7: direct vs relay, new connection vs kept alive — 354,640 B request, 200 ms RTT, "
                 "14 % loss on the return direction", fontsize=10)
    return _save(fig, base)


def fig_c7_requests(rows: list[dict], base: Path) -> list[str]:
    """The representative run of each measured C7 cell, its representative request drawn from
    the client's capture (``experiments.plots.request_figure``): a new vs a kept-alive request,
    direct and through the relay, on one ms axis."""
    from experiments.plots import request_figure
    cells = []
    for cid, mode, path in C7_CELLS:
        r = next((r for r in rows if r["id"] == cid and r["experiment_dir"] and r.get("measure")), None)
        if r is None or not (Path(r["experiment_dir"]) / "summary.json").is_file():
            continue
        summary = json.loads((Path(r["experiment_dir"]) / "summary.json").read_text())
        rep = (summary["by_level"].get(r["measure"]["level"]) or {}).get("representative")
        if rep:
            cells.append((f"{path}, {mode}", Path(r["experiment_dir"]) / rep))
    if not cells:
        return []
    return request_figure(cells, base, "C7: one request of each cell's representative run (the one "
                                       "closest to its run's median), at the client's capture")


def fig_measured(rows: list[dict], base: Path) -> list[str]:
    """Per measured row: chapter, model and measured median with its 95 % CI, in the row's unit."""
    got = [r for r in rows if r["measured"] is not None]
    if not got:
        return []
    plt = _plt()
    cols = 4
    nrows = math.ceil(len(got) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols, 3.0 * nrows + 0.4), squeeze=False)
    for ax, r in zip(axes.flat, got):
        vals = [r["chapter"], r["model"] if r["model"] is not None else np.nan, r["measured"]]
        ax.bar(range(3), vals, color=["tab:gray", "tab:blue", "tab:green" if r["ok"] else "tab:red"])
        if r["ci95"]:
            lo, hi = r["ci95"]
            ax.errorbar([2], [r["measured"]], yerr=[[r["measured"] - lo], [hi - r["measured"]]],
                        color="black", capsize=4)
        shown = [_fmt(v) if v == v else "–" for v in vals]     # values under the bars: no overlap
        ax.set_xticks(range(3), [f"chapter\n{shown[0]}", f"model\n{shown[1]}",
                                 f"measured\n{shown[2]} (n={r['n']})"], fontsize=7)
        ax.set_ylabel(_quantity_label(r), fontsize=7)
        ax.set_title(r["id"], fontsize=9)
    for ax in list(axes.flat)[len(got):]:
        ax.axis("off")
    return _save(fig, base)      # what the bars mean is the report's caption (no suptitle: it
    #                              overlapped the top row's titles after tight_layout)


def _quantity_label(r: dict, width: int = 34) -> str:
    """A row's quantity with its unit, as an axis label: ``direct, new connection per request
    (median) (ms)`` wrapped to ``width`` characters a line; a unit of 1 is said as dimensionless."""
    import textwrap
    unit = "dimensionless" if r["unit"] in ("1", "") else r["unit"]
    return textwrap.fill(f"{r['quantity']} ({unit})", width)


#: the chapter's figures each case's figures mirror (named in the captions)
CHAPTER_FIGURES = {"C1": "12-3/12-4", "C3": "12-17", "C6": "12-18", "C7": "12-21/12-22", "C8": "12-19/12-20",
                   "C9": "12-5 to 12-7", "C10": "12-24", "C11": "12-26/12-27", "C14": "12-28 to 12-30",
                   "C15": "12-32/12-33"}


def _chapter(case: str) -> str:
    return f" (chapter figure {CHAPTER_FIGURES[case]})" if case in CHAPTER_FIGURES else ""


MODEL_FIGURES = {"C1": (fig_c1, "serial vs three blocks"), "C4": (fig_c4, "slow-start rounds"),
                 "C6": (fig_c6, "ARQ rounds vs FEC"), "C9": (fig_c9, "playback timeline"),
                 "C10": (fig_c10, "airtime per exchange"), "C11": (fig_c11, "split over two paths")}


def _representative(exp_dir: Path, base: Path) -> list[str]:
    """The experiment's representative runs side by side (``experiments.plots``); [] when it
    has no summary or no capture to draw."""
    from experiments.plots import representative_figure
    if not (exp_dir / "summary.json").is_file():
        return []
    summary = json.loads((exp_dir / "summary.json").read_text())
    if "by_level" not in summary:        # a calibration's summary, not an experiment's
        return []
    return representative_figure(exp_dir, summary, base)[:1]


def figures(rows: list[dict], out: Path) -> list[tuple[str, str, str]]:
    """Draw the figures of the cases present; ``[(case, caption, png path)]``: per case the
    figures mirroring the chapter's drawn from the measurements (C7), the measured rows'
    chapter / model / measured figure, then the case's model figure (with the measured values
    on top where this report has them)."""
    cases = sorted({r["case"] for r in rows}, key=lambda c: int(c[1:]))
    made = []
    for case in cases:
        if case == "C7":
            for fn, name, caption in (
                    (fig_c7, "c7", "C7 (chapter figures 12-21/12-22): the four cells' medians, chapter, "
                                   "model and measured with its 95 % CI"),
                    (fig_c7_requests, "c7-requests", "C7: a new vs a kept-alive request, direct and "
                                                     "through the relay, from the representative runs' "
                                                     "captures")):
                files = fn(rows, out / "figures" / name)
                if files:
                    made.append((case, caption, files[0]))
        got = [r for r in rows if r["case"] == case and r["measured"] is not None]
        files = fig_measured(got, out / "figures" / f"measured-{case.lower()}")
        if files:
            made.append((case, f"{case}, measured rows: chapter (gray), model (blue) and measured (median "
                               "with its 95 % CI; green within the tolerance, red outside it)", files[0]))
        if case != "C7":            # C7's requests are drawn above, one per cell
            for d in dict.fromkeys(r["experiment_dir"] for r in got if r["experiment_dir"]):
                made += [(case, f"{case}{_chapter(case)}: the representative run of each arm of the "
                                f"experiment {Path(d).name}, side by side from its captures", png)
                         for png in _representative(Path(d), out / "figures" / f"{case.lower()}-{Path(d).name}")]
        if case not in MODEL_FIGURES:
            continue
        fn, caption = MODEL_FIGURES[case]
        c11 = {x: r for r in rows for rid, x in (("C11.fast_only", 1.0), ("C11.split", 2 / 3))
               if r["id"] == rid and r["measured"] is not None}
        c1 = next((r for r in rows if r["id"] == "C1.serial_total" and r["measured"] is not None), None)
        c4 = {r["id"]: r for r in rows if r["case"] == "C4" and r["measured"] is not None}
        if case == "C1" and c1:
            made.append((case, f"C1 (model and measured){_chapter(case)}: {caption}",
                         fn(out / "figures" / "c1", c1)[0]))
        elif case == "C4" and c4:
            made.append((case, f"C4 (model and measured): {caption}", fn(out / "figures" / "c4", c4)[0]))
        elif case == "C11" and c11:
            made.append((case, f"C11 (model and measured){_chapter(case)}: {caption}",
                         fn(out / "figures" / "c11", c11)[0]))
        elif case == "C6" and (measured := _measured_c6(rows)):
            made.append((case, f"C6 (model and measured){_chapter(case)}: {caption}",
                         fn(out / "figures" / "c6", measured)[0]))
        else:
            made.append((case, f"{case} (model){_chapter(case)}: {caption}", fn(out / "figures" / case.lower())[0]))
    return made


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, (int, float)) and float(v).is_integer() and abs(v) >= 1000:
        return f"{int(v):,}"
    if isinstance(v, float):            # not 2.4022e+05 beside the chapter's 250,000
        return format_number(v, 5)
    return str(v)


def markdown(meta: dict, rows: list[dict], figs: list[tuple[str, str]], out: Path) -> str:
    items, experiments = _setup(meta, rows)
    lines = [f"# testbed reproduce — {meta['title']}", "", "## Setup", ""]
    lines += [f"- {k}: {v}" for k, v in items]
    for name, d, setup in experiments:
        lines.append(f"- experiment {name} (`{d}`)" + (":" if setup else ""))
        lines += [f"  - {k}: {v}" for k, v in setup]
    lines += ["", "## Results", "", _meta_line(meta), "",
              "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r[c]).replace("|", "/") for c in COLUMNS) + " |")
    lines.append("")
    for _case, caption, path in figs:
        lines += [f"![{caption}]({Path(path).relative_to(out)})", ""]
    return "\n".join(lines)


def _meta_line(meta: dict) -> str:
    return (f"{meta['rows']} rows, {meta['measured']} measured with packets, {meta['ok']} of them "
            f"within tolerance; mode {meta['mode']}; host load {meta['load_before']} → "
            f"{meta['load_after']}, {meta.get('cpu', '')}; {meta['started']} – {meta['finished']}"
            + (f"; {counted(meta['resumed'], 'experiment')} continued from an earlier invocation (the load "
               "covers only this one)" if meta.get("resumed") else ""))


def _measured_cell(r: dict) -> str:
    if r["measured"] is None:
        return "–"
    ci = f" [{_fmt(r['ci95'][0])}, {_fmt(r['ci95'][1])}]" if r["ci95"] else ""
    return f"{_fmt(r['measured'])}{ci} (n={r['n']})"


def _setup(meta: dict, rows: list[dict]) -> tuple[list, list]:
    """The setup of a reproduction: (its own rows, [(experiment name, directory, its setup rows
    (``experiments.report.experiment_setup``; [] when it has no summary, e.g. a calibration))])."""
    from experiments.report import experiment_setup
    items = [("cases", meta["title"]), ("mode", meta["mode"]),
             ("when", f"{meta['started']} – {meta['finished']}"),
             ("machine load", f"1-min load {meta['load_before']} → {meta['load_after']} on "
                              f"{meta.get('cores', '?')} cores; {meta.get('cpu', '')}"),
             ("columns", "chapter: the number as printed in CHAPTER12.md; model: analysis.models; "
                         "measured: with real packets, the median of valid experiment runs (95 % "
                         "bootstrap CI, n runs; a row pooling the runs' values, e.g. one per request, "
                         "says so in its note: n values, the CI resampling them), – when not "
                         "measured; ok: |measured − chapter| ≤ tolerance × |chapter|")]
    experiments = []
    for d in dict.fromkeys(r["experiment_dir"] for r in rows if r["experiment_dir"]):
        summary = json.loads((Path(d) / "summary.json").read_text()) if (Path(d) / "summary.json").is_file() \
            else {}
        ok = "by_level" in summary and (Path(d) / "manifest.json").is_file()
        experiments.append((Path(d).name, d, experiment_setup(Path(d), summary) if ok else []))
    return items, experiments


def html_report(meta: dict, rows: list[dict], figs: list[tuple[str, str, str]]) -> Page:
    """The page: setup (the invocation, the host's load, each experiment's setup one click
    away), a short table (id, chapter, model, measured with its CI, ok) whose every row's
    explanation is one click away, then the figures per case."""
    page = Page(f"testbed reproduce — {meta['title']}")
    items, experiments = _setup(meta, rows)
    page.heading("Setup").setup(items + [
        (f"experiment {name}", details(f"{name}: setup", setup_table(rows_)) if rows_ else link(d, d))
        for name, d, rows_ in experiments])
    page.heading("Results")
    table, classes = [], []
    for r in rows:
        why = " ".join(x for x in (f"{r['quantity']} ({r['unit']}).",
                                   f"Tolerance {r['tolerance']:.0%}." if r["tolerance"] is not None else "",
                                   r["note"]) if x)
        where = (f"<br>experiment: {link(r['experiment_dir'], r['experiment_dir'])}"
                 if r["experiment_dir"] else "")
        table.append([r["id"], _fmt(r["chapter"]), _fmt(r["model"]), _measured_cell(r),
                      {True: "ok", False: "MISS"}.get(r["ok"], "–"), details(r["quantity"], Raw(esc(why) + where))])
        classes.append(["", "num", "num", "num", {True: "ok", False: "miss"}.get(r["ok"], ""), ""])
    page.table(["id", "chapter", "model", "measured [95 % CI] (n)", "ok", "explanation"], table, classes)
    page.para(_meta_line(meta), cls="note")
    page.heading("Figures")
    measured_cases = {r["case"] for r in rows if r["measured"] is not None}
    for case in sorted({r["case"] for r in rows}, key=lambda c: int(c[1:])):
        own = [(c, p) for k, c, p in figs if k == case]
        if not own:
            continue
        page.heading(case + ("" if case in measured_cases else " (model only)"), 3, anchor=case)
        for caption, png in own:
            page.figure(png, caption)
    return page


def write(out: Path, meta: dict, rows: list[dict]) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    figs = figures(rows, out)
    summary = {"schema": 1, "meta": meta, "rows": rows,
               "figures": [{"case": k, "caption": c, "png": str(Path(p).relative_to(out))} for k, c, p in figs]}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    (out / "report.md").write_text(markdown(meta, rows, figs, out) + "\n")
    html_report(meta, rows, figs).write(out / "report.html")
    from experiments.results import tidy, write_tidy
    write_tidy(out, [t for d in dict.fromkeys(r["experiment_dir"] for r in rows if r["experiment_dir"])
                     for t in tidy(d, experiment=Path(d).name)])
    return summary
