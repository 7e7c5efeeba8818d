"""The native engine against the Python reference model: identical verdicts and times, to the ns.

Differential test: the same arrival traces (bursts of back-to-back frames at one timestamp, gaps,
idle periods, every frame size from 42 to 1514 B) go through ``DirectionModel``/``AirMedium``
and through the C core (``testbed.emulator.native.Engine``), over every LinkSpec feature and the
shared Wi-Fi medium; verdicts, times and counters must agree exactly.
"""
import os
import random
import zlib

import numpy as np
import pytest

from conftest import received_ip_ids
from testbed.emulator import linklog
from testbed.emulator.config import DirectionConfig, ForwarderConfig
from testbed.emulator.airtime import AirMedium, AirtimeSpec
from testbed.emulator.direction import DirectionModel
from testbed.emulator.forwarder import PREEMPTION_MODES
from testbed.spec.linkspec import Bernoulli, DropList, GilbertElliott, LinkSpec

native = pytest.importorskip("testbed.emulator.native")


@pytest.fixture(scope="module", autouse=True)
def built():
    ok, reason = native.available()
    assert ok, reason


def _trace(n: int, n_dirs: int, seed: int, mean_gap_ns: int):
    """Arrival trace: (direction, now_ns, frame_len) arrays, nondecreasing per direction."""
    rng = random.Random(seed)
    dirs, nows, lens = [], [], []
    now = 1_000_000_000
    while len(nows) < n:
        kind = rng.random()
        if kind < 0.1:  # idle period: queues drain, the serializer restarts
            now += rng.randrange(10**6, 10**8)
        burst = rng.choice((1, 1, 1, 2, 5, 40, 200)) if kind < 0.9 else 1
        d = rng.randrange(n_dirs)
        for _ in range(burst):  # a burst: back-to-back frames with the same timestamp
            dirs.append(d)
            nows.append(now)
            lens.append(rng.choice((42, 66, 60, 100, 576, 1514, 1514, 1514, rng.randrange(42, 1515))))
        now += int(rng.expovariate(1 / mean_gap_ns))
    return np.array(dirs[:n], np.int32), np.array(nows[:n], np.int64), np.array(lens[:n], np.int64)


def _python(directions, media, trace):
    meds = {name: AirMedium(spec, seed) for name, (spec, seed) in media.items()}
    models = [DirectionModel(spec, seed, meds[m] if m else None, name=f"d{i}")
              for i, (spec, seed, m) in enumerate(directions)]
    verdicts, times = [], []
    for d, now, ln in zip(*(a.tolist() for a in trace)):
        v, t = models[d].arrive(now, ln)
        verdicts.append(v)
        times.append(t)
    return np.array(verdicts, np.uint8), np.array(times, np.int64), models, meds


WIFI = AirtimeSpec(name="wlan")                       # C10: no backoff
WIFI_BACKOFF = AirtimeSpec(name="busy", cw_min=15, data_rate=24e6, control_rate=12e6)

