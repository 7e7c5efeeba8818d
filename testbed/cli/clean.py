"""``testbed clean``: remove what crashed runs left behind (see testbed.host.lifecycle)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("clean", help="remove namespaces, processes and temp dirs of crashed runs",
                       description="End the processes recorded by runs whose owner is gone (by PID and "
                                   "start time), which frees their namespaces and veths; remove their "
                                   "temporary directories; delete the backend probe's namespaces "
                                   "(tbprobe-PID-…) whose process is gone. Runs still in progress "
                                   "are left alone.")
    p.add_argument("--force", action="store_true",
                   help="also clean runs whose owner process is still alive, and probe namespaces "
                        "of an older testbed (tbprobe-XXXXXX)")
    p.set_defaults(func=run)


def run(args) -> int:
    from testbed.backends import vm
    from testbed.host.lifecycle import clean
    for line in clean(force=args.force) + vm.clean(force=args.force):
        print(line)
    return 0
