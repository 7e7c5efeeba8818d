"""C9: streaming audio — the pipeline recurrence, playback with stalls, and a sustained deficit.

The recurrence and the "wait" player are :mod:`testbed.protocols.playback` (the same sans-I/O code
the audio workload runs); this module only feeds it the chapter's example:

    c_i = max(a_i, c_{i−1}) + m_i,  u_i = max(c_i, u_{i−1}) + s_i,  r_i = u_i + d_i,
    p_0 = r_0 + J,  p_i = max(r_i, p_{i−1} + τ);  r_i − (p_{i−1} + τ) > 0 is a stall.

Chunk i is ready at a_i = (i + 1)·τ (live capture); every chunk has one-way delay ``one_way``
except chunk ``late_chunk`` (``late_delay``).  Two notions of initial buffer:

* **start delay J** (``audio``): playback starts J after the first chunk *arrives*.  The smallest
  J without a stall is max_i (r_i − r_0 − i·τ).
* **buffered amount** (``audio-deficit``): ``initial`` seconds of audio are buffered, then audio
  arrives at ``receive_rate`` while playback consumes ``need_rate`` = sample rate × bits ×
  channels; the buffer (initial·need_rate bits) lasts initial·need_rate/(need_rate − receive_rate).
"""
from __future__ import annotations

from dataclasses import dataclass

from testbed.protocols.playback import Playback, chunk_bytes, pipeline

from analysis.models.base import Params, Q, param, register


@dataclass(frozen=True)
class AudioParams(Params):
    chunks: int = param(10, "count", "chunks in the stream", positive=True)
    tau: float = param(0.020, "s", "audio per chunk", low=1e-6)     # Playback counts in ns
    sample_rate: int = param(24000, "count", "samples per second", positive=True, high=384_000)
    sample_bytes: int = param(2, "count", "bytes per sample (16-bit PCM: 2)", positive=True)
    process: float = param(0.012, "s", "processing per chunk m_i")
    send: float = param(0.001, "s", "sending per chunk s_i")
    one_way: float = param(0.005, "s", "one-way delay d_i")
    late_chunk: int = param(2, "count", "the chunk with a longer delay")
    late_delay: float = param(0.050, "s", "that chunk's one-way delay")
    start_delay: float = param(0.040, "s", "J: playback starts J after the first chunk arrives")


def arrivals(p: AudioParams) -> list[float]:
    n = p.chunks
    delay = [p.late_delay if i == p.late_chunk else p.one_way for i in range(n)]
    return pipeline([(i + 1) * p.tau for i in range(n)], [p.process] * n, [p.send] * n, delay)


@register("audio", "C9", "audio pipeline recurrence and playback with stalls (start delay J)",
          AudioParams)
def audio(p: AudioParams) -> dict[str, Q]:
    r = arrivals(p)
    player = Playback(p.tau, p.start_delay, p.chunks)
    for i, t in enumerate(r):
        player.arrive(t, i)
    res = player.wait()
    p0 = res.first_play
    k = min(p.late_chunk, p.chunks - 1)
    ms = 1e3
    first_processed = pipeline([p.tau], [p.process], [0.0], [0.0])[0]
    return {"chunk_bytes": Q(chunk_bytes(p.sample_rate, p.sample_bytes, p.tau), "B", "bytes per chunk"),
            "first_ready": Q(p.tau * ms, "ms", "a_0"),
            "first_processed": Q(first_processed * ms, "ms", "c_0"),
            "first_sent": Q((first_processed + p.send) * ms, "ms", "u_0"),
            "first_arrival": Q(r[0] * ms, "ms", "r_0"),
            "first_play": Q(p0 * ms, "ms", "p_0 = r_0 + J"),
            "late_arrival": Q(r[k] * ms, "ms", "r of the late chunk"),
            "late_slot": Q((p0 + k * p.tau) * ms, "ms", "its slot p_0 + k·tau without stalls"),
            "stalls": Q(res.stalls, "stalls", "stalls of the wait player"),
            "stall_total": Q(res.stall_total * ms, "ms", "total stall time"),
            "min_start_delay": Q(max(t - r[0] - i * p.tau for i, t in enumerate(r)) * ms, "ms",
                                 "smallest J without a stall"),
            "arrivals": Q(tuple(t * ms for t in r), "ms", "r_i"),
            "play_times": Q(tuple(t * ms for t in res.play_times), "ms", "p_i")}


@dataclass(frozen=True)
class DeficitParams(Params):
    sample_rate: int = param(16000, "count", "samples per second", positive=True, high=384_000)
    sample_bits: int = param(16, "count", "bits per sample", positive=True)
    channels: int = param(1, "count", "channels", positive=True)
    receive_rate: float = param(130e3, "bit/s", "rate the audio arrives at")
    initial: float = param(0.060, "s", "audio buffered before playback starts")


@register("audio-deficit", "C9", "how long a buffered amount of audio lasts under a rate deficit",
          DeficitParams)
def deficit(p: DeficitParams) -> dict[str, Q]:
    need = p.sample_rate * p.sample_bits * p.channels
    gap = need - p.receive_rate
    bits = p.initial * need
    return {"need_rate": Q(need / 1e3, "kbit/s", "playback consumes"),
            "deficit": Q(gap / 1e3, "kbit/s", "need − receive rate"),
            "buffered_bits": Q(bits, "bit", "initial audio in bits"),
            "lasts": Q(bits / gap if gap > 0 else float("inf"), "s",
                       "until the first underrun (inf: no deficit)")}
