"""Options the subcommands share, each written once (pip's ``cmdoptions``): the one-line parser,
the topology options and the KEY=VALUE parsers.

One meaning per option, in every command that has it:

- ``--set KEY=VALUE`` sets one value of the run's spec.  A bare ``KEY`` is a topology parameter
  (``--set rate_down=50mbit``, see ``testbed topo list``), unless it names one of the spec's own
  values (``backend``, ``seed``, ``timeout``, ... : ``runspec.SCALARS``); a dotted ``PATH`` is any
  RunSpec path (``--set topology_params.rate_down=50mbit`` is the same as the first;
  ``--set params.requests=5``, ``--set socket.cc=bbr``; see ``testbed/spec/runspec.py``).
  ``testbed topo up``/``show`` take the topology's paths only (``KEY``, ``topology_params.KEY``,
  ``links.LINK.DIR.FIELD``).
- ``--link LINK.DIR.FIELD=VALUE`` overrides one field of one direction of a named link; it is
  ``--set links.LINK.DIR.FIELD=VALUE``.
- ``--backend``: the link backend (``testbed.backends.BACKEND_CHOICES``); ``--engine``: the
  userspace emulator's engine; ``--seed``: the link's loss and jitter seed; ``--results``: the
  root of the results directories; ``--json``: print JSON instead of a table.

A VALUE is read as a TOML literal when it is one (``5``, ``0.5``, ``true``, ``"x"``), else as the
string given (``50mbit``, ``3%``); an empty VALUE is refused (an empty rate once meant
"unshaped": give ``unshaped``).  A delay or jitter (a KEY or FIELD naming one) stays text, so
that a bare number above 1 s is refused where links are built (``delay=10`` is 10 s: write
``10ms``; ``units.parse_delay``, ``units.names_a_delay``), after the topology's name is checked.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from testbed.backends import BACKEND_CHOICES
from testbed.emulator.config import add_engine_option
from testbed.spec.errors import UsageError
from testbed.spec.runspec import MAX_SEED, SCALARS, SEED_RANGE
from testbed.spec.schedule import STEP_INPUT
from testbed.spec.units import names_a_delay

TOPOLOGY_PATHS = ("topology_params.", "links.")


class OneLineParser(argparse.ArgumentParser):
    """Bad input is one line — what is wrong, and what is allowed where argparse knows it (the
    choices) — and exit 2, not the usage block; ``--help`` is plain text.  Every subcommand's
    parser is one too (``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def format_help(self) -> str:
        """Plain text: descriptions taken from docstrings lose their RST double backticks."""
        return super().format_help().replace("``", "")

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, with ``--opt -1s`` read as ``--opt=-1s`` (``joined_negative_values``)."""
        if args is None:
            import sys
            args = sys.argv[1:]
        return super().parse_known_args(self.joined_negative_values(list(args)), namespace)

    def joined_negative_values(self, args: list[str]) -> list[str]:
        """``args`` with every value that looks like a negative number (``-1s``, ``-5%``,
        ``-0.5``, ``-1e3``) joined to the option of this parser before it when that option takes
        one value: ``--think -1s`` → ``--think=-1s``.  argparse takes an argument that starts
        with '-' and is not a plain number for an option ("expected one argument"), so the
        option's own check never saw the value and never said what it allows.  Nothing is
        joined after ``--`` or after an option that takes the rest of the line (``--exec``);
        each subcommand's parser joins its own options (argparse hands it its arguments)."""
        out: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            action = self._option_string_actions.get(arg) if arg.startswith("-") else None
            if arg == "--" or (action is not None and action.nargs == argparse.REMAINDER):
                return out + args[i:]
            following = args[i + 1] if i + 1 < len(args) else None
            if (action is not None and action.nargs in (None, 1) and following is not None
                    and NEGATIVE_VALUE.match(following) and following not in self._option_string_actions):
                out.append(f"{arg}={following}" if arg.startswith("--") else arg + following)
                i += 2
                continue
            out.append(arg)
            i += 1
        return out


#: an argument that is a value, not an option: '-' and a digit or '.digit' (-1s, -5%, -0.5, -.5)
NEGATIVE_VALUE = re.compile(r"-\.?\d")


def one_line(text: str, limit: int = 600) -> str:
    """A message on one line: its lines joined with ' | ', cut at ``limit`` characters."""
    line = " | ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return line if len(line) <= limit else line[:limit - 1] + "…"


# --- options -----------------------------------------------------------------------------------

def add_topo(p: argparse.ArgumentParser) -> None:
    """``--topo NAME``: the topology of a run."""
    p.add_argument("--topo", default="longhaul",
                   help="topology name (testbed topo list), a .py file that registers one, or "
                        "'loopback' (127.0.0.1, no root) (default: longhaul)")


def add_set_link(p: argparse.ArgumentParser, topology_only: bool = False) -> None:
    """``--set`` and ``--link`` (see the module docstring); ``topology_only``: a command without
    a run (``topo up``/``show``) takes the topology's paths only."""
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE" if topology_only else "KEY|PATH=VALUE",
                   help="a topology parameter (KEY, see `testbed topo list`)" + (
                       "" if topology_only else " or a RunSpec path (PATH, e.g. params.requests, "
                                                "socket.cc, seed)") + "; repeatable")
    p.add_argument("--link", dest="link", action="append", default=[], metavar="LINK.DIR.FIELD=VALUE",
                   help="override one field of one direction of a named link, e.g. "
                        "bottleneck.down.loss=3%%, access2.up.queue=50 (see `testbed topo show NAME`); "
                        "repeatable")


