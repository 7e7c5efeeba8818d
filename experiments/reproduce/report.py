"""``testbed reproduce``'s outputs: summary.json, report.md and one self-contained report.html
(figures embedded as base64 PNG).  Model-side figures are drawn from :mod:`analysis.models`;
the measured figure from the result rows (chapter, model and measured median with its CI).
"""
from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np

from analysis.models import evaluate
from analysis.models.audio import AudioParams, arrivals
from analysis.models.recovery import arq_cdf
from analysis.models.transfer import BlocksParams, block_timeline
from analysis.models.window import SlowStartParams, cumulative
from analysis.plots import _plt, _save

COLUMNS = ("id", "quantity", "unit", "chapter", "model", "measured", "ci95", "n", "tolerance", "ok",
           "note", "experiment_dir")
PHASE_COLOURS = {"upload": "tab:blue", "processing": "tab:orange", "download": "tab:green"}


def fig_c1(base: Path) -> list[str]:
    """Serial vs three independent blocks: upload, processing and download per block on one axis."""
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
    ax.set_yticks(range(len(lanes)), [lane[0] for lane in lanes])
    ax.set_xlabel("time from the request's start (s)")
    ax.set_xlim(0, 14.5)
    ax.set_ylim(-0.6, len(lanes) - 0.1)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in PHASE_COLOURS.values()]
    ax.legend(handles, list(PHASE_COLOURS), loc="upper left", fontsize=8, ncol=3)
    ax.set_title("C1: serial vs three blocks (30 MB up at 20 Mbit/s, 5 MB down at 100 Mbit/s, RTT 0.1 s)")
    return _save(fig, base)


def fig_c4(base: Path) -> list[str]:
    """Bytes sent per slow-start round and cumulative, against the request size."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    p = SlowStartParams()
    cum = np.array(cumulative(p))
    per = np.diff(np.concatenate([[0], cum]))
    x = np.arange(1, len(cum) + 1)
    ax.bar(x, per / 1e3, color="tab:blue", label="sent in the round")
    ax.plot(x, cum / 1e3, "o-", color="tab:orange", label="cumulative")
    ax.axhline(p.size / 1e3, color="black", ls="--", lw=1, label=f"request {p.size:,.0f} B")
    ax.set_xticks(x)
    ax.set_xlabel("round (one RTT each)")
    ax.set_ylabel("kB (10³ B)")
    ax.legend(fontsize=8, loc="upper left")
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
    """Completion CDF of ideal selective repeat vs the FEC completion time; measured ECDFs of the
    fec experiment's requests on top when given."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.8))
    for (label, vals), colour in zip((measured or {}).items(), ("tab:purple", "tab:olive")):
        ax.step([0] + vals, np.arange(len(vals) + 1) / len(vals), where="post", color=colour,
                lw=2, alpha=0.8, label=label)
    out = evaluate("fec")
    n, p, rtt = out["packets"].value, 0.14, 0.2
    budget = out["serial_budget"].value / 1e3
    ks = np.arange(1, 9)
    ts = budget + (ks - 1) * rtt
    ax.step(np.concatenate([[0], ts]), np.concatenate([[0], [arq_cdf(k, n, p) for k in ks]]),
            where="post", color="tab:blue", label="model: ideal selective repeat, P(done by t)")
    fec_t = out["fec_completion"].value / 1e3
    ax.step([0, fec_t, ts[-1]], [0, 0.999, 0.999], where="post", color="tab:green",
            label=f"model: FEC, r = {out['fec_repair'].value} ({out['fec_redundancy'].value:.1%}), ≥ 0.999")
    ax.axvline(out["arq_mean"].value, color="tab:blue", ls=":", lw=1,
               label=f"model: ARQ mean {out['arq_mean'].value:.3f} s")
    ax.axvline(out["arq_quantile"].value, color="tab:red", ls="--", lw=1,
               label=f"model: ARQ p99 {out['arq_quantile'].value:.2f} s")
    ax.set_xlabel("completion time (s)")
    ax.set_ylabel("probability completed")
    ax.set_ylim(0, 1.05)
    ax.set_xlim(0, max([ts[-1]] + [v[-1] * 1.05 for v in (measured or {}).values()]))
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
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(xs, t, color="tab:blue", label="independent paths: max(xS/B1, (1−x)S/B2)")
    ax.plot(xs, np.maximum(t, p.size * 8 / p.egress), color="tab:red", ls="--",
            label=f"into a shared {p.egress / 1e6:.0f} Mbit/s egress")
    best = evaluate("split")
    ax.plot([best["fraction"].value], [best["split_time"].value], "ko",
            label=f"best x = {best['fraction'].value:.2f}: {best['split_time'].value:.0f} s")
    for i, (x, r) in enumerate(sorted((measured or {}).items())):
        lo, hi = r["ci95"] or (r["measured"], r["measured"])
        ax.errorbar([x], [r["measured"]], yerr=[[r["measured"] - lo], [hi - r["measured"]]], fmt="s",
                    color="tab:green", capsize=4,
                    label="measured, egress unshaped (multipath experiment, median, 95 % CI)" if i == 0 else None)
    ax.set_xlabel("fraction x on path 1 (20 Mbit/s); the rest on path 2 (10 Mbit/s)")
    ax.set_ylabel("completion (s)")
    ax.set_ylim(0, 26)
    ax.legend(fontsize=8, loc="upper center")
    ax.set_title("C11: splitting 30 MB over two paths")
    return _save(fig, base)


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
        ax.set_ylabel(r["unit"], fontsize=8)
        ax.set_title(r["id"], fontsize=9)
    for ax in list(axes.flat)[len(got):]:
        ax.axis("off")
    return _save(fig, base)      # what the bars mean is the report's caption (no suptitle: it
    #                              overlapped the top row's titles after tight_layout)


