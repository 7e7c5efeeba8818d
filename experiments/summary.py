"""``summary.json`` of an experiment directory, computed from its files alone (so
``testbed experiment report DIR`` can redo it): per run its status, validity and reason, metric
values and read-backs; per level and metric the statistics of the VALID runs; comparisons of the
first level (the reference, A) against every other (B); the excluded runs with their reasons;
the runner's overhead and disk use.

A metric's per-run value is the metric itself when it is a number, or the median of its values
when the run has a list (``completion_ms``: one per timed request); runs without the metric are
left out of that metric's statistics.

Fields (schema 1): ``experiment factor levels metrics primary reps warmup order seed``;
``complete`` (every scheduled run finished); ``check_rule``, ``fidelity_rule`` (text);
``by_level[LABEL]``: ``n_runs n_valid n_excluded``, ``metrics[M]`` = ``{n, median, median_ci,
p10, p90, p99}``, ``verification`` (per read-back min/median/max or the distinct values),
``representative`` (run dir closest to the primary metric's median); ``comparisons``: list of
``{a, b, metric, ratio, ratio_ci, difference, difference_ci, paired_difference: {n_pairs,
median, ci}, mann_whitney: {u, p}, cliffs_delta, machines, not_compared}`` (a = first level); ``excluded``: ``{dir,
level, reason}``; ``fidelity_unverified`` (count), ``degraded_kept`` (dirs); ``overhead``: runs,
wall_s_per_run_median, kept_topology, structural_factors and scheduled_links (the factors and
the links with a schedule that rebuild the topology for every run, ``--keep-topology`` or not),
bringups, bringup_s_median, topology_s_per_run_median,
disk_mb_per_run_median, capture_cpu_s_total, capture_dropped_total; ``replacements``: the
repetition blocks the runner added for runs excluded because the machine stalled (``rep``,
``replaces``: their dirs; ``experiments.runner``); ``runs``: one record per
scheduled slot (index, level, rep, warmup, seed, dir, status, valid, reason, fidelity, metrics,
checks, wall_s, machine, attempts, lost_on, …); ``machines``: runs per machine; ``redone``: the runs
started more than once because a worker died under them (``dir attempts lost_on``).

A damaged run is excluded, never a reason to stop: one whose manifest or ``experiment.json`` cannot
be read has status ``damaged`` (and is left out of ``overhead`` and ``machines``); the reason,
``damaged: FILE…``, names the file.  (A run's metrics are its manifest's, computed when it ran:
its event logs are not read again here.)

The machine is a block (runs on many machines, experiments.cluster): a comparison uses only the
runs on machines where both arms have valid runs, pairs a repetition's arms only on one machine,
and when the arms never met on one machine it is not made (its numbers None, ``not_compared``
saying why); ``by_level[LABEL].by_machine`` holds each machine's medians (``{n, medians}``).
CIs are ``[low, high]`` or None (fewer than 2 values).
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np

from analysis import applog
from testbed.spec.errors import UsageError
from testbed.spec.factors import FACTORS
from testbed.spec.runresult import MANIFEST, load_run

from experiments import checks as ck
from experiments import stats
from experiments.definition import Experiment
from experiments.runner import RUN_INFO, experiment_manifest

SCHEMA = 1
SUMMARY = "summary.json"


def run_value(v):
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (list, tuple)):
        xs = [float(x) for x in v if x is not None]
        return float(np.median(xs)) if xs else None
    return float(v)


def _dir_mb(d: Path) -> float:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6


def _run_record(exp: Experiment, out: Path, slot: dict) -> dict:
    d = out / slot["dir"]
    rec = dict(slot)
    if not ((d / MANIFEST).is_file() and (d / RUN_INFO).is_file()):
        return {**rec, "status": "missing", "valid": False, "reason": "not run yet"}
    try:
        r, info = load_run(d), applog.read_object(d / RUN_INFO)
    except ValueError as exc:         # a manifest or run record cut short or overwritten
        return {**rec, "status": "damaged", "valid": False, "reason": _damaged(out, exc)}
    level, cross = exp.cell(slot["level"])
    fidelity = _block_fidelity(out, info) or r.fidelity
    reason = ck.fidelity_reason(r.status, r.error, fidelity, exp.accept_degraded)
    shown: dict = {}
    for f, value in zip(exp.factors(), (level, cross)):
        if exp.check == "none":
            break
        checks = {**r.checks, **ck.derived_readbacks(f, d)} if r.status == "complete" else r.checks
        if reason is None:
            reason = ck.manipulation_reason(f, value, checks)
        shown.update(_shown_checks(f, ck.check_for(f), checks))
    return {**rec, "status": r.status, "error": r.error, "valid": reason is None and not slot["warmup"],
            "reason": reason, "fidelity": fidelity.get("verdict", "unknown"),
            "verified": exp.check != "none",
            "metrics": {m: run_value(r.metrics.get(m)) for m in exp.metrics},
            "checks": shown,
            "wall_s": info.get("wall_s"), "setup_s": info.get("setup_s"),
            "topology_s": _topology_s(r.timings),
            "kept_topology": info.get("kept_topology", False),
            "machine": info.get("machine"), "attempts": info.get("attempts", 1),
            "lost_on": info.get("lost_on", []),
            "capture": r.capture,
            "disk_mb": info["disk_mb"] if "disk_mb" in info else round(_dir_mb(d), 3)}


def _damaged(out: Path, exc: ValueError) -> str:
    """The reason a run with a damaged file is left out: the reader's error, which names the file
    and where it is damaged, with paths relative to the experiment directory ``out``."""
    return f"damaged: {str(exc).replace(f'{out}{os.sep}', '')}"


def _block_fidelity(out: Path, info: dict) -> dict | None:
    """A run on a kept-up topology: the verdict on the emulator's summary of the whole
    repetition block (every run of the block shares it), else None."""
    d = info.get("topology_dir")
    path = out / d / "emulator" / "summary.json" if d else None
    if path is None or not path.is_file():
        return None
    from testbed.emulator import fidelity
    return {**fidelity.verdict(json.loads(path.read_text())), "scope": "repetition block"}


def _topology_s(timings: dict):
    """Seconds this run spent bringing its own topology up and tearing it down (None if kept up)."""
    if not timings or "bring_up_s" not in timings:
        return None
    return round(timings["bring_up_s"] + timings.get("teardown_s", 0.0), 4)


def _shown_checks(factor: str, check, checks: dict) -> dict:
    """The read-back the check used (the first of its ``needs`` present); of ``host_factors``
    only the factor's own value per host, of ``socket_readback`` only the factor's own values, of
    one with a verdict per step (``{"ok", "steps": [{"ok", ...}]}``) how many steps landed."""
    key = next((k for k in (check.needs if check else ()) if checks.get(k) is not None), None)
    if key is None:
        return {}
    value = checks[key]
    if key == "link":                 # the measured values, not the whole configured spec
        field = factor.split(".")[-1]
        keep = {"loss": ("loss", "loss_ci", "lost", "frames"), "delay": ("delay_ms",),
                "rate": ("rate_mbps", "rate_pairs")}.get(field, ())
        shown = {f"{value['link']} {k}": value.get(k) for k in keep if k in value}
        conf = (value.get("configured") or {}).get("loss" if field == "loss" else field)
        shown[f"{value['link']} {field} (configured)"] = conf.get("p") if isinstance(conf, dict) else conf
        return shown
    if isinstance(value, dict) and isinstance(value.get("steps"), list) and "ok" in value:
        steps = value["steps"]        # a read-back with its own verdict per step: the count landed
        return {key: f"{sum(bool(s.get('ok')) for s in steps)}/{len(steps)} steps landed"}
    if key in ("host_factors", "socket_readback"):
        name = factor.split(".", 1)[1]
        readback = FACTORS.get(name).readback
        value = ({h: v.get(readback) for h, v in sorted(value.items()) if isinstance(v, dict)}
                 if key == "host_factors" else value.get(readback))
        key = f"{name} (read back)"
    return {key: value}


def _verification(runs: list[dict]) -> dict:
    out = {}
    for k in dict.fromkeys(k for r in runs for k in r.get("checks", {})):
        vals = [r["checks"].get(k) for r in runs if r.get("checks", {}).get(k) is not None]
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if vals and len(nums) == len(vals):
            out[k] = {"min": min(nums), "median": float(np.median(nums)), "max": max(nums), "n": len(nums)}
        else:
            out[k] = {"values": sorted({json.dumps(v, sort_keys=True) for v in vals}), "n": len(vals)}
    return out


def _closest(runs: list[dict], metric: str, median) -> str | None:
    cands = [r for r in runs if r["valid"] and r["metrics"].get(metric) is not None]
    if not cands or median is None:
        return None
    return min(cands, key=lambda r: (abs(r["metrics"][metric] - median), r["index"]))["dir"]


def _by_machine(valid: list[dict], metrics) -> dict:
    """Per machine a level's valid runs ran on: ``{machine: {"n", "medians": {metric: median}}}``."""
    out = {}
    for mach in dict.fromkeys(str(r.get("machine")) for r in valid):
        mine = [r for r in valid if str(r.get("machine")) == mach]
        out[mach] = {"n": len(mine), "medians": {m: _med([r["metrics"].get(m) for r in mine]) for m in metrics}}
    return out


