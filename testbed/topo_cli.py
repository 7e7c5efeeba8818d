"""``testbed topo list`` and ``testbed topo up NAME [--set KEY=VALUE ...] [--backend B] [--cli]``."""
from __future__ import annotations

import time

from .backends import BACKEND_CHOICES
from .emulator.config import ENGINES, EngineOption


def register(sub) -> None:
    p = sub.add_parser("topo", help="list topologies or bring one up")
    tsub = p.add_subparsers(dest="topo_command", metavar="ACTION")
    tsub.required = True
    lp = tsub.add_parser("list", help="list the topologies and their parameters")
    lp.set_defaults(func=run_list)
    up = tsub.add_parser("up", help="bring a topology up, print it, tear it down on exit")
    up.add_argument("name")
    add_topology_args(up)
    up.add_argument("--cli", action="store_true", help="open Mininet's CLI to poke around")
    up.add_argument("--hold", type=float, default=0, metavar="SECONDS",
                    help="without --cli: keep the topology up this long (default: tear down at once)")
    up.set_defaults(func=run_up)


def add_topology_args(p) -> None:
    """Options every command that brings up a topology shares."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a topology parameter (see `testbed topo list`)")
    p.add_argument("--backend", default="auto", choices=BACKEND_CHOICES,
                   help="link backend (auto: netem where the kernel has it, else userspace; netem-uml: run the command in a User-Mode Linux guest with netem)")
    p.add_argument("--seed", type=int, default=1, help="seed of the loss and jitter generators")
    p.add_argument("--engine", choices=ENGINES, action=EngineOption,
                   help="userspace emulator engine (default: native where built, else python)")
    p.add_argument("--results", default="results", help="directory for run results (default: results)")


def parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. --set rate_down=50mbit")
        out[key.strip()] = value.strip()
    return out


def run_list(args) -> int:
    from topologies import TOPOLOGIES, topology_class
    for name in TOPOLOGIES:
        cls = topology_class(name)
        case = f" [{cls.chapter_case}]" if cls.chapter_case else ""
        print(f"{name}{case}: {cls.description}")
        for key, (default, help_) in cls.params.items():
            print(f"    {key:<14} {str(default):<10} {help_}")
    return 0


def run_up(args) -> int:
    from .network import Testbed
    with Testbed(args.name, backend=args.backend, overrides=parse_overrides(args.overrides),
                 results_root=args.results, seed=args.seed) as tb:
        print(f"{tb.topo.name} up with backend {tb.backend.name}; results in {tb.dir}")
        for link in tb.metadata["links"]:
            print(f"  {link['a']} → {link['b']}: {link['describe'][0]}")
            print(f"  {link['b']} → {link['a']}: {link['describe'][1]}")
        for name, info in tb.metadata["hosts"].items():
            print(f"  {name}: {', '.join(f'{i} {ip}' for i, ip in info['ips'].items())}")
        if args.cli:
            from mininet.cli import CLI
            CLI(tb.net)
        elif args.hold:
            time.sleep(args.hold)
    print("torn down")
    return 0
