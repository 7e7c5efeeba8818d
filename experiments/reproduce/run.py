"""``testbed reproduce``'s engine: evaluate each row's model, run the experiments the rows need
(once per experiment and ``sets``), read their ``summary.json``, and compose the result rows.

The measurement hook is :func:`measure_all`: it takes the rows and an ``executor`` (default
``testbed.run.execute.execute``) and returns, per experiment key, the experiment directory and its
summary (``experiments.summary``), or the one-line reason it could not run; the C5 path rows
run ``testbed calibrate`` (:func:`calibrate`).  A row's measured value is read from those files
by :func:`measured_value` / :func:`_calibrated` — nothing else feeds the column.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Callable

import numpy as np

from experiments.reproduce.cases import (AGENT_ROUNDS, CALIBRATE, CALIBRATE_SECONDS, DEFAULT_RUN_SECONDS,
                                         FULL_REPS, PLACEMENT_ROUNDS, QUICK_REPS, QUICK_REPS_NO_RANDOM, QUICK_SETS,
                                         REPLACE_BLOCKS, REPORT_SECONDS, RUN_SECONDS, Measure, Row, within)
from experiments.stats import MIN_N_CI, run_bootstrap_ci
from testbed.calibrate.link import RATE_TOL, delivered_at_rate

log = logging.getLogger(__name__)


def cpu_times() -> list[int]:
    """/proc/stat's aggregate cpu line: user nice system idle iowait irq softirq steal ..."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def cpu_shares(before: list[int], after: list[int]) -> tuple[float, float] | None:
    """(busy, steal): fractions of all cores' time between two ``cpu_times()`` samples that were
    not idle (idle and iowait excluded) and that the hypervisor stole; None when they are less
    than one second of CPU time apart (a few clock ticks, e.g. a --model-only run's, tell nothing)."""
    d = [b - a for a, b in zip(before, after)]
    total = sum(d[:8])
    return (1 - (d[3] + d[4]) / total, d[7] / total) if total >= os.sysconf("SC_CLK_TCK") else None


def describe_cpu(shares: tuple[float, float] | None) -> str:
    return (f"CPU busy {shares[0]:.0%}, steal {shares[1]:.1%}" if shares else
            "CPU busy and steal not measured (under a second of CPU time)")


def host_load(before: tuple[tuple, list[int]], after: tuple[tuple, list[int]]) -> dict:
    """The host between two ``(os.getloadavg(), cpu_times())`` samples: 1-min load at both ends,
    CPU busy and steal fractions of all cores (``cpu_shares``; None if unmeasured), and
    ``busy``: the load exceeded 1.5 × the cores or steal was ≥ 5 % (a run's own emulator, apps
    and captures keep ~1–2 runnable; beyond that, other work competed with them)."""
    shares = cpu_shares(before[1], after[1])
    busy_frac, steal = shares or (None, None)
    cores = os.cpu_count() or 1
    return {"load": [round(before[0][0], 2), round(after[0][0], 2)], "cores": cores,
            "cpu_busy": None if shares is None else round(busy_frac, 3),
            "steal": None if shares is None else round(steal, 4),
            "busy": max(before[0][0], after[0][0]) > 1.5 * cores or (steal or 0) >= 0.05}


def host_sample() -> tuple[tuple, list[int]]:
    return os.getloadavg(), cpu_times()


def describe_load(h: dict) -> str:
    shares = None if h["cpu_busy"] is None else (h["cpu_busy"], h["steal"])
    return f"host load {h['load'][0]:.2f} -> {h['load'][1]:.2f} on {h['cores']} cores, {describe_cpu(shares)}"


