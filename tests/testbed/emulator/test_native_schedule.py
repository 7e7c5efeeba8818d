"""The native engine's link schedules against the Python reference (``schedule_model``): the same
verdicts, departure times (ns), counters and change records, frame for frame.

Each scenario drives one ``native.Engine`` (several directions, a shared medium in one) and one
``schedule_model.make_direction`` per direction with the same seeded arrivals: bursts of frames at
one timestamp, queue-building trains, idle gaps, every frame size from 42 to 1514 B.  The origin
is set part-way, at a whole ms (frames before it see the constant link) and changes are drained at random
moments, so time-tied records emitted by ``drain_changes(now)`` and by arrivals are both compared.
The scenarios cover steps of every LinkSpec field at time, frame and byte moments, outages (drop
and hold, time- and frame-tied, over a trace too), events (frame-indexed with ``min_bytes`` and
``count``, windows, delay and drop) and the generated traces (constant, alternating, on/off,
Markov), 150,000 frames in all.
"""
import random
import struct
import zlib

import numpy as np
import pytest

from testbed.emulator.airtime import AirMedium, AirtimeSpec
from testbed.emulator.direction import DELIVER, DROP_EVENT, DROP_LOSS, DROP_OUTAGE, DROP_QUEUE
from testbed.emulator.schedule_model import make_direction
from testbed.spec import traces
from testbed.spec.linkspec import LinkSpec
from testbed.spec.schedule import Schedule

native = pytest.importorskip("testbed.emulator.native")
FRAMES = 30_000
MS = 1_000_000


@pytest.fixture(scope="module", autouse=True)
def built():
    ok, reason = native.available()
    assert ok, reason


