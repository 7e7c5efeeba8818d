"""``testbed experiment``: experiments over one factor (or two crossed) (``experiments/``).

    testbed experiment list [--json]
    testbed experiment factors [--json]
    testbed experiment metrics [--json]
    testbed experiment show NAME|FILE [--levels ...] [--reps N] [--json]
    testbed experiment run NAME|FILE [--levels A,B|FROM:TO:STEP] [--cross-levels A,B] [--reps N]
        [--warmup N] [--seed S] [--backend B]
        [--set KEY|PATH=VALUE ...] [--link LINK.DIR.FIELD=VALUE ...] [--out DIR] [--resume]
        [--keep-topology] [--cluster ADDRESS] [--json] [--no-progress]
    testbed experiment report DIR [--json]

``--set`` and ``--link`` change the definition's base spec and mean what they mean in ``testbed
run`` (``testbed/cli/options.py``): ``--set loss_down=0%`` is the topology parameter (= ``--set
topology_params.loss_down=0%``), ``--set PATH=VALUE`` any RunSpec path (``params.requests=5``,
``socket.nodelay=true``); ``--link bottleneck.down.queue=200`` is ``--set
links.bottleneck.down.queue=200``.  ``--levels`` names levels of the definition or new values
(``1%,2%``, or a range ``0%:5%:1%``, ``1ms:100ms:log5``).  ``--resume`` continues the experiment in
``--out``, and may add repetitions or levels to it.  ``--cluster`` sends the repetition blocks to
Dask workers (docs/campaigns.md).  ``show`` prints the definition as a person
reads it, validated as ``run`` validates.  Everything is validated before the first run;
unknown names are refused with the valid ones, or, where those are too many for the error's line,
with the command that lists them: ``factors`` (every factor with its manipulation check, and those
without one) and ``metrics`` (every metric a definition may list).
"""
from __future__ import annotations

import json
import logging
import shlex
import sys
import textwrap
from pathlib import Path

from testbed.cli.options import (add_backend, add_cluster, add_json, add_results, add_seed, add_set_link,
                                 directory_path, spec_sets)
from testbed.emulator.config import add_engine_option
from testbed.spec.errors import UsageError

log = logging.getLogger(__name__)


def register(sub) -> None:
    p = sub.add_parser("experiment", help="single-factor A/B experiments: list, show, run, report",
                       description=__doc__.split("\n\n")[0])
    esub = p.add_subparsers(dest="action", metavar="ACTION")
    esub.required = True
    ls = esub.add_parser("list", help="the built-in experiments and those on TESTBED_PATH")
    add_json(ls)
    ls.set_defaults(func=run_list)
    fa = esub.add_parser("factors", help="the factors an experiment can vary, each with its manipulation "
                                         "check, and those without one (they need check = \"none\")")
    add_json(fa)
    fa.set_defaults(func=run_factors)
    me = esub.add_parser("metrics", help="the metrics a definition may list (docs/reference/metrics.md "
                                         "says what each is)")
    add_json(me)
    me.set_defaults(func=run_metrics)
    sh = esub.add_parser("show", help="print an experiment: factor, levels, metrics, base spec, runs, "
                                      "time estimate (validated as run validates)")
    sh.add_argument("experiment", metavar="NAME|FILE", help=EXPERIMENT)
    _add_definition_options(sh)
    add_json(sh, "print the definition and its schedule as JSON")
    sh.set_defaults(func=run_show)
    r = esub.add_parser("run", help="run an experiment (alternated arms, verified, resumable)")
    r.add_argument("experiment", metavar="NAME|FILE", help=EXPERIMENT)
    _add_definition_options(r)
    r.add_argument("--out", type=directory_path, metavar="DIR",
                   help="experiment directory (default: RESULTS/NAME-YYYYmmdd-HHMMSS, RESULTS "
                        "being --results)")
    add_results(r, "the default --out")
    r.add_argument("--resume", action="store_true", help="continue the experiment in --out")
    r.add_argument("--keep-topology", action="store_true",
                   help="keep the topology up across the runs of a repetition when the factor allows "
                        "(saves the bring-up per run; each run then gets its block's fidelity verdict)")
    r.add_argument("--replace", type=int, default=0, metavar="N",
                   help="run up to N more repetitions of every arm, one at a time, while a run is "
                        "excluded because its link fidelity verdict blames the machine (a stall of "
                        "the host; default 0)")
    add_cluster(r)
    add_json(r, "print summary.json instead of the table")
    r.add_argument("--no-progress", action="store_true",
                   help="no progress bar (testbed -q: no progress bar and no warnings)")
    r.set_defaults(func=run_run)
    rp = esub.add_parser("report", help="recompute summary.json, report.md, report.html, results.csv and "
                                        "plots of a directory")
    rp.add_argument("dir", metavar="DIR", help="an experiment directory (what experiment run wrote)")
    add_json(rp)
    rp.set_defaults(func=run_report)


