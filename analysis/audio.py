"""Playback metrics of the ``audio`` workload (C9), from the client's log.

Times are ms from the stream's origin o (the server read the request; ``testbed.apps.audio``).
From the ``chunk_arrival`` events (r_i: chunk i reached the client application):

* ``audio_late_arrival_ms``: r_k of the latest chunk relative to its place in the stream, k =
  argmax_{i ≥ 1} (r_i − r_0 − i·τ) (the chunk a start delay must cover); None with one chunk.
* ``audio_min_start_ms``: max(0, max_{i ≥ 1} (r_i − r_0 − i·τ)) — the smallest start delay J
  without a stall of the ``wait`` player, from the measured arrivals.

From the client's ``playback`` event of the ``wait`` player (``testbed.protocols.playback``) at
the run's first initial buffer (``--buffer``, the first value; ``--prebuffer`` as given):

* ``audio_first_play_ms``: p_0; ``audio_stall_ms``: its total stall time;
* ``audio_lasts_ms``: first stall's start − p_0 — how long the initial buffer lasted before the
  first underrun (None without a stall).

Plus the run metrics of every workload (``analysis.runmetrics``).
"""
from __future__ import annotations

from pathlib import Path

from analysis import applog


def playback_metrics(events: list[dict], tau_ms: float) -> dict:
    """The metrics above from the client's events (``tau_ms``: the chunk duration)."""
    arr = {e["seq"]: e["arrival_ms"] for e in events if e["event"] == "chunk_arrival"}
    out: dict = {"audio_late_arrival_ms": None, "audio_min_start_ms": None, "audio_first_play_ms": None,
                 "audio_stall_ms": None, "audio_lasts_ms": None}
    if 0 in arr:
        late = {i: r - arr[0] - i * tau_ms for i, r in arr.items() if i >= 1}
        if late:
            k = max(late, key=lambda i: (late[i], -i))
            out["audio_late_arrival_ms"] = arr[k]
            out["audio_min_start_ms"] = max(0.0, late[k])
    plays = [e for e in events if e["event"] == "playback" and e.get("player") == "wait"]
    if plays:
        p = plays[0]
        out["audio_first_play_ms"] = p["first_play"]
        out["audio_stall_ms"] = p["stall_total"]
        if p.get("first_stall") is not None and p["first_play"] is not None:
            out["audio_lasts_ms"] = p["first_stall"] - p["first_play"]
    return out


def run_metrics(run_dir: str | Path) -> dict:
    from analysis.runmetrics import run_metrics as base
    out = base(run_dir)
    events = applog.load(Path(run_dir) / "client.jsonl")
    summary = next((e for e in events if e["event"] == "summary"), None)
    if summary is None or "tau_ms" not in summary:
        out.setdefault("checks", {})["audio_error"] = "the client logged no summary with tau_ms"
        return out
    out.setdefault("metrics", {}).update(playback_metrics(events, summary["tau_ms"]))
    return out
