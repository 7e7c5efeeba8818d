"""How fast is a User-Mode Linux guest: every UML build and mode that boots here, side by side.

    .venv/bin/python benchmarks/uml_guest.py [--seconds 3] [--boots 3]

For each build (the system's ``user-mode-linux``; the provisioned one from
``python -m testbed.backends.uml.provision``, if any) and each mode it supports (ptrace; seccomp where the
kernel has ``seccomp=on``), one table row:

- boot (s): median host wall time of ``run_in_guest(["true"])`` over ``--boots`` guests (start
  of linux.uml to its exit: boot, module loading, the init's mounts, power-off).
- send+recv pairs/s: one Python process, one UDP socket on the guest's loopback, ``sendto`` of
  64 B to itself then ``recv``, repeated for ``--seconds``; pairs per second (two syscalls each).
- echo round trips/s: a Python client and a Python UDP echo server (two processes) on the
  guest's loopback, one 64 B datagram outstanding at a time; round trips per second (four
  syscalls and two context switches each) — the rate a probe receiver/echo keeps up with.
- TCP bulk (Mbit/s): iperf3 over the guest's loopback for ``--seconds`` (1 s left out); the
  receiver's figure.

Each row records the host's kernel, the guest's kernel, and /proc/loadavg before and after:
the guest's one virtual CPU is one host thread, so other work on the host slows it first (and
the guest cannot tell: its own CPU accounting charges the time the host took away to whatever
it was running, so rates per guest CPU second equal the wall-clock rates).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PAYLOAD = b"x" * 64


def pairs_per_second(seconds: float) -> float:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    me, n = s.getsockname(), 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(100):
            s.sendto(PAYLOAD, me)
            s.recv(2048)
        n += 100
    return n / seconds


ECHO = ("import socket, sys\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 0))\n"
        "print(s.getsockname()[1], flush=True)\n"
        "while True:\n    d, a = s.recvfrom(2048)\n    s.sendto(d, a)\n")


def echo_round_trips_per_second(seconds: float) -> float:
    server = subprocess.Popen([sys.executable, "-c", ECHO], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.connect(("127.0.0.1", port))
        c.settimeout(5)
        n, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(50):
                c.send(PAYLOAD)
                c.recv(2048)
            n += 50
        return n / seconds
    finally:
        server.kill()
        server.wait()


def tcp_bulk_mbps(seconds: float) -> float:
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", "5299"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            out = subprocess.run(["ss", "-Htnl", "sport = :5299"], capture_output=True, text=True)
            if out.stdout.strip():
                break
            time.sleep(0.1)
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", "5299", "-t", str(int(seconds)),
                              "-O", "1", "--json"], capture_output=True, text=True, check=True,
                             timeout=seconds + 60)
        return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        server.wait(timeout=30)


def guest_main(seconds: float) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)  # the guest's init leaves it down
    print(json.dumps({"guest_kernel": os.uname().release,
                      "send+recv pairs/s": pairs_per_second(seconds),
                      "echo round trips/s": echo_round_trips_per_second(seconds),
                      "TCP bulk (Mbit/s)": tcp_bulk_mbps(seconds)}))


def measure(build, mode: str, seconds: float, boots: int) -> dict:
    from testbed.backends.uml import run_in_guest
    load = Path("/proc/loadavg").read_text().split()[:3]
    with tempfile.TemporaryDirectory(prefix="tb-umlbench", dir="/var/tmp") as tmp:
        durations = [run_in_guest(["true"], results_dir=Path(tmp), build=build, mode=mode).duration
                     for _ in range(boots)]
        res = run_in_guest([sys.executable, str(Path(__file__).resolve()), "--in-guest",
                            "--seconds", str(seconds)], results_dir=Path(tmp), build=build,
                           mode=mode, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"guest benchmark failed ({res.returncode}): {res.stderr.strip()}")
    return {"build": build.source, "package": build.package, "mode": mode,
            "host_kernel": os.uname().release, "boot (s)": statistics.median(durations),
            **json.loads(res.stdout.strip().splitlines()[-1]),
            "loadavg": [load, Path("/proc/loadavg").read_text().split()[:3]]}


COLUMNS = ("boot (s)", "send+recv pairs/s", "echo round trips/s", "TCP bulk (Mbit/s)")


def table(rows: list[dict]) -> str:
    head = f"{'build':12} {'guest':8} {'mode':8} " + " ".join(f"{c:>19}" for c in COLUMNS) \
        + "  host kernel, 1/5/15-min load before → after"
    lines = [head]
    for r in rows:
        lines.append(f"{r['build']:12} {r['guest_kernel']:8} {r['mode']:8} "
                     + " ".join(f"{r[c]:19.2f}" if c == "boot (s)" else f"{r[c]:19,.0f}"
                                for c in COLUMNS)
                     + f"  {r['host_kernel']}, {' '.join(r['loadavg'][0])} → {' '.join(r['loadavg'][1])}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0, help="length of each rate measurement")
    p.add_argument("--boots", type=int, default=3, help="guests booted for the boot time")
    p.add_argument("--rounds", type=int, default=2, help="rounds over all arms (order reversed "
                   "every other round); one row per arm and round")
    p.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args()
    if args.in_guest:
        guest_main(args.seconds)
        return 0
    from testbed.backends.uml import builds as ub
    arms = [(b, m) for b in (ub.system_build(), ub.provisioned_build()) if b is not None
            for m in ub.supported_modes(b)]
    rows = []
    for r in range(args.rounds):  # arms interleaved, so a burst of host load hits all alike
        for build, mode in arms if r % 2 == 0 else arms[::-1]:
            try:
                rows.append(measure(build, mode, args.seconds, args.boots))
            except (ub.UMLUnavailable, RuntimeError) as exc:
                print(f"{build.source} {mode}: {exc}", file=sys.stderr)
            print(f"round {r + 1}: {build.source} {mode} done", file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
