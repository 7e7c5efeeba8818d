"""Userspace emulator benchmark: plain veth, the Python engine and the native engine side by side.

    .venv/bin/python benchmarks/emulator.py [--rates 100,200,333,500,1000] [--seconds 2]
        [--engines python,native] [--tcp-seconds 20] [--skip-cpu] [--skip-udp] [--skip-iperf-udp]
        [--skip-tcp] [--skip-schedule]

0. Model (``model`` rows, no root, no I/O): the long-haul direction's model (333 Mbit/s, 100 ms,
   14% Bernoulli loss, default buffer) fed the same 1,000,000-frame trace (bursts of 1514 B
   frames at 400 Mbit/s on average) in virtual time: ns of CPU per frame of the Python
   ``DirectionModel`` and of the C core, verdicts checked equal.  The same for two links that
   change during the run (``model steps/10ms``: a rate step every 10 ms, 333 ↔ 300 Mbit/s;
   ``model trace``: a Mahimahi trace of 333 Mbit/s, ``traces.constant``), each engine's
   ns/frame also as a ratio to its own static link (``python_ratio``, ``native_ratio``),
   verdicts and times checked equal between the engines (``identical``).
0b. The forwarder's CPU (``busy loop`` rows, ``--skip-cpu``): a loop that never sleeps, pinned
   where the forwarder runs, as SCHED_FIFO (how the forwarder runs) and at nice −20; gaps ≥ 100 µs
   are time it did not get.  With RT throttling (``rt_cap_percent`` < 100) the SCHED_FIFO loop
   loses the rest of each period once it has been busy that long (50 ms per second measured on
   a 2-core VM), which is why the native loop demotes itself to SCHED_OTHER while over its
   real-time budget (``demotions``: how often it did in a row's run).
0c. The send floor (``send floor`` rows, ``--skip-floor``): what one ``send()`` of a frame into a
   veth costs on this machine with nothing of the engine around it (``native.send_train``, a C
   loop pinned to the forwarder's CPU at nice −20, PM QoS latency held at 0 µs as the forwarder
   does): 1514 B frames paced at the 1 Gbit/s spacing and 66 B (ACK-sized) frames back to back,
   into a peer namespace that steers receive processing to the other CPUs (RPS, as the
   userspace backend sets it), with a UDP socket reading there; once with those CPUs otherwise
   idle, once with a busy loop on them (as when the hosts run), once with frames addressed
   to no one there (dropped on arrival, after the hand-over to another CPU), and once the same
   with steering off (dropped inside the ``send``: no other CPU involved at all).  1514 B frames also at
   the long-haul spacing (333 Mbit/s), and both sizes also 8 frames to a ``sendmmsg`` call
   (``batch`` 8, per frame: the call's time divided by 8), as the native loop sends frames due
   together (up to 8 a call).  The engine's ``send()`` time per frame (``send_us`` in the other
   rows) cannot fall below the floor under the same load: the difference between the rows is
   what handing a frame to a busy CPU costs (an RPS IPI whenever that CPU's backlog was empty;
   a batch pays it once).  ``slow_calls``: calls that took ``SLOW_SEND_NS`` (50 µs) or more,
   ``call_max_us`` the longest; the engine counts its own the same way (``slow_sends``).
1. Forwarding (``udp`` rows).  For every offered rate of 1514 B frames (UDP trains from
   testbed.calibrate.probe, server → client, paced in 0.5 ms bursts by a SCHED_FIFO sender below the
   emulator's priority): a plain veth pair (the ceiling), then each engine with no delay and with
   100 ms one-way delay, shaped at the offered rate (departures evenly spaced, as on a real
   bottleneck; buffer 50000 frames so the sender's bursts are never dropped).  A row passes when
   the sender reached ≥ 97% of the offered rate, the p99 scheduling error is ≤ 50 µs, and no
   frame was lost: the emulator's unintended drops are 0, the receiving socket dropped nothing
   (``rx_drops``, UDP RcvbufErrors) and ``silent`` = frames the emulator logged as delivered −
   received − rx_drops is 0.  ``emu_ok``: the same without the receiver's condition — the
   emulator kept its schedule and lost nothing, but the receiving process (a Python probe, as
   on the plain veth row) could not read every frame.  ``fps``: frames received per second of
   the train.  ``rq_wait_ms``: time the forwarder was runnable but not running (other real-time
   tasks, RT throttling; see the summary's ``host``).  CPU: the
   forwarder's user+system time over the train's duration (100% = one core; it includes the
   idle seconds around the train) and per frame read; ``cpu_us_work`` excludes the native
   loop's polling before departures (``poll_idle_s``: CPU spent waiting on purpose, not work);
   ``cpu_us_no_send`` also excludes the time inside send(), most of which is the receiving
   host's kernel stack run in the forwarder's context on a veth (native engine only).
2. iperf3 UDP (``iperf3 udp`` rows): the same trains from iperf3 -u (C sender and receiver, 1472 B
   datagrams at the offered rate, iperf3's own pacing), so the receiving process is no limit;
   ``iperf_lost`` is iperf3's count of datagrams that did not arrive, ``rx_drops`` those the
   receiving socket dropped (UDP RcvbufErrors), ``emu_ok`` as above; ``late50``,
   ``late50_held_pct`` and ``holds50`` say how much of the tail followed a time in which the loop
   sent nothing although a frame was due (``hold_stats``), ``slow_sends`` how many of the
   loop's send calls took 50 µs or more.  ``flood`` rows: iperf3
   -u as fast as it sends (``-b 0``), 1514 B and 66 B frames, through an unshaped link with 1
   ms delay: the frames/s the engine forwards when they come faster than one ``send`` each, and
   its CPU per frame then (the frames due together leave in batches, ``frames_per_call``).
3. TCP (``tcp`` rows): over the long-haul path with 0% loss (333 Mbit/s, 100 ms each way), for
   cubic and bbr, per engine, two modes: ``one way`` (iperf3 ``-R``: data server → client, its
   ACKs client → server) and ``bidir`` (iperf3 ``--bidir``: full-rate TCP both ways at once,
   data and ACKs in each direction); goodput per direction over the test after ``--omit``
   seconds of start-up.  Target: bbr ≥ 90% of the 318 Mbit/s that 1448 B payloads in 1514 B frames allow,
   with no overload (``overload``: an unintended drop, a frame more than 1 ms late that no stall
   explains, or a read lag above 10 ms that no stall explains; ``late_stall`` = late frames the
   machine's stalls explain, ``stalls`` = how many the native loop saw, see
   ``emulator.forwarder.after_stall``); ``late1ms``, ``late1ms_held_pct`` and ``holds1ms``:
   ``hold_stats`` with 1 ms for both the hold and the lateness, summed over both directions.
4. Links that change (``schedule`` rows, ``--skip-schedule``): a paced UDP train at 333 Mbit/s
   as in 1. (0 ms delay, buffer 50000 frames) through the static 333 Mbit/s link, the same link
   with a rate step every 10 ms (333 ↔ 300 Mbit/s: the queue grows while at 300, so departures
   are back to back at the rate in force), and a 333 Mbit/s Mahimahi trace (opportunities every
   ms, ~28 frames due together), per engine, one after the other in one run; the schedule's
   origin is set just before the train (``Testbed.set_link_origin``).  Columns as in 1., plus
   ``changes`` (schedule records) and ``cpu_ratio``/``work_ratio``: CPU per frame (with and
   without polling) over the same engine's static row.
Every row carries /proc/loadavg at its end and the host's CPU steal/busy during the run: this
machine is shared, and other work shows up in the tail of the scheduling error.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import sys

P99_LIMIT_US = 50.0
PORT = 5600
FRAME = 1514
PAYLOAD = FRAME - 42
LONGHAUL_BPS = 333e6
TCP_LIMIT_BPS = LONGHAUL_BPS * 1448 / 1514  # goodput of 1448 B payloads in 1514 B frames at 333 Mbit/s
PLAIN = {"rate_up": "unshaped", "rate_down": "unshaped", "delay": "0ms", "loss_down": "0%"}


def _testbed(overrides: dict, engine: str | None, results_root: str, links: dict | None = None):
    from testbed.emulator.config import ENGINE_ENV
    from testbed.run.network import Testbed
    if engine:
        os.environ[ENGINE_ENV] = engine
    else:
        os.environ.pop(ENGINE_ENV, None)
    return Testbed("longhaul", backend="userspace", overrides=overrides, results_root=results_root,
                   links=links)


def run_load(overrides: dict, rate_bps: float, seconds: float, engine: str | None,
             results_root: str, links: dict | None = None) -> dict:
    """Send a paced UDP train server → client through a longhaul topology with ``overrides``
    (and ``links``: ``--link`` overrides; with a schedule, its origin is set before the train)."""
    from testbed.calibrate.probe import last_json, probe_argv
    count = max(1000, int(rate_bps * seconds / (FRAME * 8)))
    with _testbed(overrides, engine, results_root, links) as tb:
        rx = tb.popen("client", probe_argv("recv", "--port", PORT, "--idle", "1.5",
                                           "--timeout", seconds + 30), name="probe-recv", text=True)
        rx.stdout.readline()  # listening
        rcvbuf0 = udp_rcvbuf_errors(tb.host("client"))
        if links and tb.set_link_origin() is None:
            raise RuntimeError("the userspace backend did not start the link schedule")
        tx = tb.run("server", probe_argv("send", "--dst", tb.ip("client"), "--port", PORT,
                                         "--count", count, "--rate", rate_bps, "--size", PAYLOAD,
                                         "--realtime"), timeout=seconds + 60, check=True)
        out, _ = rx.communicate(timeout=seconds + 40)
        sent = last_json(tx.stdout)
        got = last_json(out)["streams"].get("0", {"received": 0})
        receiver_drops = udp_rcvbuf_errors(tb.host("client")) - rcvbuf0
    emu = tb.metadata.get("backend_summary", {})
    flow_delivered = None
    if "directions" in emu:  # the probe's frames the emulator says it delivered
        flow_delivered = int((_delivered(emu)["dport"] == PORT).sum())
    return {"sent": sent, "received": got["received"], "emu": emu, "flow_delivered": flow_delivered,
            "receiver_drops": receiver_drops}


def udp_counter(snmp: str, name: str) -> int:
    """The ``Udp:`` counter ``name`` in ``snmp``, the text of a namespace's /proc/net/snmp."""
    lines = [ln.split() for ln in snmp.splitlines() if ln.startswith("Udp:")]
    return int(lines[1][lines[0].index(name)])