EXPERIMENT = "an experiment's name (testbed experiment list) or a definition file (.toml)"


def _add_definition_options(r) -> None:
    r.add_argument("--levels", help="levels of the definition or new values, comma-separated "
                                    "(new,reuse; 1%%,2%%), or a range FROM:TO:STEP (0%%:5%%:1%%) or "
                                    "FROM:TO:logN (1ms:100ms:log5)")
    r.add_argument("--cross-levels", help="levels of the crossed second factor, as --levels (default: "
                                          "the definition's)")
    r.add_argument("--reps", type=int,
                   help="repetitions per level (default: the definition's reps, see experiment show)")
    r.add_argument("--warmup", type=int,
                   help="warm-up runs per level, not analysed (default: the definition's warmup)")
    add_seed(r, None, "experiment seed (every repetition's link seed derives from it; default: the "
                      "definition's seed)")
    add_backend(r, None, what=" of every run")
    add_engine_option(r)
    add_set_link(r)


def _experiment(args):
    """The definition with the command line's options applied."""
    from experiments import load_definition
    from experiments.definition import cli_levels
    sets = spec_sets(args.overrides, args.link)
    if args.backend:
        sets["backend"] = args.backend
    for opt, v in (("--reps", args.reps), ("--warmup", args.warmup)):
        if v is not None and v < (1 if opt == "--reps" else 0):
            raise UsageError(f"{opt} {v}: give {'1' if opt == '--reps' else '0'} or more")
    return load_definition(args.experiment).with_overrides(
        levels=cli_levels(args.levels) if args.levels is not None else None,
        cross_levels=cli_levels(args.cross_levels, "--cross-levels") if args.cross_levels is not None else None,
        reps=args.reps, seed=args.seed, sets=sets, warmup=args.warmup)


def run_list(args) -> int:
    from experiments.definition import EXPERIMENTS      # the built-ins and those on TESTBED_PATH
    exps = EXPERIMENTS.values()
    if args.json:
        print(json.dumps([e.to_dict() for e in exps], indent=1))
        return 0
    rows = [(e.name, e.factor + (f" x {e.cross['factor']}" if e.cross else ""),
             _levels_cell(e.levels) + (f" x {_levels_cell(e.cross_levels)}" if e.cross else ""),
             e.description) for e in exps]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + "  " + r[3])
    return 0


def run_factors(args) -> int:
    from experiments.checks import check_for, checked_factors, unchecked_factors
    checked = {f: check_for(f).rule for f in checked_factors()}
    if args.json:
        print(json.dumps({"checked": checked, "unchecked": unchecked_factors()}, indent=1))
        return 0
    width = max(map(len, checked))
    for f, rule in checked.items():
        print(f"{f:<{width}}  {rule}")
    print(f"without a check (an experiment over one sets check = \"none\"): {', '.join(unchecked_factors())}")
    return 0


