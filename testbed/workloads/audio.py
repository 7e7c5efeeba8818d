"""``audio`` (C9): streamed audio chunks played out with the playback model, over TCP or UDP
(app ``testbed/apps/audio.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from testbed.protocols.playback import chunk_bytes
from testbed.spec.units import parse_time
from testbed.workloads.base import WORKLOADS, ParamError, Workload, param


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

    def validate(self) -> None:
        """Refuse what the app would refuse after bring-up: a rate, sample size or chunk of
        nothing, a chunk of no whole number of bytes (``playback.chunk_bytes``), a stream
        shorter than one chunk."""
        tau = parse_time(self.chunk)
        for name, value, example in (("rate", self.rate, "24000"), ("sample_bytes", self.sample_bytes, "2"),
                                     ("chunk", tau, "20ms")):
            if value <= 0:
                raise ParamError(f"{{{name}}} {getattr(self, name)}: give more than 0, e.g. {example}", name)
        chunk_bytes(self.rate, self.sample_bytes, tau)
        if round(parse_time(self.duration) / tau) < 1:
            raise ParamError(f"{{duration}} {self.duration} is shorter than one chunk ({self.chunk})",
                             "duration")


def _metrics(run_dir: Path) -> dict:
    from analysis.audio import run_metrics
    return run_metrics(run_dir)


AUDIO = WORKLOADS.register(Workload("audio", "streaming audio (C9) with the playback model",
                                    "testbed.apps.audio", AudioParams, 5002, metrics=_metrics))
