"""SOCKS5 (RFC 1928) CONNECT without authentication, sans-I/O: the proxy side's parser and
the client side's messages.

Proxy side (``Socks5Server``): feed the bytes from the application; it answers the method
negotiation, then yields the CONNECT target; the caller then sends ``reply(code)``.
Only method 0x00 (no authentication) and command CONNECT are accepted; IPv4, domain-name and
IPv6 addresses are parsed.  Any other request gets the RFC's error reply and ``failed``.
"""
from __future__ import annotations

import ipaddress
import socket
import struct

VERSION = 5
NO_AUTH = 0x00
NO_ACCEPTABLE = 0xFF
CMD_CONNECT = 0x01
ATYP_IPV4, ATYP_DOMAIN, ATYP_IPV6 = 0x01, 0x03, 0x04
SUCCEEDED, GENERAL_FAILURE, NETWORK_UNREACHABLE, HOST_UNREACHABLE = 0x00, 0x01, 0x03, 0x04
CONNECTION_REFUSED, COMMAND_NOT_SUPPORTED, ATYP_NOT_SUPPORTED = 0x05, 0x07, 0x08


class Socks5Error(ConnectionError):
    pass


def reply(code: int, host: str = "0.0.0.0", port: int = 0) -> bytes:
    """Server reply: VER REP RSV ATYP BND.ADDR BND.PORT (IPv4 bound address)."""
    return bytes([VERSION, code, 0, ATYP_IPV4]) + socket.inet_aton(host) + struct.pack("!H", port)


class Socks5Server:
    """States: ``greeting`` → ``request`` → ``connect`` (target known) | ``failed``."""

    def __init__(self):
        self.state = "greeting"
        self._buf = bytearray()
        self.target: tuple[str, int] | None = None

    def feed(self, data: bytes) -> bytes:
        """Consume application bytes; return bytes to send back (possibly empty)."""
        self._buf += data
        out = b""
        if self.state == "greeting" and len(self._buf) >= 2:
            ver, n = self._buf[0], self._buf[1]
            if ver != VERSION:
                self.state = "failed"
                return b""
            if len(self._buf) < 2 + n:
                return b""
            methods = bytes(self._buf[2:2 + n])
            del self._buf[:2 + n]
            if NO_AUTH not in methods:
                self.state = "failed"
                return bytes([VERSION, NO_ACCEPTABLE])
            self.state = "request"
            out += bytes([VERSION, NO_AUTH])
        if self.state == "request" and len(self._buf) >= 5:
            ver, cmd, _, atyp = self._buf[:4]
            if atyp == ATYP_IPV4:
                need = 4 + 4 + 2
            elif atyp == ATYP_DOMAIN:
                need = 4 + 1 + self._buf[4] + 2
            elif atyp == ATYP_IPV6:
                need = 4 + 16 + 2
            else:
                self.state = "failed"
                return out + reply(ATYP_NOT_SUPPORTED)
            if len(self._buf) < need:
                return out
            if ver != VERSION or cmd != CMD_CONNECT:
                self.state = "failed"
                return out + reply(COMMAND_NOT_SUPPORTED)
            raw = bytes(self._buf[4:need - 2])
            host = (socket.inet_ntoa(raw) if atyp == ATYP_IPV4 else raw[1:].decode()
                    if atyp == ATYP_DOMAIN else str(ipaddress.IPv6Address(raw)))
            self.target = (host, struct.unpack("!H", self._buf[need - 2:need])[0])
            del self._buf[:need]
            self.state = "connect"
        return out

    def leftover(self) -> bytes:
        """Application bytes that arrived after the request (to forward once connected)."""
        data, self._buf = bytes(self._buf), bytearray()
        return data


# ---- client side (the application) ----

def greeting() -> bytes:
    return bytes([VERSION, 1, NO_AUTH])


def connect_request(host: str, port: int) -> bytes:
    try:
        addr = bytes([ATYP_IPV4]) + socket.inet_aton(host)
    except OSError:
        addr = bytes([ATYP_DOMAIN, len(host.encode())]) + host.encode()
    return bytes([VERSION, CMD_CONNECT, 0]) + addr + struct.pack("!H", port)


def client_handshake(sock: socket.socket, host: str, port: int) -> None:
    """Blocking CONNECT through the proxy ``sock`` is connected to; raises ``Socks5Error``."""
    sock.sendall(greeting())
    answer = _recv(sock, 2)
    if answer != bytes([VERSION, NO_AUTH]):
        raise Socks5Error(f"proxy refused no-authentication (answer {answer.hex()})")
    sock.sendall(connect_request(host, port))
    head = _recv(sock, 4)
    if head[1] != SUCCEEDED:
        raise Socks5Error(f"proxy could not connect to {host}:{port} (SOCKS5 reply code {head[1]})")
    _recv(sock, {ATYP_IPV4: 4, ATYP_IPV6: 16}.get(head[3], 0) + 2
          if head[3] != ATYP_DOMAIN else _recv(sock, 1)[0] + 2)


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise Socks5Error("proxy closed the connection during the SOCKS5 exchange")
        data += chunk
    return data
