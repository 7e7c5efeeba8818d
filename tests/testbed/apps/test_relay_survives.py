"""The relay survives its clients (loopback, no root): applications that abort before, during
and after the reply only reset their own stream; the client gateway keeps serving, leaks no
descriptors, and both connect modes (confirmed, optimistic) deliver the same bytes."""
import os
import socket
import struct
import subprocess
import threading
import time

import pytest

from tests.fixtures.apps import PY, events
from testbed.apps import eventlog as ev
from testbed.protocols import socks5

# the apps set TCP_CONGESTION cubic by default, which an unprivileged socket may not
pytestmark = pytest.mark.root

REPLY = 256 * 1024


class SlowServer:
    """Reads a request line, waits, answers ``REPLY`` bytes in 16 KiB pieces, closes;
    ``QUIT`` gets no answer, only the close."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _serve(conn):
        with conn:
            try:
                request = conn.recv(100)
                time.sleep(0.05)
                if request in (b"", b"QUIT\n"):
                    return
                for _ in range(REPLY // 16384):
                    conn.sendall(b"r" * 16384)
                    time.sleep(0.002)
            except OSError:
                pass

    def close(self):
        self.sock.close()


def _start(argv):
    proc = subprocess.Popen(PY + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ready "):
        proc.kill()
        raise RuntimeError(f"{argv} did not start: {line!r} {proc.stderr.read()}")
    return proc, int(line.split(":")[-1])


@pytest.fixture(params=["confirmed", "optimistic"])
def relay(tmp_path, request):
    target = SlowServer()
    sgw, tport = _start(["testbed.apps.relay", "server-gw", "--listen", "127.0.0.1:0",
                         "--log", str(tmp_path / "sgw.jsonl")])
    cgw, sport = _start(["testbed.apps.relay", "client-gw", "--socks", "127.0.0.1:0",
                         "--tunnel", f"127.0.0.1:{tport}", "--connect", request.param,
                         "--log", str(tmp_path / "cgw.jsonl")])
    try:
        yield cgw, sport, target.port, request.param
    finally:
        for p in (cgw, sgw):
            p.terminate()
            p.wait(5)
        target.close()


def _connect(sport, port):
    s = socket.create_connection(("127.0.0.1", sport), timeout=5)
    s.sendall(socks5.greeting() + socks5.connect_request("127.0.0.1", port))
    return s


def _abort(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # RST on close
    s.close()


def _answer(s) -> bytes:
    """The SOCKS5 method answer (2 B) + reply (10 B); shorter if the proxy closed."""
    got = b""
    while len(got) < 12 and (chunk := s.recv(12 - len(got))):
        got += chunk
    return got


def _fetch(sport, port) -> int:
    s = _connect(sport, port)
    with s:
        assert _answer(s)[3] == socks5.SUCCEEDED
        s.sendall(b"GET\n")
        n = 0
        while chunk := s.recv(65536):
            n += len(chunk)
        return n


def _fds(pid) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_aborting_clients_reset_only_their_stream(relay, tmp_path):
    cgw, sport, port, mode = relay
    assert _fetch(sport, port) == REPLY
    fds0 = _fds(cgw.pid)
    for _ in range(5):
        _abort(_connect(sport, port))                          # before the SOCKS5 reply
        s = _connect(sport, port)
        _answer(s)
        s.sendall(b"GET\n")
        s.recv(1000)
        _abort(s)                                              # during the reply
        s = _connect(sport, port)
        _answer(s)
        s.sendall(b"GET\n")
        s.shutdown(socket.SHUT_WR)                             # half-close, then RST mid-reply:
        time.sleep(0.06)                                       # the stream's EOF meets a dead socket
        _abort(s)
        s = _connect(sport, port)
        _answer(s)
        s.sendall(b"QUIT\n")
        s.shutdown(socket.SHUT_WR)        # the gateway reads our EOF and stops reading, so it
        time.sleep(0.01)                  # misses the RST: the far side's EOF (no reply) then
        _abort(s)                         # meets a reset socket (ENOTCONN from write_eof)
    s = _connect(sport, port)                                  # after the whole reply
    _answer(s)
    s.sendall(b"GET\n")
    n = 0
    while n < REPLY:
        n += len(s.recv(65536))
    _abort(s)
    time.sleep(0.5)
    assert cgw.poll() is None, cgw.stderr.read()
    assert _fetch(sport, port) == REPLY                        # still serving
    time.sleep(0.3)
    assert _fds(cgw.pid) <= fds0, "the gateway leaked descriptors"
    log = tmp_path / "cgw.jsonl"
    assert {e["connect"] for e in events(log, ev.SOCKS_REPLY)} == {mode}
    assert events(log, ev.STREAM_RESET), "aborted streams are logged as resets"
    assert not events(log, ev.ERROR)


def test_connect_modes_order_reply_and_confirmation(relay, tmp_path):
    cgw, sport, port, mode = relay
    assert _fetch(sport, port) == REPLY
    log = events(tmp_path / "cgw.jsonl")
    reply = next(e for e in log if e["event"] == ev.SOCKS_REPLY)
    confirmed = next(e for e in log if e["event"] == ev.STREAM_CONNECTED)
    assert confirmed["ok"]
    if mode == "confirmed":
        assert confirmed["t"] <= reply["t"]
    else:
        assert reply["t"] <= confirmed["t"]


def test_refused_target_optimistic_closes_the_application_only(relay, tmp_path):
    cgw, sport, port, mode = relay
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    dead = free.getsockname()[1]
    free.close()
    s = _connect(sport, dead)
    with s:
        s.settimeout(5)
        head = _answer(s)
        rest = b""
        try:
            while chunk := s.recv(100):
                rest += chunk
        except ConnectionResetError:
            pass
    if mode == "confirmed":
        assert head[3] == socks5.CONNECTION_REFUSED
    else:
        assert head[3] == socks5.SUCCEEDED and rest == b""   # then closed once REFUSED came
    assert _fetch(sport, port) == REPLY and cgw.poll() is None
