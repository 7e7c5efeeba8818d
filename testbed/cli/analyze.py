"""``testbed analyze PCAP... [--app-log F] [--link-log F] [--json] [--plots DIR [--formats LIST]]``
and ``testbed analyze RUN_DIR [--json] [--plots DIR [--formats LIST]]``: a run directory's
captures (``pcap/*.pcap`` and ``*.pcapng``) joined with all its event logs (``*.jsonl``) and emulator frame logs
(``emulator/*.frames``), plus the run's named metrics and checks (``analysis.runmetrics``, the
same code as ``RunResult.metrics``) held against its manifest's (``analysis.runcheck``: the
manifest's value, marked, where the files no longer give one; a warning where they give another)
and its timed steps (``analysis.applog.step_totals``: count and total ms per step name; drawn as
shaded spans on the figures).

Damaged captures (``analysis.pcap``: a record cut short, a bad record header, headers cut by
the snap length, no readable file header) and a run's pruned, deleted or missing captures are
warned about (stderr, one line each) and listed in the JSON (``damage`` per capture,
``missing_captures`` of the run), as are the run's other files its manifest lists that are gone
or changed in size (``changed_files``); ``--strict`` makes any of them exit 1.  A capture without a readable
file header given on its own is refused."""
from __future__ import annotations

from pathlib import Path

from testbed.cli.options import add_json, directory_path, file_path


def register(sub) -> None:
    p = sub.add_parser(
        "analyze", help="per-flow timelines and TCP metrics from captures (and qlogs)",
        description="Read pcap/pcapng captures (and aioquic .qlog files) and report per flow: "
                    "handshake and completion timelines, bytes in flight, retransmissions by "
                    "kind, RTT samples, goodput and ACK ratio. Metrics are as seen at the "
                    "capture point (see 'vantage' in the output).")
    p.add_argument("files", nargs="+", metavar="PCAP|RUN_DIR",
                   help="capture (.pcap/.pcapng) or .qlog file, or one run directory")
    p.add_argument("--app-log", action="append", default=[], metavar="F",
                   help="application JSONL event log to join (repeatable)")
    p.add_argument("--link-log", action="append", default=[], metavar="F",
                   help="emulator frame log (<direction>.frames) to join (repeatable)")
    add_json(p)
    p.add_argument("--plots", metavar="DIR", type=directory_path,
                   help="write figures (as --formats says) and series CSVs here")
    p.add_argument("--formats", metavar="LIST",
                   help="with --plots: the files each figure is written as, a comma list of what "
                        "matplotlib writes (png, pdf, svg, eps, jpg, …; default png,svg,pdf)")
    p.add_argument("--html", nargs="?", const=True, metavar="FILE", type=file_path,
                   help="with a run directory: write one self-contained HTML report of it (setup, "
                        "metrics, flows, figures embedded) to FILE (default RUN_DIR/report.html)")
    p.add_argument("--bin", type=float, default=0.1, metavar="S",
                   help="bin width for goodput/throughput series, seconds, 1e-9 to 1e6 (default 0.1)")
    p.add_argument("--gap", type=float, default=None, metavar="S",
                   help="idle gap that separates flights, seconds (default: half the handshake's "
                        "round trip, a lost SYN's timeout left out)")
    p.add_argument("--samples", type=int, default=1000, metavar="N",
                   help="RTT samples listed per flow and kind in the JSON (default 1000; "
                        "'truncated' says when there were more)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a capture is damaged (cut short, a bad record header, "
                        "headers cut by the snap length) or a run's captures were deleted, or "
                        "another of its files is gone or changed in size since the run")
    p.set_defaults(func=run)


