"""Audio chunks and a large image on one connection (C8): the server sends, the client receives.

``--transport tcp``: every frame (``streammux``: HTTP/2-like, never interleaved) on one TCP
connection, so the receiving application gets bytes in connection-wide order.  The sender keeps
its unsent frames in the application (``TCP_NOTSENT_LOWAT`` = ``--lowat``; a frame is chosen
only when the socket is writable), so ``--schedule priority`` really sends a ready audio chunk
before the next image frame.  ``--transport quic``: aioquic, the audio on one server-initiated
unidirectional stream and the image on another (per-stream order); the sender hands a frame to
aioquic only while its unsent stream bytes are below ``--lowat`` (aioquic serves streams round
robin, so a deeper buffer would undo the schedule).  Both ends write a qlog
(``<log stem>.qlog/``); the client writes the TLS key log ``<log stem>.keylog`` (NSS format,
``tshark -o tls.keylog_file:client.keylog`` decrypts the capture).

Events (``eventlog`` clock; names in this module): server ``streams_session`` (t = session
start = the request was read; the plan: ``chunks``, ``tau_ns``, ``audio_start_ns``,
``deadline_ns``, ``image_bytes``, ``image_frames``, ``transport``, ``schedule``),
``frame_sent`` (``kind``, ``seq``: TCP — the send() carrying the frame's last byte returned;
QUIC — the frame was handed to aioquic, followed by a transmit), ``peer_error`` (a peer sent
bytes that are not this protocol: logged, that connection or datagram dropped, the server keeps
serving).  Client ``connect_start`` (before connecting; with ``--resume`` after the untimed connection
that fetched the ``session_ticket``), ``streams_request`` (request written; QUIC with a ticket:
as 0-RTT data), ``tls_done`` (QUIC, at the end: ``resumed``, ``early_data_accepted``),
``stream_chunk`` (t = the frame was
**delivered to the application**: recv()/the StreamDataReceived event that completed it
returned; ``kind``, ``seq``, ``start``/``end`` = the frame's byte offsets in the TCP byte stream
(0 = first byte after the server's SYN) or in its QUIC stream, ``stream`` = QUIC stream id).
When the bytes were **complete at the receiver** comes from the receive side's records
(``analysis.streams``: the client's capture for TCP, its qlog for QUIC).

    python -m testbed.apps.streams server --listen :5004 --log server.jsonl --transport quic --schedule priority
    python -m testbed.apps.streams client --server 10.0.0.2:5004 --log client.jsonl --transport quic
"""
from __future__ import annotations

import asyncio
import select
import socket
import ssl
import sys
import tempfile
from pathlib import Path

from testbed.apps import eventlog as ev
from testbed.apps import sockets, tcpopts
from testbed.apps.appcli import app_main, app_parser
from testbed.apps.appmain import AppError, guarded, parse_hostport
from testbed.protocols.streammux import AUDIO, HEADER, IMAGE, KINDS, REQUEST, Decoder, Plan, ProtocolError, Scheduler
from testbed.spec.units import parse_size, parse_time
from testbed.workloads.streams import STREAMS

SESSION, FRAME_SENT, PEER_ERROR = "streams_session", "frame_sent", "peer_error"
STREAMS_REQUEST, STREAM_CHUNK = "streams_request", "stream_chunk"
CONNECT_START = "connect_start"
SERVER_NAME = "testbed"
ALPN = "testbed-streams"
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)


def plan_of(args) -> Plan:
    ns = lambda text: int(round(parse_time(text) * 1e9))     # noqa: E731
    return Plan(image_bytes=parse_size(args.image), frame_bytes=parse_size(getattr(args, "frame", "16KB")),
                chunks=args.chunks, chunk_bytes=parse_size(args.chunk_bytes),
                tau_ns=ns(getattr(args, "tau", "20ms")), audio_start_ns=ns(getattr(args, "audio_start", "0")),
                deadline_ns=ns(getattr(args, "deadline", "400ms")))


def session_fields(plan: Plan, args) -> dict:
    return {"chunks": plan.chunks, "tau_ns": plan.tau_ns, "audio_start_ns": plan.audio_start_ns,
            "deadline_ns": plan.deadline_ns, "image_bytes": plan.image_bytes,
            "image_frames": plan.image_frames, "chunk_bytes": plan.chunk_bytes,
            "transport": args.transport, "schedule": args.schedule}


