"""Link calibration: measure a two-host link with real packets and compare with its LinkSpecs
(``calibrate``; the command is ``testbed calibrate``, testbed/cli/calibrate.py).

The link is the ``longhaul`` topology (client — server) with the given rate, one-way delay and
loss per direction; "up" is client→server, "down" server→client.  Measurements (UDP probes of
``testbed.calibrate.probe``, ARP entries static so no probe waits for address resolution):

- RTT: 200 ping-pong probes of 64 B payload, 10 ms apart; min, median and max of the echoed ones.
  Configured RTT = 2·delay + serialization of the 106 B probe frame in both directions.  The
  endpoints' own round trip (``rtt_ms.endpoints``: the same probe over the client's loopback, 50
  probes) is measured too; the check compares the median with configured + that median, so a
  guest whose emulated CPU takes a millisecond per round trip (docs/vm.md) is not charged to the
  link, while on the host it adds ~0.05 ms.  Check: within ±1 ms.
- Loss per direction: ``--packets`` datagrams (64 B payload) at ≤ 1/4 of the link rate,
  ≤ 5000 datagrams/s and with at most 40% of the packets a direction holds in flight (its
  delay line in full-size frames plus its buffer: netem's limit counts packets, not bytes;
  ``loss_pps``), in both directions at once, never in bursts (a stalled sender does not
  catch up), so no datagram meets a full bottleneck buffer; loss = (sent − received −
  receive-path drops) / sent, with its Wilson 99% interval, where the receive-path drops are
  datagrams the link delivered and the receiving kernel dropped (its receive backlog, the
  socket, no socket: the receiver had stopped; ``pathprobe.loss_drops``, every counter in
  ``loss_drops``), shown on the line.
  Check: the configured probability lies inside the interval (configured 0: none lost).
- Bottleneck rate per direction (``testbed.calibrate.pathprobe``, the sequence the benchmarks
  share): a train of 1514 B frames, 0.5 s worth, sent at 1.05 × the rate
  after a head start of up to 100 ms of frames, so a standing queue keeps the bottleneck busy
  through stalls of the sender (SCHED_FIFO, below the emulator); head start and queue growth
  stay within 40% of the buffer, so nothing overflows.  Rate = least-squares slope of sequence
  number over kernel receive time × frame bits (in the emulator lost frames used the
  bottleneck, so gaps count; under netem, which drops before htb, the fit is over the arrival
  rank of the frames received instead), refitted without frames more than 1 ms off the line
  (held up by a stall).  Check:
  within 2% (inconclusive = fail when the sender could not exceed the rate by 2%).
- Reordering: datagrams arriving after one with a higher sequence number, over all streams.
- The userspace emulator's own report: scheduling error p50/p99/max (check: p99 ≤ 200 µs) and
  unintended drops (check: 0).
- Overflow (``measure_overflow``, in a Testbed brought up for it alone; by default at the
  chapter's 600 Mbit/s where the link is shaped below it, outside a guest): a train of 1514 B frames for
  ``overflow.SECONDS`` up (the direction with no random loss by default), faster than the rate,
  into its one-BDP queue.  Loss = the datagrams not received among those sent from the first
  lost one on (the queue's first overflow) — ``testbed.calibrate.overflow`` defines it and the
  offered rate exactly.  Checks: within ±0.02 of 1 − rate/offered at the offered rate the
  sender reached; the link delivered the train at its rate (±2%: a full queue drains at the
  rate, whatever the backend; a link that delivered less, e.g. an emulator or a guest short of
  CPU, dropped more than its queue's share); no drop other than the queue's (the emulator's
  random loss, its own, the receiving side's); the run's link fidelity verdict ok (the userspace
  emulator's; other backends have none).
"""
from __future__ import annotations

import json
import logging
import math
import os
from typing import Any

log = logging.getLogger(__name__)

