"""Build ``libtbemu.so`` with the system C compiler: ``python -m testbed.emulator.native.build``.

Idempotent: compiles only when the library is missing or older than a source (``*.c``, ``*.h``,
this file).  Run by scripts/install.sh; ``--force`` rebuilds.  ``$CC`` overrides ``gcc``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
LIB = HERE / "libtbemu.so"
CFLAGS = ["-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-pthread"]


def sources() -> list[Path]:
    return sorted(HERE.glob("*.c"))


def stale() -> bool:
    if not LIB.exists():
        return True
    newest = max(p.stat().st_mtime for p in [*sources(), *HERE.glob("*.h"), Path(__file__)])
    return LIB.stat().st_mtime < newest


def build(force: bool = False) -> bool:
    """Compile if needed; True when it compiled.  Raises RuntimeError with the compiler's output."""
    if not force and not stale():
        return False
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        raise RuntimeError(f"C compiler {cc!r} not found: apt-get install gcc (or set $CC)")
    tmp = LIB.with_suffix(".so.tmp")
    argv = [cc, *CFLAGS, "-o", str(tmp), *map(str, sources()), "-lm"]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building the native emulator engine failed ({' '.join(argv)}):\n{r.stderr}")
    os.replace(tmp, LIB)
    return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        built = build(force="--force" in argv)
    except RuntimeError as exc:
        print(f"native engine: {exc}", file=sys.stderr)
        return 1
    print(f"native engine: {'built' if built else 'up to date'}: {LIB}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