def udp_rcvbuf_errors(host) -> int:
    """UDP datagrams the host dropped because a socket's receive buffer was full."""
    from testbed.host.namespace import run_in
    return udp_counter(run_in(host, ["cat", "/proc/net/snmp"]).stdout, "RcvbufErrors")


def _emu_cols(emu: dict, seconds: float) -> dict:
    err = emu.get("sched_error_us", {})
    frames = max(1, emu["totals"]["frames_in"])
    host = emu.get("host", {})
    return {"p50_us": err.get("p50"), "p99_us": err.get("p99"), "max_us": err.get("max"),
            "cpu_pct": round(100 * emu["cpu_s"] / seconds, 1),
            "cpu_us_per_frame": round(emu["cpu_s"] / frames * 1e6, 2),
            "cpu_us_work": round((emu["cpu_s"] - (emu.get("poll_idle_s") or 0)) / frames * 1e6, 2),
            "cpu_us_no_send": (round((emu["cpu_s"] - emu["poll_idle_s"] - emu["send_s"]) / frames * 1e6, 2)
                               if emu.get("send_s") is not None else None),
            "send_us": (round(emu["send_s"] / max(1, emu["totals"]["delivered"]) * 1e6, 2)
                        if emu.get("send_s") is not None else None),
            "unintended": emu.get("unintended_drops"), "late": emu["totals"].get("late"),
            "late_stall": emu["totals"].get("late_after_stall"),
            "stalls": (emu.get("stalls") or {}).get("count"),
            "demotions": emu.get("rt_demotions"), "slow_sends": emu.get("slow_sends"),
            "send_max_us": emu.get("send_max_us"),
            "steal_pct": host.get("steal_percent"), "host_busy_pct": host.get("busy_percent"),
            "rq_wait_ms": (round(host["forwarder_runqueue_wait_s"] * 1e3, 1)
                           if "forwarder_runqueue_wait_s" in host else None),
            "warnings": len(_engine_warnings(emu)),
            "fidelity": (emu.get("fidelity") or {}).get("verdict")}


