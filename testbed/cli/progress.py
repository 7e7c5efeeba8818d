"""What the command line shows while something runs: a progress line for one run, read from its
client's event log as the run writes it, and warnings written above progress bars instead of
through them.

``RunProgress(run_dir)`` is a context manager around ``execute``: a thread reads
``RUN_DIR/client.jsonl`` every ``interval`` seconds (only the lines added since the last read) and
shows one line on stderr — bytes done of a bulk transfer (``bulk_start``'s size; the latest
``tcp_info``'s ``bytes_acked``/``bytes_received``), requests answered (``last_response_byte``),
rounds done (``round_end``), chunks arrived (``chunk_arrival``), and the time so far.  It shows
nothing under ``-q`` or when stdout or stderr is not a terminal (a pipe, a file, a CI log): the
run's result is then all that prints.

``warnings_above_bars()`` routes the root logger's console handler through ``tqdm.write`` for
the duration of a command, so a warning logged while a bar (this line, an experiment's bar) is
on screen is printed above it and the bar is drawn again below, not split in two.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

#: the client's event log in a run directory (``testbed/run/execute.py``: ``<role>.jsonl``)
CLIENT_LOG = "client.jsonl"


@contextmanager
def warnings_above_bars() -> Iterator[None]:
    """Console logging through ``tqdm.write`` while the block runs (see the module docstring)."""
    from tqdm.contrib.logging import logging_redirect_tqdm
    with logging_redirect_tqdm():
        yield


def interactive(quiet: bool = False) -> bool:
    """A progress line is wanted: not ``-q``, and stdout and stderr are terminals."""
    return not quiet and sys.stdout.isatty() and sys.stderr.isatty()


def _size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


class RunProgress:
    """The progress of one run from its client's event log (see the module docstring)."""

    def __init__(self, run_dir: str | Path, enabled: bool = True, interval: float = 0.5,
                 file: Any = None):
        self.path = Path(run_dir) / CLIENT_LOG
        self.enabled, self.interval = enabled, interval
        self.file = file
        self._offset, self._rest = 0, b""
        self.size: int | None = None
        self.direction = ""
        self.bytes = 0
        self.counts = {"requests": 0, "rounds": 0, "chunks": 0}
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None

    # --- reading -------------------------------------------------------------------------
    def poll(self) -> None:
        """Read the lines added to the log since the last call (whole lines only)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        self._offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            try:
                self.event(json.loads(line))
            except (ValueError, TypeError):
                continue

    def event(self, e: dict) -> None:
        kind = e.get("event")
        if kind == "bulk_start":
            self.size, self.direction = e.get("size"), e.get("direction", "")
        elif kind == "tcp_info":
            # the client sends (up): bytes ACKed, less the SYN's one; it receives (down): bytes read
            done = max(int(e.get("bytes_acked") or 0) - 1, int(e.get("bytes_received") or 0), 0)
            self.bytes = max(self.bytes, done)
        elif kind == "bulk_end" and e.get("bytes") is not None:
            self.bytes = max(self.bytes, int(e["bytes"]))
        elif kind == "last_response_byte":
            self.counts["requests"] += 1
        elif kind == "round_end":
            self.counts["rounds"] += 1
        elif kind == "chunk_arrival":
            self.counts["chunks"] += 1

    def line(self) -> str:
        """What has been done so far, in words."""
        parts = []
        if self.size:
            parts.append(f"{_size(self.bytes)} of {_size(self.size)} {self.direction} "
                         f"({min(self.bytes / self.size, 1):.0%})".replace("  ", " "))
        elif self.bytes:
            parts.append(f"{_size(self.bytes)} {self.direction}".rstrip())
        parts += [f"{n} {what} done" for what, n in self.counts.items() if n]
        if not parts and not self._offset:
            parts.append("starting")
        parts.append(f"{time.monotonic() - self._t0:.0f} s")
        return "run: " + ", ".join(parts)

    # --- showing -------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()
            self._bar.set_description_str(self.line())

    def __enter__(self) -> "RunProgress":
        if self.enabled:
            from tqdm import tqdm
            self._bar = tqdm(total=None, bar_format="{desc}", file=self.file or sys.stderr,
                             dynamic_ncols=True, leave=False)
            self._bar.set_description_str(self.line())
            self._thread = threading.Thread(target=self._loop, name="run-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._bar.close()
