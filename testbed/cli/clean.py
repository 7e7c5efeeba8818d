"""``testbed clean``: remove what crashed runs left behind (see testbed.host.lifecycle); with
``--dry-run``, say what it would remove, nothing touched (the same plan, described instead of
executed)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("clean", help="remove namespaces, processes and temp dirs of crashed runs",
                       description="End the processes recorded by runs whose owner is gone (by PID and "
                                   "start time), which frees their namespaces and veths; remove their "
                                   "temporary directories; delete the backend probe's namespaces "
                                   "(tbprobe-PID-…) whose process is gone; end the VM's guests whose "
                                   "owner is gone. Runs still in progress are left alone.")
    p.add_argument("--force", action="store_true",
                   help="also clean runs whose owner process is still alive, and probe namespaces "
                        "of an older testbed (tbprobe-XXXXXX)")
    p.add_argument("--dry-run", action="store_true",
                   help="only list what would be removed or ended (state files, processes by PID with "
                        "their command lines, namespaces, temp dirs, VM guests) and what is left alone; "
                        "nothing is touched")
    p.set_defaults(func=run)


def run(args) -> int:
    from testbed.backends import vm
    from testbed.host.lifecycle import plan_clean
    plan = plan_clean(force=args.force)
    try:
        plan.extend(vm.plan_clean(force=args.force))
    except BaseException:
        plan.release()
        raise
    lines = plan.describe() if args.dry_run else plan.execute()
    for line in lines or ["nothing to clean"]:
        print(line)
    return 0
