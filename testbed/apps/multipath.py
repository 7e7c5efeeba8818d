"""Two access paths (C11): an upload of ``--size`` bytes over one path, split over two TCP
connections, or one MPTCP connection; and audio chunks duplicated over both paths (UDP).

``multipath`` (TCP, client → server): scheme ``single`` — one connection from the first address
of ``--paths``; ``split`` — one connection per address (bound to it, so source routing sends it
down its own path), bytes in proportion to ``--weights`` (the configured path rates); ``mptcp``
— one IPPROTO_MPTCP (262) socket; the client configures its path manager in its namespace
(``ip mptcp limits set subflows 2 add_addr_accepted 2``, ``ip mptcp endpoint add ADDR
subflow`` for every further address), the server its limits; both log the read-back
(``mptcp_config``).  Whether both subflows carried data is checked in the client's capture
(``analysis.multipath``): MPTCP falls back to one path silently.

Wire: the client sends ``!4sQ`` (b"MP01", bytes that follow) then the bytes; the server answers
``!Q`` (bytes it read) when it has them all.  A header that is not this protocol is logged
(``peer_error``) and the connection dropped; the server keeps serving.

Events: client ``transfer_start`` (before the first connect), ``path_done`` per connection
(``path`` index, ``src``, ``bytes``; t = the server's answer arrived: every byte delivered to
the server application), ``transfer_done`` (the last path_done); server ``path_received``.
"""
from __future__ import annotations

import re
import socket
import struct
import subprocess
import sys
import threading

from testbed.apps import eventlog as ev
from testbed.apps import sockets, tcpopts
from testbed.apps.appcli import app_main, app_parser
from testbed.apps.appmain import AppError, guarded, parse_hostport
from testbed.spec.units import parse_rate, parse_size, parse_time
from testbed.workloads.streams import MULTIPATH

IPPROTO_MPTCP = 262
HEAD, DONE = struct.Struct("!4sQ"), struct.Struct("!Q")
MAGIC = b"MP01"
PEER_ERROR = "peer_error"


def shares(total: int, weights: list[float]) -> list[int]:
    """``total`` bytes in proportion to ``weights`` (the last share takes the rounding)."""
    if not weights or any(w <= 0 for w in weights):
        raise ValueError(f"weights {weights} must be positive")
    out = [int(total * w / sum(weights)) for w in weights[:-1]]
    return out + [total - sum(out)]


def ip_mptcp(log: ev.EventLog, side: str, addrs: list[str]) -> None:
    """Configure this namespace's MPTCP path manager and log what it reads back; refused in the
    host's own network namespace (it would change the machine's MPTCP configuration): a testbed
    host's namespace has only ``lo`` and ``<host>-ethN`` interfaces (``socket.if_nameindex`` is
    per namespace)."""
    names = [n for _, n in socket.if_nameindex() if n != "lo"]
    if not names or not all(re.fullmatch(r"[\w.]+-eth\d+", n) for n in names):
        raise AppError("scheme mptcp configures the MPTCP path manager: run it inside a testbed "
                       "namespace (testbed run multipath --topo dualpath), not in the host's own")
    cmds = [["ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2"]]
    if side == "client":
        cmds.append(["ip", "mptcp", "endpoint", "flush"])
        cmds += [["ip", "mptcp", "endpoint", "add", a, "subflow"] for a in addrs]
    for cmd in cmds:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise AppError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    show = {what: subprocess.run(["ip", "mptcp", what, "show"], capture_output=True, text=True).stdout.strip()
            for what in ("limits", "endpoint")}
    log.emit("mptcp_config", side=side, **show)


# ------------------------------------------------------------------ TCP server / client

def serve_conn(conn: socket.socket, log: ev.EventLog, n: int) -> None:
    with conn:
        try:
            conn.settimeout(30)
            head = sockets.recv_exact(conn, HEAD.size, keep=True)
            magic, size = HEAD.unpack(head)
            if magic != MAGIC:
                raise ValueError(f"not a multipath header: {head!r}")
            got = 0
            while got < size:
                data = conn.recv(min(sockets.RECV_BLOCK, size - got))
                if not data:
                    raise ValueError(f"peer closed after {got} of {size} bytes")
                got += len(data)
            conn.sendall(DONE.pack(got))
            peer = conn.getpeername()
            log.emit("path_received", conn=n, bytes=got, src=peer[0], sport=peer[1])
        except (OSError, ValueError) as exc:
            log.emit(PEER_ERROR, conn=n, message=f"{type(exc).__name__}: {exc}")


