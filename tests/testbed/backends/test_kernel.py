"""The kernel backend's qdisc configuration, exactly as it would be applied (no qdiscs here)."""
import pytest

from testbed.backends.kernel import netem_args, qdisc_commands
from testbed.spec.linkspec import DropList, LinkSpec


def cmds(ifname, spec, seed=None):
    return [" ".join(c) for c in qdisc_commands(ifname, spec, seed)]


def test_longhaul_down_direction():
    spec = LinkSpec.parse(rate="333mbit", delay="100ms", loss="14%")
    assert cmds("server-eth0", spec, seed=3) == [
        "tc qdisc replace dev server-eth0 root handle 1: htb default 1",
        "tc class add dev server-eth0 parent 1: classid 1:1 htb rate 333000000bit ceil 333000000bit "
        "quantum 1514 overhead 0",
        # limit = delay line (2750 full frames in 100 ms) + one round-trip BDP of buffer (5499)
        "tc qdisc add dev server-eth0 parent 1:1 handle 10: netem delay 100000us loss random 14% "
        "limit 8249 seed 3",
    ]


def test_longhaul_up_direction_has_no_loss():
    spec = LinkSpec.parse(rate="333mbit", delay="100ms", loss="0%")
    assert "loss" not in cmds("client-eth0", spec)[-1]


def test_asymmetric_spec_with_jitter_and_gilbert_elliott():
    spec = LinkSpec.parse(rate="20mbit", delay="50ms", jitter="10ms", loss="ge:1%,30%,100%,0%",
                          queue="100", overhead=24)
    got = cmds("h1-eth0", spec)
    assert got[1].endswith("quantum 1514 overhead 24")
    # uniform [0, 10 ms] extra = netem's uniform [D-J, D+J] with D = 55 ms, J = 5 ms
    assert got[2] == ("tc qdisc add dev h1-eth0 parent 1:1 handle 10: netem delay 55000us 5000us "
                      "loss gemodel 1% 30% 100% 0% limit 198")
    assert got[3] == "tc qdisc add dev h1-eth0 parent 10:1 handle 11: pfifo limit 198"


def test_jitter_with_reorder_has_no_pfifo():
    spec = LinkSpec.parse(delay="50ms", jitter="10ms", reorder="true")
    assert len(cmds("x", spec)) == 1


def test_unshaped_delay_only_is_netem_at_root():
    assert cmds("x", LinkSpec.parse(delay="10ms")) == [
        "tc qdisc replace dev x root handle 10: netem delay 10000us limit 100000"]


def test_inexpressible_specs_are_rejected():
    with pytest.raises(ValueError, match="packets"):
        netem_args(LinkSpec.parse(rate="10mbit", delay="10ms", queue="64KB"))
    with pytest.raises(ValueError, match="userspace"):
        netem_args(LinkSpec(loss=DropList(frozenset({1}))))
