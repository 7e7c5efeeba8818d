"""``testbed reproduce [C1 C5 ...|all] [--quick] [--json] [--out DIR]``: every quantity of
CHAPTER12.md as chapter value, model value (``analysis.models``) and measured value (experiment
runs with real packets), with summary.json, report.md and a self-contained report.html.

The table is data (``experiments/reproduce/cases.py``); the engine is ``experiments/reproduce/run.py``;
the outputs ``experiments/reproduce/report.py``.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from testbed.backends import BACKENDS
from testbed.cli.options import add_backend, add_json, add_results
from testbed.emulator.config import add_engine_option


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="the chapter's numbers: chapter, model and measured side by side",
                       description="One row per quantity of CHAPTER12.md: chapter value, model value "
                                   "and the value measured with real packets on the emulated paths.")
    p.add_argument("cases", nargs="*", metavar="CASE",
                   help="cases (C1 … C15), row ids (C7.ratio_new) or 'all' (default)")
    p.add_argument("--quick", action="store_true",
                   help="few repetitions (2), no warm-up, skip full-only rows")
    p.add_argument("--reps", type=int, help="repetitions per level (default: 2 with --quick, else 10)")
    p.add_argument("--model-only", action="store_true", help="do not run experiments")
    add_backend(p, None, BACKENDS, what=" of every run")
    add_engine_option(p)
    p.add_argument("--keep-topology", action="store_true",
                   help="keep each experiment's topology up across the runs of a repetition")
    add_json(p, "print summary.json's rows")
    p.add_argument("--out", help="report directory (default results/reproduce-YYYYmmdd-HHMMSS)")
    add_results(p, "the default --out")
    p.set_defaults(func=run)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _show(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "ok" if v else "MISS"
    if isinstance(v, list):
        return "[" + ",".join(_show(x) for x in v) + "]"
    if isinstance(v, (int, float)) and float(v).is_integer() and abs(v) >= 1000:
        return f"{int(v):,}"
    if isinstance(v, float):
        return f"{v:.5g}"
    return str(v)


def print_table(rows: list[dict], meta: dict, out: Path) -> None:
    head = ("id", "unit", "chapter", "model", "measured", "ci95", "n", "tol", "ok")
    def tol(r):
        return "-" if r["tolerance"] is None else f"{r['tolerance']:.0%}"
    table = [head] + [(r["id"], r["unit"], _show(r["chapter"]), _show(r["model"]), _show(r["measured"]),
                       _show(r["ci95"]), str(r["n"]), tol(r), _show(r["ok"])) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print()
    for r in rows:
        if r["note"] or r["experiment_dir"]:
            print(f"{r['id']}: {r['quantity']}." + (f" {r['note']}" if r["note"] else "")
                  + (f" [{r['experiment_dir']}]" if r["experiment_dir"] else ""))
    print(f"\n{meta['rows']} rows, {meta['measured']} measured with packets, {meta['ok']} within "
          f"tolerance; host load {meta['load_before']} -> {meta['load_after']} on {meta['cores']} "
          f"cores, {meta['cpu']}")
    if any("MACHINE BUSY" in r["note"] for r in rows):
        print("a miss marked MACHINE BUSY ran while the host's load exceeded 1.5 x its cores or CPU "
              "steal was >= 5 %: its timing may be the machine's, not the transport's")
    if any("overloaded" in r["note"] or "degraded" in r["note"] for r in rows):
        print("some runs were excluded because the emulator could not keep up (machine busy: see "
              "the load and CPU figures above), not because the transport misbehaved")
    if meta["resumed"]:
        print(f"{meta['resumed']} experiment(s) continued from an earlier invocation in {out}: the "
              "load above covers only this one (each run's manifest has its own times)")
    print(f"report: {out / 'report.html'} (also report.md, summary.json)")


def run(args) -> int:
    from experiments.reproduce.cases import QUICK_REPS, FULL_REPS, select
    from experiments.reproduce.report import write
    from experiments.reproduce.run import can_measure, measure_all, result_rows
    from testbed.spec.errors import UsageError
    if args.reps is not None and args.reps < 1:
        raise UsageError(f"--reps {args.reps}: give 1 or more")
    try:
        rows = select(args.cases)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out or Path(args.results) / f"reproduce-{time.strftime('%Y%m%d-%H%M%S')}")
    meta = {"title": " ".join(args.cases) or "all", "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "load_before": _load()}
    from experiments.reproduce.run import cpu_shares, cpu_times, describe_cpu
    cpu0 = cpu_times()
    skipped = "--model-only" if args.model_only else can_measure()
    measured = None
    if skipped is None:
        measured = measure_all(rows, out, quick=args.quick, reps=args.reps, backend=args.backend,
                               keep_topology=args.keep_topology,
                               progress=lambda msg: print(f"testbed reproduce: {msg}", file=sys.stderr))
    results = result_rows(rows, measured, args.quick, skipped=skipped)
    reps = args.reps or (QUICK_REPS if args.quick else FULL_REPS)
    meta.update(finished=time.strftime("%Y-%m-%d %H:%M:%S %Z"), load_after=_load(),
                cpu=describe_cpu(cpu_shares(cpu0, cpu_times())) + " during the run", cores=os.cpu_count(),
                mode=("model only: " + skipped) if skipped else
                (f"quick ({reps} reps per level, no warm-up)" if args.quick else f"full ({reps} reps)"),
                rows=len(results), measured=sum(r["measured"] is not None for r in results),
                ok=sum(r["ok"] is True for r in results),
                resumed=sum(bool(v.get("resumed")) for v in (measured or {}).values()))
    summary = write(out, meta, results)
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print_table(results, meta, out)
    return 0
