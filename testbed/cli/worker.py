"""``testbed worker ADDRESS``: serve the runs of ``--cluster`` campaigns on this machine
(``experiments.cluster``): a Dask worker with one thread and the resource ``testbed=1``, under a
nanny that restarts it when a run kills it, until Ctrl-C or SIGTERM.  Start one per machine, as
root, in a checkout at the coordinator's git revision (docs/campaigns.md)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("worker", help="serve --cluster runs on this machine (a Dask worker)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("scheduler", metavar="ADDRESS",
                   help="the scheduler: tcp://HOST:PORT (loopback only) or tls://HOST:PORT (the "
                        "certificates from Dask's configuration, distributed.comm.tls.*)")
    p.add_argument("--name", help="the worker's name (default: this machine's host name)")
    p.set_defaults(func=run)


def run(args) -> int:
    from experiments.cluster import serve_worker
    try:
        serve_worker(args.scheduler, args.name)
    except KeyboardInterrupt:
        pass
    return 0
