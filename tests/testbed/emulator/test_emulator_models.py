"""Virtual-time unit tests of the emulator's sans-I/O core (no root, no clock, fast)."""
import math

import pytest

from testbed.emulator.airtime import AirMedium, AirtimeSpec
from testbed.emulator.direction import DELIVER, DROP_LOSS, DROP_QUEUE, DirectionModel
from testbed.emulator.serializer import Serializer
from testbed.spec.linkspec import Bernoulli, DropList, GilbertElliott, LinkSpec

MS = 1_000_000
US = 1_000
FULL = 1514          # full-size Ethernet frame (1500 B MTU + 14 B header)


def run(model, arrivals):
    """Feed (now_ns, frame_len) pairs; return the list of (verdict, t_ns)."""
    return [model.arrive(t, n) for t, n in arrivals]


# --- queue -------------------------------------------------------------------------------------

def test_packet_limit_overflows_exactly_when_full():
    # 1000 B at 1 Mbit/s = 8 ms per frame; 3 frames fit (the one being sent included).
    m = DirectionModel(LinkSpec(rate=1e6, queue_packets=3), seed=1)
    got = run(m, [(0, 1000)] * 5)
    assert [v for v, _ in got] == [DELIVER] * 3 + [DROP_QUEUE] * 2
    assert [t for _, t in got] == [8 * MS, 16 * MS, 24 * MS, 0, 0]
    assert m.arrive(8 * MS - 1, 1000) == (DROP_QUEUE, 8 * MS - 1)   # frame 0 still in the queue
    assert m.arrive(8 * MS, 1000) == (DELIVER, 32 * MS)             # frame 0 has just left
    assert m.arrive(8 * MS, 1000)[0] == DROP_QUEUE
    s = m.stats
    assert (s.queue_max_packets, s.queue_max_bytes) == (3, 3000)
    assert (s.frames_in, s.delivered, s.dropped_queue, s.dropped_loss) == (8, 4, 4, 0)


def test_byte_limit_overflows_exactly_when_full():
    m = DirectionModel(LinkSpec(rate=1e6, queue_bytes=2 * FULL + 72), seed=1)
    assert m.arrive(0, FULL)[0] == DELIVER
    assert m.arrive(0, FULL)[0] == DELIVER
    assert m.arrive(0, 73)[0] == DROP_QUEUE        # 3028 + 73 > 3100
    assert m.arrive(0, 72)[0] == DELIVER           # 3028 + 72 = 3100 fits
    assert m.arrive(0, 60)[0] == DROP_QUEUE
    assert m.backlog == (3, 3100)
    assert m.stats.queue_max_bytes == 3100


def test_queue_holds_frames_until_serialized_not_during_propagation():
    # 100 ms of delay does not occupy the bottleneck buffer.
    m = DirectionModel(LinkSpec(rate=1e6, delay=0.1, queue_packets=1), seed=1)
    assert m.arrive(0, 1000) == (DELIVER, 108 * MS)
    assert m.arrive(8 * MS, 1000) == (DELIVER, 116 * MS)


# --- serializer --------------------------------------------------------------------------------

@pytest.mark.parametrize("rate,overhead", [(333e6, 0), (333e6, 24), (1e9, 0), (1e6 / 3, 0)])
def test_serializer_back_to_back_spacing_is_exact(rate, overhead):
    spec = LinkSpec(rate=rate, delay=0.1, overhead=overhead, queue_packets=100_000)
    m = DirectionModel(spec, seed=1)
    den = 3 if rate == 1e6 / 3 else 1
    num = 10**6 if den == 3 else int(rate)
    for n, (verdict, t) in enumerate(run(m, [(0, FULL)] * 20_000)):
        assert verdict == DELIVER
        exact_num = (n + 1) * (FULL + overhead) * 8 * 10**9 * den   # exact finish · num, in ns
        assert t == 100 * MS + exact_num // num


def test_serializer_restarts_after_idle_and_never_runs_early():
    s = Serializer(333e6)
    first = s.send(0, FULL)
    assert first == FULL * 8 * 10**9 // 333_000_000
    assert s.send(10 * MS, FULL) == 10 * MS + first          # idle line: starts at arrival
    assert s.send(10 * MS + 1, FULL) == 10 * MS + (2 * FULL * 8 * 10**9) // 333_000_000


