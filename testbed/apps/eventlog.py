"""JSONL event logs on one clock, and the event vocabulary every app uses.

Every line is one JSON object ``{"t": <CLOCK_MONOTONIC ns>, "event": <name>, ...}``.
CLOCK_MONOTONIC is shared by all network namespaces of a host, so logs written by processes
in different Mininet hosts line up without correction.  pcaps carry CLOCK_REALTIME; the first
line of every log (``clock``) records both clocks read back to back so analysis can convert:
``t_monotonic = t_realtime - realtime_minus_monotonic_ns``.

Event names (analysis joins on these; all times are when the app observed the event):

* ``clock``: realtime_ns, monotonic_ns, realtime_minus_monotonic_ns (first line).
* ``start``: the process's role and arguments.  ``ready``: the server listens (``addr``).
* ``factors``: the factor levels requested and read back from a socket (``requested``,
  ``readback``; see ``tcpopts.read_back``), with ``conn`` (the connection id) and ``side``.
* ``conn``: a connection's 5-tuple (``proto``, ``src``, ``sport``, ``dst``, ``dport``) so the
  log joins with pcaps.
* Request/response (client side, per request ``req``):
  ``request_issued`` (timing starts: before connecting in mode new, before the first send in
  mode reuse), ``tcp_connected`` (connect() returned: SYN-ACK received, ACK sent),
  ``tls_done`` (TLS handshake returned; ``resumed``), ``first_request_byte_sent`` (the first
  byte is handed to the kernel: stamped right before the write call that carries it, i.e. when
  the kernel may start queueing and sending; ``write`` = the write pattern, ``writes`` = send()
  calls), ``last_request_byte_sent`` (the write call carrying the last byte returned: every
  request byte is in the kernel's send queue, not necessarily on the wire),
  ``request_left_send_queue`` (TCP_INFO polled every ``poll_us`` after that write showed
  ``notsent_bytes`` = 0: the last request byte had been transmitted at least once; stamped at
  the poll, so at most ``poll_us`` + one getsockopt late), ``request_acked`` (the same poll
  showed ``unacked`` = 0: every byte sent was cumulatively ACKed), ``first_response_byte``
  and ``last_response_byte`` (recv() returned the first/last byte of the reply).
* ``warmup_done``: the reused connection's warm-up ended (``requests``, ``snd_cwnd``,
  ``cwnd_wanted``, ``snd_ssthresh``, ``took_ms`` of each warm-up request, ``warm``; see
  ``reqresp.Client.warm_up``).
* ``request_body``: size and sha256 of the request body the client sends (the same every run).
* Server side: ``request_received`` (first request byte read), ``request_complete`` (last byte
  read; sha256 of the body), ``response_first_byte_sent`` and ``response_sent`` (first/last
  reply byte handed to the kernel).  With blocks (``reqresp --blocks``), per block ``block``:
  ``block_sent`` (its request written to the kernel) and ``block_reply`` (its reply read).
* ``tcp_info``: one TCP_INFO sample (see ``tcpinfo.SAMPLE_FIELDS``) of connection ``conn``.
* Bulk: ``bulk_start``, ``bulk_end`` (``bytes``).  Audio: ``chunk_sent``, ``chunk_arrival``
  (``seq``), ``playback`` (result of the playback model).  Agent: ``round_start``,
  ``round_end``.  ``step``: a timed step that stands for computation (``name``: prep, encode,
  terminal, ...; ``round``; ``ms`` = its configured length) stamped at its end, ``start`` its
  beginning.  ``disconnect``: the agent lost its connection after round ``round`` (``commit``
  keep | lose, ``kept`` rounds, ``redo`` rounds to do again).  Relay: ``tunnel_up``,
  ``socks_request``, ``socks_reply``, ``stream_open``, ``stream_close``.  With ``--socks`` the
  client's ``tcp_connected`` is the local leg to the proxy and ``socks_done`` (SOCKS5 reply
  received) marks the end-to-end connection.
  Relay connect mode (``connect`` = ``confirmed`` | ``optimistic``, on ``socks_reply``):
  ``socks_reply`` is when the client gateway answered the application; ``stream_connected``
  (client gateway) is when the far gateway's OPENED/REFUSED arrived — after ``socks_reply`` in
  optimistic mode, before it in confirmed mode.  ``stream_reset``: one stream aborted
  (``reason``), the gateway keeps serving the others.
* ``transport_stats``: the UDP transport's counters of one connection (``testbed.transport``:
  packets, source/repair, retransmitted, lost, malformed, ACKs, RTT, loss estimate).
* ``sockets_cc``: every TCP socket of the app's namespace with its congestion control (``ss -ti``,
  outside programs' sockets included), taken by the clients when their transfers are done.
* ``summary``: per-run figures computed by the app from its own events.
* ``error``: what went wrong (the process then exits non-zero).
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from testbed.spec.clock import clock_offset_ns

CLOCK = "clock"
START = "start"
READY = "ready"
FACTORS = "factors"
CONN = "conn"
REQUEST_ISSUED = "request_issued"
TCP_CONNECTED = "tcp_connected"
TLS_DONE = "tls_done"
FIRST_REQUEST_BYTE_SENT = "first_request_byte_sent"
LAST_REQUEST_BYTE_SENT = "last_request_byte_sent"
REQUEST_LEFT_SEND_QUEUE = "request_left_send_queue"
REQUEST_ACKED = "request_acked"
FIRST_RESPONSE_BYTE = "first_response_byte"
LAST_RESPONSE_BYTE = "last_response_byte"
REQUEST_BODY = "request_body"
WARMUP_DONE = "warmup_done"
RESPONSE_FIRST_BYTE_SENT = "response_first_byte_sent"
REQUEST_RECEIVED = "request_received"
REQUEST_COMPLETE = "request_complete"
RESPONSE_SENT = "response_sent"
TCP_INFO = "tcp_info"
BULK_START = "bulk_start"
BULK_END = "bulk_end"
CHUNK_SENT = "chunk_sent"
CHUNK_ARRIVAL = "chunk_arrival"
PLAYBACK = "playback"
ROUND_START = "round_start"
ROUND_END = "round_end"
STEP = "step"
DISCONNECT = "disconnect"
BLOCK_SENT = "block_sent"
BLOCK_REPLY = "block_reply"
TUNNEL_UP = "tunnel_up"
SOCKS_REQUEST = "socks_request"
SOCKS_DONE = "socks_done"
SOCKS_REPLY = "socks_reply"
STREAM_OPEN = "stream_open"
STREAM_CLOSE = "stream_close"
STREAM_CONNECTED = "stream_connected"
STREAM_RESET = "stream_reset"
TRANSPORT_STATS = "transport_stats"
SOCKETS_CC = "sockets_cc"
SUMMARY = "summary"
ERROR = "error"


def now() -> int:
    """The one clock: CLOCK_MONOTONIC in nanoseconds."""
    return time.monotonic_ns()


class EventLog:
    """JSONL writer (a new file per process run), safe to share between threads; a path of
    ``-`` is stdout."""

    def __init__(self, path: str | Path):
        self._lock = threading.Lock()
        self._owned = path != "-"
        self._out: IO[str] | None = (open(path, "w", buffering=1, encoding="utf-8")
                                     if self._owned else sys.stdout)
        mono = time.monotonic_ns()
        offset = clock_offset_ns()
        self.emit(CLOCK, t=mono, realtime_ns=mono + offset, monotonic_ns=mono,
                  realtime_minus_monotonic_ns=offset)

    def emit(self, event: str, t: int | None = None, **fields: Any) -> dict:
        record = {"t": now() if t is None else t, "event": event, **fields}
        line = json.dumps(record, separators=(",", ":"), default=str)
        with self._lock:
            if self._out is not None:
                self._out.write(line + "\n")
        return record

    def close(self) -> None:
        with self._lock:
            if self._owned and self._out is not None:
                self._out.close()
            self._out = None

    def __enter__(self) -> "EventLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

