"""The ``testbed`` command line. Each subcommand lives in its own module, which exposes
``register(subparsers)`` and only parses, calls the library and prints; modules import their
heavy dependencies inside ``run``.  Options several subcommands share are written once, in
``testbed.cli.options``.

Errors are handled here, once: ``testbed.spec.errors.UsageError`` (and ValueError) → exit 2,
SetupError / RunError → exit 1, each as one line ``testbed: error: <what failed: why>`` with the
run directory when there is one; an OSError about a path (a file where a directory was needed, a
missing or unreadable file) → exit 1, ``testbed: error: <path>: <why>``; no traceback for an
expected failure.  Library code logs with
``logging``; ``-v`` shows progress (INFO), ``-vv`` debug, ``-q`` errors only; warnings are written
above a progress bar, not through it (``testbed.cli.progress``).

Division of labour: the top layer — parse, call, print.  May import every layer (``testbed.spec``
to ``experiments``); nothing imports it but ``testbed/__main__.py`` and the ``testbed`` script.
"""
from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys

from testbed.cli import (analyze, calibrate, clean, demo, doctor, experiment, model, reproduce, results,
                         run, topo, trace, vm, worker)
from testbed.cli.options import OneLineParser, one_line
from testbed.cli.progress import warnings_above_bars
from testbed.host.lifecycle import interruption
from testbed.host.logs import log_to_stderr
from testbed.spec.errors import TestbedError

#: what an interrupted command says it left (``testbed.host.lifecycle``: its record, torn down)
TORN_DOWN = ("the processes, namespaces and temporary files it started were removed; what it wrote "
             "to its results is kept")
#: the subcommands, in the order ``testbed --help`` lists them
COMMANDS = (doctor, topo, clean, calibrate, run, analyze, demo, experiment, model, reproduce, results, worker, vm,
            trace)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="testbed",
        description="Packet-level transport research testbed: topologies with emulated links, "
                    "real stacks, captures and analysis.")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-v", "--verbose", action="count", default=0,
                          help="more output: -v progress, -vv debug (before the command)")
    loudness.add_argument("-q", "--quiet", action="store_true",
                          help="no warnings on stderr, errors only; results still print (before the command)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.register(sub)
    return parser


def setup_logging(verbose: int = 0, quiet: bool = False) -> None:
    """Log to stderr at -q's, the default's, -v's or -vv's level (``testbed.host.logs.log_to_stderr``)."""
    log_to_stderr(logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)])


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()     # looks names up: loads the user's records (TESTBED_PATH)
    except TestbedError as exc:
        print(f"testbed: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    error = parser.error

    def error_with_hint(message: str):          # `testbed run reqresp -v`: say where -v goes
        if message.startswith("unrecognized arguments") and \
                {"-v", "-vv", "-vvv", "--verbose", "-q", "--quiet"} & set(message.split()):
            message += " (-v and -q go before the command: testbed -v run …)"
        if message.startswith("unrecognized arguments") and "--resume" in message.split():
            message += " (TLS session resumption is --tls-resume; --resume continues an experiment)"
        error(message)
    parser.error = error_with_hint
    args = parser.parse_args(argv)
    setup_logging(args.verbose, args.quiet)
    try:
        if getattr(args, "backend", None) in ("netem-uml", "netem-vm"):  # a guest that fails: one line too
            if getattr(args, "check_in_guest", None) is not None:
                args.check_in_guest(args)       # bad input: one line before a guest boots
            if args.backend == "netem-vm":
                from testbed.backends.vm import run_cli_in_guest
            else:
                from testbed.backends.uml import run_cli_in_guest
            return run_cli_in_guest(list(sys.argv[1:] if argv is None else argv),
                                    results_root=getattr(args, "results", "results"))
        with warnings_above_bars():     # a warning while a bar is drawn goes above it
            return int(args.func(args) or 0)
    except TestbedError as exc:
        where = f" (run directory: {exc.run_dir})" if exc.run_dir else ""
        print(f"testbed: error: {one_line(exc)}{where}", file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:
        print(f"testbed: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except subprocess.TimeoutExpired as exc:
        print(f"testbed: error: {' '.join(map(str, exc.cmd))} did not finish within {exc.timeout:g} s",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"testbed: {interruption(exc)}; {TORN_DOWN}", file=sys.stderr)
        return 130
    except BrokenPipeError:     # `testbed … | head` stopped reading: not the command's error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1
    except OSError as exc:
        if exc.filename is None:        # not about a path: a fault to see whole
            raise
        target = f" -> {exc.filename2}" if exc.filename2 else ""
        print(f"testbed: error: {exc.filename}{target}: {exc.strerror}", file=sys.stderr)
        return 1
    except SystemExit as exc:
        if interruption(exc):
            print(f"testbed: {interruption(exc)}; {TORN_DOWN}", file=sys.stderr)
        raise
