"""``Loopback``: the ``Testbed`` interface for topology ``loopback`` — processes on this host
over 127.0.0.1, no namespaces, no root, no host factors, no captures."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Sequence

from testbed.host.lifecycle import Run


class Loopback:
    def __init__(self, results_root: Path | str = "results", run_dir: Path | str | None = None,
                 run_id: str | None = None):
        self.run_ = Run(results_root, run_id=run_id, run_dir=run_dir)
        self.metadata: dict[str, Any] = {"links": [], "backend": "none"}
        self.hosts: dict[str, Any] = {}

    @property
    def dir(self) -> Path:
        return self.run_.dir

    def ip(self, host: str) -> str:
        return "127.0.0.1"

    def popen(self, host: str, argv: Sequence[str], name: str = "process", **kwargs: Any):
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen(list(argv), start_new_session=True, **kwargs)
        self.run_.record_pid(proc.pid, f"{name} on {host}", group=True)
        return proc

    def __enter__(self) -> "Loopback":
        self.run_.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.run_.close()
