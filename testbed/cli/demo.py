"""``testbed demo``: the main job of `make demo` — calibrate the long-haul path, then the
headline reproduction (``testbed reproduce C7 --quick``: connection setup vs transport)."""
from __future__ import annotations

from testbed.backends import BACKEND_CHOICES
from testbed.emulator.config import add_engine_option


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job of `make demo`: calibrate the long-haul path, then "
                                    "`testbed reproduce C7 --quick` (minutes)")
    p.add_argument("--backend", default="auto", choices=BACKEND_CHOICES,
                   help="link backend (default: auto)")
    add_engine_option(p)  # sets $TESTBED_ENGINE, which the calibration and the runs below inherit
    p.set_defaults(func=run)


def run(args) -> int:
    from testbed.cli import doctor
    report = doctor.diagnose()
    print(f"testbed demo: backend {report['backend']}, kernel congestion controls "
          f"{' '.join(report['congestion_control'])}")
    from testbed.cli import main
    rc = main(["calibrate", "--backend", args.backend])
    print("testbed demo: the headline reproduction, C7 (new connection vs kept alive, direct vs relay)")
    return max(rc, main(["reproduce", "C7", "--quick"]
                        + ([] if args.backend == "auto" else ["--backend", args.backend])))
