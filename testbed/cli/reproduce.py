"""``testbed reproduce [C1 C5 ...|all] [--quick] [--json] [--out DIR]``: every quantity of
CHAPTER12.md as chapter value, model value (``analysis.models``) and measured value (experiment
runs with real packets), with summary.json, report.md and a self-contained report.html.  Without
a case it lists the cases with their estimated times and starts nothing; the table is followed by
one short line per miss (every row's full note with ``testbed -v reproduce`` and in report.md).

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
from testbed.cli.options import add_backend, add_cluster, add_json, add_results, directory_path
from testbed.emulator.config import add_engine_option
from testbed.spec.units import counted, format_number


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="the chapter's numbers: chapter, model and measured side by side",
                       description="One row per quantity of CHAPTER12.md: chapter value, model value "
                                   "and the value measured with real packets on the emulated paths.")
    p.add_argument("cases", nargs="*", metavar="CASE",
                   help="cases (C1 … C15), row ids (C7.ratio_new) or 'all'; none: list the cases "
                        "with their estimated times and start nothing")
    p.add_argument("--quick", action="store_true",
                   help="few repetitions (2; 1 where the topology draws nothing at random), no warm-up, "
                        "skip full-only rows")
    p.add_argument("--reps", type=int, help="repetitions per level (default: 10; with --quick 2, or 1 for an "
                   "experiment whose topology draws nothing at random)")
    p.add_argument("--model-only", action="store_true", help="do not run experiments")
    add_backend(p, None, BACKENDS, what=" of every run")
    add_engine_option(p)
    p.add_argument("--keep-topology", action="store_true",
                   help="keep each experiment's topology up across the runs of a repetition")
    add_cluster(p)
    add_json(p, "print summary.json's rows")
    p.add_argument("--out", type=directory_path, metavar="DIR",
                   help="report directory (default: RESULTS/reproduce-YYYYmmdd-HHMMSS, RESULTS being "
                        "--results)")
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
        return "[" + ",".join(_show(x).replace(",", "") for x in v) + "]"     # [240044,242600]
    if isinstance(v, (int, float)) and float(v).is_integer() and abs(v) >= 1000:
        return f"{int(v):,}"
    if isinstance(v, float):            # not 2.4022e+05 beside the chapter's 250,000
        return format_number(v, 5)
    return str(v)


def print_table(rows: list[dict], meta: dict, out: Path, verbose: bool = False) -> None:
    """The table, then one short line per miss (its cause's head; the full note with its
    evidence and the host's load is in report.md and, with ``verbose``, printed here)."""
    head = ("id", "unit", "chapter", "model", "measured", "ci95", "n", "tol", "ok")
    def tol(r):
        return "-" if r["tolerance"] is None else f"{r['tolerance']:.0%}"
    table = [head] + [(r["id"], r["unit"], _show(r["chapter"]), _show(r["model"]), _show(r["measured"]),
                       _show(r["ci95"]), str(r["n"]), tol(r), _show(r["ok"])) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print()
    if verbose:     # -v: every row's quantity, full note (cause, evidence, load) and directory
        for r in rows:
            if r["note"] or r["experiment_dir"]:
                print(f"{r['id']}: {r['quantity']}." + (f" {r['note']}" if r["note"] else "")
                      + (f" [{r['experiment_dir']}]" if r["experiment_dir"] else ""))
        print()
    else:           # one short line per miss and per failed experiment; the rest is in report.md
        failed: dict[str, list[str]] = {}
        for r in rows:
            if r["ok"] is False:
                off = (f" ({r['measured'] / r['chapter'] - 1:+.0%})"
                       if isinstance(r["measured"], (int, float)) and r["chapter"] else "")
                unit = "" if r["unit"] in ("1", "") else f" {r['unit']}"
                print(f"MISS {r['id']}: {_show(r['measured'])} vs {_show(r['chapter'])}{unit}"
                      f"{off} — {r.get('miss') or 'unexplained'}")
            elif "the experiment failed: " in r["note"]:
                why = r["note"].split("the experiment failed: ", 1)[1].split("; ")[0]
                failed.setdefault(why[:120], []).append(r["id"])
        for why, ids in failed.items():
            print(f"FAILED {', '.join(ids)}: {why}")
    print(f"{meta['rows']} rows, {meta['measured']} measured with packets, {meta['ok']} within "
          f"tolerance; host load {meta['load_before']} -> {meta['load_after']} on {meta['cores']} "
          f"cores, {meta['cpu']}")
    if any("MACHINE BUSY" in r["note"] for r in rows):
        print("a miss marked MACHINE BUSY ran while the host's load exceeded 1.5 x its cores or CPU "
              "steal was >= 5 %: its timing may be the machine's, not the transport's")
    if any("overloaded" in r["note"] or "degraded" in r["note"] for r in rows):
        print("some runs were excluded or flagged by the link fidelity verdict (overloaded or "
              "degraded; each run's manifest names its cause, the machine or the engine), not "
              "because the transport misbehaved")
    if flagged := [r for r in rows if r.get("degraded_runs")]:
        flips = [r["id"] for r in flagged if r.get("ok_without_degraded") not in (None, r["ok"])]
        gone = [r["id"] for r in flagged if r.get("ok_without_degraded") is None]
        said = ([f"the verdict of {', '.join(flips)} would change"] if flips else []) + \
            ([f"{', '.join(gone)} would have no value (all their runs were)"] if gone else [])
        print(f"{len(flagged)} row(s) used runs rated degraded; without those runs "
              + (" and ".join(said) or "no verdict would change")
              + " (each row's note gives its value without them)")
    if meta["resumed"]:
        print(f"{meta['resumed']} experiment(s) continued from an earlier invocation in {out}: the "
              "load above covers only this one (each run's manifest has its own times)")
    print(f"report: {out / 'report.html'} (also report.md, summary.json)"
          + ("" if verbose else "; every row's note and evidence there and with testbed -v reproduce"))


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def list_cases(reps: int | None = None, as_json: bool = False) -> None:
    """Every case, its rows and the estimated time of measuring it with --quick and in full
    (``experiments.reproduce.run.estimate``); nothing is started."""
    from analysis.models import MODELS
    from experiments.reproduce.cases import MEASURED_ON, ROWS, select
    from experiments.reproduce.run import estimate
    cases = sorted({r.case for r in ROWS}, key=lambda c: int(c[1:]))
    titles: dict[str, str] = {}
    for m in MODELS.values():           # the case's subject: its first model's description
        for c in m.case.split():
            titles.setdefault(c, m.help)
    table = [("case", "rows", "measured", "--quick", "full", "what")]
    listed = []
    for case in [*cases, "all"]:
        rows = select([case] if case != "all" else [])
        quick, full = estimate(rows, True, reps), estimate(rows, False, reps)
        listed.append({"case": case, "rows": len(rows), "quick": quick, "full": full})
        what = "every row" if case == "all" else titles.get(case, rows[0].quantity)
        table.append((case, str(len(rows)), str(sum(r.measure is not None for r in rows)),
                      *(f"{_duration(t['seconds'])} ({counted(t['runs'], 'run')})" if t["experiments"] else "-"
                        for t in (quick, full)),
                      what if len(what) <= 60 else what[:59] + "…"))
    if as_json:
        print(json.dumps({"started": False, "measured_on": MEASURED_ON, "cases": listed}, indent=1))
        return
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    print("testbed reproduce: nothing was started; give the cases to measure (or all).")
    print(f"Estimated times, from seconds per run measured {MEASURED_ON}; yours will differ:")
    for row in table:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print("e.g. testbed reproduce C7 --quick; testbed reproduce all --quick; "
          "testbed reproduce all --model-only (no packets, seconds)")


def run(args) -> int:
    from experiments.reproduce.cases import QUICK_REPS, QUICK_REPS_NO_RANDOM, FULL_REPS, select
    from experiments.reproduce.report import write
    from experiments.reproduce.run import can_measure, measure_all, result_rows
    from testbed.spec.errors import UsageError
    if args.reps is not None and args.reps < 1:
        raise UsageError(f"--reps {args.reps}: give 1 or more")
    if args.model_only:
        given = [opt for opt, value in (("--quick", args.quick), ("--reps", args.reps),
                                        ("--backend", args.backend), ("--keep-topology", args.keep_topology),
                                        ("--cluster", args.cluster)) if value not in (None, False)]
        if given:
            raise UsageError(f"--model-only runs nothing, so {', '.join(given)} would do nothing; "
                             "leave them out, or measure without --model-only")
    if not args.cases and not args.model_only:     # measuring everything takes hours: say so
        list_cases(args.reps, args.json)
        return 0
    try:
        rows = select(args.cases)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out or Path(args.results) / f"reproduce-{time.strftime('%Y%m%d-%H%M%S')}")
    meta = {"title": " ".join(args.cases) or "all", "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "load_before": _load(), "backend": args.backend or "auto", "cluster": args.cluster or "this machine",
            "keep_topology": args.keep_topology}
    from experiments.reproduce.run import cpu_shares, cpu_times, describe_cpu
    cpu0 = cpu_times()
    skipped = "--model-only" if args.model_only else can_measure()
    if skipped and not args.model_only:     # asked to measure: say why nothing is
        print(f"testbed reproduce: nothing measured: {skipped}; the table shows the model only, as "
              "--model-only does", file=sys.stderr)
    measured = None
    if skipped is None:
        from experiments.cluster import place
        from testbed.cli.experiment import continue_command
        from testbed.host.lifecycle import RunInterrupted, signals_raise
        try:
            with signals_raise(), place(args.cluster) as where:
                measured = measure_all(rows, out, quick=args.quick, reps=args.reps, backend=args.backend,
                                       keep_topology=args.keep_topology, where=where,
                                       progress=lambda msg: print(f"testbed reproduce: {msg}", file=sys.stderr))
        except (KeyboardInterrupt, RunInterrupted):     # Ctrl-C, SIGTERM, SIGHUP
            print(f"testbed: reproduce interrupted; its finished runs are kept in {out}; running it again "
                  f"with the same --out continues, reusing them:\n  {continue_command(out)}", file=sys.stderr)
            raise
    results = result_rows(rows, measured, args.quick, skipped=skipped)
    reps = (f"{args.reps} reps per level" if args.reps else
            f"{QUICK_REPS} reps per level, {QUICK_REPS_NO_RANDOM} where no arm's topology draws at random"
            if args.quick else f"{FULL_REPS} reps")
    meta.update(finished=time.strftime("%Y-%m-%d %H:%M:%S %Z"), load_after=_load(),
                cpu=describe_cpu(cpu_shares(cpu0, cpu_times())) + " during the run", cores=os.cpu_count(),
                mode=("model only: " + skipped) if skipped else
                (f"quick ({reps}; no warm-up)" if args.quick else f"full ({reps})"),
                rows=len(results), measured=sum(r["measured"] is not None for r in results),
                ok=sum(r["ok"] is True for r in results),
                resumed=sum(bool(v.get("resumed")) for v in (measured or {}).values()))
    summary = write(out, meta, results)
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print_table(results, meta, out, verbose=getattr(args, "verbose", 0) > 0)
    return 0