def _engine_warnings(emu: dict) -> list[str]:
    """The forwarder's own overload warnings (the backend rewords ``warnings`` by verdict)."""
    return emu.get("engine_warnings", emu.get("warnings", []))


def evaluate(res: dict, rate_bps: float, emulated: bool) -> dict:
    sent = res["sent"]
    row = {"offered_mbps": rate_bps / 1e6, "sent_mbps": round(sent["send_rate_bps"] / 1e6, 1),
           "sent": sent["sent"], "received": res["received"], "rx_drops": res["receiver_drops"],
           "fps": round(res["received"] / sent["duration_s"])}
    ok_rate = sent["send_rate_bps"] >= 0.97 * rate_bps
    if emulated:
        emu = res["emu"]
        row.update(_emu_cols(emu, sent["duration_s"]))
        silent = res["flow_delivered"] - res["received"] - res["receiver_drops"]
        row["silent"] = silent
        row["emu_ok"] = ok_rate and _emu_ok(row, emu) and silent == 0
        row["ok"] = row["emu_ok"] and res["receiver_drops"] == 0
    else:
        row["lost"] = sent["sent"] - res["received"] - res["receiver_drops"]
        row["ok"] = bool(ok_rate and row["lost"] == 0 and res["receiver_drops"] == 0)
    return row


def _iperf_udp(overrides: dict, bandwidth: str, payload: int, engine: str, seconds: float,
               results_root: str) -> tuple[dict, dict, int]:
    """iperf3 -u server → client (``-b bandwidth``, ``payload`` B datagrams) through a longhaul
    topology with ``overrides``: (iperf3's end sum, the emulator's summary, datagrams the
    client's sockets dropped)."""
    import time
    with _testbed(overrides, engine, results_root) as tb:
        tb.popen("client", ["iperf3", "-s", "-1"], name="iperf3-server")
        time.sleep(0.5)
        rcvbuf0 = udp_rcvbuf_errors(tb.host("client"))
        r = tb.run("server", ["iperf3", "-c", tb.ip("client"), "-u", "-b", bandwidth,
                              "-l", str(payload), "-t", str(seconds), "-J"], timeout=seconds + 60)
        rx_drops = udp_rcvbuf_errors(tb.host("client")) - rcvbuf0
    if r.returncode != 0:
        raise RuntimeError(f"iperf3 failed: {r.stdout[-500:]} {r.stderr[-500:]}")
    return json.loads(r.stdout)["end"]["sum"], tb.metadata["backend_summary"], rx_drops


def hold_stats(sent, due, limit_us: float = P99_LIMIT_US) -> dict:
    """Where the tail of the scheduling error comes from: ``sent`` and ``due`` (ns) of the
    frames the loop delivered, in the order they left.  A *hold*: a frame waited at least
    ``limit_us`` for the loop to send anything, counted from the later of the previous departure
    and its own due time to its departure (the loop was held inside a call, or did not run).
    ``late<L>`` = frames sent more than ``limit_us`` after their due time; ``late<L>_held_pct``
    = the share of them sent before the error a hold built up fell back under ``limit_us`` (no
    frame in between left within it); ``holds<L>`` = how many holds.  <L> names the limit:
    ``50`` for 50 µs, ``1ms`` for 1,000 µs.  Late frames no hold explains fell behind a little at
    a time: the loop was too slow for the traffic."""
    import numpy as np
    sent, due = np.asarray(sent, dtype=np.int64), np.asarray(due, dtype=np.int64)
    limit = int(limit_us * 1000)
    late = sent - due > limit
    held = np.zeros(len(sent), dtype=bool)
    held[1:] = sent[1:] - np.maximum(sent[:-1], due[1:]) >= limit
    index = np.arange(len(sent))
    last_held = np.maximum.accumulate(np.where(held, index, -1))
    last_ok = np.maximum.accumulate(np.where(~late, index, -1))
    in_hold = late & (last_held > last_ok)
    label = f"{limit_us / 1000:g}ms" if limit_us >= 1000 else f"{limit_us:g}"
    n_late = int(late.sum())
    return {f"holds{label}": int(held.sum()), f"late{label}": n_late,
            f"late{label}_held_pct": round(100 * int(in_hold.sum()) / n_late, 1) if n_late else None}


