"""A Queqiao-like relay: SOCKS5 client-side gateway + server-side gateway, one tunnel.

    server host:  python -m testbed.apps.relay server-gw --listen :7000 --log sgw.jsonl
    client host:  python -m testbed.apps.relay client-gw --socks 127.0.0.1:1080 \
                      --tunnel 10.0.0.2:7000 --log cgw.jsonl [--window 16MB ...]

The client gateway connects ONE tunnel to the server gateway at start-up (before any
application traffic, with the socket factors given: large buffers etc.; route initcwnd and
slow_start_after_idle=0 are host factors applied with ``tcpopts host``) and logs
``tunnel_up``.  Each SOCKS5 CONNECT from the application becomes a stream of ``mux`` on that
tunnel; the server gateway connects to the target named in the CONNECT (the service next to
it) and relays.  ``--connect confirmed`` (default) sends the SOCKS5 reply only when the server
gateway's connection is up, so the application's ``socks_done`` covers the whole setup;
``--connect optimistic`` replies at once (see ``client_gateway``).  An error on one stream
resets that stream only (see ``_Side``).  All relay sockets run with
TCP_NODELAY (the gateways write whole frames; Nagle would hold a request's last partial frame
for a delayed ACK).
"""
from __future__ import annotations

import argparse
import asyncio
import socket
import sys

from testbed.apps import eventlog as ev
from testbed.protocols import mux, socks5
from testbed.apps import sockets, tcpopts
from testbed.apps.appmain import AppError, guarded, parse_hostport
from testbed.spec.units import parse_time


CONNECT_MODES = ("confirmed", "optimistic")
_EOF = None   # marks a buffered EOF among a stream's early DATA


async def _pump_to_tunnel(reader: asyncio.StreamReader, tunnel: asyncio.StreamWriter,
                          m: mux.Mux, sid: int, counts: dict) -> None:
    """Application → tunnel, then EOF; stops when the stream was reset meanwhile."""
    while (data := await reader.read(mux.MAX_PAYLOAD)) and sid in m.streams:
        counts["out"] += len(data)
        tunnel.write(mux.encode_data(sid, data))
        await tunnel.drain()
    if sid in m.streams:
        tunnel.write(m.eof(sid))
        await tunnel.drain()


class _Side:
    """One tunnel end: routes incoming frames to per-stream writers.

    Failure isolation: an error on one stream's application socket (reset, ENOTCONN from
    ``write_eof`` after the peer vanished, anything else) resets that stream only — its socket
    is closed, the far side gets RESET, and ``stream_reset`` is logged with the reason; the
    tunnel and every other stream keep going.  Only the tunnel's own failure (EOF, a framing
    error) ends the gateway."""

    def __init__(self, log: ev.EventLog, role: str, reader, writer):
        self.log, self.reader, self.writer = log, reader, writer
        self.mux = mux.Mux(role)
        self.writers: dict[int, asyncio.StreamWriter] = {}
        self.pending: dict[int, asyncio.Future] = {}
        self.counts: dict[int, dict] = {}
        self.early: dict[int, list] = {}   # DATA (and EOF) that arrived before the stream's socket
        self.hello = asyncio.Event()      # the server gateway's HELLO arrived (client side)

    async def read_tunnel(self, on_open=None) -> None:
        while data := await self.reader.read(256 * 1024):
            for f in self.mux.receive(data):
                try:
                    await self._frame(f, on_open)
                except Exception as exc:              # noqa: BLE001 — this stream only
                    self.reset(f.stream, f"{type(exc).__name__}: {exc}")
        for fut in self.pending.values():
            fut.cancel()
        for w in self.writers.values():
            w.close()

    def reset(self, sid: int, reason: str) -> None:
        """Abort stream ``sid`` here and (if the far side still knows it) there."""
        w = self.writers.pop(sid, None)
        if w is not None:
            w.close()
        self.early.pop(sid, None)
        fut = self.pending.pop(sid, None)
        if fut is not None and not fut.done():
            fut.cancel()
        if sid in self.mux.streams:
            self.writer.write(self.mux.reset(sid))
        self.log.emit(ev.STREAM_RESET, stream=sid, reason=reason, **self.counts.pop(sid, {}))

    async def _frame(self, f: mux.Frame, on_open) -> None:
        T = mux.FrameType
        if f.type is T.HELLO:
            self.hello.set()
        elif f.type is T.OPEN:
            asyncio.ensure_future(on_open(f.stream, *mux.decode_open(f.payload)))
        elif f.type in (T.OPENED, T.REFUSED):
            fut = self.pending.pop(f.stream, None)
            if fut and not fut.done():
                fut.set_result(socks5.SUCCEEDED if f.type is T.OPENED else f.payload[0])
        elif f.type is T.DATA:
            w = self.writers.get(f.stream)
            if w is not None:
                self.counts[f.stream]["in"] += len(f.payload)
                try:
                    w.write(f.payload)
                    await w.drain()
                except OSError as exc:          # that application went away: only its stream ends
                    self.reset(f.stream, f"write to application: {type(exc).__name__}: {exc}")
            elif f.stream in self.mux.streams:
                self.early.setdefault(f.stream, []).append(f.payload)
        elif f.type is T.EOF:
            w = self.writers.get(f.stream)
            if w is not None:
                self._write_eof(f.stream, w)
            elif f.stream in self.mux.streams:    # its socket is not up yet: deliver later
                self.early.setdefault(f.stream, []).append(_EOF)
            self._maybe_close(f.stream)
        elif f.type is T.RESET:
            w = self.writers.pop(f.stream, None)
            self.early.pop(f.stream, None)
            if w is not None:
                w.close()
                self.log.emit(ev.STREAM_RESET, stream=f.stream, reason="reset by the far gateway",
                              **self.counts.pop(f.stream, {}))

    def _write_eof(self, sid: int, w: asyncio.StreamWriter) -> None:
        try:
            if w.can_write_eof():
                w.write_eof()
        except OSError as exc:                 # e.g. ENOTCONN: the application reset already
            self.reset(sid, f"EOF to application: {type(exc).__name__}: {exc}")

    def _maybe_close(self, sid: int) -> None:
        if sid not in self.mux.streams and sid in self.writers:
            self.writers.pop(sid).close()
            self.log.emit(ev.STREAM_CLOSE, stream=sid, **self.counts.pop(sid, {}))

    async def relay(self, sid: int, reader, writer, leftover: bytes = b"") -> None:
        """Relay between the application socket and the stream until both ends are done."""
        if sid not in self.mux.streams:        # reset while it was being set up
            writer.close()
            return
        self.writers[sid] = writer
        counts = self.counts.setdefault(sid, {"in": 0, "out": 0})
        for data in self.early.pop(sid, []):
            if data is _EOF:
                self._write_eof(sid, writer)
            else:
                counts["in"] += len(data)
                writer.write(data)
        if leftover:
            counts["out"] += len(leftover)
            self.writer.write(mux.encode_data(sid, leftover))
        try:
            await _pump_to_tunnel(reader, self.writer, self.mux, sid, counts)
        except OSError as exc:
            if sid in self.writers:
                self.reset(sid, f"read from application: {type(exc).__name__}: {exc}")
        self._maybe_close(sid)


