import math

import pytest

from testbed.spec.linkspec import Bernoulli, DropList, GilbertElliott, LinkSpec, parse_loss
from testbed.spec.units import parse_probability, parse_queue, parse_rate, parse_size, parse_time


@pytest.mark.parametrize("text,value", [("333mbit", 333e6), ("333Mbit/s", 333e6), ("20mbit", 20e6),
                                        ("1gbit", 1e9), ("64kbit", 64e3), ("6.4mbit", 6.4e6), (5e6, 5e6)])
def test_rate_units(text, value):
    assert parse_rate(text) == pytest.approx(value)


@pytest.mark.parametrize("text,value", [("100ms", 0.1), ("0.1s", 0.1), ("50us", 50e-6), ("2", 2.0)])
def test_time_units(text, value):
    assert parse_time(text) == pytest.approx(value)


def test_probability_size_queue_units():
    assert parse_probability("14%") == pytest.approx(0.14)
    assert parse_probability(0.14) == 0.14
    assert parse_size("354640") == 354640
    assert parse_size("30MB") == 30_000_000
    assert parse_size("64MiB") == 64 * 2**20
    assert parse_queue("1000") == (1000, None)
    assert parse_queue("1.5MB") == (None, 1_500_000)


@pytest.mark.parametrize("fields,message", [
    (dict(rate="0mbit"), "must be > 0"),
    (dict(rate="20mbps"), "ambiguous rate unit"),
    (dict(rate="20furlongs"), "unknown rate unit"),
    (dict(delay="5parsec"), "unknown time unit"),
    (dict(delay="-5ms"), "non-negative"),
    (dict(rate="fast"), "cannot read rate 'fast'.*units: bit, kbit, mbit, gbit"),
    (dict(delay="soon"), "cannot read duration 'soon'.*units: s, sec, ms, us, ns"),
    (dict(queue="lots"), "cannot read queue limit 'lots'.*packets .* or a size"),
    (dict(loss="140%"), "outside [0, 1]"),
    (dict(loss="-0.1"), "non-negative"),
    (dict(loss="ge:0.1"), "2 to 4 values"),
    (dict(queue="100B", rate="10mbit"), "smaller than one MTU"),
    (dict(queue="0"), "smaller than one MTU"),
    (dict(queue="2.5"), "must be whole"),
    (dict(color="red"), "unknown link parameter"),
])
def test_validation_errors(fields, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        LinkSpec.parse(**fields)


def test_negative_delay_and_rate_in_base_units():
    with pytest.raises(ValueError, match="delay"):
        LinkSpec(delay=-0.001)
    with pytest.raises(ValueError, match="rate"):
        LinkSpec(rate=-1)


def test_longhaul_default_queue_holds_the_bdp():
    down = LinkSpec.parse(rate="333mbit", delay="100ms", loss="14%")
    # one round-trip BDP in full frames: 8,325,000 B / 1514 B = 5498.7
    assert down.queue_limit_packets == math.ceil(333e6 * 0.2 / 8 / 1514) == 5499
    assert down.queue_limit_packets > 1000  # netem's default limit would drop on this path
    assert down.delay_line_packets == math.ceil(333e6 * 0.1 / 8 / 1514)


def test_loss_models():
    assert parse_loss("14%") == Bernoulli(0.14)
    ge = parse_loss("ge:1%,30%,100%,0%")
    assert isinstance(ge, GilbertElliott)
    assert ge.mean_loss == pytest.approx(0.01 / 0.31)
    with pytest.raises(ValueError):
        GilbertElliott(0, 0)


def test_round_trip_dict():
    for spec in (LinkSpec.parse(rate="20mbit", delay="50ms", loss="ge:1%,30%", queue="800"),
                 LinkSpec(loss=DropList(frozenset({3, 5}))),
                 LinkSpec.parse(rate="6.4mbit", delay="100ms", jitter="2ms", queue="64KB")):
        assert LinkSpec.from_dict(spec.to_dict()) == spec


def test_unimpaired_and_serialization():
    assert LinkSpec().unimpaired
    assert not LinkSpec.parse(loss="1%").unimpaired
    spec = LinkSpec.parse(rate="20mbit", overhead=24)
    assert spec.serialization_time(1514) == pytest.approx((1514 + 24) * 8 / 20e6)


def test_draws_at_random_names_random_loss_jitter_and_a_step_that_sets_them():
    from testbed.spec.schedule import Schedule
    assert not LinkSpec.parse(rate="10mbit", delay="20ms").draws_at_random
    assert LinkSpec.parse(rate="10mbit", delay="20ms", loss="1%").draws_at_random
    assert LinkSpec.parse(delay="20ms", jitter="1ms").draws_at_random
    assert LinkSpec(loss=GilbertElliott(p=0.01, r=0.5)).draws_at_random
    assert not LinkSpec(loss=GilbertElliott(p=0.01, r=0.5, loss_bad=0.0)).draws_at_random
    assert not LinkSpec(loss=DropList((3, 7))).draws_at_random          # deterministic drops
    step = Schedule.from_dict({"step": [{"at": "2s", "loss": "5%"}]})
    assert LinkSpec(schedule=step).draws_at_random
    outage = Schedule.from_dict({"outage": [{"down": "2s", "duration": "1s"}]})
    assert not LinkSpec(schedule=outage).draws_at_random
