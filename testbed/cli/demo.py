"""``testbed demo``: the main job of `make demo` — calibrate the long-haul path, then the
headline reproduction (``testbed reproduce C7 --quick``: connection setup vs transport), each
as its own ``testbed`` command; it ends by printing the path of the reproduction's HTML report
(C7's four cells as the chapter's figures 12-21/12-22, a new vs a kept-alive request)."""
from __future__ import annotations

from testbed.cli.options import add_backend, add_results
from testbed.emulator.config import add_engine_option


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job of `make demo`: calibrate the long-haul path, then "
                                    "`testbed reproduce C7 --quick` (minutes)")
    add_backend(p)
    add_results(p, "the demo's calibration and reproduction")
    add_engine_option(p)  # sets $TESTBED_ENGINE, which the calibration and the runs below inherit
    p.set_defaults(func=run)


def run(args) -> int:
    import subprocess
    import sys
    import time
    from pathlib import Path

    from testbed.cli import doctor
    report = doctor.diagnose()
    print(f"testbed demo: backend {report['backend']}, kernel congestion controls "
          f"{' '.join(report['congestion_control'])}", flush=True)
    testbed = [sys.executable, "-m", "testbed", *(["-v"] * args.verbose), *(["-q"] if args.quiet else [])]
    rc = subprocess.run([*testbed, "calibrate", "--backend", args.backend, "--results", args.results]).returncode
    print("testbed demo: the headline reproduction, C7 (new connection vs kept alive, direct vs relay)",
          flush=True)
    out = Path(args.results) / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    rc = max(rc, subprocess.run([*testbed, "reproduce", "C7", "--quick", "--out", str(out)]
                                + ([] if args.backend == "auto" else ["--backend", args.backend])).returncode)
    report = out / "report.html"
    print(f"testbed demo: report {report.resolve()}" if report.is_file()
          else f"testbed demo: no report was written ({out})", flush=True)
    return rc
