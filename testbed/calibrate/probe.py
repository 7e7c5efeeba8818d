"""UDP probes for ``testbed calibrate`` and the emulator benchmark, run inside hosts.

    python -m testbed.calibrate.probe echo --port P [--duration S]
    python -m testbed.calibrate.probe ping --dst IP --port P --count N --interval S [--size B]
    python -m testbed.calibrate.probe send --dst IP --port P --count N --rate BPS [--size B] [--stream K]
    python -m testbed.calibrate.probe recv --port P [--idle S] [--timeout S]

Every datagram starts with ``HEADER``: stream id, datagram count of the stream, sequence number
(0-based), sender's clock in ns (CLOCK_REALTIME for ``ping``, CLOCK_MONOTONIC for ``send``).
``--size`` is the UDP payload; the Ethernet frame is
``size + FRAME_OVERHEAD`` bytes.  ``--rate`` is the frame rate in bit/s (Ethernet header
included, no preamble/FCS), the unit of LinkSpec rates.  Each command prints one JSON object
(its last line); listeners (echo, recv) first print `ready 0.0.0.0:PORT` once bound.

``send`` also reports the sequence numbers it could not send (``unsent``: the kernel refused
them), its own CPU time over the train (``cpu_s``, user + system), its share of
the train's wall time (``cpu_share``: a sender near 1.0 was short of CPU), and the machine's
CPUs over the same time (``machine_cpu``: busy and steal shares from /proc/stat; in a UML guest,
the guest's one virtual CPU, which also runs the qdiscs and the receiver), and the train's
CLOCK_REALTIME start and end (``realtime``).

Definitions (``recv``), per stream: ``received`` datagrams (duplicates excluded), ``lost`` =
count − received, ``reordered`` = datagrams arriving after one with a higher sequence number
(tcptrace's "out of order"), ``rate_bps`` = frame bits per second of the bottleneck, from the
least-squares slope of sequence number against kernel receive time (SO_TIMESTAMPNS), refitted
without datagrams more than 1 ms off the line (``rate_fit_points`` = datagrams used); lost
datagrams that used the bottleneck count in the rate through their sequence numbers;
``rate_delivered_bps`` is the same fit over the arrival rank of the datagrams received (for a
bottleneck that lost datagrams never reached, as netem's loss before htb).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time

HEADER = struct.Struct("!IIIq")
FRAME_OVERHEAD = 8 + 20 + 14  # UDP + IPv4 + Ethernet headers
SO_TIMESTAMPNS, SO_RCVBUFFORCE = 35, 33
_TIMESPEC = struct.Struct("@qq")


def probe_argv(*args) -> list[str]:
    """argv running ``python -m testbed.calibrate.probe`` with ``args`` (str() of each) in this interpreter."""
    return [sys.executable, "-m", "testbed.calibrate.probe", *map(str, args)]


def last_json(text: str) -> dict:
    """The JSON object a probe command printed (its output's last line)."""
    return json.loads(text.strip().splitlines()[-1])


def _payload(size: int) -> bytearray:
    if size < HEADER.size:
        raise ValueError(f"probe size {size} B is below the {HEADER.size} B header")
    return bytearray(size)


def echo(port: int, duration: float) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    print(f"ready 0.0.0.0:{port}", flush=True)   # the readiness line (testbed.host.ready)
    sock.settimeout(0.2)
    n, end = 0, time.monotonic() + duration
    while time.monotonic() < end:
        try:
            data, addr = sock.recvfrom(65535)
        except socket.timeout:
            continue
        sock.sendto(data, addr)
        n += 1
    return {"echoed": n}


def ping(dst: str, port: int, count: int, interval: float, size: int, wait: float) -> dict:
    """Ping-pong: send ``count`` probes every ``interval`` s; RTT of each echoed probe (ms), from
    the send time (CLOCK_REALTIME just before send) to the kernel receive timestamp of the echo;
    ``realtime``: CLOCK_REALTIME s of the start and end of the exchange."""
    import select
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.connect((dst, port))
    sock.setblocking(False)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    buf = _payload(size)
    rtts: dict[int, float] = {}
    real0, t0 = time.time(), time.monotonic_ns()
    i, end = 0, None
    while end is None or (time.monotonic_ns() < end and len(rtts) < count):
        now = time.monotonic_ns()
        if i < count and now >= t0 + int(i * interval * 1e9):
            HEADER.pack_into(buf, 0, 0, count, i, time.time_ns())
            sock.send(buf)
            i += 1
            if i == count:
                end = now + int(wait * 1e9)
        due = t0 + int(i * interval * 1e9) if i < count else end
        if poller.poll(max(0, (due - time.monotonic_ns()) / 1e6)):
            while True:
                try:
                    data, anc, _, _ = sock.recvmsg(65535, 64)
                except BlockingIOError:
                    break
                t = _kernel_time(anc)
                _, _, seq, t_send = HEADER.unpack_from(data)
                rtts.setdefault(seq, (t - t_send) / 1e6)
    return {"sent": count, "received": len(rtts), "rtt_ms": [rtts[k] for k in sorted(rtts)],
            "realtime": [real0, time.time()]}


def _kernel_time(anc) -> int:
    """CLOCK_REALTIME ns of the SO_TIMESTAMPNS control message (now if there is none)."""
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack(data[:16])
            return sec * 1_000_000_000 + nsec
    return time.time_ns()


def send(dst: str, port: int, count: int, rate: float, size: int, stream: int,
         burst: float = 0.0005, catch_up: bool = True) -> dict:
    """Send ``count`` datagrams paced at ``rate`` frame bit/s (as fast as possible if slower),
    datagram i not before ``i / rate·frame bits − burst`` s: sleeping, no spinning, so the
    datagrams leave in bursts of about ``burst`` s worth.  Without ``catch_up``, a sender that
    fell behind (stalled) shifts its schedule instead of sending the backlog back to back."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.connect((dst, port))
    buf = _payload(size)
    gap = int((size + FRAME_OVERHEAD) * 8 / rate * 1e9)
    mono, pack, sendf, sleep = time.monotonic_ns, HEADER.pack_into, sock.send, time.sleep
    unsent: list[int] = []
    machine0, cpu0, real0 = cpu_times(), time.process_time(), time.time()
    t0 = start = mono()
    early = int(burst * 1e9)
    for i in range(count):
        target = t0 + i * gap - early  # send up to ``burst`` s early: bursts instead of spinning
        now = mono()
        if target > now:
            sleep((target - now) / 1e9)
            now = mono()
        elif not catch_up and now - target > early:  # after a stall: carry on, no burst
            t0 += now - target - early
        pack(buf, 0, stream, count, i, now)
        try:
            sendf(buf)
        except OSError:  # ENOBUFS from a full local queue: the datagram was not sent
            unsent.append(i)
    t1 = mono()
    errors = len(unsent)
    cpu, machine = time.process_time() - cpu0, cpu_window(machine0, cpu_times())
    span = (t1 - start) / 1e9   # not from t0: without catch_up a stall moved t0 on
    return {"stream": stream, "sent": count - errors, "send_errors": errors, "unsent": unsent,
            "duration_s": span,
            "send_rate_bps": (count - errors) * (size + FRAME_OVERHEAD) * 8 / span if span else None,
            "cpu_s": cpu, "cpu_share": cpu / span if span else None, "machine_cpu": machine,
            "realtime": [real0, time.time()]}


def cpu_times() -> dict[str, float]:
    """Seconds of the machine's CPUs so far (/proc/stat's ``cpu`` line, all CPUs summed): busy
    (user, nice, system, irq, softirq), steal; and ``cpus``, ``wall`` (CLOCK_MONOTONIC s)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        fields = []
    ticks = [int(x) / os.sysconf("SC_CLK_TCK") for x in fields] + [0.0] * 8
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return {"busy": user + nice + system + irq + softirq, "steal": steal,
            "cpus": os.cpu_count() or 1, "wall": time.monotonic()}


