"""Stream multiplexing over one tunnel connection: framing and stream state, sans-I/O.

Frame = 9-byte header ``!BII`` (type, stream id, payload length) + payload.

* ``OPEN``   client gw → server gw: connect stream ``id`` to payload ``!H`` port + host (UTF-8).
* ``OPENED`` server gw → client gw: the connection to the target is up (payload empty).
* ``REFUSED`` server gw → client gw: it is not; payload = one SOCKS5 reply code (RFC 1928 §6).
* ``DATA``   either way: payload bytes of the stream (at most ``MAX_PAYLOAD`` per frame).
* ``EOF``    either way: the sender's side of the stream is finished (TCP half-close).
* ``RESET``  either way: abort the stream; both sides forget it.
* ``HELLO``  server gw → client gw once, stream 0, right after the tunnel was accepted.  It makes
  the tunnel really up: a SYN/ACK's window field is never scaled, so until the server sends a
  segment the client believes the peer's window is at most 64 KB and its first burst (the first
  stream's request) would wait a round trip after 64 KB.

Stream ids are chosen by the client gateway (1, 2, ...) and never reused; a stream is
forgotten once both directions saw EOF, or on RESET/REFUSED.  Frames that cross a RESET in
flight (OPENED, DATA, EOF for a stream already forgotten) are ignored, never a protocol error.
There is no per-stream flow control: the tunnel's TCP
window is shared, and a slow application stalls the others (head-of-line blocking, as HTTP/2
over TCP).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

HEADER = struct.Struct("!BII")
MAX_PAYLOAD = 64 * 1024


class FrameType(IntEnum):
    OPEN = 1
    OPENED = 2
    REFUSED = 3
    DATA = 4
    EOF = 5
    RESET = 6
    HELLO = 7


class ProtocolError(Exception):
    """The peer sent something the framing does not allow."""


@dataclass(frozen=True)
class Frame:
    type: FrameType
    stream: int
    payload: bytes = b""


def encode(ftype: FrameType, stream: int, payload: bytes = b"") -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"frame payload {len(payload)} B exceeds {MAX_PAYLOAD} B")
    return HEADER.pack(ftype, stream, len(payload)) + payload


def encode_open(stream: int, host: str, port: int) -> bytes:
    return encode(FrameType.OPEN, stream, struct.pack("!H", port) + host.encode())


def decode_open(payload: bytes) -> tuple[str, int]:
    if len(payload) < 3:
        raise ProtocolError("OPEN frame without a target")
    return payload[2:].decode(), struct.unpack("!H", payload[:2])[0]


def encode_data(stream: int, data: bytes) -> bytes:
    """``data`` as as many DATA frames as needed."""
    return b"".join(encode(FrameType.DATA, stream, data[i:i + MAX_PAYLOAD])
                    for i in range(0, len(data), MAX_PAYLOAD))


class Decoder:
    """Turns the tunnel's byte stream into frames; feed it whatever recv() returned."""

    def __init__(self):
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames = []
        while len(self._buf) >= HEADER.size:
            ftype, stream, length = HEADER.unpack_from(self._buf)
            if length > MAX_PAYLOAD:
                raise ProtocolError(f"frame length {length} exceeds {MAX_PAYLOAD}")
            try:
                ftype = FrameType(ftype)
            except ValueError:
                raise ProtocolError(f"unknown frame type {ftype}") from None
            if len(self._buf) < HEADER.size + length:
                break
            payload = bytes(self._buf[HEADER.size:HEADER.size + length])
            del self._buf[:HEADER.size + length]
            frames.append(Frame(ftype, stream, payload))
        return frames


class Mux:
    """Stream bookkeeping for one end of the tunnel (``client`` opens streams, ``server``
    accepts them).  ``receive`` validates incoming frames against the stream states."""

    def __init__(self, role: str):
        if role not in ("client", "server"):
            raise ValueError(f"mux role {role!r}; allowed: client, server")
        self.role = role
        self.decoder = Decoder()
        self._next = 1
        self.streams: dict[int, set[str]] = {}   # id → flags: "open", "eof_in", "eof_out"

    def open(self, host: str, port: int) -> tuple[int, bytes]:
        if self.role != "client":
            raise ProtocolError("only the client gateway opens streams")
        sid, self._next = self._next, self._next + 1
        self.streams[sid] = set()
        return sid, encode_open(sid, host, port)

    def eof(self, sid: int) -> bytes:
        self._flag(sid, "eof_out")
        return encode(FrameType.EOF, sid)

    def reset(self, sid: int) -> bytes:
        self.streams.pop(sid, None)
        return encode(FrameType.RESET, sid)

    def accept(self, sid: int, ok: bool, code: int = 0) -> bytes:
        if ok:
            self.streams[sid].add("open")
            return encode(FrameType.OPENED, sid)
        self.streams.pop(sid, None)
        return encode(FrameType.REFUSED, sid, bytes([code]))

    def _flag(self, sid: int, flag: str) -> None:
        flags = self.streams.get(sid)
        if flags is None:
            return
        flags.add(flag)
        if {"eof_in", "eof_out"} <= flags:
            del self.streams[sid]

    def receive(self, data: bytes) -> list[Frame]:
        frames = self.decoder.feed(data)
        for f in frames:
            known = f.stream in self.streams
            if f.type is FrameType.OPEN:
                if self.role != "server" or known:
                    raise ProtocolError(f"unexpected OPEN for stream {f.stream}")
                self.streams[f.stream] = set()
            elif f.type in (FrameType.OPENED, FrameType.REFUSED):
                if self.role != "client" or f.stream >= self._next:
                    raise ProtocolError(f"unexpected {f.type.name} for stream {f.stream}")
                if not known:
                    continue       # crossed our RESET: the stream is gone here, nothing to do
                if f.type is FrameType.OPENED:
                    self.streams[f.stream].add("open")
                else:
                    del self.streams[f.stream]
            elif f.type is FrameType.HELLO:
                if self.role != "client" or f.stream != 0:
                    raise ProtocolError("unexpected HELLO")
            elif f.type is FrameType.EOF:
                self._flag(f.stream, "eof_in")
            elif f.type is FrameType.RESET:
                self.streams.pop(f.stream, None)
            # DATA for a stream we already reset is dropped by the caller (it has no socket).
        return frames
