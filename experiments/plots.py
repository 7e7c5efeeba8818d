"""An experiment's figures (PNG + SVG via analysis.plots' ``_save``), from summary.json and the
representative runs' captures:

* ``<metric>-levels``: per level a box plot (median, quartiles, whiskers at 1.5 IQR) with every
  valid run as a jittered point, and next to it the ECDF of the same values, one curve per level;
* ``<metric>-by-run``: the metric against the run index (execution order), colour by level,
  excluded runs as grey crosses — drift and order effects show here;
* ``<metric>-curve`` (numeric levels only): the metric against the level, median and its 95 %
  CI per level (median alone where n is too small for a CI), one line per level of a crossed
  factor (a level without a valid run as a cross on the level axis), and each ``models`` entry
  of the definition evaluated on a fine grid of the level (``analysis.models``) as a dashed line
  on the same axes; units on both axes, the legend outside the data;
* ``representative``: for the valid run closest to each level's median of the primary metric,
  bytes in flight (outstanding = SND.MAX − SND.UNA of every connection's main data direction,
  from the capture on the client host) above a swimlane (one lane per request, packet times at
  the client: handshake SYN → ACK, request first → last payload byte, wait from the request's
  last to the response's first byte = server time + propagation, response first → last byte)
  — all rows on one time axis, seconds from the run's first packet.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import numpy as np

from analysis.plots import _plt, _save

PHASES = (("handshake", "syn", "ack", "tab:gray"), ("request", "request_first", "request_last", "tab:blue"),
          ("wait (server + propagation)", "request_last", "response_first", "tab:orange"),
          ("response", "response_first", "response_last", "tab:green"))


def _unit(metric: str) -> str:
    return "ms" if metric.endswith(("_ms", "_ms_median")) else "Mbit/s" if metric.endswith("mbps") else \
        "bytes" if metric.endswith("bytes") else "count"


_QTY = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z%/]*)\s*$")


def numeric_axis(values) -> tuple[list[float], str, Callable[[float], float]] | None:
    """(x per level in a display unit, the unit, display value -> the value in the level's
    base unit for the models) when every level is a number with one unit; else None."""
    from testbed.spec import units
    ms = [_QTY.match(str(v)) if not isinstance(v, bool) else None for v in values]
    if not all(ms) or len({m.group(2).lower() for m in ms}) != 1:
        return None
    unit = ms[0].group(2).lower()
    nums = [float(m.group(1)) for m in ms]
    if unit == "%":
        return nums, "%", lambda x: x / 100
    if unit in units.TIME_UNITS:
        return [units.parse_time(str(v)) * 1e3 for v in values], "ms", lambda x: x / 1e3
    key = unit.removesuffix("/s")
    if key in units.RATE_UNITS:
        return [units.parse_rate(str(v)) / 1e6 for v in values], "Mbit/s", lambda x: x * 1e6
    if unit in units.SIZE_UNITS:
        return [units.parse_size(str(v)) / 1e3 for v in values], "kB", lambda x: x * 1e3
    if unit == "":
        return nums, "", lambda x: x
    return None


def _model_param(model, name: str, value):
    """A model parameter from human units (``200ms``, ``333mbit``, ``1448``) by its unit."""
    import dataclasses

    from testbed.spec import units
    unit = next(f.metadata["unit"] for f in dataclasses.fields(model.params) if f.name == name)
    parse = {"B": units.parse_size, "bit/s": units.parse_rate, "s": units.parse_time,
             "1": units.parse_probability}.get(unit)
    return parse(value) if parse and isinstance(value, str) else value


def _reference(value, base: dict, cross):
    """A model parameter given as ``=cross`` (the crossed factor's level) or ``=base:PATH[*K]``
    (the base spec's value at PATH, times K): the value it stands for; others as given."""
    if not isinstance(value, str) or not value.startswith("="):
        return value
    if value == "=cross":
        return cross
    path, _, times = value.removeprefix("=base:").partition("*")
    from testbed.spec.runspec import RunSpec
    got = RunSpec.from_dict(dict(base)).get(path)
    if got is None:
        raise ValueError(f"model parameter {value}: the base spec sets no {path}")
    return (got, float(times)) if times else got


def model_curve(entry: dict, xs_base, base: dict | None = None, cross=None) -> tuple[list[float], str]:
    """The model output of a ``models`` entry at each base-unit x (None where the model refuses
    the value, e.g. the Mathis bound at zero loss) and the output's unit."""
    from analysis.models.base import get
    model = get(entry["model"])
    params = {}
    for k, v in (entry.get("params") or {}).items():
        v = _reference(v, base or {}, cross)
        times = 1.0
        if isinstance(v, tuple):
            v, times = v
        params[k] = _model_param(model, k, v) * times if times != 1.0 else _model_param(model, k, v)
    scale = float(entry.get("scale", 1))
    ys, unit = [], ""
    for x in xs_base:
        try:
            q = model.evaluate(**params, **{entry["x"]: x * scale})[entry["output"]]
            ys.append(float(q.value))
            unit = q.unit
        except (ValueError, ZeroDivisionError):
            ys.append(None)
    return ys, unit


def curve_figure(summary: dict, metric: str, base: Path) -> list[str]:
    """``<metric>-curve``; [] when the levels are not numeric."""
    by = summary["by_level"]
    cells = [(lab, lv["level"], lv.get("cross")) for lab, lv in by.items()]
    values = list(dict.fromkeys(v for _, v, _ in cells))
    axis = numeric_axis(values)
    if axis is None:
        return []
    xs, xunit, to_base = axis
    xof = dict(zip(map(str, values), xs))
    plt = _plt()
    fig, ax = plt.subplots(figsize=(11, 4.8))
    crosses = list(dict.fromkeys(c for _, _, c in cells))
    for k, c in enumerate(crosses):
        pts = sorted((xof[str(v)], by[lab]["metrics"][metric]) for lab, v, cc in cells if cc == c)
        missing = [x for x, s in pts if s["median"] is None]
        pts = [(x, s) for x, s in pts if s["median"] is not None]
        if missing:                     # levels without a valid run: marked on the axis, not joined
            dx = (max(xs) - min(xs)) * 0.012 * (k - (len(crosses) - 1) / 2)     # side by side
            ax.plot([m + dx for m in missing], [0] * len(missing), "x", ms=8, mew=1.5, color=f"C{k}", clip_on=False,
                    label=f"{c if c is not None else summary['experiment']}: no valid run")
        if not pts:
            continue
        x = np.array([p[0] for p in pts])
        y = np.array([p[1]["median"] for p in pts])
        lo = np.array([p[1]["median"] - p[1]["median_ci"][0] if p[1]["median_ci"] else 0 for p in pts])
        hi = np.array([p[1]["median_ci"][1] - p[1]["median"] if p[1]["median_ci"] else 0 for p in pts])
        n = min(p[1]["n"] for p in pts)
        label = f"{c if c is not None else summary['experiment']} (measured, median"
        label += ", 95 % CI)" if any(p[1]["median_ci"] for p in pts) else f"; n={n}, no CI)"
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o-", ms=4, lw=1.2, capsize=3, color=f"C{k}", label=label)
    lo_x, hi_x = min(xs), max(xs)
    grid = (np.geomspace(max(lo_x, 1e-9), hi_x, 200) if summary.get("log_x") and lo_x > 0
            else np.linspace(lo_x, hi_x, 200))
    j = 0
    for entry in summary.get("models") or []:
        per_cross = "=cross" in (entry.get("params") or {}).values()
        for k, c in (enumerate(crosses) if per_cross else [(None, None)]):
            ys, unit = model_curve(entry, [to_base(g) for g in grid], summary.get("base"), c)
            mask = np.array([y is not None for y in ys])
            if mask.any():
                ax.plot(grid[mask], np.array([y for y in ys if y is not None]), "--" if j % 2 == 0 else ":",
                        lw=1.3, color=f"C{k}" if per_cross else f"C{len(crosses) + j}",
                        label=f"{entry.get('label') or entry['output']}{f' {c}' if per_cross else ''} "
                              f"(model {entry['model']}, {unit})")
            j += 0 if per_cross else 1
        j += 1 if per_cross else 0
    if summary.get("log_x"):
        ax.set_xscale("log")
    ax.set_xlabel(f"{summary['factor']}" + (f" ({xunit})" if xunit else ""))
    ax.set_ylabel(f"{metric} ({_unit(metric)})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(f"{summary['experiment']}: {metric} against {summary['factor']}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return _save(fig, base)


def levels_figure(summary: dict, metric: str, base: Path) -> list[str]:
    plt = _plt()
    labels = summary["levels"]
    data = [[r["metrics"][metric] for r in summary["runs"] if r["valid"] and r["level"] == lab
             and r["metrics"].get(metric) is not None] for lab in labels]
    many = len(labels) > 4
    fig, (box, ecdf) = plt.subplots(1, 2, figsize=(max(10, 0.55 * len(labels) + 7), 4.5 + 0.8 * many),
                                    sharey=False)
    rng = np.random.default_rng(0)
    box.boxplot([d or [np.nan] for d in data], showfliers=False, medianprops={"color": "black"})
    box.set_xticks(range(1, len(labels) + 1), [f"{lab} (n={len(d)})" if many else f"{lab}\n(n={len(d)})"
                                               for lab, d in zip(labels, data)],
                   rotation=45 if many else 0, ha="right" if many else "center", fontsize=8 if many else None)
    for i, d in enumerate(data, start=1):
        box.plot(i + rng.uniform(-0.12, 0.12, len(d)), d, "o", ms=4, alpha=0.7, color=f"C{i - 1}")
        if d:
            x = np.sort(d)
            ecdf.step(np.r_[x[0], x], np.r_[0, np.arange(1, len(d) + 1) / len(d)], where="post",
                      color=f"C{i - 1}", label=labels[i - 1])
    box.set_ylabel(f"{metric} ({_unit(metric)})")
    box.set_title("per level (valid runs)")
    ecdf.set_xlabel(f"{metric} ({_unit(metric)})")
    ecdf.set_ylabel("fraction of runs ≤ x")
    ecdf.set_ylim(0, 1.02)
    ecdf.set_title("ECDF")
    if any(data):
        if len(labels) > 6:
            ecdf.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        else:
            ecdf.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{summary['experiment']}: {summary['factor']}")
    return _save(fig, base)


def drift_figure(summary: dict, metric: str, base: Path) -> list[str]:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.5))
    runs = [r for r in summary["runs"] if r["status"] != "missing" and not r["warmup"]
            and r.get("metrics", {}).get(metric) is not None]
    for k, lab in enumerate(summary["levels"]):
        rs = [r for r in runs if r["level"] == lab and r["valid"]]
        ax.plot([r["index"] for r in rs], [r["metrics"][metric] for r in rs], "o-", ms=4, lw=0.6,
                color=f"C{k}", label=lab)
    bad = [r for r in runs if not r["valid"]]
    if bad:
        ax.plot([r["index"] for r in bad], [r["metrics"][metric] for r in bad], "x", color="grey",
                label="excluded")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("run index (execution order)")
    ax.set_ylabel(f"{metric} ({_unit(metric)})")
    ax.set_title(f"{summary['experiment']}: {metric} by run")
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, base)


