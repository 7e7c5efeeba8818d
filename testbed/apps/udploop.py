"""The thin I/O loop around ``Endpoint``s: one UDP socket, one endpoint per peer address,
``time.monotonic_ns()`` (the apps' one clock) as ``now``.

Each turn: hand every endpoint's ``send(now)`` output to ``sendto`` and its events to the
application; wait in ``select`` until a datagram arrives or the earliest timer (endpoints' and
the application's ``call_at``) is due; read every waiting datagram (each stamped when read) into
its endpoint; fire due timers.  A
datagram from an unknown address starts a new endpoint only if ``accept`` and it parses.
Sending never blocks: an EAGAIN/ENOBUFS is counted in ``stats["send_errors"]`` (the datagram is
lost, the protocol recovers it) — with the 4 MiB socket buffers set here (forced past
net.core.wmem_max/rmem_max when root) it should stay 0.
"""
from __future__ import annotations

import dataclasses
import errno
import heapq
import select
import socket
import time
from typing import Callable

from testbed.spec.factors import RCVBUF, SNDBUF
from testbed.transport import wire
from testbed.transport.config import TransportConfig
from testbed.transport.endpoint import Endpoint

BUFFER = 4 * 1024 * 1024
QUANTUM = 250_000             # ns of paced packets sent per wake-up (pacing.Pacer)


def udp_socket(bind: tuple[str, int] = ("0.0.0.0", 0)) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        SNDBUF.set(sock, BUFFER)        # SO_SNDBUFFORCE as root, else SO_SNDBUF
        RCVBUF.set(sock, BUFFER)
        sock.bind(bind)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class UdpLoop:
    def __init__(self, sock: socket.socket, config: TransportConfig, accept: bool = False):
        if config.pacing_quantum_ns == 0:          # wake for a few packets, not for each
            config = dataclasses.replace(config, pacing_quantum_ns=QUANTUM)
        self.sock, self.config, self.accept = sock, config, accept
        self.endpoints: dict[tuple, Endpoint] = {}
        self.stats = {"send_errors": 0, "unknown_peer_junk": 0, "datagrams_in": 0, "datagrams_out": 0}
        self._calls: list = []
        self._seq = 0
        self._timers: dict[tuple, int | None] = {}

    def endpoint(self, addr: tuple) -> Endpoint:
        ep = self.endpoints.get(addr)
        if ep is None:
            ep = self.endpoints[addr] = Endpoint(self.config)
            self._timers[addr] = None
        return ep

    def call_at(self, t_ns: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._calls, (t_ns, self._seq, fn))

    def flush(self, addr: tuple, now: int, on_event: Callable) -> None:
        ep = self.endpoints[addr]
        datagrams, timer = ep.send(now)
        for d in datagrams:
            try:
                self.sock.sendto(d, addr)
                self.stats["datagrams_out"] += 1
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.ENOBUFS):
                    raise
                self.stats["send_errors"] += 1
        self._timers[addr] = timer
        for ev in ep.events():
            on_event(addr, ev)

    def run(self, on_event: Callable[[tuple, object], None], stop: Callable[[], bool],
            deadline_ns: int | None = None) -> bool:
        """Run until ``stop()`` (True) or ``deadline_ns`` passes (False)."""
        fd = self.sock.fileno()
        while True:
            now = time.monotonic_ns()
            for addr in list(self.endpoints):
                self.flush(addr, now, on_event)
            if stop():
                return True
            if deadline_ns is not None and now >= deadline_ns:
                return False
            times = [t for t in self._timers.values() if t is not None]
            if self._calls:
                times.append(self._calls[0][0])
            if deadline_ns is not None:
                times.append(deadline_ns)
            wait = max(0.0, (min(times) - now) / 1e9) if times else 1.0
            readable = select.select([fd], [], [], wait)[0]
            if readable:
                for _ in range(256):
                    try:
                        data, addr = self.sock.recvfrom(65535)
                    except BlockingIOError:
                        break
                    now = time.monotonic_ns()
                    self.stats["datagrams_in"] += 1
                    if addr not in self.endpoints:
                        if not self._admit(data):
                            continue
                    self.endpoint(addr).datagram_received(now, data)
                    self.flush(addr, now, on_event)       # an ACK the policy wants now goes now
            now = time.monotonic_ns()
            while self._calls and self._calls[0][0] <= now:
                heapq.heappop(self._calls)[2]()
            for addr, t in list(self._timers.items()):
                if t is not None and t <= now:
                    self.endpoints[addr].handle_timer(now)

    def _admit(self, data: bytes) -> bool:
        if self.accept:
            try:
                wire.parse(data)
                return True
            except wire.Malformed:
                pass
        self.stats["unknown_peer_junk"] += 1
        return False
