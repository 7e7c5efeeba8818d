"""C11 done-when (root, userspace emulator, topology dualpath: 20 + 10 Mbit/s access paths,
24 Mbit/s common egress).  S = 8 MB for the split and 4 MB for MPTCP (not the chapter's 30 MB,
to keep CI short): MPTCP carries data on both subflows (client capture, one interface per path);
the split finishes within 15 % of S/(B1+B2) without the common egress (egress unshaped) and no
faster than S/egress with it."""
import pytest

from analysis.multipath import subflow_in_flight

from testbed.run.execute import execute
from testbed.spec.runspec import CaptureSpec, RunSpec

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("isolated_state")]
B1, B2, EGRESS = 20e6, 10e6, 24e6


def _run(tmp_path, name, params, topo=None, links=None):
    spec = RunSpec(topology="dualpath", topology_params=topo or {}, links=links or {},
                   backend="userspace", workload="multipath", params=params,
                   capture=CaptureSpec(("client",)), timeout=120)
    r = execute(spec, tmp_path / name)
    assert r.status == "complete"
    return r


def _load():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def test_mptcp_carries_data_on_both_subflows(tmp_path):
    r = _run(tmp_path, "mptcp", {"scheme": "mptcp", "size": "4MB"}, {"egress": "unshaped"})
    print(f"\nload {_load()}: MPTCP 4 MB in {r.metrics['completion_ms'] / 1e3:.3f} s, bytes per path "
          f"{r.metrics['path_bytes']}")
    assert r.checks["mptcp_fallback"] is False
    assert r.checks["paths_with_data"] == ["client-eth0", "client-eth1"]
    flight = subflow_in_flight(r.dir)          # the subflows as one connection
    assert all(flight[i][1].max() > 0 for i in ("client-eth0", "client-eth1"))
    assert flight["all"][1].max() >= max(flight[i][1].max() for i in ("client-eth0", "client-eth1"))


def test_split_is_bounded_by_the_sum_of_paths_or_by_the_common_egress(tmp_path):
    """No split run is faster than S/(B1+B2), nor than S/egress with the common egress (the
    links' rates, in every run).  The 15 % above S/(B1+B2) without the egress — 0.32 s of 2.13 s,
    TCP's ramp on two paths included (2.36 s on a quiet machine: 0.1 s to spare) — is less than
    what a machine busy for a few seconds takes from the emulator and the two senders: that run
    is repeated up to ``attempts.ATTEMPTS`` times until one is within it (a path left unused
    needs 3.2 s or more in each)."""
    from tests.fixtures.attempts import attempts, report
    size = 8e6
    ideal, floor = size * 8 / (B1 + B2), size * 8 / EGRESS

    def measure():
        free = _run(tmp_path, f"split{len(list(tmp_path.glob('split*')))}", {"scheme": "split", "size": "8MB"},
                    links={"egress.up.rate": "unshaped"})
        print(f"\nload {_load()}: split 8 MB without common egress {free.metrics['completion_ms'] / 1e3:.3f} s "
              f"(S/(B1+B2) = {ideal:.3f} s); bytes per path {free.metrics['path_bytes']}")
        assert free.checks["paths_with_data"] == ["client-eth0", "client-eth1"]
        assert ideal <= free.metrics["completion_ms"] / 1e3, free.metrics
        return free.metrics["completion_ms"] / 1e3

    tries = attempts(measure, lambda s: [f"{s:.3f} s > 1.15 × {ideal:.3f} s"] if s > 1.15 * ideal else [])
    assert not tries[-1]["misses"], report(tries)
    shared = _run(tmp_path, "shared-egress", {"scheme": "split", "size": "8MB"})
    print(f"with the 24 Mbit/s egress {shared.metrics['completion_ms'] / 1e3:.3f} s (S/egress = {floor:.3f} s)")
    assert shared.metrics["completion_ms"] / 1e3 >= floor
