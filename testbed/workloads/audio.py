"""``audio`` (C9): streamed audio chunks played out with the playback model, over TCP or UDP
(app ``testbed/apps/audio.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from testbed.workloads.base import WORKLOADS, Workload, param


@dataclass(frozen=True)
class AudioParams:
    transport: str = param("tcp", "transport of the stream", side="both", choices=("tcp", "udp"))
    rate: int = param(24000, "sample rate, Hz")
    sample_bytes: int = param(2, "bytes per (mono) sample")
    chunk: str = param("20ms", "chunk duration τ", unit="time")
    duration: str = param("2s", "stream length", unit="time")
    process: str = param("12ms", "server processing per chunk m", unit="time")
    buffer: str = param("40ms,45ms", "initial buffer(s) J of the players, comma-separated", unit="time")
    sample: str = param("10ms", "TCP_INFO sampling interval of the server while streaming (TCP)",
                        side="server", unit="time")


AUDIO = WORKLOADS.register(Workload("audio", "streaming audio (C9) with the playback model",
                                    "testbed.apps.audio", AudioParams, 5002))