def experiment_for(measure: Measure, levels: set[str], reps: int | None, quick: bool, backend: str | None):
    """The Experiment a measure runs: its definition, only the levels the rows read, the row's
    RunSpec ``sets`` (and --backend; with ``quick`` also the experiment's QUICK_SETS) and ``reps``
    repetitions (None: FULL_REPS, or with ``quick`` QUICK_REPS, QUICK_REPS_NO_RANDOM where no
    arm draws at random)."""
    from experiments.definition import load_definition
    exp = load_definition(measure.experiment)
    keep = [lab for lab in exp.labels if lab in levels] or None
    sets = {**(QUICK_SETS.get(measure.experiment, {}) if quick else {}), **measure.sets}
    if backend:
        sets["backend"] = backend
    exp = exp.with_overrides(levels=keep, sets=sets)
    if not quick:
        return exp.replace(reps=reps or FULL_REPS)
    return exp.replace(reps=reps or (QUICK_REPS if exp.draws_at_random() else QUICK_REPS_NO_RANDOM),
                       warmup=0)


def _dirname(measure: Measure) -> str:
    if not measure.sets:
        return measure.experiment
    digest = hashlib.sha1(json.dumps(sorted(measure.sets.items())).encode()).hexdigest()[:6]
    return f"{measure.experiment}-{digest}"


def wanted_measures(rows: list[Row], quick: bool) -> dict[tuple, tuple[Measure, set]]:
    """The experiments the rows need, once each: ``{measure key: (measure, levels read)}``
    (``--quick`` leaves out the full-only measures)."""
    wanted: dict[tuple, tuple[Measure, set]] = {}
    for row in rows:
        m = row.measure
        if m is None or (quick and m.full_only):
            continue
        for need in (m, m.per) if m.per else (m,):
            wanted.setdefault(need.key, (need, set()))[1].update(need.levels or (need.level,))
    return wanted


def estimate(rows: list[Row], quick: bool, reps: int | None = None) -> dict:
    """What measuring ``rows`` would run and take: ``{"experiments", "runs", "seconds"}``, runs =
    arms x (reps + warm-up) per experiment, seconds = runs x ``RUN_SECONDS`` of its experiment
    (measured per run; see there) plus ``CALIBRATE_SECONDS`` for a calibration and
    ``REPORT_SECONDS`` per case measured (its figures)."""
    runs = experiments = 0
    seconds = REPORT_SECONDS * len({r.case for r in rows if r.measure and not (quick and r.measure.full_only)})
    for m, levels in wanted_measures(rows, quick).values():
        experiments += 1
        if m.experiment == CALIBRATE:
            seconds += CALIBRATE_SECONDS
            continue
        exp = experiment_for(m, levels, reps, quick, None)
        n = len(exp.labels) * (exp.reps + exp.warmup)
        per_run = RUN_SECONDS.get(m.experiment, (DEFAULT_RUN_SECONDS, DEFAULT_RUN_SECONDS))
        runs += n
        seconds += n * per_run[0 if quick else 1]
    return {"experiments": experiments, "runs": runs, "seconds": seconds}


def measure_all(rows: list[Row], out: Path, *, quick: bool, reps: int | None = None,
                backend: str | None = None, executor: Callable | None = None,
                keep_topology: bool = False, progress: Callable = lambda msg: None, where=None) -> dict:
    """Run every experiment the rows need; ``{key: {"dir", "summary"} | {"error"}}``.
    ``keep_topology``: one topology bring-up per repetition block; ``where``: the executor of the
    runs (experiments.runner; in-process by default, an entered Dask cluster with ``--cluster``).
    The calibration rows (C5) are measured here, on the coordinator, whatever ``where`` is."""
    from experiments.report import write_all
    from experiments.runner import run_experiment, topology_keeper
    results = {}
    for key, (m, levels) in wanted_measures(rows, quick).items():
        d = out / "experiments" / _dirname(m)
        if m.experiment == CALIBRATE:
            progress(f"testbed calibrate (long-haul path) -> {d}")
            results[key] = calibrate(d, backend)
            continue
        try:
            exp = experiment_for(m, levels, reps, quick, backend)   # run_experiment validates it
            progress(f"experiment {exp.name} ({', '.join(exp.labels)}) x {exp.reps} -> {d}")
            why = exp.rebuilt_why() if keep_topology else ""
            if why:
                log.warning("%s: --keep-topology ignored: the topology is rebuilt for every run, as %s",
                            exp.name, why)
            resumed = (d / "manifest.json").is_file()
            h0 = host_sample()
            run_experiment(exp, d, executor=executor, quiet=True, where=where, replace=REPLACE_BLOCKS,
                           keep_up=topology_keeper(d) if keep_topology else None, resume=resumed)
            host = d / "host.json"          # written by the invocation that ran the experiment
            if not resumed:
                host.write_text(json.dumps(host_load(h0, host_sample())))
            results[key] = {"dir": str(d), "summary": write_all(d, plots=False), "resumed": resumed,
                            "single_quick_rep": quick and reps is None and exp.reps == QUICK_REPS_NO_RANDOM,
                            "host": json.loads(host.read_text()) if host.is_file() else None}
        except Exception as exc:   # setup/run errors, a missing executor: one line per row, go on
            first = str(exc).splitlines()[0] if str(exc) else ""
            results[key] = {"error": f"{type(exc).__name__}: {first}"}
    return results


