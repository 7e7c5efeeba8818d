"""Where does bbr's goodput on the lossy long-haul path differ between arms, and why?

    .venv/bin/python benchmarks/bbr_gap.py [--reps 3] [--seconds 10]

The path: 50 Mbit/s both ways, 100 ms each way, 14% loss server→client (the spec
``50M 200ms 14%down`` of benchmarks/emulator_vs_netem.py).  ``--reps`` iperf3 runs of bbr,
server→client, ``--seconds`` after 3 s left out, in each arm:

- netem in a UML guest (the build and mode ``testbed doctor`` reports);
- the userspace emulator in the same kind of guest;
- the userspace emulator on this host.

Per run: goodput (iperf3's receiver figure, Mbit/s), retransmitted segments, the sender's
smoothed RTT mean and max (iperf3's TCP_INFO samples, ms), and the host's 1-minute load (for a
guest arm: before and after the whole guest, as the guest sees only its own).  For
the emulator arms also its scheduling error p99 (µs): large values mean the emulator itself was
starved of CPU and the arm measures that, not the link.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.emulator_vs_netem import SPECS, wait_listening  # noqa: E402

SPEC = "50M 200ms 14%down"


def runs(backend: str, reps: int, seconds: int, results: Path) -> list[dict]:
    from testbed.run.network import Testbed
    out = []
    with Testbed("longhaul", backend=backend, overrides=SPECS[SPEC], results_root=results) as tb:
        c = tb.ip("client")
        for i in range(reps):
            port = 5210 + i
            tb.popen("client", ["iperf3", "-s", "-1", "-p", str(port)], name="iperf3")
            wait_listening(tb, "client", port)
            load = os.getloadavg()[0]
            end = json.loads(tb.run("server", ["iperf3", "-c", c, "-p", str(port), "-C", "bbr",
                                               "-t", str(seconds), "-O", "3", "--json"],
                                    timeout=seconds + 120, check=True).stdout)["end"]
            sender = end["streams"][0]["sender"]
            out.append({"goodput (Mbit/s)": end["sum_received"]["bits_per_second"] / 1e6,
                        "retransmits": end["sum_sent"].get("retransmits"),
                        "srtt mean (ms)": sender.get("mean_rtt", 0) / 1e3,
                        "srtt max (ms)": sender.get("max_rtt", 0) / 1e3,
                        "load": [round(load, 2), round(os.getloadavg()[0], 2)]})
    emu = (tb.metadata.get("backend_summary") or {}).get("sched_error_us") or {}
    for r in out:
        r["emulator sched p99 (µs)"] = emu.get("p99")
        r["kernel"] = os.uname().release
        r["uml"] = json.loads(os.environ.get("TESTBED_UML_GUEST") or "null")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3, help="runs per arm")
    p.add_argument("--seconds", type=int, default=10, help="length of each run")
    p.add_argument("--in-guest", nargs=2, metavar=("BACKEND", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.in_guest:
        backend, out = args.in_guest
        with tempfile.TemporaryDirectory(prefix="tb-bbrgap") as tmp:
            Path(out).write_text(json.dumps(runs(backend, args.reps, args.seconds, Path(tmp))))
        return 0
    from testbed.backends import uml
    arms = {}
    with tempfile.TemporaryDirectory(prefix="tb-bbrgap", dir="/var/tmp") as tmp:
        for label, backend in (("netem, guest", "netem"), ("emulator, guest", "userspace")):
            out = Path(tmp) / f"{backend}.json"
            load = round(os.getloadavg()[0], 2)
            res = uml.run_in_guest([sys.executable, str(Path(__file__).resolve()), "--reps",
                                    str(args.reps), "--seconds", str(args.seconds), "--in-guest",
                                    backend, str(out)], results_dir=Path(tmp), timeout=1800)
            if res.returncode != 0:
                print(f"{label}: guest run failed: {res.stderr.strip()}", file=sys.stderr)
                continue
            arms[label] = [{**r, "load": [load, round(os.getloadavg()[0], 2)]}
                           for r in json.loads(out.read_text())]
        arms["emulator, host"] = runs("userspace", args.reps, args.seconds, Path(tmp))
    cols = ("goodput (Mbit/s)", "retransmits", "srtt mean (ms)", "srtt max (ms)",
            "emulator sched p99 (µs)")
    print(f"bbr, {SPEC}, server→client, {args.seconds} s after 3 s left out")
    print(f"{'arm':18} {'kernel':16} {'mode':8} " + " ".join(f"{c:>24}" for c in cols) + "  host load")
    for label, rs in arms.items():
        for r in rs:
            mode = (r["uml"] or {}).get("mode", "-")
            print(f"{label:18} {r['kernel']:16} {mode:8} "
                  + " ".join(f"{r[c]:24.2f}" if isinstance(r[c], float) else f"{r[c]!s:>24}"
                             for c in cols) + f"  {r['load']}")
        print(f"{label:18} median goodput {statistics.median(r['goodput (Mbit/s)'] for r in rs):.2f} Mbit/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
