"""Receive packet steering (RPS) for emulated links: the endpoints' receive work off the emulator's CPU.

When the emulator sends a frame into a veth, the receiving host's whole stack (IP, TCP, the
wake-up of the reading process) runs inline in that ``send()``, on the emulator's CPU: measured
on a 2-core VM with BBR at full rate on the long-haul path, 70% of the time the native loop spent
in ``send()`` was the endpoints' TCP receive processing.  Setting ``rps_cpus`` of the hosts'
interfaces to every CPU but the emulator's makes ``send()`` only queue the frame to another
CPU's backlog (``Documentation/networking/scaling.rst``).

``rps_cpus`` lives in sysfs, which shows the devices of the network namespace that mounted it;
``set_rps`` therefore runs ``python -m testbed.host.steering MASK IFNAME...`` inside the host's
namespaces, which remounts sysfs in a private mount namespace of its own (as ``ip netns exec``
does) and writes the mask.  Nothing outlives the namespace.
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Iterable

from testbed.host.namespace import run_in

CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 0x40000, 2


def rps_mask(cpus: Iterable[int]) -> str:
    """The hex CPU bitmap sysfs expects: 32-bit groups, most significant first, comma-separated."""
    bits = sum(1 << c for c in set(cpus))
    groups = []
    while True:
        groups.append(f"{bits & 0xFFFFFFFF:08x}")
        bits >>= 32
        if not bits:
            return ",".join(reversed(groups))


def set_rps(node: Any, ifnames: list[str], cpus: Iterable[int]) -> str:
    """Steer the receive processing of ``node``'s ``ifnames`` to ``cpus``; returns the mask."""
    mask = rps_mask(cpus)
    run_in(node, [sys.executable, "-m", "testbed.host.steering", mask, *ifnames])
    return mask


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def main(argv: list[str]) -> int:
    """In the target namespace: private mounts, this namespace's sysfs, then write the masks."""
    if len(argv) < 2:
        print("usage: python -m testbed.host.steering MASK IFNAME...", file=sys.stderr)
        return 2
    mask, ifnames = argv[0], argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
        libc.umount2(b"/sys", MNT_DETACH)
        _check(libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None), "mount sysfs")
        for ifname in ifnames:
            with open(f"/sys/class/net/{ifname}/queues/rx-0/rps_cpus", "w") as f:
                f.write(mask + "\n")
    except OSError as exc:
        print(f"steering: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
