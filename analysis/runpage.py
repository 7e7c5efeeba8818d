"""One run directory as one self-contained HTML page (``testbed analyze RUN_DIR --html``), and the
setup rows every report starts with (:func:`run_setup`: what a run's numbers depend on, read from
its ``manifest.json`` only).

The page: the setup; the run's status, named metrics, checks, link fidelity and timed steps; per
capture its flow table (with where it was captured: sender metrics from a capture near the data's
receiver are marked as the receiver's view, from the flow's ``vantage``) and its figures
(:mod:`analysis.plotset`: the timeline, and per data direction the in-flight and time-sequence
graphs); a capture that was pruned or deleted is said so in a sentence instead.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from analysis import applog
from analysis.page import Page


def _describe_factors(d: dict) -> str:
    return "; ".join(f"{k}={v}" for k, v in sorted(d.items())) or "none"


def run_setup(manifest: dict) -> list[tuple[str, str]]:
    """(label, value) rows: topology and every link direction's spec, workload and its
    parameters, socket and host factors, backend and engine, seed, captures, the project's
    revision, kernel and when it ran."""
    spec, env, fid = manifest.get("spec", {}), manifest.get("environment", {}), manifest.get("fidelity", {})
    topo = env.get("topology") or {"name": spec.get("topology"), "params": spec.get("topology_params")}
    rows = [("topology", f"{topo.get('name')} ({_describe_factors(topo.get('params') or {})})")]
    for lk in env.get("links") or ():
        desc = lk.get("describe") or ["?", "?"]
        rows.append((f"link {lk['name']}", f"{lk['a']} → {lk['b']}: {desc[0]}; {lk['b']} → {lk['a']}: {desc[1]}"))
    rows += [("workload", f"{spec.get('workload')} ({_describe_factors(spec.get('params') or {})})"),
             ("socket factors", _describe_factors(spec.get("socket") or {})),
             ("host factors", _describe_factors(spec.get("host") or {})),
             ("backend and engine", f"{fid.get('backend') or env.get('backend') or spec.get('backend')}"
                                    + (f", engine {fid['engine']}" if fid.get("engine") else "")),
             ("link seed", str(spec.get("seed"))),
             ("captures", f"hosts {spec.get('capture', {}).get('hosts')}")]
    git = env.get("git") or {}
    if git:
        rows.append(("project revision", f"{git.get('revision')}" + (" (with uncommitted changes)"
                                                                     if git.get("dirty") else "")))
    if env.get("kernel"):
        rows.append(("kernel", f"{env['kernel']} on {env.get('machine', '?')}"))
    if manifest.get("started"):
        rows.append(("started", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(manifest["started"]))))
    return rows


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list) and len(v) == 1:
        return _num(v[0])
    if isinstance(v, list):
        return f"{len(v)} values" + (f", median {sorted(v)[len(v) // 2]:.4g}" if v and all(
            isinstance(x, (int, float)) for x in v) else "")
    return json.dumps(v) if isinstance(v, dict) else str(v)


def flow_rows(res: dict) -> list[list[str]]:
    """One row per TCP flow: flow, data direction, where captured, initial RTT, RTT median,
    in flight max (kB), retransmissions, goodput, requests; sender metrics taken near the
    receiver are labelled as its view."""
    rows = []
    for r in res["flows"]:
        if r["proto"] != "tcp":
            rows.append([r["flow"], "udp", "–", "–", "–", "–", "–", "–",
                         f"bytes c2s {r['bytes']['c2s']}, s2c {r['bytes']['s2c']}"])
            continue
        v = r.get("vantage") or {}
        where = {True: "at the data's sender", False: "near the data's RECEIVER: sender metrics are "
                 "the receiver's view"}.get(v.get("sender_side"), f"near the {v.get('capture_near')}")
        rtt = (r.get("rtt_ms") or {}).get("karn", {})
        x = r.get("retransmissions") or {}
        infl = (r.get("in_flight") or {}).get("max")
        rows.append([r["flow"], r.get("data_direction") or "–", where,
                     _num(r.get("initial_rtt_ms")), _num(rtt.get("median")),
                     "–" if infl is None else f"{infl / 1e3:.1f}",
                     "/".join(str(x.get(k, "–")) for k in ("fast", "rto", "probe")),
                     _num(r.get("goodput_mbps")), str(len(r["completion"]))])
    return rows


FLOW_HEAD = ["flow", "data dir", "captured", "initial RTT (ms)", "RTT median (ms)", "in flight max (kB)",
             "retransmissions fast/RTO/probe", "goodput (Mbit/s)", "requests"]


def write_html(run_dir: str | Path, out: str | Path, run_info: dict, results: list[dict],
               figures: dict[str, list[tuple[str, str]]], notes: list[str]) -> Path:
    """The page of the module docstring.  ``run_info``: status, metrics, checks (what
    ``testbed analyze`` prints); ``results``: the analysed captures; ``figures``: per capture
    file, [(caption, png)]; ``notes``: sentences about missing or damaged captures.  A run with
    a link schedule also gets the table of its changes (the manifest's ``link_changes``)."""
    run_dir = Path(run_dir)
    manifest = applog.run_manifest(run_dir)
    page = Page(f"run {run_dir.name}")
    page.heading("Setup").setup(run_setup(manifest))
    page.heading("Result")
    status = run_info.get("status")
    page.para(f"status {status}" + (f": {run_info.get('error')}" if run_info.get("error") else ""))
    rows = [[k, _num(v)] for kind in ("metrics", "checks") for k, v in (run_info.get(kind) or {}).items()
            if k != "host_factors"]
    page.table(["metric or check", "value"], rows)
    fid = manifest.get("fidelity") or {}
    if fid:
        page.para(f"link fidelity: {fid.get('verdict')}" + (f" ({fid['cause']})" if fid.get("cause") else "")
                  + (f"; {fid.get('frames')} frames, {fid.get('late', 0)} late, "
                     f"{fid.get('unintended_drops', 0)} dropped unintentionally" if "frames" in fid else ""))
    changes = manifest.get("link_changes") or {}
    if changes.get("changes"):
        origin = (changes.get("origin") or {}).get("origin_requested_ns") or 0
        page.para("link changes (a link schedule; s from the origin, when the client started):")
        page.table(["direction", "at (s)", "configured", "change"],
                   [[d, f"{(c['actual_ns'] - origin) / 1e9:.3f}", c["at"], c["what"]]
                    for d, items in changes["changes"].items() for c in items])
    for w in changes.get("warnings") or ():
        page.para(w, cls="empty")
    if run_info.get("steps"):
        page.para("timed steps (computation the workload stands in for; shaded on the figures):")
        page.table(["step", "count", "total (ms)", "run by"],
                   [[name, str(t["count"]), f"{t['total_ms']:.1f}", ", ".join(t["logs"])]
                    for name, t in run_info["steps"].items()])
    for n in notes:
        page.para(n, cls="empty")
    for res in results:
        page.heading(Path(res["file"]).name, 2)
        if "streams" in res:
            page.para(f"QUIC ({res['vantage']}): {res['packets_sent']} packets sent, "
                      f"{res['packets_received']} received, {res['packets_lost']} lost")
        elif res.get("flows"):
            page.table(FLOW_HEAD, flow_rows(res))
        else:
            page.empty("No TCP or UDP flow in this capture.")
        for caption, png in figures.get(res["file"], []):
            page.figure(png, caption)
    return page.write(out)


def figures_for(res: dict, outdir: Path, markers: list[tuple[int, str]] = (),
                steps=()) -> list[tuple[str, str]]:
    """The capture's figures (:func:`analysis.plotset.write`), as PNG only — the page embeds
    nothing else — with captions; a capture holding the project's UDP transport also gets its
    packet timeline (:func:`analysis.fec.timeline`).  ``markers``, ``steps``: as
    :func:`analysis.plotset.write`."""
    from analysis import fec, pcap, plots, plotset
    with plots.formats(("png",)):
        files = plotset.write(res, outdir, markers, steps)
        if any(r["proto"] == "udp" for r in res["flows"]):
            pk = pcap.read(res["file"])
            ports = {c["dport"] for c in fec.connections(pk) if c["source"] or c["repair"]}
            for port in sorted(ports):
                files += fec.timeline(pk, port, outdir / f"transport-{port}",
                                      f"{Path(res['file']).name}: UDP transport packets to port {port}")
    files = [f for f in files if f.endswith(".png")]
    out = []
    for f in files:
        stem = Path(f).stem
        what = ("handshake and completion events per host, at the capture point; timed steps "
                "(computation) as shaded spans on the lane of the app that ran them" if stem == "timeline"
                else "time-sequence graph" if stem.endswith("-tseq")
                else "bytes in flight (outstanding, pipe, cwnd where logged)" if stem.endswith("-inflight")
                else "bytes of each request and response delivered in order, in the directions "
                     "that carry data" if stem.endswith("-delivery")
                else "symbols sent, repair, symbols sent again and ACKs" if stem.startswith("transport-")
                else stem)
        out.append((f"{stem}: {what}", f))
    return out


def tempdir() -> tempfile.TemporaryDirectory:
    """Where a page's figure files live until they are embedded."""
    return tempfile.TemporaryDirectory(prefix="testbed-page-")
