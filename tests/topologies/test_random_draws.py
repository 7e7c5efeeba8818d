"""Whether a topology's frames meet a random draw (``TestbedTopo.draws_at_random``): what
``testbed reproduce --quick`` reads to run one repetition instead of two."""
from topologies import topology_class


def test_a_topology_draws_at_random_from_a_link_or_a_medium_with_backoff():
    assert topology_class("longhaul")().draws_at_random()                      # 14 % loss
    assert not topology_class("longhaul")(links={"bottleneck.up.loss": "0%",
                                                 "bottleneck.down.loss": "0%"}).draws_at_random()
    assert not topology_class("edgecloud")().draws_at_random()
    assert not topology_class("wifi")().draws_at_random()                       # C10: no backoff
    assert topology_class("wifi")(cw_min="15").draws_at_random()
