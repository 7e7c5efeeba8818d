"""``testbed vm build|up|exec|down|status``: the Debian VM with real netem (testbed/backends/vm)."""
from __future__ import annotations

import argparse
import json
import math

from testbed.cli.options import add_json


def cpus(text: str) -> int:
    """An argparse type: virtual CPUs (``vm.cpus_refusal``)."""
    from testbed.backends import vm
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or vm.cpus_refusal(value) is not None:
        raise argparse.ArgumentTypeError(vm.cpus_refusal(text))     # named as written: '0'
    return value


def mem(text: str) -> str:
    """An argparse type: the guest's memory, as qemu's -m (``vm.mem_refusal``)."""
    from testbed.backends import vm
    if (why := vm.mem_refusal(text)) is not None:
        raise argparse.ArgumentTypeError(why)
    return text


def seconds(text: str) -> float:
    """An argparse type: a timeout in seconds, > 0 and finite."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds > 0, e.g. 60 "
                                         "(leave --timeout out for no limit)")
    return value


def register(sub) -> None:
    p = sub.add_parser("vm", help="the Debian VM with real netem: build, up, exec, down, status",
                       description="A Debian guest built from Debian's packages (mmdebstrap) and "
                                   "booted by qemu: KVM where a guest boots, TCG otherwise. "
                                   "`--backend netem-vm` runs a whole command in it. docs/vm.md")
    vsub = p.add_subparsers(dest="vm_command", metavar="VMCOMMAND")
    vsub.required = True
    b = vsub.add_parser("build", help="build the image (cached; rebuilt when scripts/install.sh's "
                                      "package list changes)")
    b.add_argument("--force", action="store_true", help="build even if the cached image is current")
    b.set_defaults(func=build)
    u = vsub.add_parser("up", help="boot the VM and leave it running (the checkout shared in)")
    u.add_argument("--cpus", type=cpus, default=None,
                   help="virtual CPUs, 1 to 64 (default: 1 with TCG, 2 with KVM where the host has two)")
    u.add_argument("--mem", type=mem, default="2G", help="guest memory, as qemu's -m: M or G, from 256M to the host's "
                                                         "memory (default: 2G)")
    u.set_defaults(func=up)
    e = vsub.add_parser("exec", help="run a command in the VM that is up; its exit status is ours",
                        description="Runs in the working directory when the VM shares it, else in "
                                    "the checkout (said on stderr); stdin is not forwarded. "
                                    "Everything from CMD on is the command's, its options too "
                                    "(testbed vm exec tc -s qdisc show; a -- before CMD is "
                                    "allowed); --timeout goes before CMD.")
    e.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                   help="seconds before it is ended (default: none, it may take as long as it takes)")
    e.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD ...",
                   help="the command and its arguments (no shell)")
    e.set_defaults(func=exec_)
    d = vsub.add_parser("down", help="power the VM off and remove its run state")
    d.set_defaults(func=down)
    s = vsub.add_parser("status", help="the image, what acceleration was detected, the VM that is up")
    add_json(s, "print a JSON object")
    s.set_defaults(func=status)


def build(args) -> int:
    from testbed.backends.vm import image
    img, built = image.build(force=args.force, log=print)
    m = img.meta
    print(f"{'built' if built else 'cached'}: {img.dir} (Debian {m['suite']}, kernel "
          f"{m['kernel_release']}, root file system {m['size_bytes'] >> 20} MiB, "
          f"{img.disk_bytes() >> 20} MiB on disk, built {m['built']} in "
          f"{m['build_seconds']} s)")
    return 0


def up(args) -> int:
    from testbed.backends import vm
    m = vm.up(cpus=args.cpus, mem=args.mem)
    s = m.state
    why = f"; KVM not used: {s['kvm_not_used']}" if s.get("kvm_not_used") else ""
    print(f"VM up: {s['accel']}, {s['cpus']} vCPU, {s['mem']}, kernel {s['kernel']}, ready in "
          f"{s['boot_seconds']} s (pid {s['pid']}; console {s['console']}){why}")
    print(f"shared: {', '.join(s['shares'])}")
    return 0


def exec_argv(argv: list[str]) -> list[str]:
    """The command of ``vm exec``: everything from CMD on (argparse.REMAINDER, so that ``vm exec
    uname -r`` gives ``-r`` to uname rather than failing as an unknown option of testbed), less
    a leading ``--``; UsageError when there is none."""
    from testbed.spec.errors import UsageError
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError("vm exec: no command; give one to run in the VM, e.g. "
                         "testbed vm exec uname -r")
    return argv


def exec_(args) -> int:
    from testbed.backends import vm
    from testbed.host.lifecycle import Run
    argv = exec_argv(args.argv)
    m = vm.running()
    with Run(None):         # SIGTERM and SIGHUP unwind: the command in the guest is ended too
        return m.exec(argv, timeout=args.timeout)


def down(args) -> int:
    from testbed.backends import vm
    print(vm.down())
    return 0


def status(args) -> int:
    from testbed.backends import vm
    st = vm.status()
    if args.json:
        print(json.dumps(st, indent=1))
        return 0
    img, acc, m = st["image"], st["accel"], st["vm"]
    print(f"image: {img['dir']} (kernel {img['kernel_release']}, built {img['built']})" if img
          else f"image: none for key {st['image_key']} (`testbed vm build`)")
    kvm = acc["kvm_boot"]
    print(f"acceleration: /dev/kvm {'usable' if acc['kvm_device'] else acc['kvm_device_reason']}; "
          + ("KVM boot not tried yet" if kvm is None else
             "a KVM guest booted" if kvm["booted"] else f"a KVM guest did not boot: {kvm['reason']}")
          + f"; tries {', '.join(acc['candidates'])}")
    print(f"VM: {m['accel']}, {m['cpus']} vCPU, pid {m['pid']}, {'up' if m['alive'] else 'dead'}"
          if m else "VM: not up")
    return 0
