"""``testbed demo``: the main job of `make demo` — calibrate the long-haul path, then the
headline reproduction (``testbed reproduce C7 --quick``: connection setup vs transport), each
as its own ``testbed`` command."""
from __future__ import annotations

from testbed.cli.options import add_backend
from testbed.emulator.config import add_engine_option


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job of `make demo`: calibrate the long-haul path, then "
                                    "`testbed reproduce C7 --quick` (minutes)")
    add_backend(p)
    add_engine_option(p)  # sets $TESTBED_ENGINE, which the calibration and the runs below inherit
    p.set_defaults(func=run)


def run(args) -> int:
    import subprocess
    import sys

    from testbed.cli import doctor
    report = doctor.diagnose()
    print(f"testbed demo: backend {report['backend']}, kernel congestion controls "
          f"{' '.join(report['congestion_control'])}", flush=True)
    testbed = [sys.executable, "-m", "testbed", *(["-v"] * args.verbose), *(["-q"] if args.quiet else [])]
    rc = subprocess.run([*testbed, "calibrate", "--backend", args.backend]).returncode
    print("testbed demo: the headline reproduction, C7 (new connection vs kept alive, direct vs relay)",
          flush=True)
    return max(rc, subprocess.run([*testbed, "reproduce", "C7", "--quick"]
                                  + ([] if args.backend == "auto" else ["--backend", args.backend])).returncode)