RTT_PROBES = 200
ENDPOINT_PROBES = 50
PROBE_PAYLOAD = 64
OVERDRIVE = 1.05
TRAIN_S = 0.5  # s of frames at the rate
HEAD_START = 0.1  # s of frames sent ahead of the pacing: a standing queue absorbs sender stalls
Z99 = 2.5758293035489004
RATE_TOL, RTT_TOL_MS = 0.02, 1.0
SCHED_P99_US = 200  # the emulator's target: p99 scheduling error at or below 200 µs
# Datagrams/s per direction for the loss measurement.  In a User-Mode Linux guest (one virtual
# CPU, system calls through ptrace) a Python receiver keeps up with only ~2,500/s, so there the
# probes go slower and the guest's own receive drops do not pass for link loss.
LOSS_PPS = 500 if os.environ.get("TESTBED_IN_UML") == "1" else 5000
# Share of the packets a direction holds (its delay line in full-size frames plus its buffer: what
# the kernel backend's netem limit counts, whatever the frames' size) that the loss probe's
# datagrams in flight may fill — the rate train's 40 % rule; docs/vm.md, "Where the loss
# probe's datagrams go": at rate/4 the small datagrams overran netem's limit after guest stalls.
HOLD_SHARE = 0.4
# The highest rate at which every rate line of a UML guest passed on a quiet 2-core host
# (docs/uml.md, "Guest speed": 10 and 12 Mbit/s every run; 15-25 Mbit/s about half the lines,
# the qdisc releasing 1-6 % below the rate; from 30 Mbit/s the guest's one virtual CPU, which runs
# the probe's sender, the qdiscs and the receiver, is saturated).  Above it calibrate refuses
# (``check_uml_rate``), on the host before a guest boots too.
UML_RATE_MAX = 12e6
#: the most datagrams per direction of the loss measurement (``--packets``): at its pace of at
#: most 5000 datagrams/s, a bit over 3 minutes per direction (the default, 10000: 2 s)
MAX_PACKETS = 1_000_000


def check_uml_rate(rate: str) -> None:
    """Refuse, in one line, calibrating the long-haul link at ``rate`` (``--rate``; "unshaped"
    for none) in a UML guest when it is above ``UML_RATE_MAX`` or unshaped: run by ``calibrate``
    in the guest, and by ``testbed calibrate --backend netem-uml`` before the guest boots
    (testbed/cli/calibrate.py, ``check_in_guest``).  UsageError naming the link, its rate, the
    cap and what to do instead."""
    from testbed.spec.errors import UsageError
    from testbed.spec.units import parse_rate
    rate_bps = None if str(rate).lower() in ("unshaped", "none") else parse_rate(rate)
    if rate_bps is not None and rate_bps <= UML_RATE_MAX:
        return
    link = ("the long-haul link unshaped" if rate_bps is None
            else f"the long-haul link at {rate_bps / 1e6:g} Mbit/s each way")
    cap = f"{UML_RATE_MAX / 1e6:g}"
    raise UsageError(f"--rate {rate}: a UML guest's one virtual CPU carries calibrate's probes at "
                     f"up to {cap} Mbit/s, not {link} (docs/uml.md, \"Guest speed\"); give --rate "
                     f"{cap}mbit or less, or calibrate a faster link with the userspace emulator, or "
                     "with --backend netem-vm where KVM boots (with TCG it carries about what UML "
                     "does: docs/vm.md)")


