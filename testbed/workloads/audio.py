"""``audio`` (C9): streamed audio chunks played out with the playback model, over TCP or UDP
(app ``testbed/apps/audio.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from testbed.workloads.base import WORKLOADS, Workload, param


@dataclass(frozen=True)
class AudioParams:
    transport: str = param("tcp", "transport of the stream", side="both", choices=("tcp", "udp"))
    rate: int = param(24000, "sample rate, Hz")
    sample_bytes: int = param(2, "bytes per (mono) sample")
    chunk: str = param("20ms", "chunk duration τ", unit="time")
    duration: str = param("2s", "stream length", unit="time")
    process: str = param("12ms", "server processing per chunk m", unit="time")
    buffer: str = param("40ms,45ms", "initial buffer(s) J of the players as a start delay: playback "
                        "starts J after the first chunk arrives; comma-separated", unit="time")
    prebuffer: str = param("0", "initial buffer as an amount of audio (C9's '60 ms of initial "
                           "audio'): playback also waits until the first ceil(prebuffer/chunk) "
                           "chunks have arrived", unit="time")
    sample: str = param("10ms", "TCP_INFO sampling interval of the server while streaming (TCP)",
                        side="server", unit="time")


def _metrics(run_dir: Path) -> dict:
    from analysis.audio import run_metrics
    return run_metrics(run_dir)


AUDIO = WORKLOADS.register(Workload("audio", "streaming audio (C9) with the playback model",
                                    "testbed.apps.audio", AudioParams, 5002, metrics=_metrics))