def calibrate(d: Path, backend: str | None) -> dict:
    """``testbed calibrate --json`` on its default (the long-haul path), in a child process:
    ``{"dir", "calibrate": its JSON}`` or ``{"error"}`` (exit 1 with its JSON is a measurement
    one of whose checks failed: its values are still the path's); an existing
    ``calibrate.json`` in ``d`` is reused (like finished experiment runs)."""
    import subprocess
    import sys
    if (d / "calibrate.json").is_file():            # resumed report directory: measured already
        return {"dir": str(d), "calibrate": json.loads((d / "calibrate.json").read_text()),
                "resumed": True}
    d.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "testbed", "calibrate", "--json", "--results", str(d)]
    if backend:
        argv += ["--backend", backend]
    proc = subprocess.run(argv, capture_output=True, text=True)
    (d / "calibrate.stderr").write_text(proc.stderr)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():   # 1: measured, a check failed
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"testbed calibrate exited {proc.returncode}: {last}"}
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        return {"error": f"testbed calibrate exited {proc.returncode} without its JSON result"}
    (d / "calibrate.json").write_text(proc.stdout)
    return {"dir": str(d), "calibrate": out}


def _calibrated(res: dict, m: Measure) -> tuple[float | None, list | None, int, str]:
    """A value of calibrate's ``measured`` section by dotted path (``rtt_ms.min``, ``loss.down``,
    ``overflow.loss``); n = probes echoed (RTT), probes sent (loss) or the overflow train's
    datagrams in its window.  The overflow train ran in a topology of its own: a value of it is
    not used when the link did not deliver the train at its rate (``delivered_at_rate``, any
    backend) or its run's link fidelity verdict is not ok (the userspace emulator's; other
    backends give none); the reason says why."""
    meas = res["calibrate"].get("measured", {})
    v = _dotted(meas, m.metric)
    if m.metric.startswith("loss."):
        n = (meas.get("loss_sent") or {}).get(m.metric.split(".")[1], 0)
    elif m.metric.startswith("overflow."):
        train = meas.get("overflow") or {}
        n, f = train.get("window", 0), train.get("fidelity")
        if v is not None and not delivered_at_rate(train):
            return None, None, 0, (f"the link delivered the overflow train at "
                                   f"{train.get('delivered_mbps') or 0:.1f} Mbit/s, not its "
                                   f"{train['rate_mbps']:g} (±{RATE_TOL:.0%}), so its loss is not used")
        if v is not None and f is not None and f.get("verdict") != "ok":
            why = "; ".join(f.get("reasons") or []) or "no emulator summary"
            return None, None, 0, (f"the overflow run's link fidelity is {f.get('verdict', 'unknown')}"
                                   f" ({why}), so its loss is not used")
    else:
        n = (meas.get("rtt_ms") or {}).get("echoed", 0)
    if v is None:
        return None, None, 0, f"calibrate reported no {m.metric}"
    return float(v) * m.scale, None, int(n or 0), ""


