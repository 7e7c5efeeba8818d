"""Bulk transfer in one direction, by size or by duration (iperf3 stays available to
cross-check; this one logs on the testbed's clock and with its TCP_INFO samples).

Wire: the client sends a 17-byte header ``!4sBQI`` = (b"BK01", direction 0 = up (client
sends) / 1 = down (server sends), size in bytes (0 = by duration), duration in ms).  The
sender writes zeros; up: the client half-closes after the data and the server answers with
``!QQ`` = (bytes received, bytes received in the window); down: the server closes after the data.

The window (duration mode): the D seconds the user asked for, measured at the receiving
application from its first payload byte.  Writing stops after D at the sender, but what is
still queued in its send buffer and in flight then drains, for as long as the path needs (at
the Mathis bound of a lossy path, tens of seconds); that drain is reported apart.

Client events: ``bulk_start`` (before the first byte is sent/requested) and ``bulk_end``
(up: the server's count arrived; down: EOF after the last byte), and ``summary`` with
``goodput_bps`` = 8 × window_bytes / D in duration mode (window_bytes = payload bytes the
receiving application read in the window), 8 × bytes / (bulk_end − bulk_start) in size mode;
``drain_s`` = bulk_end − (bulk_start + D) and ``drain_bytes`` = bytes − window_bytes (duration
mode); ``total_goodput_bps`` = 8 × bytes / (bulk_end − bulk_start) either way.
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time

from testbed.apps import eventlog as ev
from testbed.apps import ccusage, sockets, tcpinfo, tcpopts
from testbed.apps.appcli import app_main, app_parser
from testbed.apps.appmain import AppError, guarded, parse_hostport
from testbed.spec.units import parse_size, parse_time
from testbed.workloads.bulk import BULK

HEADER = struct.Struct("!4sBQI")
COUNTS = struct.Struct("!QQ")
MAGIC = b"BK01"
BLOCK = bytes(256 * 1024)


def send_for(sock: socket.socket, size: int, duration: float) -> int:
    """Send ``size`` bytes, or for ``duration`` seconds when size is 0; return bytes sent."""
    sent, view = 0, memoryview(BLOCK)
    deadline = time.monotonic() + duration
    while (sent < size) if size else (time.monotonic() < deadline):
        n = len(BLOCK) if not size else min(len(BLOCK), size - sent)
        sent += sock.send(view[:n])
    return sent


def drain(sock: socket.socket) -> int:
    got = 0
    while chunk := sock.recv(sockets.RECV_BLOCK):
        got += len(chunk)
    return got


def receive(sock: socket.socket, window: float, after_first=None) -> tuple[int, int | None]:
    """Read to EOF; returns (bytes, bytes read within ``window`` seconds of the first payload
    byte, or None when ``window`` is 0).  recv() is woken at the window's end;
    ``after_first()`` runs once the first bytes are in."""
    first = sock.recv(sockets.RECV_BLOCK)
    got = len(first)
    if after_first is not None:
        after_first()
    if not first or window <= 0:
        return got + (drain(sock) if first else 0), None
    end = time.monotonic() + window
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(sockets.RECV_BLOCK)
        except TimeoutError:
            break
        if not chunk:
            sock.settimeout(None)
            return got, got
        got += len(chunk)
    sock.settimeout(None)
    return got + drain(sock), got


def _serve(sock: socket.socket, log: ev.EventLog, conn: int, interval: float,
           factors: tcpopts.SocketFactors) -> None:
    with sock:
        head = sockets.recv_exact(sock, HEADER.size, keep=True)
        sockets.reassert_clamp(sock, factors, log, conn)
        magic, direction, size, duration_ms = HEADER.unpack(head)
        if magic != MAGIC:
            raise ConnectionError(f"not a bulk client (magic {magic!r})")
        log.emit(ev.BULK_START, conn=conn, direction="up" if direction == 0 else "down", size=size)
        with tcpinfo.Sampler(log, sock, conn, interval):
            if direction == 0:
                got, in_window = receive(sock, duration_ms / 1e3)
                sock.sendall(COUNTS.pack(got, got if in_window is None else in_window))
            else:
                got = send_for(sock, size, duration_ms / 1e3)
                sock.shutdown(socket.SHUT_WR)
                drain(sock)
        log.emit(ev.BULK_END, conn=conn, bytes=got)


def run_server(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="server", argv=sys.argv[1:])
        factors = tcpopts.socket_factors(args)
        interval = parse_time(args.sample)
        with sockets.listen(parse_hostport(args.listen), factors, log) as listener:
            sockets.announce_ready(log, listener)
            while True:
                sock, _ = listener.accept()
                conn = sockets.next_conn_id()
                sockets.log_connection(log, sock, conn, "server", factors)
                threading.Thread(target=_guarded_serve, args=(sock, log, conn, interval, factors),
                                 daemon=True).start()
    return guarded(run, log)


def _guarded_serve(sock, log, conn, interval, factors) -> None:
    try:
        _serve(sock, log, conn, interval, factors)
    except OSError as exc:
        log.emit(ev.ERROR, conn=conn, message=f"{type(exc).__name__}: {exc}")


def run_client(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="client", argv=sys.argv[1:])
        factors = tcpopts.socket_factors(args)
        size = parse_size(args.size) if args.size else 0
        duration = parse_time(args.duration) if args.duration else 0.0
        if (size > 0) == (duration > 0):
            raise ValueError("give exactly one of --size (> 0) or --duration (> 0)")
        sock = sockets.connect(parse_hostport(args.server, "127.0.0.1"), factors, parse_time(args.timeout))
        with sock:
            sockets.log_connection(log, sock, 0, "client", factors)
            up = args.direction == "up"
            t0 = log.emit(ev.BULK_START, conn=0, direction=args.direction, size=size)["t"]
            with tcpinfo.Sampler(log, sock, 0, parse_time(args.sample)):
                sock.sendall(HEADER.pack(MAGIC, 0 if up else 1, size, int(duration * 1e3)))
                if up:
                    send_for(sock, size, duration)
                    sock.shutdown(socket.SHUT_WR)
                    got, in_window = COUNTS.unpack(sockets.recv_exact(sock, COUNTS.size, keep=True))
                else:
                    got, in_window = receive(sock, duration,
                                             lambda: sockets.reassert_clamp(sock, factors, log, 0))
            t1 = log.emit(ev.BULK_END, conn=0, bytes=got)["t"]
            log.emit(ev.SOCKETS_CC, sockets=ccusage.snapshot())
        if size and got != size:
            raise AppError(f"transfer incomplete: {got} of {size} bytes")
        total_s = (t1 - t0) / 1e9
        total = 8 * got / total_s
        fields = {"goodput_bps": total}
        if duration:
            fields = {"goodput_bps": 8 * in_window / duration, "window_s": duration,
                      "window_bytes": in_window, "drain_s": round(total_s - duration, 6),
                      "drain_bytes": got - in_window}
        log.emit(ev.SUMMARY, direction=args.direction, bytes=got, seconds=total_s,
                 total_goodput_bps=total, **fields)
        line = f"{args.direction}: {got} B in {total_s:.3f} s = {total / 1e6:.2f} Mbit/s"
        if duration:
            line = (f"{args.direction}: {fields['goodput_bps'] / 1e6:.2f} Mbit/s over the {duration:g} s "
                    f"window ({in_window} B); then {got - in_window} B drained in "
                    f"{fields['drain_s']:.3f} s more")
        print(line, flush=True)
        if note := ccusage.note(factors.cc):
            print(note, flush=True)
        return 0
    return guarded(run, log)


def build_parser() -> argparse.ArgumentParser:
    """Options of each side from ``testbed.workloads.BulkParams`` (one default each)."""
    p, _, c = app_parser(BULK, __doc__, run_server, run_client)
    c.add_argument("--timeout", default="10s", help="connect timeout (default: 10s)")
    return p


def main(argv: list[str] | None = None) -> int:
    return app_main(build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
