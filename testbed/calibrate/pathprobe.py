"""The probe sequence between two hosts of an up Testbed, shared by ``testbed calibrate`` and
the benchmarks: RTT, loss per direction, bottleneck rate per direction, reordering.

Each step starts ``testbed.calibrate.probe`` listeners and waits for their ``ready`` line
(``testbed.host.ready``), runs the senders, and returns what the probes printed, with the
definitions of ``testbed.calibrate.probe``.  ``a`` is the "up" sender (client side), ``b`` the "down" one.

* ``rtt``: ``count`` ping-pong probes of ``size`` B payload, ``interval`` s apart; min and
  median of the echoed ones.
* ``loss``: ``count`` datagrams per direction, both directions at once, paced at ``rate``
  frame bit/s without catching up after a stall; loss = (sent − received) / sent.  With it, the
  drop counters of each direction over the measurement (``drops``, ``loss_drops``): where
  datagrams that left the sender without reaching the receiver's socket were dropped.
* ``rate``: per direction, a train of ``TRAIN_PAYLOAD`` B datagrams at ``overdrive`` × the
  spec's rate for ``seconds`` after a head start of up to ``head_start`` s of frames (capped so
  head start and queue growth stay within 40% of the buffer); the bottleneck rate is the
  probe's least-squares fit (``rate_bps``, or ``rate_delivered_bps`` when lost frames never
  used the rate, as under netem).  With it, what each side did during the train (``sides``):
  the sender's offered rate and CPU share, the machine's CPU over the train (``cpu_window``:
  busy and steal shares of its CPUs from /proc/stat, read by the sender; inside a UML guest,
  the guest's one virtual CPU) (``testbed.calibrate.probe``), the qdiscs on the sender's egress (``tc -s``
  deltas of htb and netem: packets sent, drops, overlimits, backlog left; kernel backend only),
  the frames the receive path dropped (``/proc/net/softnet_stat``), and inside a UML guest how
  the host scheduled the guest during the train (``host``: its host CPU share and run-queue
  wait, the host's load; ``testbed.backends.uml.HostCPU``).
* ``overflow``: one train of ``TRAIN_PAYLOAD`` B datagrams at ``rate`` frame bit/s, faster than
  the spec's rate, for ``seconds``, from a sender at real-time priority (below the emulator's:
  the receiver sharing its CPU does not hold it up) that does not catch up after a stall (a
  backlog sent back to back would fill the queue early and put a burst above ``rate`` into the
  window); the loss after its queue first overflowed, the offered rate and the rest of
  ``testbed.calibrate.overflow.figures``, with the drop counters of ``loss_drops`` and what the
  sender did (its offered rate over the whole train, CPU share, the machine's CPU over the
  train).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from testbed.spec.errors import RunError
from testbed.spec.linkspec import LinkSpec
from testbed.calibrate.probe import FRAME_OVERHEAD, last_json, probe_argv
from testbed.host.ready import wait_ready

TRAIN_PAYLOAD = 1472
PORTS = {"echo": 5700, "loss_up": 5701, "loss_down": 5702, "rate_up": 5703, "rate_down": 5704,
         "overflow": 5705}


def _listener(tb, host: str, argv: list[str], name: str):
    proc = tb.popen(host, argv, name=name, text=True)
    wait_ready(proc, f"{name} on {host}")
    return proc


def _received(proc, stream: int, timeout: float = 600) -> dict | None:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode:
        raise RunError(f"probe receiver failed: {err.strip()}")
    return last_json(out)["streams"].get(str(stream))


def rtt(tb, a: str, b: str, count: int = 200, interval: float = 0.01, size: int = 64,
        wait: float = 2.0, loopback: bool = False) -> dict[str, Any]:
    """Ping-pong from ``a`` to an echo on ``b``.  ``loopback``: ``a`` pings an echo in its own
    namespace over ``lo`` (``b`` unused): the endpoints' own round trip — the same two probe
    processes, wake-ups and system calls without the link — which a calibration subtracts where
    it is not negligible (a guest on an emulated CPU)."""
    b, dst = (a, "127.0.0.1") if loopback else (b, tb.ip(b))
    echo = _listener(tb, b, probe_argv("echo", "--port", PORTS["echo"]), "probe-echo")
    try:
        ping = last_json(tb.run(a, probe_argv("ping", "--dst", dst, "--port", PORTS["echo"],
                                              "--count", count, "--interval", interval, "--size", size,
                                              "--wait", wait), timeout=60 + count * interval + wait,
                                check=True).stdout)
    finally:
        echo.kill()
        echo.communicate()
    rtts = sorted(ping["rtt_ms"])
    return {"min": rtts[0] if rtts else None, "median": statistics.median(rtts) if rtts else None,
            "max": rtts[-1] if rtts else None, "probes": ping["sent"], "echoed": ping["received"]}


def loss(tb, a: str, b: str, count: int, rate: float, size: int = 64, idle: float = 2.0,
         timeout: float = 600) -> dict:
    """{"up"/"down": {"sent", "received", "reordered", "drops"}} of one paced stream per
    direction (``drops``: ``loss_drops``); ``timeout``: the receivers stop this long after they
    start even when nothing arrives."""
    ifname = {a: egress(tb, a, b), b: egress(tb, b, a)}
    kernel = tb.backend.name == "netem"
    before = {h: drop_counters(tb, h, ifname[h], kernel) for h in (a, b)}
    softnet0 = softnet_drops()
    rx = {"up": _listener(tb, b, probe_argv("recv", "--port", PORTS["loss_up"], "--idle", idle,
                                            "--timeout", timeout), "probe-recv"),
          "down": _listener(tb, a, probe_argv("recv", "--port", PORTS["loss_down"], "--idle", idle,
                                              "--timeout", timeout), "probe-recv")}
    tx = {d: tb.popen(src, probe_argv("send", "--dst", tb.ip(dst), "--port", PORTS[f"loss_{d}"],
                                      "--count", count, "--rate", rate, "--size", size,
                                      "--stream", stream, "--no-catch-up"), name="probe-send", text=True)
          for d, src, dst, stream in (("up", a, b, 1), ("down", b, a, 2))}
    sent = {d: last_json(p.communicate(timeout=600)[0])["sent"] for d, p in tx.items()}
    got = {d: _received(rx[d], stream) or {} for d, stream in (("up", 1), ("down", 2))}
    after = {h: drop_counters(tb, h, ifname[h], kernel) for h in (a, b)}
    softnet = softnet_drops() - softnet0
    return {d: {"sent": sent[d], "received": got[d].get("received", 0),
                "reordered": got[d].get("reordered", 0),
                "drops": loss_drops(before[src], after[src], before[dst], after[dst], softnet)}
            for d, src, dst in (("up", a, b), ("down", b, a))}


def udp_counters(snmp: str) -> dict[str, int]:
    """The ``Udp:`` counters of a /proc/net/snmp text (InDatagrams, InErrors, RcvbufErrors,
    SndbufErrors …); {} when there are none."""
    rows = [line.split() for line in snmp.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        return {}
    return dict(zip(rows[0][1:], map(int, rows[1][1:])))


def link_drops(ip_json: str) -> dict[str, int]:
    """``rx_dropped`` and ``tx_dropped`` of the interface in ``ip -s -j link show dev IF``'s
    output; {} when it cannot be read."""
    try:
        stats = json.loads(ip_json)[0]["stats64"]
        return {"rx_dropped": int(stats["rx"]["dropped"]), "tx_dropped": int(stats["tx"]["dropped"])}
    except (json.JSONDecodeError, IndexError, KeyError, TypeError, ValueError):
        return {}


def drop_counters(tb, host: str, ifname: str, kernel: bool) -> dict[str, dict[str, int]]:
    """The counters ``loss_drops`` compares, read in ``host``: its namespace's UDP counters, the
    drop counters of ``ifname`` (its end of the link) and, on the kernel backend, that
    interface's qdiscs (``qdisc_stats``)."""
    snmp = tb.run(host, ["cat", "/proc/net/snmp"], timeout=30)
    link = tb.run(host, ["ip", "-s", "-j", "link", "show", "dev", ifname], timeout=30)
    return {"udp": udp_counters(snmp.stdout) if snmp.returncode == 0 else {},
            "link": link_drops(link.stdout) if link.returncode == 0 else {},
            "qdisc": qdisc_stats(tb, host, ifname) if kernel else {}}


