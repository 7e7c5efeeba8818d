"""Audio chunks duplicated over two access paths (C11): ``--chunks`` chunks of ``--chunk-bytes``
every ``--tau`` over UDP; ``--send single`` sends each on the first address of ``--paths``,
``duplicate`` a copy on every path (one socket bound to each address: source routing picks the
path).  Datagram ``!4sIQ`` (b"DU01", chunk number, send time ns) + payload.  The server keeps the
first copy (``chunk_arrival``: ``seq``, ``src`` = the client address, i.e. the path, ``bytes`` =
the chunk's payload) and counts later ones (``duplicate``: dedup by chunk number, ``bytes``),
with an 8 MiB receive buffer; a datagram that is not this protocol is logged (``peer_error``) and
dropped.  Client: ``chunk_sent`` (``copies``), ``summary``.
"""
from __future__ import annotations

import socket
import struct
import sys
import time

from testbed.apps import eventlog as ev
from testbed.apps import sockets
from testbed.apps.appcli import app_main, app_parser
from testbed.apps.appmain import guarded, parse_hostport
from testbed.spec.units import parse_size, parse_time
from testbed.workloads.streams import DUPLICATE

DGRAM = struct.Struct("!4sIQ")
DUP_MAGIC = b"DU01"
PEER_ERROR = "peer_error"


#: the server's receive buffer: a burst of copies while the server process waits for a CPU must
#: not be dropped by its own socket (that would count as a path failure)
RCVBUF = 8 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)      # Linux; Python does not name it


def _deep_receive_buffer(sock: socket.socket) -> None:
    try:                                  # root (the testbed's hosts): beyond net.core.rmem_max
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)


def run_server(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="server", argv=sys.argv[1:])
        seen: set[int] = set()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            _deep_receive_buffer(sock)
            sock.bind(parse_hostport(args.listen))
            sockets.announce_ready(log, sock, transport="udp")
            while True:
                data, addr = sock.recvfrom(65536)
                if len(data) < DGRAM.size or data[:4] != DUP_MAGIC:
                    log.emit(PEER_ERROR, src=addr[0], bytes=len(data), message="not a duplicate chunk")
                    continue
                _, seq, sent = DGRAM.unpack_from(data)
                size = len(data) - DGRAM.size
                if seq in seen:
                    log.emit("duplicate", seq=seq, src=addr[0], bytes=size)
                    continue
                seen.add(seq)
                log.emit(ev.CHUNK_ARRIVAL, seq=seq, src=addr[0], bytes=size, delay_ms=(ev.now() - sent) / 1e6)
    return guarded(run, log)


def run_client(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="client", argv=sys.argv[1:])
        addrs = [a for a in args.paths.split(",") if a]
        if args.send == "single":
            addrs = addrs[:1]
        server = parse_hostport(args.server, "127.0.0.1")
        socks = []
        try:
            for a in addrs:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(s)
                s.bind((a, 0))
            tau, size = parse_time(args.tau), parse_size(args.chunk_bytes)
            t0 = time.monotonic()
            for seq in range(args.chunks):
                time.sleep(max(0.0, t0 + seq * tau - time.monotonic()))
                data = DGRAM.pack(DUP_MAGIC, seq, ev.now()) + bytes(size)
                for s in socks:
                    s.sendto(data, server)
                log.emit(ev.CHUNK_SENT, seq=seq, copies=len(socks))
            time.sleep(parse_time(args.linger))
        finally:
            for s in socks:
                s.close()
        log.emit(ev.SUMMARY, chunks=args.chunks, copies=len(addrs), send=args.send)
        print(f"{args.send}: sent {args.chunks} chunks of {size} B, {len(addrs)} "
              f"cop{'y' if len(addrs) == 1 else 'ies'} each (delivery: see the run's metrics)", flush=True)
        return 0
    return guarded(run, log)


def build_parser():
    return app_parser(DUPLICATE, __doc__, run_server, run_client)[0]


def main(argv: list[str] | None = None) -> int:
    return app_main(build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
