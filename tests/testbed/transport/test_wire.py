import random

import pytest

from testbed.transport import wire
from testbed.transport.config import TransportConfig
from testbed.transport.endpoint import Endpoint
from tests.fixtures.transport import link


def test_symbol_and_ack_round_trip():
    p = wire.SymbolPacket(7, True, 3, 354_640, 2, 250, bytes(range(256)) * 5 + b"x" * 168, True)
    data = wire.encode_symbol(p)
    assert len(data) == wire.SYMBOL_OVERHEAD + wire.SYMBOL == 1467
    got = wire.parse(data)
    assert got._replace(raptorq_packet=b"") == p
    assert got.raptorq_packet == (250).to_bytes(4, "big") + p.symbol      # SBN 0, ESI 250
    a = wire.AckPacket(9, 1234, ((3, 0), (4, 17)), ((100, 90), (80, 0)))
    assert wire.parse(wire.encode_ack(a)) == a


def test_repair_flag_must_match_esi():
    source = wire.SymbolPacket(1, False, 0, 2 * wire.SYMBOL, 0, 2, b"\0" * wire.SYMBOL)
    with pytest.raises(wire.Malformed, match="contradicts"):
        wire.parse(wire.encode_symbol(source))      # ESI 2 with k = 2 is a repair symbol


def valid_datagrams():
    sym = wire.encode_symbol(wire.SymbolPacket(0, False, 0, 5000, 0, 1, b"a" * wire.SYMBOL))
    ack = wire.encode_ack(wire.AckPacket(3, 10, ((0, 2),), ((5, 0),)))
    return sym, ack


def test_random_and_truncated_datagrams_are_counted_and_dropped():
    rng = random.Random(11)
    ep = Endpoint()
    junk = [rng.randbytes(rng.randrange(0, 1600)) for _ in range(3000)]
    for good in valid_datagrams():
        junk += [good[:n] for n in range(len(good))]                     # every truncation
        for _ in range(500):                                              # random byte flips
            b = bytearray(good)
            for _ in range(rng.randrange(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            junk.append(bytes(b))
        junk.append(good + b"\0")
    for i, d in enumerate(junk):
        ep.datagram_received(i * 1000, d)
        ep.handle_timer(i * 1000)
        ep.send(i * 1000)
    assert ep.stats["malformed"] >= len(junk) * 0.8      # a flipped payload byte still parses
    # a lie in a well-formed ACK (ranges beyond anything sent) changes nothing
    ep.datagram_received(10**10, wire.encode_ack(wire.AckPacket(1, 0, ((0, 0),), ((2**32 - 1, 0),))))


def test_junk_between_real_packets_does_not_break_a_transfer():
    rng = random.Random(5)
    cfg = TransportConfig.from_factors(fec="off")

    class Noisy(Endpoint):
        def datagram_received(self, now, data):
            super().datagram_received(now, rng.randbytes(rng.randrange(0, 40)))
            super().datagram_received(now, data[:rng.randrange(len(data))])
            super().datagram_received(now, data)

    up, down = link("5%", seed=3), link("0%", seed=4)
    c, s = Noisy(cfg), Noisy(cfg)
    from testbed.transport.sim import Simulation
    from testbed.transport.endpoint import MessageReceived
    sim = Simulation(c, s, up, down)
    got = []
    sim.on_event(lambda sim, side, ev: got.append(ev) if isinstance(ev, MessageReceived) else None)
    body = rng.randbytes(100_000)
    c.send_message(0, body)
    sim.flush("a")
    sim.run(stop=lambda: bool(got))
    assert got[0].data == body
    assert s.stats["malformed"] > 0