def loss_drops(src0: dict, src1: dict, dst0: dict, dst1: dict, softnet: int = 0) -> dict[str, Any]:
    """Where one direction's datagrams were dropped, from ``drop_counters`` of its sender
    (``src0`` before, ``src1`` after) and receiver (``dst0``, ``dst1``) — each a count of
    datagrams over the measurement (one probe stream per direction and namespace, so the
    counters are that stream's):

    - ``sender_queue``: the sender namespace's Udp SndbufErrors — datagrams ``send`` handed to
      the kernel that it dropped before the wire: a qdisc of the sender's egress at its limit
      (ENOBUFS, which UDP without IP_RECVERR swallows: the sender counts them as sent) or no
      send buffer.  On the kernel backend these are the link's queue overflowing.
    - ``qdisc``: drops of each qdisc on the sender's egress (kernel backend: htb counts its
      netem child's; netem's are the configured loss and its limit's).
    - ``veth_tx``, ``veth_rx``: ``tx_dropped`` of the sender's end of the link, ``rx_dropped``
      of the receiver's end: the receiving kernel refused a frame the link delivered (its
      per-CPU receive backlog full); one such drop may count at both ends, so the larger
      of the two is taken.
    - ``receiver_socket``: the receiver namespace's Udp InErrors (its socket buffer full —
      RcvbufErrors, also shown — or a bad checksum).
    - ``receiver_gone``: the receiver namespace's Udp NoPorts — datagrams that arrived after
      the receiver had stopped (it heard nothing for its ``idle`` time: a stalled guest).
    - ``softnet``: the machine's receive-backlog drops (/proc/net/softnet_stat), all interfaces
      and both directions.
    - ``receive_path``: what the receiving side dropped after the link delivered it —
      max(veth_tx, veth_rx) + receiver_socket + receiver_gone; calibrate does not count these
      as link loss."""
    def grew(before: dict, after: dict, key: str) -> int:
        return max(0, after.get(key, 0) - before.get(key, 0))
    qdisc = {kind: grew(src0["qdisc"].get(kind, {}), now, "drops") for kind, now in src1["qdisc"].items()}
    out = {"sender_queue": grew(src0["udp"], src1["udp"], "SndbufErrors"), "qdisc": qdisc,
           "veth_tx": grew(src0["link"], src1["link"], "tx_dropped"),
           "veth_rx": grew(dst0["link"], dst1["link"], "rx_dropped"),
           "receiver_socket": grew(dst0["udp"], dst1["udp"], "InErrors"),
           "receiver_rcvbuf": grew(dst0["udp"], dst1["udp"], "RcvbufErrors"),
           "receiver_gone": grew(dst0["udp"], dst1["udp"], "NoPorts"), "softnet": softnet}
    out["receive_path"] = (max(out["veth_tx"], out["veth_rx"]) + out["receiver_socket"]
                           + out["receiver_gone"])
    return out


