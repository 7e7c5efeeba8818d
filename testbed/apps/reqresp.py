"""Request/response: the client sends N bytes, the server "processes" T, replies M bytes.

Wire format, per request on a TCP (optionally TLS 1.3) connection: a 20-byte header
``!4sQII`` = (b"RQ01", body length N, reply length M, processing time T in µs), then N body
bytes; the server reads the whole body, sleeps T, sends M bytes.  The default body is
``payload.body()`` (354,640 B, sha256 logged by both ends).

Modes: ``new`` opens a connection (and TLS session) per request, timing from before
connect(); ``reuse`` opens one connection and warms it with untimed requests back to back
until cwnd ≥ 2 × the request's segments or two warm-up requests take the same time (± 5 %),
at most ``--warmup`` (logged with ``warmup: true``
and a ``warmup_done`` event; why this is warm: ``Client.warm_up``), then times each request
from its write.
Timed requests are numbered ``req`` 0..K-1 with ``--think`` between them.

Blocks (``--blocks K``): the request goes as K block requests of N/K bytes written back to back
on the connection while a second thread reads their replies; the server answers each in order
(processing, then its reply) while it goes on reading, so a block's processing and reply overlap
the next blocks' upload (``serve_connection``). ``--dependent``: a global dependency — blocks
1..K−1 carry no processing and no reply, the last all of T and the K replies' bytes (sent
together after the processing: on one connection the same bytes in the same order).
``block_plan`` makes the blocks. Per block the client logs ``block_sent`` and ``block_reply``
(its reply's last byte); the request's ``first_response_byte`` and ``last_response_byte`` are
the first and last reply bytes of all.
Codec: ``--compress R`` sends N·R body bytes, ``--encode E`` is a timed step on the client after
``request_issued`` (a ``step`` event) and ``--decode D`` is added to the server's processing
(to its total over the blocks).

Per-request completion = ``last_response_byte.t - request_issued.t``.  ``--socks HOST:PORT``
connects through a SOCKS5 proxy (the relay's client gateway: path = relay).  ``--tls-resume``
offers the previous TLS session (TLS 1.3 ticket) on each new connection.  The whole request
(header + body) is handed to the kernel in one send() (``--write one``, see
``write_request``); the server's processing T is a sleep.

    python -m testbed.apps.reqresp server --listen :5000 --log server.jsonl [--tls]
    python -m testbed.apps.reqresp client --server 10.0.0.2:5000 --log client.jsonl \
        --mode new --requests 10 --think 100ms [--tls] [--cc bbr --window 64KB ...]
"""
from __future__ import annotations

import argparse
import queue
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time

from testbed.apps import eventlog as ev
from testbed.apps import ccusage, payload, sockets, tcpinfo, tcpopts
from testbed.protocols import socks5
from testbed.apps.appcli import app_main, app_parser
from testbed.apps.appmain import AppError, guarded, parse_hostport
from testbed.spec.units import parse_size, parse_time

HEADER = struct.Struct("!4sQII")
MAGIC = b"RQ01"
#: a request with an operation id: ``!4sQIIQ`` = (b"RQ02", N, M, T µs, op); the server executes an
#: op id once (``Operations``): a retry of one it has done is answered without processing again
OP_HEADER = struct.Struct("!4sQIIQ")
OP_MAGIC = b"RQ02"
REPLY_SEED = b"testbed-reply-v1"
KEEP_LIMIT = 64 * 1000 * 1000  # bodies up to this size are hashed by the server
SEND_QUEUE_POLL = 0.001        # TCP_INFO poll interval of the send-queue watch (s)
WRITE_PATTERNS = ("one", "blocks")
WARM_STEADY = 0.05               # warm-up: two requests within 5 % of each other


