"""The drop-tail bottleneck buffer in front of a serializer or a shared medium.

Occupancy at time t = frames of this direction that have arrived and were accepted but have not
finished transmission by t (a frame whose last bit leaves exactly at t has left), the frame in
transmission included, as in ``LinkSpec``'s queue semantics.  Bytes count the Ethernet frame as
read (14-byte header, no FCS, no per-frame ``overhead``), which is what ``LinkSpec.queue_bytes``
is compared against.

Decision at arrival (drop-tail, like pfifo/bfifo): a frame of L bytes is refused when
``packets >= limit_packets`` or ``bytes + L > limit_bytes``; a limit of None does not apply.
Because service is FIFO and every frame's finish time is known at arrival, the queue only needs
the finish times and sizes of the frames still in it.
"""
from __future__ import annotations

from collections import deque


class DropTailQueue:
    __slots__ = ("limit_packets", "limit_bytes", "_finish", "_size", "bytes", "max_packets",
                 "max_bytes")

    def __init__(self, limit_packets: int | None = None, limit_bytes: int | None = None):
        if limit_packets is not None and limit_packets < 1:
            raise ValueError(f"queue limit {limit_packets} packets must be >= 1 (or None)")
        if limit_bytes is not None and limit_bytes < 1:
            raise ValueError(f"queue limit {limit_bytes} B must be >= 1 (or None)")
        self.limit_packets = limit_packets
        self.limit_bytes = limit_bytes
        self._finish: deque[int] = deque()
        self._size: deque[int] = deque()
        self.bytes = 0
        self.max_packets = 0
        self.max_bytes = 0

    @property
    def packets(self) -> int:
        return len(self._finish)

    def admit(self, now_ns: int, frame_len: int) -> bool:
        """Forget frames finished by ``now_ns``; True if a frame of ``frame_len`` B fits."""
        finish = self._finish
        while finish and finish[0] <= now_ns:
            finish.popleft()
            self.bytes -= self._size.popleft()
        if self.limit_packets is not None and len(finish) >= self.limit_packets:
            return False
        return self.limit_bytes is None or self.bytes + frame_len <= self.limit_bytes

    def push(self, finish_ns: int, frame_len: int) -> None:
        """Record an admitted frame that finishes transmission at ``finish_ns``."""
        self._finish.append(finish_ns)
        self._size.append(frame_len)
        self.bytes += frame_len
        if len(self._finish) > self.max_packets:
            self.max_packets = len(self._finish)
        if self.bytes > self.max_bytes:
            self.max_bytes = self.bytes