# --- random loss -------------------------------------------------------------------------------

def verdicts(spec, n, seed=7, size=100):
    m = DirectionModel(spec, seed=seed)
    return [m.arrive(i * US, size)[0] for i in range(n)], m


def test_bernoulli_rate_within_binomial_bound_and_seeded():
    n, p = 100_000, 0.14
    got, _ = verdicts(LinkSpec(loss=Bernoulli(p)), n)
    lost = got.count(DROP_LOSS)
    assert abs(lost - n * p) < 4.5 * math.sqrt(n * p * (1 - p))
    assert verdicts(LinkSpec(loss=Bernoulli(p)), 2000)[0] == verdicts(LinkSpec(loss=Bernoulli(p)), 2000)[0]
    assert verdicts(LinkSpec(loss=Bernoulli(p)), 2000)[0] != verdicts(LinkSpec(loss=Bernoulli(p)), 2000, seed=8)[0]


def _runs(flags):
    lengths, run_len = [], 0
    for lost in flags:
        if lost:
            run_len += 1
        elif run_len:
            lengths.append(run_len)
            run_len = 0
    return lengths


@pytest.mark.parametrize("ge", [GilbertElliott(0.01, 0.1), GilbertElliott(0.02, 0.3, 0.7, 0.01)])
def test_gilbert_elliott_stationary_loss_rate(ge):
    n = 200_000
    got, _ = verdicts(LinkSpec(loss=ge), n)
    rate = got.count(DROP_LOSS) / n
    pi_bad = ge.p / (ge.p + ge.r)
    expected = pi_bad * ge.loss_bad + (1 - pi_bad) * ge.loss_good
    # asymptotic variance of the mean: Markov-modulated part (lag-k correlation λ^k) + the
    # per-frame Bernoulli part
    lam = 1 - ge.p - ge.r
    var = ((ge.loss_bad - ge.loss_good) ** 2 * pi_bad * (1 - pi_bad) * (1 + lam) / (1 - lam)
           + expected * (1 - expected)) / n
    assert abs(rate - expected) < 5 * math.sqrt(var)


def test_gilbert_elliott_bursts_have_mean_length_1_over_r():
    ge = GilbertElliott(0.01, 0.1)             # simple Gilbert: bad state loses everything
    got, _ = verdicts(LinkSpec(loss=ge), 200_000)
    runs = _runs(v == DROP_LOSS for v in got)
    mean_sd = math.sqrt((1 - ge.r) / ge.r**2) / math.sqrt(len(runs))
    assert abs(sum(runs) / len(runs) - 1 / ge.r) < 5 * mean_sd
    # Bernoulli at the same mean loss has far shorter runs (1/(1-p) ≈ 1.1)
    bern, _ = verdicts(LinkSpec(loss=Bernoulli(ge.mean_loss)), 200_000)
    assert sum(_runs(v == DROP_LOSS for v in bern)) / len(_runs(v == DROP_LOSS for v in bern)) < 1.2


def test_gilbert_elliott_decides_loss_by_the_state_a_frame_started_in():
    # netem's loss_gilb_ell(): transition first, loss with the old state's probability.
    got, _ = verdicts(LinkSpec(loss=GilbertElliott(p=1.0, r=0.0)), 10)
    assert got == [DELIVER] + [DROP_LOSS] * 9


def test_droplist_is_exact_and_counts_only_frames_reaching_the_loss_stage():
    got, _ = verdicts(LinkSpec(loss=DropList(frozenset({0, 3, 4, 9}))), 12)
    assert [i for i, v in enumerate(got) if v == DROP_LOSS] == [0, 3, 4, 9]
    m = DirectionModel(LinkSpec(rate=1e6, queue_packets=1, loss=DropList(frozenset({1}))), seed=1)
    assert run(m, [(0, 1000), (0, 1000), (8 * MS, 1000), (16 * MS, 1000)]) == [
        (DELIVER, 8 * MS), (DROP_QUEUE, 0), (DROP_LOSS, 16 * MS), (DELIVER, 24 * MS)]