MODEL_FIGURES = {"C1": (fig_c1, "serial vs three blocks"), "C4": (fig_c4, "slow-start rounds"),
                 "C6": (fig_c6, "ARQ rounds vs FEC"), "C9": (fig_c9, "playback timeline"),
                 "C10": (fig_c10, "airtime per exchange"), "C11": (fig_c11, "split over two paths")}


def figures(rows: list[dict], out: Path) -> list[tuple[str, str]]:
    """Draw the figures of the cases present; ``[(caption, png path)]``."""
    cases = {r["case"] for r in rows}
    made = []
    for case, (fn, caption) in MODEL_FIGURES.items():
        if case not in cases:
            continue
        c11 = {x: r for r in rows for rid, x in (("C11.fast_only", 1.0), ("C11.split", 2 / 3))
               if r["id"] == rid and r["measured"] is not None}
        if case == "C11" and c11:
            made.append((f"C11 (model and measured): {caption}", fn(out / "figures" / "c11", c11)[0]))
        elif case == "C6" and (measured := _measured_c6(rows)):
            made.append((f"C6 (model and measured): {caption}",
                         fn(out / "figures" / "c6", measured)[0]))
        else:
            made.append((f"{case} (model): {caption}", fn(out / "figures" / case.lower())[0]))
    files = fig_measured(rows, out / "figures" / "measured")
    if files:
        made.insert(0, ("measured rows: chapter (gray), model (blue) and measured (median with its "
                        "95 % CI; green within the tolerance, red outside it)", files[0]))
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
    if isinstance(v, float):
        return f"{v:.5g}"
    return str(v)


def markdown(meta: dict, rows: list[dict], figs: list[tuple[str, str]], out: Path) -> str:
    lines = [f"# testbed reproduce — {meta['title']}", "", _meta_line(meta), "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r[c]).replace("|", "/") for c in COLUMNS) + " |")
    lines.append("")
    for caption, path in figs:
        lines += [f"![{caption}]({Path(path).relative_to(out)})", ""]
    return "\n".join(lines)


def _meta_line(meta: dict) -> str:
    return (f"{meta['rows']} rows, {meta['measured']} measured with packets, {meta['ok']} of them "
            f"within tolerance; mode {meta['mode']}; host load {meta['load_before']} → "
            f"{meta['load_after']}, {meta.get('cpu', '')}; {meta['started']} – {meta['finished']}"
            + (f"; {meta['resumed']} experiment(s) continued from an earlier invocation (the load "
               "covers only this one)" if meta.get("resumed") else ""))


def html_report(meta: dict, rows: list[dict], figs: list[tuple[str, str]]) -> str:
    def cell(r, c):
        v = r[c]
        cls = ""
        if c == "ok":
            cls = {True: "ok", False: "miss"}.get(v, "")
        return f"<td class='{cls}'>{html.escape(_fmt(v))}</td>"
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    body = "\n".join("<tr>" + "".join(cell(r, c) for c in COLUMNS) + "</tr>" for r in rows)
    imgs = "\n".join(
        f"<figure><img alt='{html.escape(cap)}' src='data:image/png;base64,"
        f"{base64.b64encode(Path(p).read_bytes()).decode()}'><figcaption>{html.escape(cap)}</figcaption></figure>"
        for cap, p in figs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>testbed reproduce</title>
<style>
body{{font-family:sans-serif;margin:1.5em;max-width:1400px}}
table{{border-collapse:collapse;font-size:12px}} th,td{{border:1px solid #ccc;padding:3px 6px;vertical-align:top}}
th{{background:#eee}} td.ok{{background:#d8f5d8}} td.miss{{background:#f8d0d0}}
figure{{margin:1.5em 0}} img{{max-width:100%}} figcaption{{font-size:13px;color:#444}}
</style></head><body>
<h1>testbed reproduce — {html.escape(meta['title'])}</h1>
<p>{html.escape(_meta_line(meta))}</p>
<p>chapter: the number as printed in CHAPTER12.md; model: <code>analysis.models</code>;
measured: median of valid experiment runs with real packets (95% bootstrap CI), null when not
measured (note says why); ok: |measured − chapter| ≤ tolerance × |chapter|.</p>
<table><tr>{head}</tr>
{body}
</table>
<h2>Figures</h2>
{imgs}
</body></html>
"""


def write(out: Path, meta: dict, rows: list[dict]) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    figs = figures(rows, out)
    summary = {"schema": 1, "meta": meta, "rows": rows,
               "figures": [{"caption": c, "png": str(Path(p).relative_to(out))} for c, p in figs]}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    (out / "report.md").write_text(markdown(meta, rows, figs, out) + "\n")
    (out / "report.html").write_text(html_report(meta, rows, figs))
    return summary