def wilson(lost: int, n: int, z: float = Z99) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion lost/n."""
    if n == 0:
        return (0.0, 1.0)
    p = lost / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def measure(rate: float | None, delay: float, loss_up: float, loss_down: float, backend: str,
            packets: int, seed: int, results: str, specs: tuple, overflow: float | None = None) -> dict:
    """The probe sequence (``testbed.calibrate.pathprobe``) on a longhaul topology with these
    specs; with ``overflow`` (bit/s), then the overflow train up (``measure_overflow``)."""
    from testbed.calibrate import pathprobe
    from testbed.run.network import Testbed
    overrides = _overrides(rate, delay, loss_up, loss_down)
    idle = 1.0 + 2 * delay
    m: dict[str, Any] = {}
    with Testbed("longhaul", backend=backend, overrides=overrides, results_root=results, seed=seed) as tb:
        m["rtt_ms"] = pathprobe.rtt(tb, "client", "server", RTT_PROBES, 0.01, PROBE_PAYLOAD, 1 + 2 * delay)
        own = pathprobe.rtt(tb, "client", "client", ENDPOINT_PROBES, 0.01, PROBE_PAYLOAD, 1.0, loopback=True)
        m["rtt_ms"]["endpoints"] = {"min": own["min"], "median": own["median"]}
        loss_rate = loss_pps(specs) * (PROBE_PAYLOAD + 42) * 8
        lost = pathprobe.loss(tb, "client", "server", packets, loss_rate, PROBE_PAYLOAD, idle)
        m.update(loss_figures(lost))
        m["rate_mbps"], m["train"] = {}, {}
        for d, src, dst, spec in (("up", "client", "server", specs[0]),
                                  ("down", "server", "client", specs[1])):
            if spec.rate is None:
                m["rate_mbps"][d] = None
                continue
            # netem drops a lost frame before htb (it never used the rate); the emulator after
            # serialization (it did): count lost frames in the rate only for the latter.
            r = pathprobe.rate(tb, src, dst, spec, d, seconds=TRAIN_S, overdrive=OVERDRIVE,
                               head_start=HEAD_START, idle=idle,
                               delivered=tb.backend.name == "netem")
            m["reordered"] += r.pop("reordered")
            m["rate_mbps"][d] = r.pop("rate_mbps")
            m["train"][d] = r
    if overflow is not None:
        m["overflow"] = measure_overflow(overflow, specs[0], overrides, backend, seed, results, idle)
    return {"measured": m, "emulator": emulator_report(tb), "backend": tb.backend.name,
            "run_dir": str(tb.dir)}


def _overrides(rate: float | None, delay: float, loss_up: float, loss_down: float) -> dict[str, Any]:
    """The longhaul topology's parameters for these values."""
    fmt = (lambda r: "unshaped" if r is None else f"{r:.0f}bit")
    return {"rate_up": fmt(rate), "rate_down": fmt(rate), "delay": f"{delay}s",
            "loss_up": loss_up, "loss_down": loss_down}


def measure_overflow(rate: float, spec, overrides: dict, backend: str, seed: int, results: str,
                     idle: float) -> dict[str, Any]:
    """The overflow train (``pathprobe.overflow``, ``overflow.SECONDS`` at ``rate``) up,
    client→server, in a Testbed of its own, so that its queue drops and its verdict are the
    train's and no other measurement's: the figures of ``testbed.calibrate.overflow``, its
    ``drops`` by reason (``overflow.drops``; every counter in ``drop_counters``:
    ``pathprobe.loss_drops``), the run's ``emulator`` report, its link ``fidelity`` verdict
    (``emulator.fidelity.of_run``; None on a backend other than the userspace emulator, which
    has none) and ``run_dir``, where they are also written (``overflow.json``)."""
    from testbed.calibrate import overflow as ov
    from testbed.calibrate import pathprobe
    from testbed.emulator import fidelity
    from testbed.run.network import Testbed
    with Testbed("longhaul", backend=backend, overrides=overrides, results_root=results, seed=seed) as tb:
        out = pathprobe.overflow(tb, "client", "server", spec, rate=rate, seconds=ov.SECONDS, idle=idle)
    emu = emulator_report(tb)
    out["drop_counters"] = out["drops"]
    out["drops"] = ov.drops(emu, out["drops"], out["count"] - out["sent"])
    verdict = fidelity.of_run(tb.metadata) if tb.backend.name == "userspace" else None
    out.update(emulator=emu, run_dir=str(tb.dir), fidelity=verdict and {
        k: verdict.get(k) for k in ("verdict", "cause", "cause_figures", "reasons", "warnings",
                                    "lag_p99_ms", "late_p99_ms")})
    (tb.dir / "overflow.json").write_text(json.dumps(out, indent=1))
    return out