def test_lost_frame_still_used_its_sending_time():
    spec = LinkSpec(rate=1e6, delay=0.05, queue_packets=10, loss=DropList(frozenset({0})))
    m = DirectionModel(spec, seed=1)
    assert run(m, [(0, 1000), (0, 1000)]) == [(DROP_LOSS, 8 * MS), (DELIVER, 16 * MS + 50 * MS)]


# --- propagation and jitter --------------------------------------------------------------------

def _jittered(reorder, seed=3, n=20_000):
    spec = LinkSpec(delay=0.01, jitter=0.005, reorder=reorder)
    m = DirectionModel(spec, seed=seed)
    arrivals = [i * 100 * US for i in range(n)]
    return arrivals, [m.arrive(t, 100)[1] for t in arrivals]


def test_jitter_never_reorders_unless_allowed():
    arrivals, out = _jittered(reorder=False)
    assert all(a <= b for a, b in zip(out, out[1:]))
    assert all(a + 10 * MS <= t <= a + 15 * MS for a, t in zip(arrivals, out))
    assert len({t - a for a, t in zip(arrivals, out)}) > 1000      # the jitter is really applied
    arrivals, out = _jittered(reorder=True)
    extra = [t - a - 10 * MS for a, t in zip(arrivals, out)]
    assert min(extra) >= 0 and max(extra) <= 5 * MS
    assert abs(sum(extra) / len(extra) - 2.5 * MS) < 5 * (5 * MS / math.sqrt(12)) / math.sqrt(len(extra))
    assert sum(a > b for a, b in zip(out, out[1:])) > 1000         # and it does reorder


def test_jitter_bounds_are_inclusive():
    m = DirectionModel(LinkSpec(jitter=1e-9, reorder=True), seed=1)
    assert {m.arrive(i, 100)[1] - i for i in range(200)} == {0, 1}


def test_jitter_does_not_change_the_loss_pattern():
    base = verdicts(LinkSpec(loss=Bernoulli(0.2)), 5000)[0]
    assert verdicts(LinkSpec(loss=Bernoulli(0.2), jitter=0.003), 5000)[0] == base


def test_unshaped_direction_has_no_queue_and_no_serialization():
    m = DirectionModel(LinkSpec(delay=0.02, queue_packets=1), seed=1)
    assert run(m, [(0, FULL)] * 3) == [(DELIVER, 20 * MS)] * 3
    assert m.backlog == (0, 0)


# --- shared air (CHAPTER12.md C10) -------------------------------------------------------------

def test_c10_exchange_durations():
    air = AirtimeSpec()
    assert air.ppdu_ns(1228 + 36, 54e6) == 208 * US
    assert air.ppdu_ns(14, 6e6) == 44 * US
    assert air.exchange_ns(1228) == 302 * US
    assert air.exchange_time(1228) == pytest.approx(302e-6, abs=1e-12)
    # C10's 134 µs feedback exchange has a 40 µs PPDU, i.e. a 128 B MAC frame (92 B IP packet);
    # a 128 B *IP* packet is a 164 B MAC frame: 48 µs PPDU, 142 µs exchange.
    assert air.ppdu_ns(128, 54e6) == 40 * US
    assert air.exchange_ns(128 - 36) == 134 * US
    assert air.exchange_ns(128) == 142 * US


def test_c10_image_transfer_airtime_through_the_model():
    medium = AirMedium(AirtimeSpec(), seed=1)
    up = DirectionModel(LinkSpec(), seed=1, medium=medium, name="up")
    down = DirectionModel(LinkSpec(), seed=2, medium=medium, name="down")
    t = 0
    for _ in range(30_800):
        up.arrive(t, 1228 + 14)
        down.arrive(t, 92 + 14)
        t += 500 * US
    s = medium.stats
    assert s.exchanges == 61_600
    assert s.busy_ns == 30_800 * (302 + 134) * US            # 13.4288 s
    assert abs(s.busy_ns / 1e9 - 13.4) < 0.05
    assert s.busy_ns_by_direction == {"up": 30_800 * 302 * US, "down": 30_800 * 134 * US}
    assert up.stats.airtime_ns == 30_800 * 302 * US


