"""The kernel backend (htb + netem) for real, inside a User-Mode Linux guest (testbed/uml.py).

This machine's kernel has no qdiscs; the UML guest's has.  Each test boots a guest that runs this
file as a script (``guest`` mode): it brings up ``longhaul`` with ``backend="netem"`` through
``testbed.network.Testbed``, dumps ``tc -s qdisc``, and measures with a UDP echo probe (defined
below) the RTT and the loss of each direction separately: the echo server counts what arrived
(up), the client counts what came back of that (down).
"""
from __future__ import annotations

import json
import os
import select
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

import pytest

PROBE = struct.Struct("!IQ")  # sequence number, client send time (ns)
PROBE_SIZE = 100              # UDP payload bytes


# --- UDP echo probe (runs inside the guest's hosts) ------------------------------------------
def echo_server(port: int, idle: float) -> dict:
    """Echo every datagram back; stop ``idle`` s after the last one; count distinct sequences."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    print("ready", flush=True)
    seen: set[int] = set()
    sock.settimeout(60)  # first probe
    while True:
        try:
            data, addr = sock.recvfrom(2048)
        except socket.timeout:
            break
        sock.settimeout(idle)
        seen.add(PROBE.unpack_from(data)[0])
        sock.sendto(data, addr)
    return {"received": len(seen)}


def probe_client(host: str, port: int, count: int, interval: float, drain: float) -> dict:
    """Send ``count`` probes every ``interval`` s; collect echoes until ``drain`` s after the last."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    pad = bytes(PROBE_SIZE - PROBE.size)
    rtts: dict[int, float] = {}
    start = time.monotonic_ns()
    sent = 0
    end = None
    while True:
        now = time.monotonic_ns()
        if sent < count and now >= start + sent * interval * 1e9:
            sock.sendto(PROBE.pack(sent, now) + pad, (host, port))
            sent += 1
            if sent == count:
                end = now + drain * 1e9
            continue
        if end is not None and now >= end:
            break
        wake = end if sent == count else start + sent * interval * 1e9
        if select.select([sock], [], [], max(0.0, (wake - now) / 1e9))[0]:
            while True:
                try:
                    data = sock.recv(2048)
                except BlockingIOError:
                    break
                seq, t_sent = PROBE.unpack_from(data)
                rtts.setdefault(seq, (time.monotonic_ns() - t_sent) / 1e6)
    values = sorted(rtts.values())
    return {"sent": sent, "echoed": len(values), "rtt_min_ms": values[0] if values else None,
            "rtt_median_ms": statistics.median(values) if values else None}


# --- guest side --------------------------------------------------------------------------------
def guest_main(config_path: str) -> int:
    """Inside the guest: one Testbed run as described by the JSON config; writes result.json."""
    from testbed.network import Testbed
    cfg = json.loads(Path(config_path).read_text())
    out_dir = Path(cfg["results_dir"])
    me = [sys.executable, os.path.abspath(__file__)]
    result: dict = {}
    with Testbed("longhaul", backend="netem", overrides=cfg["overrides"],
                 results_root=out_dir / "runs") as tb:
        result["qdisc"] = {h: tb.run(h, ["tc", "-s", "qdisc", "show", "dev", f"{h}-eth0"],
                                     check=True).stdout for h in ("client", "server")}
        result["class"] = {h: tb.run(h, ["tc", "class", "show", "dev", f"{h}-eth0"],
                                     check=True).stdout for h in ("client", "server")}
        server = tb.popen("server", [*me, "echo", "5001", "3"], name="echo", text=True)
        assert server.stdout.readline().strip() == "ready", "echo server did not start"
        probe = tb.run("client", [*me, "probe", tb.ip("server"), "5001", str(cfg["count"]),
                                  str(cfg["interval"]), "3"], timeout=300, check=True)
        result["client"] = json.loads(probe.stdout)
        result["server"] = json.loads(server.communicate(timeout=30)[0])
        if cfg.get("udp_rate"):
            tb.popen("client", ["iperf3", "-s", "-1", "-p", "5201"], name="iperf3-server")
            time.sleep(1)
            flow = tb.run("server", ["iperf3", "-c", tb.ip("client"), "-p", "5201", "-u",
                                     "-b", cfg["udp_rate"], "-l", "1400", "-t", "5", "--json"],
                          timeout=60, check=True)
            result["udp_down"] = json.loads(flow.stdout)["end"]["sum"]
    (out_dir / "result.json").write_text(json.dumps(result, indent=1))
    return 0


# --- host side: the tests ----------------------------------------------------------------------
def _run_guest(tmp_path: Path, overrides: dict, count: int, interval: float,
               udp_rate: str | None = None) -> dict:
    from testbed import uml
    ok, reason = uml.availability()
    if not ok:
        pytest.skip(reason)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"results_dir": str(tmp_path), "overrides": overrides,
                               "count": count, "interval": interval, "udp_rate": udp_rate}))
    res = uml.run_in_guest([sys.executable, os.path.abspath(__file__), "guest", str(cfg)],
                           results_dir=tmp_path, timeout=600)
    assert res.returncode == 0, f"guest failed:\n{res.stdout}\n{res.stderr}"
    return json.loads((tmp_path / "result.json").read_text())


def _loss(result: dict) -> tuple[float, float]:
    sent, at_server, back = (result["client"]["sent"], result["server"]["received"],
                             result["client"]["echoed"])
    return 1 - at_server / sent, 1 - back / at_server


def _within_binomial(measured: float, p: float, n: int, sigmas: float = 4.0) -> bool:
    return abs(measured - p) <= sigmas * (p * (1 - p) / n) ** 0.5 + 1 / n


pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]


def test_longhaul_htb_netem(tmp_path):
    """longhaul at 50 Mbit/s: 100 ms each way, 14% loss server→client, none client→server."""
    r = _run_guest(tmp_path, {"rate_up": "50mbit", "rate_down": "50mbit"}, count=2000,
                   interval=0.004, udp_rate="80M")
    assert "htb" in r["qdisc"]["server"] and "netem" in r["qdisc"]["server"]
    assert "delay 100ms" in r["qdisc"]["server"] and "loss 14%" in r["qdisc"]["server"]
    assert "loss" not in r["qdisc"]["client"].split("netem", 1)[1].split("\n")[0]
    assert r["client"]["rtt_min_ms"] >= 200.0
    assert r["client"]["rtt_median_ms"] <= 205.0
    up, down = _loss(r)
    assert up == 0.0
    assert _within_binomial(down, 0.14, r["server"]["received"]), down


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "guest":
        sys.exit(guest_main(args[0]))
    if mode == "echo":
        print(json.dumps(echo_server(int(args[0]), float(args[1]))), flush=True)
    elif mode == "probe":
        print(json.dumps(probe_client(args[0], int(args[1]), int(args[2]), float(args[3]),
                                      float(args[4]))))