def run(args) -> int:
    import json
    import logging
    import sys
    from analysis import applog, qlog, report, runcheck
    from testbed.spec.errors import UsageError
    from testbed.spec.runresult import MANIFEST, MANIFEST_SCHEMA, read_manifest

    try:
        report.check_windows(args.bin, args.gap)
    except ValueError as exc:
        raise ValueError(f"--{exc}") from None          # "--bin 1e-12 s: give …"
    empty = [repr(f) for f in (*args.files, *args.app_log, *args.link_log) if not f]
    if empty:
        raise ValueError(f"an empty path ({', '.join(empty)}): give capture files (pcap, pcapng, qlog) "
                         "or one run directory, and log files by name")
    if args.samples < 0:
        raise ValueError("--samples must be >= 0 (RTT samples listed per kind)")
    formats = _formats(args)
    run_info = None
    run_dir = _run_dir(args.files)
    if args.html is not None and run_dir is None:
        raise ValueError("--html needs one run directory (results/<run id>), not capture files")
    for opt, files in (("--app-log", args.app_log), ("--link-log", args.link_log)):
        for f in files:
            if not Path(f).is_file():
                raise ValueError(f"{opt} {f}: {_not_a_file(f)}")
    notes = []                  # (what, message, counts for --strict)
    compared = []               # the run's metrics against its manifest: warned after the damage
    if run_dir is not None and (args.app_log or args.link_log):
        raise ValueError(f"--app-log and --link-log go with capture files: a run directory's own logs "
                         f"are read ({run_dir}/*.jsonl, {run_dir}/emulator/*.frames)")
    if run_dir is not None:
        try:
            manifest = read_manifest(run_dir / MANIFEST)
        except UsageError as exc:
            raise UsageError(f"{exc}; the run's captures can still be given as files "
                             f"({run_dir}/pcap/*.pcap)") from None
        if manifest.get("schema") != MANIFEST_SCHEMA:
            notes.append((str(run_dir / MANIFEST), f"not a run manifest of schema {MANIFEST_SCHEMA} "
                          f"(schema {manifest.get('schema')!r}): the run's status, spec and file "
                          "list are unknown", True))
        found = runcheck.captures(run_dir)
        missing, why = runcheck.missing_captures(run_dir, manifest, found)
        changed = runcheck.changed_files(run_dir, manifest)
        shown = runcheck.against_manifest(_computed(_workload_metrics(manifest), run_dir), manifest,
                                          bool(missing or changed["missing"]))
        run_info = {"run": str(run_dir), "status": manifest.get("status"),
                    "error": manifest.get("error"), **shown}
        if manifest.get("link_changes"):
            run_info["link_changes"] = manifest["link_changes"]
        args.files = [str(p) for p in found]
        args.app_log = [str(p) for p in sorted(run_dir.glob("*.jsonl"))]
        args.link_log = [str(p) for p in sorted((run_dir / "emulator").glob("*.frames"))]
        if missing:
            run_info["missing_captures"] = {"files": missing, "reason": why}
        if why:
            notes.append((str(run_dir), why, bool(missing)))
        if changed["missing"] or changed["resized"]:
            run_info["changed_files"] = changed
        notes += [(str(run_dir), m, True) for m in runcheck.changed_notes(changed)]
        compared = [(str(run_dir), m, True)
                    for m in runcheck.comparison_notes(shown, missing, changed["missing"])]
    events = []
    for f in args.app_log:
        events += applog.load(f)
    steps = applog.steps(events) if applog.clock_offset(events) is not None else []
    if run_info is not None and steps:
        run_info["steps"] = applog.step_totals(steps)
    links, markers = [], []
    if args.link_log:
        from analysis.plotset import link_markers
        from testbed.emulator.linklog import read_log
        links = [read_log(f) for f in args.link_log]
        notes += [(f, h["damage"], True) for f, (h, _) in zip(args.link_log, links) if h.get("damage")]
        markers = link_markers(args.link_log)
    results = []
    figures: dict = {}
    page_dir = None
    if args.html is not None:
        from analysis import runpage
        page_dir = runpage.tempdir()
    for f in args.files:
        path = Path(f)
        if not path.is_file():
            raise ValueError(f"{f}: {_not_a_file(f)}; give pcap, pcapng or qlog files")
        if qlog.is_qlog(path):
            traces = qlog.load(path, applog.clock_offset(events) or 0)
            res = qlog.summary(traces)
            res["file"] = str(path)
            if args.plots:
                from analysis import plotset
                res["plots"] = plotset.write_qlog(traces, args.plots, path.stem, markers, steps,
                                                  formats)
        else:
            res = report.analyze_file(path, events=events, bin_s=args.bin, gap_s=args.gap,
                                      keep=bool(args.plots) or page_dir is not None, link_logs=links,
                                      samples=args.samples)
            if run_dir is None:
                report.refuse_unreadable(res)
            if args.plots:
                from analysis import plotset
                sub = Path(args.plots) / path.stem if len(args.files) > 1 else Path(args.plots)
                res["plots"] = plotset.write(res, sub, markers, steps, formats)
            if page_dir is not None:
                figures[res["file"]] = runpage.figures_for(res, Path(page_dir.name) / path.stem,
                                                           markers, steps)
            res.pop("_objects", None)
        results.append(res)
    for res in results:
        notes += [(res["file"], d["message"], True) for d in res.get("damage", ())]
        notes += [(res["file"], f"flow {n['flow']} not analysed: {n['reason']}", True)
                  for n in res.get("flows_not_analysed", ())]
    notes += compared
    for what, message, _ in notes:
        logging.getLogger(__name__).warning("%s: %s", what, message)
    code = 1 if args.strict and any(counts for *_, counts in notes) else 0
    if args.plots and not any(res.get("plots") for res in results):
        why = "; ".join(m for _, m, _ in notes) or "no capture holds a flow to draw"
        logging.getLogger(__name__).warning("--plots %s: no figure written: %s", args.plots, why)
    if page_dir is not None:
        with page_dir:
            html = runpage.write_html(run_dir, run_dir / "report.html" if args.html is True else Path(args.html),
                                      run_info, results, figures, [m for _, m, _ in notes])
        print(f"report: {html}", file=sys.stderr)
    if run_info is not None:
        if args.json:
            print(json.dumps({**run_info, "captures": results}, indent=1))
        else:
            failed = "" if run_info["status"] in ("complete", None) else \
                f" {run_info['status']} ({run_info['error']}): the numbers cover only what ran"
            print(f"{run_info['run']}:{failed}")
            for kind, title in (("metrics", "metrics"), ("checks", "checks (read-backs of the factors, damage)")):
                shown = {k: v for k, v in run_info[kind].items() if k != "host_factors"}
                if shown:
                    print(f" {title}:")
                for k, v in shown.items():
                    print(f"  {k:<24} {v}{_provenance(run_info, kind, k)}")
            _print_link_changes(run_info.get("link_changes") or {})
            for name, t in (run_info.get("steps") or {}).items():
                print(f"  step {name:<19} {t['count']} x, {t['total_ms']:.1f} ms in all "
                      f"({', '.join(t['logs'])})")
            for res in results:
                print(_table(res))
        return code
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=1))
    else:
        for res in results:
            print(_table(res))
    return code