def loss_pps(specs) -> float:
    """Datagrams/s per direction of the loss probe over links with these LinkSpecs: LOSS_PPS,
    at most a quarter of each shaped rate in probe frames, and at most HOLD_SHARE of the packets
    each shaped direction holds (delay line in full-size frames + buffer) per one-way delay +
    jitter — the probe's small datagrams count one packet each where a limit counts packets."""
    probe_bits = (PROBE_PAYLOAD + 42) * 8
    pps = float(LOSS_PPS)
    for spec in specs:
        if spec.rate is None:
            continue
        pps = min(pps, spec.rate / 4 / probe_bits)
        held_s = spec.delay + spec.jitter
        if held_s > 0:
            pps = min(pps, HOLD_SHARE * (spec.delay_line_packets + (spec.queue_limit_packets or 0)) / held_s)
    return pps


def loss_figures(lost: dict) -> dict[str, Any]:
    """From ``pathprobe.loss``: per direction the link's loss (sent − received − the
    receive-path drops, over sent; see the module docstring), its Wilson 99% interval, the
    datagrams sent, the drop counters (``loss_drops``); and the reordered datagrams of both."""
    link_lost = {d: max(0, x["sent"] - x["received"] - (x.get("drops") or {}).get("receive_path", 0))
                 for d, x in lost.items()}
    return {"loss": {d: link_lost[d] / x["sent"] for d, x in lost.items()},
            "loss_ci99": {d: wilson(link_lost[d], x["sent"]) for d, x in lost.items()},
            "loss_sent": {d: x["sent"] for d, x in lost.items()},
            "loss_drops": {d: x.get("drops") for d, x in lost.items()},
            "reordered": sum(x["reordered"] for x in lost.values())}


def emulator_report(tb) -> dict[str, Any]:
    """What the userspace emulator reported on a stopped Testbed (empty figures for a backend
    without a summary): scheduling error, queue drops and random-loss drops per direction,
    unintended drops, read lag, warnings, CPU."""
    emu = tb.metadata.get("backend_summary", {})
    dirs = emu.get("directions", {})
    names = (("up", "client-server"), ("down", "server-client"))
    queue_drops = {d: dirs[name]["dropped_queue"] if name in dirs else None for d, name in names}
    loss_drops = {d: dirs[name]["dropped_loss"] if name in dirs else None for d, name in names}
    return {"sched_error_us": emu.get("sched_error_us"), "queue_drops": queue_drops,
            "loss_drops": loss_drops,
            "unintended_drops": emu.get("unintended_drops"), "read_lag_us": emu.get("read_lag_us"),
            "warnings": emu.get("warnings", []), "cpu_percent": emu.get("cpu_percent")}


BUSY = 0.9    # a CPU this busy during the train delays whatever else needs it
WAITED = 0.1  # a guest that waited this share of the train for a host CPU was held back by the host


def netem_overflow(netem: dict, loss: float) -> int | None:
    """Frames netem dropped at its queue limit during a train (``tc -s`` deltas ``netem``): its
    ``drops`` when the direction has no configured ``loss`` — netem counts limit drops and its
    random losses alike in ``drops`` and never raises ``overlimits`` — else None (the two cannot
    be told apart)."""
    return netem.get("drops", 0) if not loss else None


