"""The in-host programs' command lines, derived from their workload records (one default each)."""
from __future__ import annotations

import argparse
from typing import Callable

from testbed.workloads import Workload, add_params
from testbed.apps.tcpopts import add_socket_arguments


def app_parser(workload: Workload, doc: str, run_server: Callable, run_client: Callable):
    """The in-host program's command line, derived from its workload record (``testbed.workloads``):
    ``python -m`` its ``module``, ``server --listen`` (default: its ``port``) and ``client
    --server``, each with ``--log``, its side's ``params`` fields that apply to its transport and,
    for a TCP program that takes them (``socket_factors``), the socket factors.  Returns
    ``(parser, server, client)`` so a program can add options of its own."""
    port, transport = workload.port, workload.transport or "tcp"
    p = argparse.ArgumentParser(prog=f"python -m {workload.module}", description=doc.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--listen", default=f":{port}", help=f"HOST:PORT to listen on (default: :{port})")
    s.set_defaults(func=run_server)
    c = sub.add_parser("client")
    c.add_argument("--server", required=True, help="HOST:PORT of the server")
    c.set_defaults(func=run_client)
    for q, side in ((s, "server"), (c, "client")):
        add_params(q, workload.params, (side, "both"), transport=transport)
        q.add_argument("--log", default="-", help="JSONL event log path ('-' = stdout) (default: -)")
        if workload.socket_factors and transport == "tcp":
            add_socket_arguments(q)
    return p, s, c


def app_main(build_parser: Callable, argv: list[str] | None = None) -> int:
    """Parse argv with the program's parser and run the chosen side."""
    args = build_parser().parse_args(argv)
    return args.func(args)