def add_backend(p: argparse.ArgumentParser, default: str | None = "auto",
                choices: tuple[str, ...] = BACKEND_CHOICES, what: str = "") -> None:
    """``--backend`` (``default`` None: the experiment definition's, else auto)."""
    shown = "the definition's, else auto" if default is None else default
    p.add_argument("--backend", default=default, choices=choices,
                   help=f"link backend{what} (auto: netem where the kernel has it, else userspace"
                        + ("; netem-uml: the command in a User-Mode Linux guest with netem"
                           if "netem-uml" in choices else "")
                        + ("; netem-vm: the command in the qemu VM with netem (docs/vm.md)"
                           if "netem-vm" in choices else "") + f") (default: {shown})")


def seed(text: str) -> int:
    """An argparse type: a seed, a whole number from 0 to ``runspec.MAX_SEED`` (as a run's, so
    netem takes each link direction's seed)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r}: give {SEED_RANGE}")
    return value


def add_seed(p: argparse.ArgumentParser, default: int | None = 1,
             help: str = "seed of the loss and jitter generators") -> None:
    p.add_argument("--seed", type=seed, default=default,
                   help=help + ("" if default is None else f" (default: {default})"))


def _writable_path(text: str, want_dir: bool) -> str:
    """``text`` when a directory (``want_dir``) or a file can be made or written there; else an
    ArgumentTypeError naming what is in the way."""
    want = "a directory" if want_dir else "a file"
    if not text:
        raise argparse.ArgumentTypeError(f"an empty path; give {want} (created if missing)")
    path = Path(text)
    if path.is_dir() != want_dir and path.exists():
        raise argparse.ArgumentTypeError(f"{text} is not {want}; give {want} (created if missing)")
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise argparse.ArgumentTypeError(f"{text}: {blocked} is a file, so nothing can be made "
                                         f"under it; give {want} whose parents are directories")
    return text


def directory_path(text: str) -> str:
    """An argparse type: a directory to write into, made when missing."""
    return _writable_path(text, True)


def file_path(text: str) -> str:
    """An argparse type: a file to write."""
    return _writable_path(text, False)


def directory_to_read(text: str) -> str:
    """An argparse type: a directory to read, which a command reports when it is missing."""
    if not text or (Path(text).exists() and not Path(text).is_dir()):
        raise argparse.ArgumentTypeError(f"{text or 'an empty path'} is not a directory; give the "
                                         "directory the results were written to")
    return text


def add_results(p: argparse.ArgumentParser, what: str = "run results", read: bool = False) -> None:
    """``--results DIR``: where ``what`` is written, or with ``read`` read from."""
    p.add_argument("--results", type=directory_to_read if read else directory_path, default="results",
                   metavar="DIR",
                   help=f"directory {'of' if read else 'for'} {what} (default: results)")


def add_cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the repetition blocks on Dask workers: local:N (N workers on this machine, "
                        "taking turns), tcp://HOST:PORT (loopback only) or tls://HOST:PORT "
                        "(docs/campaigns.md); default: here, in this process")


def add_json(p: argparse.ArgumentParser, help: str = "print JSON instead of a table") -> None:
    p.add_argument("--json", action="store_true", help=help)


def add_topology_args(p: argparse.ArgumentParser, topology_only: bool = False) -> None:
    """What every command that brings a topology up shares: ``--set``, ``--link``,
    ``--backend``, ``--seed``, ``--engine``, ``--results``."""
    add_set_link(p, topology_only)
    add_backend(p)
    add_seed(p)
    add_engine_option(p)
    add_results(p)


# --- KEY=VALUE ---------------------------------------------------------------------------------

def value(text: str) -> Any:
    """A TOML literal (5, 0.5, true, "x") when ``text`` is one, else ``text`` itself."""
    import tomllib
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def key_values(items: list[str], flag: str, form: str = "KEY=VALUE", example: str = "") -> dict[str, Any]:
    """``KEY=VALUE`` items → {KEY: value}; UsageError for an item without a key or a value, or a
    key given twice (which value is meant, or whether two steps of a link field add up, is not
    for the command line to guess)."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or not text.strip():
            raise UsageError(f"{flag} {item!r}: expected {form} with a value"
                             + (f", e.g. {flag} {example}" if example else "")
                             + " (a rate may be 'unshaped')")
        if key.strip() in out:
            link, _, name = key.strip().rpartition(".")
            hint = (f"; several steps of {name} go in one schedule: --link "
                    f"'{link}.schedule={name}=VALUE@MOMENT;{name}=VALUE@MOMENT'"
                    if flag == "--link" and name in STEP_INPUT else "")
            raise UsageError(f"{flag} {key.strip()} given twice; allowed: each key once{hint}")
        # a delay stays text: "10" is refused where it is parsed (10 s: write 10ms), after the
        # topology's name is checked, not read by TOML as the number 10 (seconds)
        out[key.strip()] = text.strip() if names_a_delay(key) else value(text.strip())
    return out


