import os
from pathlib import Path

import pytest

from testbed.host.steering import main, rps_mask


def test_rps_mask_is_sysfs_bitmap():
    assert rps_mask([0]) == "00000001"
    assert rps_mask([0, 1, 3]) == "0000000b"
    assert rps_mask([32, 1]) == "00000001,00000002"
    assert rps_mask([]) == "00000000"


def test_usage_error_without_interfaces(capsys):
    assert main(["1"]) == 2
    assert "usage" in capsys.readouterr().err


def _received_rps() -> list[int]:
    """Per CPU: steering IPIs it took from other CPUs (``received_rps``, /proc/net/softnet_stat)."""
    return [int(line.split()[9], 16) for line in Path("/proc/net/softnet_stat").read_text().splitlines()]


@pytest.mark.root
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="steering needs two CPUs")
def test_forwarder_cpu_is_kept_for_the_forwarder(results_root):
    from testbed.run.network import Testbed
    cpus = sorted(os.sched_getaffinity(0))
    before = _received_rps()
    with Testbed("longhaul", backend="userspace", overrides={"delay": "1ms", "loss_down": "0%"},
                 results_root=results_root) as tb:
        assert sorted(os.sched_getaffinity(0)) == cpus[:-1]   # what the run starts inherits it
        r = tb.run("client", ["ping", "-c", "50", "-i", "0.005", "-q", tb.ip("server")], timeout=30)
        assert " 0% packet loss" in r.stdout
    after = _received_rps()
    emu = tb.metadata["backend_summary"]
    assert emu["cpu"] == cpus[-1]
    mask = rps_mask(cpus[:-1])
    assert emu["rps_cpus"] == {"client:client-eth0": mask, "server:server-eth0": mask}
    # the hosts' receive work was steered away from the forwarder's CPU: 100 frames 5 ms apart
    # arrive at an idle backlog, so most of them cost an IPI (none without steering)
    assert sum(after[c] - before[c] for c in cpus[:-1]) >= 25
    assert sorted(os.sched_getaffinity(0)) == cpus   # restored