def qlog_paths(log: str, stem: str) -> tuple[Path, Path]:
    base = Path(tempfile.gettempdir() if log == "-" else Path(log).parent)
    name = stem if log == "-" else Path(log).stem
    return base / f"{name}.qlog", base / f"{name}.keylog"


# ------------------------------------------------------------------ TCP

def tcp_send(sock: socket.socket, plan: Plan, policy: str, log: ev.EventLog, conn: int) -> None:
    """Send the plan in ``policy`` order; a frame is chosen only when the socket is writable."""
    t0 = ev.now()
    sched = Scheduler(plan, policy)
    sock.setblocking(False)
    pending, cur = memoryview(b""), None
    while pending or not sched.done:
        now = ev.now() - t0
        sched.poll(now)
        wake = sched.wake()
        timeout = None if wake is None else max(0.0, (wake - now) / 1e9)
        if not pending and not (sched.audio or sched.image):
            select.select([], [], [], timeout)
            continue
        _, writable, _ = select.select([], [sock], [], timeout)
        if not writable:
            continue
        if not pending:
            sched.poll(ev.now() - t0)
            cur = sched.next()
            pending = memoryview(plan.frame(*cur))
        try:
            pending = pending[sock.send(pending):]
        except BlockingIOError:
            continue
        if not pending:
            log.emit(FRAME_SENT, conn=conn, kind=KINDS[cur[0]], seq=cur[1])
    sock.setblocking(True)


def tcp_server(args, log: ev.EventLog, plan: Plan) -> int:
    factors = tcpopts.socket_factors(args)
    lowat = parse_size(args.lowat)
    with sockets.listen(parse_hostport(args.listen), factors, log) as lsock:
        sockets.announce_ready(log, lsock, transport="tcp")
        conn = 0
        while True:
            sock, _ = lsock.accept()
            with sock:
                conn += 1
                try:
                    sock.settimeout(10)
                    plan.check_request(sockets.recv_exact(sock, REQUEST.size, keep=True))
                    sock.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, lowat)
                    sockets.log_connection(log, sock, conn, "server", factors, lowat=lowat)
                    log.emit(SESSION, conn=conn, **session_fields(plan, args))
                    tcp_send(sock, plan, args.schedule, log, conn)
                    sock.shutdown(socket.SHUT_WR)
                    sock.settimeout(30)
                    while sock.recv(65536):
                        pass
                except (ProtocolError, OSError, ValueError) as exc:
                    log.emit(PEER_ERROR, conn=conn, message=f"{type(exc).__name__}: {exc}")


class Receiver:
    """Client side: frames of every stream → ``stream_chunk`` events; done when all arrived."""

    def __init__(self, plan: Plan, log: ev.EventLog):
        self.plan, self.log = plan, log
        self.decoders: dict[int, Decoder] = {}
        self.audio = self.image = 0

    def feed(self, stream: int, data: bytes) -> None:
        t = ev.now()
        for kind, seq, start, end in self.decoders.setdefault(stream, Decoder()).feed(data):
            self.log.emit(STREAM_CHUNK, t=t, kind=KINDS[kind], seq=seq, start=start, end=end, stream=stream)
            if kind == AUDIO:
                self.audio += 1
            else:
                self.image += end - start - HEADER.size
        if self.audio > self.plan.chunks or self.image > self.plan.image_bytes:
            raise ProtocolError(f"more than requested: {self.audio} chunks, {self.image} image bytes")

    @property
    def done(self) -> bool:
        return self.audio == self.plan.chunks and self.image == self.plan.image_bytes


def tcp_client(args, log: ev.EventLog, plan: Plan) -> Receiver:
    factors = tcpopts.socket_factors(args)
    rx = Receiver(plan, log)
    log.emit(CONNECT_START)
    with sockets.connect(parse_hostport(args.server, "127.0.0.1"), factors) as sock:
        sockets.log_connection(log, sock, 0, "client", factors)
        sock.sendall(plan.request())
        log.emit(STREAMS_REQUEST)
        sock.settimeout(parse_time(args.timeout))
        while not rx.done:
            data = sock.recv(sockets.RECV_BLOCK)
            if not data:
                raise AppError(f"server closed after {rx.audio} chunks and {rx.image} image bytes")
            rx.feed(0, data)
    return rx


