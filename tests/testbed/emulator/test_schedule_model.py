"""The scheduled direction in virtual time: steps, outages, events, traces, frame- and byte-tied
moments and the change records, each against numbers computed here from the rules."""
import random
import struct
from collections import Counter

from testbed.emulator.direction import DELIVER, DROP_EVENT, DROP_LOSS, DROP_OUTAGE, DirectionModel
from testbed.emulator.schedule_model import ScheduledDirection, make_direction
from testbed.spec.linkspec import LinkSpec
from testbed.spec.schedule import OPPORTUNITY_BYTES, Event, Schedule, Trace

S = 1_000_000_000
FULL = 1514


def _with(spec: LinkSpec, **items) -> LinkSpec:
    return spec.replace(schedule=Schedule(**items))


def _run(model, arrivals, origin=0):
    model.set_origin(origin)
    return [model.arrive(t, n) for t, n in arrivals]


def test_rate_step_changes_spacing_exactly_at_its_moment():
    spec = LinkSpec.parse(rate="6mbit", queue=5000).with_override("rate", "10mbit@1s")
    out = _run(make_direction(spec, 1), [(0, FULL)] * 2000)
    finish = [t for _, t in out]
    old = FULL * 8 * S / 6e6
    for prev, cur in zip(finish, finish[1:]):
        if prev >= S:        # started at or after the step: the new rate, exactly
            assert cur - prev == FULL * 8 * S // 10_000_000
        else:                # started before: the whole frame at the old rate
            assert abs(cur - prev - old) < 1
    assert any(p < S <= c for p, c in zip(finish, finish[1:]))    # one frame straddles the step
    model = make_direction(spec, 1)
    _run(model, [(0, FULL)], origin=5)
    assert model.drain_changes(S) == []                             # not due before origin + 1 s
    [rec] = model.drain_changes(S + 5)
    assert (rec.kind, rec.at, rec.configured_ns, rec.actual_ns, rec.what) == (
        "step", "1.0s", S + 5, S + 5, "rate=10mbit")


def test_outage_drops_exactly_the_frames_that_arrived_in_it():
    arrivals = [(i * 1_000_000, 1000) for i in range(5000)]       # one frame per ms for 5 s
    spec = LinkSpec.parse(rate="100mbit", delay="10ms").with_override("down", "1s+2s")
    model = make_direction(spec, 1)
    out = _run(model, arrivals)
    for (t, _), (verdict, when) in zip(arrivals, out):
        if S <= t < 3 * S:
            assert (verdict, when) == (DROP_OUTAGE, t)
        else:
            assert verdict == DELIVER and when == t + 80_000 + 10_000_000
    assert model.schedule_stats.dropped_outage == 2000
    recs = model.drain_changes(4 * S)
    assert [(r.kind, r.configured_ns, r.actual_ns, r.frames_before) for r in recs] == [
        ("down", S, S, 1000), ("up", 3 * S, 3 * S, 3000)]


def test_outage_hold_releases_at_up_in_order():
    arrivals = [(i * 1_000_000, 1000) for i in range(5000)]
    spec = LinkSpec.parse(rate="100mbit", queue=5000).with_override("down", "1s+2s,hold")
    out = _run(make_direction(spec, 1), arrivals)
    held = [when for (t, _), (v, when) in zip(arrivals, out) if S <= t < 3 * S]
    assert all(v == DELIVER for v, _ in out)
    assert held == [3 * S + (k + 1) * 80_000 for k in range(2000)]    # back to back from up


