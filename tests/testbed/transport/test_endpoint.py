"""The endpoint in virtual time over the emulator's link models (no root, no sockets)."""
import math
import statistics

import pytest

from testbed.emulator.direction import DirectionModel
from testbed.spec.linkspec import DropList, LinkSpec
from testbed.transport.config import TransportConfig
from testbed.transport.fec import adaptive_repair
from tests.fixtures.transport import MS, link, request


def drop(indices, delay=0.1):
    """333 Mbit/s, ``delay`` one way, exactly the frames with these 0-based indices lost."""
    return DirectionModel(LinkSpec(rate=333e6, delay=delay, loss=DropList(frozenset(indices))), 1)


@pytest.mark.parametrize("seed", range(6))
def test_arq_recovers_every_loss_also_with_lost_acks(seed):
    cfg = TransportConfig.from_factors(fec="off")
    t, rx, c, s, _ = request(cfg, link("14%", seed=seed), link("10%", seed=seed + 100))
    assert not rx.decoded
    assert c.stats["lost"] > 0 and c.stats["retransmitted"] >= c.stats["lost"] - c.stats["probes"]
    assert c.stats["source_sent"] == 245 + c.stats["retransmitted"]


def test_arq_tail_loss_recovered_by_probe():
    """The last two packets of the only message lost: no later ACK can reveal them."""
    cfg = TransportConfig.from_factors(fec="off")
    t, rx, c, s, _ = request(cfg, drop({243, 244}), link())
    assert c.stats["lost"] == 2 and c.stats["probes"] >= 1




def test_block_decodes_with_r_losses_without_retransmission():
    cfg = TransportConfig.from_factors(fec="fixed:20")
    lost = range(0, 200, 10)                               # 20 source symbols
    t, rx, c, s, _ = request(cfg, drop(lost), link())
    assert rx.decoded and rx.symbols == 245
    assert c.stats["packets_sent"] == 265 and c.stats["lost"] == 20
    assert t < 245 * MS                                    # one round: no retransmission


def test_more_than_r_losses_fall_back_to_new_repair_symbols():
    cfg = TransportConfig.from_factors(fec="fixed:20")
    lost = list(range(0, 210, 10)) + [250, 251, 252]      # 24 of 265
    t, rx, c, s, _ = request(cfg, drop(lost), link())
    assert rx.decoded
    assert c.stats["packets_sent"] > 265 and c.stats["repair_sent"] > 20
    assert c.stats["retransmitted"] == 0                   # fallback sends new repair symbols
    assert t > 400 * MS                                    # took a second round


@pytest.mark.parametrize("policy,expected", [("every", 245), ("n:4", math.ceil(245 / 4)),
                                             ("n:7", math.ceil(245 / 7))])
def test_ack_every_n_promise(policy, expected):
    cfg = TransportConfig.from_factors(fec="off", ack=policy)
    _, _, c, s, _ = request(cfg, link(), link())
    assert s.stats["acks_sent"] == expected


@pytest.mark.parametrize("policy,per_window", [("t:10ms", None), ("n:4,t:10ms", 4),
                                               ("n:16,t:5.5ms", None)])
def test_ack_timer_promise(policy, per_window):
    """Paced at 10 Mbit/s, packets arrive every dt = 1509 B·8/10 Mbit/s = 1.2072 ms; a timer
    window opened by an arrival takes every arrival up to T later: floor(T/dt) + 1 packets."""
    cfg = TransportConfig.from_factors(fec="off", ack=policy, pacing="rate:10mbit")
    _, _, c, s, _ = request(cfg, link(rate="10mbit"), link(rate="10mbit"))
    dt = 1509 * 8 / 10e6
    t = cfg.ack.every_t_ns / 1e9
    per = min(math.floor(t / dt) + 1, cfg.ack.every_n or 10**9)
    assert per_window is None or per == per_window
    assert s.stats["acks_sent"] == math.ceil(245 / per)


def test_adaptive_r_is_63_at_14_percent_and_follows_the_measured_loss():
    assert adaptive_repair(245, 0.14) == 63
    cfg = TransportConfig.from_factors(fec="adaptive", loss_prior="14%")
    _, _, c, _, _ = request(cfg, link("14%", seed=2), link())
    first = c.stats["repair_sent"]
    assert first >= 63
    # the same connection keeps sending over a path with 3% loss: the estimate and r follow
    from testbed.transport.endpoint import Endpoint, MessageDelivered
    from testbed.transport.sim import Simulation
    c = Endpoint(cfg)
    s = Endpoint(cfg)
    sim = Simulation(c, s, link("3%", seed=9), link())
    repairs = []
    done = []
    sim.on_event(lambda sim, side, ev: done.append(ev) if isinstance(ev, MessageDelivered) else None)
    for i in range(6):
        before = c.stats["repair_sent"]
        c.send_message(sim.now, bytes(245 * 1448))
        sim.flush("a")
        sim.run(stop=lambda i=i: len(done) > i)
        repairs.append((c.stats["repair_sent"] - before, c.loss.p))
    assert repairs[0][0] == 63                             # still the prior: no samples yet
    p = repairs[-1][1]
    assert 0.01 < p < 0.06
    assert repairs[-1][0] == adaptive_repair(245, repairs[-2][1]) < 40


