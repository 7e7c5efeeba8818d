"""The playback model against CHAPTER12.md C9's worked examples, in virtual time (ms)."""
import pytest

from testbed.protocols.playback import Playback, chunk_bytes, pipeline

TAU = 20.0


def c9_arrivals(n, delays):
    """24 kHz mono 16-bit, 20 ms chunks: ready (i+1)·20, processing 12, send 1, one-way d_i."""
    return pipeline([TAU * (i + 1) for i in range(n)], [12.0] * n, [1.0] * n, delays)


def play(arrivals, j):
    pb = Playback(TAU, j, len(arrivals))
    for i, r in enumerate(arrivals):
        pb.arrive(r, i)
    return pb


def test_chunk_size_and_first_chunk_timeline():
    assert chunk_bytes(24000, 2, 0.020) == 960
    r = c9_arrivals(1, [5.0])
    assert r == [38.0]                       # ready 20, processed 32, sent 33, arrives 38
    assert play(r, 40.0).wait().first_play == 78.0


def test_late_chunk_stalls_5ms_and_j45_avoids_it():
    r = c9_arrivals(6, [5.0, 5.0, 50.0, 5.0, 5.0, 5.0])
    assert r[2] == 123.0
    wait = play(r, 40.0).wait()
    assert wait.stalls == 1 and wait.stall_total == pytest.approx(5.0)
    assert wait.play_times[2] == 123.0 and wait.play_times[3] == 143.0   # everything shifts by 5
    assert wait.on_time == pytest.approx(2 * TAU)                         # chunks 0, 1 at slot
    skip = play(r, 40.0).skip()
    assert skip.stalls == 1 and skip.stall_total == TAU and skip.played == 5
    assert skip.on_time == pytest.approx(5 * TAU)
    for res in (play(r, 45.0).wait(), play(r, 45.0).skip()):
        assert res.stalls == 0 and res.stall_total == 0 and res.on_time == pytest.approx(6 * TAU)


def test_sustained_deficit_60ms_lasts_about_0_12s():
    """16 kHz 16-bit (256 kbit/s) received at 130 kbit/s; start with 60 ms buffered."""
    tau, n = 1.0, 400                          # 1 ms chunks of 32 B = 256 bit
    arrivals = [(i + 1) * 256 / 130_000 * 1e3 for i in range(n)]
    j = arrivals[59] - arrivals[0]             # 60 chunks (60 ms of audio) buffered at p_0
    pb = Playback(tau, j, n)
    for i, r in enumerate(arrivals):
        pb.arrive(r, i)
    res = pb.wait()
    first_stall = next(i for i in range(1, n) if arrivals[i] > res.play_times[i - 1] + tau)
    lasted_ms = res.play_times[first_stall - 1] + tau - res.first_play
    assert lasted_ms == pytest.approx(15_360 / 126_000 * 1e3, abs=2 * tau)   # ≈ 121.9 ms


def test_lost_chunk_blocks_wait_player_and_is_silence_for_skip():
    r = c9_arrivals(4, [5.0] * 4)
    pb = Playback(TAU, 40.0, 4)
    for i in (0, 1, 3):
        pb.arrive(r[i], i)
    wait, skip = pb.wait(), pb.skip()
    assert not wait.completed and wait.played == 2 and wait.stuck_at == 2
    assert skip.played == 3 and skip.stalls == 1 and skip.stall_total == TAU


def test_duplicates_and_bad_input():
    pb = Playback(TAU, 0.0, 2)
    pb.arrive(1.0, 0)
    pb.arrive(50.0, 0)
    assert pb.wait().first_play == 1.0
    with pytest.raises(ValueError):
        Playback(0, 10, 3)
    with pytest.raises(ValueError):
        chunk_bytes(44100, 2, 0.0101)


def test_prebuffer_is_an_amount_of_audio_and_the_first_stall_is_reported():
    """C9's deficit: 640 B chunks every 20 ms of audio arrive every 39.4 ms (130 of 256 kbit/s);
    playback starts once 60 ms of audio (3 chunks) are in and underruns at chunk 5's slot."""
    arrivals = [76.4 + 39.4 * i for i in range(8)]
    pb = Playback(TAU, 0.0, 8, prebuffer=60.0)
    for i, r in enumerate(arrivals):
        pb.arrive(r, i)
    res = pb.wait()
    assert res.first_play == pytest.approx(arrivals[2])            # chunks 0-2 in
    assert res.first_stall == pytest.approx(arrivals[2] + 5 * TAU)  # chunk 5 due, not there
    assert pb.skip().first_stall == pytest.approx(arrivals[2] + 5 * TAU)
    assert Playback(TAU, 40.0, 8, prebuffer=0.0).prebuffer_chunks == 0
    late = Playback(TAU, 40.0, 2, prebuffer=30.0)       # 2 chunks; J still applies when later
    late.arrive(10.0, 0)
    late.arrive(12.0, 1)
    assert late.wait().first_play == 50.0 and late.wait().first_stall is None
    missing = Playback(TAU, 0.0, 3, prebuffer=60.0)
    missing.arrive(10.0, 0)
    assert missing.wait().first_play is None