def _holds(emu: dict, limit_us: float = P99_LIMIT_US) -> dict:
    """``hold_stats`` of the frames the loop delivered, per direction in the order they left
    (after a stall the loop sends one direction's backlog, then the other's: the second
    direction's frames waited for its own previous departure), summed over the directions."""
    import numpy as np
    rows = []
    for name in emu["directions"]:
        rec = _delivered(emu, name)
        order = np.argsort(rec["t_sent"], kind="stable")
        rows.append(hold_stats(rec["t_sent"][order], rec["t_sched"][order], limit_us))
    holds, late, pct = rows[0]  # the keys, named by the limit
    n = sum(r[late] for r in rows)
    held = sum(r[late] * (r[pct] or 0) / 100 for r in rows)
    return {holds: sum(r[holds] for r in rows), late: n, pct: round(100 * held / n, 1) if n else None}


def _delivered(emu: dict, direction: str = "server-client"):
    """The records of the frames the emulator delivered in ``direction`` (its frame log)."""
    from testbed.emulator.linklog import DELIVERED, read_log
    _, rec = read_log(emu["directions"][direction]["log"])
    return rec[rec["verdict"] == DELIVERED]


def _emu_ok(row: dict, emu: dict) -> bool:
    """The emulator kept its schedule (p99 ≤ P99_LIMIT_US) and lost nothing itself."""
    return bool(row["p99_us"] is not None and row["p99_us"] <= P99_LIMIT_US
                and emu.get("unintended_drops") == 0)


def run_iperf_udp(rate_bps: float, delay: str, engine: str, seconds: float, results_root: str) -> dict:
    """iperf3 -u server → client at ``rate_bps`` of 1472 B datagrams through a link shaped at
    that rate (C sender and receiver: the Python probe's receiver is not the limit here)."""
    overrides = {**PLAIN, "delay": delay, "rate_down": f"{rate_bps / 1e6:g}mbit", "queue": "50000"}
    s, emu, rx_drops = _iperf_udp(overrides, f"{rate_bps / 1e6:g}M", PAYLOAD, engine, seconds,
                                  results_root)
    row = {"offered_mbps": rate_bps / 1e6, "delay": delay, "iperf_mbps": round(s["bits_per_second"] / 1e6, 1),
           "iperf_lost": s.get("lost_packets"), "rx_drops": rx_drops, **_emu_cols(emu, seconds),
           **_holds(emu)}
    row["emu_ok"] = _emu_ok(row, emu)
    return row


def run_iperf_flood(payload: int, engine: str, seconds: float, results_root: str) -> dict:
    """iperf3 -u as fast as it sends (``-b 0``) through an unshaped link with 1 ms delay: the
    frames/s the engine forwards (``fps``: frames it delivered server → client over the time
    from its first such departure to its last) and its CPU per frame when frames come faster
    than one ``send`` each (many due together: ``frames_per_call``)."""
    s, emu, rx_drops = _iperf_udp({**PLAIN, "delay": "1ms", "queue": "50000"}, "0", payload,
                                  engine, seconds, results_root)
    sent = _delivered(emu)["t_sent"]
    delivered = len(sent)
    span_s = (int(sent.max()) - int(sent.min())) / 1e9 if delivered > 1 else seconds
    row = {"frame": payload + 42, "offered_pps": round(s["packets"] / seconds),
           "fps": round(delivered / span_s), "rx_drops": rx_drops, **_emu_cols(emu, seconds),
           "frames_per_call": (round(delivered / emu["send_calls"], 2) if emu.get("send_calls")
                               else None)}
    row["emu_ok"] = _emu_ok(row, emu)
    return row