# ------------------------------------------------------------------ QUIC

def quic_server(args, log: ev.EventLog, plan: Plan) -> int:
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.asyncio.server import QuicServer
    from aioquic.buffer import Buffer
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import StreamDataReceived
    from aioquic.quic.logger import QuicFileLogger
    from aioquic.quic.packet import pull_quic_header
    from testbed.apps.tls import make_cert
    lowat = parse_size(args.lowat)
    conns = iter(range(1, 1 << 30))

    class Session(QuicConnectionProtocol):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.conn, self.request, self.task = next(conns), b"", None

        def quic_event_received(self, event) -> None:
            if not isinstance(event, StreamDataReceived) or self.task is not None:
                return
            self.request += event.data
            if len(self.request) < REQUEST.size and not event.end_stream:
                return
            try:
                plan.check_request(self.request)
            except ProtocolError as exc:
                log.emit(PEER_ERROR, conn=self.conn, message=str(exc))
                self._quic.close(error_code=0x100, reason_phrase="not a streams request")
                self.transmit()
                return
            self.task = asyncio.ensure_future(self.send_all())

        def unsent(self, sids) -> int:   # aioquic internals: bytes queued, never sent
            streams = self._quic._streams
            return sum(s.sender._buffer_stop - s.sender.highest_offset
                       for s in (streams.get(sid) for sid in sids) if s is not None)

        async def send_all(self) -> None:
            q = self._quic
            t0 = ev.now()
            log.emit(SESSION, conn=self.conn, **session_fields(plan, args))
            sids = {}
            for kind in (AUDIO, IMAGE):
                sids[kind] = q.get_next_available_stream_id(is_unidirectional=True)
                q.send_stream_data(sids[kind], b"")
            sched = Scheduler(plan, args.schedule)
            while not sched.done:
                if self._closed.is_set():         # the client went away mid-session
                    log.emit(PEER_ERROR, conn=self.conn, message="connection closed before all frames were sent")
                    return
                sched.poll(ev.now() - t0)
                while self.unsent(sids.values()) < lowat and (cur := sched.next()) is not None:
                    q.send_stream_data(sids[cur[0]], plan.frame(*cur))
                    log.emit(FRAME_SENT, conn=self.conn, kind=KINDS[cur[0]], seq=cur[1],
                             stream=sids[cur[0]])
                self.transmit()
                await asyncio.sleep(0.001)
            for sid in sids.values():
                q.send_stream_data(sid, b"", end_stream=True)
            self.transmit()

    class Server(QuicServer):
        def datagram_received(self, data, addr) -> None:
            try:
                pull_quic_header(Buffer(data=data), host_cid_length=self._configuration.connection_id_length)
            except ValueError as exc:
                log.emit(PEER_ERROR, addr=list(addr), bytes=len(data), message=f"not QUIC: {exc}")
                return
            super().datagram_received(data, addr)

    async def main() -> None:
        qdir, _ = qlog_paths(args.log, "server")
        qdir.mkdir(parents=True, exist_ok=True)
        qlogger = QuicFileLogger(qdir)
        config = QuicConfiguration(is_client=False, alpn_protocols=[ALPN], quic_logger=qlogger)
        tickets: dict = {}                  # session tickets this server issued (0-RTT resumption)
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = make_cert(tmp)
            config.load_cert_chain(cert, key)
        host, port = parse_hostport(args.listen)
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: Server(configuration=config, create_protocol=Session,
                           session_ticket_fetcher=lambda label: tickets.pop(label, None),
                           session_ticket_handler=lambda t: tickets.__setitem__(t.ticket, t)),
            local_addr=(host, port))
        addr = transport.get_extra_info("sockname")
        log.emit(ev.READY, addr=list(addr), transport="quic")
        print(f"ready {addr[0]}:{addr[1]}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            transport.close()
            end_traces(qlogger)
    asyncio.run(main())
    return 0


def end_traces(qlogger) -> None:
    """Write the qlog of every connection still open.  aioquic writes a connection's trace when
    its closing period has ended; a server the run stops (SIGTERM) has closed none, so its qlog
    directory stayed empty and the sender's own record (bytes in flight, congestion window,
    packets sent again) was lost."""
    for trace in list(qlogger._traces):      # aioquic's open traces (QuicLogger has no public list)
        qlogger.end_trace(trace)


def quic_client(args, log: ev.EventLog, plan: Plan) -> Receiver:
    from aioquic.asyncio.client import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import StreamDataReceived
    from aioquic.quic.logger import QuicFileLogger
    rx = Receiver(plan, log)

    class Client(QuicConnectionProtocol):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.finished = asyncio.get_running_loop().create_future()

        def quic_event_received(self, event) -> None:
            if isinstance(event, StreamDataReceived) and not self.finished.done():
                try:
                    rx.feed(event.stream_id, event.data)
                except ProtocolError as exc:
                    self.finished.set_exception(exc)
                    return
                if rx.done:
                    self.finished.set_result(True)

    async def fetch_ticket(host: str, port: int):
        """An untimed connection, kept until the server's NewSessionTicket arrived."""
        got = asyncio.get_running_loop().create_future()
        config = QuicConfiguration(is_client=True, alpn_protocols=[ALPN], verify_mode=ssl.CERT_NONE,
                                   server_name=SERVER_NAME)
        async with connect(host, port, configuration=config,
                           session_ticket_handler=lambda t: got.done() or got.set_result(t)):
            ticket = await asyncio.wait_for(got, parse_time(args.timeout))
        log.emit("session_ticket", max_early_data=ticket.max_early_data_size)
        return ticket

    async def main() -> None:
        qdir, keylog = qlog_paths(args.log, "client")
        qdir.mkdir(parents=True, exist_ok=True)
        host, port = parse_hostport(args.server, "127.0.0.1")
        ticket = await fetch_ticket(host, port) if args.resume else None
        with open(keylog, "a") as secrets:
            config = QuicConfiguration(is_client=True, alpn_protocols=[ALPN], verify_mode=ssl.CERT_NONE,
                                       server_name=SERVER_NAME, session_ticket=ticket,
                                       quic_logger=QuicFileLogger(qdir), secrets_log_file=secrets)
            log.emit(CONNECT_START)
            async with connect(host, port, configuration=config, create_protocol=Client,
                               wait_connected=ticket is None) as proto:
                src = proto._transport.get_extra_info("sockname")
                log.emit(ev.CONN, conn=0, side="client", proto="udp", src=src[0], sport=src[1],
                         dst=host, dport=port)
                sid = proto._quic.get_next_available_stream_id()
                proto._quic.send_stream_data(sid, plan.request(), end_stream=True)
                proto.transmit()             # with a ticket: 0-RTT, before the handshake ends
                log.emit(STREAMS_REQUEST)
                try:
                    await asyncio.wait_for(proto.finished, parse_time(args.timeout))
                except asyncio.TimeoutError:
                    raise AppError(f"timed out after {rx.audio} chunks and {rx.image} image bytes") from None
                tls = proto._quic.tls
                log.emit(ev.TLS_DONE, resumed=bool(tls.session_resumed),
                         early_data_accepted=bool(tls.early_data_accepted))
    asyncio.run(main())
    return rx


# ------------------------------------------------------------------ entry points

def run_server(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="server", argv=sys.argv[1:])
        plan = plan_of(args)
        return (tcp_server if args.transport == "tcp" else quic_server)(args, log, plan)
    return guarded(run, log)


def run_client(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="client", argv=sys.argv[1:])
        plan = plan_of(args)
        rx = (tcp_client if args.transport == "tcp" else quic_client)(args, log, plan)
        log.emit(ev.SUMMARY, chunks=rx.audio, image_bytes=rx.image, transport=args.transport)
        print(f"streams over {args.transport}: {rx.audio} chunks, {rx.image} image bytes", flush=True)
        return 0
    return guarded(run, log)


def build_parser():
    p, _, c = app_parser(STREAMS, __doc__, run_server, run_client)
    c.add_argument("--timeout", default="60s", help="give up after this long (default: 60s)")
    c.set_defaults(schedule=None)
    return p


def main(argv: list[str] | None = None) -> int:
    return app_main(build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