def _dotted(d: dict, path: str):
    """``d``'s value at a dotted path (``overflow.drops.queue``), None where it has none."""
    for part in path.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _calibrated_evidence(row: Row, res: dict) -> list[str]:
    """Numbers of the same calibration quoted for a miss: each ``explain`` entry's dotted path
    in calibrate's ``measured`` section, where it has a value."""
    meas = res["calibrate"].get("measured", {})
    return [f"{label} {v:.4g}" if isinstance(v, float) else f"{label} {v}"
            for metric, label in row.explain if (v := _dotted(meas, metric)) is not None]


def _level_stat(summary: dict, level: str, m: Measure) -> dict | None:
    lev = summary.get("by_level", {}).get(level)
    if lev is None:
        return None
    return lev.get("metrics", {}).get(m.metric)


def _transport(run) -> list[dict]:
    """The udpreq run's request connections (``analysis.fec``: one per request), in time order."""
    return sorted(run.checks.get("transport_connections") or [], key=lambda c: c["first_ns"])


def _tunnel_retransmissions(run) -> list[int]:
    """Segments sent again on the relay's gateway-to-gateway connection (``testbed.run.execute``'s
    tunnel port), both directions, from the server gateway's captures (``analysis.tcpsender``)."""
    from analysis import report
    from testbed.run.execute import TUNNEL_PORT
    sgw = (run.spec.params.get("relay_hosts") or "cgw,sgw").split(",")[1]
    total = 0
    for pcap in sorted((Path(run.dir) / "pcap").glob(f"{sgw}-*.pcap")):
        res = report.analyze_file(pcap, keep=True)
        for rec, obj in zip(res["flows"], res["_objects"]["flows"]):
            if rec["proto"] == "tcp" and obj["flow"].key.server_port == TUNNEL_PORT:
                total += sum(len(d.tracker.retransmissions) for d in obj["directions"].values())
    return [total]


def _agent_total(run, rounds: int) -> list[float]:
    """An agent run's whole time scaled to ``rounds`` rounds (``DERIVED``)."""
    m = run.metrics
    whole = m.get("round_s")
    if not whole:
        return []
    rest = whole[1:] or whole
    return [m["setup_s"] + whole[0] + (rounds - 1) * sum(rest) / len(rest) + m.get("disconnect_s", 0)
            + sum(m.get("redo_s", ()))]


#: Per-run values computed from a run's read-backs (a Measure or explain metric by name), each a list:
#: ``arq_rounds``: per udpreq request, transmission rounds (1 + the highest round number);
#: ``arq_round_ms``: per request with retransmissions, the span of its symbol packets on the
#: client's wire (first to last sent) ÷ its retransmission rounds — one RTT each when ideal;
#: ``symbol_span_ms``: per request, first to last symbol packet of its first transmission (round
#: 0: the k source and, with FEC, the r repair symbols sent with them — not symbols sent later,
#: e.g. repair replenished while the ACK travels): the time to send k + r symbols;
#: ``first_round_lost``: per request, source symbols sent in round 1 — its first-transmission
#: losses as the ARQ sender found them (a tail probe, if any, counts too);
#: ``first_round_repair``: per request, repair symbols of round 0 (the sender's r);
#: ``tunnel_retransmissions``: per relay run, segments sent again on the gateways' tunnel;
#: ``agent_total_30`` (C12, C13), ``agent_total_20`` (C14): per agent run, the whole run scaled to
#: the chapter's 30 or 20 rounds: its ``setup_s`` + its first whole round (a kept connection's
#: first upload also pays its first slow start, once) + (N − 1) × the mean of the other whole
#: rounds ``round_s`` + after a disconnect its ``disconnect_s`` and redone rounds ``redo_s``
#: (= ``total_s`` when it ran N).
DERIVED = {
    "arq_rounds": lambda run: [c["rounds"] + 1 for c in _transport(run)],
    "arq_round_ms": lambda run: [(c["last_ns"] - c["first_ns"]) / 1e6 / c["rounds"]
                                 for c in _transport(run) if c["rounds"]],
    "symbol_span_ms": lambda run: [(c["round0_last_ns"] - c["first_ns"]) / 1e6
                                   for c in _transport(run)],
    "first_round_lost": lambda run: [c["round1_source"] for c in _transport(run)],
    "first_round_repair": lambda run: [c["round0_repair"] for c in _transport(run)],
    "tunnel_retransmissions": _tunnel_retransmissions,
    "agent_total_30": lambda run: _agent_total(run, AGENT_ROUNDS),
    "agent_total_20": lambda run: _agent_total(run, PLACEMENT_ROUNDS),
}


