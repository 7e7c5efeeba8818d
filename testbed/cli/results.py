"""``testbed results [--results DIR] [--json]``: every past run, experiment and reproduction under
the results directory, newest first (when, what, headline metric, verdict);
``testbed results compare A B``: two experiments (or two reproductions) side by side — what
differs in their definitions, and per arm and metric the medians and the ratio B / A with its
95 % CI (``experiments.results``), or, when they share no arm or metric (no row), what each has."""
from __future__ import annotations

import time

from testbed.cli.options import add_json, add_results
from testbed.spec.units import format_number


def register(sub) -> None:
    p = sub.add_parser("results", help="list past runs, experiments and reproductions; compare two",
                       description="Without arguments: every run, experiment and reproduction directory "
                                   "under --results, newest first. 'compare A B': two experiment (or two "
                                   "reproduction) directories side by side.")
    p.add_argument("args", nargs="*", metavar="compare A B", help="compare two result directories")
    add_results(p, "the results to list", read=True)
    add_json(p)
    p.set_defaults(func=run)


def _show(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return format_number(v)
    return str(v)


def run(args) -> int:
    import json
    from pathlib import Path

    from experiments import results
    from testbed.spec.errors import UsageError
    if args.args:
        if args.args[0] != "compare" or len(args.args) != 3:
            raise UsageError(f"results {' '.join(args.args)}: give nothing (list) or compare A B")
        for d in args.args[1:]:
            if not Path(d).is_dir():
                raise UsageError(f"{d}: no such directory; give two experiment or reproduction directories")
        try:
            c = results.compare(*args.args[1:])
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.json:
            print(json.dumps(c, indent=1, default=str))
            return 0
        print(f"A = {c['a']}\nB = {c['b']}  ({c['kind']}s)")
        print("differences:" if c["differences"] else "differences: none in the definitions")
        for k, va, vb in c["differences"]:
            print(f"  {k}: {_show(va)} -> {_show(vb)}")
        if c["not_compared"]:
            print(f"nothing to compare: {c['not_compared']}")
            return 0
        key = "arm" if c["kind"] == "experiment" else "id"
        table = [(key, "metric", "A", "B", "B / A", "95 % CI")] + [
            (str(m[key]), _show(m["metric"]), _show(m["a"]), _show(m["b"]), _show(m["ratio"]),
             "[" + ", ".join(_show(x) for x in m["ratio_ci"]) + "]" if m["ratio_ci"] else "–")
            for m in c["metrics"]]
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        for r in table:
            print("  " + "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())
        if c["kind"] == "reproduction":
            print("  (B / A of the measured values; a reproduction's rows have no CI to compare)")
        elif any(m["ratio"] is not None and not m["ratio_ci"] for m in c["metrics"]):
            from experiments.stats import MIN_N_CI
            print(f"  (95 % CI –: an arm with fewer than {MIN_N_CI} valid runs in A or B, or an unbounded "
                  "interval)")
        return 0
    found = results.find(args.results)
    if args.json:
        print(json.dumps([e.to_dict() for e in found], indent=1))
        return 0
    if not found:
        print(f"no runs, experiments or reproductions under {args.results}")
        return 0
    table = [("when", "kind", "what", "headline", "verdict", "directory")] + [
        (time.strftime("%Y-%m-%d %H:%M", time.localtime(e.when)) if e.when else "?", e.kind,
         e.what if len(e.what) <= 60 else e.what[:59] + "…", e.headline if len(e.headline) <= 50 else
         e.headline[:49] + "…", e.verdict, str(e.path)) for e in found]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())
    return 0