def _formats(args) -> tuple[str, ...] | None:
    """The figures' formats ``--formats`` names (``analysis.plots.parse_formats``); None without
    it (``analysis.plots.FORMATS``); a ValueError when it is not a list of them or goes without
    ``--plots``."""
    if args.formats is None:
        return None
    if not args.plots:
        raise ValueError(f"--formats {args.formats} goes with --plots DIR (the --html page embeds PNG)")
    from analysis import plots
    try:
        return plots.parse_formats(args.formats)
    except ValueError as exc:
        raise ValueError(f"--formats {exc}") from None


def _print_link_changes(changes: dict) -> None:
    """The link schedule's changes of the manifest, one line each: s from the origin."""
    origin = (changes.get("origin") or {}).get("origin_requested_ns")
    for direction, items in (changes.get("changes") or {}).items():
        for c in items:
            at = f"{(c['actual_ns'] - origin) / 1e9:8.3f} s" if origin is not None else c["at"]
            print(f"  link change  {at}  {direction}: {c['what']} (configured at {c['at']})")
    for w in changes.get("warnings") or ():
        print(f"  link warning {w}")


def _run_dir(files: list[str]):
    """The run directory among the arguments, None when they are all files; a ValueError
    that names what was given when they are neither one run directory nor only files."""
    dirs = [f for f in files if Path(f).is_dir()]
    if not dirs:
        return None
    allowed = "give one run directory (with a manifest.json, e.g. results/<run id>) or capture files"
    if len(dirs) > 1:
        raise ValueError(f"got {len(dirs)} directories ({', '.join(dirs[:3])}"
                         f"{', …' if len(dirs) > 3 else ''}): {allowed}, not several")
    if len(files) > 1:
        raise ValueError(f"got the directory {dirs[0]} and {len(files) - 1} more argument(s): "
                         f"{allowed}, not both")
    d = Path(dirs[0])
    if (d / "runs").is_dir() and (d / "manifest.json").is_file():
        raise ValueError(f"{d}: an experiment directory; give one of its runs ({d}/runs/<run>) "
                         "or read it with testbed experiment report")
    if not (d / "manifest.json").is_file():
        pcaps = sorted(p for p in (*d.glob("*.pcap*"), *d.glob("pcap/*.pcap*"))
                       if p.name.endswith((".pcap", ".pcapng")))
        held = (f"; its {len(pcaps)} capture file(s) can be given as files "
                f"({pcaps[0].parent}/*.pcap)") if pcaps else ""
        raise ValueError(f"{d}: a directory without manifest.json, not a run directory; "
                         f"{allowed}{held}")
    return d


