"""A bad topology parameter (``--set KEY=VALUE``, ``topology_params``) is one error naming the
parameter, its value and what is allowed, whichever topology and parameter (no root: only the
description is built)."""
import pytest

from topologies import TOPOLOGIES, base, topology_class


@pytest.mark.parametrize("name", TOPOLOGIES.names())
def test_every_parameter_of_every_topology_is_named_in_its_error(name):
    cls = topology_class(name)
    for key in cls.params:
        with pytest.raises(ValueError, match=rf"^topology '{name}' parameter {key}='abc': "):
            cls(**{key: "abc"})


def test_of_several_parameters_the_bad_one_is_named():
    """`--set loss1=5% --set rate2=0` printed `rate 0.0 must be > 0 bit/s` without a name."""
    with pytest.raises(ValueError, match=r"^topology 'dualpath' parameter rate2=0: rate 0 must be > 0") as err:
        topology_class("dualpath")(loss1="5%", rate2=0)
    assert "loss1" not in str(err.value)


def test_a_combination_that_fails_names_every_parameter_given():
    class Pair(base.TestbedTopo):
        name = "pair"
        params = {"a": ("1", "a"), "b": ("1", "b")}

        def build(self, a, b):
            if a == b == "2":
                raise ValueError("a and b may not both be 2")

    with pytest.raises(ValueError, match=r"^topology 'pair' parameter a='2', b='2': a and b may not"):
        Pair(a="2", b="2")


@pytest.mark.parametrize("value", ["abc", 1.5, -1, "3slots"])
def test_wifi_cw_min_is_a_whole_number(value):
    """`cw_min=abc` was int()'s message, `cw_min=1.5` silently 1."""
    with pytest.raises(ValueError, match=r"^topology 'wifi' parameter cw_min=.*must be a whole number >= 0"):
        topology_class("wifi")(cw_min=value)
    for good in (15, "15"):
        assert topology_class("wifi")(cw_min=good).named["air"]["medium"].cw_min == 15


def test_a_hosts_addresses_are_known_before_bring_up():
    assert topology_class("dualpath")().addresses("client") == ["10.0.1.1", "10.0.2.1"]
    assert topology_class("wifi")().addresses("station") == ["10.0.0.1"]
    assert topology_class("relay")().addresses("cgw") == ["10.0.2.1", "10.0.1.254"]