def rate_shortfall(conf: float, meas: float | None, sides: dict, loss: float = 0.0) -> str:
    """Which side made a rate line fail, from what each side did during the train
    (``pathprobe.rate``'s ``sides``; ``loss``: the direction's configured loss probability), as
    one line: the sender (it did not offer 2% more than
    the rate), the probe (its train overflowed the queue; frames the qdisc sent did not reach
    the receiver; its fit disagrees with the plain mean), else the qdisc (it released the train
    at the mean rate shown, every frame it sent received); then what held that side back, when
    the figures show it — the host (inside a UML guest: the guest waited ≥ 10% of the train for
    a host CPU) or the CPU the side ran on (≥ 90% busy) — and the figures: the CPU's busy and
    steal shares, the sender's own CPU share, and in a guest the host's view of it."""
    snd, cpu, rx = sides["sender"], sides["cpu_window"], sides["receiver"]
    qdisc, host = sides.get("qdisc") or {}, sides.get("host")
    in_guest = os.environ.get("TESTBED_IN_UML") == "1" or host is not None
    where = "the guest's virtual CPU" if in_guest else f"the machine's {cpu['cpus']} CPU(s)"
    figures = (f"{where} {cpu['busy_share']:.0%} busy, {cpu['steal_share']:.0%} steal during the "
               f"{cpu['seconds']:g} s train; the sender used "
               + ("?" if snd.get("cpu_share") is None else f"{snd['cpu_share']:.0%}") + " of a CPU")
    htb, netem = qdisc.get("htb") or {}, qdisc.get("netem") or {}
    overflow = netem_overflow(netem, loss) if netem else None
    if htb or netem:
        figures += (f"; tc -s: htb sent {htb.get('packets', '?')} (overlimits "
                    f"{htb.get('overlimits', '?')}), netem dropped {netem.get('drops', '?')} "
                    + ("(no loss configured: all at its queue limit)" if overflow is not None else
                       "(its configured loss and its queue limit alike: tc does not tell them apart)")
                    + f", backlog left {htb.get('backlog', '?')} B")
    if host:
        figures += (f"; the host ran the guest {host['cpu_share']:.0%} of the train and kept it "
                    f"waiting for a CPU {host['wait_share']:.0%} (host load {host['load1']})")
    if host and host["wait_share"] >= WAITED:
        cause = " — held back by the host: a busy machine kept the guest waiting for a CPU"
    elif cpu["busy_share"] >= BUSY:
        cause = (f" — on a saturated CPU ({where} {cpu['busy_share']:.0%} busy): the sender, the "
                 "qdiscs and the receiver share it; the rate is above what it carries here")
    else:
        cause = ""
    offered = snd.get("send_rate_mbps") or 0.0
    if offered < (1 + RATE_TOL) * conf:
        side = (f"the sender fell short: it offered {offered:.2f} Mbit/s, below the "
                f"{(1 + RATE_TOL) * conf:.2f} needed to keep the bottleneck busy")
    elif overflow:
        side = f"the probe: its train overflowed the queue ({overflow} frames dropped at netem's limit)"
    elif sides.get("receive_path_drops", 0) or (
            (qdisc.get("htb") or {}).get("packets", 0) > rx["received"] + 2):
        side = (f"the probe's receive side: the qdisc sent "
                f"{(qdisc.get('htb') or {}).get('packets', '?')} frames, the receiver got "
                f"{rx['received']} ({sides.get('receive_path_drops', 0)} dropped by the kernel's "
                "receive backlog)")
    elif (rx.get("mean_rate_mbps") is not None and abs(rx["mean_rate_mbps"] - conf) <= RATE_TOL * conf
          and rx["fit_points"] < 0.8 * rx["received"]):
        side = (f"the probe's fit: the frames arrived at {rx['mean_rate_mbps']:.2f} Mbit/s on "
                f"average, the fit kept {rx['fit_points']} of {rx['received']} receive times")
    else:
        mean = rx.get("mean_rate_mbps")
        side = (f"the qdisc: it released the train at "
                f"{'?' if mean is None else f'{mean:.2f}'} Mbit/s (mean over the arrivals), "
                "every frame it sent received")
    return f"{side}{cause}; {figures}"