def softnet_drops() -> int:
    """Frames the kernel's receive backlogs dropped so far, all CPUs (/proc/net/softnet_stat,
    second column, hex)."""
    try:
        return sum(int(line.split()[1], 16) for line in Path("/proc/net/softnet_stat").read_text().splitlines())
    except (OSError, IndexError, ValueError):
        return 0


def host_window(realtime: list | None) -> dict | None:
    """Inside a UML guest: how the host scheduled the guest during the train
    (``testbed.backends.uml.host_cpu_window``: the guest's host CPU share and run-queue wait
    share, the host's load); None elsewhere.  The host samples every 0.1 s: waits for the
    sample after the train."""
    import os
    import time
    path = os.environ.get("TESTBED_UML_HOST_CPU")
    if not path or not realtime:
        return None
    from testbed.backends.uml import host_cpu_window
    deadline = time.monotonic() + 1.0
    while True:
        window = host_cpu_window(path, *realtime)
        if window is not None or time.monotonic() > deadline:
            return window
        time.sleep(0.1)


def egress(tb, src: str, dst: str) -> str:
    """The interface of ``src`` on its link to ``dst``."""
    links = tb.net.linksBetween(tb.host(src), tb.host(dst))
    end = next(i for i in (links[0].intf1, links[0].intf2) if i.node.name == src)
    return end.name


