"""ARQ vs FEC through the emulated long-haul path (root, userspace emulator): 14% loss on the
request's direction (client→server), none on the way back, 200 ms RTT, 333 Mbit/s.  Arms are
interleaved; each repetition has its own link seed."""
import statistics

import pytest

from tests.fixtures.apps import events
from testbed.run.execute import execute
from testbed.spec.runspec import CaptureSpec, RunSpec

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("isolated_state")]
LOSSY_UP = {"loss_up": "14%", "loss_down": "0%"}
SEEDS = (11, 12, 13)
REQUESTS = 3


def test_fec_completes_without_a_recovery_round_arq_does_not(tmp_path):
    arms = {"arq": {"fec": "off"}, "fec": {"fec": "adaptive", "loss_prior": "14%"}}
    done = {a: [] for a in arms}
    runs = {a: [] for a in arms}
    for seed in SEEDS:
        for arm, params in arms.items():
            spec = RunSpec(topology="longhaul", topology_params=LOSSY_UP, backend="userspace", seed=seed,
                           workload="udpreq", params={**params, "requests": REQUESTS},
                           capture=CaptureSpec(("client",)))
            r = execute(spec, tmp_path / f"{arm}-{seed}")
            assert r.status == "complete" and len(r.metrics["completion_ms"]) == REQUESTS
            done[arm] += r.metrics["completion_ms"]
            runs[arm].append(r)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    med = {a: statistics.median(v) for a, v in done.items()}
    print(f"\nlong-haul path, n={len(SEEDS) * REQUESTS} requests per arm, seeds {SEEDS}, load {load}: "
          f"median completion ARQ {med['arq']:.1f} ms, FEC {med['fec']:.1f} ms; "
          f"all: {({a: [round(x) for x in v] for a, v in done.items()})}")
    for r in runs["fec"]:
        assert r.checks["repair_packets"] >= REQUESTS * 55          # r from p = 0.14 (63 at 245)
        complete = events(r.dir / "server.jsonl", "request_complete")
        assert all(e["decoded"] for e in complete)                  # losses repaired by decoding
    for r in runs["arq"]:
        assert r.checks["repair_packets"] == 0 and r.metrics["retransmissions"] > 0
        assert r.metrics["rounds"] >= 2
    # physics: one RTT (200 ms) + 30 ms processing + sending is the floor of both arms; ARQ
    # needs at least one more round trip (P(no loss among 245) = 0.86^245 ≈ 1e-16)
    assert min(done["fec"] + done["arq"]) >= 230
    assert min(done["arq"]) > 400
    # FEC spends no round trip on recovery: below floor + one RTT (this machine's CPU load
    # shows in how far above 241 ms it lands; the chapter's band is 225-300 ms)
    assert med["fec"] < 400 < med["arq"]


def test_reqresp_over_udp_through_the_emulator_reports_no_tcp_figures(tmp_path):
    """`reqresp --transport udp` on a 10 ms-RTT path with the client captured: the UDP transport's
    programs ran, and the manifest carries its counts, none of TCP's (they read 0 before)."""
    spec = RunSpec(topology="longhaul", topology_params={"delay": "5ms", "loss_down": "0%"},
                   backend="userspace", workload="reqresp",
                   params={"transport": "udp", "requests": 2, "fec": "fixed:8"},
                   capture=CaptureSpec(("client",)))
    r = execute(spec, tmp_path / "run")
    assert r.status == "complete" and len(r.metrics["completion_ms"]) == 2
    assert r.apps["client"][2] == "testbed.apps.udpreq" and r.checks["source_packets"] == 2 * 245
    tcp = {"retransmitted_bytes", "max_in_flight_bytes", "packets_c2s", "wire_bytes", "max_payload",
           "syn_per_request", "path", "handshake_ms"}
    assert not tcp & {*r.metrics, *r.checks} and r.metrics["retransmissions"] == 0


def test_a_fixed_window_with_one_ack_per_window_cycles_every_w_over_r_plus_the_rtt(tmp_path):
    """C3 on the image path (20 Mbit/s up, 100 ms RTT): behind a fixed 64 KB window (44 symbols)
    one ACK per window starts a flight every 44 frames' time + the RTT (the chapter's batch-ACK
    cycle, 25.6 + 100 ms, with the frames' headers); an ACK per symbol, one RTT after the last
    flight (ACK clocking).  The capture's symbols per ACK show the policy took effect.
    A machine that stalls can split a flight (a probe's frames leave in two bunches) or move its
    start by more than the 2 ms allowed (its run's link fidelity then not ok; such a run was
    skipped before): each arm's run is repeated, up to ``attempts.ATTEMPTS`` times, until one has
    the flights and the period; a wrong window or ACK policy misses in each."""
    from functools import partial
    from testbed.apps.udpreq import REQUEST
    from testbed.transport import wire
    from tests.fixtures.attempts import attempts, report
    frame_s = (wire.SYMBOL + wire.SYMBOL_OVERHEAD + 42) * 8 / 20e6     # + Ethernet, IPv4, UDP
    symbols = -(-(1_000_000 + REQUEST.size) // wire.SYMBOL)              # the request message
    period = {"every": 100 + frame_s * 1e3, "n:44": 100 + 44 * frame_s * 1e3}

    def measure(ack):
        spec = RunSpec(topology="image", backend="userspace", workload="udpreq",
                       params={"size": "1MB", "send_window": "64KB", "pacing": "off", "ack_policy": ack},
                       capture=CaptureSpec(("client",)))
        name = ack.replace(":", "-")
        r = execute(spec, tmp_path / f"{name}-{len(list(tmp_path.glob(name + '-*')))}")
        assert r.status == "complete"
        return r

    def misses(ack, r):
        m, out = r.metrics, []
        if m["retransmissions"] != 0 or m["flights"] != -(-symbols // 44):
            out.append(f"{m['retransmissions']} retransmissions, {m['flights']} flights (0, {-(-symbols // 44)})")
        if m["flight_period_ms"] != pytest.approx(period[ack], abs=2):
            out.append(f"flight period {m['flight_period_ms']:.2f} ms, not {period[ack]:.2f} ± 2")
        # a stalled machine (its run's link fidelity not ok) may split a flight or move its start
        return out + [f"link fidelity {r.fidelity.get('verdict')}: {r.fidelity.get('reasons')}"] if out else []
    runs = {}
    for ack in ("every", "n:44"):
        tries = attempts(partial(measure, ack), partial(misses, ack))
        assert not tries[-1]["misses"], f"ack {ack}:\n{report(tries)}"
        runs[ack] = tries[-1]["result"]
    print(f"\nflight period: every {runs['every'].metrics['flight_period_ms']:.2f} ms, "
          f"n:44 {runs['n:44'].metrics['flight_period_ms']:.2f} ms (44 frames {44 * frame_s * 1e3:.2f} ms)")
    assert runs["every"].checks["symbols_per_ack"] < 1.5 < runs["n:44"].checks["symbols_per_ack"] <= 44
