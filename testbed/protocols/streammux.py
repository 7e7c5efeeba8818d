"""Sans-I/O core of the ``streams`` workload (C8): the frame format, the sender's schedule and
scheduler, and the receiver's frame decoder.  No sockets, no clock: driven by ``(now, event)``.

Frame (HTTP/2-like, one frame is never interleaved with another): ``!2sBIH`` header =
(``b"SM"``, stream kind, sequence number, payload length) + payload.  Kinds: 0 audio (one
frame per chunk), 1 image (the image cut into frames of at most ``frame_bytes``).  Over TCP
all frames share one byte stream (connection-wide order); over QUIC each kind has its own
QUIC stream carrying the same frames (per-stream order).

Schedule (C9/C8): the image's frames are all ready at 0; audio chunk i is ready at
``audio_start + i·τ`` and due at the receiver at ``deadline + i·τ`` (relative to the session
start).  Scheduler ``fifo``: frames leave in the order they became ready (the image was queued
first, so audio waits for it); ``priority``: a ready audio chunk leaves before any image frame.
"""
from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass

HEADER = struct.Struct("!2sBIH")
MAGIC = b"SM"
AUDIO, IMAGE = 0, 1
KINDS = {AUDIO: "audio", IMAGE: "image"}
REQUEST = struct.Struct("!4sIIH")      # b"SQ01", image bytes, audio chunks, audio chunk bytes
REQUEST_MAGIC = b"SQ01"
MAX_FRAME = 0xFFFF


class ProtocolError(ValueError):
    """The peer sent bytes that are not this protocol."""


@dataclass(frozen=True)
class Plan:
    """What the sender sends and when (all times in ns from the session start)."""
    image_bytes: int
    frame_bytes: int
    chunks: int
    chunk_bytes: int
    tau_ns: int
    audio_start_ns: int
    deadline_ns: int

    def __post_init__(self):
        if not 1 <= self.frame_bytes <= MAX_FRAME or not 1 <= self.chunk_bytes <= MAX_FRAME:
            raise ValueError(f"frame and chunk sizes must be in 1..{MAX_FRAME} bytes")
        if self.image_bytes < 0 or self.chunks < 0 or self.tau_ns <= 0:
            raise ValueError("image bytes and chunks must be >= 0, the chunk duration > 0")

    @property
    def image_frames(self) -> int:
        return -(-self.image_bytes // self.frame_bytes)

    def ready_ns(self, seq: int) -> int:
        return self.audio_start_ns + seq * self.tau_ns

    def due_ns(self, seq: int) -> int:
        return self.deadline_ns + seq * self.tau_ns

    def frame(self, kind: int, seq: int) -> bytes:
        if kind == AUDIO:
            size = self.chunk_bytes
        else:
            size = min(self.frame_bytes, self.image_bytes - seq * self.frame_bytes)
        body = bytes((seq * 7 + kind + i) & 0xFF for i in range(min(size, 64))) * (size // 64 + 1)
        return HEADER.pack(MAGIC, kind, seq, size) + body[:size]

    def request(self) -> bytes:
        return REQUEST.pack(REQUEST_MAGIC, self.image_bytes, self.chunks, self.chunk_bytes)

    def check_request(self, data: bytes) -> None:
        """ProtocolError unless ``data`` is this plan's request."""
        if len(data) != REQUEST.size or data[:4] != REQUEST_MAGIC:
            raise ProtocolError(f"not a streams request: {data[:16]!r}")
        if data != self.request():
            _, image, chunks, size = REQUEST.unpack(data)
            raise ProtocolError(f"request for image {image} B, {chunks} x {size} B chunks does not "
                                f"match this server's {self.image_bytes} B, {self.chunks} x {self.chunk_bytes} B")


class Scheduler:
    """Which frame leaves next.  ``poll(now)`` queues the audio chunks ready by ``now``;
    ``next()`` returns (kind, seq) or None; ``wake(now)`` is when the next chunk becomes ready
    (None when all are queued)."""

    def __init__(self, plan: Plan, policy: str):
        if policy not in ("fifo", "priority"):
            raise ValueError(f"schedule {policy!r}; allowed: fifo, priority")
        self.plan, self.policy = plan, policy
        self.image = deque((IMAGE, i) for i in range(plan.image_frames))
        self.audio: deque = deque()
        self._next_chunk = 0

    def poll(self, now: int) -> None:
        while self._next_chunk < self.plan.chunks and self.plan.ready_ns(self._next_chunk) <= now:
            self.audio.append((AUDIO, self._next_chunk))
            self._next_chunk += 1

    def wake(self) -> int | None:
        return self.plan.ready_ns(self._next_chunk) if self._next_chunk < self.plan.chunks else None

    def next(self, kinds: tuple[int, ...] = (AUDIO, IMAGE)) -> tuple[int, int] | None:
        """The next frame among ``kinds`` (QUIC asks per stream)."""
        first = (self.audio, self.image)
        if self.policy == "fifo" and self.image and IMAGE in kinds:
            first = (self.image, self.audio)     # the image was queued at 0, before any chunk
        for q in first:
            if q and q[0][0] in kinds:
                return q.popleft()
        return None

    @property
    def done(self) -> bool:
        return not self.image and not self.audio and self.wake() is None


class Decoder:
    """Splits one byte stream into frames; ``feed(data)`` returns the frames completed by
    ``data`` as (kind, seq, start, end): stream byte offsets of the frame, header included."""

    def __init__(self):
        self.buf = bytearray()
        self.offset = 0          # stream offset of buf[0]

    def feed(self, data: bytes) -> list[tuple[int, int, int, int]]:
        self.buf += data
        out = []
        while len(self.buf) >= HEADER.size:
            magic, kind, seq, size = HEADER.unpack_from(self.buf)
            if magic != MAGIC or kind not in KINDS:
                raise ProtocolError(f"bad frame header at stream offset {self.offset}: "
                                    f"{bytes(self.buf[:HEADER.size])!r}")
            end = HEADER.size + size
            if len(self.buf) < end:
                break
            out.append((kind, seq, self.offset, self.offset + end))
            del self.buf[:end]
            self.offset += end
        return out
