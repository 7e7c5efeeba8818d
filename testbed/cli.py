"""The ``testbed`` command line. Each subcommand lives in its own module, which exposes
``register(subparsers)``; modules import their heavy dependencies inside ``run``."""
from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = [
    "testbed.doctor",
    "testbed.topo_cli",
    "testbed.clean_cli",
    "testbed.calibrate",
    "testbed.apps.cli",
    "analysis.cli",
    "testbed.demo",
    "testbed.experiment_cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="testbed",
        description="Packet-level transport research testbed: topologies with emulated links, "
                    "real stacks, captures and analysis.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "backend", None) == "netem-uml":
        from .uml import run_cli_in_guest
        return run_cli_in_guest(list(sys.argv[1:] if argv is None else argv),
                                results_root=getattr(args, "results", "results"))
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"testbed: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("testbed: interrupted; everything the run created was removed", file=sys.stderr)
        return 130
    except SystemExit as exc:
        if isinstance(exc.code, int) and exc.code >= 128:
            print(f"testbed: stopped by signal {exc.code - 128}; everything the run created was "
                  "removed", file=sys.stderr)
        raise
