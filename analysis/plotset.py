"""Write every figure and step series of an analysed capture into a directory.

Per TCP flow and direction that sent payload: ``<flow>-<dir>-inflight.csv`` (t_ns, outstanding,
pipe, sacked, wireshark; one row per event, each value holding until the next row) and
``<flow>-<dir>-rates.csv`` (throughput and goodput per bin, bin start relative to the flow's first
packet); per direction that carries data (:func:`carries_data`: not a status line or a short
request beside the flow's data) ``<flow>-<dir>-tseq`` and ``<flow>-<dir>-inflight`` (PNG, SVG,
PDF, or the ``formats`` asked for: ``analysis.plots.formats``) and, per flow,
``<flow>-delivery``: every request and response in those directions; per capture ``timeline``
(swimlane).  ``markers`` [(CLOCK_MONOTONIC ns, text)] — a link's changes
during the run, :func:`link_markers` — are drawn on every figure, and so are ``steps``
(``analysis.applog.steps``: the timed steps of the run's event logs) as shaded spans, on the
timeline in the lane of the log that ran them; steps are left out of a capture whose times could
not be put on CLOCK_MONOTONIC (``clock`` realtime), where they would not line up.
"""
from __future__ import annotations

import re
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from analysis import plots
from analysis.report import series_table

#: the share of its flow's data direction's payload below which a direction carries no data worth
#: a figure (:func:`carries_data`)
MINOR_SHARE = 0.1


def cwnd_samples(events: list[dict], host: str, port: int):
    """TCP_INFO samples (``tcp_info`` events) of the socket at host:port -> (t_ns, bytes)."""
    t, b = [], []
    for e in events:
        if e.get("event") != "tcp_info" or "snd_cwnd" not in e:
            continue
        if e.get("src") not in (None, host) or e.get("sport") not in (None, port):
            continue
        t.append(e["t"])
        b.append(e["snd_cwnd"] * e.get("snd_mss", 1))
    return np.asarray(t, np.int64), np.asarray(b, np.int64)


def carries_data(obj: dict, d: str) -> bool:
    """Whether direction ``d`` ("c2s"/"s2c") of an analysed flow carries data worth a figure:
    it sent payload, at least :data:`MINOR_SHARE` of the flow's data direction's (the 16-byte
    reply to a 3 MB upload, a short request before a large response carry none)."""
    dirs = obj.get("directions", {})
    if d not in dirs or not dirs[d].payload_bytes:
        return False
    return dirs[d].payload_bytes >= MINOR_SHARE * max(x.payload_bytes for x in dirs.values())


def link_markers(frame_logs) -> list[tuple[int, str]]:
    """[(actual_ns, "<direction>: <what>")] of every schedule change recorded beside these
    emulator frame logs (``testbed.emulator.linklog.read_changes``), in time order."""
    from testbed.emulator.linklog import read_changes
    out = []
    for path in frame_logs:
        got = read_changes(path)
        if got is not None:
            name = Path(path).name.removesuffix(".frames")
            out += [(int(c["actual_ns"]), f"{name}: {c['what']}") for c in got[1]]
    return sorted(out)


def _rel(markers, t0: int) -> list[tuple[float, str]]:
    return [((t - t0) / 1e9, text) for t, text in markers]


def _on_clock(result: dict, steps) -> list:
    """``steps`` when the capture's times are on CLOCK_MONOTONIC (the logs' clock), else []."""
    return list(steps) if result.get("clock") == "monotonic" else []


def write(result: dict, outdir: str | Path, markers: list[tuple[int, str]] = (),
          steps=(), formats: tuple[str, ...] | None = None) -> list[str]:
    """The files of the module docstring, written into ``outdir``; each figure as ``formats``
    (suffixes; None: as ``analysis.plots.formats`` says, by default ``plots.FORMATS``)."""
    with nullcontext() if formats is None else plots.formats(formats):
        steps = _on_clock(result, steps)
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        written: list[str] = []
        objs = result["_objects"]["flows"]
        lanes: dict = {}
        t_first = min((r["t0_ns"] for r in result["flows"]), default=0)
        for rec, obj in zip(result["flows"], objs):
            f = obj["flow"]
            name = re.sub(r"[^\w.-]", "_", f.key.name)            # a file name: no ':' or brackets
            for d, direction in obj.get("directions", {}).items():
                if not direction.payload_bytes or not len(direction.tracker.series_t):
                    continue            # no data this way: no figure, no series
                base = out / f"{name}-{d}"
                if carries_data(obj, d):
                    written += _direction_figures(rec, obj, d, base, _rel(markers, rec["t0_ns"]), steps)
                csv = Path(f"{base}-inflight.csv")
                np.savetxt(csv, series_table(direction), fmt="%d", delimiter=",",
                           header="t_ns,outstanding,pipe,sacked,wireshark", comments="")
                written.append(str(csv))
                rates = Path(f"{base}-rates.csv")
                nb = len(direction.throughput_bps)
                np.savetxt(rates, np.column_stack([np.arange(nb) * direction.bin_ns / 1e9,
                                                   direction.throughput_bps, direction.goodput_bps]),
                           fmt="%.6f", delimiter=",", header="bin_start_s,throughput_bps,goodput_bps",
                           comments="")
                written.append(str(rates))
                if d == rec.get("data_direction"):
                    rec["in_flight"]["path"] = str(csv)
                rec["directions"][d]["in_flight"]["path"] = str(csv)
            streams = _delivered(obj)
            if streams:
                parts = dict.fromkeys(k.split()[0] + "s" for k in streams)
                written += plots.delivery(streams, rec["t0_ns"], out / f"{name}-delivery",
                                          title=f"{f.key.name}: {' and '.join(parts)}",
                                          markers=_rel(markers, rec["t0_ns"]), steps=steps)
            _lanes(lanes, obj, skip=("step",) if steps else ())
        if lanes:
            written += plots.swimlane(lanes, t_first, out / "timeline",
                                      title=f"{Path(result['file']).name}: handshake and completion "
                                            "(packet events at the capture point)",
                                      markers=_rel(markers, t_first), steps=steps,
                                      step_lanes={s.log: _app_lane(s.log) for s in steps})
        return written