def spec_sets(sets: list[str], links: list[str]) -> dict[str, Any]:
    """``--set`` and ``--link`` items → {RunSpec path: value} (see the module docstring)."""
    out = {(k if "." in k or k in SCALARS else f"topology_params.{k}"): v
           for k, v in key_values(sets, "--set", "KEY=VALUE", "rate_down=50mbit").items()}
    for k, v in key_values(links, "--link", "LINK.DIR.FIELD=VALUE", "bottleneck.down.loss=3%").items():
        if k.count(".") != 2:
            raise UsageError(f"--link {k}={v}: expected LINK.DIR.FIELD=VALUE, e.g. "
                             "--link bottleneck.down.loss=3%")
        out[f"links.{k}"] = v
    return out


def topology_sets(sets: list[str], links: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(topology parameters, link overrides) of ``--set``/``--link`` on a command without a run;
    UsageError for a path that is not the topology's."""
    params, link = {}, {}
    for path, v in spec_sets(sets, links).items():
        if not path.startswith(TOPOLOGY_PATHS):
            raise UsageError(f"--set {path}: this command brings up a topology only; give a "
                             "topology parameter (KEY or topology_params.KEY) or a link "
                             "(links.LINK.DIR.FIELD)")
        head, _, key = path.partition(".")
        (params if head == "topology_params" else link)[key] = v
    return params, link