def _nodelay(writer: asyncio.StreamWriter) -> None:
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _tuned_connect(addr, factors: tcpopts.SocketFactors, timeout: float):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    factors.apply(sock)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, addr), timeout)
    except BaseException:
        sock.close()
        raise
    return sock


async def client_gateway(log, socks_addr, tunnel_addr, factors, timeout,
                         connect: str = "confirmed") -> None:
    """SOCKS5 on ``socks_addr``, streams over one tunnel to ``tunnel_addr``.

    ``connect``: ``confirmed`` sends the SOCKS5 reply once the far gateway reports its
    connection to the target up (OPENED; REFUSED gives the RFC error code): the application's
    handshake then includes one tunnel round trip.  ``optimistic`` replies "succeeded" at once
    and forwards the application's bytes right behind the OPEN frame (the far gateway buffers
    them until its connection is up), as tunnels with pre-established connections do; a later
    REFUSED closes the application's connection.  Both log ``socks_reply`` (with ``connect``)
    and ``stream_connected`` (OPENED/REFUSED arrived)."""
    if connect not in CONNECT_MODES:
        raise ValueError(f"relay connect mode {connect!r}; allowed: {', '.join(CONNECT_MODES)}")
    tsock = await _tuned_connect(tunnel_addr, factors, timeout)
    treader, twriter = await asyncio.open_connection(sock=tsock)
    side = _Side(log, "client", treader, twriter)
    tunnel = asyncio.ensure_future(side.read_tunnel())
    try:                                   # up = the server's HELLO arrived (see mux.HELLO)
        await asyncio.wait_for(side.hello.wait(), timeout)
    except asyncio.TimeoutError:
        tunnel.cancel()
        raise AppError("the server gateway accepted the tunnel but sent no HELLO") from None
    log.emit(ev.TUNNEL_UP, side="client-gw", connect=connect)
    sockets.log_connection(log, tsock, 0, "tunnel-client", factors)

    async def on_app(reader, writer):
        box: dict = {}
        try:
            await _socks_stream(reader, writer, box)
        except Exception as exc:                 # noqa: BLE001 — this application only
            message = f"application connection: {type(exc).__name__}: {exc}"
            if "sid" in box:
                side.reset(box["sid"], message)
            else:
                log.emit(ev.ERROR, message=message)
            writer.close()

    async def confirmation(sid: int, fut: asyncio.Future) -> int:
        try:
            code = await fut
        except asyncio.CancelledError:
            return socks5.GENERAL_FAILURE
        log.emit(ev.STREAM_CONNECTED, stream=sid, ok=code == socks5.SUCCEEDED, code=code)
        if code != socks5.SUCCEEDED and connect == "optimistic" and sid in side.writers:
            side.reset(sid, f"far gateway refused (SOCKS5 code {code})")
        return code

    async def _socks_stream(reader, writer, box):
        _nodelay(writer)
        parser = socks5.Socks5Server()
        while parser.state in ("greeting", "request"):
            data = await reader.read(4096)
            if not data:
                writer.close()
                return
            writer.write(parser.feed(data))
        if parser.state == "failed":
            await writer.drain()
            writer.close()
            return
        sid, frame = side.mux.open(*parser.target)
        box["sid"] = sid
        peer = writer.get_extra_info("peername")
        log.emit(ev.SOCKS_REQUEST, stream=sid, target=list(parser.target), app=list(peer))
        fut = asyncio.get_running_loop().create_future()
        side.pending[sid] = fut
        twriter.write(frame)
        confirmed = asyncio.ensure_future(confirmation(sid, fut))
        code = socks5.SUCCEEDED if connect == "optimistic" else await confirmed
        writer.write(socks5.reply(code))
        log.emit(ev.SOCKS_REPLY, stream=sid, code=code, connect=connect)
        if code != socks5.SUCCEEDED:
            await writer.drain()
            writer.close()
            return
        log.emit(ev.STREAM_OPEN, stream=sid)
        await side.relay(sid, reader, writer, parser.leftover())

    listener = sockets.listen(socks_addr, tcpopts.SocketFactors())
    listener.setblocking(False)
    server = await asyncio.start_server(on_app, sock=listener)
    sockets.announce_ready(log, listener, role="client-gw", connect=connect)
    async with server:
        await tunnel
    raise AppError("the tunnel to the server gateway closed")


