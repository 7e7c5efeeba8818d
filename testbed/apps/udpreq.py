"""Request/response over the testbed's UDP transport (``testbed.transport``): the same fixed
354,640 B body as ``reqresp``, server processing time T, reply of M bytes — the program that
runs ``reqresp --transport udp`` (its options: reqresp's parameters that apply to udp).

Messages: a request is ``!4sQII`` = (b"UQ01", body length N, reply length M, processing time T
in µs) + N body bytes; a response is ``!4sI`` = (b"UR01", the request's message id) + M bytes.
Mode ``new``: a new socket (source port) and transport endpoint per request; ``reuse``: one,
warmed by untimed requests until its loss rate is measured, at most ``--warmup`` (so adaptive
FEC starts from the path's loss rate, not the prior; ``Client.warm_up``).

Events (``eventlog``, one clock): client ``request_issued`` (timing starts), ``first_request_
byte_sent`` (logged right after the first datagram went to the kernel), ``first_response_byte`` (first
symbol of the response arrived), ``last_response_byte`` (response complete); server
``request_received`` (first symbol of the request arrived), ``request_complete`` (request
complete: t = arrival of its last needed symbol; sha256, symbols, ``decoded``, ``decode_ms``),
``response_first_byte_sent`` (logged at the start of the loop turn after the one that sent it);
``transport_stats`` per connection (the endpoint's counters, RTT, loss estimate).  Server events
carry the transport's message id as ``req`` (in mode reuse the warm-up requests count too).  The
processing time T starts when the request is delivered (after decoding).  Per-request completion
= last_response_byte.t − request_issued.t, as for reqresp.  Malformed datagrams are counted
(``malformed`` in transport_stats; from unknown addresses ``unknown_peer_junk``) and dropped.

    python -m testbed.apps.udpreq server --listen :5003 --log server.jsonl --fec adaptive
    python -m testbed.apps.udpreq client --server 10.0.0.2:5003 --log client.jsonl --fec adaptive
"""
from __future__ import annotations

import argparse
import struct
import sys
import time

from testbed.apps import eventlog as ev
from testbed.apps import payload
from testbed.apps.appcli import app_main, app_parser
from testbed.apps.appmain import AppError, guarded, parse_hostport
from testbed.apps.reqresp import completion_line, summarize
from testbed.apps.sockets import announce_ready
from testbed.workloads import ReqRespParams
from testbed.spec.units import parse_size, parse_time
from testbed.workloads.udpreq import UDP_REQRESP

REQUEST = struct.Struct("!4sQII")
RESPONSE = struct.Struct("!4sI")
REQ_MAGIC, RESP_MAGIC = b"UQ01", b"UR01"
REPLY_SEED = b"testbed-reply-v1"


def transport_config(args):
    from testbed.transport.config import TransportConfig
    return TransportConfig.from_factors(args.fec, args.ack_policy, args.pacing, args.loss_prior, args.backoff,
                                        args.send_window)


def log_stats(log: ev.EventLog, conn, ep, **fields) -> None:
    log.emit(ev.TRANSPORT_STATS, conn=conn, **ep.stats, srtt_ms=(ep.rtt.srtt or 0) / 1e6,
             min_rtt_ms=(ep.rtt.min_rtt or 0) / 1e6, loss_estimate=round(ep.loss.p, 5),
             loss_samples=ep.loss.samples, **fields)


# ------------------------------------------------------------------ server

def run_server(args: argparse.Namespace) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        from testbed.transport.endpoint import MessageDelivered, MessageReceived
        from testbed.apps.udploop import UdpLoop, udp_socket
        log.emit(ev.START, role="server", argv=sys.argv[1:])
        config = transport_config(args)
        log.emit(ev.FACTORS, side="server", requested=config.describe(), transport=config.describe())
        sock = udp_socket(parse_hostport(args.listen))
        loop = UdpLoop(sock, config, accept=True)
        conns: dict = {}
        first: dict = {}

        def on_event(addr, e):
            conn = conns.setdefault(addr, len(conns))
            ep = loop.endpoints[addr]
            if isinstance(e, MessageReceived):
                if len(e.data) < REQUEST.size or e.data[:4] != REQ_MAGIC:
                    log.emit(ev.ERROR, conn=conn, message=f"message {e.msg} is not a request")
                    return
                _, n, m, process_us = REQUEST.unpack_from(e.data)
                body = e.data[REQUEST.size:]
                log.emit(ev.REQUEST_RECEIVED, t=e.first_t, conn=conn, req=e.msg, body=n, reply=m,
                         process_us=process_us)
                log.emit(ev.REQUEST_COMPLETE, t=e.t, conn=conn, req=e.msg, bytes=len(body),
                         sha256=payload.digest(body), symbols=e.symbols, decoded=e.decoded,
                         decode_ms=e.decode_ns / 1e6)

                start = ev.now()

                def reply(addr=addr, msg=e.msg, m=m, conn=conn, start=start, process_us=process_us):
                    t = time.monotonic_ns()
                    if process_us:           # the processing: a timed step on the timeline
                        log.emit(ev.STEP, name="process", start=start, ms=process_us / 1e3, conn=conn, req=msg)
                    loop.endpoints[addr].send_message(t, RESPONSE.pack(RESP_MAGIC, msg)
                                                      + payload.body(m, REPLY_SEED))
                    first[addr] = (conn, msg)
                loop.call_at(start + process_us * 1000, reply)   # T from delivery
            elif isinstance(e, MessageDelivered):
                log_stats(log, conn, ep, role="server")
        with sock:
            announce_ready(log, sock, transport="udp")

            def note_first_send():
                # logged at the start of the loop turn after the one whose flush sent it
                for addr, (conn, msg) in list(first.items()):
                    log.emit(ev.RESPONSE_FIRST_BYTE_SENT, conn=conn, req=msg)
                    del first[addr]
                return False
            try:
                loop.run(on_event, note_first_send)
            finally:                                # SIGTERM ends the server: its counts first
                log.emit(ev.TRANSPORT_STATS, conn=None, role="server", connections=len(loop.endpoints),
                         malformed=sum(e.stats["malformed"] for e in loop.endpoints.values()),
                         **loop.stats)
        return 0
    return guarded(run, log)