def _direction_figures(rec: dict, obj: dict, d: str, base: Path, marks, steps) -> list[str]:
    """The time-sequence and in-flight figures of direction ``d`` of a flow (``rec``: its
    summary, ``obj``: its analysis), titled with where the data's direction was captured when that
    is near its receiver."""
    f = obj["flow"]
    direction = obj["directions"][d]
    view = ("\ncaptured near the data's receiver: what it saw, not the sender's own view"
            if (rec.get("vantage") or {}).get("sender_side") is False and d == rec.get("data_direction")
            else "")
    written = plots.time_sequence(direction, rec["t0_ns"], base.with_name(base.name + "-tseq"),
                                  title=f"{f.key.name} {d}{view}", markers=marks, steps=steps)
    sender = (f.key.client, f.key.client_port) if direction.sender == "client" else \
        (f.key.server, f.key.server_port)
    cw = cwnd_samples(obj["events"], *sender)
    return written + plots.in_flight(direction, rec["t0_ns"], base.with_name(base.name + "-inflight"),
                                     cwnd=cw if len(cw[0]) else None, title=f"{f.key.name} {d}{view}",
                                     markers=marks, steps=steps)


def write_qlog(traces, outdir: str | Path, stem: str, markers: list[tuple[int, str]] = (),
               steps=(), formats: tuple[str, ...] | None = None) -> list[str]:
    """QUIC figures of the first trace: in-order delivery per stream (received streams, or
    sent ones when the trace received none) and bytes_in_flight / cwnd (qlog times are put on
    the logs' clock by ``analysis.qlog.load``); ``formats`` as :func:`write`'s."""
    from analysis import qlog
    with nullcontext() if formats is None else plots.formats(formats):
        tr = traces[0]
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        t0 = min((int(a["t_ns"].min()) for a in (tr.sent, tr.received) if len(a)), default=0)
        sent = not (~tr.frames["sent"]).any()
        ids = np.unique(tr.frames["stream"][tr.frames["sent"] == sent])
        streams = {f"stream {int(s)}": qlog.delivered(tr, int(s), sent=sent) for s in ids}
        written = plots.delivery(streams, t0, out / f"{stem}-delivery",
                                 title=f"QUIC ({tr.vantage}): per-stream delivery",
                                 markers=_rel(markers, t0), steps=steps)
        m = {k: tr.metrics[k] for k in ("bytes_in_flight", "cwnd") if k in tr.metrics}
        if m:
            written += plots.steps(m, t0, out / f"{stem}-inflight", "kB",
                                   f"QUIC ({tr.vantage}): bytes in flight and cwnd", scale=1e-3,
                                   markers=_rel(markers, t0), spans=steps)
        return written


def _delivered(obj) -> dict:
    """{"request K" / "response K": (t_ns, bytes of it delivered in order)} of a flow's exchanges,
    in the directions that carry data (:func:`carries_data`): the receiver's cumulative ACK
    from the part's first byte, each part's bytes following the ones before it."""
    streams = {}
    for d, part in (("c2s", "request"), ("s2c", "response")):
        if not carries_data(obj, d):
            continue
        direction = obj["directions"][d]
        tr = direction.trace
        m = tr["has_ack"]
        t, una = tr["t"][m], np.maximum.accumulate(tr["ack"][m]) - direction.tracker.data_start
        start = 0
        for ex in obj.get("exchanges", ()):
            size = ex.get(f"{part}_bytes", 0)
            if size:
                streams[f"{part} {ex['request']}"] = (t, np.clip(una - start, 0, size))
            start += size
    return streams


def _app_lane(log: str) -> str:
    return f"app {log}".strip()


def _lanes(lanes: dict, obj: dict, skip: tuple = ()) -> None:
    f = obj["flow"]
    client, server = f"{f.key.client}", f"{f.key.server}"
    short = f":{f.key.client_port}"
    at_client = {"syn", "ack", "tls_client_hello", "first_app_data", "fin_c2s"}
    for ev, t in obj.get("handshake", {}).items():
        if ev.startswith(("first_payload", "last_payload")):
            continue
        lane = client if ev in at_client else server if ev != "rst" else client
        lanes.setdefault(lane, []).append((t, f"{ev}{short}"))
    for ex in obj.get("exchanges", []):
        k = ex["request"]
        for key, lane in (("request_first", client), ("response_first", server),
                          ("response_last", server), ("response_acked", client)):
            if key in ex:
                lanes.setdefault(lane, []).append((ex[key], f"{key}#{k}{short}"))
    for e in obj["events"]:
        if e.get("event") in ("tcp_info", "clock", *skip):
            continue
        lane = _app_lane(e.get("log", ""))
        lanes.setdefault(lane, []).append((e["t"], str(e["event"])))
