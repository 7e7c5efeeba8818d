"""``report.md``, ``report.html`` (self-contained: setup, figures embedded), the tidy
``results.csv`` (:mod:`experiments.results`) and the terminal summary of an experiment,
rendered from ``summary.json`` and the manifests; :func:`write_all` (summary → plots → reports →
pcap pruning) is what ``run`` and ``report`` call."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from analysis.page import Page
from analysis.runcheck import PRUNED
from testbed.spec.runresult import load_run, read_manifest
from testbed.spec.units import counted

from experiments.definition import rebuilt_why
from experiments.runner import _write_json, experiment_manifest
from experiments.summary import summarize

REPORT = "report.md"
HTML = "report.html"
#: seconds a run costs beyond its workload's nominal time (topology bring-up and teardown, host
#: factors, app start, capture drain, metrics), for `experiment show`'s estimate: wall-clock minus
#: the nominal duration of 29 userspace-backend runs on a busy 2-core machine (bulk 2-3 s, reqresp
#: 3 requests) was 2.5-6.9 s, median about 4.5 s
RUN_OVERHEAD_S = 4.5


def _num(v, digits=None) -> str:
    """``digits`` decimals, or by default one decimal from 100 up and 3 significant digits below."""
    if v is None:
        return "–"
    if digits is not None:
        return f"{v:.{digits}f}" if abs(v) < 1e5 else f"{v:.3g}"
    return f"{v:.1f}" if 100 <= abs(v) < 1e5 else f"{v:.3g}"


def _scaled(v, scale: float):
    """``v`` — a number, a [low, high] interval or None — times ``scale`` (a metric's stored
    unit to the one shown, ``experiments.plots.metric_axis``)."""
    if v is None:
        return None
    return [x * scale for x in v] if isinstance(v, (list, tuple)) else v * scale


def _ci(ci, digits=None) -> str:
    return f"[{_num(ci[0], digits)}, {_num(ci[1], digits)}]" if ci else "[–]"


def _verif(v: dict) -> str:
    parts = []
    for k, s in v.items():
        if "median" in s:
            lo, hi = (str(x) if isinstance(x, int) else _num(x) for x in (s["min"], s["max"]))
            parts.append(f"{k} {lo}" if lo == hi else f"{k} {lo}–{hi}")
        else:
            parts.append(f"{k} {', '.join(s['values'])}")
    return "; ".join(parts) or "–"


def _spread(s: dict, n_min: int) -> str:
    """Median CI and percentiles as the CLI prints them; small samples said as such."""
    if not s["n"]:
        return "(no valid run)"
    if s["median_ci"] is None and s["n"] < n_min:
        ci = f"(n={s['n']} too small for a CI)"
    else:
        ci = f"95% CI {_ci(s['median_ci'])}"
    pct = f"  p10/p90 {_num(s['p10'])}/{_num(s['p90'])}" if s.get("p10") is not None else ""
    return ci + pct


def _p(mw: dict | None) -> str:
    """Mann-Whitney p with the smallest p the sample sizes allow when that is not small."""
    if mw is None:
        return "–"
    out = f"{mw['p']:.2g}"
    if mw.get("p_min") is not None and mw["p_min"] > 0.01:
        out += f" (smallest possible at this n: {mw['p_min']:.2g})"
    return out


def _workload_seconds(plan) -> tuple[float | None, str]:
    """A rough time of one run's workload: its duration, else per exchange (request, round, or
    one transfer of a size) 3 RTTs + its bytes (request, reply, screenshot) at the slowest link
    rate + its timed steps (processing, model, terminal work, encoding, decoding, think time) —
    a window, slow start or warm-up requests make it longer."""
    from testbed.spec.units import parse_size, parse_time
    p = plan.params
    if getattr(p, "duration", None):
        return parse_time(p.duration), "its duration"
    sizes = [getattr(p, k) for k in ("size", "reply_size", "screenshot") if isinstance(getattr(p, k, None), str)]
    nbytes = sum(parse_size(x) for v in sizes for x in v.split(","))
    n = next((getattr(p, k) for k in ("requests", "rounds") if isinstance(getattr(p, k, None), int)),
             1 if nbytes else None)
    rtt, rates = 0.0, []
    if plan.topology is not None:
        table = plan.topology.link_table()
        rtt = 2 * max([(lk["down"]["spec"] or {}).get("delay", 0) for lk in table] or [0])
        rates = [d["spec"]["rate"] for lk in table for d in (lk["up"], lk["down"]) if (d["spec"] or {}).get("rate")]
    if not n:
        return None, "no duration set: add the workload's own time"
    steps = sum(parse_time(x) for k in ("process", "model", "terminal", "encode", "decode", "think")
                if isinstance(getattr(p, k, None), str) for x in getattr(p, k).split(","))
    parts = [f"3 RTTs of {rtt * 1e3:.0f} ms"] + ([f"{steps:g} s of steps"] if steps else [])
    per = 3 * rtt + steps
    if nbytes and rates:
        slowest = min(rates)
        per += nbytes * 8 / slowest
        parts.insert(1, f"{nbytes / 1e6:.3g} MB at {slowest / 1e6:g} Mbit/s")
    return n * per, f"{counted(n, 'exchange')} x ({' + '.join(parts)})"


def describe(exp, plans: dict) -> str:
    """``experiment show``: the definition as a person reads it, with the number of runs and a
    rough time estimate."""
    from experiments import checks as ck
    from experiments.order import schedule
    from testbed.spec.runspec import RunSpec
    n_arms = len(exp.labels)
    slots = schedule(exp)
    lines = [f"experiment {exp.name}: {exp.description}", f"  source    {exp.source or '(built in)'}"]
    lines.append(f"  factor    {exp.factor}: {', '.join(map(str, exp.levels))} ({counted(len(exp.levels), 'level')})")
    if exp.cross:
        lines.append(f"  crossed   {exp.cross['factor']}: {', '.join(map(str, exp.cross_levels))} "
                     f"-> {counted(n_arms, 'arm')} (every level with every crossed level)")
    lines.append(f"  metrics   {exp.metrics[0]} (primary)" + "".join(f", {m}" for m in exp.metrics[1:]))
    for f in exp.factors():
        c = ck.check_for(f)
        lines.append(f"  check     {f}: " + ("none: runs marked unverified" if exp.check == "none"
                                             else c.rule if c else "–"))
    flat = RunSpec.from_dict(dict(exp.base)).flat()
    lines.append("  base      " + "; ".join(f"{k}={v}" for k, v in flat.items() if v is not None))
    lines.append(f"  runs      {len(slots)} = ({exp.warmup} warm-up + {counted(exp.reps, 'repetition')}) x "
                 f"{counted(n_arms, 'arm')}; order {exp.order}, seed {exp.seed}, keep_pcaps {exp.keep_pcaps}")
    per_arm = {lab: _workload_seconds(plan) for lab, plan in plans.items()}
    how = next(iter(per_arm.values()))[1]
    if any(sec is None for sec, _ in per_arm.values()):
        lines.append(f"  time      >= {len(slots) * RUN_OVERHEAD_S / 60:.0f} min ({counted(len(slots), 'run')} x "
                     f"{RUN_OVERHEAD_S:g} s per-run overhead; {how})")
    else:
        work = sum(per_arm[s.level][0] for s in slots)
        total = len(slots) * RUN_OVERHEAD_S + work
        lines.append(f"  time      ~ {total / 60:.0f} min ({counted(len(slots), 'run')} x {RUN_OVERHEAD_S:g} s "
                     f"per-run overhead + {work / 60:.1f} min of workload, e.g. {how}); a rough estimate")
    for m in exp.models:
        lines.append(f"  model     {m.get('label') or m['model'] + '.' + m['output']} "
                     f"(testbed model {m['model']}, output {m['output']}, {m['x']} = the level)")
    return "\n".join(lines)


def text(summary: dict, metric: str | None = None) -> str:
    """The lines ``testbed experiment run`` prints: per level n valid, median with CI, the
    verification; the ratio of medians with CI; excluded runs."""
    m = metric or summary["primary"]
    n_min = summary.get("min_n_ci", 2)
    cross = f" x {summary['cross']}" if summary.get("cross") else ""
    lines = [f"experiment {summary['experiment']}: factor {summary['factor']}{cross}, order {summary['order']}, "
             f"seed {summary['seed']}, metric {m}"]
    for lab, lv in summary["by_level"].items():
        s = lv["metrics"][m]
        lines.append(f"  {lab:>12}: n valid {lv['n_valid']}/{lv['n_runs']}  median {_num(s['median'])} "
                     f"{_spread(s, n_min)}  check: {_verif(lv['verification'])}")
    for c in summary["comparisons"]:
        if c["metric"] != m:
            continue
        if c.get("not_compared"):
            lines.append(f"  {c['a']}/{c['b']}: not compared: {c['not_compared']}")
            continue
        p = _p(c["mann_whitney"])
        lines.append(f"  {c['a']}/{c['b']}: ratio of medians {_num(c['ratio'], 3)} 95% CI "
                     f"{_ci(c['ratio_ci'], 3)}; difference {_num(c['difference'])} {_ci(c['difference_ci'])}; "
                     f"paired {_num(c['paired_difference']['median'])} {_ci(c['paired_difference']['ci'])} "
                     f"(n={c['paired_difference']['n_pairs']}); Mann-Whitney p "
                     f"{p}; Cliff's delta {_num(c['cliffs_delta'], 2)}")
    for e in summary["excluded"]:
        lines.append(f"  excluded {e['dir']}: {e['reason']}")
    for line in _replacement_lines(summary):
        lines.append(f"  {line}")
    lines += _machine_lines(summary, m)
    if summary["degraded_kept"]:
        lines.append(f"  kept, fidelity degraded: {', '.join(summary['degraded_kept'])}")
    if summary.get("unverified"):
        lines.append(f"  UNVERIFIED (check = none): the factor's effect was not checked in "
                     f"{len(summary['unverified'])} valid runs")
    if summary["fidelity_unverified"]:
        lines.append(f"  fidelity not verified (verdict unknown) for {summary['fidelity_unverified']} valid runs")
    if not summary["complete"]:
        lines.append("  INCOMPLETE: some runs have not run yet (rerun with --resume)")
    return "\n".join(lines)


def _replacement_lines(summary: dict) -> list[str]:
    """One line per repetition block the runner added for runs excluded because the machine stalled."""
    return [f"repetition {r['rep']} added to replace {', '.join(r['replaces'])} (the machine stalled)"
            for r in summary.get("replacements") or []]


def _machine_lines(summary: dict, m: str) -> list[str]:
    """With runs on more than one machine, each level's median per machine; every run a worker's
    death made start again."""
    lines = []
    machines = summary.get("machines") or {}
    if len(machines) > 1:
        lines.append("  machines: " + ", ".join(f"{k} ({n} runs)" for k, n in machines.items()))
        for lab, lv in summary["by_level"].items():
            per = lv.get("by_machine") or {}
            lines.append(f"  {lab:>12} per machine: " + ", ".join(
                f"{k} {_num(v['medians'].get(m))} (n={v['n']})" for k, v in per.items()))
    for r in summary.get("redone") or []:
        lines.append(f"  redone {r['dir']}: started {r['attempts']} times, a worker died under it "
                     f"({', '.join(r['lost_on']) or 'worker unknown'})")
    return lines


def markdown(summary: dict, plots: list[str], out: Path) -> str:
    from experiments.plots import metric_axis
    ov = summary["overhead"]
    md = [f"# Experiment `{summary['experiment']}`", "", "## Setup", ""]
    md += [f"- {k}: {v}" for k, v in experiment_setup(out, summary)] + ["", "## Design", "",
          f"Factor `{summary['factor']}`, levels "
          + (f"{', '.join(f'`{x}`' for x in summary.get('factor_levels', []))}, crossed with "
             f"`{summary['cross']}` ({', '.join(f'`{x}`' for x in summary['cross_levels'])}): "
             f"{len(summary['levels'])} arms; " if summary.get("cross")
             else f"{', '.join(f'`{x}`' for x in summary['levels'])}; ")
          + f"{counted(summary['reps'], 'repetition')} per arm after {counted(summary['warmup'], 'warm-up run')} "
          "per arm, "
          f"order `{summary['order']}`, experiment seed {summary['seed']} (each repetition's link seed "
          "derives from it; both arms of a repetition share it).", "",
          f"Manipulation check: {summary['check_rule']}."
          + (f" Crossed factor `{summary['cross']}` (levels {', '.join(f'`{x}`' for x in summary['cross_levels'])}; "
             f"an arm is `CROSS@LEVEL`): {summary.get('cross_check_rule') or 'not checked'}."
             if summary.get("cross") else ""), "",
          f"Fidelity rule: {summary['fidelity_rule']}", "",
          "Statistics over valid runs only; a run's value of a list metric is its median; 95 % "
          f"percentile-bootstrap CIs from {summary.get('min_n_ci', 2)} valid runs per arm up (fewer: "
          "no CI, \"n too small for a CI\"); p10/p90 from 10 runs, p99 from 100. A = the first level"
          + (" within each crossed level" if summary.get("cross") else f" `{summary['levels'][0]}`")
          + " (reference). Mann–Whitney p with the smallest p the exact test can reach at these n.", ""]
    for m in summary["metrics"]:
        if all(lv["metrics"][m]["n"] == 0 for lv in summary["by_level"].values()):
            md += [f"## {m}", "", "No valid run recorded this metric.", ""]
            continue
        md += [f"## {m}", "", f"{metric_axis(m, kb=False)[0]}:", "",
               "| level | n valid / runs | median | 95 % CI | p10 | p90 | p99 |",
               "|---|---|---|---|---|---|---|"]
        for lab, lv in summary["by_level"].items():
            s = lv["metrics"][m]
            ci = ("n too small for a CI" if s["n"] and s["median_ci"] is None
                  and s["n"] < summary.get("min_n_ci", 2) else _ci(s["median_ci"]))
            md.append(f"| {lab} | {lv['n_valid']} / {lv['n_runs']} | {_num(s['median'])} | "
                      f"{ci} | {_num(s['p10'])} | {_num(s['p90'])} | {_num(s['p99'])} |")
        md += ["", "| A / B | ratio of medians [CI] | difference [CI] | paired difference [CI] (pairs) "
               "| Mann–Whitney U, p | Cliff's δ |", "|---|---|---|---|---|---|"]
        for c in (c for c in summary["comparisons"] if c["metric"] == m):
            if c.get("not_compared"):
                md.append(f"| {c['a']} / {c['b']} | not compared: {c['not_compared']} | | | | |")
                continue
            mw = c["mann_whitney"] or {}
            pd = c["paired_difference"]
            md.append(f"| {c['a']} / {c['b']} | {_num(c['ratio'], 3)} {_ci(c['ratio_ci'], 3)} | "
                      f"{_num(c['difference'])} {_ci(c['difference_ci'])} | {_num(pd['median'])} "
                      f"{_ci(pd['ci'])} ({pd['n_pairs']}) | {_num(mw.get('u'))}, {_p(c['mann_whitney'])} | "
                      f"{_num(c['cliffs_delta'], 2)} |")
        md.append("")
    md += ["## Verification", "", "| level | read-backs (min–max over completed runs) | representative run |",
           "|---|---|---|"]
    for lab, lv in summary["by_level"].items():
        md.append(f"| {lab} | {_verif(lv['verification'])} | {lv['representative'] or '–'} |")
    md += ["", "## Machines", "", "Runs per machine: " + (", ".join(
        f"`{k}` {n}" for k, n in (summary.get("machines") or {}).items()) or "none") + ". A comparison "
        "uses the machines where both arms ran, pairs arms on one machine only, and is not made "
        "for arms that never met on one machine.", ""]
    machines = list(summary.get("machines") or {})
    if len(machines) > 1:
        md += ["| level | " + " | ".join(f"median on `{k}` (n)" for k in machines) + " |",
               "|---|" + "---|" * len(machines)]
        for lab, lv in summary["by_level"].items():
            per = lv.get("by_machine") or {}
            md.append(f"| {lab} | " + " | ".join(
                f"{_num(per[k]['medians'].get(summary['primary']))} ({per[k]['n']})" if k in per else "–"
                for k in machines) + " |")
        md.append("")
    redone = summary.get("redone") or []
    md += [f"Runs started again because a worker died under them: {len(redone)}"
           + (": " + ", ".join(f"`{r['dir']}` ({r['attempts']} starts; lost on {', '.join(r['lost_on'])})"
                               for r in redone) if redone else "") + "."]
    md += ["", "## Excluded runs", ""]
    md += [f"- `{e['dir']}`: {e['reason']}" for e in summary["excluded"]] or ["none"]
    md += [f"- {line}" for line in _replacement_lines(summary)]
    if summary.get("unverified"):
        md += ["", f"Valid runs whose factor was NOT verified (`check = \"none\"`): "
                   f"{', '.join(f'`{d}`' for d in summary['unverified'])}."]
    md += ["", f"Valid runs whose link fidelity could not be verified (verdict `unknown`): "
               f"{summary['fidelity_unverified']}.", "",
           f"Valid runs the emulator rated `degraded` (kept; timing error stated in each run's "
           f"manifest): {', '.join(f'`{d}`' for d in summary['degraded_kept']) or 'none'}.", "",
           "## Cost", "",
           f"- median wall-clock per run {_num(ov['wall_s_per_run_median'], 2)} s over {ov['runs']} runs; "
           f"topology kept up across the runs of a repetition: {'yes' if ov['kept_topology'] else 'no'}"
           + _rebuilt_why(ov)
           + (f" ({ov['bringups']} bring-ups, median {_num(ov['bringup_s_median'], 2)} s each)"
              if ov['bringups'] else ""),
           f"- per run, the topology's own bring-up + teardown (median; 0 when kept up): "
           f"{_num(ov['topology_s_per_run_median'], 2)} s",
           f"- disk per run (median) {_num(ov['disk_mb_per_run_median'], 2)} MB; tcpdump CPU in total "
           f"{_num(ov['capture_cpu_s_total'], 2)} s; packets the captures dropped in total "
           f"{ov['capture_dropped_total']}", ""]
    if plots:
        md += ["## Plots", ""] + [f"![{Path(p).stem}]({Path(p).relative_to(out)})" for p in plots
                                  if p.endswith(".png")] + [""]
    return "\n".join(md)


def _rebuilt_why(ov: dict) -> str:
    """Why the topology was rebuilt for every run, when something forced it (nothing else)."""
    why = rebuilt_why([f"`{f}`" for f in ov.get("structural_factors") or ()],
                      [f"`{k}`" for k in ov.get("scheduled_links") or ()])
    return f" (rebuilt for every run, --keep-topology or not: {why})" if why else ""


def experiment_setup(out: Path, summary: dict | None = None) -> list[tuple[str, str]]:
    """The setup rows of an experiment's reports: its description, factor and levels, runs,
    metrics, checks, then the run setup (:func:`analysis.runpage.run_setup`: topology and every
    link's spec, workload, backend and engine, revision) of its first completed run, and the
    machine's load at its start (and over the experiment when ``host.json`` has it)."""
    from analysis.runpage import run_setup
    manifest = experiment_manifest(out)
    d = manifest["definition"]
    rows = [("description", d.get("description") or "–"),
            ("factor", f"{d['factor']}: {', '.join(map(str, d['levels']))}"
                       + (f"; crossed with {d['cross']['factor']}" if d.get("cross") else "")),
            ("runs", f"{d['reps']} repetitions per arm after {d['warmup']} warm-up run(s) per arm, order "
                     f"{d['order']}, experiment seed {d['seed']}, keep_pcaps {d['keep_pcaps']}"),
            ("metrics", f"{d['metrics'][0]} (primary)" + "".join(f", {m}" for m in d["metrics"][1:]))]
    if summary:
        rows += [("manipulation check", summary["check_rule"]), ("fidelity rule", summary["fidelity_rule"])]
    first = next((r for r in (summary or {}).get("runs", ()) if r["status"] == "complete"), None)
    if first and (out / first["dir"] / "manifest.json").is_file():
        run = read_manifest(out / first["dir"] / "manifest.json")
        factors = d["factor"] + (f" and {d['cross']['factor']}" if d.get("cross") else "")
        rows.append(("spec of the arms", f"the rows below are {first['dir']}'s; the other arms differ "
                                         f"only in {factors}, set to each level"))
        rows += [(k, v) for k, v in run_setup(run) if k not in ("link seed", "started")]
    env = manifest.get("environment") or {}
    load = env.get("loadavg")
    host = json.loads((out / "host.json").read_text()) if (out / "host.json").is_file() else None
    rows.append(("machine load", (f"1-min load {load[0]} at the start" if load else "not recorded")
                 + (f"; {host['load'][0]} → {host['load'][1]} over the experiment on {host['cores']} "
                    f"cores, CPU busy {host['cpu_busy']:.0%}" if host and host.get("cpu_busy") is not None
                    else "")))
    rows.append(("created", env.get("created", "–")))
    return rows


def _png(written: list[str], name: str) -> str | None:
    return next((p for p in written if Path(p).name == f"{name}.png"), None)


def html(out: Path, summary: dict, written: list[str], drawn: bool = True) -> "Page":
    """``report.html``: setup; the primary metric per arm (distribution with the median's CI on
    one axis, its table and the comparisons); the representative runs' timelines side by side;
    the other metrics; verification; fidelity and validity per run with links to the run
    directories.  ``drawn``: whether the figures were drawn (``write_all(plots=False)``: not)."""
    from analysis.page import link
    from experiments.plots import degenerate, metric_axis
    page = Page(f"experiment {summary['experiment']}")
    page.heading("Setup").setup(experiment_setup(out, summary))
    n_min = summary.get("min_n_ci", 2)
    for i, m in enumerate(summary["metrics"]):
        label, k = metric_axis(m)           # the tables in the heading's unit, as the figures
        page.heading(("primary metric: " if i == 0 else "") + label, anchor=m)
        rows = []
        for lab, lv in summary["by_level"].items():
            st = lv["metrics"][m]
            rows.append([lab, f"{lv['n_valid']} / {lv['n_runs']}", _num(_scaled(st["median"], k)),
                         "n too small for a CI" if st["n"] and st["median_ci"] is None and st["n"] < n_min
                         else _ci(_scaled(st["median_ci"], k)), _num(_scaled(st["p10"], k)),
                         _num(_scaled(st["p90"], k))])
        page.table([summary["factor"], "n valid / runs", "median", "95 % CI", "p10", "p90"], rows)
        comp = [[f"{c['a']} / {c['b']}", f"{_num(c['ratio'], 3)} {_ci(c['ratio_ci'], 3)}",
                 f"{_num(_scaled(c['difference'], k))} {_ci(_scaled(c['difference_ci'], k))}",
                 _p(c["mann_whitney"]),
                 _num(c["cliffs_delta"], 2)] for c in summary["comparisons"] if c["metric"] == m]
        if comp:
            page.table(["A / B", "ratio of medians [95 % CI]", "difference [95 % CI]", "Mann–Whitney p",
                        "Cliff's δ"], comp)
        sentence = degenerate(summary, m)
        if sentence:
            page.empty(sentence)
        for kind, caption in (("levels", "every valid run per arm with the median and its 95 % CI, "
                                         "and their ECDF, on one axis"),
                              ("curve", "median and 95 % CI against the level, models dashed"),
                              ("by-run", "against the run index (drift, order effects)")):
            png = _png(written, f"{m}-{kind}")
            if png:
                page.figure(png, f"{m}: {caption}")
        if i == 0:
            page.heading("The representative runs", 3)
            png = _png(written, "representative")
            if png:
                page.figure(png, "the run of each arm closest to its median of the primary metric, side "
                                 "by side on shared axes")
            elif drawn:
                page.empty("No arm's representative run kept a capture to draw.")
            else:
                page.empty("Figures not drawn here (testbed experiment report DIR draws them).")
    page.heading("Verification")
    page.para(f"manipulation check: {summary['check_rule']}")
    page.table([summary["factor"], "read-backs (min–max over completed runs)", "representative run"],
               [[lab, _verif(lv["verification"]),
                 link(lv["representative"], lv["representative"]) if lv["representative"] else "–"]
                for lab, lv in summary["by_level"].items()])
    page.heading("Runs: validity and link fidelity")
    page.para(summary["fidelity_rule"], cls="note")
    rows, classes = [], []
    for r in summary["runs"]:
        rows.append([link(r["dir"], r["dir"]), r["level"], "warm-up" if r["warmup"] else str(r["rep"]),
                     r["status"], r.get("fidelity") or "–", "yes" if r["valid"] else "no", r.get("reason") or ""])
        classes.append(["", "", "", "", "", "ok" if r["valid"] else "miss", ""])
    page.table(["run directory", summary["factor"], "repetition", "status", "fidelity", "valid", "why not"],
               rows, classes)
    return page


def prune_pcaps(out: Path, summary: dict, keep: str) -> list[str]:
    """keep_pcaps = representative: delete the pcaps of every run but each level's representative
    (and but a damaged run's: its manifest, which lists them, may be unreadable), first recording
    in each run directory pruned which files, under which policy, keeping which runs and when
    (``analysis.runcheck.PRUNED``, read by ``testbed analyze RUN_DIR``); the paths deleted,
    relative to ``out``."""
    if keep != "representative":
        return []
    reps = {lv["representative"] for lv in summary["by_level"].values()}
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    gone = []
    for r in summary["runs"]:
        if r["status"] in ("missing", "damaged") or r["dir"] in reps:
            continue
        run_dir = out / r["dir"]
        doomed = [p for p in load_run(run_dir).files_of("pcap") if p.exists()]
        if not doomed:
            continue
        _record_pruned(run_dir, [p.relative_to(run_dir).as_posix() for p in doomed], keep,
                       sorted(x for x in reps if x), when)
        for p in doomed:
            p.unlink()
            gone.append(str(p.relative_to(out)))
    return gone


def _record_pruned(run_dir: Path, files: list[str], keep: str, representatives: list[str],
                   when: str) -> None:
    """Write (before the files go: a record of a file still there says nothing) the run's
    ``PRUNED`` record, adding ``files`` to those an earlier pruning recorded."""
    path = run_dir / PRUNED
    try:
        earlier = json.loads(path.read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        earlier = []
    _write_json(path, {"files": sorted(set(earlier) | set(files)), "keep_pcaps": keep,
                       "representatives": representatives, "when": when})


def write_all(out: str | Path, plots: bool = True, prune: bool = False) -> dict:
    """summary.json, plots/, report.md; with ``prune`` (at the end of ``run``, never in
    ``report``) and a complete experiment, the pcaps ``keep_pcaps`` does not keep are deleted."""
    from experiments import plots as pl
    out = Path(out).resolve()
    summary = summarize(out)
    written = pl.write(out, summary) if plots else []
    (out / REPORT).write_text(markdown(summary, written, out))
    html(out, summary, written, drawn=plots).write(out / HTML)
    from experiments.results import tidy, write_tidy
    write_tidy(out, tidy(out))
    keep = experiment_manifest(out)["definition"]["keep_pcaps"]
    if prune and summary["complete"]:
        prune_pcaps(out, summary, keep)
    return summary
