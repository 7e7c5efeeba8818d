"""Virtual-time request/response over the transport, shared by the transport tests."""
from testbed.apps import payload
from testbed.emulator.direction import DirectionModel
from testbed.linkspec import LinkSpec
from testbed.transport.config import TransportConfig
from testbed.transport.endpoint import Endpoint, MessageReceived
from testbed.transport.sim import Simulation

MS = 1_000_000


def link(loss="0%", rate="333mbit", delay="100ms", seed=1) -> DirectionModel:
    return DirectionModel(LinkSpec.parse(rate=rate, delay=delay, loss=loss), seed)


def request(config: TransportConfig, up: DirectionModel, down: DirectionModel,
            body: bytes | None = None, process_ms: int = 30, reply: int = 1000):
    """One request (client → server over ``up``), reply after ``process_ms``; returns
    (completion ns, server's MessageReceived, client, server, sim)."""
    body = payload.body() if body is None else body
    c, s = Endpoint(config), Endpoint(config)
    sim = Simulation(c, s, up, down)
    got = {}

    def on(sim, side, ev):
        if side == "b" and isinstance(ev, MessageReceived):
            got["request"] = ev

            def answer(sim):
                s.send_message(sim.now, payload.body(reply, b"reply"))
                sim.flush("b")
            sim.at(sim.now + process_ms * MS, answer)
        elif side == "a" and isinstance(ev, MessageReceived):
            got["done"] = sim.now
    sim.on_event(on)
    c.send_message(0, body)
    sim.flush("a")
    sim.run(stop=lambda: "done" in got)
    assert got["request"].data == body
    return got["done"], got["request"], c, s, sim