def _shared_machines(runs: list[dict], a: str, b: str) -> set:
    """The machines on which both arms have valid runs: the blocks the comparison may use."""
    on = [{r.get("machine") for r in runs if r["valid"] and r["level"] == lab} for lab in (a, b)]
    return on[0] & on[1]


def _apart(runs: list[dict], a: str, b: str) -> str:
    on = [sorted({str(r.get("machine")) for r in runs if r["valid"] and r["level"] == lab}) for lab in (a, b)]
    if not on[0] or not on[1]:
        return f"no valid runs of {a if not on[0] else b}"
    return (f"{a} ran only on {', '.join(on[0])} and {b} only on {', '.join(on[1])}: the machine would "
            "be the factor")


def _med(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def summarize(out: str | Path, accept_degraded: bool | None = None) -> dict:
    """The summary of the experiment directory ``out`` (module docstring); ``accept_degraded``
    overrides the definition's (False: the runs the emulator rated degraded left out, as a
    sensitivity check of a summary that kept them)."""
    out = Path(out)
    manifest = experiment_manifest(out)
    try:
        exp = Experiment.from_dict(manifest["definition"])
    except UsageError as exc:
        raise UsageError(f"{out / MANIFEST}: {exc}") from None
    if accept_degraded is not None:
        exp = dataclasses.replace(exp, accept_degraded=accept_degraded)
    check = ck.check_for(exp.factor)
    runs = [_run_record(exp, out, s) for s in manifest["schedule"]]
    main = [r for r in runs if not r["warmup"]]
    primary = exp.metrics[0]
    levels = {}
    for lab, value, cross in exp.cells:
        mine = [r for r in main if r["level"] == lab]
        valid = [r for r in mine if r["valid"]]
        mstats = {m: stats.describe([r["metrics"][m] for r in valid if r["metrics"].get(m) is not None],
                                    seed=exp.seed) for m in exp.metrics}
        levels[lab] = {"level": value, "cross": cross,
                       "n_runs": sum(r["status"] != "missing" for r in mine), "n_valid": len(valid),
                       "n_excluded": sum(r["status"] != "missing" and not r["valid"] for r in mine),
                       "metrics": mstats,
                       "verification": _verification([r for r in mine if r["status"] == "complete"]),
                       "representative": _closest(valid, primary, mstats[primary]["median"]),
                       "by_machine": _by_machine(valid, exp.metrics)}
    comparisons = []
    groups = [[lab for lab, _, c in exp.cells if c == cross] for cross in (exp.cross_levels or (None,))]
    for ref, other in ((g[0], o) for g in groups for o in g[1:]):
        for m in exp.metrics:
            def vals(lab, runs, m=m):
                return [r["metrics"][m] for r in runs if r["level"] == lab and r["valid"]
                        and r["metrics"].get(m) is not None]
            shared = _shared_machines(main, ref, other)
            on = [r for r in main if r.get("machine") in shared]
            by_rep = {}
            for r in on:
                if r["valid"] and r["metrics"].get(m) is not None and r["level"] in (ref, other):
                    by_rep.setdefault((str(r.get("machine")), r["rep"]), {})[r["level"]] = r["metrics"][m]
            pairs = [(p[ref], p[other]) for _, p in sorted(by_rep.items()) if len(p) == 2]
            comparisons.append({"a": ref, "b": other, "metric": m,
                                **stats.compare(vals(ref, on), vals(other, on), pairs, seed=exp.seed),
                                "machines": sorted(map(str, shared)),
                                "not_compared": None if shared else _apart(main, ref, other)})
    done = [r for r in runs if r["status"] not in ("missing", "damaged")]     # the runs read
    walls = [r["wall_s"] for r in done if r.get("wall_s") is not None]
    setups = list({(r["warmup"], r["rep"]): r["setup_s"] for r in done if r.get("setup_s") is not None}.values())
    summary = {
        "schema": SCHEMA, "experiment": exp.name, "factor": exp.factor,
        "levels": list(exp.labels), "metrics": list(exp.metrics), "primary": primary,
        "reps": exp.reps, "warmup": exp.warmup, "order": exp.order, "seed": exp.seed,
        "complete": all(r["status"] != "missing" for r in runs),
        "replacements": manifest.get("replacements", []),
        "factor_levels": [str(v) for v in exp.levels],
        "cross": exp.cross["factor"] if exp.cross else None,
        "cross_levels": list(exp.cross_levels),
        "check": exp.check,
        "check_rule": ("none (check = \"none\"): the factor's effect was not verified" if exp.check == "none"
                       else check.rule if check else None),
        "cross_check_rule": (ck.check_for(exp.cross["factor"]).rule if exp.cross and exp.check != "none"
                             and ck.check_for(exp.cross["factor"]) else None),
        "fidelity_rule": ck.FIDELITY_RULE,
        "min_n_ci": stats.MIN_N_CI,
        "models": [dict(m) for m in exp.models], "log_x": exp.log_x, "base": dict(exp.base),
        "growth": manifest.get("growth", []),
        "by_level": levels, "comparisons": comparisons,
        "excluded": [{"dir": r["dir"], "level": r["level"], "reason": r["reason"]}
                     for r in main if r["status"] != "missing" and not r["valid"]],
        "fidelity_unverified": sum(r.get("fidelity") == "unknown" for r in main if r["valid"]),
        "unverified": [r["dir"] for r in main if r["valid"] and not r.get("verified", True)],
        "degraded_kept": [r["dir"] for r in main if r["valid"] and r.get("fidelity") == "degraded"],
        "overhead": {"runs": len(done), "wall_s_per_run_median": float(np.median(walls)) if walls else None,
                     "kept_topology": any(r.get("kept_topology") for r in done),
                     "structural_factors": list(exp.structural_factors()),
                     "scheduled_links": manifest.get("scheduled_links", []),
                     "bringups": len(setups), "bringup_s_median": float(np.median(setups)) if setups else None,
                     "topology_s_per_run_median": _med([r.get("topology_s") for r in done]),
                     "disk_mb_per_run_median": float(np.median([r["disk_mb"] for r in done])) if done else None,
                     "capture_cpu_s_total": sum(float((r.get("capture") or {}).get("cpu_s", 0) or 0) for r in done),
                     "capture_dropped_total": sum(int((r.get("capture") or {}).get("dropped_by_kernel", 0) or 0)
                                                  for r in done)},
        "machines": {str(k): sum(str(r.get("machine")) == str(k) for r in done)
                     for k in dict.fromkeys(r.get("machine") for r in done)},
        "redone": [{"dir": r["dir"], "attempts": r["attempts"], "lost_on": r["lost_on"]}
                   for r in done if (r.get("attempts") or 1) > 1],
        "runs": runs,
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return summary