def pooled_runs(exp_dir: str | Path, summary: dict, level: str, metric: str,
                source: str = "metrics", runs: int | None = None) -> list[list[float]]:
    """Every value of ``metric`` (each element of a list) in each of the level's valid runs, in
    run order, the first ``runs`` runs if given; a :data:`DERIVED` name is computed from each
    run's read-backs."""
    from testbed.spec.runresult import load_run
    out = []
    used = [rec for rec in summary.get("runs", []) if rec.get("valid") and rec.get("level") == level]
    for rec in sorted(used, key=lambda rec: rec["dir"])[:runs]:
        run = load_run(Path(exp_dir) / rec["dir"])
        if metric in DERIVED:
            out.append([float(x) for x in DERIVED[metric](run)])
            continue
        v = (run.checks if source == "checks" else run.metrics).get(metric)
        out.append([float(x) for x in (v if isinstance(v, list) else [v]) if x is not None])
    return out


def pooled_values(exp_dir: str | Path, summary: dict, level: str, metric: str,
                  source: str = "metrics", runs: int | None = None) -> list[float]:
    """The values of :func:`pooled_runs`, one list."""
    return [x for values in pooled_runs(exp_dir, summary, level, metric, source, runs) for x in values]


#: what a pooled row's n and CI are (a row's note says it)
POOLED_N = (f"n: values pooled over the level's valid runs (e.g. one per request); the CI resamples "
            f"whole runs and needs {MIN_N_CI} of them")
#: the fewest values a pooled 99th percentile is read from (one 1-in-100 event expected)
P99_MIN_VALUES = 100
#: the statistic of a pooled row, over NaN-padded resamples too (experiments.stats.run_bootstrap_ci)
POOLED_STATISTIC = {
    "pooled_mean": lambda a, axis=-1: np.nanmean(a, axis=axis),
    "pooled_median": lambda a, axis=-1: np.nanmedian(a, axis=axis),
    "pooled_p99": lambda a, axis=-1: np.nanpercentile(a, 99, axis=axis),
    "pooled_max": lambda a, axis=-1: np.nanmax(a, axis=axis),
}


def _nan_ratio(a, b, axis=-1):
    return np.nanmedian(a, axis=axis) / np.nanmedian(b, axis=axis)


def pooled(exp_dir: str | Path, summary: dict, m: Measure) -> tuple[float | None, list | None, int, str]:
    """``pooled_mean`` / ``pooled_p99`` / ``pooled_median`` / ``pooled_max``: every value of a metric (or, with
    ``source="checks"``, a read-back) over the level's valid runs — each element of a list
    (``completion_ms``: one per request) — read from the runs' manifests; CI: bootstrap 95 % over
    runs (``experiments.stats.run_bootstrap_ci``: whole runs resampled; seed 1), none from fewer
    than ``experiments.stats.MIN_N_CI`` runs (as an experiment's own statistics).  n = number of
    values.  A p99 of fewer than ``P99_MIN_VALUES`` values is not measured: below 100 values the
    99th percentile is the largest value or an interpolation toward it, not a 1-in-100 event."""
    runs = pooled_runs(exp_dir, summary, m.level, m.metric, m.source, m.runs)
    values = [x for r in runs for x in r]
    if not values:
        what = "read-back" if m.source == "checks" else "metric"
        return None, None, 0, (f"no valid run of level {m.level} has the {what} {m.metric} "
                               f"({_excluded(summary, m.level)})")
    if m.statistic == "pooled_p99" and len(values) < P99_MIN_VALUES:
        return None, None, len(values), (f"a 99th percentile needs {P99_MIN_VALUES} values, the runs have "
                                         f"{len(values)} (the largest is {max(values) * m.scale:.4g}); "
                                         "a full run's repetitions give more")
    stat = POOLED_STATISTIC[m.statistic]
    ci = run_bootstrap_ci((runs,), stat, seed=1)
    return (float(stat(np.asarray(values))) * m.scale, ci and [c * m.scale for c in ci],
            len(values), "")