def evaluate(configured: dict, res: dict) -> list[dict]:
    """One pass/fail line per measured quantity (see the module docstring for tolerances)."""
    m, emu = res["measured"], res["emulator"]
    checks = []

    def check(name, conf, meas, ok, tol):
        checks.append({"check": name, "configured": conf, "measured": meas, "ok": bool(ok),
                       "tolerance": tol})

    med = m["rtt_ms"]["median"]
    own = (m["rtt_ms"].get("endpoints") or {}).get("median") or 0.0
    check("RTT median (ms)", configured["rtt_ms"], med,
          med is not None and abs(med - own - configured["rtt_ms"]) <= RTT_TOL_MS,
          f"±{RTT_TOL_MS} ms" + (f" around configured + {own:.2f} ms, the endpoints' own round trip "
                                 "(loopback)" if own else "")
          + "; configured: the delays both ways and the probe's serialization at each rate")
    for d in ("up", "down"):
        conf = configured["rate_mbps"][d]
        meas = m["rate_mbps"].get(d)
        train = m["train"].get(d, {})
        driven = train.get("send_rate_mbps", 0) >= (1 + RATE_TOL) * (conf or 0)
        if conf is not None:
            ok = meas is not None and driven and abs(meas - conf) <= RATE_TOL * conf
            check(f"rate {d} (Mbit/s)", conf, meas, ok,
                  "±2%" + ("" if driven else " (inconclusive: sender did not exceed the rate)"))
            if not ok and train.get("sides"):
                checks[-1]["why"] = rate_shortfall(conf, meas, train["sides"], configured["loss"][d])
    for d in ("up", "down"):
        lo, hi = m["loss_ci99"][d]
        conf = configured["loss"][d]
        ok = m["loss"][d] == 0 if conf == 0 else lo <= conf <= hi
        check(f"loss {d}", conf, round(m["loss"][d], 6), ok,
              ("none lost" if conf == 0 else f"configured inside 99% interval [{lo:.4f}, {hi:.4f}]")
              + drops_note((m.get("loss_drops") or {}).get(d)))
    check("reordered datagrams", 0, m["reordered"], m["reordered"] == 0, "0")
    return checks + emulator_checks(emu) + overflow_checks(m.get("overflow"))


def delivered_at_rate(o: dict) -> bool:
    """Whether the link delivered the overflow train ``o`` (``measure_overflow``) at its rate,
    within ``RATE_TOL``: the condition under which 1 − rate/offered is the loss to expect."""
    d = o.get("delivered_mbps")
    return d is not None and abs(d - o["rate_mbps"]) <= RATE_TOL * o["rate_mbps"]


