"""Process plumbing shared by the app entry points: clean errors, SIGTERM, addresses.

Bad input or an unusable network (unknown cc, negative size, port in use, unreachable
server) ends the process with one line on stderr — ``<prog>: error: <what>`` — and a
non-zero exit code (2 for bad input, 1 for network errors), never a traceback.
"""
from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Callable

from testbed.apps.eventlog import ERROR, EventLog


class AppError(Exception):
    """A run-time failure worth one clear line (exit code 1)."""


def _describe(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"address already in use ({exc.strerror}); pick another port or stop the other listener"
    if exc.errno == errno.ECONNREFUSED:
        return "connection refused: no server listening at that address"
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return f"server unreachable ({exc.strerror})"
    if isinstance(exc, TimeoutError) or exc.errno == errno.ETIMEDOUT:
        return "timed out: server unreachable or not answering"
    return f"{type(exc).__name__}: {exc}"


def guarded(run: Callable[[], int], log: EventLog | None = None) -> int:
    """Run ``run()``; turn expected failures into one stderr line and an exit code; close
    ``log`` in every case."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "app"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        try:
            return run()
        except ValueError as exc:
            message, code = str(exc), 2
        except AppError as exc:
            message, code = str(exc), 1
        except OSError as exc:
            message, code = _describe(exc), 1
        except KeyboardInterrupt:
            message, code = "interrupted", 130
        if log is not None:
            log.emit(ERROR, message=message)
        print(f"{prog}: error: {message}", file=sys.stderr)
        return code
    finally:
        if log is not None:
            log.close()


def parse_hostport(text: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """'10.0.0.2:5000', ':5000' or '5000' → (host, port)."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"bad address {text!r}; expected HOST:PORT or PORT") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"port {number} in {text!r} is outside 0..65535")
    return host or default_host, number
