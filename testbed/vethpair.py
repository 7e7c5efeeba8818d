"""Two network namespaces joined by a veth, optional random loss by nftables, and a small TCP
sender/receiver: the real captures of the analysis tests and of ``benchmarks/analysis.py``.
Everything created is removed on exit, also on failure.

Loss is dropped in the receiver namespace's prerouting hook, so a capture in the sender
namespace sees every transmission (a sender-side vantage point)."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field

from .errors import SetupError
from .network import require_root

SERVER = r"""
import socket, sys, time, json
mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port)); s.listen(4); print("ready", flush=True)
c, _ = s.accept()
if mode == "sink":
    total = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        total += len(b)
    print(total, flush=True)
else:   # "rr": read n-byte requests, answer each with a response of the size it names
    for _ in range(n):
        need = 8; buf = b""
        while len(buf) < need:
            b = c.recv(need - len(buf))
            if not b: raise SystemExit(1)
            buf += b
        size = int.from_bytes(buf, "big")
        c.sendall(b"r" * size)
c.close()
"""

CLIENT = r"""
import socket, sys, time, json
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
size = int(sys.argv[5]) if len(sys.argv) > 5 else 0
c = socket.create_connection((host, port))
ev = lambda name, **kw: print(json.dumps({"t": time.monotonic_ns(), "event": name,
    "sport": c.getsockname()[1], "dport": port, **kw}), flush=True)
if mode == "sink":
    c.sendall(b"x" * n)
    c.shutdown(socket.SHUT_WR)
    c.recv(1)
else:
    for i in range(n):
        ev("request_start", request=i)
        c.sendall(size.to_bytes(8, "big"))
        got = 0
        while got < size:
            b = c.recv(1 << 16)
            if not b: raise SystemExit(1)
            got += len(b)
        ev("request_done", request=i)
c.close()
"""


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


@dataclass
class Pair:
    a: str
    b: str
    ip_a: str
    ip_b: str
    procs: list = field(default_factory=list)

    def exec_argv(self, ns: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv]

    def popen(self, ns: str, argv: list[str], **kw):
        p = subprocess.Popen(self.exec_argv(ns, argv), **kw)
        self.procs.append(p)
        return p

    def loss(self, percent: int, port: int) -> None:
        """Drop ``percent``% of the TCP data segments (IP length > 100) to ``port`` arriving in
        namespace b; :meth:`dropped` reads how many were dropped."""
        rules = ("table inet tbtest {\n chain pre {\n  type filter hook prerouting priority -300;\n"
                 f"  tcp dport {port} ip length > 100 numgen random mod 100 < {percent} "
                 "counter drop\n }\n}\n")
        run(self.exec_argv(self.b, ["nft", "-f", "-"]), input=rules)

    def dropped(self) -> int:
        out = run(self.exec_argv(self.b, ["nft", "list", "table", "inet", "tbtest"])).stdout
        return int(out.split("counter packets ")[1].split()[0])

    def transfer(self, mode: str, port: int, n: int, size: int = 0, timeout: float = 60):
        """Run receiver in b and client in a; returns the client's stdout lines."""
        srv = self.popen(self.b, [sys.executable, "-c", SERVER, mode, str(port), str(n)],
                         stdout=subprocess.PIPE, text=True)
        if srv.stdout.readline().strip() != "ready":
            raise SetupError(f"the {mode} server on port {port} in {self.b} did not start")
        cli = subprocess.run(self.exec_argv(self.a, [sys.executable, "-c", CLIENT, mode, self.ip_b,
                                                     str(port), str(n), str(size)]),
                             capture_output=True, text=True, timeout=timeout, check=True)
        srv.wait(timeout)
        return cli.stdout.splitlines()


@contextlib.contextmanager
def veth_pair(tag: str = ""):
    """Namespaces ``tbtest<pid><tag>a``/``b`` with veth tbt0/tbt1; raise SetupError if not root."""
    require_root("a veth pair")
    uid = f"{os.getpid() % 10000}{tag}"
    a, b = f"tbtest{uid}a", f"tbtest{uid}b"
    sub = os.getpid() % 200 + 20
    pair = Pair(a, b, f"10.250.{sub}.1", f"10.250.{sub}.2")
    try:
        run(["ip", "netns", "add", a])
        run(["ip", "netns", "add", b])
        run(["ip", "link", "add", "tbt0", "netns", a, "type", "veth", "peer", "tbt1", "netns", b])
        for ns, dev, ip in ((a, "tbt0", pair.ip_a), (b, "tbt1", pair.ip_b)):
            run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev])
            run(["ip", "-n", ns, "link", "set", dev, "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            # no segmentation offloads: the capture then shows wire-sized segments
            run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off",
                 "gro", "off"])
        yield pair
    finally:
        for p in pair.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