def _arrivals(n: int, n_dirs: int, seed: int, mean_gap_ns: int):
    """(direction, now_ns, frame_len) lists, nondecreasing in time: single frames, bursts at one
    timestamp, and now and then an idle gap of 1 to 40 ms; a third of the times are moved up to a
    whole ms, so that frames arrive exactly at moments, outage ends and trace opportunities."""
    rng = random.Random(seed)
    out, now = [], 10**9
    while len(out) < n:
        if rng.random() < 0.02:
            now += rng.randrange(10**6, 4 * 10**7)
        d = rng.randrange(n_dirs)
        for _ in range(rng.choice((1, 1, 1, 2, 3, 10, 40))):
            out.append((d, now, rng.choice((42, 66, 100, 576, 1000, 1514, 1514, 1514, rng.randrange(42, 1515)))))
        now += int(rng.expovariate(1 / mean_gap_ns))
        if rng.random() < 0.3:
            now = -(-now // MS) * MS
    return out[:n]


def _spec(base: dict, schedule: dict) -> LinkSpec:
    return LinkSpec.parse(**base).replace(schedule=Schedule.from_dict(schedule))


# Moments are seconds after the origin (set at an arrival after frame FRAMES // 10); every
# scenario's arrivals last at least 1.4 s after it.
STEPS = _spec({"rate": "20mbit", "delay": "10ms", "jitter": "1ms", "loss": "1%"}, {"step": [
    {"at": "0.1s", "rate": "5.3mbit", "delay": "30ms"},
    {"at": "0.2s", "jitter": "5ms"},
    {"at": "0.3s", "reorder": True},
    {"at": "0.45s", "loss": "ge:3%,30%,80%,1%", "reorder": False},
    {"at": "0.6s", "queue": "12"},
    {"at": "0.75s", "queue": "20000B"},
    {"at": "0.9s", "rate": "unshaped", "delay": "2ms"},
    {"at": "1.0s", "rate": "41.7mbit", "queue_packets": 30},
    {"at": "1.1s", "loss": {"model": "droplist", "indices": list(range(0, 3000, 9))}},
    {"at": "1.25s", "delay": "1ms", "jitter": "0ms", "loss": "0%"},
    {"at": "1.4s", "rate": "7.9mbit", "loss": "100%"},
    {"at": "1.55s", "loss": "2%", "queue_packets": None},
    {"at": "4000frames", "delay": "40ms"},
    {"at": "9000frames", "rate": "12.3mbit", "loss": "5%"},
    {"at": "3MB", "jitter": "2ms", "queue": "7"},
    {"at": "9MB", "rate": "30mbit", "delay": "5ms"},
]})
DEFAULT_QUEUE = _spec({"rate": "10mbit", "delay": "20ms"}, {"step": [   # the default limit follows
    {"at": "0.3s", "rate": "50mbit"}, {"at": "0.9s", "delay": "100ms"}, {"at": "3000frames", "rate": "2mbit"},
    {"at": "1.2s", "rate": "unshaped"}, {"at": "1.35s", "rate": "3mbit", "delay": "1ms"}]})
OUTAGES = _spec({"rate": "33.3mbit", "delay": "5ms", "loss": "2%", "queue": "60"}, {
    "outage": [{"down": "0.2s", "duration": "0.15s"}, {"down": "0.6s", "duration": "0.2s", "hold": True},
               {"down": "1.3s", "duration": "0.05s", "hold": True}, {"down": "1.4s", "duration": "0.2s"},
               {"down": "5000frames", "duration": "0.1s", "hold": True}, {"down": "4MB", "duration": "0.07s"}],
    "step": [{"at": "0.7s", "rate": "10.9mbit"}, {"at": "7000frames", "queue": "200"}]})
UNSHAPED_HOLD = _spec({"delay": "3ms", "jitter": "2ms", "reorder": True}, {
    "outage": [{"down": "0.3s", "duration": "0.1s", "hold": True}, {"down": "1.0s", "duration": "0.2s"},
               {"down": "2500frames", "duration": "0.05s", "hold": True}]})
EVENTS = _spec({"rate": "25mbit", "delay": "8ms", "jitter": "3ms", "loss": "3%", "queue": "80"}, {"event": [
    {"frame": 2, "min_bytes": 1000, "delay": "45ms"},
    {"frame": 40, "count": 5, "drop": True},
    {"frame": 300, "count": 200, "min_bytes": 1400, "delay": "7ms"},
    {"start": "0.5s", "end": "0.52s", "drop": True},
    {"start": "1.1s", "end": "1.5s", "min_bytes": 500, "delay": "2ms"},
    {"frame": 6000, "count": 3000, "drop": True, "min_bytes": 1500},
    *[{"start": f"{0.6 + 0.02 * k:.2f}s", "end": f"{0.601 + 0.02 * k:.3f}s", "delay": "1ms"} for k in range(15)],
], "step": [{"at": "0.8s", "reorder": True}, {"at": "1.4s", "reorder": False, "jitter": "0ms"}]})
MBIT = 1e6
TRACES = [
    _spec({"delay": "10ms", "queue": "100"}, {"trace": traces.constant(24 * MBIT, 0.05).to_dict()}),
    _spec({"delay": "4ms", "loss": "1%", "queue": "50"}, {
        "trace": traces.alternating([6 * MBIT, 40 * MBIT], 0.1, 3).to_dict(),
        "step": [{"at": "1s", "delay": "20ms", "loss": "ge:5%,40%"}, {"at": "6000frames", "queue": "40000B"}]}),
    _spec({"delay": "1ms", "queue": "300"}, {
        "trace": traces.on_off(30 * MBIT, on=0.15, off=0.05).to_dict(),
        "outage": [{"down": "0.4s", "duration": "0.1s", "hold": True}, {"down": "1.0s", "duration": "0.05s"}],
        "event": [{"frame": 100, "count": 10, "delay": "5ms"}]}),
    _spec({"delay": "30ms", "jitter": "1ms", "queue": "150"}, {
        "trace": traces.markov([2 * MBIT, 12 * MBIT, 48 * MBIT], 0.08, 1.0, seed=3).to_dict(),
        "event": [{"start": "0.3s", "end": "0.35s", "drop": True}]}),
]
MEDIUM = _spec({"delay": "1ms", "queue": "400"}, {"step": [
    {"at": "0.3s", "delay": "10ms", "loss": "5%"}, {"at": "2000frames", "queue": "30"}],
    "event": [{"frame": 50, "count": 20, "drop": True}]})
WIFI = AirtimeSpec(name="air", cw_min=15, data_rate=24e6, control_rate=12e6)

SCENARIOS = {   # directions (spec, seed, medium), media, mean gap between arrivals (ns)
    "steps": ([(STEPS, 1, None), (DEFAULT_QUEUE, 2, None)], {}, 150_000),
    "outages": ([(OUTAGES, 3, None), (UNSHAPED_HOLD, 4, None)], {}, 120_000),
    "events": ([(EVENTS, 5, None), (STEPS, 6, None)], {}, 100_000),
    "traces": ([(t, 7 + i, None) for i, t in enumerate(TRACES)], {}, 90_000),
    "medium": ([(MEDIUM, 11, "air"), (LinkSpec.parse(delay="1ms"), 12, "air")], {"air": (WIFI, 13)}, 300_000),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_native_schedule_matches_python_model(name):
    directions, media, gap = SCENARIOS[name]
    rng = random.Random(zlib.crc32(name.encode()))
    arrivals = _arrivals(FRAMES, len(directions), rng.randrange(1 << 30), gap)
    meds = {m: AirMedium(spec, seed) for m, (spec, seed) in media.items()}
    models = [make_direction(spec, seed, meds[m] if m else None, name=f"d{i}")
              for i, (spec, seed, m) in enumerate(directions)]
    eng = native.Engine(directions, media)
    origin_at = next(k for k in range(FRAMES // 10, FRAMES) if arrivals[k][1] % MS == 0)
    drains = set(rng.sample(range(origin_at, FRAMES), 40))
    py, c, changes_py, changes_c = [], [], [], []
    for k, (d, now, ln) in enumerate(arrivals):
        if k == origin_at:
            for i, m in enumerate(models):
                m.set_origin(now)
                eng.set_origin(i, now)
        if k in drains:
            for i, m in enumerate(models):
                changes_py += m.drain_changes(now)
                changes_c += eng.drain_changes(i, now)
        py.append(models[d].arrive(now, ln))
        c.append(eng.arrive(d, now, ln))
    end = arrivals[-1][1] + 10**9
    for i, m in enumerate(models):
        changes_py += m.drain_changes(end)
        changes_c += eng.drain_changes(i, end)
    v_py, v_c = np.array(py), np.array(c)
    bad = np.flatnonzero((v_py != v_c).any(axis=1))
    assert len(bad) == 0, (f"{len(bad)} of {FRAMES} frames differ, first {bad[0]} {arrivals[bad[0]]}: "
                           f"python {py[bad[0]]} native {c[bad[0]]}")
    assert changes_c == changes_py
    for i, m in enumerate(models):
        want = {**vars(m.stats), **(vars(m.schedule_stats) if hasattr(m, "schedule_stats") else {})}
        assert eng.stats(i) == want, (i, eng.stats(i), want)
    # the arrivals exercised what the scenario is about (so equality above means something)
    verdicts = set(v_py[:, 0].tolist())
    kinds = {ch.kind for ch in changes_py}
    expect = {"steps": ({DELIVER, DROP_LOSS, DROP_QUEUE}, {"step"}),
              "outages": ({DELIVER, DROP_LOSS, DROP_QUEUE, DROP_OUTAGE}, {"down", "up", "step"}),
              "events": ({DELIVER, DROP_LOSS, DROP_QUEUE, DROP_EVENT}, {"event", "step"}),
              "traces": ({DELIVER, DROP_QUEUE, DROP_OUTAGE, DROP_EVENT, DROP_LOSS},
                         {"trace", "down", "up", "event", "step"}),
              "medium": ({DELIVER, DROP_LOSS, DROP_EVENT}, {"step", "event"})}[name]
    assert verdicts >= expect[0] and kinds >= expect[1], (verdicts, kinds)
    assert all(ch.actual_ns <= arrivals[-1][1] for ch in changes_py)   # in the run, not at its end
    tied = [ch for ch in changes_py if ch.configured_ns is None]
    assert tied or name == "traces", "no frame- or byte-tied change took effect"
    # every step of every scheduled direction took effect
    for i, (spec, _, _) in enumerate(directions):
        if spec.schedule is not None:
            assert models[i].schedule_stats.changes >= len(spec.schedule.steps)
    eng.close()


def _tcp(src: int, sport: int, seq: int, payload: int, options: int = 0, frag: int = 0x4000) -> bytes:
    """An Ethernet IPv4/TCP frame 10.0.0.<src> -> 10.0.0.9 (ports sport -> 80) carrying
    ``payload`` bytes from ``seq`` (``options`` bytes of TCP options, ``frag``: flags/offset)."""
    doff = 5 + options // 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + doff * 4 + payload, 0, frag, 64, 6, 0,
                     bytes((10, 0, 0, src)), bytes((10, 0, 0, 9)))
    tcp = struct.pack("!HHIIBBHHH", sport, 80, seq % (1 << 32), 0, doff << 4, 0x18, 65535, 0, 0)
    return bytes(12) + b"\x08\x00" + ip + tcp + bytes(options + payload)


def _tcp_arrivals(n: int, seed: int):
    """(now_ns, frame) of a TCP sender whose sequence numbers wrap past 2^32: new segments (1448
    B, 500 B, bare ACKs, with options), exact retransmissions of one of the last 400 segments,
    copies shifted to overlap partially, the same sequence ranges on another flow (other ports;
    another source), a non-first fragment, UDP and IPv6 frames, one frame cut short."""
    rng = random.Random(seed)
    out, now, seq, sent = [], 10**9, (1 << 32) - 300_000, []
    while len(out) < n:
        now += int(rng.expovariate(1 / 110_000))
        r = rng.random()
        if r < 0.55:
            size = rng.choice((1448, 1448, 1448, 500, 0))
            frame = _tcp(1, 5001, seq, size, options=rng.choice((0, 12)))
            if size:
                sent.append((seq, size))
            seq += size
        elif r < 0.75 and sent:
            old, size = rng.choice(sent[-400:])
            shift = rng.choice((0, 0, rng.randrange(-1400, 1400)))
            frame = _tcp(1, 5001, old + shift, rng.choice((size, rng.randrange(1, 1448))))
        elif r < 0.85 and sent:
            old, size = rng.choice(sent[-400:])
            frame = _tcp(*rng.choice(((1, 5002), (2, 5001))), old, size)   # another flow
        elif r < 0.88 and sent:
            frame = _tcp(1, 5001, rng.choice(sent[-400:])[0], 1000, frag=0x00B9)   # not the first fragment
        elif r < 0.94:
            frame = bytes(12) + b"\x08\x00" + bytes((0x45,)) + bytes(8) + b"\x11" + bytes(rng.randrange(10, 1400))
        elif r < 0.97:
            frame = bytes(12) + b"\x86\xdd" + bytes(rng.randrange(40, 1400))
        else:
            frame = _tcp(1, 5001, seq, 1448)[:50]     # cut short: no whole TCP header
        out.append((now, frame))
    return out


COPIES = _spec({"rate": "30mbit", "delay": "5ms", "loss": "1%", "queue": "100"}, {"event": [
    {"frame": 50, "min_bytes": 1000, "drop": True, "copies_until": "0.4s"},
    {"frame": 400, "count": 5, "drop": True, "copies_until": "0.8s"},
    {"start": "0.9s", "end": "0.93s", "drop": True, "copies_until": "1.3s"},
    {"frame": 10, "delay": "3ms"}]})


def test_native_tcp_copies_match_python_model():
    """Events with ``copies_until`` over TCP frames (and frames that are not TCP): the same
    verdicts and times in both engines, frame for frame, and the copies did drop frames (the
    same arrivals without ``copies_until`` drop fewer)."""
    arrivals = _tcp_arrivals(FRAMES // 2, 11)
    plain = COPIES.replace(schedule=Schedule.from_dict({"event": [
        {k: v for k, v in e.to_dict().items() if k != "copies_until"} for e in COPIES.schedule.events]}))
    origin_at = FRAMES // 20
    runs = []
    for spec in (COPIES, plain):
        model, eng = make_direction(spec, 5), native.Engine([(spec, 5, None)])
        py, c = [], []
        for k, (now, frame) in enumerate(arrivals):
            if k == origin_at:
                model.set_origin(now)
                eng.set_origin(0, now)
            py.append(model.arrive(now, len(frame), frame))
            c.append(eng.arrive(0, now, len(frame), frame))
        bad = [k for k in range(len(py)) if py[k] != c[k]]
        assert not bad, (f"{len(bad)} frames differ, first {bad[0]}: python {py[bad[0]]} native {c[bad[0]]}")
        assert eng.stats(0) == {**vars(model.stats), **vars(model.schedule_stats)}
        assert eng.drain_changes(0, arrivals[-1][0]) == model.drain_changes(arrivals[-1][0])
        runs.append(model.schedule_stats.dropped_event)
        eng.close()
    assert runs[0] > runs[1] > 0, runs
    assert arrivals[-1][0] - arrivals[origin_at][0] > 1.3e9     # the last moment is inside the run


def test_differential_covers_at_least_100000_frames():
    assert FRAMES * len(SCENARIOS) >= 100_000


def test_make_direction_parallels_the_python_model():
    """``native.make_direction`` has the Python model's calls and errors: set_origin once, not
    before the last arrival; drain_changes with and without a time; stats with the schedule's."""
    spec = LinkSpec.parse(rate="10mbit").with_override("down", "1s+1s").with_override("delay", "5ms@3frames")
    c, py = native.make_direction(spec, 1), make_direction(spec, 1)
    for m in (c, py):
        assert m.arrive(100, 1514) == (DELIVER, 1_211_300)
        with pytest.raises(ValueError, match="before the last arrival"):
            m.set_origin(99)
        m.set_origin(100)
        with pytest.raises(ValueError, match="already set"):
            m.set_origin(200)
    got = [(m.arrive(t, 1514), m.drain_changes()) for m in (c, py) for t in (10**6, 2 * 10**6, 3 * 10**6, 4 * 10**6)]
    assert got[:4] == got[4:]
    assert c.drain_changes(2 * 10**9 + 100) == py.drain_changes(2 * 10**9 + 100) != []
    assert c.stats == {**py.stats.__dict__, **py.schedule_stats.__dict__}
    static = native.Engine([(LinkSpec.parse(rate="10mbit"), 1, None)])
    static.set_origin(0, 5)     # a constant direction ignores the origin, as DirectionModel does
    assert static.drain_changes(0, 10**12) == [] and "changes" not in static.stats(0)


def test_native_refuses_what_the_model_refuses_on_a_shared_medium():
    air = {"air": (AirtimeSpec(name="air"), 1)}
    spec = LinkSpec.parse().with_override("down", "1s+1s")
    with pytest.raises(ValueError, match="not modelled there"):
        native.Engine([(spec, 1, "air")], air)
    with pytest.raises(ValueError, match="not modelled there"):
        make_direction(spec, 1, AirMedium(air["air"][0], 1))


def test_native_loop_applies_a_requested_origin_and_logs_schedule_verdicts(tmp_path):
    """tb_run on AF_UNIX datagram pairs with a direction that is down from its origin on and a
    constant one: 20 frames before the origin are delivered; ``request_origin`` from another
    thread while the loop waits with nothing to do wakes it, and it gives both directions their
    origin (``applied_origin``, at the earliest their last arrival); the 20 frames after it are
    logged ``dropped_outage``, and the down record drained after the loop is at the origin."""
    import ctypes
    import signal
    import socket
    import threading
    import time
    from scapy.all import IP, UDP, Ether, raw
    from testbed.emulator import linklog
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(4)]
    (feed, b_in), (a_out, sink), (feed2, b_in2), (a_out2, sink2) = pairs
    for s in (b_in, b_in2):
        s.setblocking(False)
    logs = [linklog.LogWriter(tmp_path / f"{n}.frames", {"direction": n}) for n in ("a-b", "b-a")]
    spec = LinkSpec.parse(delay="1ms").with_override("down", "0s+100s")
    eng = native.Engine([(spec, 3, None), (LinkSpec.parse(delay="1ms"), 4, None)])
    main = threading.get_ident()
    asked, applied = [], []

    def feeder():
        for burst in range(2):
            for i in range(20):
                feed.send(raw(Ether() / IP(id=burst * 20 + i) / UDP(sport=1, dport=2)))
            time.sleep(0.15)    # frames sent, the loop idle with nothing due
            if burst == 0:
                asked.append(time.monotonic_ns())
                eng.request_origin(asked[0])
                deadline = time.monotonic() + 5
                while (eng.applied_origin(0) is None or eng.applied_origin(1) is None) \
                        and time.monotonic() < deadline:
                    time.sleep(0.0005)
                applied.append(time.monotonic_ns())
        signal.pthread_kill(main, signal.SIGTERM)

    io = (native.IoCfg * 2)(native.IoCfg(b_in.fileno(), a_out.fileno(), logs[0]._fd),
                            native.IoCfg(b_in2.fileno(), a_out2.fileno(), logs[1]._fd))
    io_stats, run_stats = (native.IoStats * 2)(), native.RunStats()
    old = signal.signal(signal.SIGTERM, lambda *a: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    thread = threading.Thread(target=feeder)
    try:
        thread.start()
        ret = native.load().tb_run(eng.ptr, io, native.RunCfg(10**6, 50_000, 0), io_stats,
                                   ctypes.byref(run_stats))
    finally:
        thread.join()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        signal.signal(signal.SIGTERM, old)
    for log in logs:
        log.close()
    for pair in pairs:
        for s in pair:
            s.close()
    assert ret == 0
    origin = eng.applied_origin(0)
    assert eng.applied_origin(1) == origin and asked[0] <= origin <= applied[0]
    assert applied[0] - asked[0] < 10**9     # woken at once, not left waiting for a frame
    rec = linklog.read_log(logs[0].path)[1]
    rec = rec[np.argsort(rec["t_arrival"], kind="stable")]
    assert list(rec["verdict"]) == [linklog.DELIVERED] * 20 + [linklog.OUTAGE] * 20
    assert (rec["t_arrival"][20:] >= origin).all() and (rec["t_arrival"][:20] <= origin).all()
    [down] = eng.drain_changes(0, time.monotonic_ns())
    assert (down.kind, down.actual_ns, down.frames_before) == ("down", origin, 0)
    assert eng.stats(0)["dropped_outage"] == 20 and eng.drain_changes(1) == []