SCENARIOS = {
    "longhaul": ([(LinkSpec.parse(rate="333mbit", delay="100ms", loss="14%"), 1, None),
                  (LinkSpec.parse(rate="333mbit", delay="100ms"), 2, None)], {}, 30_000),
    "bytes-queue-overhead-ge-jitter": (
        [(LinkSpec.parse(rate="20mbit", delay="10ms", jitter="3ms", queue_bytes="30000",
                         overhead="24", loss="ge:1%,30%"), 7, None),
         (LinkSpec(rate=1e6 / 3, delay=0.002, loss=GilbertElliott(0.02, 0.3, 0.7, 0.01),
                   queue_packets=20), 8, None)], {}, 200_000),
    "reorder-droplist-unshaped": (
        [(LinkSpec(delay=0.001, jitter=0.005, reorder=True,
                   loss=DropList(frozenset(range(0, 50_000, 7)))), 3, None),
         (LinkSpec(delay=0.03, jitter=0.0001), 4, None),
         (LinkSpec(loss=Bernoulli(1.0)), 5, None),
         (LinkSpec(rate=1e9, loss=Bernoulli(0.0), queue_packets=5), 6, None)], {}, 5_000),
    "wifi": ([(LinkSpec(delay=0.0005, loss=Bernoulli(0.01)), 11, "wlan"),
              (LinkSpec(delay=0.0005), 12, "wlan"),
              (LinkSpec(queue_packets=30, jitter=0.0002, loss=GilbertElliott(0.05, 0.5)), 13, "busy"),
              (LinkSpec(queue_bytes=20000), 14, "busy")],
             {"wlan": (WIFI, 11), "busy": (WIFI_BACKOFF, 13)}, 150_000),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_native_core_matches_python_model_to_the_nanosecond(name):
    directions, media, gap = SCENARIOS[name]
    trace = _trace(40_000, len(directions), seed=zlib.crc32(name.encode()), mean_gap_ns=gap)
    v_py, t_py, models, meds = _python(directions, media, trace)
    eng = native.Engine(directions, media)
    v_c, t_c = eng.arrive_batch(*trace)
    mismatch = np.flatnonzero((v_py != v_c) | (t_py != t_c))
    assert len(mismatch) == 0, (f"{len(mismatch)} of {len(v_py)} frames differ, first at "
                                f"{mismatch[0]}: python {v_py[mismatch[0]], t_py[mismatch[0]]} "
                                f"native {v_c[mismatch[0]], t_c[mismatch[0]]}")
    # the trace exercised what the scenario is about
    assert set(np.unique(v_py).tolist()) >= ({0, 1, 2} if name != "longhaul" else {0, 1})
    for i, m in enumerate(models):
        want = m.stats.__dict__
        got = eng.stats(i)
        assert got == want, (i, got, want)
    for j, mname in enumerate(eng.medium_names):
        st = meds[mname].stats
        assert eng.medium_stats(j) == {"exchanges": st.exchanges, "backoff_slots": st.backoff_slots}
    eng.close()


def test_differential_covers_at_least_100000_frames():
    assert 40_000 * len(SCENARIOS) >= 100_000


def test_single_arrive_and_same_seed_same_draws():
    spec = LinkSpec(rate=10e6, delay=0.01, jitter=0.002, loss=Bernoulli(0.3))
    eng = native.Engine([(spec, 42, None)])
    model = DirectionModel(spec, 42)
    for k in range(2000):
        assert eng.arrive(0, k * 500_000, 1514) == model.arrive(k * 500_000, 1514)
    other = native.Engine([(spec, 43, None)])
    a = [eng.arrive(0, 10**10 + k * 10**6, 100) for k in range(200)]
    b = [other.arrive(0, 10**10 + k * 10**6, 100) for k in range(200)]
    assert a != b  # a different seed gives different draws


def test_parse_key_matches_linklog():
    from scapy.all import ARP, IP, TCP, UDP, Ether, raw
    frames = [raw(Ether() / IP(src="10.0.0.2", dst="10.0.0.1", id=4242) / TCP(sport=5201, dport=4, seq=99)),
              raw(Ether() / IP(id=7) / UDP(sport=1, dport=5600) / (b"x" * 100)),
              raw(Ether() / IP(id=9, frag=185, proto=17) / (b"y" * 40)),
              raw(Ether() / IP(ihl=6, options=b"\x01\x01\x01\x00") / TCP(sport=80, dport=81, seq=5)),
              raw(Ether() / IP(proto=6) / b"\x00\x01"),  # TCP header cut short
              raw(Ether() / ARP()), b"\x00" * 10, b"\x00" * 20]
    for f in frames:
        assert native.parse_key(f) == linklog.parse_key(f)
    assert native.Rec().__class__ and len(bytes(native.Rec())) == linklog.RECORD.size


# --- the native loop on datagram socket pairs (no root) ------------------------------------------
def _loop_on_pairs(tmp_path, spec, ip_ids, seconds, early_ns=0, cfg=None, receiver=True):
    """tb_run for ``seconds`` (then SIGTERM) on AF_UNIX datagram pairs, fed one UDP frame per IP
    id of ``ip_ids`` before it starts, the receiving end closed first unless ``receiver``:
    (return value, IoStats, RunStats, the thread's CPU ns inside the loop, the frame log's
    records, the receiving socket, non-blocking, or None; the caller closes it)."""
    import signal
    import socket
    import threading
    import time
    from scapy.all import IP, UDP, Ether, raw
    feed, b_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a_out, sink = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (b_in, sink):
        s.setblocking(False)
    if not receiver:
        sink.close()
        sink = None
    log = linklog.LogWriter(tmp_path / "a-b.frames", {"direction": "a-b"})
    for i in ip_ids:
        feed.send(raw(Ether() / IP(id=i) / UDP(sport=1, dport=2)))
    eng = native.Engine([(spec, 3, None)])
    main = threading.get_ident()
    stopper = threading.Timer(seconds, lambda: signal.pthread_kill(main, signal.SIGTERM))
    cpu0 = time.thread_time_ns()
    ret, io_stats, run_stats = _run_loop(eng, b_in, a_out, log, [stopper], early_ns, cfg)
    cpu = time.thread_time_ns() - cpu0
    assert eng.stats(0)["frames_in"] == len(ip_ids)
    for s in (feed, b_in, a_out):
        s.close()
    return ret, io_stats, run_stats, cpu, linklog.read_log(log.path)[1], sink


@pytest.mark.parametrize("reorder", [False, True])
def test_native_loop_sends_in_schedule_order_and_logs_every_frame(tmp_path, reorder):
    """tb_run on AF_UNIX datagram pairs: every frame logged once with its fate, delivered frames
    leave in schedule order no earlier than scheduled, SIGTERM ends the loop."""
    spec = LinkSpec.parse(delay="1ms", jitter="5ms", reorder=reorder, loss=DropList(frozenset({2})))
    ret, io_stats, run_stats, _, rec, sink = _loop_on_pairs(tmp_path, spec, range(50), 0.5)
    assert ret == 0
    out = received_ip_ids(sink)
    sink.close()
    assert len(rec) == 50 and io_stats[0].records == 50
    assert int((rec["verdict"] == linklog.LOSS).sum()) == 1 and io_stats[0].send_errors == 0
    sent = rec[rec["verdict"] == linklog.DELIVERED]
    assert list(sent["ip_id"]) == out and 2 not in out and len(out) == 49
    assert (np.diff(sent["t_sched"]) >= 0).all()
    assert (sent["t_sent"] >= sent["t_sched"]).all()  # never early (early_ns = 0)
    assert (out != sorted(out)) == reorder
    assert run_stats.iterations > 0


@pytest.mark.parametrize("receiver", ["open", "closed"])
def test_frames_due_together_leave_in_batches_in_order(tmp_path, receiver):
    """49 frames due at once (sent 10 ms early, delay 1 ms) leave 8 to a sendmmsg call, in
    schedule order; a frame the kernel refuses is a send error and the call goes on after it
    (a closed receiver refuses every frame: one call per frame, each logged as a send error)."""
    spec = LinkSpec.parse(delay="1ms", loss=DropList(frozenset({2})))
    ret, io_stats, run_stats, _, rec, sink = _loop_on_pairs(
        tmp_path, spec, range(50), 0.3, early_ns=10**7, receiver=receiver == "open")
    assert ret == 0
    assert len(rec) == 50 and int((rec["verdict"] == linklog.LOSS).sum()) == 1
    left = rec[rec["verdict"] != linklog.LOSS]
    assert (np.diff(left["t_sched"]) >= 0).all()
    if receiver == "open":
        assert run_stats.send_calls == 7 and io_stats[0].send_errors == 0  # 6 x 8 + 1
        assert list(left["ip_id"]) == received_ip_ids(sink) and (np.diff(left["t_sent"]) >= 0).all()
        sink.close()
    else:
        assert run_stats.send_calls == 49 and io_stats[0].send_errors == 49
        assert (left["verdict"] == linklog.SEND_ERROR).all() and (left["t_sent"] == 0).all()


@pytest.mark.parametrize("threshold_ns", [1, 10**10])
def test_send_calls_over_the_slow_send_threshold_are_counted(tmp_path, threshold_ns):
    """Every send/sendmmsg call at least ``slow_send_ns`` long is a slow send, its time summed,
    and the longest call is kept: with a 1 ns threshold all 7 calls of 49 frames due at once
    are slow and their time is all the time inside send; with 10 s none is."""
    cfg = native.RunCfg(10**6, 50_000, 10**7, slow_send_ns=threshold_ns)
    ret, _, st, _, _, sink = _loop_on_pairs(tmp_path, LinkSpec.parse(delay="1ms"), range(49), 0.3,
                                            cfg=cfg)
    sink.close()
    assert ret == 0 and st.send_calls == 7
    assert 0 < st.send_max_ns <= st.send_ns
    if threshold_ns == 1:
        assert st.slow_sends == 7 and st.slow_send_ns == st.send_ns
    else:
        assert st.slow_sends == 0 and st.slow_send_ns == 0


@pytest.mark.root  # SO_SNDBUFFORCE: room for the 5,000 frames the receiving thread reads late
def test_departures_stay_in_order_when_the_ring_grows_wrapped(tmp_path):
    """The loop's FIFO of departures (4,096 to start with) grows while its head has moved on:
    100 frames leave (delay 200 ms), then 5,000 arrive within the delay, so more than 4,096 wait
    at once in a ring that had wrapped.  All 5,100 arrive, in order, none early, and the log's
    departures are in schedule order.  The delay is the time the feeder has for the 5,000 (30 ms
    on a quiet 2-core VM, through AF_UNIX queues of 10 datagrams the loop empties): 200 ms
    leaves that room for a machine twice as slow or stalled for 100 ms, where 50 ms did not; the
    feeder waits 350 ms so the first 100 have surely left, and the loop runs until 1.5 s."""
    import signal
    import socket
    import struct
    import threading
    import time
    from scapy.all import IP, UDP, Ether, raw
    delay, pause, stop = 0.2, 0.35, 1.5
    feed, b_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a_out, sink = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b_in.setblocking(False)
    a_out.setsockopt(socket.SOL_SOCKET, 32, 64 << 20)  # SO_SNDBUFFORCE
    sink.settimeout(stop)      # the drainer waits through the pause between the two departures
    frame = bytearray(raw(Ether() / IP(id=0) / UDP(sport=1, dport=2)))
    def send(ids):
        for i in ids:
            frame[18:20] = struct.pack("!H", i)
            feed.send(frame)
    def feeder():
        send(range(100))
        time.sleep(pause)
        for first in range(100, 5100, 250):  # 20 bursts, ~1 ms apart: the reader keeps up
            send(range(first, first + 250))
            time.sleep(0.001)
    got = []
    def drainer():
        while len(got) < 5100:
            try:
                got.append(struct.unpack("!H", sink.recv(2048)[18:20])[0])
            except socket.timeout:
                return
    log = linklog.LogWriter(tmp_path / "a-b.frames", {"direction": "a-b"})
    eng = native.Engine([(LinkSpec.parse(delay=f"{delay * 1e3:g}ms"), 3, None)])
    main = threading.get_ident()
    threads = [threading.Thread(target=feeder), threading.Thread(target=drainer),
               threading.Timer(stop, lambda: signal.pthread_kill(main, signal.SIGTERM))]
    ret, io_stats, _ = _run_loop(eng, b_in, a_out, log, threads)
    for s in (feed, b_in, a_out, sink):
        s.close()
    assert ret == 0 and io_stats[0].send_errors == 0
    assert got == list(range(5100))
    rec = linklog.read_log(log.path)[1]
    assert len(rec) == 5100 and (rec["verdict"] == linklog.DELIVERED).all()
    assert (np.diff(rec["t_sched"]) >= 0).all() and (rec["t_sent"] >= rec["t_sched"]).all()
    # frames waiting when each was read: read so far minus sent before; the 101st read came
    # after the first departure, and more than 4,096 waited at once later on
    reads, sent = np.sort(rec["t_read"]), np.sort(rec["t_sent"])
    waiting = np.arange(1, 5101) - np.searchsorted(sent, reads, side="left")
    why = {"waiting_max": int(waiting.max()), "read_5000_ms": (int(reads[-1]) - int(reads[100])) / 1e6,
           "first_sent_minus_101st_read_ms": (int(sent[0]) - int(reads[100])) / 1e6}
    print(why)
    assert sent[0] < reads[100] and waiting.max() > 4096, why


def test_polling_for_a_departure_is_counted_as_idle(tmp_path):
    """A loop polling 0.3 s for one departure 0.2 s away (spin_ns 1 s, a busy share of 100 %)
    spends its CPU polling: poll_idle_ns is nearly all of its thread's CPU time, so
    ``cpu_us_work`` (CPU − polling) is the work on frames, not the loop's own turns between
    polls (each idle iteration counts from its start to the next one's)."""
    cfg = native.RunCfg(10**6, 10**9, 0, 0, None, 0, 100, 0)
    ret, _, run_stats, cpu, _, sink = _loop_on_pairs(tmp_path, LinkSpec.parse(delay="200ms"), [0],
                                                     0.3, cfg=cfg)
    assert ret == 0 and run_stats.send_calls == 1 and sink.recv(2048)
    assert cpu > 0.1e9 and run_stats.poll_idle_ns >= 0.95 * cpu, (run_stats.poll_idle_ns, cpu)
    sink.close()


def _run_loop(eng, b_in, a_out, log, threads, early_ns=0, cfg=None):
    """(return value, IoStats, RunStats) of tb_run from ``b_in`` to ``a_out`` logging to ``log``
    (closed after), while ``threads`` run: one of them ends the loop with SIGTERM; frames leave
    ``early_ns`` before their departure time (``cfg``: a whole RunCfg instead)."""
    import ctypes
    import signal
    io = (native.IoCfg * 1)(native.IoCfg(b_in.fileno(), a_out.fileno(), log._fd))
    io_stats, run_stats = (native.IoStats * 1)(), native.RunStats()
    old = signal.signal(signal.SIGTERM, lambda *a: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        for t in threads:
            t.start()
        ret = native.load().tb_run(eng.ptr, io, cfg or native.RunCfg(10**6, 50_000, early_ns),
                                   io_stats, ctypes.byref(run_stats))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        signal.signal(signal.SIGTERM, old)
        for t in threads:
            t.join()
    log.close()
    return ret, io_stats, run_stats


def _keys(d, prefix=""):
    """Every key path of a nested summary; per-direction/interface names collapsed."""
    out = set()
    for k, v in d.items():
        path = f"{prefix}.{k}"
        if k == "interrupts_on_cpu":  # its rows are whatever interrupted the CPU in that run
            out.add(path)
        elif isinstance(v, dict):
            out |= _keys(v, prefix if prefix.endswith(("directions", "interfaces", "host_interface_drops",
                                                      "busy_ns_by_direction")) else path)
        else:
            out.add(path)
    return out


@pytest.mark.root
@pytest.mark.slow
def test_both_engines_write_the_same_summary_fields(results_root, monkeypatch):
    """Same topology, same traffic, each engine: the summaries have the same fields (analysis and
    the fidelity verdict read either), record the engine, and account for every frame."""
    from testbed.emulator.config import ENGINE_ENV
    from testbed.run.network import Testbed
    summaries = {}
    for engine in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, engine)
        with Testbed("longhaul", backend="userspace", results_root=results_root,
                     overrides={"rate_up": "20mbit", "rate_down": "20mbit", "delay": "5ms",
                                "loss_down": "10%"}) as tb:
            r = tb.run("client", ["ping", "-c", "30", "-i", "0.01", "-q", tb.ip("server")], timeout=30)
            assert "30 packets transmitted" in r.stdout
        summaries[engine] = tb.metadata["backend_summary"]
    py, nat = summaries["python"], summaries["native"]
    assert (py["engine"], nat["engine"]) == ("python", "native")
    assert _keys(py) == _keys(nat)
    for s in (py, nat):
        assert s["accounted"] and s["unintended_drops"] == 0 and s["exit_code"] == 0
        down = s["directions"]["server-client"]
        assert down["frames_in"] >= 30 and down["model"]["frames_in"] == down["frames_in"]
        assert s["host"]["cpus"] >= 1 and len(s["host"]["loadavg_end"]) == 3
        assert s["host"]["preemption"] in (None, *PREEMPTION_MODES) and "rt_cap_percent" in s["host"]


@pytest.mark.root
def test_frame_longer_than_a_ring_slot_is_counted_not_forwarded_short(results_root, monkeypatch):
    """The native loop reads a receive ring sized from the link's MTU: a frame longer than a slot
    (a host whose MTU was raised behind the testbed's back) arrives truncated, and must be an
    unintended drop in the log and the summary, never a short frame on the wire."""
    from testbed.emulator.config import ENGINE_ENV
    from testbed.host.namespace import run_in
    from testbed.run.network import Testbed
    monkeypatch.setenv(ENGINE_ENV, "native")
    with Testbed("longhaul", backend="userspace", results_root=results_root,
                 overrides={"delay": "1ms", "loss_down": "0%"}) as tb:
        run_in(tb.host("server"), ["ip", "link", "set", "dev", "server-eth0", "mtu", "4000"])
        small = tb.run("server", ["ping", "-c", "1", "-W", "2", "-s", "1000", tb.ip("client")], timeout=10)
        big = tb.run("server", ["ping", "-c", "1", "-W", "2", "-s", "3000", tb.ip("client")], timeout=10)
    assert small.returncode == 0 and big.returncode != 0
    s = tb.metadata["backend_summary"]
    down = s["directions"]["server-client"]
    _, rec = linklog.read_log(down["log"])
    cut = rec[rec["verdict"] == linklog.SEND_ERROR]
    assert len(cut) == 1 and cut["length"][0] == 3042   # logged at its real length
    assert s["unintended_drops"] >= 1 and s["accounted"]


@pytest.mark.parametrize("batch", [1, 8])
def test_send_train_paces_the_frames_and_times_each_send(batch):
    """The send floor's train (benchmarks/emulator.py): every frame sent whole, one due per gap,
    ``batch`` to a call (the last call of 100 frames in eights takes the 4 left)."""
    import socket
    import time
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    frame, count, gap = bytes(range(200)), 100, 50_000
    t0 = time.monotonic_ns()
    times = native.send_train(a.fileno(), frame, count, gap, batch)
    elapsed = time.monotonic_ns() - t0
    assert len(times) == count and all(0 < t < elapsed for t in times)
    assert elapsed >= (count - 1) * gap
    if batch > 1:  # a call's time shared by its frames
        assert len(set(times[:8])) == 1 and len(set(times[96:])) == 1
    b.setblocking(False)
    got = [b.recv(1000) for _ in range(count)]
    assert got == [frame] * count
    with pytest.raises(BlockingIOError):
        b.recv(1000)
    b.close()
    with pytest.raises(OSError):  # a batch the loop never uses
        native.send_train(a.fileno(), frame, 1, 0, 9)
    with pytest.raises(OSError):  # the peer is gone: the send fails, reported with its errno
        native.send_train(a.fileno(), frame, 1, 0)
    a.close()


@pytest.mark.root
def test_send_floor_rows_reach_the_receiver_or_nobody_as_labelled():
    """benchmarks/emulator.py's send floor: the frames of the receiver rows arrive in its UDP
    socket (a frame the peer's stack drops would measure a cheaper path), those addressed to
    no one do not; its namespaces and processes are gone afterwards."""
    import importlib.util
    import subprocess
    from conftest import REPO
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the send floor needs a CPU for the sender and another for the receiver")
    spec = importlib.util.spec_from_file_location("bench_emulator", REPO / "benchmarks" / "emulator.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.run_send_floor(count=500)  # below the default netdev_max_backlog (1000)
    trains = [(1514, 1), (1514, 1), (1514, 8), (66, 1), (66, 8)]
    assert [(r["receiver"].split(",")[0], r["frame"], r["batch"]) for r in rows] == [
        (receiver, frame, batch)
        for receiver in ("UDP socket", "UDP socket", "none (dropped on arrival)", "none")
        for frame, batch in trains]
    for r in rows:
        assert r["received"] == (0 if r["receiver"].startswith("none") else 500), r
        assert 0 < r["send_us_p50"] <= r["send_us_p99"] and 0 <= r["slow_calls"] <= 500 / r["batch"]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"tbtest{os.getpid() % 10000}f" not in left


def test_hold_stats_tell_a_held_loop_from_a_slow_one():
    """benchmarks/emulator.py's hold_stats: frames due every 12 µs.  A loop held 100 µs before
    frame 10 that then sends every 2 µs makes one hold and late frames that all follow it; a
    loop that sends every 20 µs falls behind with no hold at all (its late frames: 0 % held).
    The limit is a parameter: at 1 ms the 100 µs hold is none, a 2 ms one is."""
    import importlib.util
    from conftest import REPO
    spec = importlib.util.spec_from_file_location("bench_emulator", REPO / "benchmarks" / "emulator.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    due = np.arange(40) * 12_000
    sent = due.copy()
    sent[10] = due[10] + 100_000
    for i in range(11, 40):
        sent[i] = max(due[i], sent[i - 1] + 2_000)
    late = int((sent - due > 50_000).sum())
    assert late > 1 and bench.hold_stats(sent, due) == {"holds50": 1, "late50": late, "late50_held_pct": 100.0}
    slow = np.arange(40) * 20_000
    late = int((slow - due > 50_000).sum())
    assert late > 1 and bench.hold_stats(slow, due) == {"holds50": 0, "late50": late, "late50_held_pct": 0.0}
    assert bench.hold_stats(due, due)["late50_held_pct"] is None
    assert bench.hold_stats(sent, due, 1000.0) == {"holds1ms": 0, "late1ms": 0, "late1ms_held_pct": None}
    due = np.arange(400) * 12_000  # held 2 ms: a hold and late frames at the 1 ms limit too
    sent = due.copy()
    sent[10] = due[10] + 2_000_000
    for i in range(11, 400):
        sent[i] = max(due[i], sent[i - 1] + 2_000)
    late = int((sent - due > 1_000_000).sum())
    assert late > 1 and bench.hold_stats(sent, due, 1000.0) == {"holds1ms": 1, "late1ms": late,
                                                                "late1ms_held_pct": 100.0}


def test_busy_policy_demotes_only_a_real_time_loop_with_a_cpu_of_its_own():
    from testbed.emulator.forwarder import BUSY_SHARE_PCT, RT_MARGIN_PCT, busy_policy
    assert busy_policy(None, True, 95.0) == (BUSY_SHARE_PCT, False)  # shares a CPU: sleeps
    assert busy_policy(1, True, 95.0) == (95 - RT_MARGIN_PCT, True)
    assert busy_policy(1, True, None) == (100, False)  # no RT throttling to stay under
    assert busy_policy(1, False, 95.0) == (100, False)  # not real-time: never throttled


def test_stall_kinds_tell_held_back_from_preempted_while_demoted():
    from testbed.emulator.forwarder import stall_kinds
    listed = np.array([[0, 1000, 900, 0],    # waited in the run queue, real-time: held back
                       [0, 1000, 900, 1],    # waited, demoted: another task ran
                       [0, 1000, 10, 0],     # no wait: the vCPU did not run
                       [0, 1000, 10, 1],
                       [0, 1000, -1, 0]])    # schedstat unreadable
    held, demoted = stall_kinds(listed)
    assert list(held) == [True, False, False, False, False]
    assert list(demoted) == [False, True, False, False, False]


def test_native_loop_logs_many_chunks_complete_and_in_order(tmp_path):
    """40,000 frames (five log chunks and more) through tb_run: the writer thread writes every
    record once, in the loop's order, before tb_run returns."""
    import signal
    import socket
    import threading
    from scapy.all import IP, UDP, Ether, raw
    n = 40_000
    feed, b_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a_out, sink = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b_in.setblocking(False)
    log = linklog.LogWriter(tmp_path / "a-b.frames", {"direction": "a-b"})
    eng = native.Engine([(LinkSpec.parse(), 3, None)])
    main = threading.get_ident()
    got = []

    def feeder():
        for i in range(n):
            feed.send(raw(Ether() / IP(id=i % 65536) / UDP(sport=1, dport=2)))

    def drain():
        sink.settimeout(2)
        try:
            while len(got) < n:
                got.append(sink.recv(2048))
        except socket.timeout:
            pass
        signal.pthread_kill(main, signal.SIGTERM)

    ret, io_stats, run_stats = _run_loop(eng, b_in, a_out, log,
                                         [threading.Thread(target=f) for f in (feeder, drain)])
    assert ret == 0 and run_stats.log_waits == 0
    _, rec = linklog.read_log(log.path)
    assert len(rec) == n and io_stats[0].records == n
    sent = rec[rec["verdict"] == linklog.DELIVERED]
    assert len(sent) + io_stats[0].send_errors == n
    assert (np.diff(sent["t_sent"]) >= 0).all()  # one record per send, in the order sent
    assert list(sent["ip_id"]) == [int.from_bytes(f[18:20], "big") for f in got][:len(sent)]
    for s in (feed, b_in, a_out, sink):
        s.close()


def test_after_stall_attributes_lateness_during_and_just_after_a_stall():
    from testbed.emulator.forwarder import after_stall
    stalls = np.array([[1000, 3000], [10_000, 10_500]])
    t_sched = np.array([500, 1500, 4900, 5100, 9000, 10_900, 11_100])
    t_sent = np.array([3100, 3100, 5200, 5300, 10_600, 10_900, 11_200])
    # due before the stall and sent after it; due in it; due within its length after its end;
    # due later than that; due before the second stall; within its reach; beyond it
    assert list(after_stall(stalls, t_sched, t_sent)) == [True, True, True, False, True, True, False]
    assert not after_stall(np.zeros((0, 2), dtype=np.int64), t_sched, t_sent).any()


@pytest.mark.root
def test_stopping_the_forwarder_is_reported_as_stalls_not_overload(results_root, monkeypatch):
    """SIGSTOP takes the CPU from the native loop as a hypervisor would: each stop is a stall, and
    the frames it made late are attributed to it, not to an engine too slow for the traffic;
    the frames it left due together are sent in batches."""
    import signal
    import time
    from testbed.emulator.config import ENGINE_ENV
    from testbed.emulator.forwarder import LAG_WARN_US, STALL_NS
    from testbed.run.network import Testbed
    monkeypatch.setenv(ENGINE_ENV, "native")
    with Testbed("longhaul", backend="userspace", results_root=results_root,
                 overrides={"delay": "1ms", "loss_down": "0%"}) as tb:
        ping = tb.popen("client", ["ping", "-c", "150", "-i", "0.002", "-q", tb.ip("server")],
                        name="ping", text=True)
        fwd = tb.backend.proc.pid
        for _ in range(3):
            time.sleep(0.05)
            os.kill(fwd, signal.SIGSTOP)
            time.sleep(0.03)
            os.kill(fwd, signal.SIGCONT)
        ping.communicate(timeout=30)
    s = tb.metadata["backend_summary"]
    assert 3 <= s["stalls"]["count"] and s["stalls"]["max_ms"] >= 25
    assert s["stalls"]["threshold_us"] == STALL_NS / 1e3
    assert s["totals"]["late"] > 0 and s["totals"]["late_after_stall"] == s["totals"]["late"]
    assert not any("could not keep up" in w for w in s["engine_warnings"])
    assert any("stopped the emulator" in w for w in s["engine_warnings"])
    # pings that arrived during a 30 ms stop waited that long in the socket: the stop's doing
    assert s["read_lag_us"]["max"] > LAG_WARN_US and not s["strict_overload"]
    # whatever the verdict, it blames the machine, not the engine
    assert s["fidelity"]["cause"] in (None, "machine")
    assert not any("could not keep up" in w for w in s["warnings"])
    assert not any("in the socket" in w for w in s["engine_warnings"])
    # the frames a stop left due together went out in fewer calls than frames (sendmmsg batches)
    assert s["send_calls"] < s["totals"]["delivered"]
    assert 0 < s["send_max_us"] and 0 <= s["slow_sends"] <= s["send_calls"]


@pytest.mark.root
def test_busy_native_loop_demotes_itself_instead_of_being_throttled(results_root, monkeypatch):
    """A link kept busy keeps the native loop polling all the time: with a CPU of its own and RT
    throttling on this kernel, it must demote itself to SCHED_OTHER before the kernel throttles
    it (a throttled loop is held back for the rest of the period: ~50 ms a second), and log
    every frame in order through its writer thread.  iperf3 offers 1 Gbit/s to a 500 Mbit/s
    link with a 2,000-frame queue, so departures follow each other every 24 µs whatever rate the
    sender reaches on the machine (a sender of ~710 Mbit/s into a 1 Gbit/s link left the loop
    gaps to sleep in, and it never needed to demote)."""
    from testbed.emulator.config import ENGINE_ENV
    from testbed.emulator.forwarder import RT_MARGIN_PCT, kernel_scheduling
    from testbed.run.network import Testbed
    cap = kernel_scheduling()["rt_cap_percent"]
    if cap is None or (os.cpu_count() or 1) < 2:
        pytest.skip(f"needs RT throttling (cap {cap}) and 2 CPUs or more ({os.cpu_count()})")
    monkeypatch.setenv(ENGINE_ENV, "native")
    with Testbed("longhaul", backend="userspace", results_root=results_root,
                 overrides={"rate_down": "500mbit", "delay": "1ms", "loss_down": "0%",
                            "queue": "2000"}) as tb:
        tb.popen("client", ["iperf3", "-s", "-1"], name="iperf3-server")
        import time
        time.sleep(0.5)
        r = tb.run("server", ["iperf3", "-c", tb.ip("client"), "-u", "-b", "1000M", "-l", "1472",
                              "-t", "3"], timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
    s = tb.metadata["backend_summary"]
    assert (s["busy_share_pct"], s["demote"]) == (int(cap) - RT_MARGIN_PCT, True)
    assert s["rt_demotions"] >= 1 and s["demoted_s"] > 0 and s["log_waits"] == 0
    assert s["stalls"]["held_back_max_ms"] < 20, s["stalls"]  # no RT throttling
    down = s["directions"]["server-client"]
    assert s["accounted"] and down["frames_in"] > 100_000
    _, rec = linklog.read_log(down["log"])
    sent = rec[rec["verdict"] == linklog.DELIVERED]
    assert (np.diff(sent["t_sent"]) >= 0).all() and (np.diff(sent["t_sched"]) >= 0).all()


def test_engine_selection(monkeypatch):
    """Default native where built, else python; $TESTBED_ENGINE (set by --engine) chooses; an
    unknown engine is a clear error; the forwarder config carries the engine."""
    import argparse
    from pathlib import Path
    from testbed.backends.userspace import UserspaceBackend, default_engine
    from testbed.emulator.config import ENGINE_ENV, EngineOption
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    assert default_engine() == "native"
    assert UserspaceBackend().spin_ns > 0 and UserspaceBackend(engine="python").spin_ns == 0
    p = argparse.ArgumentParser()
    p.add_argument("--engine", choices=("native", "python"), action=EngineOption)
    assert p.parse_args(["--engine", "python"]).engine == "python"
    assert default_engine() == "python" and UserspaceBackend().engine == "python"
    monkeypatch.setenv(ENGINE_ENV, "bogus")
    with pytest.raises(ValueError, match="unknown; allowed: native, python"):
        UserspaceBackend()
    with pytest.raises(ValueError, match="unknown; allowed"):
        ForwarderConfig((DirectionConfig("a-b", "x", "y", LinkSpec(), 1),), "/tmp", engine="bogus")
    monkeypatch.delenv(ENGINE_ENV)
    monkeypatch.setattr(native, "LIB_PATH", Path("/nonexistent/libtbemu.so"))
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_error", None)
    assert default_engine() == "python"
    with pytest.raises(RuntimeError, match="native.build"):
        UserspaceBackend(engine="native")
