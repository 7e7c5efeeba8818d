"""analysis.audio without root: playback metrics from synthetic client events (C9's example)."""
import pytest

from analysis.audio import playback_metrics


def test_the_late_chunk_the_smallest_start_delay_and_the_stall():
    arr = [38.0, 58.0, 123.0, 98.0, 118.0]            # chunk 2 at 50 ms one way (C9)
    events = [{"event": "chunk_arrival", "seq": i, "arrival_ms": r} for i, r in enumerate(arr)]
    events.append({"event": "playback", "player": "skip", "first_play": 1.0, "stall_total": 9.0})
    events.append({"event": "playback", "player": "wait", "first_play": 78.0, "stall_total": 5.0,
                   "first_stall": 118.0})
    m = playback_metrics(events, 20.0)
    assert m["audio_late_arrival_ms"] == 123.0
    assert m["audio_min_start_ms"] == pytest.approx(45.0)          # 123 − 38 − 2·20
    assert (m["audio_first_play_ms"], m["audio_stall_ms"]) == (78.0, 5.0)   # the wait player
    assert m["audio_lasts_ms"] == pytest.approx(40.0)


def test_no_chunks_no_stall():
    m = playback_metrics([{"event": "playback", "player": "wait", "first_play": 50.0,
                           "stall_total": 0.0, "first_stall": None}], 20.0)
    assert m["audio_late_arrival_ms"] is None and m["audio_lasts_ms"] is None
    on_time = [{"event": "chunk_arrival", "seq": i, "arrival_ms": 38.0 + 20 * i} for i in range(3)]
    assert playback_metrics(on_time, 20.0)["audio_min_start_ms"] == 0.0
