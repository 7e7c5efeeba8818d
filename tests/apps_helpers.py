"""Shared helpers for the apps tests: start app processes on loopback, read their logs."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

PY = [sys.executable, "-m"]


@contextlib.contextmanager
def server(module: str, *args: str, role: str | None = "server"):
    """Start ``python -m module [role] --listen 127.0.0.1:0 ...``; yield (process, port)."""
    argv = PY + [module] + ([role] if role else []) + ["--listen", "127.0.0.1:0", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("ready "):
            proc.kill()
            raise RuntimeError(f"{module} did not start: {line!r} {proc.stderr.read()}")
        yield proc, int(line.split(":")[-1])
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(module: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(PY + [module, *args], capture_output=True, text=True, timeout=timeout)


def events(path: Path, name: str | None = None) -> list[dict]:
    out = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [e for e in out if name is None or e["event"] == name]
