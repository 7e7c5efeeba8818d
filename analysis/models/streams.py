"""C8: several streams on one path — sending order, delivery order, deadlines.

* ``streams``: a large image (``image_time`` s of sending, ready at 0) and an audio message
  (``audio_time`` s of sending, ready at ``audio_ready``) share one link.  FIFO sends in arrival
  order; audio-first preempts the image while audio is pending.  With audio-first sending, an
  image packet sent before the audio is lost and repaired at ``repair`` s: connection-wide
  in-order delivery (HTTP/2 over TCP) hands the audio over only once the gap is filled,
  max(audio complete, repair); per-stream delivery (QUIC) when the audio is complete.
* ``deadlines``: ``chunks`` audio chunks of ``chunk_bytes`` B, chunk i ready at i·τ and due at
  ``first_due`` + i·τ, share a ``rate`` link with an image of ``image`` B queued at 0.  FIFO
  sends each chunk after everything queued before it; media priority sends it as soon as the
  current packet (``packet`` B) is out.  Arrival = send end + one-way delay.  Usable audio = τ ×
  chunks arriving by their deadline.
"""
from __future__ import annotations

from dataclasses import dataclass

from analysis.models.base import Params, Q, param, register


@dataclass(frozen=True)
class StreamsParams(Params):
    image_time: float = param(5.0, "s", "sending time of the image")
    audio_time: float = param(1.0, "s", "sending time of the audio")
    audio_ready: float = param(2.0, "s", "when the audio is ready to send")
    repair: float = param(7.0, "s", "when the lost image packet sent before the audio is repaired")


@register("streams", "C8", "FIFO vs audio-first sending; connection-wide vs per-stream delivery",
          StreamsParams)
def streams(p: StreamsParams) -> dict[str, Q]:
    fifo_image = p.image_time
    fifo_audio = max(p.audio_ready, fifo_image) + p.audio_time
    prio_audio = p.audio_ready + p.audio_time if p.audio_ready < p.image_time else fifo_audio
    prio_image = p.image_time + p.audio_time if p.audio_ready < p.image_time else fifo_image
    return {"fifo_image_done": Q(fifo_image, "s", "FIFO: image sent"),
            "fifo_audio_done": Q(fifo_audio, "s", "FIFO: audio sent"),
            "prio_audio_done": Q(prio_audio, "s", "audio first: audio sent"),
            "prio_image_done": Q(prio_image, "s", "audio first: image sent"),
            "hol_audio_delivery": Q(max(prio_audio, p.repair), "s",
                                    "audio handed over, connection-wide in-order (HTTP/2 over TCP)"),
            "per_stream_audio_delivery": Q(prio_audio, "s", "audio handed over, per stream (QUIC)")}


@dataclass(frozen=True)
class DeadlineParams(Params):
    chunks: int = param(8, "count", "audio chunks", positive=True)
    tau: float = param(0.02, "s", "audio per chunk (chunk i ready at i·tau)", positive=True)
    chunk_bytes: float = param(640, "B", "bytes per chunk (16 kHz 16-bit PCM, 20 ms)")
    first_due: float = param(0.4, "s", "deadline of chunk 0 (chunk i: first_due + i·tau)")
    image: float = param(30e6, "B", "image queued at 0 on the same link (C1)")
    rate: float = param(20e6, "bit/s", "link rate", positive=True)
    one_way: float = param(0.05, "s", "one-way delay")
    packet: float = param(1228, "B", "largest packet a chunk may wait behind under priority")


def deadline_arrivals(p: DeadlineParams, priority: bool) -> list[float]:
    image_end = p.image * 8 / p.rate
    out, link_free = [], 0.0
    for i in range(p.chunks):
        ready = i * p.tau
        if priority:
            start = max(ready, link_free) + (p.packet * 8 / p.rate if ready < image_end else 0.0)
        else:
            start = max(ready, link_free, image_end)
        link_free = start + p.chunk_bytes * 8 / p.rate
        out.append(link_free + p.one_way)
    return out


@register("deadlines", "C8", "audio chunks with deadlines behind an image: FIFO vs media priority",
          DeadlineParams)
def deadlines(p: DeadlineParams) -> dict[str, Q]:
    res = {}
    for name, prio in (("fifo", False), ("priority", True)):
        arr = deadline_arrivals(p, prio)
        late = sum(a > p.first_due + i * p.tau for i, a in enumerate(arr))
        res[f"{name}_late"] = Q(late, "chunks", f"{name}: chunks after their deadline")
        res[f"{name}_usable"] = Q((p.chunks - late) * p.tau, "s", f"{name}: audio on time")
        res[f"{name}_last_arrival"] = Q(arr[-1], "s", f"{name}: last chunk arrives")
    return res