def pooled_ratio(exp_dir: str | Path, summary: dict, m: Measure
                 ) -> tuple[float | None, list | None, int, str]:
    """``pooled_ratio``: median of every value of level a over median of every value of level b
    (``levels`` = (a, b)), the same pooled medians the rows of each level show; CI: bootstrap
    95 % over runs, each level's resampled independently (``experiments.stats.run_bootstrap_ci``,
    seed 1; none from fewer than ``MIN_N_CI`` runs a level).  n = the smaller number of values."""
    runs = [pooled_runs(exp_dir, summary, lv, m.metric, m.source) for lv in m.levels]
    xs = [np.asarray([x for r in level for x in r]) for level in runs]
    if not all(len(x) for x in xs):
        (a, b) = m.levels
        return None, None, 0, f"no valid runs to compare ({_excluded(summary, a)}; {_excluded(summary, b)})"
    ci = run_bootstrap_ci(tuple(runs), _nan_ratio, seed=1)
    return float(np.median(xs[0]) / np.median(xs[1])), ci, min(map(len, xs)), ""


def measured_value(summary: dict, m: Measure, exp_dir: str | Path | None = None
                   ) -> tuple[float | None, list | None, int, str]:
    """(value, ci95, n, reason if None) of a measure in an experiment summary, in the row's unit."""
    def scaled(x):
        return None if x is None else x * m.scale
    if m.statistic == "pooled_ratio":
        return pooled_ratio(exp_dir, summary, m)
    if m.statistic.startswith("pooled_"):
        return pooled(exp_dir, summary, m)
    if m.statistic == "median":
        st = _level_stat(summary, m.level, m)
        if not st or not st.get("n") or st.get("median") is None:
            return None, None, 0, f"no valid run of level {m.level} ({_excluded(summary, m.level)})"
        ci = st.get("median_ci")
        return scaled(st["median"]), [scaled(c) for c in ci] if ci else None, st["n"], ""
    a, b = m.levels
    for comp in summary.get("comparisons", []):
        if comp["a"] == a and comp["b"] == b and comp["metric"] == m.metric:
            value, ci = comp.get(m.statistic), comp.get(f"{m.statistic}_ci")
            na = (_level_stat(summary, a, m) or {}).get("n", 0)
            nb = (_level_stat(summary, b, m) or {}).get("n", 0)
            if value is None:
                return None, None, 0, f"no valid runs to compare ({_excluded(summary, a)}; {_excluded(summary, b)})"
            s = m.scale if m.statistic == "difference" else 1.0
            return value * s, [c * s for c in ci] if ci else None, min(na, nb), ""
    return None, None, 0, f"summary has no {a}/{b} comparison of {m.metric}"


def break_even(cost: float, cost_ci: list | None, n: int, res: dict | None, per: Measure
               ) -> tuple[float | None, list | None, int, str]:
    """``Measure.per``: the first round N with N·Δ > ``cost``, floor(cost/Δ) + 1, Δ measured by
    ``per`` in ``res`` (its experiment's result); CI: the same at the ends of the two CIs
    (smallest cost over largest Δ, and the reverse); n: the smaller n."""
    if res is None or "error" in res:
        return None, None, 0, f"the per-round measure's experiment {per.experiment} " + (
            f"failed: {res['error']}" if res else "was not run")
    delta, dci, dn, why = measured_value(res["summary"], per, res["dir"])
    if delta is None or delta <= 0:
        return None, None, 0, why or f"the measured per-round saving {delta:.3g} s is not positive"
    ci = None
    if cost_ci and dci and min(dci) > 0:
        ci = [math.floor(cost_ci[0] / dci[1]) + 1, math.floor(cost_ci[1] / dci[0]) + 1]
    return math.floor(cost / delta) + 1, ci, min(n, dn), ""