def test_trace_delivers_exactly_its_opportunities_looping():
    trace = Trace((1, 1, 2, 4, 4, 4, 5))
    spec = _with(LinkSpec.parse(), trace=trace)
    out = _run(make_direction(spec, 1), [(0, FULL)] * 21)            # three loops, full frames
    per_ms = Counter(t // 1_000_000 for _, t in out)
    want = Counter(loop * 5 + m for loop in range(3) for m in trace.ms)
    assert per_ms == want


def test_trace_bytes_span_and_share_opportunities_as_mahimahi():
    trace = Trace(tuple(range(1, 101)))
    spec = _with(LinkSpec.parse(), trace=trace)
    sizes = [random.Random(5).randrange(60, 1515) for _ in range(300)]
    out = _run(make_direction(spec, 1), [(0, n) for n in sizes])
    need, want = 0, []
    for n in sizes:       # a backlogged queue: frame i ends in opportunity ceil(cumulative / 1504)
        need += n - 14 + 4
        want.append(-(-need // OPPORTUNITY_BYTES) * 1_000_000)
    assert [t for _, t in out] == want


def test_trace_idle_frame_waits_for_a_later_opportunity():
    spec = _with(LinkSpec.parse(), trace=Trace((10, 20)))
    model = make_direction(spec, 1)
    model.set_origin(0)
    assert model.arrive(10_000_000, 100)[1] == 20_000_000      # at an opportunity: the next one
    assert model.arrive(25_000_000, 100)[1] == 30_000_000      # leftover of 20 ms is gone
    assert model.arrive(29_999_999, 100)[1] == 30_000_000      # shares the one at 30 ms


def _traffic(n=3000, seed=2):
    rng = random.Random(seed)
    t, out = 0, []
    for _ in range(n):
        t += rng.randrange(0, 400_000)
        out.append((t, rng.choice([66, 1514, 1514, 600])))
    return out


def test_event_delay_moves_one_frame_only():
    base = LinkSpec.parse(rate="20mbit", delay="5ms", jitter="1ms", loss="2%", queue=20)
    arrivals = _traffic()
    ref = _run(make_direction(base, 7), arrivals)
    ev = _run(make_direction(_with(base, events=(Event(frame=2, min_bytes=1000, delay=0.045),)), 7), arrivals)
    k = [i for i, (_, n) in enumerate(arrivals) if n >= 1000][1]     # the 2nd frame of >= 1000 B
    assert ref[k][0] == DELIVER
    for i, (a, b) in enumerate(zip(ref, ev)):
        assert b == ((a[0], a[1] + 45_000_000) if i == k else a)


def test_event_burst_drop_keeps_the_rest():
    base = LinkSpec.parse(rate="20mbit", loss="5%")
    arrivals = _traffic()
    ref = _run(make_direction(base, 3), arrivals)
    ev = _run(make_direction(_with(base, events=(Event(frame=5, count=3, drop=True),)), 3), arrivals)
    for i, (a, b) in enumerate(zip(ref, ev)):
        assert b == ((DROP_EVENT, a[1]) if 4 <= i < 7 else a)
    assert any(v == DROP_LOSS for v, _ in ev)


def test_frame_and_byte_tied_moments():
    spaced = [(i * 10_000_000, 1500) for i in range(40)]         # 10 ms apart: never queued
    spec = LinkSpec.parse(rate="10mbit").with_override("rate", "5mbit@10frames")
    model = make_direction(spec, 1)
    out = _run(model, spaced)
    took = [t - a for (a, _), (_, t) in zip(spaced, out)]
    assert took == [1_200_000] * 10 + [2_400_000] * 30
    rec = model.drain_changes()
    assert [(r.kind, r.at, r.configured_ns, r.actual_ns, r.frames_before) for r in rec] == [
        ("step", "10frames", None, 100_000_000, 10)]
    spec = LinkSpec.parse(delay="1ms").with_override("delay", "7ms@15000B").with_override("down", "20frames+50ms")
    out = _run(make_direction(spec, 1), spaced)
    assert [v for v, _ in out] == [DELIVER] * 20 + [DROP_OUTAGE] * 5 + [DELIVER] * 15
    assert [t - a for (a, _), (v, t) in zip(spaced, out) if v == DELIVER] == [1_000_000] * 10 + [7_000_000] * 25


def test_a_constant_engine_refuses_a_schedule():
    spec = LinkSpec.parse(rate="10mbit").with_override("down", "1s+1s")
    try:
        DirectionModel(spec, 1, name="a-b")
    except ValueError as exc:
        assert "'a-b' has a schedule" in str(exc)
    else:
        raise AssertionError("a schedule was silently ignored")


def test_schedule_not_yet_due_is_the_constant_link():
    base = LinkSpec.parse(rate="20mbit", delay="5ms", jitter="2ms", loss="ge:2%,30%,50%", queue=15)
    arrivals = _traffic(5000)
    static = DirectionModel(base, 11)
    ref = [static.arrive(t, n) for t, n in arrivals]
    late = base.with_override("rate", "1mbit@1000s").with_override("down", "2000s+1s")
    model = make_direction(late, 11)
    assert isinstance(model, ScheduledDirection)
    assert _run(model, arrivals) == ref
    assert model.stats == static.stats


def test_delay_step_by_departure_bunches_without_reordering():
    spaced = [(i * 1_000_000, 100) for i in range(2000)]
    spec = LinkSpec.parse(rate="100mbit", delay="50ms").with_override("delay", "10ms@1s")
    out = _run(make_direction(spec, 1), spaced)
    depart = [a + 8_000 for a, _ in spaced]
    times = [t for _, t in out]
    assert times == sorted(times)                                    # FIFO: never reordered
    last_old = max(t for d, t in zip(depart, times) if d < S)
    for d, t in zip(depart, times):
        want = d + 50_000_000 if d < S else max(d + 10_000_000, last_old)
        assert t == want


def test_hold_on_an_unshaped_link_and_on_a_trace():
    arrivals = [(i * 1_000_000, FULL) for i in range(100)]
    spec = LinkSpec.parse().with_override("down", "10ms+20ms,hold")
    out = _run(make_direction(spec, 1), arrivals)
    assert [t for (a, _), (_, t) in zip(arrivals, out) if 10_000_000 <= a < 30_000_000] == [30_000_000] * 20
    traced = _with(LinkSpec.parse(), trace=Trace((1,)), outages=spec.schedule.outages)
    out = _run(make_direction(traced, 1), arrivals)
    held = [t for (a, _), (_, t) in zip(arrivals, out) if 10_000_000 <= a < 30_000_000]
    assert held == [(31 + k) * 1_000_000 for k in range(20)]     # one opportunity per ms from up


def _tcp(seq: int, payload: int, sport: int = 5001) -> bytes:
    """An Ethernet IPv4/TCP frame 10.0.0.1:sport -> 10.0.0.2:80 with ``payload`` bytes from ``seq``."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + payload, 0, 0x4000, 64, 6, 0, bytes((10, 0, 0, 1)),
                     bytes((10, 0, 0, 2)))
    tcp = struct.pack("!HHIIBBHHH", sport, 80, seq % (1 << 32), 0, 0x50, 0x18, 65535, 0, 0)
    return bytes(12) + b"\x08\x00" + ip + tcp + bytes(payload)


def test_event_copies_until_drops_the_lost_bytes_copies_until_its_moment():
    """Frame 2 of >= 1000 B (seq 1000..2000) dropped with copies_until 1 s (origin 0): until
    then a frame of the same flow overlapping its bytes is dropped too, whatever its size; an
    adjacent range, another flow, a frame given without its bytes, and copies at 1 s are not."""
    spec = _with(LinkSpec.parse(delay="10ms"), events=(Event(frame=2, min_bytes=1000, drop=True, copies_until=1.0),))
    ms = 1_000_000
    frames = [(0, _tcp(0, 1000), DELIVER), (ms, _tcp(1000, 1000), DROP_EVENT),
              (2 * ms, _tcp(2000, 1000), DELIVER),
              (300 * ms, _tcp(1000, 1000), DROP_EVENT),           # the retransmission
              (310 * ms, _tcp(1900, 500), DROP_EVENT),            # overlaps its last 100 B
              (320 * ms, _tcp(1500, 100), DROP_EVENT),            # inside it, below min_bytes
              (330 * ms, _tcp(0, 1000), DELIVER),                 # ends where it starts
              (340 * ms, _tcp(1000, 1000, sport=5002), DELIVER),  # another flow, same seq
              (999 * ms, _tcp(1000, 1000), DROP_EVENT),
              (S, _tcp(1000, 1000), DELIVER)]                     # at the moment: repaired
    model = make_direction(spec, 1)
    model.set_origin(0)
    got = [model.arrive(t, len(f), f)[0] for t, f, _ in frames]
    assert got == [v for _, _, v in frames]
    assert model.arrive(S - 1, 1054)[0] == DELIVER           # no bytes given: never a copy
    plain = make_direction(_with(LinkSpec.parse(delay="10ms"), events=(Event(frame=2, min_bytes=1000, drop=True),)), 1)
    plain.set_origin(0)
    assert [plain.arrive(t, len(f), f)[0] for t, f, _ in frames].count(DROP_EVENT) == 1


def test_event_copies_until_across_the_sequence_wrap_and_for_non_tcp():
    spec = _with(LinkSpec.parse(), events=(Event(frame=1, drop=True, copies_until=1.0),))
    model = make_direction(spec, 1)
    model.set_origin(0)
    assert model.arrive(0, 1054, _tcp(-500, 1000))[0] == DROP_EVENT      # seq 2^32-500 .. 500
    assert model.arrive(1, 154, _tcp(100, 100))[0] == DROP_EVENT
    assert model.arrive(2, 154, _tcp(500, 100))[0] == DELIVER
    udp = bytes(12) + b"\x08\x00" + bytes((0x45,)) + bytes(8) + b"\x11" + bytes(100)
    quic = make_direction(spec, 1)     # not TCP: only the selector matches, copies are delivered
    quic.set_origin(0)
    assert [quic.arrive(t, len(udp), udp)[0] for t in (0, 1, 2)] == [DROP_EVENT, DELIVER, DELIVER]
