"""Workload records of streams and paths:

* ``streams`` (C8): audio chunks and a large image on one connection, over TCP (one framed,
  multiplexed byte stream: connection-wide order) or QUIC (aioquic, one stream per kind:
  per-stream order).  App ``testbed/apps/streams.py``; metrics ``analysis/streams.py``.
* ``airbulk`` (C10): the ``bulk`` app on a shared air interface, metrics with the airtime of
  data and ACK exchanges (``analysis/airtime.py``).
* ``airimage`` (C10): the ``reqresp`` app (C1's image request: upload, processing, download)
  on a shared air interface, with the same airtime metrics, among them the medium's busy time
  from the frame logs (``analysis.airtime.medium_busy``).
* ``multipath`` (C11): one path, split over two connections, or MPTCP
  (``testbed/apps/multipath.py``); ``duplicate`` (C11): audio chunks on one or both paths
  (``testbed/apps/duplicate.py``); metrics ``analysis/multipath.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from testbed.spec.errors import UsageError
from testbed.workloads.base import WORKLOADS, ParamError, Workload, param
from testbed.workloads.bulk import BulkParams
from testbed.workloads.reqresp import ReqRespParams

STREAMS_PORT = 5004


@dataclass(frozen=True)
class StreamsParams:
    transport: str = param("tcp", "tcp: HTTP/2-like frames on one TCP connection; quic: one QUIC "
                           "stream per kind (aioquic; qlog and TLS key log in the run directory)",
                           side="both", choices=("tcp", "quic"))
    schedule: str = param("fifo", "sender order: fifo (ready order; the image is queued first) or "
                          "priority (a ready audio chunk before any image frame)", side="server",
                          choices=("fifo", "priority"))
    image: str = param("1MB", "image size", side="both", unit="size")
    frame: str = param("16KB", "image frame size (at most 65535 B)", side="server", unit="size")
    chunks: int = param(8, "audio chunks", side="both")
    chunk_bytes: str = param("960", "bytes per audio chunk (C9: 20 ms of 24 kHz 16-bit PCM)",
                             side="both", unit="size")
    tau: str = param("20ms", "audio chunk duration: chunk i is ready at audio_start + i·tau",
                     side="server", unit="time")
    audio_start: str = param("0", "when the first audio chunk is ready, from the session start",
                             side="server", unit="time")
    deadline: str = param("400ms", "chunk i is due at the receiver at deadline + i·tau from the "
                          "session start", side="server", unit="time")
    lowat: str = param("16KB", "unsent bytes the sender lets the transport hold (TCP_NOTSENT_LOWAT; "
                       "QUIC: aioquic's unsent stream bytes), so the app's schedule decides the order",
                       side="server", unit="size")
    resume: bool = param(False, "QUIC: an untimed first connection fetches a session ticket; the "
                         "timed one resumes with it and sends its request as 0-RTT data")

    def validate(self) -> None:
        from testbed.spec.units import parse_size
        if self.resume and self.transport != "quic":
            raise ValueError("resume needs transport quic (TLS over TCP is the reqresp workload's)")
        if self.chunks < 0:
            raise ValueError(f"chunks {self.chunks} must be >= 0")
        for name in ("frame", "chunk_bytes"):
            if not 1 <= parse_size(getattr(self, name)) <= 65535:
                raise ValueError(f"{name} {getattr(self, name)} must be 1..65535 bytes")


def _check(p: StreamsParams, spec, topo) -> None:
    if p.transport == "quic" and spec.socket:
        raise UsageError(f"streams over QUIC: TCP socket factors ({', '.join(spec.socket)}) do not apply")


def _metrics(run_dir: Path) -> dict:
    from analysis.streams import run_metrics
    return run_metrics(run_dir, STREAMS_PORT)


STREAMS = WORKLOADS.register(Workload(
    "streams", "audio chunks and an image on one connection: TCP-multiplexed vs QUIC streams (C8)",
    "testbed.apps.streams", StreamsParams, STREAMS_PORT, metrics=_metrics, check=_check))


def _check_air(p, spec, topo) -> None:
    if not any(info.get("medium") is not None for info in topo.named.values()):
        raise UsageError(f"airbulk accounts the airtime of a shared medium; topology "
                         f"{spec.topology!r} has none (use --topo wifi)")


def _air_metrics(run_dir: Path) -> dict:
    from analysis.airtime import run_metrics
    return run_metrics(run_dir)


AIRBULK = WORKLOADS.register(Workload(
    "airbulk", "bulk transfer on a shared air interface, with data/ACK airtime from the frame "
    "logs next to the C10 model (topology wifi, userspace backend)", "testbed.apps.bulk",
    BulkParams, 5001, metrics=_air_metrics, check=_check_air))


def _air_reqresp(p, spec, topo) -> None:
    _check_air(p, spec, topo)
    if p.transport != "tcp" or p.path != "direct":
        raise UsageError("airimage runs TCP requests on the direct path (transport tcp, path direct)")


AIRIMAGE = WORKLOADS.register(Workload(
    "airimage", "request/response (C1's image) on a shared air interface, with the medium's busy "
    "time of data and feedback frames from the frame logs (C10, topology wifi, userspace backend)",
    "testbed.apps.reqresp", ReqRespParams, 5000, metrics=_air_metrics, check=_air_reqresp))


@dataclass(frozen=True)
class MultipathParams:
    scheme: str = param("split", "single: one connection on the first path; split: one connection "
                      "per path, bytes in proportion to weights; mptcp: one MPTCP connection",
                      side="both", choices=("single", "split", "mptcp"))
    size: str = param("30MB", "bytes to upload S", unit="size")
    paths: str = param("10.0.1.1,10.0.2.1", "client source address of each path (topology dualpath)")
    weights: str = param("20mbit,10mbit", "split: configured rate of each path (the topology's "
                         "rate1,rate2); path i gets S·w_i/Σw")

    def validate(self) -> None:
        from testbed.spec.units import parse_rate
        if len([a for a in self.paths.split(",") if a]) < 1 + (self.scheme != "single"):
            raise ValueError(f"paths {self.paths!r}: scheme {self.scheme} needs two addresses")
        if self.scheme == "split":
            weights = [parse_rate(w) for w in self.weights.split(",")]
            if len(weights) != len(self.paths.split(",")) or min(weights) <= 0:
                raise ValueError(f"weights {self.weights!r}: one positive rate per path")


@dataclass(frozen=True)
class DuplicateParams:
    send: str = param("duplicate", "single: each chunk on the first path; duplicate: on every path",
                      choices=("single", "duplicate"))
    chunks: int = param(50, "audio chunks")
    chunk_bytes: str = param("640", "bytes per chunk (C11: 640)", unit="size")
    tau: str = param("20ms", "one chunk every tau", unit="time")
    paths: str = param("10.0.1.1,10.0.2.1", "client source address of each path (topology dualpath)")
    linger: str = param("500ms", "wait after the last chunk before exiting", unit="time")

    def validate(self) -> None:
        if self.chunks < 1:
            raise ValueError(f"chunks {self.chunks} must be >= 1")


def _needs_paths(p, spec, topo) -> None:
    """Two access paths (topology dualpath), and every address of ``paths`` one of the
    client's (``TestbedTopo.addresses``): the app binds to each."""
    if topo is None or not hasattr(topo, "hosts") or "gw" not in set(topo.hosts()):
        raise UsageError(f"{spec.workload} needs two access paths (topology dualpath), not "
                         f"{spec.topology!r}")
    client = spec.client_host or topo.roles["client"]
    own = topo.addresses(client)
    foreign = [a for a in p.paths.split(",") if a and a not in own]
    if foreign:
        raise ParamError(f"{{paths}} {p.paths}: {', '.join(foreign)} not an address of the client "
                         f"(host {client!r} of topology {spec.topology!r}); its addresses: "
                         f"{', '.join(own)}", "paths", workload=spec.workload)


def _multipath_metrics(run_dir: Path) -> dict:
    from analysis.multipath import run_metrics
    return run_metrics(run_dir)


def _duplicate_metrics(run_dir: Path) -> dict:
    from analysis.multipath import duplicate_metrics
    return duplicate_metrics(run_dir)


MULTIPATH = WORKLOADS.register(Workload(
    "multipath", "upload over one path, split over two connections, or MPTCP (C11, dualpath)",
    "testbed.apps.multipath", MultipathParams, 5005, metrics=_multipath_metrics, check=_needs_paths))
DUPLICATE = WORKLOADS.register(Workload(
    "duplicate", "audio chunks on one path or duplicated on both, first copy wins (C11, dualpath)",
    "testbed.apps.duplicate", DuplicateParams, 5006, metrics=_duplicate_metrics, check=_needs_paths,
    socket_factors=False))