def cpu_window(before: dict, after: dict) -> dict[str, float]:
    """Busy and steal shares of the machine's CPU capacity between two ``cpu_times``: seconds
    over wall time × CPUs (a kernel that counts no idle time, as a UML guest's, still gives the
    busy share this way)."""
    capacity = max(after["wall"] - before["wall"], 1e-9) * before["cpus"]
    return {"seconds": round(after["wall"] - before["wall"], 3), "cpus": before["cpus"],
            "busy_share": round(min(1.0, (after["busy"] - before["busy"]) / capacity), 3),
            "steal_share": round(min(1.0, (after["steal"] - before["steal"]) / capacity), 3)}


def receive(port: int, idle: float, timeout: float, seqs: bool = False) -> dict:
    """Receive until ``idle`` s pass without a datagram (after the first) or ``timeout`` s.
    A receiver that was not scheduled for longer than that (a stalled guest) first reads what
    its socket holds: it stops only when no datagram is waiting.  ``seqs``: each stream also
    lists every datagram received, in arrival order: its sequence number (``seq``) and the
    sender's clock when it was sent (``t_send_ns``)."""
    import numpy as np
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # beyond net.core.rmem_max (root only): a slow reader must not drop a fast train
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", port))
    print(f"ready 0.0.0.0:{port}", flush=True)   # the readiness line (testbed.host.ready)
    streams: dict[int, dict] = {}
    start = time.monotonic()
    last = None
    size = 0
    while True:
        now = time.monotonic()
        limit = min(start + timeout, (last + idle) if last is not None else start + timeout)
        sock.settimeout(max(limit - now, 1e-6))   # past the limit: only what is already queued
        try:
            data, anc, _, _ = sock.recvmsg(65535, 64)
        except socket.timeout:
            break
        last = time.monotonic()
        stream, total, seq, t_send = HEADER.unpack_from(data)
        t_ns = _kernel_time(anc)
        s = streams.setdefault(stream, {"total": total, "seq": [], "t": [], "t_send": []})
        s["seq"].append(seq)
        s["t"].append(t_ns)
        s["t_send"].append(t_send)
        size = len(data)
    out = {}
    for stream, s in streams.items():
        seq = np.asarray(s["seq"], dtype=np.int64)
        t = np.asarray(s["t"], dtype=np.int64)
        running_max = np.maximum.accumulate(seq)
        reordered = int(np.count_nonzero(seq[1:] < running_max[:-1]))
        distinct = len(np.unique(seq))
        fit_ok = distinct >= 3 and t[-1] > t[0]
        rate, fitted = _rate_fit((t - t[0]) / 1e9, seq) if fit_ok else (None, 0)
        delivered, _ = _rate_fit((t - t[0]) / 1e9, np.arange(len(seq))) if fit_ok else (None, 0)
        out[str(stream)] = {"count": s["total"], "received": distinct, "lost": s["total"] - distinct,
                            "duplicates": len(seq) - distinct, "reordered": reordered,
                            "rate_bps": rate * (size + FRAME_OVERHEAD) * 8 if rate else None,
                            "rate_delivered_bps": delivered * (size + FRAME_OVERHEAD) * 8 if delivered else None,
                            "rate_fit_points": fitted, "frame_bytes": size + FRAME_OVERHEAD,
                            "first_ns": int(t[0]), "last_ns": int(t[-1])}
        if seqs:
            out[str(stream)].update(seq=s["seq"], t_send_ns=s["t_send"])
    return {"streams": out}