def _not_a_file(f: str) -> str:
    """Why ``f``, which is no regular file, cannot be read as one."""
    return "not a regular file" if Path(f).exists() else "no such file"


def _provenance(run_info: dict, kind: str, name: str) -> str:
    """What follows a metric's or check's value in the table: `` (manifest)`` when the value is
    the manifest's, `` (manifest: M)`` when the value recomputed from the files differs from the
    manifest's M, else nothing (``analysis.runcheck.against_manifest``)."""
    if name in run_info.get("from_manifest", {}).get(kind, ()):
        return "  (manifest)"
    differs = run_info.get("differs_from_manifest", {}).get(kind, {})
    return f"  (manifest: {differs[name]['manifest']})" if name in differs else ""


def _workload_metrics(manifest: dict):
    """The metrics callable of the record that ran the manifest's workload and params (reqresp
    over transport udp: the transport's, not TCP's; ``testbed.run.plan.workload_record``, the
    lookup ``execute`` makes), else the default ``run_metrics``."""
    from analysis.runmetrics import run_metrics
    spec = manifest.get("spec", {})
    if not spec.get("workload"):
        return run_metrics
    from testbed.run.plan import workload_record
    from testbed.spec.runspec import RunSpec
    try:
        spec = RunSpec.from_dict(spec)
        return workload_record(spec.workload, spec.params)[0].metrics
    except ValueError:       # a workload or parameter this checkout does not have
        return run_metrics


def _computed(metrics, run_dir: Path) -> dict:
    """``metrics(run_dir)``; a fault of the metrics code (not a ValueError or OSError, which are
    the run's data and said as such) is one line naming the file it is in: TestbedError."""
    from testbed.spec.errors import TestbedError
    from testbed.spec.plugins import source_of
    try:
        return metrics(run_dir)
    except (ValueError, OSError):
        raise
    except Exception as exc:
        raise TestbedError(f"{run_dir}: the workload's metrics ({source_of(metrics)}) raised "
                           f"{type(exc).__name__}: {exc}") from exc


def _fmt(v, scale=1.0, nd=1):
    return "-" if v is None else f"{v * scale:.{nd}f}"


#: what the TCP table's terse columns are (docs/analysis.md)
TABLE_KEY = ("  dir: the data direction; irtt: initial RTT (handshake); rtt: Karn samples; rtx f/r/p: "
             "retransmissions fast / RTO / tail-loss probe; infl max: most bytes outstanding; Mbit/s: "
             "goodput; exch: request/response exchanges (a turn of the data's direction)")