async def server_gateway(log, listen_addr, factors, timeout) -> None:
    async def on_tunnel(treader, twriter):
        tsock = twriter.get_extra_info("socket")
        twriter.write(mux.encode(mux.FrameType.HELLO, 0))
        log.emit(ev.TUNNEL_UP, side="server-gw")
        sockets.log_connection(log, tsock, 0, "tunnel-server", factors)
        side = _Side(log, "server", treader, twriter)

        async def on_open(sid, host, port):
            try:
                await _open(sid, host, port)
            except Exception as exc:             # noqa: BLE001 — this stream only
                side.reset(sid, f"{type(exc).__name__}: {exc}")

        async def _open(sid, host, port):
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            except (OSError, asyncio.TimeoutError) as exc:
                log.emit(ev.STREAM_OPEN, stream=sid, target=[host, port], ok=False, message=str(exc))
                code = (socks5.CONNECTION_REFUSED if isinstance(exc, ConnectionRefusedError)
                        else socks5.HOST_UNREACHABLE)
                if sid in side.mux.streams:
                    twriter.write(side.mux.accept(sid, False, code))
                side.early.pop(sid, None)
                return
            if sid not in side.mux.streams:      # the client reset it while we connected
                writer.close()
                return
            _nodelay(writer)
            twriter.write(side.mux.accept(sid, True))
            log.emit(ev.STREAM_OPEN, stream=sid, target=[host, port], ok=True)
            await side.relay(sid, reader, writer)
        await side.read_tunnel(on_open)

    listener = sockets.listen(listen_addr, factors, log)
    listener.setblocking(False)
    server = await asyncio.start_server(on_tunnel, sock=listener)
    sockets.announce_ready(log, listener, role="server-gw")
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbed.apps.relay", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    c = sub.add_parser("client-gw")
    c.add_argument("--socks", default="127.0.0.1:1080", help="SOCKS5 listen HOST:PORT")
    c.add_argument("--tunnel", required=True, help="server gateway HOST:PORT")
    c.add_argument("--connect", choices=CONNECT_MODES, default="confirmed",
                   help="SOCKS5 reply after the far side connected (confirmed) or at once (optimistic)")
    s = sub.add_parser("server-gw")
    s.add_argument("--listen", default=":7000", help="tunnel listen HOST:PORT")
    for q in (c, s):
        q.add_argument("--log", default="-")
        q.add_argument("--timeout", default="10s", help="connect timeout")
        tcpopts.add_socket_arguments(q)
    args = p.parse_args(argv)
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role=args.role, argv=sys.argv[1:])
        factors = tcpopts.socket_factors(args).replace(nodelay=True)
        timeout = parse_time(args.timeout)
        if args.role == "client-gw":
            coro = client_gateway(log, parse_hostport(args.socks, "127.0.0.1"),
                                  parse_hostport(args.tunnel, "127.0.0.1"), factors, timeout,
                                  args.connect)
        else:
            coro = server_gateway(log, parse_hostport(args.listen), factors, timeout)
        try:
            asyncio.run(coro)
        except asyncio.TimeoutError:
            raise TimeoutError("tunnel connect timed out") from None
        return 0
    return guarded(run, log)


if __name__ == "__main__":
    raise SystemExit(main())