def _rate_fit(x, seq, outlier_s: float = 0.001) -> tuple[float | None, int]:
    """(datagrams/s, points used): least-squares slope of ``seq`` over receive time ``x`` (s),
    refitted without the points more than ``outlier_s`` off the line (datagrams held up by a
    stall of the sender or the emulator, which would tilt the line)."""
    import numpy as np
    mask = np.ones(len(x), dtype=bool)
    slope = None
    for _ in range(3):
        if mask.sum() < 3:
            break
        slope, icpt = np.polyfit(x[mask], seq[mask], 1)
        if slope <= 0:
            return None, int(mask.sum())
        off = np.abs(x - (seq - icpt) / slope)
        mask = off <= outlier_s
    return (float(slope) if slope else None), int(mask.sum())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbed.calibrate.probe", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--port", type=int, required=True)
    e.add_argument("--duration", type=float, default=3600)
    g = sub.add_parser("ping")
    s = sub.add_parser("send")
    for q in (g, s):
        q.add_argument("--dst", required=True)
        q.add_argument("--port", type=int, required=True)
        q.add_argument("--count", type=int, required=True)
        q.add_argument("--size", type=int, default=64)
    g.add_argument("--interval", type=float, default=0.01)
    g.add_argument("--wait", type=float, default=2.0, help="s to wait for echoes after the last probe")
    s.add_argument("--rate", type=float, required=True, help="frame bit/s")
    s.add_argument("--stream", type=int, default=0)
    s.add_argument("--burst", type=float, default=0.0005, help="s of datagrams sent back to back")
    s.add_argument("--no-catch-up", dest="catch_up", action="store_false",
                   help="after a stall, shift the schedule instead of bursting the backlog")
    s.add_argument("--realtime", action="store_true",
                   help="SCHED_FIFO priority 5 (below the emulator's 10): no stalls behind other tasks")
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--idle", type=float, default=1.0)
    r.add_argument("--timeout", type=float, default=60.0)
    r.add_argument("--seqs", action="store_true",
                   help="list every datagram's sequence number and send time per stream")
    a = p.parse_args(argv)
    if a.cmd == "echo":
        res = echo(a.port, a.duration)
    elif a.cmd == "ping":
        res = ping(a.dst, a.port, a.count, a.interval, a.size, a.wait)
    elif a.cmd == "send":
        if a.realtime:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(5))
        res = send(a.dst, a.port, a.count, a.rate, a.size, a.stream, a.burst, a.catch_up)
    else:
        res = receive(a.port, a.idle, a.timeout, a.seqs)
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
