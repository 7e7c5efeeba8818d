"""What the Dask executor (``--cluster``, experiments/cluster.py) costs per run against in-process
execution, and how a campaign of short runs scales with local workers, in the same run.

    .venv/bin/python benchmarks/campaign.py [--runs 24] [--sleep 0.3] [--mb 5]

No packets: the runs are the tests' fake executor (tests/fixtures/campaign.py), which writes a
small run directory, so what is measured is the machinery alone.

Rows:
- cluster start + close: entering and leaving ``DaskCluster("local:K")`` (LocalCluster with K
  worker processes, admission of the workers by their facts), seconds, once per campaign.
- per run, in-process / on Dask local:1: wall time of the experiment (the ``reuse`` definition,
  ``--runs`` runs, no warm-up, a fake run taking no time) divided by its runs, the cluster's start
  excluded; the median of 3 such campaigns after one not counted (imports); the Dask executor's
  overhead per run is the difference (goal: at most 0.5 s).
- pack + checksum + unpack of an ``--mb`` MB run directory (one file of random bytes, as a
  capture is): what gathering a real run adds per run on top of the fake's tiny one.
- campaign on K workers: ``--runs`` runs that each take ``--sleep`` s (sleeping: no CPU), on
  local:1 and local:2; speed-up = wall(K=1) / wall(K).  On one machine K > 1 CANNOT be faster:
  the machine lock lets one run at a time run on a machine (experiments.cluster.machine_lock),
  so the figure shows only what two workers add in coordination; more machines are what make a
  campaign faster.

/proc/loadavg is printed before and after: the machine may be shared.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MEDIANS = {"new": 1185.0, "reuse": 240.0}
#: campaigns per overhead row (after one warm-up); the row is their median
REPEAT = 3


def experiment(runs: int):
    from experiments import load_definition
    return load_definition("reuse").with_overrides(reps=max(1, runs // 2)).replace(warmup=0)


def campaign(where, runs: int, sleep_s: float, root: Path) -> tuple[float, int]:
    """(wall seconds, runs) of one experiment of fake runs through ``where``."""
    from experiments import run_experiment
    from tests.fixtures.campaign import SlowFake
    exp = experiment(runs)
    out = Path(tempfile.mkdtemp(dir=root))
    t0 = time.perf_counter()
    run_experiment(exp, out / "e", executor=SlowFake("params.mode", MEDIANS, sleep_s=sleep_s),
                   quiet=True, where=where)
    wall = time.perf_counter() - t0
    n = len(list((out / "e" / "runs").iterdir()))
    shutil.rmtree(out)
    return wall, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=24, help="runs per campaign (even; default 24)")
    ap.add_argument("--sleep", type=float, default=0.3, help="seconds each run of the scaling rows takes")
    ap.add_argument("--mb", type=float, default=5.0, help="size of the run directory packed (MB)")
    args = ap.parse_args()
    from experiments.cluster import DaskCluster, pack, unpack
    from experiments.runner import InProcess
    print(f"loadavg before: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}; "
          f"{os.cpu_count()} CPUs")
    root = Path(tempfile.mkdtemp(prefix="bench-campaign-"))
    rows = []
    try:
        campaign(InProcess(), args.runs, 0.0, root)          # warm-up: imports, caches
        local = statistics.median(w / n for w, n in (campaign(InProcess(), args.runs, 0.0, root)
                                                     for _ in range(REPEAT)))
        rows.append(("per run, in-process", f"{local * 1e3:.1f} ms", f"{args.runs} runs, median of {REPEAT}"))
        t0 = time.perf_counter()
        with DaskCluster("local:1") as where:
            up = time.perf_counter() - t0
            campaign(where, args.runs, 0.0, root)            # warm-up: the worker's imports
            dask = statistics.median(w / n for w, n in (campaign(where, args.runs, 0.0, root)
                                                        for _ in range(REPEAT)))
            t1 = time.perf_counter()
        close = time.perf_counter() - t1
        n = args.runs
        rows.append(("cluster start + close (local:1)", f"{up:.2f} s + {close:.2f} s", "once per campaign"))
        rows.append(("per run, on Dask local:1", f"{dask * 1e3:.1f} ms", f"{n} runs, median of {REPEAT}"))
        rows.append(("Dask overhead per run", f"{(dask - local) * 1e3:.1f} ms",
                     f"goal <= 500 ms: {'met' if dask - local <= 0.5 else 'MISSED'}; "
                     f"{dask / local:.1f}x the in-process time per run"))
        d = root / "run"
        d.mkdir()
        (d / "capture.pcap").write_bytes(os.urandom(int(args.mb * 1e6)))
        t0 = time.perf_counter()
        data, sha = pack(d)
        unpack(data, sha, root / "back")
        rows.append((f"pack + sha256 + unpack, {args.mb:g} MB", f"{(time.perf_counter() - t0) * 1e3:.0f} ms",
                     "per run with captures of that size"))
        walls = {}
        for k in (1, 2):
            t0 = time.perf_counter()
            with DaskCluster(f"local:{k}") as where:
                wall, n = campaign(where, args.runs, args.sleep, root)
            walls[k] = wall
            rows.append((f"campaign on local:{k}", f"{wall:.2f} s",
                         f"{n} runs x {args.sleep:g} s; speed-up {walls[1] / wall:.2f}"
                         + ("" if k == 1 else " (one machine: the machine lock runs one at a time, "
                                              "so K > 1 cannot be faster)")))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>16}  {note}")
    print(f"loadavg after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
