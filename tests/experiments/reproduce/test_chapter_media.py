"""C8-C11's reproduce scenarios derive from the models' inputs (no root): the sets cases.py
computes, the schedule files they name and the experiment definitions agree."""
import math
import tomllib
from pathlib import Path

import pytest

from analysis.models import evaluate
from analysis.models.streams import StreamsParams
from experiments.definition import load_definition
from experiments.reproduce import cases
from testbed.spec.schedule import Schedule


def test_c8_sizes_are_the_models_sending_times_at_the_links_payload_rate():
    sets = cases.c8_sets()
    goodput = 8e6 * 1448 / 1514 / 8
    assert int(sets["params.image"]) == round(5 * goodput)
    assert int(sets["params.chunk_bytes"]) * 16 == pytest.approx(1 * goodput, abs=16)
    base = load_definition("c8-order").base
    for key, value in sets.items():      # the definition runs the derived scenario on its own too
        section, name = key.split(".")
        assert str(base[section][name]) == value, key
    assert evaluate("streams")["prio_audio_done"].value == 3


def test_c8_loss_event_is_one_data_frame_lost_until_the_models_repair():
    sch = Schedule.load(Path(cases.C8_DELIVERY["links.bottleneck.down.schedule"]))
    (ev,) = sch.events
    assert ev.drop and ev.count == 1 and ev.min_bytes == 1000
    assert ev.copies_until == StreamsParams().repair      # the chapter's input, not a second number


def test_c9_link_and_late_chunk_follow_the_audio_model():
    p = evaluate("audio")
    sets = cases.c9_sets()
    assert sets["topology_params.rate_down"] == "8.144mbit"     # (960 + 58) B in 1 ms
    assert sets["topology_params.delay"] == "5ms" and sets["params.process"] == "12ms"
    (ev,) = Schedule.load(Path(sets["links.bottleneck.down.schedule"])).events
    assert ev.frame == 2 + 1 and ev.delay == pytest.approx(0.050 - 0.005)   # late_chunk 2, 50 ms
    assert p["late_arrival"].value == 123
    base = load_definition("c9-audio").base
    assert base["topology_params"]["rate_down"] == sets["topology_params.rate_down"]


def test_c9_deficit_link_delivers_the_pcm_at_the_receive_rate():
    sets = cases.c9_deficit_sets()
    rate = float(sets["topology_params.rate_down"].removesuffix("kbit")) * 1e3
    assert rate * 640 / (640 + cases.AUDIO_FRAME_OVERHEAD) == pytest.approx(130e3, rel=1e-5)
    assert load_definition("c9-deficit").base["topology_params"]["rate_down"] == sets["topology_params.rate_down"]


def test_c11_common_failures_file_is_the_seeded_draw_and_attempts_suffice():
    frames = cases.c11_common_failures()
    data = tomllib.loads(Path(cases.C11_FAIL["links.access1.up.schedule"]).read_text())
    assert [e["frame"] for e in data["event"]] == frames
    assert all(e["drop"] and e["min_bytes"] == 600 for e in data["event"])
    assert 0 < len(frames) < 400 * 0.05
    n = cases.attempts_needed(0.025, 0.005)
    assert 1.96 * math.sqrt(0.025 * 0.975 / n) <= 0.02 < 1.96 * math.sqrt(0.025 * 0.975 / (n - 1))
    assert load_definition("c11-fail").base["params"]["chunks"] >= n


def test_pooled_max_is_the_worst_run(monkeypatch):
    """C9.real_stall_max: the worst reception of the level's runs, n = runs."""
    import experiments.reproduce.run as rr
    monkeypatch.setattr(rr, "pooled_runs", lambda *a, **k: [[360.0], [1440.0], [800.0], [500.0], [700.0]])
    value, ci, n, why = rr.pooled("x", {}, cases.Measure("e", "audio_stall_ms", "40ms", statistic="pooled_max"))
    assert value == 1440.0 and n == 5 and not why and ci[0] <= value <= ci[1] == 1440.0
