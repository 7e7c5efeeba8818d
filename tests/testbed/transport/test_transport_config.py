"""Factor strings of the transport: what parses, what is refused with a message naming the forms."""
import pytest

from testbed.transport.ackpolicy import AckPolicy
from testbed.transport.config import TransportConfig
from testbed.transport.fec import FecPolicy
from testbed.transport.pacing import PacingPolicy


@pytest.mark.parametrize("text,mode,repair,target", [("off", "off", 0, 0.999), ("fixed:63", "fixed", 63, 0.999),
                                                     ("adaptive", "adaptive", 0, 0.999),
                                                     ("adaptive:0.99", "adaptive", 0, 0.99)])
def test_fec_forms(text, mode, repair, target):
    p = FecPolicy.parse(text)
    assert (p.mode, p.repair, p.target) == (mode, repair, target)
    assert FecPolicy.parse(str(p)) == p


@pytest.mark.parametrize("text", ["fixed", "fixed:x", "off:3", "adaptive:x", "fixed:-1", "adaptive:2", "FEC"])
def test_fec_refused(text):
    with pytest.raises(ValueError, match="fixed|adaptive"):
        FecPolicy.parse(text)


def test_fixed_repair_scales_down_for_a_fallback_deficit():
    p = FecPolicy.parse("fixed:63")
    assert p.repair_count(245, 0.5) == 63 and p.repair_count(10, 0.5, k_message=245) == 3


@pytest.mark.parametrize("text,n,t", [("every", 1, None), ("n:4", 4, None), ("t:10ms", None, 10_000_000),
                                      ("n:8,t:5ms", 8, 5_000_000)])
def test_ack_forms(text, n, t):
    p = AckPolicy.parse(text)
    assert (p.every_n, p.every_t_ns) == (n, t)
    assert AckPolicy.parse(str(p)) == p


@pytest.mark.parametrize("text", ["n:0", "n:x", "t:-1ms", "sometimes", "n:2,n:3", ""])
def test_ack_refused(text):
    with pytest.raises(ValueError):
        AckPolicy.parse(text)


def test_pacing_forms_and_config():
    assert PacingPolicy.parse("rate:333mbit").rate_bps == 333e6
    assert PacingPolicy.parse("estimate").mode == "estimate"
    for bad in ("rate:", "rate:0mbit", "fast", "rate:3mbps"):
        with pytest.raises(ValueError):
            PacingPolicy.parse(bad)
    c = TransportConfig.from_factors("adaptive", "t:10ms", "off", "14%")
    assert c.loss_prior == 0.14 and c.max_ack_delay_ns == 10_000_000
    assert c.describe() == {"fec": "adaptive:0.999", "ack": "t:10ms", "pacing": "off",
                            "loss_prior": 0.14, "backoff": False, "window": None}
    assert TransportConfig.from_factors(window="64KB").window == 64_000
    with pytest.raises(ValueError, match="holds no symbol"):
        TransportConfig.from_factors(window="1KB")
