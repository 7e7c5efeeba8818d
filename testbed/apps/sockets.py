"""Blocking TCP sockets with factors applied before listen/connect, and logged transfers.

``send_logged``/``recv_logged`` stamp the first and last byte of a transfer: "sent" is when
the send() call that handed the byte to the kernel returned (queued, not yet on the wire);
"received" is when recv() returned it.
"""
from __future__ import annotations

import itertools
import socket

from testbed.apps.eventlog import CONN, FACTORS, READY, EventLog, now
from testbed.apps.tcpopts import SocketFactors, read_back

SEND_BLOCK = 64 * 1024
RECV_BLOCK = 256 * 1024
_conn_ids = itertools.count()


def next_conn_id() -> int:
    return next(_conn_ids)


def listen(addr: tuple[str, int], factors: SocketFactors, log: EventLog | None = None,
           backlog: int = 128) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        factors.apply(sock)
        sock.bind(addr)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    if log is not None:
        log.emit(FACTORS, side="listener", requested=factors.requested(), readback=read_back(sock))
    return sock


def announce_ready(log: EventLog, sock: socket.socket, **fields) -> None:
    """Log ``ready`` with the bound address and print ``ready HOST:PORT`` (what
    ``testbed.cli.run.wait_ready`` waits for)."""
    addr = sock.getsockname()
    log.emit(READY, addr=list(addr), **fields)
    print(f"ready {addr[0]}:{addr[1]}", flush=True)


def connect(addr: tuple[str, int], factors: SocketFactors, timeout: float | None = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        factors.apply(sock)
        sock.settimeout(timeout)
        sock.connect(addr)
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock


def log_connection(log: EventLog, sock: socket.socket, conn: int, side: str,
                   factors: SocketFactors | None = None, **fields) -> None:
    """The connection's 5-tuple (``src`` = this end) and its factors read back."""
    src, sport = sock.getsockname()[:2]
    dst, dport = sock.getpeername()[:2]
    log.emit(CONN, conn=conn, side=side, proto="tcp", src=src, sport=sport, dst=dst,
             dport=dport, **fields)
    log.emit(FACTORS, conn=conn, side=side,
             requested=factors.requested() if factors else None, readback=read_back(sock))


def send_logged(sock: socket.socket, data: bytes, log: EventLog, first: str, last: str,
                **fields) -> None:
    view = memoryview(data)
    sent = 0
    while sent < len(view):
        n = sock.send(view[sent:sent + SEND_BLOCK])
        if sent == 0 and n > 0:
            log.emit(first, bytes=n, **fields)
        sent += n
    log.emit(last, bytes=sent, **fields)


def reassert_clamp(sock: socket.socket, factors: SocketFactors | None, log: EventLog, conn: int) -> None:
    """After the first data arrived: TCP_WINDOW_CLAMP again (see ``tcpopts``), logged."""
    if factors is not None and factors.reassert_clamp(sock):
        log.emit(FACTORS, conn=conn, when="after_first_data", readback=read_back(sock))


def recv_exact(sock: socket.socket, n: int, log: EventLog | None = None, first: str | None = None,
               last: str | None = None, keep: bool = False, **fields) -> bytes:
    """Read exactly ``n`` bytes (returned only if ``keep``); EOF before that is an error."""
    chunks = []
    got = 0
    first_t = None
    while got < n:
        chunk = sock.recv(min(RECV_BLOCK, n - got))
        if not chunk:
            raise ConnectionError(f"peer closed the connection after {got} of {n} bytes")
        if first_t is None:
            first_t = now()
            if log is not None and first:
                log.emit(first, t=first_t, **fields)
        got += len(chunk)
        if keep:
            chunks.append(chunk)
    if log is not None and last:
        log.emit(last, bytes=n, **fields)
    return b"".join(chunks)