def qdisc_stats(tb, host: str, ifname: str) -> dict[str, dict[str, int]]:
    """``tc -s -j qdisc show`` of ``ifname`` in ``host``: per qdisc kind (htb, netem, pfifo) its
    packets, bytes, drops, overlimits, requeues, backlog (bytes) and qlen; {} where tc fails."""
    out = tb.run(host, ["tc", "-s", "-j", "qdisc", "show", "dev", ifname], timeout=30)
    try:
        qdiscs = json.loads(out.stdout) if out.returncode == 0 else []
    except json.JSONDecodeError:
        return {}
    keys = ("packets", "bytes", "drops", "overlimits", "requeues", "backlog", "qlen")
    return {q["kind"]: {k: int(q.get(k, 0) or 0) for k in keys} for q in qdiscs if "kind" in q}


def _delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    """Counters' growth per qdisc; backlog and qlen as left after the train."""
    return {kind: {k: (v - before.get(kind, {}).get(k, 0)) if k not in ("backlog", "qlen") else v
                   for k, v in now.items()} for kind, now in after.items()}


def rate(tb, src: str, dst: str, spec: LinkSpec, direction: str, *, seconds: float = 0.5,
         overdrive: float = 1.05, head_start: float = 0.1, realtime: bool = True,
         idle: float = 2.0, delivered: bool = False) -> dict[str, Any]:
    """The bottleneck rate of ``src``→``dst`` (a shaped ``spec``) in Mbit/s of frames of the
    spec's size accounting (payload + headers + overhead), and the train it used."""
    frame_bits = (TRAIN_PAYLOAD + FRAME_OVERHEAD + spec.overhead) * 8
    queue = spec.queue_limit_packets or (spec.queue_bytes // spec.frame_bytes)
    head = min(head_start, 0.4 * queue * frame_bits / spec.rate)
    count = int(min(seconds * spec.rate / frame_bits, 0.4 * queue / (1 - 1 / overdrive)))
    port = PORTS[f"rate_{direction}"]
    kernel = tb.backend.name == "netem"
    ifname = egress(tb, src, dst)
    rx = _listener(tb, dst, probe_argv("recv", "--port", port, "--idle", idle, "--timeout", 600),
                   "probe-recv")
    q0 = qdisc_stats(tb, src, ifname) if kernel else {}
    drops0 = softnet_drops()
    snt = last_json(tb.run(src, probe_argv("send", "--dst", tb.ip(dst), "--port", port, "--count",
                                           count, "--rate", overdrive * spec.rate, "--size",
                                           TRAIN_PAYLOAD, "--stream", 3, "--burst", head,
                                           *(["--realtime"] if realtime else [])),
                           timeout=600, check=True).stdout)
    got = _received(rx, 3)
    qdisc = _delta(q0, qdisc_stats(tb, src, ifname)) if kernel else {}
    key = "rate_delivered_bps" if delivered else "rate_bps"
    mbps = got[key] * (frame_bits / 8) / got["frame_bytes"] / 1e6 if got and got[key] else None
    span = (got["last_ns"] - got["first_ns"]) / 1e9 if got else 0
    sides = {
        "sender": {"sent": snt["sent"], "send_errors": snt["send_errors"],
                   "send_rate_mbps": snt["send_rate_bps"] / 1e6 if snt["send_rate_bps"] else None,
                   "cpu_share": snt.get("cpu_share")},
        "cpu_window": snt["machine_cpu"],
        "qdisc": qdisc,
        "host": host_window(snt.get("realtime")),
        "receive_path_drops": softnet_drops() - drops0,
        "receiver": {"received": got["received"] if got else 0,
                     "fit_points": got["rate_fit_points"] if got else 0,
                     "mean_rate_mbps": (got["received"] - 1) * frame_bits / span / 1e6
                     if got and span > 0 else None}}
    return {"rate_mbps": mbps, "frames": count, "send_rate_mbps": snt["send_rate_bps"] / 1e6,
            "received": got["received"] if got else 0, "reordered": got["reordered"] if got else 0,
            "sides": sides}


def overflow(tb, src: str, dst: str, spec: LinkSpec, *, rate: float, seconds: float,
             idle: float = 2.0, burst: float = 0.0005, realtime: bool = True) -> dict[str, Any]:
    """The overflow train ``src``→``dst`` (module docstring): ``testbed.calibrate.overflow.figures``
    of it, ``drops`` (``loss_drops`` over the train), ``sender`` (its offered rate over the
    whole train, CPU share, the machine's CPU over the train) and ``delivered_mbps``: the rate at
    which the link delivered the train, in the link's unit (the receiver's fit over the arrival
    rank of the datagrams received, ``probe``'s ``rate_delivered_bps``, each frame counted with
    the spec's overhead as ``offered_mbps``); None when fewer than 3 arrived."""
    from testbed.calibrate import overflow as ov
    frame_bits = (TRAIN_PAYLOAD + FRAME_OVERHEAD) * 8
    count = int(seconds * rate / frame_bits)
    port = PORTS["overflow"]
    ifname = {src: egress(tb, src, dst), dst: egress(tb, dst, src)}
    kernel = tb.backend.name == "netem"
    before = {h: drop_counters(tb, h, ifname[h], kernel) for h in (src, dst)}
    softnet0 = softnet_drops()
    rx = _listener(tb, dst, probe_argv("recv", "--port", port, "--idle", idle, "--timeout", 600,
                                       "--seqs"), "probe-recv")
    snt = last_json(tb.run(src, probe_argv("send", "--dst", tb.ip(dst), "--port", port, "--count",
                                           count, "--rate", rate, "--size", TRAIN_PAYLOAD,
                                           "--stream", 4, "--burst", burst, "--no-catch-up",
                                           *(["--realtime"] if realtime else [])),
                           timeout=600, check=True).stdout)
    got = _received(rx, 4) or {}
    after = {h: drop_counters(tb, h, ifname[h], kernel) for h in (src, dst)}
    drops = loss_drops(before[src], after[src], before[dst], after[dst], softnet_drops() - softnet0)
    # the link counts each frame with its spec's overhead: the offered rate in the link's unit
    link_bits = (TRAIN_PAYLOAD + FRAME_OVERHEAD + spec.overhead) * 8
    fig = ov.figures(count, got.get("seq", []), got.get("t_send_ns", []), snt["unsent"],
                     link_bits, spec.rate, drops["receive_path"])
    sender = {"send_rate_mbps": snt["send_rate_bps"] / 1e6 if snt["send_rate_bps"] else None,
              "send_errors": snt["send_errors"], "cpu_share": snt.get("cpu_share"),
              "duration_s": snt["duration_s"], "cpu_window": snt["machine_cpu"]}
    delivered = got.get("rate_delivered_bps")
    return {**fig, "offered_target_mbps": rate / 1e6, "rate_mbps": spec.rate / 1e6,
            "delivered_mbps": delivered / (got["frame_bytes"] * 8) * link_bits / 1e6 if delivered else None,
            "drops": drops, "sender": sender}