def overflow_checks(o: dict | None) -> list[dict]:
    """The overflow train's lines (``measure_overflow``; none without one): its loss against
    1 − rate/offered at the offered rate the sender reached (``overflow.TOL``; fails when nothing
    overflowed; the receiving kernel's drops, left out, named), the rate at which the link
    delivered it (``delivered_at_rate``), the link's drops that were not the queue's (0; only
    where the backend counts them, not netem), and its run's link fidelity (ok).  A failed line
    says why, with the train's figures."""
    from testbed.calibrate import overflow as ov
    if not o:
        return []
    d = o["drops"]
    figures = (f"offered {_num(o['offered_mbps'], '.1f')} Mbit/s over the window "
               f"({_num((o['sender'] or {}).get('send_rate_mbps'), '.1f')} over the whole train, target "
               f"{o['offered_target_mbps']:g}; sender {_num((o['sender'] or {}).get('cpu_share'), '.0%')} "
               f"of a CPU, machine {o['sender']['cpu_window']['busy_share']:.0%} busy); "
               f"delivered at {_num(o.get('delivered_mbps'), '.1f')} Mbit/s; "
               f"{o['lost']} of {o['sent']} lost, the queue first overflowed at datagram "
               f"{o['first_lost']} after {_num(o['fill_s'], '.3f')} s; drops: queue {d['queue']}, random "
               f"loss {d['random_loss']}, the emulator's own {d['emulator_unintended']}, receive path "
               f"{d['receive_path']}, unsent {d['unsent']}; longest send gap "
               f"{_num(o['send_gap_max_ms'], '.1f')} ms")
    f = o.get("fidelity") or {}
    checks = []
    exp, loss = o["expected"], o["loss"]
    ok = loss is not None and exp is not None and bool(abs(loss - exp) <= ov.TOL)
    checks.append({"check": f"overflow loss at {o['offered_target_mbps']:g} Mbit/s",
                   "configured": None if exp is None else round(exp, 6),
                   "measured": None if loss is None else round(loss, 6), "ok": ok,
                   "tolerance": f"±{ov.TOL} of 1 − {o['rate_mbps']:g}/offered"
                                + ("" if loss is not None else " (nothing overflowed)")
                                + (f"; not counted: {o['receive_drops']} dropped by the receiver's "
                                   "kernel after the link delivered them" if o.get("receive_drops") else "")})
    delivered = o.get("delivered_mbps")
    checks.append({"check": "overflow delivered rate (Mbit/s)", "configured": o["rate_mbps"],
                   "measured": None if delivered is None else round(delivered, 1),
                   "ok": delivered_at_rate(o), "tolerance": f"±{RATE_TOL:.0%}, a full queue drains at the rate"})
    other = ov.other_drops(d)
    if other is not None:       # a backend without the counters has no such line
        checks.append({"check": "overflow drops not the queue's", "configured": 0, "measured": other,
                       "ok": other == 0, "tolerance": "0 (random loss, the emulator's own)"})
    if f:
        checks.append({"check": "overflow run link fidelity", "configured": None, "measured": None,
                       "ok": f.get("verdict") == "ok", "tolerance": f"ok (was {f.get('verdict')})"})
    for c in checks:
        if not c["ok"]:
            c["why"] = figures + ("; " + "; ".join(f.get("warnings") or []) if f.get("warnings") else "")
    return checks


def _num(x, fmt: str) -> str:
    return "?" if x is None else format(x, fmt)


def drops_note(drops: dict | None) -> str:
    """What a loss line adds about its drop counters (``pathprobe.loss_drops``): the datagrams
    the receiving side dropped, not counted as the link's, and those a full queue at the
    sender dropped (the probe overran the link's buffer: not the configured loss)."""
    if not drops:
        return ""
    note = ""
    if drops["receive_path"]:
        note += (f"; not counted: {drops['receive_path']} dropped by the receiver's kernel after the "
                 f"link delivered them (receive backlog {max(drops['veth_tx'], drops['veth_rx'])}, "
                 f"socket {drops['receiver_socket']}, after the receiver stopped "
                 f"{drops.get('receiver_gone', 0)})")
    if drops["sender_queue"]:
        note += (f"; {drops['sender_queue']} dropped at the sender's full queue (the probe overran "
                 "the link's buffer)")
    return note


def emulator_checks(emu: dict) -> list[dict]:
    """The emulator's lines (``emulator_report``): p99 scheduling error, unintended drops, and
    queue drops (a probe met a full buffer: loss and rate are not what they claim to be)."""
    checks = []
    sched = emu.get("sched_error_us")
    if sched:
        checks.append({"check": "emulator sched error p99 (µs)", "configured": None,
                       "measured": sched["p99"], "ok": sched["p99"] <= SCHED_P99_US,
                       "tolerance": f"≤ {SCHED_P99_US} µs"})
    if emu.get("unintended_drops") is not None:
        checks.append({"check": "emulator unintended drops", "configured": 0,
                       "measured": emu["unintended_drops"], "ok": emu["unintended_drops"] == 0,
                       "tolerance": "0"})
    queue_drops = [v for v in (emu.get("queue_drops") or {}).values() if v is not None]
    if queue_drops:
        checks.append({"check": "emulator queue drops", "configured": 0, "measured": sum(queue_drops),
                       "ok": sum(queue_drops) == 0, "tolerance": "0"})
    return checks


