"""``testbed trace show FILE``: a Mahimahi link trace's mean, min and max rate (per window),
period and opportunities, and with ``--plot`` its rate over one loop as a figure;
``testbed trace make KIND ... --out FILE``: write a trace from one of the generators of
``testbed.spec.traces`` (constant, alternating, on-off, markov).  A trace is used with
``--link LINK.DIR.trace=FILE`` or ``[trace] file = ...`` in a schedule (docs/links-and-emulator.md)."""
from __future__ import annotations

from testbed.cli.options import add_json, seed

KINDS = ("constant", "alternating", "on-off", "markov")
#: each kind's options of ``trace make``: (required, optional); another kind's option is refused
OPTIONS = {"constant": (("rate",), ("duration",)), "alternating": (("rates", "interval"), ("cycles",)),
           "on-off": (("rate", "on", "off"), ()), "markov": (("rates", "dwell", "duration"), ("seed",))}


def register(sub) -> None:
    from testbed.spec.traces import MAX_WINDOWS, WINDOW_OPPORTUNITIES
    p = sub.add_parser("trace", help="show a link trace's rates, or make one from a generator",
                       description=__doc__)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser("show", help="mean/min/max rate, period, opportunities; --plot a figure")
    show.add_argument("file", metavar="FILE", help="a Mahimahi trace (one integer ms per line)")
    show.add_argument("--window", help="window of the min/max rate and the plot (default: the "
                      "trace's own, the shortest of 1, 2 or 5 x 10^k ms that holds "
                      f"{WINDOW_OPPORTUNITIES} delivery opportunities at its mean rate and cuts a "
                      f"loop into at most {MAX_WINDOWS} windows; e.g. 100ms for 6 and 24 Mbit/s "
                      "alternating every 500 ms)")
    show.add_argument("--plot", metavar="FILE.png", help="draw the rate per window (PNG, with SVG "
                      "and PDF beside it)")
    add_json(show)
    show.set_defaults(func=run_show)
    make = actions.add_parser("make", help="write a trace from a generator",
                              description="KIND: constant --rate R [--duration D]; alternating "
                                          "--rates R1,R2,... --interval D [--cycles N]; on-off --rate R "
                                          "--on D --off D; markov --rates R1,R2,... --dwell D "
                                          "--duration D --seed N.")
    make.add_argument("kind", choices=KINDS, metavar="KIND", help=", ".join(KINDS))
    make.add_argument("--out", "-o", required=True, metavar="FILE", help="the trace file to write")
    make.add_argument("--rate", help="rate (constant, on-off), e.g. 12mbit")
    make.add_argument("--rates", help="comma-separated rates (alternating, markov), e.g. 6mbit,24mbit")
    make.add_argument("--duration", help="one loop (constant: default 1s; markov)")
    make.add_argument("--interval", help="time at each rate (alternating)")
    make.add_argument("--cycles", type=int, help="cycles per loop (alternating; default 1)")
    make.add_argument("--on", help="time on (on-off)")
    make.add_argument("--off", help="time off (on-off)")
    make.add_argument("--dwell", help="mean time in a state (markov)")
    make.add_argument("--seed", type=seed, help="seed (markov; default 1)")
    make.set_defaults(func=run_make)


def _option(flag: str, text: str, parse):
    """``parse(text)``, with a ValueError's message naming the option as written."""
    try:
        return parse(text)
    except ValueError as exc:
        raise ValueError(f"{flag} {text}: {exc}") from None


def _stats_line(trace, stats) -> str:
    return (f"{trace.source}: mean {stats.mean_bps / 1e6:.3f} Mbit/s, min {stats.min_bps / 1e6:.3f} "
            f"and max {stats.max_bps / 1e6:.3f} Mbit/s per {stats.window:g} s window, period "
            f"{stats.period:g} s, {stats.opportunities} opportunities of 1504 B per loop")


def run_show(args) -> int:
    import dataclasses
    import json
    from pathlib import Path

    from testbed.spec.schedule import Trace
    from testbed.spec.traces import trace_stats
    from testbed.spec.units import parse_time
    window = None if args.window is None else _option("--window", args.window, parse_time)
    if window is not None and not window > 0:
        raise ValueError(f"--window {args.window}: must be > 0 s, e.g. 100ms (or leave --window out "
                         "for the trace's own)")
    trace = Trace.load(args.file)
    stats = trace_stats(trace, window)
    written = []
    if args.plot:
        from analysis.plots import trace_rate
        written = trace_rate(trace, Path(args.plot).with_suffix(""), stats.window)
    if args.json:
        print(json.dumps({"file": args.file, **dataclasses.asdict(stats), "plots": written}, indent=1))
        return 0
    print(_stats_line(trace, stats))
    for path in written:
        print(f"wrote {path}")
    return 0


def run_make(args) -> int:
    from pathlib import Path

    from testbed.spec import traces
    from testbed.spec.units import parse_rate, parse_time

    required, optional = OPTIONS[args.kind]
    foreign = [n for n in dict.fromkeys(n for r, o in OPTIONS.values() for n in r + o)
               if getattr(args, n) is not None and n not in required + optional]
    if foreign:
        raise ValueError(f"trace make {args.kind}: " + "; ".join(
            f"--{n} is an option of {' and '.join(k for k, (r, o) in OPTIONS.items() if n in r + o)}"
            for n in foreign) + f" (give {args.kind} {', '.join('--' + n for n in required + optional)})")
    missing = [f"--{n}" for n in required if getattr(args, n) is None]
    if missing:
        raise ValueError(f"trace make {args.kind} needs {' and '.join(missing)}")

    def rates():
        return [_option("--rates", r.strip(), parse_rate) for r in args.rates.split(",") if r.strip()]

    def rate():
        return _option("--rate", args.rate, parse_rate)

    def seconds(name: str, default: str | None = None):
        text = getattr(args, name)
        return parse_time(default) if text is None else _option(f"--{name}", text, parse_time)

    if args.kind == "constant":
        trace = traces.constant(rate(), seconds("duration", "1s"))
    elif args.kind == "alternating":
        cycles = 1 if args.cycles is None else args.cycles
        if cycles < 1:
            raise ValueError(f"--cycles {cycles}: must be >= 1")
        trace = traces.alternating(rates(), seconds("interval"), cycles)
    elif args.kind == "on-off":
        trace = traces.on_off(rate(), seconds("on"), seconds("off"))
    else:
        trace = traces.markov(rates(), seconds("dwell"), seconds("duration"),
                              1 if args.seed is None else args.seed)
    try:
        Path(args.out).write_text(trace.to_text())
    except OSError as exc:
        raise ValueError(f"--out {args.out}: cannot write the trace ({exc.strerror})") from None
    print(f"wrote {args.out}: {_stats_line(trace, traces.trace_stats(trace))}")
    return 0
