"""``testbed analyze PCAP... [--app-log F] [--link-log F] [--json] [--plots DIR]`` and
``testbed analyze RUN_DIR [--json] [--plots DIR]``: a run directory's captures (``pcap/*.pcap``)
joined with all its event logs (``*.jsonl``) and emulator frame logs (``emulator/*.frames``),
plus the run's named metrics and checks (``analysis.runmetrics``, the same code as
``RunResult.metrics``)."""
from __future__ import annotations

from testbed.cli.options import add_json


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
    p.add_argument("--plots", metavar="DIR", help="write figures (PNG+SVG) and series CSVs here")
    p.add_argument("--bin", type=float, default=0.1, metavar="S",
                   help="bin width for goodput/throughput series, seconds (default 0.1)")
    p.add_argument("--gap", type=float, default=None, metavar="S",
                   help="idle gap that separates flights, seconds (default: initial RTT / 2)")
    p.add_argument("--samples", type=int, default=1000, metavar="N",
                   help="RTT samples listed per flow and kind in the JSON (default 1000; "
                        "'truncated' says when there were more)")
    p.set_defaults(func=run)


def run(args) -> int:
    import json
    from pathlib import Path

    from analysis import applog, qlog, report

    if args.bin <= 0 or (args.gap is not None and args.gap < 0):
        raise ValueError("--bin must be > 0 and --gap >= 0 seconds")
    if args.samples < 0:
        raise ValueError("--samples must be >= 0 (RTT samples listed per kind)")
    run_info = None
    dirs = [f for f in args.files if Path(f).is_dir()]
    if dirs and (len(args.files) > 1 or not (Path(dirs[0]) / "manifest.json").is_file()):
        raise ValueError(f"{dirs[0]}: give one run directory (with a manifest.json, e.g. "
                         "results/<run id>) or capture files, not both or several")
    for opt, files in (("--app-log", args.app_log), ("--link-log", args.link_log)):
        for f in files:
            if not Path(f).is_file():
                raise ValueError(f"{opt} {f}: no such file")
    if len(args.files) == 1 and Path(args.files[0]).is_dir():
        run_dir = Path(args.files[0])
        manifest = json.loads((run_dir / "manifest.json").read_text() or "{}")
        run_info = {"run": str(run_dir), "status": manifest.get("status"),
                    "error": manifest.get("error"), **_workload_metrics(manifest)(run_dir)}
        args.files = [str(p) for p in sorted((run_dir / "pcap").glob("*.pcap"))]
        args.app_log = [str(p) for p in sorted(run_dir.glob("*.jsonl"))]
        args.link_log = [str(p) for p in sorted((run_dir / "emulator").glob("*.frames"))]
    events = []
    for f in args.app_log:
        events += applog.load(f)
    links = []
    if args.link_log:
        from testbed.emulator.linklog import read_log
        links = [read_log(f) for f in args.link_log]
    results = []
    for f in args.files:
        path = Path(f)
        if not path.is_file():
            raise ValueError(f"{f}: no such file; give pcap, pcapng or qlog files")
        if qlog.is_qlog(path):
            traces = qlog.load(path, applog.clock_offset(events) or 0)
            res = qlog.summary(traces)
            res["file"] = str(path)
            if args.plots:
                from analysis import plotset
                res["plots"] = plotset.write_qlog(traces, args.plots, path.stem)
        else:
            res = report.analyze_file(path, events=events, bin_s=args.bin, gap_s=args.gap,
                                      keep=bool(args.plots), link_logs=links,
                                      samples=args.samples)
            if args.plots:
                from analysis import plotset
                sub = Path(args.plots) / path.stem if len(args.files) > 1 else Path(args.plots)
                res["plots"] = plotset.write(res, sub)
            res.pop("_objects", None)
        results.append(res)
    if run_info is not None:
        if args.json:
            print(json.dumps({**run_info, "captures": results}, indent=1))
        else:
            failed = "" if run_info["status"] in ("complete", None) else \
                f" {run_info['status']} ({run_info['error']}): the numbers cover only what ran"
            print(f"{run_info['run']}:{failed}")
            for kind in ("metrics", "checks"):
                for k, v in run_info[kind].items():
                    if k != "host_factors":
                        print(f"  {k:<24} {v}")
            for res in results:
                print(_table(res))
        return 0
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=1))
    else:
        for res in results:
            print(_table(res))
    return 0


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


def _fmt(v, scale=1.0, nd=1):
    return "-" if v is None else f"{v * scale:.{nd}f}"


def _table(res: dict) -> str:
    if "streams" in res:   # qlog
        return (f"{res['file']}: QUIC {res['vantage']}, sent {res['packets_sent']} received "
                f"{res['packets_received']} lost {res['packets_lost']}, max bytes_in_flight "
                f"{res['bytes_in_flight_max']}, streams {len(res['streams'])}")
    lines = [f"{res['file']}: {res['packets']} packets, clock {res['clock']}, "
             f"engine {res['engine']}"
             + (f", {res.get('dropped_by_kernel')} dropped by kernel"
                if res.get("dropped_by_kernel") is not None else "")]
    head = f"{'flow':<48} {'dir':>4} {'irtt ms':>8} {'rtt min':>8} {'rtt med':>8} " \
           f"{'rtx f/r/p':>10} {'infl max':>9} {'goodput':>9} {'data/ack':>8} {'req':>4}"
    lines.append(head)
    for r in res["flows"]:
        if r["proto"] != "tcp":
            lines.append(f"{r['flow']:<48}  udp bytes c2s {r['bytes']['c2s']} s2c {r['bytes']['s2c']}")
            continue
        x = r.get("retransmissions") or {}
        rtt = (r.get("rtt_ms") or {}).get("karn", {})
        lines.append(
            f"{r['flow']:<48} {r.get('data_direction') or '-':>4} {_fmt(r['initial_rtt_ms'], 1, 3):>8} "
            f"{_fmt(rtt.get('min'), 1, 3):>8} {_fmt(rtt.get('median'), 1, 3):>8} "
            f"{'/'.join(str(x.get(k, '-')) for k in ('fast', 'rto', 'probe')):>10} "
            f"{(r.get('in_flight') or {}).get('max', '-'):>9} {_fmt(r.get('goodput_mbps'), 1, 2):>9} "
            f"{_fmt((r.get('acks') or {}).get('data_per_ack'), 1, 2):>8} {len(r['completion']):>4}")
    return "\n".join(lines)
