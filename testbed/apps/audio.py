"""Streaming audio on the C9 schedule over TCP or UDP, with the playback model at the client.

The client asks for a stream with a 20-byte request ``!4sIIII`` = (b"AU01", chunks N,
chunk duration τ in µs, chunk bytes, processing time m in µs); chunk bytes = sample rate ×
sample size × τ (``playback.chunk_bytes``).  The server takes the request's arrival as the
stream origin o; chunk i is ready at o + (i+1)·τ, processed for m after
max(ready, previous processed) (it sleeps m), then sent: a 16-byte header ``!IIQ`` = (i, N, o
in CLOCK_MONOTONIC ns) + the PCM bytes.  TCP: one connection, chunks back to back; UDP: one
datagram per chunk to the address the request came from.  Since all namespaces share
CLOCK_MONOTONIC the client computes arrival times relative to the server's origin directly.

Server events: ``step`` (``name`` process, ``seq``: chunk i's processing m as a timed step,
``start`` = max(ready, previous processed), ``ms`` = m), ``chunk_sent`` (seq, ready_ms,
processed_ms, relative to o).  Client events:
``chunk_arrival`` (seq, arrival_ms relative to o), then one ``playback`` per player and
initial buffer J (``buffer_ms``; ``prebuffer_ms``: the amount of audio it also waited for;
``playback.PlaybackResult``, times in ms from o).
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time

from testbed.apps import eventlog as ev
from testbed.apps import payload, sockets, tcpinfo, tcpopts
from testbed.apps.appcli import app_main, app_parser
from testbed.apps.appmain import guarded, parse_hostport
from testbed.protocols.playback import Playback, chunk_bytes
from testbed.spec.units import parse_time
from testbed.workloads.audio import AUDIO

REQUEST = struct.Struct("!4sIIII")
MAGIC = b"AU01"
CHUNK = struct.Struct("!IIQ")
PCM_SEED = b"testbed-audio-v1"


def stream(send, log: ev.EventLog, n: int, tau_us: int, size: int, process_us: int) -> None:
    """Generate and send the chunks; ``send(bytes)`` is the transport."""
    origin = ev.now()
    pcm = payload.body(size, PCM_SEED)
    processed = origin
    for i in range(n):
        ready = origin + (i + 1) * tau_us * 1000
        _sleep_until(ready)
        begin = max(ready, processed)
        processed = begin + process_us * 1000
        _sleep_until(processed)
        if process_us:                  # the processing m_i: a timed step on the run's timeline
            log.emit(ev.STEP, name="process", start=begin, ms=process_us / 1e3, seq=i)
        send(CHUNK.pack(i, n, origin) + pcm)
        log.emit(ev.CHUNK_SENT, seq=i, ready_ms=(ready - origin) / 1e6,
                 processed_ms=(processed - origin) / 1e6)


def _sleep_until(t_ns: int) -> None:
    delay = (t_ns - ev.now()) / 1e9
    if delay > 0:
        time.sleep(delay)


def _check_request(data: bytes) -> tuple[int, int, int, int]:
    magic, n, tau_us, size, process_us = REQUEST.unpack(data)
    if magic != MAGIC:
        raise ConnectionError(f"not an audio client (magic {magic!r})")
    return n, tau_us, size, process_us


def run_server(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="server", argv=sys.argv[1:])
        addr = parse_hostport(args.listen)
        if args.transport == "udp":
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(addr)
            sockets.announce_ready(log, sock)
            with sock:
                while True:
                    data, peer = sock.recvfrom(2048)
                    if len(data) != REQUEST.size:
                        continue
                    log.emit(ev.CONN, proto="udp", src=addr[0] if addr[0] not in ("", "0.0.0.0") else None,
                             sport=sock.getsockname()[1], dst=peer[0], dport=peer[1])
                    stream(lambda b, peer=peer: sock.sendto(b, peer), log, *_check_request(data))
        factors = tcpopts.socket_factors(args)
        with sockets.listen(addr, factors, log) as listener:
            sockets.announce_ready(log, listener)
            while True:
                conn_sock, _ = listener.accept()
                conn = sockets.next_conn_id()
                sockets.log_connection(log, conn_sock, conn, "server", factors)
                threading.Thread(target=_serve_tcp, args=(conn_sock, log, conn, parse_time(args.sample)),
                                 daemon=True).start()
    return guarded(run, log)


def _serve_tcp(sock: socket.socket, log: ev.EventLog, conn: int, interval: float) -> None:
    with sock:
        try:
            req = _check_request(sockets.recv_exact(sock, REQUEST.size, keep=True))
            with tcpinfo.Sampler(log, sock, conn, interval):
                stream(sock.sendall, log, *req)
        except OSError as exc:
            log.emit(ev.ERROR, message=f"{type(exc).__name__}: {exc}")


def receive(args, log: ev.EventLog, n: int, request: bytes, size: int) -> dict[int, tuple[int, int]]:
    """Request the stream; return {seq: (arrival ns, the server's origin ns)}."""
    server = parse_hostport(args.server, "127.0.0.1")
    arrivals: dict[int, tuple[int, int]] = {}
    if args.transport == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.connect(server)
        log.emit(ev.CONN, proto="udp", src=sock.getsockname()[0], sport=sock.getsockname()[1],
                 dst=server[0], dport=server[1])
        deadline = time.monotonic() + parse_time(args.timeout) + n * parse_time(args.chunk) * 2
        with sock:
            sock.send(request)
            while len(arrivals) < n and time.monotonic() < deadline:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    break
                t = ev.now()
                seq, _, origin = CHUNK.unpack_from(data)
                if seq not in arrivals:
                    arrivals[seq] = (t, origin)
                    log.emit(ev.CHUNK_ARRIVAL, t=t, seq=seq, arrival_ms=(t - origin) / 1e6, bytes=len(data))
        return arrivals
    factors = tcpopts.socket_factors(args)
    with sockets.connect(server, factors, parse_time(args.timeout)) as sock:
        sockets.log_connection(log, sock, 0, "client", factors)
        sock.sendall(request)
        for _ in range(n):
            head = sockets.recv_exact(sock, CHUNK.size, keep=True)
            sockets.recv_exact(sock, size)
            t = ev.now()
            seq, _, origin = CHUNK.unpack(head)
            arrivals[seq] = (t, origin)
            log.emit(ev.CHUNK_ARRIVAL, t=t, seq=seq, arrival_ms=(t - origin) / 1e6, bytes=size)
    return arrivals


def run_client(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="client", argv=sys.argv[1:])
        tau = parse_time(args.chunk)
        size = chunk_bytes(args.rate, args.sample_bytes, tau)
        n = int(round(parse_time(args.duration) / tau))
        buffers = [parse_time(j) for j in args.buffer.split(",")]
        if n < 1:
            raise ValueError(f"--duration {args.duration} is shorter than one chunk ({args.chunk})")
        request = REQUEST.pack(MAGIC, n, int(round(tau * 1e6)), size,
                               int(round(parse_time(args.process) * 1e6)))
        arrivals = receive(args, log, n, request, size)
        prebuffer = parse_time(args.prebuffer)
        for j in buffers:
            pb = Playback(tau * 1e3, j * 1e3, n, prebuffer * 1e3)
            for seq, (t, origin) in arrivals.items():
                pb.arrive((t - origin) / 1e6, seq)
            for result in (pb.wait(), pb.skip()):
                log.emit(ev.PLAYBACK, buffer_ms=j * 1e3, prebuffer_ms=prebuffer * 1e3, unit="ms",
                         **result.as_dict())
                stuck = "" if result.stuck_at is None else f", stuck for good at lost chunk {result.stuck_at}"
                first = "never" if result.first_play is None else f"{result.first_play:.1f} ms"
                print(f"J={j * 1e3:g}ms {result.player}: first play {first}, {result.stalls} stalls / "
                      f"{result.stall_total:.1f} ms{stuck}, on time {result.on_time:.0f} of "
                      f"{n * tau * 1e3:.0f} ms", flush=True)
        log.emit(ev.SUMMARY, chunks=n, received=len(arrivals), chunk_bytes=size, tau_ms=tau * 1e3,
                 transport=args.transport)
        return 0
    return guarded(run, log)


def build_parser() -> argparse.ArgumentParser:
    """Options of each side from ``testbed.workloads.AudioParams`` (one default each)."""
    p, _, c = app_parser(AUDIO, __doc__, run_server, run_client)
    c.add_argument("--timeout", default="10s", help="connect timeout (default: 10s)")
    return p


def main(argv: list[str] | None = None) -> int:
    return app_main(build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
