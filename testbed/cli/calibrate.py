"""``testbed calibrate [--rate R] [--delay D] [--loss-up P] [--loss-down P] [--packets N]
[--schedule FILE] [--overflow RATE] [--backend B] [--engine E] [--seed S] [--results DIR]
[--json]``: measure the long-haul link with real packets, configured vs measured with pass/fail
(``testbed.calibrate.link``; the overflow train: ``testbed.calibrate.overflow``;
with ``--schedule``, in each interval of the schedule: ``testbed.calibrate.schedule``); exit 0
when every check passes, else 1."""
from __future__ import annotations

import json

from testbed.cli.options import add_backend, add_json, add_results, add_seed
from testbed.emulator.config import add_engine_option


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="measure an emulated link with real packets, configured "
                                         "vs measured with pass/fail")
    p.add_argument("--rate", default="333mbit", help="bottleneck rate, both directions (default 333mbit)")
    p.add_argument("--delay", default="100ms", help="one-way delay, each direction (default 100ms)")
    p.add_argument("--loss-up", default="0%", help="client→server loss (default 0%%)")
    p.add_argument("--loss-down", default="14%", help="server→client loss (default 14%%)")
    p.add_argument("--schedule", metavar="FILE",
                   help="a link schedule (TOML/JSON, time-tied steps and outages) on both directions: "
                        "rate, delay and loss measured in each of its intervals (default: none, a constant link)")
    add_backend(p)
    add_engine_option(p)
    p.add_argument("--packets", type=int,
                   help="datagrams per direction for the loss measurement, from 1000 to 1,000,000 "
                        "(default: 10000)")
    p.add_argument("--overflow", metavar="RATE",
                   help="offered rate of the overflow train up, into the link's full queue ('none': "
                        "no train) (default: 600mbit where --rate is below it, outside a UML or VM guest, "
                        "else none)")
    add_seed(p, help="seed of the loss generators")
    add_results(p)
    add_json(p, "print the result as JSON")
    p.set_defaults(func=run, check_in_guest=check_in_guest)


def check_values(args) -> None:
    """Refuse a --rate, --delay, --loss-up or --loss-down the link cannot take, naming the
    option (the parsers' own messages say what is allowed)."""
    from testbed.spec.errors import UsageError
    from testbed.spec.units import parse_delay, parse_probability, parse_rate
    def loss(text):
        if not 0 <= parse_probability(text) <= 1:
            raise ValueError("outside [0, 1]; give a probability like 0.14 or 14%")

    if args.schedule is not None and not args.schedule.strip():
        raise UsageError(f"--schedule {args.schedule!r}: an empty path; give a link schedule file "
                         "(.toml or .json), or leave --schedule out for a constant link")
    for flag, text, parse in (("--rate", args.rate, lambda v: str(v).lower() in ("unshaped", "none") or parse_rate(v)),
                              ("--delay", args.delay, lambda v: parse_delay(v, "--delay")),
                              ("--loss-up", args.loss_up, loss), ("--loss-down", args.loss_down, loss),
                              ("--overflow", args.overflow,
                               lambda v: v is None or str(v).lower() == "none" or parse_rate(v))):
        try:
            parse(text)
        except ValueError as exc:
            raise UsageError(str(exc) if str(exc).startswith(flag) else f"{flag} {text}: {exc}") from None


def check_in_guest(args) -> None:
    """Refuse here, before a guest boots, what the guest would refuse on reading this command
    (``--backend netem-uml``/``netem-vm`` re-run it there with ``--backend netem``): a value no
    link takes (``check_values``); a UML guest calibrates a constant link at up to
    ``link.UML_RATE_MAX`` (``link.check_uml_rate``)."""
    check_values(args)
    if args.backend == "netem-uml" and not args.schedule:
        from testbed.calibrate.link import check_uml_rate
        check_uml_rate(args.rate)


def run_verdict(run_dir) -> dict | None:
    """The run's link fidelity verdict (``emulator.fidelity.of_run`` on its ``metadata.json``),
    the same one ``testbed run`` records; None without metadata."""
    from pathlib import Path

    from testbed.emulator import fidelity
    path = Path(run_dir) / "metadata.json"
    return fidelity.of_run(json.loads(path.read_text())) if path.exists() else None


