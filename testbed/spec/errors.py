"""The testbed's error types, handled once by the CLI (``testbed/cli/__init__.py``).

* ``UsageError``: bad input (a name, a value, a combination); exit status 2.  It is a
  ``ValueError``, so the validation in ``units``/``linkspec`` (plain ValueErrors) is handled alike.
* ``SetupError``: the testbed could not be brought up or configured (Mininet, a backend, a
  guest, host factors); exit status 1.  It and ``RunError`` are RuntimeErrors, so code that
  handles a failed command as a RuntimeError keeps working.
* ``RunError``: a run started and failed (an app exited non-zero, a timeout); exit status 1.
  ``execute`` raises it with ``.result`` (the RunResult of the failed run, manifest written).

Each message is one line: what failed and why; the CLI adds the run directory when there is one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


class TestbedError(Exception):
    """Base of the testbed's expected failures; ``exit_code`` is the CLI's exit status."""
    __test__ = False  # not a pytest test class
    exit_code = 1
    result: Any = None    # the RunResult of the failed run, when there is one

    def __init__(self, message: str, *, run_dir: Path | str | None = None):
        super().__init__(message)
        self.run_dir = Path(run_dir) if run_dir is not None else None


class UsageError(TestbedError, ValueError):
    exit_code = 2


class SetupError(TestbedError, RuntimeError):
    pass


class RunError(TestbedError, RuntimeError):
    def __init__(self, message: str, *, run_dir: Path | str | None = None, result: Any = None):
        super().__init__(message, run_dir=run_dir)
        self.result = result
