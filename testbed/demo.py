"""``testbed demo``: the main job of `make demo` — for now, calibrate the long-haul path."""
from __future__ import annotations

from .backends import BACKEND_CHOICES


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job: bring up longhaul and calibrate it")
    p.add_argument("--backend", default="auto", choices=BACKEND_CHOICES)
    p.set_defaults(func=run)


def run(args) -> int:
    from . import doctor
    report = doctor.diagnose()
    print(f"testbed demo: backend {report['backend']}, kernel congestion controls "
          f"{' '.join(report['congestion_control'])}")
    from .cli import main
    return main(["calibrate", "--backend", args.backend])