def write_request(sock: socket.socket, data: bytes, pattern: str = "one") -> int:
    """Hand ``data`` to the kernel; returns the number of send() calls.

    ``one``: a single blocking send() of the whole request (header + body): the kernel
    segments it, and only its very last segment can be shorter than the MSS, so Nagle never
    holds request bytes back.  ``blocks``: one send() per ``sockets.SEND_BLOCK`` (64 KiB), the
    pattern of many applications; without TCP_NODELAY the sub-MSS tail of a block can wait for
    an ACK (up to a round trip or a delayed-ACK timeout) before the next block's bytes join it.
    """
    if pattern not in WRITE_PATTERNS:
        raise ValueError(f"write pattern {pattern!r}; allowed: {', '.join(WRITE_PATTERNS)}")
    view, sent, calls = memoryview(data), 0, 0
    block = len(view) if pattern == "one" else sockets.SEND_BLOCK
    while sent < len(view):
        sent += sock.send(view[sent:sent + block])   # blocking: returns when all is queued
        calls += 1
    return calls


def block_plan(size: int, k: int, replies: list[int], processes: list[int],
               dependent: bool = False) -> list[tuple[int, int, int]]:
    """(body bytes, reply bytes, processing µs) of each of ``k`` block requests for a body of
    ``size`` bytes (split evenly, the first blocks one byte longer when it does not divide).
    ``replies``/``processes``: one value (the total, split evenly) or one per block.
    ``dependent``: blocks 1..k−1 (0, 0) and the last block every reply byte and all processing."""
    def per_block(values: list[int], what: str) -> list[int]:
        if len(values) == 1:
            return [values[0] // k + (1 if i < values[0] % k else 0) for i in range(k)]
        if len(values) != k:
            raise ValueError(f"{what}: {len(values)} values for {k} blocks; give one or {k}")
        return list(values)
    if k < 1:
        raise ValueError(f"blocks {k} must be >= 1")
    sizes = per_block([size], "size")
    reply, process = per_block(replies, "reply size"), per_block(processes, "processing")
    if dependent:
        return [(n, 0, 0) for n in sizes[:-1]] + [(sizes[-1], sum(reply), sum(process))]
    return list(zip(sizes, reply, process))


def timed_step(log: ev.EventLog, name: str, seconds: float, **fields) -> None:
    """A step standing for computation: sleep ``seconds`` (nothing when 0), logged as ``step``
    with its start and configured length ``ms``."""
    if seconds <= 0:
        return
    t0 = ev.now()
    time.sleep(seconds)
    log.emit(ev.STEP, name=name, start=t0, ms=seconds * 1e3, **fields)


# ------------------------------------------------------------------ server

class Operations:
    """The server's record of executed operation ids (the idempotence rule: a retried
    operation is not executed twice), shared by its connections."""

    def __init__(self) -> None:
        self._done: set[int] = set()
        self._lock = threading.Lock()

    def first(self, op: int) -> bool:
        """True the first time ``op`` is seen (then it is executed), False for a retry."""
        with self._lock:
            new = op not in self._done
            self._done.add(op)
            return new


def serve_connection(conn_sock: socket.socket, log: ev.EventLog, conn: int, interval: float,
                     factors: tcpopts.SocketFactors | None = None,
                     ops: Operations | None = None) -> None:
    """Answer requests on one connection until the client closes it, as a pipeline of three
    threads: this one reads the requests, a processor processes them in order, a sender sends
    their replies in order; so a request's processing overlaps the reading of the next ones (the
    upload of ``--blocks`` goes on while a block is processed) and its reply's transmission the
    next one's processing, as on a server with one processor and a network stack beside it.
    ``tcp_info`` is sampled for the connection's life."""
    ops = ops or Operations()
    to_process: queue.SimpleQueue = queue.SimpleQueue()
    to_send: queue.SimpleQueue = queue.SimpleQueue()
    failed: list[OSError] = []

    def process() -> None:
        while (item := to_process.get()) is not None:
            req, think_us, m, execute = item
            if execute:                      # the processing: a timed step on the timeline
                timed_step(log, "process", think_us / 1e6, conn=conn, req=req)
            to_send.put((req, m))
        to_send.put(None)

    def send() -> None:
        while (item := to_send.get()) is not None:
            req, m = item
            try:
                sockets.send_logged(conn_sock, payload.body(m, REPLY_SEED), log,
                                    ev.RESPONSE_FIRST_BYTE_SENT, ev.RESPONSE_SENT, conn=conn, req=req)
            except OSError as exc:
                failed.append(exc)
                return

    with conn_sock, tcpinfo.Sampler(log, conn_sock, conn, interval):
        workers = [threading.Thread(target=f, daemon=True) for f in (process, send)]
        for w in workers:
            w.start()
        try:
            req = 0
            while not failed:
                header = conn_sock.recv(HEADER.size)
                if not header:
                    break
                t_first = ev.now()
                header += sockets.recv_exact(conn_sock, HEADER.size - len(header), keep=True)
                if req == 0:
                    sockets.reassert_clamp(conn_sock, factors, log, conn)
                op = None
                if header[:4] == OP_MAGIC:
                    header += sockets.recv_exact(conn_sock, OP_HEADER.size - HEADER.size, keep=True)
                    magic, n, m, think_us, op = OP_HEADER.unpack(header)
                else:
                    magic, n, m, think_us = HEADER.unpack(header)
                if magic not in (MAGIC, OP_MAGIC):
                    raise ConnectionError(f"not a request/response client (magic {magic!r})")
                execute = op is None or ops.first(op)
                log.emit(ev.REQUEST_RECEIVED, t=t_first, conn=conn, req=req, body=n, reply=m,
                         process_us=think_us, **({} if op is None else {"op": op, "retry": not execute}))
                body = sockets.recv_exact(conn_sock, n, keep=n <= KEEP_LIMIT)
                log.emit(ev.REQUEST_COMPLETE, conn=conn, req=req, bytes=n,
                         sha256=payload.digest(body) if n <= KEEP_LIMIT else None)
                to_process.put((req, think_us, m, execute))
                req += 1
        finally:
            to_process.put(None)
            for w in workers:
                w.join()
    if failed:
        raise failed[0]


def serve(listener: socket.socket, log: ev.EventLog, interval: float, tls_ctx=None,
          factors: tcpopts.SocketFactors | None = None) -> None:
    """Accept forever; one thread per connection, one record of operations for all."""
    ops = Operations()
    while True:
        raw, _ = listener.accept()
        conn = sockets.next_conn_id()
        sockets.log_connection(log, raw, conn, "server", factors)
        threading.Thread(target=_serve_thread, args=(raw, log, conn, interval, tls_ctx, factors, ops),
                         daemon=True).start()


def _serve_thread(raw, log, conn, interval, tls_ctx, factors, ops) -> None:
    try:
        sock = raw
        if tls_ctx is not None:
            sock = tls_ctx.wrap_socket(raw, server_side=True)
            log.emit(ev.TLS_DONE, conn=conn, version=sock.version(), resumed=sock.session_reused)
        serve_connection(sock, log, conn, interval, factors, ops)
    except (OSError, ConnectionError) as exc:
        log.emit(ev.ERROR, conn=conn, message=f"{type(exc).__name__}: {exc}")
        raw.close()


def run_server(args: argparse.Namespace) -> int:
    log = ev.EventLog(args.log)
    cert_dir = None

    def run() -> int:
        nonlocal cert_dir
        log.emit(ev.START, role="server", argv=sys.argv[1:])
        factors = tcpopts.socket_factors(args)
        tls_ctx = None
        if args.tls:
            from testbed.apps import tls
            cert_dir = tempfile.mkdtemp(prefix="tb-tls-")
            tls_ctx = tls.server_context(*tls.make_cert(cert_dir))
        listener = sockets.listen(parse_hostport(args.listen), factors, log)
        sockets.announce_ready(log, listener, tls=bool(args.tls))
        with listener:
            serve(listener, log, parse_time(args.sample), tls_ctx, factors)
        return 0
    try:
        return guarded(run, log)
    finally:
        if cert_dir:
            shutil.rmtree(cert_dir, ignore_errors=True)


# ------------------------------------------------------------------ client

class Client:
    """Issues requests and logs their events; one instance per client process."""

    def __init__(self, log: ev.EventLog, server: tuple[str, int], factors: tcpopts.SocketFactors,
                 body: bytes, reply: int, process_us: int, interval: float = 0.01,
                 tls: bool = False, resume: bool = False, timeout: float = 10.0,
                 socks: tuple[str, int] | None = None, write: str = "one",
                 blocks: list[tuple[int, int, int]] | None = None, encode: float = 0.0):
        if write not in WRITE_PATTERNS:
            raise ValueError(f"write pattern {write!r}; allowed: {', '.join(WRITE_PATTERNS)}")
        self.log, self.server, self.factors, self.write = log, server, factors, write
        self.body, self.reply, self.process_us = body, reply, process_us
        self.interval, self.timeout, self.resume = interval, timeout, resume
        self.tls_ctx = None
        if tls:
            from testbed.apps import tls as tlsmod
            self.tls_ctx = tlsmod.client_context()
        self.socks = socks
        self.blocks, self.encode = blocks, encode     # block_plan (None: one request); codec step
        self.session = None
        self.sock: socket.socket | None = None
        self.conn = -1
        self._clamped = -1

    def open(self, req, conn: int | None = None) -> None:
        """Connect (through the SOCKS5 proxy if any), TLS handshake; ``conn`` is the id."""
        self.conn = sockets.next_conn_id() if conn is None else conn
        raw = sockets.connect(self.socks or self.server, self.factors, self.timeout)
        self.log.emit(ev.TCP_CONNECTED, conn=self.conn, req=req)
        if self.socks:
            try:
                socks5.client_handshake(raw, *self.server)
            except (socks5.Socks5Error, OSError):
                raw.close()
                raise
            self.log.emit(ev.SOCKS_DONE, conn=self.conn, req=req, target=list(self.server))
        sockets.log_connection(self.log, raw, self.conn, "client", self.factors,
                               via_socks=list(self.socks) if self.socks else None)
        if self.tls_ctx is not None:
            try:
                raw = self.tls_ctx.wrap_socket(raw, session=self.session if self.resume else None)
            except OSError as exc:
                raw.close()
                raise AppError(f"TLS handshake failed ({exc}); is the server running with --tls?") from None
            self.log.emit(ev.TLS_DONE, conn=self.conn, req=req, version=raw.version(),
                          resumed=raw.session_reused)
        self.sock = raw

    def close(self) -> None:
        if self.sock is not None:
            if self.tls_ctx is not None:
                self.session = self.sock.session
            self.sock.close()
            self.sock = None

    def exchange(self, req, **fields) -> int:
        """Send one request on the open connection (in the write pattern ``self.write``) and
        read the whole reply; the send queue is watched from the write's return on.  Returns
        the ``last_response_byte`` stamp."""
        timed_step(self.log, "encode", self.encode, req=req)
        if self.blocks:
            return self._exchange_blocks(req, **fields)
        op = fields.get("op")
        head = HEADER.pack(MAGIC, len(self.body), self.reply, self.process_us) if op is None else \
            OP_HEADER.pack(OP_MAGIC, len(self.body), self.reply, self.process_us, op)
        request = head + self.body
        with tcpinfo.Sampler(self.log, self.sock, self.conn, self.interval):
            self.log.emit(ev.FIRST_REQUEST_BYTE_SENT, conn=self.conn, req=req, write=self.write, **fields)
            writes = write_request(self.sock, request, self.write)
            self.log.emit(ev.LAST_REQUEST_BYTE_SENT, conn=self.conn, req=req, bytes=len(request),
                          writes=writes, **fields)
            watch = tcpinfo.SendQueueWatch(self.log, self.sock, SEND_QUEUE_POLL,
                                           ev.REQUEST_LEFT_SEND_QUEUE, ev.REQUEST_ACKED,
                                           conn=self.conn, req=req, **fields).start()
            try:
                sockets.recv_exact(self.sock, self.reply, self.log, ev.FIRST_RESPONSE_BYTE,
                                   conn=self.conn, req=req, **fields)
                done = self.log.emit(ev.LAST_RESPONSE_BYTE, bytes=self.reply, conn=self.conn,
                                     req=req, **fields)["t"]
            finally:
                watch.stop()
        if self._clamped != self.conn:            # after this connection's first response
            sockets.reassert_clamp(self.sock, self.factors, self.log, self.conn)
            self._clamped = self.conn
        return done

    def _exchange_blocks(self, req, **fields) -> int:
        """The blocks of ``self.blocks`` written back to back by a writer thread while this one
        reads their replies in order (module docstring); returns the last reply byte's stamp."""
        sock, errors = self.sock, []
        view = memoryview(self.body)

        def write() -> None:
            try:
                off = 0
                for i, (n, m, t) in enumerate(self.blocks):
                    write_request(sock, HEADER.pack(MAGIC, n, m, t) + bytes(view[off:off + n]), self.write)
                    off += n
                    self.log.emit(ev.BLOCK_SENT, conn=self.conn, req=req, block=i, bytes=n, **fields)
            except OSError as exc:
                errors.append(exc)

        with tcpinfo.Sampler(self.log, sock, self.conn, self.interval):
            self.log.emit(ev.FIRST_REQUEST_BYTE_SENT, conn=self.conn, req=req, write=self.write,
                          blocks=len(self.blocks), **fields)
            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            first = True
            try:
                for i, (_, m, _) in enumerate(self.blocks):
                    if m:
                        sockets.recv_exact(sock, m, self.log, ev.FIRST_RESPONSE_BYTE if first else None,
                                           conn=self.conn, req=req, **fields)
                        first = False
                        self.log.emit(ev.BLOCK_REPLY, conn=self.conn, req=req, block=i, bytes=m, **fields)
            finally:
                writer.join()
            if errors:
                raise errors[0]
            self.log.emit(ev.LAST_REQUEST_BYTE_SENT, conn=self.conn, req=req, bytes=len(self.body),
                          blocks=len(self.blocks), **fields)
            return self.log.emit(ev.LAST_RESPONSE_BYTE, bytes=sum(b[1] for b in self.blocks),
                                 conn=self.conn, req=req, **fields)["t"]

    def request(self, req: int, mode: str, **fields) -> int:
        """One timed request; returns its completion in ns: ``request_issued`` to
        ``last_response_byte``, the same two stamps the run's metrics use.  ``op=ID`` in
        ``fields``: the request carries that operation id (``OP_HEADER``)."""
        if mode == "new":
            conn = sockets.next_conn_id()   # named before it exists so analysis can join on it
            t0 = self.log.emit(ev.REQUEST_ISSUED, req=req, mode=mode, conn=conn, **fields)["t"]
            self.open(req, conn)
            done = self.exchange(req, **fields)
            self.close()
        else:
            t0 = self.log.emit(ev.REQUEST_ISSUED, req=req, mode=mode, conn=self.conn, **fields)["t"]
            done = self.exchange(req, **fields)
        return done - t0

    def abort(self) -> None:
        """Drop the connection at once (RST: SO_LINGER 0), as a device losing its network."""
        if self.sock is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
            self.sock = None

    def warm_up(self, limit: int) -> None:
        """Untimed requests back to back until the connection is warm, at most ``limit``.

        Warm: either TCP_INFO's snd_cwnd ≥ 2 × the request's segments (⌈request / snd_mss⌉:
        nothing left for slow start to grow into), or the last two warm-up requests took within
        ``WARM_STEADY`` of each other (the connection's state no longer changes what a request
        costs, e.g. in congestion avoidance after a loss or HyStart ended slow start).  In slow
        start Linux grows cwnd only while cwnd-limited, up to twice the segments in flight, so
        back-to-back requests reach exactly 2 × request; Linux's restart after an idle period
        longer than the RTO (``tcp_slow_start_after_idle`` = 1, e.g. a think time + RTT above
        the RTO) halves cwnd once per RTO, which then still leaves one request's worth.  A
        connection approaching it from below instead (cwnd/2 + request per request) never gets
        there and pays one more round trip per request.  Logged as ``warmup_done``."""
        need = info = None
        took: list[int] = []
        warm = False
        for w in range(limit):
            t0 = ev.now()
            self.exchange(f"warmup{w}", warmup=True)
            took.append(ev.now() - t0)
            info = tcpinfo.read(self.sock)
            need = 2 * -(-(HEADER.size + len(self.body)) // max(info["snd_mss"], 1))
            warm = info["snd_cwnd"] >= need or (
                len(took) >= 2 and abs(took[-1] - took[-2]) <= WARM_STEADY * took[-2])
            if warm:
                break
        self.log.emit(ev.WARMUP_DONE, conn=self.conn, requests=len(took),
                      snd_cwnd=info["snd_cwnd"] if info else None, cwnd_wanted=need,
                      snd_ssthresh=info["snd_ssthresh"] if info else None,
                      took_ms=[round(t / 1e6, 3) for t in took], warm=warm)

    def run(self, mode: str, requests: int, think: float, warmup: int) -> list[int]:
        if mode == "reuse":
            self.open("warmup")
            self.warm_up(warmup)
            if self.tls_ctx is not None:
                self.session = self.sock.session
        times = []
        try:
            for k in range(requests):
                if k:
                    time.sleep(think)
                times.append(self.request(k, mode))
            self.log.emit(ev.SOCKETS_CC, sockets=ccusage.snapshot())
        finally:
            self.close()
        return times


def summarize(times_ns: list[int]) -> dict:
    ms = [t / 1e6 for t in times_ns]
    return {"requests": len(ms), "completion_ms": [round(x, 3) for x in ms],
            "median_ms": round(statistics.median(ms), 3) if ms else None,
            "min_ms": round(min(ms), 3) if ms else None, "max_ms": round(max(ms), 3) if ms else None}


def completion_line(summary: dict) -> str:
    """The median and every request's completion, as a client prints them (``summarize``)."""
    return (f"median {summary['median_ms']} ms over {summary['requests']} requests; "
            f"each (ms): {', '.join(f'{x:.1f}' for x in summary['completion_ms'])}")


def run_client(args: argparse.Namespace) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="client", argv=sys.argv[1:])
        factors = tcpopts.socket_factors(args)
        size = parse_size(args.size)
        if size < 0:
            raise ValueError(f"request size {args.size!r} is negative")
        if args.requests < 1:
            raise ValueError(f"--requests {args.requests} must be >= 1")
        size = int(round(size * float(args.compress)))      # the codec's output is what is sent
        body = payload.body(size)
        log.emit(ev.REQUEST_BODY, bytes=size, sha256=payload.digest(body))
        decode_us = int(round(parse_time(args.decode) * 1e6))
        replies = [parse_size(x) for x in args.reply_size.split(",")]
        processes = [int(round(parse_time(x) * 1e6)) for x in args.process.split(",")]
        if args.blocks == 1 and len(replies) + len(processes) > 2:
            raise ValueError("a list of reply sizes or processing times needs --blocks (one per block)")
        processes = [t + decode_us // len(processes) for t in processes]   # decoding: part of T
        plan = block_plan(size, args.blocks, replies, processes, args.dependent) \
            if args.blocks > 1 else None
        client = Client(log, parse_hostport(args.server, "127.0.0.1"), factors, body,
                        replies[0], processes[0], parse_time(args.sample), args.tls, args.tls_resume,
                        parse_time(args.timeout),
                        parse_hostport(args.socks, "127.0.0.1") if args.socks else None,
                        args.write, plan, parse_time(args.encode))
        times = client.run(args.mode, args.requests, parse_time(args.think), args.warmup)
        summary = summarize(times)
        log.emit(ev.SUMMARY, mode=args.mode, tls=args.tls, **summary)
        print(f"{args.mode}: {completion_line(summary)}", flush=True)
        if line := ccusage.note(factors.cc):
            print(line, flush=True)
        return 0
    return guarded(run, log)


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", default="-", help="JSONL event log path ('-' = stdout) (default: -)")
    tcpopts.add_socket_arguments(p)


def build_parser() -> argparse.ArgumentParser:
    """Options of each side from ``testbed.workloads.ReqRespParams`` (one default each)."""
    from testbed.workloads.reqresp import REQRESP
    p, _, c = app_parser(REQRESP, __doc__, run_server, run_client)
    c.add_argument("--timeout", default="10s", help="connect timeout (default: 10s)")
    c.add_argument("--socks", help="connect through this SOCKS5 proxy HOST:PORT (path = relay)")
    return p


def main(argv: list[str] | None = None) -> int:
    return app_main(build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
