"""``testbed run WORKLOAD``: parse the command line into a RunSpec, ``execute`` it, print.

    testbed run reqresp --topo longhaul --set loss_down=0% --mode reuse --requests 10 \\
        --cc bbr --window 64KB --ack max:10ms --initcwnd 10 --capture client
    testbed run reqresp --topo longhaul --tls --tls-resume --requests 10
    testbed run reqresp --topo relay --path relay --mode new --requests 10
    testbed run reqresp --topo longhaul --transport udp --fec adaptive --loss-prior 14%
    testbed run reqresp --topo dualpath --link access2.up.queue=50 --link egress.down.loss=1%
    testbed run bulk --topo longhaul --size 30MB --direction up
    testbed run audio --topo longhaul --transport udp --duration 5s --buffer 40ms,45ms
    testbed run agent --topo longhaul --rounds 30 --reuse
    testbed run reqresp --topo loopback ...     # 127.0.0.1, no root, no host factors

``--set``, ``--link``, ``--backend``, ``--engine``, ``--seed`` and ``--results`` mean what they
mean in every command (``testbed/cli/options.py``): ``--set KEY=VALUE`` a topology parameter,
``--set PATH=VALUE`` any RunSpec path (applied after the other options).  Every workload option
comes from the workload's params dataclass (``testbed/workloads/``), every factor option from
the factor registry (``testbed/spec/factors.py``); what the options mean and where each applies
is written there once.  The run directory and its manifest are
described in ``testbed/run/execute.py`` and ``testbed/spec/runresult.py``.

A refused workload parameter is named as it was given here: ``--think`` for the option,
``--set params.think`` for a ``--set`` (``as_given``); the library names it ``params.think``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from pathlib import Path

from testbed import workloads
from testbed.apps import ccusage
from testbed.cli.options import add_json, add_topo, add_topology_args, spec_sets
from testbed.spec import factors
from testbed.spec.errors import RunError, UsageError
from testbed.spec.runspec import ALIASES, CaptureSpec, RunSpec, resolve_alias


def register(sub) -> None:
    p = sub.add_parser("run", help="run a workload on a topology (" + ", ".join(workloads.all_workloads()) + ")",
                       description="Run one workload on a topology into one run directory: captures on "
                                   "every host interface, JSONL event logs, manifest.json (testbed "
                                   "analyze reads it). `testbed run WORKLOAD --help` lists the "
                                   "workload's parameters and the socket and host factors, each with "
                                   "its default.")
    wsub = p.add_subparsers(dest="workload", metavar="WORKLOAD")
    wsub.required = True
    for name, w in workloads.all_workloads().items():
        aliases = [a for a, (target, _) in ALIASES.items() if target == name]
        fixed = "; ".join(f"{a} is {name} with " + ", ".join(f"--{k} {v}" for k, v in ALIASES[a][1].items())
                          for a in aliases)
        wp = wsub.add_parser(name, help=w.help, aliases=aliases,
                             description=f"{name}: {w.help}" + (f" ({fixed})" if fixed else ""))
        _add_common(wp)
        workloads.add_params(wp.add_argument_group(f"{name} parameters"), w.params, defaults=False)
        if w.socket_factors:
            factors.add_arguments(wp, "socket", "socket factors (both ends, before listen/connect)")
        factors.add_arguments(wp, "host", "host factors (both end hosts' namespaces)")
        wp.set_defaults(func=run, check_in_guest=check_in_guest)


def _add_common(p) -> None:
    add_topo(p)
    add_topology_args(p)
    p.add_argument("--client-host", metavar="HOST", help="host of the client (default: the topology's client role)")
    p.add_argument("--server-host", metavar="HOST", help="host of the server (default: the topology's server role)")
    p.add_argument("--capture", default="all", metavar="all|none|HOST,...",
                   help="tcpdump (headers only) on every interface of these hosts (default: all)")
    p.add_argument("--full-payload", action="store_true", help="capture whole frames")
    p.add_argument("--discard-pcaps", action="store_true",
                   help="delete the pcaps once the metrics are computed")
    p.add_argument("--timeout", default=600.0, type=float, metavar="SECONDS",
                   help="seconds the client may take (default: 600)")
    add_json(p, "print the run id, directory, status, metrics, fidelity verdict and check read-backs "
                "(per link direction: frames, random losses, loss fraction with its interval) as JSON")


def spec_from_args(args) -> RunSpec:
    """The RunSpec of a ``testbed run`` command line (only what was given; defaults stay in the
    registries); ``--set``/``--link`` paths are applied last."""
    w = workloads.get(resolve_alias(args.workload, {})[0])
    spec = RunSpec(
        topology=args.topo, backend=args.backend, seed=args.seed,
        workload=args.workload, params=workloads.from_args(args, w.params),
        socket=factors.from_args(args, "socket"), host=factors.from_args(args, "host"),
        capture=CaptureSpec(args.capture, args.full_payload, not args.discard_pcaps),
        client_host=args.client_host, server_host=args.server_host, timeout=args.timeout)
    sets = spec_sets(args.overrides, args.link)
    for path, option in (("topology", "--topo"), ("workload", "the command's WORKLOAD")):
        if path in sets:
            raise UsageError(f"--set {path}={sets[path]}: the {path} is {option}, not a --set")
    for path, value in sets.items():
        spec = spec.set(path, value)
    return spec


@contextlib.contextmanager
def as_given(args):
    """A workload parameter refused in the block (``workloads.ParamError``, which names it
    ``params.NAME``) named as this command line gave it: ``--set params.NAME`` when a ``--set``
    gave it (that one wins), else its option ``--NAME``."""
    try:
        yield
    except workloads.ParamError as exc:
        sets = {item.partition("=")[0].strip() for item in args.overrides}
        raise UsageError(exc.render(lambda name: f"--set {workloads.spec_path(name)}"
                                    if workloads.spec_path(name) in sets else workloads.option(name)),
                         run_dir=exc.run_dir) from None


def check_in_guest(args) -> None:
    """Refuse here, before a guest boots, what the guest would refuse on reading this command
    (``--backend netem-uml``/``netem-vm`` re-run it there with ``--backend netem``): UsageError."""
    from testbed.run.plan import resolve
    with as_given(args):
        resolve(spec_from_args(argparse.Namespace(**{**vars(args), "backend": "netem"})))


def _print_json(result) -> None:
    """The run as JSON: id, directory, status, metrics, the fidelity verdict, the check
    read-backs (``links``: every link direction's frame-log read-back, experiments.checks) and,
    with a link schedule, its changes (``link_changes``, as in the manifest)."""
    from experiments.checks import link_readbacks
    fid = result.fidelity or {}
    print(json.dumps({"run_id": result.run_id, "dir": str(result.dir), "status": result.status,
                      "error": result.error, "metrics": result.metrics,
                      "fidelity": {k: fid.get(k) for k in ("verdict", "reasons", "warnings", "backend",
                                                           "unintended_drops", "links") if k in fid},
                      "checks": result.checks, "links": link_readbacks(result.dir),
                      **({"link_changes": result.link_changes} if result.link_changes else {})},
                     indent=1, default=str))


def run(args) -> int:
    from testbed.run.execute import execute
    from testbed.host.lifecycle import new_run_id
    spec = spec_from_args(args)
    run_id = new_run_id()
    from testbed.cli.progress import RunProgress, interactive
    with RunProgress(Path(args.results) / run_id, enabled=interactive(getattr(args, "quiet", False) or args.json)):
        try:
            with as_given(args):
                result = execute(spec, Path(args.results) / run_id, run_id=run_id)
        except RunError as exc:             # a failed run: its record too, then the error
            if args.json and exc.result is not None:
                _print_json(exc.result)
            raise
    if args.json:
        _print_json(result)
        return 0
    print_client_output(result.dir / "client.stdout")
    print(f"results in {result.dir} (every metric and check: testbed analyze {result.dir})")
    return 0


def print_client_output(path: Path) -> None:
    """The client's result lines on stdout; its notes (``ccusage.NOTE``), diagnostics, as
    warnings on stderr, which ``-q`` silences."""
    if not path.exists():
        return
    for line in path.read_text(errors="replace").splitlines(keepends=True):
        if line.startswith(ccusage.NOTE):
            logging.getLogger(__name__).warning("%s", line.removeprefix(ccusage.NOTE).strip())
        else:
            sys.stdout.write(line)
