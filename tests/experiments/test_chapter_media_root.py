"""C8-C11's new steps with real packets (root, userspace emulator), short versions of the reproduce
scenarios: the air's busy intervals on wifi, a late chunk and a buffered amount of audio on
longhaul, a lost image packet and its repair, the common endpoint's failures on dualpath."""
import dataclasses
import json

import numpy as np
import pytest

from experiments.reproduce import cases
from testbed.emulator import linklog
from testbed.run.execute import execute
from testbed.spec.runspec import CaptureSpec, RunSpec
from testbed.spec.schedule import Schedule

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("isolated_state")]


def _load():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def test_airimage_busy_intervals_equal_the_mediums_own_total(tmp_path):
    spec = RunSpec(topology="wifi", backend="userspace", workload="airimage",
                   params={"mode": "reuse", "warmup": 0, "size": "400KB", "reply_size": "100KB",
                           "process": "50ms"}, host={"ack": "quick"}, capture=CaptureSpec("none"), timeout=120)
    r = execute(spec, tmp_path / "air")
    assert r.status == "complete", r.error
    m = r.metrics
    busy = json.loads((r.dir / "emulator" / "summary.json").read_text())["media"]["air"]["busy_ns"]
    print(f"\nload {_load()}: air busy {m['air_busy_ms']:.2f} ms ({m['air_data_frames']} data, "
          f"{m['air_feedback_frames']} feedback frames), medium total {busy / 1e6:.2f} ms")
    assert m["air_busy_ms"] == pytest.approx(busy / 1e6, rel=1e-6)      # no backoff: exact
    assert m["air_data_frames"] >= 500_000 // 1448 and m["air_feedback_frames"] >= m["air_data_frames"] // 3
    assert m["air_data_busy_ms"] > m["air_feedback_busy_ms"] > 0


def test_audio_late_chunk_event_and_buffered_amount(tmp_path):
    """The late chunk arrives at 123 ms (45 ms more than its 78; 118-135 allowed) and playback of
    the 60 ms amount waits for it; the smallest start delay is 45 ms (40-57).  Those windows are
    the timing of the server's 12 ms sleeps and the client's receive, which a busy machine's
    late wake-ups move by more than that (reproduce's C9 rows say so; a chunk held 45 ms can even
    become the latest one): the run is repeated up to ``attempts.ATTEMPTS`` times until one is
    inside them all.  An event not applied, or applied twice, misses in every run."""
    from tests.fixtures.attempts import attempts, report
    links = {"bottleneck.down.schedule": cases.C9_PIPELINE["links.bottleneck.down.schedule"]}
    tp = {k.split(".")[1]: v for k, v in cases.C9_PIPELINE.items() if k.startswith("topology_params")}
    spec = RunSpec(topology="longhaul", workload="audio", links=links,
                   topology_params={**tp, "loss_down": "0%"},
                   params={"transport": "udp", "duration": "200ms", "process": "12ms",
                           "buffer": "40ms", "prebuffer": "60ms"},
                   capture=CaptureSpec("none"), timeout=60)

    def measure():
        r = execute(spec, tmp_path / f"audio{len(list(tmp_path.glob('audio*')))}")
        assert r.status == "complete", r.error
        m = r.metrics
        print(f"\nload {_load()}: first play {m['audio_first_play_ms']:.1f} ms, late chunk at "
              f"{m['audio_late_arrival_ms']:.1f} ms, smallest J {m['audio_min_start_ms']:.1f} ms")
        return m

    def misses(m):
        late, j, play = m["audio_late_arrival_ms"], m["audio_min_start_ms"], m["audio_first_play_ms"]
        out = [] if 118 <= late <= 135 else [f"late chunk at {late:.1f} ms, not 118-135"]   # 123
        out += [] if 40 <= j <= 57 else [f"smallest J {j:.1f} ms, not 40-57"]
        # the 60 ms amount: playback waits for chunk 2 (the late one), later than r_0 + 40 ms
        out += [] if play == pytest.approx(late, abs=0.01) else [f"first play {play:.2f} ms, not at "
                                                                  f"the late chunk's {late:.2f} ms"]
        return out
    tries = attempts(measure, misses)
    assert not tries[-1]["misses"], report(tries)


