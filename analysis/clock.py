"""Put capture timestamps on the testbed's clock (CLOCK_MONOTONIC ns).

pcaps carry CLOCK_REALTIME.  :mod:`testbed.host.capture` writes
``realtime - monotonic`` at capture start and stop to ``<pcap>.meta.json``;
the mean of the two is subtracted.  ``drift_ns`` (stop - start) says how much
the realtime clock was stepped or slewed during the capture.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.applog import read_object


def meta_path(pcap: str | Path) -> Path:
    return Path(str(pcap) + ".meta.json")


def load_meta(pcap: str | Path) -> dict | None:
    """The sidecar written by ``testbed.host.capture.Capture.stop``, or None when there is none;
    a ValueError naming it when it is not a JSON object."""
    return read_object(meta_path(pcap))


def monotonic(ts_ns: np.ndarray, pcap: str | Path,
              fallback_offset_ns: int | None = None) -> tuple[np.ndarray, dict]:
    """(times on CLOCK_MONOTONIC if a sidecar exists, else unchanged; clock description).

    ``fallback_offset_ns`` (e.g. from an application log's ``clock`` event) is used
    when the capture has no sidecar; it is exact only if the realtime clock was not
    stepped between the two readings."""
    meta = load_meta(pcap)
    if not meta and fallback_offset_ns is not None:
        return ts_ns - fallback_offset_ns, {"clock": "monotonic", "offset_ns": fallback_offset_ns,
                                            "offset_from": "application log clock event"}
    if not meta:
        return ts_ns, {"clock": "realtime", "note": "no .meta.json sidecar: times are the "
                       "capture's CLOCK_REALTIME and cannot be joined to monotonic logs by time"}
    a, b = int(meta["offset_start_ns"]), int(meta["offset_stop_ns"])
    off = (a + b) // 2
    return ts_ns - off, {"clock": "monotonic", "offset_ns": off, "drift_ns": b - a,
                         "dropped_by_kernel": meta.get("dropped_by_kernel"),
                         "captured": meta.get("captured"),
                         "capture_warnings": meta.get("warnings", [])}
