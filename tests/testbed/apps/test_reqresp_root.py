"""Request/response against the wire (root, userspace emulator, 20 ms RTT, 50 Mbit/s, no
loss): tests that would have caught a client-made Nagle stall, a warm-up that does not warm,
and request stamps taken where they do not happen."""
import json

import pytest

from tests.fixtures.apps import events
from tests.testbed.apps.test_apps_root import packets, run_testbed, syns
from testbed.apps import eventlog as ev

pytestmark = pytest.mark.root
RTT_MS, RATE_BPS, PROCESS_MS = 20.0, 50e6, 30.0
MSS, FRAME_OVERHEAD = 1448, 66          # payload per segment; Ethernet + IPv4 + TCP with timestamps


def expected_ms(size: int) -> float:
    """RTT + the request's frames at the link rate + the server's processing time."""
    frames = -(-size // MSS)
    return RTT_MS + (size + frames * FRAME_OVERHEAD) * 8 / RATE_BPS * 1e3 + PROCESS_MS


def test_kept_alive_request_takes_rtt_plus_size_over_rate_plus_processing(tmp_path):
    """Within 10 %: 11 ms of the 109 ms a request takes (1.1 ms above it on a quiet machine),
    which a stall of the machine during the server's 30 ms processing or in the emulator
    exceeds.  No run may be faster than 90 % of the path's time; the median and the first
    request must come within 10 % of it in one of up to ``attempts.ATTEMPTS`` runs — an
    overloaded emulator's run is one of them (it was skipped before) — while a Nagle stall (a
    delayed ACK's wait), a cold warm-up or a wrong rate misses in each."""
    from tests.fixtures.attempts import attempts, report

    def measure():
        run = run_testbed(tmp_path / f"a{len(list(tmp_path.glob('a*')))}", "reqresp", "--topo", "longhaul",
                          "--mode", "reuse", "--requests", "5", "--think", "100ms", "--process", "30ms",
                          "--capture", "none",
                          "--link", "bottleneck.up.queue=1000")     # clean: a request's burst fits
        summary = events(run / "client.jsonl", ev.SUMMARY)[0]
        body = events(run / "client.jsonl", ev.REQUEST_BODY)[0]["bytes"]
        want = expected_ms(body + 20)
        fidelity = json.loads((run / "manifest.json").read_text()).get("fidelity", {})
        print(f"\nkept-alive completions {summary['completion_ms']} ms, expected {want:.1f} ms; "
              f"emulator fidelity {fidelity.get('verdict')}")
        assert events(run / "client.jsonl", ev.WARMUP_DONE)[0]["warm"]
        assert min(summary["completion_ms"]) >= 0.9 * want, (summary, want)   # the path's floor
        return summary, want, fidelity

    def misses(r):
        summary, want, fidelity = r
        why = f"expected {want:.1f} ms ± 10 %, emulator fidelity {fidelity.get('verdict')} {fidelity.get('reasons')}"
        return [f"{name} {value:.1f} ms ({why})" for name, value in (
            ("median", summary["median_ms"]), ("first", summary["completion_ms"][0]))   # the first is not special
            if value != pytest.approx(want, rel=0.10)]
    tries = attempts(measure, misses)
    assert not tries[-1]["misses"], report(tries)


def test_new_connection_stamps_ordered_against_the_capture(tmp_path):
    run = run_testbed(tmp_path, "reqresp", "--topo", "longhaul", "--mode", "new", "--requests", "2",
                      "--capture", "client")
    log = events(run / "client.jsonl")
    offset = next(e["realtime_minus_monotonic_ns"] for e in log if e["event"] == ev.CLOCK)
    pk = packets(run, "client-client-eth0.pcap")
    syn_t = (syns(pk, 5000).ts_ns - offset).tolist()
    data = pk.select((pk.dport == 5000) & (pk.payload_len > 0))
    for req, syn in enumerate(syn_t):
        t = {e["event"]: e["t"] for e in log if e.get("req") == req and e["event"] != ev.TCP_INFO}
        conn = next(e["conn"] for e in log if e["event"] == ev.REQUEST_ISSUED and e["req"] == req)
        sport = next(e["sport"] for e in log if e["event"] == ev.CONN and e["conn"] == conn)
        mine = data.select(data.sport == sport)
        first_wire, last_wire = (int(x - offset) for x in (mine.ts_ns.min(), mine.ts_ns.max()))
        assert syn < t[ev.FIRST_REQUEST_BYTE_SENT] < first_wire, (req, syn, t, first_wire)
        assert t[ev.FIRST_REQUEST_BYTE_SENT] <= t[ev.LAST_REQUEST_BYTE_SENT] \
            <= t[ev.REQUEST_LEFT_SEND_QUEUE] <= t[ev.LAST_RESPONSE_BYTE]
        # notsent_bytes = 0 once the last segment was transmitted: the poll sees it after the
        # capture does (1 ms polls; a loaded machine may delay the poll thread further)
        assert last_wire <= t[ev.REQUEST_LEFT_SEND_QUEUE] + 1_000_000
        print(f"\nreq {req}: SYN → first byte handed over {(t[ev.FIRST_REQUEST_BYTE_SENT] - syn) / 1e6:.1f} ms"
              f" → first payload on the wire {(first_wire - t[ev.FIRST_REQUEST_BYTE_SENT]) / 1e6:.3f} ms;"
              f" last payload on the wire → left_send_queue stamp "
              f"{(t[ev.REQUEST_LEFT_SEND_QUEUE] - last_wire) / 1e6:.2f} ms")