def run_server(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="server", argv=sys.argv[1:])
        proto = 0
        if args.scheme == "mptcp":
            ip_mptcp(log, "server", [])
            proto = IPPROTO_MPTCP
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        with lsock:
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcpopts.socket_factors(args).apply(lsock)
            lsock.bind(parse_hostport(args.listen))
            lsock.listen(16)
            sockets.announce_ready(log, lsock, scheme=args.scheme)
            n = 0
            while True:
                conn, _ = lsock.accept()
                n += 1
                threading.Thread(target=serve_conn, args=(conn, log, n), daemon=True).start()
    return guarded(run, log)


def send_path(i: int, src: str | None, nbytes: int, args, log: ev.EventLog, proto: int,
              results: dict) -> None:
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        with sock:
            factors = tcpopts.socket_factors(args)
            factors.apply(sock)
            if src:
                sock.bind((src, 0))
            sock.settimeout(10)
            sock.connect(parse_hostport(args.server, "127.0.0.1"))
            sock.settimeout(parse_time(args.timeout))
            if proto == IPPROTO_MPTCP:    # TCP_INFO & co. are not supported on the MPTCP socket
                src_, sport = sock.getsockname()[:2]
                dst, dport = sock.getpeername()[:2]
                log.emit(ev.CONN, conn=i, side="client", proto="mptcp", src=src_, sport=sport,
                         dst=dst, dport=dport, path=i)
            else:
                sockets.log_connection(log, sock, i, "client", factors, path=i)
            sock.sendall(HEAD.pack(MAGIC, nbytes))
            block = bytes(sockets.SEND_BLOCK)
            left = nbytes
            while left:
                sent = sock.send(block[:min(left, len(block))])
                left -= sent
            answer = sockets.recv_exact(sock, DONE.size, keep=True)
            got = DONE.unpack(answer)[0]
            if got != nbytes:
                raise AppError(f"path {i}: server read {got} of {nbytes} bytes")
            results[i] = log.emit("path_done", path=i, src=src, bytes=nbytes)
    except BaseException as exc:      # reported by the main thread
        results[i] = exc


def run_client(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="client", argv=sys.argv[1:])
        size = parse_size(args.size)
        addrs = [a for a in args.paths.split(",") if a]
        proto = 0
        if args.scheme == "single":
            plan = [(addrs[0], size)]
        elif args.scheme == "split":
            weights = [parse_rate(w) for w in args.weights.split(",")]
            if len(weights) != len(addrs):
                raise ValueError(f"weights {args.weights!r} and paths {args.paths!r} differ in number")
            plan = list(zip(addrs, shares(size, weights)))
        else:
            ip_mptcp(log, "client", addrs[1:])
            plan, proto = [(None, size)], IPPROTO_MPTCP
        results: dict = {}
        start = log.emit("transfer_start", scheme=args.scheme, bytes=size,
                         plan=[{"src": s, "bytes": b} for s, b in plan])["t"]
        threads = [threading.Thread(target=send_path, args=(i, s, b, args, log, proto, results))
                   for i, (s, b) in enumerate(plan)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results.values():
            if isinstance(r, BaseException):
                raise r
        end = max(r["t"] for r in results.values())
        log.emit("transfer_done", t=end, scheme=args.scheme, bytes=size, completion_s=(end - start) / 1e9)
        print(f"{args.scheme}: {size} B in {(end - start) / 1e9:.3f} s", flush=True)
        return 0
    return guarded(run, log)


def build_parser():
    p, _, c = app_parser(MULTIPATH, __doc__, run_server, run_client)
    c.add_argument("--timeout", default="120s", help="give up on a path after this long (default: 120s)")
    return p


def main(argv: list[str] | None = None) -> int:
    return app_main(build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
