"""The command's output while a UML guest runs: the guest writes it to ``uml-stdout.txt`` and
``uml-stderr.txt`` in its shared results directory (hostfs writes reach the host file at once),
and the host reads what is new every ``INTERVAL`` s (``run_in_guest(output=…)``).

``FileTail`` returns a file's new bytes since its last call, whole lines only until the final
call; ``GuestOutput`` hands those of both files to a sink, then the rest once at the end, so
that what the sink got is each file's content exactly.  No threads, no waiting: the caller
polls (``testbed.backends.uml._wait``).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

INTERVAL = 0.2          # s between two reads of the output files while the guest runs
STREAMS = {"stdout": "uml-stdout.txt", "stderr": "uml-stderr.txt"}

Sink = Callable[[str, bytes], None]     # ("stdout" or "stderr", new bytes)


class FileTail:
    """New bytes of a file that another process appends to.  A file not (yet) there has none;
    until ``read(final=True)``, bytes after the last line end (``\\n`` or ``\\r``) are held
    back, to come with their line."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.offset = 0         # bytes returned so far

    def read(self, final: bool = False) -> bytes:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return b""
        if not final:
            data = data[:max(data.rfind(b"\n"), data.rfind(b"\r")) + 1]
        self.offset += len(data)
        return data


class GuestOutput:
    """The command's stdout and stderr from ``results_dir`` to ``sink(name, data)``: ``pump()``
    while the guest runs, ``finish()`` once it has ended.  An exception from the sink (a closed
    pipe, say) stops the output without ending the guest; it is kept in ``error`` for the caller
    to raise when the guest is done."""

    def __init__(self, results_dir: Path | str, sink: Sink):
        self.sink = sink
        self.tails = {name: FileTail(Path(results_dir) / file) for name, file in STREAMS.items()}
        self.pending = dict.fromkeys(STREAMS, b"")    # read, not yet taken by the sink
        self.error: Exception | None = None

    def pump(self, final: bool = False) -> None:
        for name, tail in self.tails.items():
            if self.error is not None:
                return
            try:
                self.pending[name] += tail.read(final)
                if self.pending[name]:
                    self.sink(name, self.pending[name])
                    self.pending[name] = b""
            except Exception as exc:     # noqa: BLE001 — raised by the caller once the guest ended
                self.error = exc

    def finish(self) -> None:
        """What is left of both files (also a last line without its line end)."""
        self.pump(final=True)


def console(name: str, data: bytes) -> None:
    """A sink to this process's stdout and stderr, flushed: the output as the command wrote it
    (decoded as UTF-8, invalid bytes replaced, as ``GuestResult.stdout``)."""
    out = sys.stdout if name == "stdout" else sys.stderr
    out.write(data.decode("utf-8", "replace"))
    out.flush()