@pytest.mark.parametrize("copies, engine", [(False, "native"), (True, "native"), (True, "python")])
def test_one_lost_image_packet_stays_lost_until_copies_until(tmp_path, monkeypatch, copies, engine):
    """c8-image-loss.toml's event (frame 1290 of >= 1000 B) on a shorter image: without
    copies_until TCP repairs the gap within a few round trips, before the moment; with
    copies_until = the moment every retransmission before it is dropped too (``dropped_event``
    in the link's frame log) and the gap closes at or after it (times from the origin), in
    both emulator engines."""
    from testbed.emulator import native
    from testbed.emulator.config import ENGINE_ENV
    if engine == "native" and not native.available()[0]:
        pytest.skip(f"native engine not built: {native.available()[1]}")
    monkeypatch.setenv(ENGINE_ENV, engine)
    moment = 2.5
    base = Schedule.load(cases.C8_DELIVERY["links.bottleneck.down.schedule"]).events[0]
    event = dataclasses.replace(base, copies_until=moment if copies else None)
    sched = tmp_path / "loss.toml"
    sched.write_text("[[event]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in event.to_dict().items()))
    spec = RunSpec(topology="longhaul", workload="streams", links={"bottleneck.down.schedule": str(sched)},
                   topology_params={"rate_up": "20mbit", "rate_down": "20mbit", "delay": "10ms",
                                    "loss_down": "0%"},
                   params={"image": "2500KB", "chunks": 4, "schedule": "priority", "audio_start": "500ms"},
                   capture=CaptureSpec(["client"]), timeout=60)
    r = execute(spec, tmp_path / "streams")
    assert r.status == "complete", r.error
    m = r.metrics
    origin = r.link_changes["origin"]["origin_requested_ns"]
    session = next(json.loads(line)["t"] for line in (r.dir / "server.jsonl").open()
                   if '"streams_session"' in line)
    repair_s = (session - origin) / 1e9 + m["image_repair_ms"] / 1e3      # from the origin
    verdicts = np.concatenate([linklog.read_log(p)[1]["verdict"] for p in (r.dir / "emulator").glob("*.frames")])
    dropped = int((verdicts == linklog.EVENT).sum())
    print(f"\nload {_load()}: {engine}, copies_until {event.copies_until}: session start "
          f"{(session - origin) / 1e6:.0f} ms after the origin, gap repaired {repair_s:.3f} s after it, "
          f"{dropped} frame(s) dropped_event")
    assert m["image_gaps"] >= 1 and m["image_repair_ms"] < m["image_done_ms"]
    if copies:
        assert repair_s >= moment and dropped >= 2
    else:
        assert repair_s < moment and dropped == 1


def test_common_failures_drop_both_copies_of_exactly_those_attempts(tmp_path, monkeypatch):
    sched = tmp_path / "fail.toml"
    sched.write_text("".join(f"[[event]]\nframe = {k}\nmin_bytes = 600\ndrop = true\n\n" for k in (3, 7)))
    spec = RunSpec(topology="dualpath", workload="duplicate",
                   links={"access1.up.schedule": str(sched), "access2.up.schedule": str(sched)},
                   params={"chunks": 12, "tau": "10ms", "linger": "300ms"}, capture=CaptureSpec("none"),
                   timeout=60)
    r = execute(spec, tmp_path / "dup")
    assert r.status == "complete", r.error
    m = r.metrics
    assert [i for i, f in enumerate(m["attempt_failed"]) if f] == [2, 6]      # frames 3 and 7
    assert m["received_bytes"] == 2 * 10 * 640 and m["failed_fraction"] == pytest.approx(2 / 12)