def run(args) -> int:
    from testbed.calibrate import guest
    from testbed.calibrate.link import calibrate
    from testbed.calibrate.schedule import calibrate_schedule
    from testbed.spec.errors import UsageError
    check_values(args)                      # "--delay 10" is 10 s: refused before anything starts
    if args.schedule is not None:           # the checks of every interval of the schedule
        given = [o for o, v in (("--packets", args.packets), ("--overflow", args.overflow)) if v is not None]
        if given:
            raise UsageError(f"--schedule measures each interval with its own probes, so "
                             f"{', '.join(given)} would do nothing; leave them out, or calibrate a "
                             "constant link without --schedule")
        out = calibrate_schedule(args.schedule, args.rate, args.delay, args.loss_up, args.loss_down,
                                 args.backend, args.seed, args.results)
    else:
        packets = {} if args.packets is None else {"packets": args.packets}   # default: calibrate's
        out = calibrate(args.rate, args.delay, args.loss_up, args.loss_down, args.backend, seed=args.seed,
                        results=args.results, overflow=args.overflow, **packets)
    verdict = _add_verdict(out)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0 if out["ok"] else 1
    what = (f"schedule {args.schedule} on both directions, {len(out['intervals'])} intervals, "
            if args.schedule is not None else "")
    where = guest()
    print(f"calibrate: {what}backend {out['backend']}{f' in {where}' if where else ''}, "
          f"results in {out['run_dir']}")
    _print_checks(out["checks"])
    if not args.schedule:
        rtt = out["measured"]["rtt_ms"]
        print(f"RTT min {rtt['min']:.3f} ms over {rtt['echoed']}/{rtt['probes']} echoed probes")
        if out["measured"].get("overflow"):
            print(overflow_line(out["measured"]["overflow"]))
    _print_tail(out, verdict)
    return 0 if out["ok"] else 1


def overflow_line(o: dict) -> str:
    """The overflow train in one line: offered and delivered rate, loss, drops by reason, its
    run's verdict."""
    d, f = o["drops"], o.get("fidelity") or {}
    loss = "-" if o["loss"] is None else f"{o['loss']:.4f}"
    offered, delivered = ("-" if x is None else f"{x:.1f}" for x in (o["offered_mbps"], o.get("delivered_mbps")))
    return (f"overflow train: offered {offered} Mbit/s (target {o['offered_target_mbps']:g}) into "
            f"{o['rate_mbps']:g} Mbit/s, delivered at {delivered}, loss {loss} over the {o['window']} "
            f"datagrams from the queue's first overflow on; drops: {_drops_text(d)}; "
            f"its run's link fidelity: {f.get('verdict', 'unknown')} ({o['run_dir']})")


def _drops_text(d: dict) -> str:
    """The overflow train's drops by reason; netem's qdisc counts them only together."""
    def n(x):
        return "–" if x is None else str(x)
    if all(d.get(k) is None for k in ("queue", "random_loss", "emulator_unintended")):
        qdisc = d.get("qdisc")
        if isinstance(qdisc, dict):     # per qdisc, from tc -s: {"htb": n, "netem": n}
            qdisc = ", ".join(f"{k} {v}" for k, v in qdisc.items())
        link = ("unknown by reason (netem gives no per-reason counts"
                + (f"; tc -s counted {qdisc} in all)" if qdisc is not None else ")"))
    else:
        link = (f"queue {n(d['queue'])}, random loss {n(d['random_loss'])}, "
                f"the emulator's own {n(d['emulator_unintended'])}")
    return f"{link}, receive path {n(d['receive_path'])}"


def _add_verdict(out: dict) -> dict | None:
    """The run's fidelity verdict (None without one), also put in ``out["fidelity"]``."""
    verdict = run_verdict(out["run_dir"])
    if verdict is not None:
        out["fidelity"] = {k: verdict.get(k) for k in ("verdict", "cause", "cause_figures",
                                                       "reasons", "warnings")}
    return verdict


def _print_checks(checks: list[dict]) -> None:
    width = max([28] + [len(c["check"]) for c in checks])
    print(f"{'check':{width}} {'configured':>12} {'measured':>12}  result  tolerance")
    for c in checks:
        conf = "-" if c["configured"] is None else f"{c['configured']:.6g}"
        meas = "-" if c["measured"] is None else f"{c['measured']:.6g}"
        print(f"{c['check']:{width}} {conf:>12} {meas:>12}  {'pass' if c['ok'] else 'FAIL':6}  "
              f"{c['tolerance']}")
    for c in checks:
        if c.get("why"):
            print(f"{c['check']}: {c['why']}")


def _print_tail(out: dict, verdict: dict | None) -> None:
    """The emulator's figures, the run's verdict line, OK / NOT OK."""
    from testbed.emulator import fidelity
    e = out["emulator"]
    if e.get("sched_error_us"):
        s = e["sched_error_us"]
        print(f"emulator scheduling error p50 {s['p50']} µs, p99 {s['p99']} µs, max {s['max']} µs; "
              f"CPU {e['cpu_percent']}% of a core")
    if verdict is not None and verdict["verdict"] != "unknown":
        print(fidelity.line(verdict))       # the run's verdict: the machine or the engine to blame
    else:
        for w in e.get("warnings", []):
            print(f"emulator warning: {w}")
    print("OK" if out["ok"] else "NOT OK")