def _replaced(summary: dict) -> str:
    """The repetition blocks its experiment added for runs excluded for the machine, "" if none."""
    reps = summary.get("replacements") or []
    if not reps:
        return ""
    gone = [d for r in reps for d in r["replaces"]]
    return (f"{len(reps)} repetition block(s) added to replace {len(gone)} run(s) excluded because the "
            f"machine stalled ({', '.join(gone)})")


def _excluded(summary: dict, level: str) -> str:
    reasons = [e["reason"] for e in summary.get("excluded", []) if e.get("level") == level and e.get("reason")]
    return f"excluded: {reasons[0]}" if reasons else "no runs"


def _evidence(row: Row, summary: dict, exp_dir: str | Path | None = None) -> list[str]:
    """Numbers of the same runs quoted for a miss: the summary's median of each ``explain``
    metric per level, or — for a metric the experiment does not summarize — the median of every
    value of it in the level's valid runs' manifests (each element of a list)."""
    import statistics
    m = row.measure
    levels = m.levels or (m.level,)
    out = []
    for metric, label in row.explain:
        for level in levels:
            st = (summary.get("by_level", {}).get(level, {}).get("metrics", {}) or {}).get(metric)
            if st and st.get("median") is not None:
                out.append(f"{label} {st['median']:.4g} (median of {st['n']}, {level})")
            elif exp_dir is not None:
                vals = pooled_values(exp_dir, summary, level, metric)
                if vals:
                    out.append(f"{label} {statistics.median(vals):.4g} (median of {len(vals)} values "
                               f"in the runs, {level}; range {min(vals):.4g}–{max(vals):.4g})")
    return out


def without_degraded(row: Row, res: dict, strict: dict) -> tuple[int, bool | None, str]:
    """How a measured row depends on the runs the link fidelity check rated ``degraded`` (kept by
    the fidelity rule: timing error the machine caused, each manifest names it): (how many of the
    runs its measure used were, whether the row is within tolerance without them — None without
    a value —, a note: "" when it used none).  ``strict`` caches per experiment directory its
    summary with them left out (``summarize(dir, accept_degraded=False)``)."""
    from experiments.summary import summarize
    m = row.measure
    levels = m.levels or (m.level,)
    used = [r for r in res["summary"].get("runs", []) if r.get("valid") and r.get("level") in levels]
    k = sum(r.get("fidelity") == "degraded" for r in used)
    if not k:
        return 0, None, ""
    if res["dir"] not in strict:
        strict[res["dir"]] = summarize(res["dir"], accept_degraded=False)
    value, _, n, why = measured_value(strict[res["dir"]], m, res["dir"])
    head = f"{k} of the {len(used)} runs used were rated degraded by the link fidelity check (kept)"
    if value is None:
        return k, None, f"{head}; without them no value ({why})"
    ok = within(value, row.chapter, row.tolerance)
    return k, ok, f"{head}; without them {value:.4g} (n={n}), {'within' if ok else 'outside'} tolerance"