def test_pacing_estimate_reaches_the_bottleneck_rate():
    cfg = TransportConfig.from_factors(fec="off", pacing="estimate")
    body = bytes(3_000_000)
    t, rx, c, s, _ = request(cfg, link(rate="50mbit", delay="10ms"), link(rate="50mbit", delay="10ms"),
                             body=body)
    assert c.rate.max_rate * 8 == pytest.approx(50e6, rel=0.1)
    assert c.stats["lost"] == 0 or c.stats["lost"] < 0.05 * c.stats["packets_sent"]
    ideal = len(body) * 8 / 50e6
    assert t / 1e9 < 3 * ideal + 0.2


def test_backoff_only_when_asked():
    for backoff in (False, True):
        cfg = TransportConfig.from_factors(fec="off", backoff=backoff)
        t, rx, c, s, _ = request(cfg, link("14%", seed=4), link())
        assert (c._rate_factor < 1.0) == backoff


def test_fec_vs_arq_median_completion_in_virtual_time():
    """Long-haul path with the 14% loss on the request's direction, 15 seeds each."""
    res = {}
    for fec in ("off", "adaptive"):
        cfg = TransportConfig.from_factors(fec=fec, loss_prior="14%")
        res[fec] = statistics.median(request(cfg, link("14%", seed=k), link(seed=k + 50))[0] / MS
                                     for k in range(15))
    print(f"\nvirtual-time median completion: {res}")
    assert 225 <= res["adaptive"] <= 300
    assert res["off"] > 400


def test_long_connection_keeps_bounded_state_and_delivers_each_message_once(monkeypatch):
    from testbed.transport import endpoint
    from testbed.transport.endpoint import Endpoint, MessageReceived
    from testbed.transport.sim import Simulation
    monkeypatch.setattr(endpoint, "KEEP_DONE", 64)
    KEEP_DONE = 64
    cfg = TransportConfig.from_factors(fec="fixed:1")
    c, s = Endpoint(cfg), Endpoint(cfg)
    sim = Simulation(c, s, link("5%", delay="1ms", seed=8), link(delay="1ms"))
    got = []
    sim.on_event(lambda sim, side, ev: got.append(ev.msg) if isinstance(ev, MessageReceived) else None)
    n = 2 * KEEP_DONE + 500
    for i in range(n):                       # in batches of 50 messages in flight
        c.send_message(sim.now, i.to_bytes(4, "big") * 50)
        if i % 50 == 49 or i == n - 1:
            sim.flush("a")
            sim.run(stop=lambda: not c.busy)
    assert sorted(got) == list(range(n))
    assert not c._out and len(s._done) <= 2 * KEEP_DONE


@pytest.mark.parametrize("fec", ["off", "adaptive", "fixed:10"])
@pytest.mark.parametrize("ack", ["n:4", "t:10ms", "n:8,t:5ms"])
@pytest.mark.parametrize("pacing", ["rate:333mbit", "estimate"])
def test_every_combination_delivers_over_loss_both_ways(fec, ack, pacing):
    cfg = TransportConfig.from_factors(fec=fec, ack=ack, pacing=pacing, loss_prior="14%")
    t, rx, c, s, _ = request(cfg, link("14%", seed=7), link("5%", seed=8))
    assert t > 200 * MS


@pytest.mark.parametrize("ack, acks_per_window", [("n:44", 1), ("every", 44)])
def test_a_fixed_window_sends_in_flights_one_cycle_apart(ack, acks_per_window):
    """CHAPTER12.md C3 in virtual time: a 64 KB window (44 symbols) over 20 Mbit/s and 100 ms
    RTT.  With one ACK per window (n:44) a flight leaves every W/R + RTT (the chapter's batch-ACK
    cycle, 25.6 + 100 ms, here with the frames' headers); with an ACK per symbol, ACK clocking
    starts the next flight one RTT after the last (plus one frame's time)."""
    from testbed.transport import wire
    from testbed.transport.sim import FRAME_OVERHEAD
    cfg = TransportConfig.from_factors(fec="off", ack=ack, pacing="off", window="64KB")
    up = link(rate="20mbit", delay="50ms")
    sent = []
    arrive = up.arrive
    up.arrive = lambda now, size: (sent.append((now, size)), arrive(now, size))[1]
    t, rx, c, s, _ = request(cfg, up, link(rate="20mbit", delay="50ms"), body=bytes(640_000))
    symbols = [now for now, size in sent if size > 1000]
    assert len(symbols) == c.stats["source_sent"] == 442 and c.stats["lost"] == 0
    gaps = [b - a for a, b in zip(symbols, symbols[1:])]
    starts = [symbols[0]] + [b for a, b in zip(symbols, symbols[1:]) if b - a > 50 * MS]
    assert len(starts) == 11                              # ceil(442 / 44) flights
    frame_s = (wire.SYMBOL + wire.SYMBOL_OVERHEAD + FRAME_OVERHEAD) * 8 / 20e6
    ack_s = 0.1 if acks_per_window == 1 else 0.1 + frame_s    # RTT, and the last frame's time
    want = (44 * frame_s if acks_per_window == 1 else 0) + ack_s
    period = statistics.median(b - a for a, b in zip(starts, starts[1:])) / 1e9
    assert period == pytest.approx(want, abs=0.002), (period, want)
    assert max(gaps) < 0.2e9