def calibrate(rate: str = "333mbit", delay: str = "100ms", loss_up: str = "0%",
              loss_down: str = "14%", backend: str = "auto", packets: int = 10000, seed: int = 1,
              results: str = "results", overflow: str | None = None) -> dict:
    """Measure the longhaul path with this rate (both directions; "unshaped" for none), one-way
    delay and loss per direction, in human units: ``{"configured", "measured", "emulator",
    "backend", "checks", "ok", "run_dir"}`` (see the module docstring and ``evaluate``).
    ``overflow``: the overflow train's offered rate ("none": no train); None: the chapter's
    ``overflow.RATE`` where the link is shaped below it, outside a UML or VM guest (whose virtual
    CPUs cannot offer it), else no train."""
    from testbed.spec.errors import UsageError
    from testbed.spec.linkspec import LinkSpec
    from testbed.spec.units import MAX_RATE, format_rate, parse_probability, parse_rate, parse_time
    rate_bps = None if str(rate).lower() in ("unshaped", "none") else parse_rate(rate)
    if overflow is None:
        from testbed.calibrate.overflow import RATE as OVERFLOW_RATE
        shaped_below = rate_bps is not None and rate_bps < OVERFLOW_RATE
        in_guest = "1" in (os.environ.get("TESTBED_IN_UML"), os.environ.get("TESTBED_IN_VM"))
        over_bps = OVERFLOW_RATE if shaped_below and not in_guest else None
    else:
        over_bps = None if str(overflow).lower() == "none" else parse_rate(overflow)
        if over_bps is not None and not over_bps <= MAX_RATE:
            raise UsageError(f"--overflow {overflow}: give a rate above the link's --rate {rate} and at "
                             f"most {format_rate(MAX_RATE)}, or none")
        if over_bps is not None and (rate_bps is None or over_bps <= rate_bps):
            raise UsageError(f"--overflow {overflow}: give a rate above the link's --rate {rate}, or "
                             "none (the train must overflow a shaped link's queue)")
    delay_s = parse_time(delay)
    p_up, p_down = parse_probability(loss_up), parse_probability(loss_down)
    if not 1000 <= packets <= MAX_PACKETS:
        raise ValueError(f"--packets {packets}: give at least 1000 (10000 for a 99% interval "
                         f"of about ±0.9 points at 14%) and at most {MAX_PACKETS:,}")
    specs = (LinkSpec.parse(rate=rate_bps, delay=delay_s, loss=p_up),
             LinkSpec.parse(rate=rate_bps, delay=delay_s, loss=p_down))
    probe_frame = PROBE_PAYLOAD + 42
    configured = {
        "rate_mbps": {"up": rate_bps / 1e6 if rate_bps else None,
                      "down": rate_bps / 1e6 if rate_bps else None},
        "delay_ms": delay_s * 1e3,
        "rtt_ms": round((2 * delay_s + sum(s.serialization_time(probe_frame) for s in specs)) * 1e3, 6),
        "loss": {"up": p_up, "down": p_down}}
    if os.environ.get("TESTBED_IN_UML") == "1":
        check_uml_rate(rate)
    res = measure(rate_bps, delay_s, p_up, p_down, backend, packets, seed, results, specs, over_bps)
    checks = evaluate(configured, res)
    return {"configured": configured, "measured": res["measured"], "emulator": res["emulator"],
            "backend": res["backend"], "checks": checks, "ok": all(c["ok"] for c in checks),
            "run_dir": res["run_dir"]}