def _client_capture(run_dir: Path):
    """The analysed capture nearest the client of a run (None if it kept no pcap)."""
    from analysis.applog import load
    from analysis.report import analyze_file
    from testbed.spec.runresult import load_run
    r = load_run(run_dir)
    client = r.roles.get("client")          # the host the run's client ran on (manifest)
    pcaps = [(f, run_dir / f["path"]) for f in r.files if f["kind"] == "pcap"]
    pcaps = [(f, p) for f, p in pcaps if p.exists()]
    if not pcaps:
        return None
    f, p = next(((f, p) for f, p in pcaps if f.get("host") == client), pcaps[0])
    logs = [run_dir / x["path"] for x in r.files if x["kind"] == "eventlog" and x.get("host") == f.get("host")]
    events = load(logs[0]) if logs else None
    return analyze_file(p, events=events, keep=True)


def representative_figure(out: Path, summary: dict, base: Path) -> list[str]:
    arms = [(lab, lv["representative"]) for lab, lv in summary["by_level"].items() if lv["representative"]]
    analysed = [(lab, d, _client_capture(out / d)) for lab, d in arms]
    analysed = [a for a in analysed if a[2] is not None and a[2]["flows"]]
    if not analysed:
        return []
    plt = _plt()
    nreq = [sum(len(o.get("exchanges", [])) for o in a[2]["_objects"]["flows"]) or 1 for a in analysed]
    fig, axes = plt.subplots(2 * len(analysed), 1, sharex=True, figsize=(11, sum(2.2 + 0.25 * n for n in nreq)),
                             gridspec_kw={"height_ratios": [h for n in nreq for h in (2.0, 0.6 + 0.2 * n)]})
    for k, (lab, d, res) in enumerate(analysed):
        t0 = min(fl["t0_ns"] for fl in res["flows"])
        fl_ax, sw = axes[2 * k], axes[2 * k + 1]
        lane, seen = 0, set()
        for obj in res["_objects"]["flows"]:
            for dname, direction in obj.get("directions", {}).items():
                if dname == obj.get("main"):
                    tr = direction.tracker
                    fl_ax.step((np.asarray(tr.series_t, np.int64) - t0) / 1e9, tr.series_outstanding,
                               where="post", lw=0.8, color="tab:blue")
            hs = obj.get("handshake", {})
            for i, ex in enumerate(obj.get("exchanges", [])):
                ev = {**ex, **({"syn": hs.get("syn"), "ack": hs.get("ack")} if i == 0 else {})}
                for name, a, b, color in PHASES:
                    if ev.get(a) is not None and ev.get(b) is not None:
                        sw.barh(lane, (ev[b] - ev[a]) / 1e9, left=(ev[a] - t0) / 1e9, color=color,
                                height=0.7, label=name if name not in seen else None)
                        seen.add(name)
                lane += 1
        fl_ax.set_ylabel("in flight (bytes)")
        fl_ax.set_title(f"{lab}: {d} (run closest to the median of {summary['primary']})", fontsize=9)
        sw.set_ylabel("exchange\n(warm-ups incl.)")
        sw.set_ylim(-0.5, max(lane, 1) - 0.5)
        sw.invert_yaxis()
    axes[1].legend(fontsize=7, loc="upper right", ncol=4)
    axes[-1].set_xlabel("time since the run's first packet (s)")
    return _save(fig, base)


def write(out: str | Path, summary: dict | None = None) -> list[str]:
    out = Path(out)
    summary = summary or json.loads((out / "summary.json").read_text())
    pdir = out / "plots"
    written: list[str] = []
    for m in summary["metrics"]:
        written += curve_figure(summary, m, pdir / f"{m}-curve")
        written += levels_figure(summary, m, pdir / f"{m}-levels")
        written += drift_figure(summary, m, pdir / f"{m}-by-run")
    written += representative_figure(out, summary, pdir / "representative")
    return written