def result_rows(rows: list[Row], measured: dict | None, quick: bool, skipped: str | None = None) -> list[dict]:
    """One result dict per row (the table's columns plus how each value was obtained);
    ``measured`` None: no experiment ran (``skipped`` says why).  A row whose runs include ones
    the link fidelity check rated degraded also has ``degraded_runs`` and ``ok_without_degraded``
    (``without_degraded``)."""
    out, strict = [], {}
    for row in rows:
        model = row.model.value() if row.model else None
        rec = {"id": row.id, "case": row.case, "quantity": row.quantity, "unit": row.unit,
               "chapter": row.chapter, "model": model, "measured": None, "ci95": None, "n": 0,
               "tolerance": row.tolerance if row.measure else None, "ok": None, "note": "",
               "experiment_dir": None, "model_call": row.model.describe() if row.model else None,
               "measure": _describe(row.measure), "miss": None}
        notes = []
        m = row.measure
        if m is None:
            notes.append(row.unmeasured)
        elif quick and m.full_only:
            notes.append("not measured with --quick (full run only)")
        elif measured is None:
            notes.append(f"not measured in this run: {skipped or 'measurement skipped'}")
        else:
            res = measured.get(m.key)
            if res is None:
                notes.append("not measured in this run: its experiment was not run")
            elif "error" in res:
                notes.append(f"not measured: the experiment failed: {res['error']}")
            else:
                rec["experiment_dir"] = res["dir"]
                rec["host"] = res.get("host")
                value, ci, n, why = (_calibrated(res, m) if "calibrate" in res
                                     else measured_value(res["summary"], m, res["dir"]))
                if m.per is not None and value is not None:
                    value, ci, n, why = break_even(value, ci, n, measured.get(m.per.key), m.per)
                rec.update(measured=value, ci95=ci, n=n)
                if value is None:
                    notes.append(f"not measured: {why}")
                else:
                    rec["ok"] = within(value, row.chapter, row.tolerance)
                    if not rec["ok"]:
                        ev = (_evidence(row, res["summary"], res["dir"]) if "summary" in res
                              else _calibrated_evidence(row, res))
                        cause = (row.cause_low if value < row.chapter and row.cause_low
                                 else row.cause) or "unexplained"
                        h = res.get("host")
                        rec["miss"] = short_cause(cause)
                        if model is not None and math.isfinite(model) and model != row.chapter \
                                and within(value, model, row.tolerance):
                            cause += f" (the measured value is within tolerance of the model's {model:g})"
                            rec["miss"] += "; within tolerance of the model"
                        if h and h["busy"]:
                            rec["miss"] += " [MACHINE BUSY]"
                        if h:
                            ev.append(("MACHINE BUSY during its experiment: " if h["busy"] else
                                       "during its experiment: ") + describe_load(h))
                        notes.append(f"miss: {cause}" + (f"; evidence: {'; '.join(ev)}" if ev else ""))
                    if "summary" in res and m.per is None:
                        k, ok, note = without_degraded(row, res, strict)
                        if k:
                            rec.update(degraded_runs=k, ok_without_degraded=ok)
                            notes.append(note)
        if rec["experiment_dir"] and measured[m.key].get("single_quick_rep"):
            notes.append(f"--quick: {QUICK_REPS_NO_RANDOM} run per arm (its topology draws nothing "
                         "at random: no random loss, jitter or backoff)")
        if rec["experiment_dir"] and "summary" in measured[m.key]:
            notes.append(_replaced(measured[m.key]["summary"]))
        if rec["n"] and m.statistic.startswith("pooled_"):
            notes.append(POOLED_N)
        if rec["experiment_dir"] and quick and m.experiment in QUICK_SETS:
            notes.append("--quick: " + ", ".join(f"{k}={v}" for k, v in QUICK_SETS[m.experiment].items()))
        if row.note:
            notes.append(row.note)
        if model is not None and math.isfinite(model) and row.chapter and \
                abs(model - row.chapter) > 0.05 * abs(row.chapter) and not row.note:
            notes.append(f"model differs from the chapter by {model / row.chapter - 1:+.0%}")
        rec["note"] = "; ".join(n for n in notes if n)
        out.append(rec)
    return out


def short_cause(cause: str, limit: int = 90) -> str:
    """The head of a miss's cause for a one-line summary: up to the first parenthesis, colon or
    semicolon, at most ``limit`` characters (the full cause is the row's ``note``)."""
    head = cause
    for sep in (" (", ": ", "; "):
        i = head.find(sep)
        if i > 20:
            head = head[:i]
    return head if len(head) <= limit else head[:limit - 1].rstrip() + "…"


def _describe(m: Measure | None) -> dict | None:
    if m is None:
        return None
    return {"experiment": m.experiment, "level": m.level, "levels": list(m.levels), "metric": m.metric,
            "statistic": m.statistic, "sets": dict(m.sets), "source": m.source, "scale": m.scale,
            "full_only": m.full_only, "runs": m.runs}


def can_measure() -> str | None:
    """None when packets can be measured here, else the reason."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    try:
        import testbed.run.execute  # noqa: F401
    except ImportError as exc:
        return f"testbed.run.execute is not available ({exc})"
    return None