def _rwnd_line(name: str, w: dict | None) -> str | None:
    """A data direction's receiver-window events (``analysis.rwnd``) under its flow's row, e.g.
    ``  c2s receiver window (scale 7): 3 zero-window, 0 zero-window probe, 12 window-full, 5
    window update; first zero-window 0.512 s, window-full 0.104 s`` — only when the receiver's
    window closed or filled, or its scale is unknown (window-full cannot be judged)."""
    if not w:
        return None
    from analysis.rwnd import KINDS
    counts = {k: w[k]["count"] for k in KINDS}
    if w["scale"] is not None and not any(counts[k] for k in ("zero_window", "zero_window_probe",
                                                             "window_full")):
        return None
    scale = {"signalled": f"scale {w['scale']}", "not used": "unscaled"}.get(
        w["scaling"], "scale unknown: no handshake captured")
    full = "window-full unknown" if counts["window_full"] is None else f"{counts['window_full']} window-full"
    first = [f"{label} {w[k]['t'][0]:.3f} s" for k, label in (("zero_window", "zero-window"),
                                                             ("window_full", "window-full"))
             if w[k]["t"]]
    return (f"  {name} receiver window ({scale}): {counts['zero_window']} zero-window, "
            f"{counts['zero_window_probe']} zero-window probe, {full}, "
            f"{counts['window_update']} window update" + ("; first " + ", ".join(first) if first else ""))


def _table(res: dict) -> str:
    if "streams" in res:   # qlog
        return (f"{res['file']}: QUIC {res['vantage']}, sent {res['packets_sent']} received "
                f"{res['packets_received']} lost {res['packets_lost']}, max bytes_in_flight "
                f"{res['bytes_in_flight_max']}, streams {len(res['streams'])}")
    lines = [f"{res['file']}: {res['packets']} packets, clock {res['clock']}, "
             f"engine {res['engine']}"
             + (f", {res.get('dropped_by_kernel')} dropped by kernel"
                if res.get("dropped_by_kernel") is not None else "")
             + (f", DAMAGED ({', '.join(d['kind'] for d in res['damage'])}: see the warnings)"
                if res.get("damage") else "")]
    head = f"{'flow':<48} {'dir':>5} {'irtt ms':>8} {'rtt min':>8} {'rtt med':>8} " \
           f"{'rtx f/r/p':>10} {'infl max':>9} {'Mbit/s':>9} {'data/ack':>8} {'exch':>4}"
    lines.append(head if res["flows"] else "  no TCP or UDP flow in this capture")
    at_receiver = False
    for r in res["flows"]:
        if r["proto"] != "tcp":
            lines.append(f"{r['flow']:<48}  udp bytes c2s {r['bytes']['c2s']} s2c {r['bytes']['s2c']}")
            continue
        x = r.get("retransmissions") or {}
        rtt = (r.get("rtt_ms") or {}).get("karn", {})
        mark = "*" if (r.get("vantage") or {}).get("sender_side") is False else ""
        at_receiver |= bool(mark)
        lines.append(
            f"{r['flow']:<48} {(r.get('data_direction') or '-') + mark:>5} "
            f"{_fmt(r['initial_rtt_ms'], 1, 3):>8} "
            f"{_fmt(rtt.get('min'), 1, 3):>8} {_fmt(rtt.get('median'), 1, 3):>8} "
            f"{'/'.join(str(x.get(k, '-')) for k in ('fast', 'rto', 'probe')):>10} "
            f"{(r.get('in_flight') or {}).get('max', '-'):>9} {_fmt(r.get('goodput_mbps'), 1, 2):>9} "
            f"{_fmt((r.get('acks') or {}).get('data_per_ack'), 1, 2):>8} {len(r['completion']):>4}")
        for name, d in (r.get("directions") or {}).items():
            line = _rwnd_line(name, d.get("receiver_window"))
            if line:
                lines.append(line)
    if any(r["proto"] == "tcp" for r in res["flows"]):
        lines.append(TABLE_KEY)
    if at_receiver:
        lines.append("* captured near the data's receiver: retransmissions, in flight, RTT and "
                     "data/ack are the receiver's view (the sender's capture gives the sender's)")
    return "\n".join(lines)