def run_metrics(args) -> int:
    from experiments.definition import METRICS
    print(json.dumps(list(METRICS)) if args.json else "\n".join(METRICS))
    return 0


LEVELS_WIDTH = 48
"""The widest levels cell of ``experiment list``; ``experiment show`` prints them all."""


def _levels_cell(levels) -> str:
    """The levels joined by " | ", cut to LEVELS_WIDTH with their count when longer."""
    text = " | ".join(map(str, levels))
    if len(text) <= LEVELS_WIDTH:
        return text
    return textwrap.shorten(text, LEVELS_WIDTH - 12, placeholder=" …") + f" ({len(levels)} levels)"


def run_show(args) -> int:
    from experiments.order import schedule
    from experiments.report import describe
    e = _experiment(args)
    plans = e.validate()
    if args.json:
        print(json.dumps({**e.to_dict(), "source": e.source, "topology_may_stay_up": e.topology_may_stay_up(),
                          "schedule": [s.to_dict() for s in schedule(e)]}, indent=1))
        return 0
    print(describe(e, plans))
    return 0


def continue_command(out, *options: str) -> str:
    """This command line with the ``options`` it lacks, and ``--out OUT`` unless it has an --out:
    the command that continues what it was writing into ``out``."""
    argv = ["testbed", *sys.argv[1:]]
    argv += [o for o in options if o not in argv]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(out)]
    return shlex.join(argv)


def run_run(args) -> int:
    from experiments import run_experiment, write_all
    from experiments.report import text
    from experiments.cluster import POLL_S, place
    from experiments.runner import default_out, topology_keeper
    from testbed.host.lifecycle import RunInterrupted, signals_raise
    exp = _experiment(args)
    if args.resume and not args.out:
        raise UsageError("--resume needs --out DIR (the experiment directory to continue)")
    out = Path(args.out) if args.out else default_out(exp, args.results)
    keep_up = topology_keeper(Path(out)) if args.keep_topology else None
    why = exp.rebuilt_why() if args.keep_topology else ""
    if why:
        log.warning("--keep-topology ignored: the topology is rebuilt for every run, as %s", why)
    try:
        with signals_raise(), place(args.cluster) as where:
            run_experiment(exp, Path(out), keep_up=keep_up, resume=args.resume,
                           quiet=args.quiet or args.no_progress,
                           where=where, replace=args.replace)
    except (KeyboardInterrupt, RunInterrupted):     # Ctrl-C, SIGTERM, SIGHUP
        kept = (f"the runs gathered from the workers are kept in {out} (a run that ended in the last "
                f"{POLL_S} s may not have come back)" if args.cluster else
                f"its finished runs are kept in {out}")
        print(f"testbed: experiment interrupted; {kept}; continue with:\n"
              f"  {continue_command(out, '--resume')}", file=sys.stderr)
        raise
    summary = write_all(out, prune=True)
    print(json.dumps(summary, indent=1, default=str) if args.json else text(summary))
    if not args.json:
        print(f"report: {out / 'report.html'} (also report.md, summary.json, results.csv, plots/)",
              file=sys.stderr)
    return 0


def run_report(args) -> int:
    from experiments import write_all
    from experiments.report import text
    from experiments.runner import experiment_manifest
    d = Path(args.dir)
    if not (d / "manifest.json").exists() and (d / "summary.json").is_file() and (d / "experiments").is_dir():
        raise UsageError(f"{d}: a reproduction's directory (testbed reproduce … --out {d} writes its report "
                         f"again); its experiments are {d / 'experiments'}/NAME, each one for experiment report")
    experiment_manifest(args.dir)
    summary = write_all(args.dir)
    print(json.dumps(summary, indent=1, default=str) if args.json else text(summary))
    if not args.json:
        print(f"report: {Path(args.dir) / 'report.html'}", file=sys.stderr)
    return 0
