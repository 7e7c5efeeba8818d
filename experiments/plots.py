"""An experiment's figures (PNG, SVG and PDF via analysis.plots' ``_save``), from summary.json and
the representative runs' captures; axis labels in words with units (:func:`metric_axis`), legends
titled with the factor's name and outside the data:

* ``<metric>-levels``: every valid run per arm (dots) with the median and its 95 % CI (black
  bar; the median alone where n is too small for a CI), and beside it the arms' ECDFs — both on
  ONE shared metric axis;
* ``<metric>-by-run``: the metric against the run index (execution order), colour by arm,
  excluded runs as grey crosses — drift and order effects show here;
* ``<metric>-curve`` (numeric levels only): the metric against the level, median and its 95 %
  CI per level (median alone where n is too small for a CI), one line per level of a crossed
  factor (a level without a valid run as a cross on the level axis), and each ``models`` entry
  of the definition evaluated on a fine grid of the level (``analysis.models``) as a dashed line
  on the same axes;
* ``representative``: the valid run closest to each arm's median of the primary metric, the
  arms side by side on shared axes: bytes in flight (outstanding = SND.MAX − SND.UNA of every
  connection's main data direction) above a swimlane (one lane per request: handshake SYN → ACK,
  request first → last payload byte, wait from the request's last to the response's first byte,
  response first → last byte), seconds from the run's first packet, all from the capture at the
  data's sender when the run kept one, else the client's (:func:`_capture`; each panel says
  which; at the client the wait is server time + propagation, at the server its time alone);
  for the UDP transport its symbol, repair and ACK packets (:func:`analysis.fec.draw`); an arm
  whose capture has no TCP flow (QUIC) beside TCP arms from its qlog (:func:`_quic_panels`:
  STREAM frames and bytes in order per stream, the sender's bytes in flight, the request's
  phases), a note inside a panel saying why where the qlog gives it nothing; a panel names its
  arm by :func:`arm_label`;
* :func:`request_figure`: one representative request per cell, ms from its start (what
  ``testbed reproduce`` draws for C7).

A metric with no value, only zeros or one value gets no levels or by-run figure
(:func:`degenerate` gives the sentence the report shows instead).  The timelines take
``markers``: per arm, vertical lines for events that are not packets, in every panel of the arm,
their texts once inside its top panel (:func:`analysis.plots.mark_texts`); the representative runs'
own link changes (a link schedule's, ``analysis.plotset.link_markers``) are drawn on their TCP
timelines as well, and so are their timed steps (``analysis.applog.steps`` of all the run's event
logs, :func:`analysis.plots.shade_steps`) that overlap the drawn packets' time.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Callable

import numpy as np

from analysis.plots import (LINE_STYLES, MARK_LINE, _plt, _save, figure_legend, label_point, mark_texts, note,
                            shade_steps)

log = logging.getLogger(__name__)

PHASES = (("handshake", "syn", "ack", "tab:gray"), ("request", "request_first", "request_last", "tab:blue"),
          ("wait", "request_last", "response_first", "tab:orange"),
          ("response", "response_first", "response_last", "tab:green"))
#: what the wait from the request's last to the response's first byte holds, by the run's role of
#: the host whose capture times it
WAIT = {"client": "wait (server + propagation)", "server": "wait (server)"}


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
    ax.set_ylabel(metric_axis(metric, kb=False)[0])
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(f"{summary['experiment']}: {metric_axis(metric, kb=False)[0]} against {summary['factor']}",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
              title=summary.get("cross"), title_fontsize=8)
    fig.tight_layout()
    return _save(fig, base)


def metric_axis(metric: str, kb: bool = True) -> tuple[str, float]:
    """(axis label in words with its unit, factor from the metric's stored value to the
    displayed one): ``completion_ms_median`` -> ("completion, median per run (ms)", 1);
    byte counts are shown in kB (10³ B), or in B with ``kb=False``."""
    words = metric
    how = ""
    if words.endswith("_median"):
        words, how = words[:-len("_median")], ", median per run"
    for suffix, unit, scale in (("_ms", "ms", 1.0), ("_mbps", "Mbit/s", 1.0),
                                ("_bytes", "kB" if kb else "B", 1e-3 if kb else 1.0),
                                ("_s", "s", 1.0)):
        if words.endswith(suffix):
            return f"{words[:-len(suffix)].replace('_', ' ')}{how} ({unit})", scale
    return f"{words.replace('_', ' ')}{how} (count)", 1.0


def _values(summary: dict, metric: str, label: str) -> list[float]:
    return [r["metrics"][metric] for r in summary["runs"] if r["valid"] and r["level"] == label
            and r["metrics"].get(metric) is not None]


def degenerate(summary: dict, metric: str) -> str | None:
    """The sentence that replaces ``metric``'s distribution and by-run figures when they would
    show nothing (no value, all zero, one value), else None."""
    from analysis.plots import sentence_if_degenerate
    vals = [v for lab in summary["levels"] for v in _values(summary, metric, lab)]
    return sentence_if_degenerate(vals, f"{metric_axis(metric)[0]}, valid runs of every arm")


def levels_figure(summary: dict, metric: str, base: Path) -> list[str]:
    """Per arm on ONE shared metric axis: every valid run (dots), the median with its 95 % CI
    (black bar; the median alone where n is too small for a CI); next to it, on the same axis,
    the ECDF of the runs of each arm.  [] when :func:`degenerate`."""
    if degenerate(summary, metric):
        return []
    from matplotlib.ticker import MaxNLocator
    plt = _plt()
    labels = summary["levels"]
    label, scale = metric_axis(metric)
    data = [[v * scale for v in _values(summary, metric, lab)] for lab in labels]
    fig, (dots, ecdf) = plt.subplots(1, 2, sharex=True, figsize=(11, 1.6 + 0.45 * len(labels)),
                                     gridspec_kw={"width_ratios": (3, 2)})
    rng = np.random.default_rng(0)
    names = shown_levels(labels)
    look = arm_styles(summary)
    for i, (lab, d) in enumerate(zip(labels, data)):
        y = len(labels) - 1 - i
        dots.plot(d, y + rng.uniform(-0.15, 0.15, len(d)), look[lab]["marker"], ms=4, alpha=0.6,
                  color=look[lab]["color"])
        s = summary["by_level"][lab]["metrics"][metric]
        if s["median"] is not None:
            med = s["median"] * scale
            if s["median_ci"]:
                lo, hi = (c * scale for c in s["median_ci"])
                dots.errorbar([med], [y], xerr=[[med - lo], [hi - med]], fmt="|", color="black",
                              ms=14, mew=2, capsize=5, lw=2)
            else:
                dots.plot([med], [y], "|", color="black", ms=14, mew=2)
        if d:
            x = np.sort(d)
            ecdf.step(np.r_[x[0], x], np.r_[0, np.arange(1, len(d) + 1) / len(d)], where="post",
                      color=look[lab]["color"], ls=look[lab]["ls"], label=names[lab])
    dots.set_yticks(range(len(labels)), [f"{names[lab]} (n={len(d)})" for lab, d in zip(labels, data)][::-1])
    dots.set_ylim(-0.6, len(labels) - 0.4)
    dots.set_xlabel(label)
    dots.set_title("valid runs; black: median and its 95 % CI", fontsize=9)
    ecdf.set_xlabel(label)
    ecdf.set_ylabel("fraction of runs ≤ x")
    ecdf.set_ylim(0, 1.02)
    ecdf.set_title("ECDF", fontsize=9)
    for ax in (dots, ecdf):
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.grid(axis="x", alpha=0.3)
    ecdf.legend(fontsize=8, title=arms_title(summary), title_fontsize=8, loc="upper left",
                bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(f"{summary['experiment']}: {label} per arm of {arms_title(summary)}", fontsize=10)
    return _save(fig, base)


MARKERS = "osD^v<>ph*"


def arm_styles(summary: dict) -> dict[str, dict]:
    """Each arm's look, the same in every figure of the experiment: colour ``C<i>`` per arm; for
    a crossed experiment the colour of its crossed level (the colour the level's line has in
    the ``-curve`` figure: reno is blue in every panel), the factor's level told by the line
    style and the marker."""
    labels = summary["levels"]
    if not summary.get("cross"):
        return {lab: {"color": f"C{i % 10}", "ls": LINE_STYLES[i // 10 % len(LINE_STYLES)],
                      "marker": "o"} for i, lab in enumerate(labels)}
    by = summary["by_level"]
    crosses = list(dict.fromkeys(by[lab].get("cross") for lab in by))
    levels = list(dict.fromkeys(by[lab]["level"] for lab in by))
    out = {}
    for lab in labels:
        c, lv = crosses.index(by[lab].get("cross")), levels.index(by[lab]["level"])
        out[lab] = {"color": f"C{c % 10}", "ls": LINE_STYLES[lv % len(LINE_STYLES)],
                    "marker": MARKERS[lv % len(MARKERS)]}
    return out


def shown_levels(levels: list[str], width: int = 28) -> dict[str, str]:
    """Each arm's name as a figure shows it: a name longer than ``width`` characters (a list of
    per-round rates, say) as its start … end with its length, unless that makes two arms alike."""
    def short(lab: str) -> str:
        if len(lab) <= width:
            return lab
        keep = (width - 1) // 2
        return f"{lab[:keep]}…{lab[-keep:]} ({len(lab)} ch)"
    out = {lab: short(lab) for lab in levels}
    return out if len(set(out.values())) == len(out) else {lab: lab for lab in levels}


def drift_figure(summary: dict, metric: str, base: Path) -> list[str]:
    """The metric against the run index, the runs kept with a degraded fidelity verdict circled
    and the excluded ones crossed; [] when :func:`degenerate`."""
    if degenerate(summary, metric):
        return []
    plt = _plt()
    label, scale = metric_axis(metric)
    fig, ax = plt.subplots(figsize=(11, 3.5))
    runs = [r for r in summary["runs"] if r["status"] != "missing" and not r["warmup"]
            and r.get("metrics", {}).get(metric) is not None]
    names = shown_levels(summary["levels"])
    look = arm_styles(summary)
    for lab in summary["levels"]:
        rs = [r for r in runs if r["level"] == lab and r["valid"]]
        ax.plot([r["index"] for r in rs], [r["metrics"][metric] * scale for r in rs], ms=4, lw=0.6,
                label=names[lab], **look[lab])
    degraded = [r for r in runs if r["valid"] and r.get("fidelity") == "degraded"]
    if degraded:            # kept (the machine's timing error), but a reader should see which
        ax.plot([r["index"] for r in degraded], [r["metrics"][metric] * scale for r in degraded], "o",
                ms=9, mfc="none", color="black", lw=0, label="kept, fidelity degraded")
    bad = [r for r in runs if not r["valid"]]
    if bad:
        ax.plot([r["index"] for r in bad], [r["metrics"][metric] * scale for r in bad], "x", color="grey",
                label="excluded")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("run index (execution order)")
    ax.set_ylabel(label)
    ax.set_title(f"{summary['experiment']}: {label} by run", fontsize=10)
    ax.legend(fontsize=8, title=arms_title(summary), title_fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, base)


def _capture(run_dir: Path):
    """The analysed capture a run's figures are drawn from: the one taken at the host that sent
    its data (:func:`_data_sender`) when the run kept one holding the same connections, else the
    client's own (for a download, the data's receiver); None if the run kept no pcap.  Its
    ``_role`` says where it was taken (the run's role of that host: client, server, or None),
    ``_at_sender`` whether that is the data's sender, ``_tcp`` whether it holds a TCP flow
    (else ``_qlogs``: the run's qlog traces, :func:`_qlogs`)."""
    from testbed.spec.runresult import load_run
    r = load_run(run_dir)
    pcaps = [(f, run_dir / f["path"]) for f in r.files if f["kind"] == "pcap"]
    pcaps = [(f, p) for f, p in pcaps if p.exists()]
    if not pcaps:
        return None
    from analysis.applog import load
    logs = []
    for x in r.files:
        if x["kind"] == "eventlog" and (r.dir / x["path"]).exists():
            try:
                logs.append((x.get("host"), load(r.dir / x["path"])))
            except ValueError as exc:            # damaged after the run, which read it whole
                log.warning("%s: its figures are drawn without this log's events", exc)
    every = [e for _, events in logs for e in events]
    res = _analysed(r, logs, every, *next(((f, p) for f, p in pcaps if f.get("host") == r.roles.get("client")),
                                          pcaps[0]))
    sender = _data_sender(r, res)
    if sender is not None and sender != res["_host"]:
        ends = {_ends(obj["flow"].key) for obj in res["_objects"]["flows"]}
        for f, p in pcaps:
            if f.get("host") == sender:
                theirs = _analysed(r, logs, every, f, p)
                if ends & {_ends(obj["flow"].key) for obj in theirs["_objects"]["flows"]}:
                    res = theirs
                    break
    res["_at_sender"] = None if sender is None else sender == res["_host"]
    res["_tcp"] = any(fl["proto"] == "tcp" for fl in res["flows"])
    res["_qlogs"] = [] if res["_tcp"] else _qlogs(r, every, res)
    res["_stream_kinds"] = {e["stream"]: e["kind"] for e in every
                            if e.get("event") == "stream_chunk" and "stream" in e and "kind" in e}
    if res["damage"]:
        log.warning("%s: the capture is damaged (%s): its figures draw what could be read of it",
                    res["_pcap"], res["damage"][0]["message"])
    return res


def _analysed(r, logs: list, every: list, f: dict, p: Path) -> dict:
    """The capture ``p`` (inventory entry ``f`` of the run ``r``) analysed with its host's (first)
    event log (``logs``: the run's event logs as (host, events), loaded once; ``every``: all their
    events), and the timed steps of all of them where its clock is theirs."""
    from analysis.applog import clock_offset, steps
    from analysis.report import analyze_file
    res = analyze_file(p, events=next((ev for host, ev in logs if host == f.get("host")), None), keep=True)
    res["_pcap"] = p
    res["_host"] = f.get("host")
    res["_role"] = next((role for role, host in r.roles.items() if host == f.get("host")), None)
    res["_steps"] = steps(every) if res["clock"] == "monotonic" and clock_offset(every) is not None else []
    return res


def _qlogs(r, every: list, res: dict) -> list:
    """The run's qlog traces (``analysis.qlog``: a QUIC run's packets, which its capture holds
    encrypted), their times on the capture's clock: the ``clock`` event of the logs' events
    (``every``) puts the qlog's realtime on a monotonic capture's clock (none: [] — they could
    not be joined); a realtime capture needs none."""
    from analysis import qlog
    from analysis.applog import clock_offset
    offset = 0
    if res["clock"] == "monotonic":
        offset = clock_offset(every)
        if offset is None:
            return []
    traces = []
    for f in r.files:
        p = r.dir / f["path"]
        if p.is_file() and qlog.is_qlog(p):
            try:
                traces += qlog.load(p, offset)
            except ValueError as exc:
                log.warning("%s: its figures are drawn without it", exc)
    return traces


def _data_sender(r, res: dict) -> str | None:
    """The host that sent the most payload in the data directions of the capture's TCP
    connections, each connection's sender found as ``analysis.runmetrics`` finds it (the host
    holding the sending address, else the sending end's role); None without a data direction."""
    from analysis.applog import read_object
    from analysis.runmetrics import Senders
    senders = Senders(r.dir, r.roles.get("client") or "client", r.roles.get("server") or "server",
                       read_object(r.dir / "metadata.json") or {})
    sent: dict[str, int] = {}
    for rec, obj in zip(res["flows"], res["_objects"]["flows"]):
        main = rec.get("data_direction")
        if rec["proto"] == "tcp" and main:
            host = senders.host(obj["flow"].key, main)
            sent[host] = sent.get(host, 0) + rec["directions"][main]["payload_bytes"]
    return max(sent, key=sent.get) if sent else None


def _ends(key) -> frozenset:
    """A connection's two endpoints, whichever end opened it."""
    return frozenset({(key.client, key.client_port), (key.server, key.server_port)})


def _where(res: dict) -> str:
    """Where a capture was taken, as a panel says it, and whether the file is damaged."""
    where = f"captured at {res['_host'] or '?'}"
    where = {True: f"{where}, the data's sender", False: f"{where}: as the data's RECEIVER saw it"}.get(
        res["_at_sender"], where)
    kinds = ", ".join(dict.fromkeys(d["kind"] for d in res["damage"]))
    return f"{where}; capture DAMAGED ({kinds})" if kinds else where


def arm_label(summary: dict, label: str) -> str:
    """An arm as a panel names it: ``factor = label``; for an experiment with a crossed factor,
    whose arm names (``reno@0pct``) are no level of the factor, both factors' levels
    (``links.bottleneck.down.loss = 0%, socket.cc = reno``)."""
    if not summary.get("cross"):
        return f"{summary['factor']} = {label}"
    lv = summary["by_level"][label]
    return f"{summary['factor']} = {lv['level']}, {summary['cross']} = {lv['cross']}"


def arms_title(summary: dict) -> str:
    """What names the arms, as a legend's title: the factor, or for a crossed experiment
    ``CROSS@FACTOR`` (an arm ``reno@0pct`` is socket.cc reno at 0 % loss)."""
    return f"{summary['cross']}@{summary['factor']}" if summary.get("cross") else summary["factor"]


def _shade(axes, res: dict, lo_ns: int, hi_ns: int, t0: int, scale: float = 1e9) -> None:
    """The run's timed steps that overlap [lo_ns, hi_ns] as shaded spans on every axes (x in
    units of ``scale`` ns from ``t0``)."""
    inside = [s for s in res.get("_steps", ()) if s.end_ns >= lo_ns and s.start_ns <= hi_ns]
    for ax in axes:
        shade_steps(ax, inside, t0, scale=scale, keep_xlim=False)


def _link_changes(run_dir: Path, res: dict) -> list[tuple[float, str]]:
    """The run's link changes (``analysis.plotset.link_markers``) in s from its capture's first
    packet, the x axis of the representative TCP figure."""
    from analysis.plotset import link_markers
    if not res["flows"]:
        return []
    t0 = min(fl["t0_ns"] for fl in res["flows"])
    return [((t - t0) / 1e9, text) for t, text in link_markers(sorted((run_dir / "emulator").glob("*.frames")))]


def _exchanges(res: dict):
    """Per request of an analysed capture: (t0 of the capture, flow object, index in its flow,
    the exchange with the handshake's SYN/ACK joined to a connection's first request)."""
    t0 = min(fl["t0_ns"] for fl in res["flows"])
    for obj in res["_objects"]["flows"]:
        hs = obj.get("handshake", {})
        for i, ex in enumerate(obj.get("exchanges", [])):
            yield t0, obj, i, {**ex, **({"syn": hs.get("syn"), "ack": hs.get("ack")} if i == 0 else {})}


def _phases(ax, lane: float, ev: dict, shift_ns: int, seen: set, role: str | None, scale: float = 1e9) -> None:
    """One request's :data:`PHASES` as bars on ``lane``, times from a capture at the run's
    ``role`` (the wait named by :data:`WAIT`)."""
    for name, a, b, color in PHASES:
        if name == "wait":
            name = WAIT.get(role, "wait (request's last to response's first byte)")
        if ev.get(a) is not None and ev.get(b) is not None:
            ax.barh(lane, (ev[b] - ev[a]) / scale, left=(ev[a] - shift_ns) / scale, color=color,
                    height=0.7, label=name if name not in seen else None)
            seen.add(name)


def _markers(axes, marks) -> None:
    """Vertical markers (time on the axes' x unit, text) on every axis of one arm: the place
    where events that are not packets (a link's change, a phase) join a timeline; their texts
    once, inside the arm's top panel (:func:`analysis.plots.mark_texts`; past a few moments
    numbered tags listed in the legend)."""
    for ax in axes:
        for x, _text in marks:
            ax.axvline(x, **MARK_LINE)
    mark_texts(axes[0], marks, legend_ax=axes[-1])


def _stream_bytes(trace, sent: bool) -> int:
    f = trace.frames[trace.frames["sent"] == sent]
    return int(f["length"].sum()) if len(f) else 0


def _quic(res: dict) -> dict | None:
    """What the qlogs of an arm without a TCP flow give its panels (None without any): the
    trace whose STREAM frames are drawn (``data``, the one at the capture's host when it has
    them, its ``sent`` side when it sent more stream bytes than it received), the data's
    sender's trace when it logged bytes in flight (``sender``), and the request's phases from
    the client's trace (``request``: handshake = its first Initial to its first 1-RTT packet,
    request = its STREAM frames sent, response = those received; at the server the other way
    round) with the role of that trace."""
    traces = [tr for tr in res.get("_qlogs", ()) if len(tr.frames)]
    if not traces:
        return None
    here = [tr for tr in traces if tr.vantage == res["_role"]]
    data = max(here or traces, key=lambda tr: max(_stream_bytes(tr, True), _stream_bytes(tr, False)))
    sent = _stream_bytes(data, True) > _stream_bytes(data, False)
    senders = [tr for tr in traces if _stream_bytes(tr, True) > _stream_bytes(tr, False)
               and "bytes_in_flight" in tr.metrics]
    sender = max(senders, key=lambda tr: _stream_bytes(tr, True), default=None)
    at = next((tr for tr in traces if tr.vantage == "client"), traces[0])
    role = at.vantage if at.vantage in ("client", "server") else None
    mine, theirs = (True, False) if role != "server" else (False, True)
    pk = at.sent if role != "server" else at.received
    ev = {}
    if len(pk):
        ev["syn"] = int(pk["t_ns"].min())
        one = pk["t_ns"][pk["ptype"] == "1RTT"]
        ev["ack"] = int(one.min()) if len(one) else None
    for (a, b), side in ((("request_first", "request_last"), mine), (("response_first", "response_last"), theirs)):
        t = at.frames["t_ns"][at.frames["sent"] == side]
        if len(t):
            ev[a], ev[b] = int(t.min()), int(t.max())
    peer = {"client": "server", "server": "client"}.get(data.vantage, "its peer")
    return {"data": data, "sent": sent, "sender": sender, "request": ev, "role": role,
            "peer": data.vantage if sent else peer}


def _quic_panels(ts_ax, fl_ax, sw, res: dict, q: dict | None, t0: int, seen: set) -> None:
    """An arm without a TCP flow: from its qlogs (:func:`_quic`) each STREAM frame's end in
    its stream (repairs of a hole red) and each stream's bytes in order, the sender's bytes in
    flight and the request's phases; where they give nothing a note inside the panel says why."""
    from analysis import qlog
    if q is None:
        why = ("no TCP flow in this capture and no qlog of the run to draw its packets from"
               if not res.get("_qlogs") else "no TCP flow in this capture and no STREAM frame in its qlog")
        for ax in (ts_ax, fl_ax):
            note(ax, why)
        return
    tr, sent = q["data"], q["sent"]
    f = tr.frames[tr.frames["sent"] == sent]
    side = "sent" if sent else "received"
    for sid in np.unique(f["stream"]):
        g = np.sort(f[f["stream"] == sid], order="t_ns")
        end = g["offset"] + g["length"]
        hole = g["offset"] < np.concatenate(([0], np.maximum.accumulate(end)[:-1]))
        t = (g["t_ns"] - t0) / 1e9
        for mask, colour, name in ((~hole, "black", f"QUIC STREAM frame {side} (qlog)"),
                                   (hole, "tab:red", "QUIC STREAM frame filling a hole (qlog)")):
            if mask.any():
                ts_ax.plot(t[mask], end[mask] / 1e3, ".", ms=1.5, color=colour,
                           label=name if name not in seen else None)
                seen.add(name)
        dt, db = qlog.delivered(tr, int(sid), sent=sent)
        name = "QUIC bytes in order per stream (qlog)"
        ts_ax.step((dt - t0) / 1e9, db / 1e3, where="post", lw=0.8, color="tab:green",
                   label=name if name not in seen else None)
        seen.add(name)
        kind = res.get("_stream_kinds", {}).get(int(sid))
        label_point(ts_ax, t[-1], end.max() / 1e3, f"stream {int(sid)}" + (f" ({kind})" if kind else ""))
    if q["sender"] is not None:
        mt, mv = q["sender"].metrics["bytes_in_flight"]
        name = "QUIC bytes in flight (sender's qlog)"
        fl_ax.step((mt - t0) / 1e9, mv / 1e3, where="post", lw=0.8, color="tab:purple",
                   label=name if name not in seen else None)
        seen.add(name)
    else:
        note(fl_ax, f"QUIC: no TCP flow in the capture; the data's sender ({q['peer']}) left no qlog "
                    "of its bytes in flight")
    if q["request"].get("syn") is None and q["request"].get("request_first") is None:
        note(sw, "no request in the qlog")
        return
    _phases(sw, 0, q["request"], t0, seen, q["role"])


#: inches of figure height per unit of a panel row's height ratio (:func:`_grid`)
ROW_INCH = 1.7
#: inches above and below each block of panels: the arms' titles (three lines) above, the time
#: axis' tick labels and label below
BLOCK_MARGIN_INCH = 1.3
#: the gap between the panels of one arm, as a fraction of a panel's mean height: they share
#: their time axis, whose labels only the bottom panel shows
PANEL_GAP = 0.08


def _grid(n: int, ratios: tuple = (1.4, 1.0)):
    """A figure with ``n`` arms side by side (three per block), ``len(ratios)`` rows each: per
    block of arms a grid of its own whose rows are :data:`PANEL_GAP` apart (one grid for all
    blocks spaced every row as far apart as the blocks, whose titles and time axes need room).
    Returns (figure, [the grid of each block], arms per block)."""
    plt = _plt()
    cols = min(n, 3)
    blocks = -(-n // cols)
    fig = plt.figure(figsize=(5.2 * cols + 1.5, (ROW_INCH * sum(ratios) + BLOCK_MARGIN_INCH) * blocks))
    outer = fig.add_gridspec(blocks, 1)
    grids = [outer[b].subgridspec(len(ratios), cols, height_ratios=list(ratios), hspace=PANEL_GAP,
                                  wspace=0.06) for b in range(blocks)]
    return fig, grids, cols


def _kb_or_mb(ax, label: str) -> None:
    """Label ``ax``'s y axis, drawn in kB, in MB (ticks divided by 1000) where its values reach
    10,000 kB: 80,000 kB reads as 80 MB."""
    from matplotlib.ticker import FuncFormatter
    if ax.get_ylim()[1] >= 1e4:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v / 1e3:g}"))
        ax.set_ylabel(f"{label} (MB)")
    else:
        ax.set_ylabel(f"{label} (kB)")


def _tseq(ax, direction, t0: int, seen: set) -> None:
    """A compact time-sequence graph: each data segment's end (kB from the ISN) at its time,
    retransmissions red, the cumulative ACK as a green step."""
    tr = direction.trace
    t = (np.asarray(tr["t"], np.int64) - t0) / 1e9
    data = tr["fwd"] & (tr["end"] > tr["seq"])
    rtx = np.isin(tr["index"], tr["rtx_packets"])
    for mask, colour, name in ((data & ~rtx, "black", "segment"), (data & rtx, "tab:red", "retransmission")):
        if mask.any():
            ax.plot(t[mask], tr["end"][mask] / 1e3, ".", ms=1.5, color=colour,
                    label=name if name not in seen else None)
            seen.add(name)
    acks = tr["has_ack"] & ~tr["fwd"]
    if acks.any():
        ax.step(t[acks], np.maximum.accumulate(tr["ack"][acks]) / 1e3, where="post", lw=0.8,
                color="tab:green", label="cumulative ACK" if "cumulative ACK" not in seen else None)
        seen.add("cumulative ACK")


def representative_figure(out: Path, summary: dict, base: Path,
                          markers: dict[str, list[tuple[float, str]]] | None = None) -> list[str]:
    """The representative run of every arm side by side on shared axes (time since the run's
    first packet, s; sequence and in flight, kB; requests): a time-sequence graph and bytes in
    flight of each connection's main data direction above a swimlane per request —
    or, for the UDP transport, its packets (:func:`analysis.fec.draw`).  ``markers``: per arm,
    [(seconds, text)] drawn as vertical lines on that arm's axes.  [] when no arm kept a
    capture."""
    arms = [(lab, lv["representative"]) for lab, lv in summary["by_level"].items() if lv["representative"]]
    analysed = [(lab, d, _capture(out / d)) for lab, d in arms]
    analysed = [a for a in analysed if a[2] is not None]
    if not analysed:
        return []
    if not any(a[2]["_tcp"] or a[2]["_qlogs"] for a in analysed):
        return _udp_figure(analysed, summary, base, markers or {})
    quic = {lab: _quic(res) for lab, _d, res in analysed if not res["_tcp"]}
    nreq = max(1 if lab in quic else sum(1 for _ in _exchanges(res)) if res["flows"] else 0
               for lab, _d, res in analysed)
    # the request lanes' height grows with their number: one request is a strip, not a panel
    lanes_inch = 0.45 + 0.14 * min(max(nreq, 1), 12)     # past 12 requests every few is labelled
    fig, grids, cols = _grid(len(analysed), (1.2, 1.2, lanes_inch / ROW_INCH))
    first = {}
    seen: set = set()
    in_kb = []              # (axes, what its y axis shows): the first column's, labelled for all
    for k, (lab, d, res) in enumerate(analysed):
        gs, col = grids[k // cols], k % cols
        ts_ax = fig.add_subplot(gs[0, col], sharex=first.get("x"), sharey=first.get("t"))
        fl_ax = fig.add_subplot(gs[1, col], sharex=ts_ax, sharey=first.get("f"))
        sw = fig.add_subplot(gs[2, col], sharex=ts_ax, sharey=first.get("s"))
        first.setdefault("x", ts_ax)
        first.setdefault("t", ts_ax)
        first.setdefault("f", fl_ax)
        first.setdefault("s", sw)
        where = _where(res)
        if lab in quic:
            t0 = min((fl["t0_ns"] for fl in res["flows"]), default=None)
            if t0 is None and quic[lab] is not None:
                t0 = int(min(quic[lab]["data"].frames["t_ns"]))
            _quic_panels(ts_ax, fl_ax, sw, res, quic[lab], t0 or 0, seen)
            if quic[lab] is not None:
                where += f"; QUIC from the {quic[lab]['data'].vantage}'s qlog"
        elif res["flows"]:
            if res["_at_sender"] is False:      # its "in flight" is what the receiver holds
                where += "\nin flight there: bytes received above the ACK it sent"
            lane = 0
            for t0, obj, i, ev in _exchanges(res):
                if i == 0:
                    for dname, direction in obj.get("directions", {}).items():
                        if dname == obj.get("main"):
                            _tseq(ts_ax, direction, t0, seen)
                            tr = direction.tracker
                            fl_ax.step((np.asarray(tr.series_t, np.int64) - t0) / 1e9,
                                       np.asarray(tr.series_outstanding) / 1e3, where="post", lw=0.8,
                                       color="tab:blue")
                _phases(sw, lane, ev, t0, seen, res["_role"])
                lane += 1
            t0 = min(fl["t0_ns"] for fl in res["flows"])
            _shade((ts_ax, fl_ax, sw), res, t0,
                   max(fl["t0_ns"] + int(fl["duration_s"] * 1e9) for fl in res["flows"]), t0)
        ts_ax.set_title(f"{arm_label(summary, lab)}\n{d}\n{where}", fontsize=9)
        sw.set_ylabel("request" if col == 0 else "")
        sw.set_xlabel("time since the run's first packet (s)")
        fl_ax.tick_params(labelbottom=False)
        ts_ax.tick_params(labelbottom=False)
        if col:                 # the arms share their axes: the first column's labels read for all
            for ax in (ts_ax, fl_ax, sw):
                ax.tick_params(labelleft=False)
        else:
            in_kb += [(ts_ax, "sequence"), (fl_ax, "in flight")]
        _markers((ts_ax, fl_ax, sw), (markers or {}).get(lab, []) + _link_changes(out / d, res))
    ticks = list(range(nreq)) if nreq <= 12 else list(range(0, nreq, max(1, nreq // 6)))
    first["s"].set_yticks(ticks, [str(t + 1) for t in ticks])
    first["s"].set_ylim(nreq - 0.5, -0.5)
    first["f"].set_ylim(bottom=0)
    first["t"].set_ylim(bottom=0)
    for ax, label in in_kb:
        _kb_or_mb(ax, label)
    figure_legend(fig, fontsize=8, markerscale=4)
    fig.suptitle(f"{summary['experiment']}: the representative run of each arm (closest to the "
                 f"median of {summary['primary']}), from the capture at the data's sender where the run "
                 "kept one", fontsize=10)
    return _save(fig, base)


def _udp_figure(analysed, summary: dict, base: Path, markers: dict) -> list[str]:
    from analysis import fec, pcap
    fig, grids, cols = _grid(len(analysed))
    first: dict = {}
    cums = []
    for k, (lab, d, res) in enumerate(analysed):
        gs, col = grids[k // cols], k % cols
        ax = fig.add_subplot(gs[0, col], sharex=first.get("x"), sharey=first.get("y"))
        cum = fig.add_subplot(gs[1, col], sharex=ax, sharey=first.get("c"))
        cums.append(cum)
        first.setdefault("x", ax)
        first.setdefault("y", ax)
        first.setdefault("c", cum)
        fec.draw(ax, cum, pcap.read(res["_pcap"]), fec.DEFAULT_PORT)
        ax.set_title(f"{arm_label(summary, lab)}\n{d}\n{_where(res)}", fontsize=9)
        ax.tick_params(labelbottom=False)
        if col:
            ax.set_ylabel("")
            cum.set_ylabel("")
            ax.tick_params(labelleft=False)
            cum.tick_params(labelleft=False)
        _markers((ax, cum), markers.get(lab, []))
    figure_legend(fig, cums, fontsize=8)     # every arm's kinds once (repair only in some arms)
    fig.suptitle(f"{summary['experiment']}: the representative run of each arm, UDP transport "
                 "packets", fontsize=10)
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


def _request_window(res: dict) -> tuple | None:
    """The representative request of an analysed capture: (flow object, start ns, end ns,
    exchange).  Requests are the exchanges carrying at least half the bytes of the largest one
    (a SOCKS5 greeting on the same connection is not a request); a request starts at its
    connection's SYN when it is the connection's first, else at its first byte, and ends at the
    response's last byte.  Of the requests that reuse a connection when the run has any (else of
    all), the one whose time is closest to their median."""
    sized = [(obj, i, ev, ev.get("request_bytes", 0) + ev.get("response_bytes", 0))
             for _t0, obj, i, ev in _exchanges(res)]
    big = max((n for *_, n in sized), default=0)
    cands, opened = [], set()
    for obj, _i, ev, n in sized:
        if n < big / 2 or ev.get("request_first") is None or ev.get("response_last") is None:
            continue
        first = id(obj) not in opened
        opened.add(id(obj))
        syn = obj.get("handshake", {}).get("syn")
        start = syn if first and syn is not None else ev["request_first"]
        cands.append((not first, ev["response_last"] - start, obj, start,
                      {**ev, **({"syn": syn, "ack": obj.get("handshake", {}).get("ack")} if first else {})}))
    if not cands:
        return None
    if any(c[0] for c in cands):
        cands = [c for c in cands if c[0]]
    med = float(np.median([c[1] for c in cands]))
    _, _, obj, start, ev = min(cands, key=lambda c: abs(c[1] - med))
    return obj, start, ev["response_last"], ev


def request_figure(cells: list[tuple[str, Path]], base: Path, title: str,
                   markers: dict[str, list[tuple[float, str]]] | None = None) -> list[str]:
    """One representative request per cell (label, run directory) on shared axes: bytes in
    flight of its connection (kB, at the client's capture) above its phases, ms since the
    request started; ``markers`` as in :func:`representative_figure` (ms).  [] when no cell
    has a request to draw."""
    got, res_of = [], {}
    for label, d in cells:
        res = _capture(Path(d))
        win = _request_window(res) if res and res["flows"] else None
        if win:
            got.append((label, d, win))
            res_of[label] = res
    if not got:
        return []
    plt = _plt()
    # per cell a grid of its own: its phase strip right under its in-flight panel, the cells
    # apart by their titles (one grid for all spaced every panel as far apart as the cells)
    fig = plt.figure(figsize=(11, 1.75 * len(got) + 1.3))
    outer = fig.add_gridspec(len(got), 1)
    axes = []
    for k in range(len(got)):
        inner = outer[k].subgridspec(2, 1, height_ratios=(1.6, 0.45), hspace=PANEL_GAP)
        axes += [fig.add_subplot(inner[i], sharex=axes[0] if axes else None) for i in range(2)]
    seen: set = set()
    for k, (label, d, (obj, start, end, ev)) in enumerate(got):
        fl_ax, sw = axes[2 * k], axes[2 * k + 1]
        fl_ax.tick_params(labelbottom=False)
        if k < len(got) - 1:
            sw.tick_params(labelbottom=False)
        main = obj.get("directions", {}).get(obj.get("main"))
        if main is not None:
            tr = main.tracker
            t = np.asarray(tr.series_t, np.int64)
            keep = (t >= start) & (t <= end)
            if keep.any():
                fl_ax.step((t[keep] - start) / 1e6, np.asarray(tr.series_outstanding)[keep] / 1e3,
                           where="post", lw=0.9, color="tab:blue")
        fl_ax.set_ylabel("in flight\n(kB)", fontsize=8)
        fl_ax.set_title(f"{label}: {(end - start) / 1e6:.0f} ms ({Path(d).name}; {_where(res_of[label])})",
                        fontsize=9, loc="left")
        if k:
            fl_ax.sharey(axes[0])
        _phases(sw, 0, ev, start, seen, res_of[label]["_role"], scale=1e6)
        _shade((fl_ax, sw), res_of[label], start, end, start, scale=1e6)
        sw.set_yticks([])
        _markers((fl_ax, sw), (markers or {}).get(label, []))
    axes[0].set_ylim(bottom=0)
    axes[-1].set_xlabel("time since the request started (ms): its SYN when it opens a connection, "
                        "else its first byte")
    axes[-1].set_xlim(left=0)
    figure_legend(fig, [axes[1], *axes[3::2]], max_cols=5, fontsize=8)
    fig.suptitle(title, fontsize=10)
    return _save(fig, base)
