"""``testbed experiment``: single-factor A/B experiments (``experiments/``).

    testbed experiment list [--json]
    testbed experiment show NAME|FILE
    testbed experiment run NAME|FILE [--levels A,B] [--reps N] [--warmup N] [--seed S] [--backend B]
        [--link LINK.DIR.FIELD=VALUE ...] [--set PATH=VALUE ...] [--out DIR] [--resume]
        [--keep-topology] [--json] [--quiet]
    testbed experiment report DIR [--json]

``--set`` takes any RunSpec path (``params.requests=5``, ``topology_params.loss_down=0%``,
``socket.nodelay=true``); ``--link bottleneck.down.queue=200`` is ``--set links.bottleneck.down.queue=200``.
Everything is validated before the first run; unknown names are refused with the valid ones.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from testbed.emulator.config import add_engine_option
from testbed.spec.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("experiment", help="single-factor A/B experiments: list, show, run, report",
                       description=__doc__.split("\n\n")[0])
    esub = p.add_subparsers(dest="action", metavar="ACTION")
    esub.required = True
    ls = esub.add_parser("list", help="built-in experiments")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=run_list)
    sh = esub.add_parser("show", help="print an experiment's definition and its run order")
    sh.add_argument("experiment", metavar="NAME|FILE")
    sh.set_defaults(func=run_show)
    r = esub.add_parser("run", help="run an experiment (alternated arms, verified, resumable)")
    r.add_argument("experiment", metavar="NAME|FILE")
    r.add_argument("--levels", help="comma-separated subset of the levels, e.g. new,reuse")
    r.add_argument("--reps", type=int, help="repetitions per level (default: the definition's `reps`, see `experiment show`)")
    r.add_argument("--warmup", type=int, help="warm-up runs per level, not analysed (default: the definition's `warmup`)")
    r.add_argument("--seed", type=int, help="experiment seed (every repetition's link seed derives from it; default: the "
                   "definition's `seed`)")
    r.add_argument("--backend", choices=("auto", "netem", "userspace", "netem-uml"),
                   help="link backend (netem-uml: the whole experiment in one User-Mode Linux guest; "
                   "default: the definition's, else auto)")
    add_engine_option(r)
    r.add_argument("--link", action="append", default=[], metavar="LINK.DIR.FIELD=VALUE",
                   help="named-link override, repeatable")
    r.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="RunSpec path override, repeatable")
    r.add_argument("--out", help="experiment directory (default results/NAME-YYYYmmdd-HHMMSS)")
    r.add_argument("--results", default="results", help="root of the default --out (default: results)")
    r.add_argument("--resume", action="store_true", help="continue the experiment in --out")
    r.add_argument("--keep-topology", action="store_true",
                   help="keep the topology up across the runs of a repetition when the factor allows "
                        "(saves the bring-up per run; each run then gets its block's fidelity verdict)")
    r.add_argument("--json", action="store_true", help="print summary.json instead of the table")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=run_run)
    rp = esub.add_parser("report", help="recompute summary.json, report.md and plots of a directory")
    rp.add_argument("dir")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(func=run_report)


def _value(text: str):
    """A TOML literal (5, 0.5, true, "x") when it is one, else the string itself."""
    import tomllib
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _pairs(items: list[str], prefix: str, flag: str) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value.strip():  # an empty rate would mean 'unshaped'
            raise UsageError(f"{flag} {item!r}: give KEY=VALUE with a value")
        out[prefix + key.strip()] = _value(value.strip())
    return out


def run_list(args) -> int:
    from experiments import builtin_names, load_definition
    exps = [load_definition(n) for n in builtin_names()]
    if args.json:
        print(json.dumps([e.to_dict() for e in exps], indent=1))
        return 0
    rows = [(e.name, e.factor, " | ".join(e.labels), e.description) for e in exps]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + "  " + r[3])
    return 0


def run_show(args) -> int:
    from experiments import load_definition
    from experiments.order import schedule
    e = load_definition(args.experiment)
    print(json.dumps({**e.to_dict(), "source": e.source, "topology_may_stay_up": e.topology_may_stay_up(),
                      "schedule": [s.to_dict() for s in schedule(e)]}, indent=1))
    return 0


def run_run(args) -> int:
    from experiments import load_definition, run_experiment, write_all
    from experiments.report import text
    from experiments.runner import default_out, topology_keeper
    sets = {**_pairs(args.set, "", "--set"), **_pairs(args.link, "links.", "--link")}
    if args.backend:
        sets["backend"] = args.backend
    if args.reps is not None and args.reps < 1:
        raise UsageError(f"--reps {args.reps}: give 1 or more")
    exp = load_definition(args.experiment).with_overrides(
        levels=[x for x in args.levels.split(",") if x] if args.levels else None,
        reps=args.reps, seed=args.seed, sets=sets, warmup=args.warmup)
    exp.validate()
    if args.resume and not args.out:
        raise UsageError("--resume needs --out DIR (the experiment directory to continue)")
    if exp.base_spec().topology != "loopback":     # before its directory is made
        from testbed.run.network import require_root
        require_root(f"experiment {exp.name!r} (topology {exp.base_spec().topology!r})")
    out = args.out or default_out(exp, args.results)
    keep_up = topology_keeper(Path(out)) if args.keep_topology else None
    try:
        run_experiment(exp, Path(out), keep_up=keep_up, resume=args.resume, quiet=args.quiet)
    except KeyboardInterrupt:
        print(f"testbed: experiment interrupted; its finished runs are kept in {out}: continue with "
              f"the same command and options plus --resume --out {out}", file=sys.stderr)
        raise
    summary = write_all(out, prune=True)
    print(json.dumps(summary, indent=1, default=str) if args.json else text(summary))
    if not args.json:
        print(f"results in {out} (report.md, summary.json, plots/)", file=sys.stderr)
    return 0


def run_report(args) -> int:
    from experiments import write_all
    from experiments.report import text
    if not (Path(args.dir) / "manifest.json").is_file():
        raise UsageError(f"{args.dir}: no manifest.json; not an experiment directory")
    summary = write_all(args.dir)
    print(json.dumps(summary, indent=1, default=str) if args.json else text(summary))
    return 0