def run_cpu_probe(policy: str, seconds: float, gap_ns: int = 100_000) -> dict:
    """What a loop that never sleeps gets on the forwarder's CPU (the last one), in a child pinned
    there: ``policy`` ``fifo`` (SCHED_FIFO at the native loop's priority, as the forwarder runs)
    or ``nice-20`` (SCHED_OTHER at nice −20).  Gaps of at least ``gap_ns`` between two reads of
    the clock are time the loop did not run: RT throttling, kernel threads, the hypervisor."""
    from testbed.emulator.forwarder import NATIVE_PRIORITY, kernel_scheduling
    sched = kernel_scheduling()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: spin, report, exit without cleanup handlers
        try:
            os.close(r)
            os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
            if policy == "fifo":
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(NATIVE_PRIORITY))
            else:
                os.setpriority(os.PRIO_PROCESS, 0, -20)
            import time
            gaps, mono = [], time.monotonic_ns
            last = start = mono()
            end = start + int(seconds * 1e9)
            while last < end:
                now = mono()
                if now - last >= gap_ns:
                    gaps.append(now - last)
                last = now
            os.write(w, json.dumps(gaps).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        gaps = json.loads(f.read() or "[]")
    os.waitpid(pid, 0)
    return {"path": f"busy loop {policy}", "seconds": seconds, "gaps": len(gaps),
            "gaps_ms": round(sum(gaps) / 1e6, 3), "max_gap_ms": round(max(gaps, default=0) / 1e6, 3),
            "preemption": sched["preemption"], "rt_cap_percent": sched["rt_cap_percent"]}


SEND_RECEIVER = """
import os, socket, sys
os.sched_setaffinity(0, {int(c) for c in sys.argv[2].split(",")})
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 1 << 23)  # SO_RCVBUFFORCE: past rmem_max
s.bind((sys.argv[1], int(sys.argv[3])))
print("ready", flush=True)
while True:
    s.recv(2048)
"""
SEND_CHILD = """
import json, os, socket, sys
import numpy as np
from testbed.emulator import native
from testbed.emulator.config import ForwarderConfig
from testbed.emulator.forwarder import SLOW_SEND_NS, hold_cpu_latency, open_socket
frame, count, gap, batch, cpu = bytes.fromhex(sys.argv[1]), *map(int, sys.argv[2:6])
os.sched_setaffinity(0, {cpu})
os.setpriority(os.PRIO_PROCESS, 0, -20)
fd, _ = hold_cpu_latency()
s = open_socket("tbt0", False, ForwarderConfig.rcvbuf, ForwarderConfig.sndbuf)  # as the forwarder opens its own
ns = np.array(native.send_train(s.fileno(), frame, count, gap, batch))
calls = ns[::batch] * batch  # each call's time (the last call's, if shorter, is overstated)
print(json.dumps({"send_us_p50": round(float(np.median(ns)) / 1e3, 2), "send_us_mean": round(float(ns.mean()) / 1e3, 2),
                  "send_us_p99": round(float(np.percentile(ns, 99)) / 1e3, 2),
                  "slow_calls": int((calls >= SLOW_SEND_NS).sum()), "call_max_us": round(float(calls.max()) / 1e3, 1)}))
"""
SPINNER = "import os, sys\nos.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')})\nwhile True: pass"


def udp_frame(dst_mac: str, src_ip: str, dst_ip: str, length: int) -> bytes:
    """An Ethernet/IPv4/UDP frame of ``length`` bytes to ``dst_ip``:PORT (UDP checksum 0)."""
    import socket
    import struct
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, length - 14, 0, 0, 64, 17, 0,
                     socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
    csum = sum(struct.unpack("!10H", ip))
    csum = ~((csum & 0xFFFF) + (csum >> 16)) & 0xFFFF
    ip = ip[:10] + struct.pack("!H", csum) + ip[12:]
    udp = struct.pack("!HHHH", PORT + 1, PORT, length - 34, 0)
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex("020000000001") + b"\x08\x00"
    return (eth + ip + udp).ljust(length, b"\0")


# (frame bytes, ns between frames, frames per call): 1514 B at 1 Gbit/s and at the long-haul
# rate, one send() each and 8 to a sendmmsg (the native loop's largest batch); ACKs back to back
FLOOR_TRAINS = ((FRAME, FRAME * 8, 1), (FRAME, round(FRAME * 8e9 / LONGHAUL_BPS), 1),
                (FRAME, round(FRAME * 8e9 / LONGHAUL_BPS), 8), (66, 0, 1), (66, 0, 8))


def run_send_floor(count: int = 50_000) -> list[dict]:
    """The ``send floor`` rows (see the module docstring, 0c)."""
    import subprocess
    from testbed.host.steering import rps_mask
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.fixtures
    from tests.fixtures.vethpair import veth_pair
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return []
    cpu, others = cpus[-1], ",".join(map(str, cpus[:-1]))
    rows = []
    with veth_pair("f") as pair:
        def steer(to: list[int]) -> None:  # the peer's receive processing to CPUs ``to`` (none: inline)
            subprocess.run(pair.exec_argv(pair.b, [sys.executable, "-m", "testbed.host.steering",
                                                   rps_mask(to), "tbt1"]), check=True)
        link = subprocess.run(["ip", "-j", "-n", pair.b, "link", "show", "tbt1"], check=True,
                              capture_output=True, text=True)
        peer_mac = json.loads(link.stdout)[0]["address"]
        rx = pair.popen(pair.b, [sys.executable, "-c", SEND_RECEIVER, pair.ip_b, others, str(PORT)],
                        stdout=subprocess.PIPE, text=True)
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("the send-floor receiver did not start")
        def delivered() -> int:  # datagrams the peer's UDP delivered to a socket
            snmp = subprocess.run(pair.exec_argv(pair.b, ["cat", "/proc/net/snmp"]), check=True,
                                  capture_output=True, text=True).stdout
            return udp_counter(snmp, "InDatagrams")
        for receiver, mac, busy, to in (
                ("UDP socket, its CPU idle", peer_mac, False, cpus[:-1]),
                ("UDP socket, its CPU busy", peer_mac, True, cpus[:-1]),
                ("none (dropped on arrival)", "02:00:00:00:00:09", False, cpus[:-1]),
                ("none, not steered (dropped in the send: no other CPU)", "02:00:00:00:00:09", False, [])):
            steer(to)
            spinner = pair.popen(pair.b, [sys.executable, "-c", SPINNER, others]) if busy else None
            for length, gap_ns, batch in FLOOR_TRAINS:
                frame = udp_frame(mac, pair.ip_a, pair.ip_b, length)
                before = delivered()
                r = subprocess.run(pair.exec_argv(pair.a, [sys.executable, "-c", SEND_CHILD, frame.hex(),
                                                           str(count), str(gap_ns), str(batch), str(cpu)]),
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"send floor ({receiver}, {length} B) failed: {r.stderr[-800:]}")
                rows.append({"path": "send floor", "receiver": receiver, "frame": length,
                             "gap_us": round(gap_ns / 1e3, 3), "batch": batch, "frames": count,
                             "received": delivered() - before, **json.loads(r.stdout)})
            if spinner is not None:
                spinner.kill()
                spinner.wait()
    return rows


def run_tcp(cc: str, engine: str, seconds: float, omit: float, results_root: str,
            bidir: bool) -> dict:
    """iperf3 over the long-haul path with 0% loss: ``--bidir`` (client ⇄ server at once), or
    one way (server → client, ``-R``: the data on the 14%-loss direction's link, its ACKs on the
    other).  Goodput per direction (``up_mbps`` None one way)."""
    import time
    with _testbed({"loss_down": "0%"}, engine, results_root) as tb:
        tb.popen("server", ["iperf3", "-s", "-1"], name="iperf3-server")
        time.sleep(0.5)
        r = tb.run("client", ["iperf3", "-c", tb.ip("server"), "--bidir" if bidir else "-R", "-C", cc,
                              "-t", str(seconds), "-O", str(omit), "-J"], timeout=seconds + omit + 60)
    if r.returncode != 0:
        raise RuntimeError(f"iperf3 failed: {r.stdout[-500:]} {r.stderr[-500:]}")
    end = json.loads(r.stdout)["end"]
    if bidir:
        up = end["sum_received"]["bits_per_second"]               # client → server
        down = end["sum_received_bidir_reverse"]["bits_per_second"]  # server → client
        retrans = end["sum_sent"].get("retransmits"), end["sum_sent_bidir_reverse"].get("retransmits")
    else:
        up, down = None, end["sum_received"]["bits_per_second"]   # -R: the server sends
        retrans = None, end["sum_sent"].get("retransmits")
    emu = tb.metadata["backend_summary"]
    row = {"cc": cc, "mode": "bidir" if bidir else "one way",
           "up_mbps": None if up is None else round(up / 1e6, 1), "down_mbps": round(down / 1e6, 1),
           "retrans_up": retrans[0], "retrans_down": retrans[1],
           **_emu_cols(emu, seconds + omit), **_holds(emu, 1000.0), "warning_text": _engine_warnings(emu)}
    row["overload"] = emu.get("strict_overload", emu["overload"])
    row["ok"] = bool(min(x for x in (up, down) if x is not None) >= 0.9 * TCP_LIMIT_BPS
                     and not row["overload"])
    return row


STEP_RATES = ("333mbit", "300mbit")   # the rate step every 10 ms alternates between these


def step_schedule(seconds: float, every: float = 0.01):
    """The ``Schedule`` of a rate step every ``every`` s for ``seconds`` s, alternating ``STEP_RATES``."""
    from testbed.spec.schedule import Schedule
    n = int(seconds / every)
    return Schedule.from_dict({"step": [{"at": f"{round((k + 1) * every * 1000)}ms",
                                         "rate": STEP_RATES[(k + 1) % 2]} for k in range(n)]})


def run_model(frames: int = 1_000_000) -> list[dict]:
    """CPU per frame of the Python and the native model on the same trace, for the static
    long-haul direction and two that change (see the module docstring)."""
    import time
    import numpy as np
    from testbed.emulator.native import Engine
    from testbed.emulator.schedule_model import make_direction
    from testbed.spec import traces
    from testbed.spec.linkspec import LinkSpec
    from testbed.spec.schedule import Schedule
    spec = LinkSpec.parse(rate="333mbit", delay="100ms", loss="14%")
    rng = np.random.default_rng(1)
    gaps = rng.exponential(FRAME * 8 / 400e6 * 1e9 * 4, frames // 4).astype(np.int64)
    now = np.repeat(np.cumsum(gaps), 4)[:frames]  # bursts of 4 frames at one timestamp
    lens = np.full(frames, FRAME, dtype=np.int64)
    seconds = float(now[-1]) / 1e9 + 1
    links = {"model": spec, "model steps/10ms": spec.replace(schedule=step_schedule(seconds)),
             "model trace": spec.replace(rate=None, schedule=Schedule(trace=traces.constant(LONGHAUL_BPS)))}
    rows = []
    for path, link in links.items():
        model = make_direction(link, 1)
        model.set_origin(0)
        t0 = time.process_time()
        py = [model.arrive(t, FRAME) for t in now.tolist()]
        t_py = time.process_time() - t0
        eng = Engine([(link, 1, None)])
        eng.set_origin(0, 0)
        t0 = time.process_time()
        verdict, t = eng.arrive_batch(np.zeros(frames, np.int32), now, lens)
        t_c = time.process_time() - t0
        same = [v for v, _ in py] == verdict.tolist() and [x for _, x in py] == t.tolist()
        row = {"path": path, "frames": frames, "python_ns_per_frame": round(t_py / frames * 1e9),
               "native_ns_per_frame": round(t_c / frames * 1e9, 1), "speedup": round(t_py / t_c, 1),
               "identical": same, "load": open("/proc/loadavg").read().split()[0]}
        if rows:
            row["python_ratio"] = round(row["python_ns_per_frame"] / rows[0]["python_ns_per_frame"], 2)
            row["native_ratio"] = round(row["native_ns_per_frame"] / rows[0]["native_ns_per_frame"], 2)
        rows.append(row)
    return rows


def run_schedule_rows(engine: str, seconds: float, results_root: str) -> list[dict]:
    """The ``schedule`` rows of one engine (see the module docstring): static, steps, trace."""
    import tempfile
    from testbed.spec import traces
    rate = LONGHAUL_BPS
    overrides = {**PLAIN, "rate_down": "333mbit", "queue": "50000"}
    rows = []
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:
        steps = Path(tmp) / "steps.json"
        steps.write_text(json.dumps(step_schedule(seconds + 40).to_dict()))
        trace = Path(tmp) / "333mbit.trace"
        trace.write_text(traces.constant(rate).to_text())
        for label, links in (("static", None), ("steps/10ms", {"bottleneck.down.schedule": str(steps)}),
                             ("trace", {"bottleneck.down.trace": str(trace)})):
            res = run_load(overrides, rate, seconds, engine, results_root, links)
            row = {"path": f"schedule {engine} {label}", **evaluate(res, rate, True),
                   "load": open("/proc/loadavg").read().split()[0]}
            down = res["emu"].get("directions", {}).get("server-client", {})
            row["changes"] = len((down.get("schedule") or {}).get("changes", []))
            if rows:
                for key, col in (("cpu_us_per_frame", "cpu_ratio"), ("cpu_us_work", "work_ratio")):
                    base = rows[0].get(key)
                    row[col] = round(row[key] / base, 2) if base and row.get(key) is not None else None
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _print_table(rows: list[dict], cols: list[str]) -> None:
    print(" | ".join(f"{c:>11}" for c in cols))
    for r in rows:
        print(" | ".join(f"{str(r.get(c, '-')):>11}" for c in cols))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rates", default="100,200,333,500,800,1000", help="offered Mbit/s, comma-separated")
    p.add_argument("--seconds", type=float, default=2.0, help="length of each UDP train")
    p.add_argument("--engines", default="python,native", help="engines to compare, comma-separated")
    p.add_argument("--tcp-seconds", type=float, default=20.0, help="length of each iperf3 TCP run")
    p.add_argument("--omit", type=float, default=5.0, help="TCP start-up seconds left out of goodput")
    p.add_argument("--ccs", default="cubic,bbr", help="congestion controls of the TCP runs, comma-separated")
    p.add_argument("--skip-udp", action="store_true", help="no UDP trains (plain veth and each engine)")
    p.add_argument("--skip-tcp", action="store_true", help="no full-rate TCP runs")
    p.add_argument("--skip-iperf-udp", action="store_true", help="no iperf3 -u rows nor flood rows")
    p.add_argument("--skip-cpu", action="store_true", help="no busy loops on the forwarder's CPU")
    p.add_argument("--skip-floor", action="store_true", help="no send-floor rows")
    p.add_argument("--skip-schedule", action="store_true", help="no rows of links that change during the run")
    p.add_argument("--cpu-seconds", type=float, default=3.0,
                   help="length of each busy loop on the forwarder's CPU")
    p.add_argument("--results", default="results/bench", help="directory of the runs' results")
    a = p.parse_args(argv)
    rates = [float(x) * 1e6 for x in a.rates.split(",")]
    engines = [e for e in a.engines.split(",") if e]
    load0 = open("/proc/loadavg").read().strip()
    rows, tcp_rows, iperf_rows, flood_rows, sched_rows = [], [], [], [], []
    model_rows = run_model()
    for row in model_rows:
        print(json.dumps(row), flush=True)
    cpu_rows = [] if a.skip_cpu else [run_cpu_probe(policy, a.cpu_seconds) for policy in ("fifo", "nice-20")]
    for row in cpu_rows:
        print(json.dumps(row), flush=True)
    floor_rows = [] if a.skip_floor else run_send_floor()
    for row in floor_rows:
        print(json.dumps(row), flush=True)
    if not a.skip_udp:
        cases = [("plain veth", None, PLAIN)]
        for engine in engines:
            cases += [(f"{engine} 0ms", engine, PLAIN), (f"{engine} 100ms", engine, {**PLAIN, "delay": "100ms"})]
        for label, engine, overrides in cases:
            for rate in rates:
                if engine:  # shaped at the offered rate: departures evenly spaced
                    overrides = {**overrides, "rate_down": f"{rate / 1e6:g}mbit", "queue": "50000"}
                res = run_load(overrides, rate, a.seconds, engine or engines[-1], a.results)
                row = {"path": label, **evaluate(res, rate, engine is not None),
                       "load": open("/proc/loadavg").read().split()[0]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if not a.skip_iperf_udp:
        for engine in engines:
            for delay in ("0ms", "100ms"):
                for rate in rates:
                    row = {"path": f"iperf3 udp {engine} {delay}",
                           **run_iperf_udp(rate, delay, engine, a.seconds, a.results),
                           "load": open("/proc/loadavg").read().split()[0]}
                    iperf_rows.append(row)
                    print(json.dumps(row), flush=True)
            for payload in (PAYLOAD, 24):  # 1514 B and 66 B frames
                row = {"path": f"iperf3 udp {engine} flood",
                       **run_iperf_flood(payload, engine, a.seconds, a.results),
                       "load": open("/proc/loadavg").read().split()[0]}
                flood_rows.append(row)
                print(json.dumps(row), flush=True)
    if not a.skip_schedule:
        for engine in engines:
            sched_rows += run_schedule_rows(engine, a.seconds, a.results)
    if not a.skip_tcp:
        for engine in engines:
            for cc in a.ccs.split(","):
                for bidir in (False, True):
                    row = {"path": f"tcp {engine}",
                           **run_tcp(cc, engine, a.tcp_seconds, a.omit, a.results, bidir),
                           "load": open("/proc/loadavg").read().split()[0]}
                    tcp_rows.append(row)
                    print(json.dumps(row), flush=True)
    print()
    _print_table(model_rows, ["path", "frames", "python_ns_per_frame", "native_ns_per_frame", "speedup",
                              "python_ratio", "native_ratio", "identical", "load"])
    print("model: CPU ns per frame in virtual time; *_ratio = over the same engine's static link")
    print()
    if cpu_rows:
        _print_table(cpu_rows, ["path", "seconds", "gaps", "gaps_ms", "max_gap_ms", "preemption",
                                "rt_cap_percent"])
        print("busy loop: gaps ≥ 100 µs in a loop that never sleeps on the forwarder's CPU (RT "
              "throttling stops a SCHED_FIFO loop busy beyond rt_cap_percent; the native loop "
              "therefore demotes itself to SCHED_OTHER while over its real-time budget)")
        print()
    if floor_rows:
        _print_table(floor_rows, ["path", "receiver", "frame", "gap_us", "batch", "frames", "received",
                                  "send_us_p50", "send_us_mean", "send_us_p99", "slow_calls", "call_max_us"])
        print("send floor: the time inside one send() (batch 1) or one sendmmsg() per 8 frames "
              "(batch 8, per frame) into a veth with nothing of the engine around it; the "
              "engine's send time per frame (send_us below) cannot be lower under the same "
              "receiver load); slow_calls = calls of 50 µs or more (SLOW_SEND_NS), call_max_us = "
              "the longest call")
        print()
    if rows:
        _print_table(rows, ["path", "offered_mbps", "sent_mbps", "fps", "rx_drops", "p50_us", "p99_us",
                            "max_us", "cpu_pct", "cpu_us_per_frame", "cpu_us_work", "cpu_us_no_send", "send_us",
                            "unintended", "silent", "steal_pct", "rq_wait_ms", "load", "emu_ok", "ok"])
        print()
        for label in dict.fromkeys(r["path"] for r in rows):
            for key, what in (("ok", "end to end"), ("emu_ok", "emulator only")):
                ok = [r for r in rows if r["path"] == label and r.get(key)]
                if key == "emu_ok" and label == "plain veth":
                    continue
                best = max(ok, key=lambda r: r["offered_mbps"]) if ok else None
                print(f"{label}: highest passing rate, {what} (p99 ≤ {P99_LIMIT_US:g} µs, no "
                      "unintended drop): " + (
                          f"{best['offered_mbps']:g} Mbit/s, {best['fps']} frames/s received, "
                          f"CPU/frame {best.get('cpu_us_per_frame', '-')} µs "
                          f"({best.get('cpu_us_work', '-')} µs without polling, "
                          f"{best.get('cpu_us_no_send', '-')} µs without send)" if best else "none"))
    if iperf_rows:
        print()
        _print_table(iperf_rows, ["path", "offered_mbps", "iperf_mbps", "iperf_lost", "rx_drops", "p50_us", "p99_us",
                                  "max_us", "late", "late_stall", "late50", "late50_held_pct", "holds50", "slow_sends",
                                  "demotions", "cpu_pct", "cpu_us_work",
                                  "cpu_us_no_send", "send_us", "unintended", "rq_wait_ms", "load", "emu_ok"])
    if flood_rows:
        print()
        _print_table(flood_rows, ["path", "frame", "offered_pps", "fps", "rx_drops", "p50_us", "p99_us",
                                  "max_us", "late", "late_stall", "cpu_pct", "cpu_us_per_frame",
                                  "cpu_us_work", "send_us", "frames_per_call", "unintended", "load",
                                  "emu_ok"])
        print("flood: iperf3 -u -b 0 through an unshaped link with 1 ms delay; fps = frames the "
              "emulator delivered per second of its departures, frames_per_call = frames per "
              "send/sendmmsg call; unintended = frames it lost itself (not read in time)")
    if sched_rows:
        print()
        _print_table(sched_rows, ["path", "offered_mbps", "sent_mbps", "fps", "p50_us", "p99_us", "max_us",
                                  "cpu_us_per_frame", "cpu_us_work", "cpu_ratio", "work_ratio", "send_us",
                                  "unintended", "silent", "changes", "rq_wait_ms", "load", "emu_ok"])
        print("schedule: 333 Mbit/s trains through the static link, a rate step every 10 ms "
              f"({' <-> '.join(STEP_RATES)}) and a 333 Mbit/s trace; *_ratio = CPU per frame over "
              "the same engine's static row")
    if tcp_rows:
        print()
        _print_table(tcp_rows, ["path", "cc", "mode", "up_mbps", "down_mbps", "retrans_up", "retrans_down",
                                "p99_us", "max_us", "late", "late_stall", "late1ms_held_pct", "holds1ms", "stalls",
                                "slow_sends", "demotions", "overload",
                                "fidelity", "cpu_us_per_frame", "cpu_us_work", "cpu_us_no_send", "send_us", "steal_pct",
                                "rq_wait_ms", "load", "ok"])
        print(f"TCP target: each direction with data ≥ {0.9 * TCP_LIMIT_BPS / 1e6:.0f} Mbit/s (90% of "
              f"{TCP_LIMIT_BPS / 1e6:.0f}) with no overload (late frames a stall of the machine "
              "explains are counted apart: late_stall, stalls)")
    print(f"/proc/loadavg before: {load0}; after: {open('/proc/loadavg').read().strip()} "
          "(2 cores shared with other work: it shows up in the tail of the scheduling error)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