def test_directions_take_turns_on_the_medium_in_arrival_order():
    medium = AirMedium(AirtimeSpec(), seed=1)
    up = DirectionModel(LinkSpec(delay=0.001), seed=1, medium=medium, name="up")
    down = DirectionModel(LinkSpec(delay=0.001), seed=2, medium=medium, name="down")
    assert up.arrive(0, 1242) == (DELIVER, (34 + 208) * US + MS)          # air 0–302 µs
    assert down.arrive(100 * US, 106) == (DELIVER, (302 + 34 + 40) * US + MS)  # 302–436 µs
    assert up.arrive(200 * US, 1242) == (DELIVER, (436 + 34 + 208) * US + MS)  # 436–738 µs
    assert down.arrive(1000 * US, 106) == (DELIVER, (1000 + 74) * US + MS)     # idle air
    assert medium.stats.busy_ns_by_direction == {"up": 604 * US, "down": 268 * US}


def test_medium_queue_counts_frames_until_their_exchange_ends():
    medium = AirMedium(AirtimeSpec(), seed=1)
    up = DirectionModel(LinkSpec(queue_packets=2), seed=1, medium=medium)
    assert [v for v, _ in run(up, [(0, 1242)] * 3)] == [DELIVER, DELIVER, DROP_QUEUE]
    assert up.arrive(302 * US - 1, 1242)[0] == DROP_QUEUE
    assert up.arrive(302 * US, 1242)[0] == DELIVER
    assert medium.stats.exchanges == 3


def test_random_backoff_is_seeded_and_reproducible():
    def schedule(seed):
        medium = AirMedium(AirtimeSpec(cw_min=15), seed=seed)
        m = DirectionModel(LinkSpec(), seed=1, medium=medium)
        return [m.arrive(i * MS, 1242)[1] for i in range(2000)], medium.stats

    a, stats = schedule(5)
    assert a == schedule(5)[0] and a != schedule(6)[0]
    extra = [t - i * MS - (34 + 208) * US for i, t in enumerate(a)]
    assert all(e % (9 * US) == 0 and 0 <= e // (9 * US) <= 15 for e in extra)
    assert set(e // (9 * US) for e in extra) == set(range(16))
    sd = math.sqrt((16**2 - 1) / 12) / math.sqrt(2000)
    assert abs(stats.backoff_slots / 2000 - 7.5) < 5 * sd
    assert stats.busy_ns == 2000 * 302 * US + stats.backoff_slots * 9 * US   # backoff is airtime


def test_airtime_spec_validation_and_round_trip():
    spec = AirtimeSpec(name="wlan0", data_rate=24e6, cw_min=15)
    assert AirtimeSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match="bits per 4 µs"):
        AirtimeSpec(data_rate=54.1e6)
    with pytest.raises(ValueError, match="cw_min"):
        AirtimeSpec(cw_min=-1)
    with pytest.raises(ValueError, match="unknown airtime"):
        AirtimeSpec.from_dict({"rate": 54e6})
    with pytest.raises(ValueError, match="rate None"):
        DirectionModel(LinkSpec(rate=10e6), seed=1, medium=AirMedium(AirtimeSpec(), seed=1))


# --- stats -------------------------------------------------------------------------------------

def test_stats_counters_are_consistent():
    spec = LinkSpec(rate=10e6, delay=0.02, jitter=0.002, queue_packets=20,
                    loss=GilbertElliott(0.05, 0.3, 0.8, 0.01))
    m = DirectionModel(spec, seed=11)
    sizes = [FULL, 60, 600]
    got = [m.arrive(i * 500 * US, sizes[i % 3]) for i in range(30_000)]
    s = m.stats
    assert s.frames_in == 30_000 == s.delivered + s.dropped_loss + s.dropped_queue
    assert [s.delivered, s.dropped_loss, s.dropped_queue] == [
        sum(v == k for v, _ in got) for k in (DELIVER, DROP_LOSS, DROP_QUEUE)]
    assert s.dropped_queue > 0 and s.dropped_loss > 0
    assert s.queue_max_packets == 20
    assert s.bytes_in == sum(sizes[i % 3] for i in range(30_000))
    assert s.bytes_delivered == sum(sizes[i % 3] for i, (v, _) in enumerate(got) if v == DELIVER)