# ------------------------------------------------------------------ client

class Client:
    def __init__(self, log: ev.EventLog, server: tuple[str, int], config, request: bytes,
                 timeout_s: float):
        self.log, self.server, self.config = log, server, config
        self.request, self.timeout_ns = request, int(timeout_s * 1e9)
        self.loop = None
        self.sock = None
        self.conn = -1

    def open(self) -> None:
        from testbed.apps.udploop import UdpLoop, udp_socket
        self.sock = udp_socket()
        self.loop = UdpLoop(self.sock, self.config)
        self.conn += 1
        src = self.sock.getsockname()
        self.log.emit(ev.CONN, conn=self.conn, proto="udp", src=src[0], sport=src[1],
                      dst=self.server[0], dport=self.server[1])

    def close(self) -> None:
        if self.sock is not None:
            ep = self.loop.endpoints.get(self.server)
            if ep is not None:
                log_stats(self.log, self.conn, ep, role="client", **self.loop.stats)
            self.sock.close()
            self.sock = None

    def exchange(self, req, t0: int, **fields) -> int:
        from testbed.transport.endpoint import MessageReceived
        ep = self.loop.endpoint(self.server)
        mid = ep.send_message(t0, self.request)
        got: dict = {}
        state = {"sent": False}

        def on_event(addr, e):
            if isinstance(e, MessageReceived) and e.data[:4] == RESP_MAGIC:
                (_, of) = RESPONSE.unpack_from(e.data)
                if of == mid:
                    got["e"] = e

        def stop():
            if not state["sent"] and ep.stats["packets_sent"]:
                state["sent"] = True
                self.log.emit(ev.FIRST_REQUEST_BYTE_SENT, conn=self.conn, req=req, **fields)
            return "e" in got
        if not self.loop.run(on_event, stop, t0 + self.timeout_ns):
            raise AppError(f"request {req} got no complete response within {self.timeout_ns / 1e9:g} s "
                           f"({ep.stats['packets_sent']} packets sent, {ep.stats['acks_received']} ACKs "
                           "received); is the udpreq server running?")
        e = got["e"]
        self.log.emit(ev.FIRST_RESPONSE_BYTE, t=e.first_t, conn=self.conn, req=req, **fields)
        self.log.emit(ev.LAST_RESPONSE_BYTE, t=e.t, conn=self.conn, req=req,
                      bytes=len(e.data) - RESPONSE.size, decoded=e.decoded, **fields)
        return e.t - t0

    def warm_up(self, limit: int) -> None:
        """Untimed requests on the kept endpoint until its loss estimate is measured
        (``config.min_loss_samples`` packet fates: one request of 245 packets), at most
        ``limit``; logged as ``warmup_done``."""
        done, ep = 0, self.loop.endpoint(self.server)
        while done < limit and ep.loss.samples < self.config.min_loss_samples:
            self.exchange(f"warmup{done}", ev.now(), warmup=True)
            done += 1
        self.log.emit(ev.WARMUP_DONE, conn=self.conn, requests=done, loss_samples=ep.loss.samples,
                      warm=ep.loss.samples >= self.config.min_loss_samples)

    def run(self, mode: str, requests: int, think: float, warmup: int) -> list[int]:
        times = []
        try:
            if mode == "reuse":
                self.open()
                self.warm_up(warmup)
            for k in range(requests):
                if k:
                    time.sleep(think)
                if mode == "new":
                    self.close()
                    self.open()
                t0 = self.log.emit(ev.REQUEST_ISSUED, req=k, mode=mode, conn=self.conn)["t"]
                times.append(self.exchange(k, t0))
        finally:
            self.close()
        return times


def run_client(args: argparse.Namespace) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="client", argv=sys.argv[1:])
        ReqRespParams(transport="udp", **{k: getattr(args, k) for k in ReqRespParams.__dataclass_fields__
                                          if hasattr(args, k)}).validate()
        config = transport_config(args)
        log.emit(ev.FACTORS, side="client", requested=config.describe(), transport=config.describe())
        size = parse_size(args.size)
        if size < 0:
            raise ValueError(f"request size {args.size!r} is negative")
        body = payload.body(size)
        log.emit(ev.REQUEST_BODY, bytes=size, sha256=payload.digest(body))
        process_us = int(round(parse_time(args.process) * 1e6))
        request = REQUEST.pack(REQ_MAGIC, size, parse_size(args.reply_size), process_us) + body
        client = Client(log, parse_hostport(args.server, "127.0.0.1"), config, request,
                        parse_time(args.request_timeout))
        times = client.run(args.mode, args.requests, parse_time(args.think), args.warmup)
        summary = summarize(times)
        log.emit(ev.SUMMARY, mode=args.mode, transport="udp", fec=args.fec, **summary)
        print(f"udp {args.mode} fec {args.fec}: {completion_line(summary)}", flush=True)
        return 0
    return guarded(run, log)


def build_parser():
    return app_parser(UDP_REQRESP, __doc__, run_server, run_client)[0]


def main(argv: list[str] | None = None) -> int:
    return app_main(build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
