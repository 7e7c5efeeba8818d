"""Reader and end-to-end analysis speed vs tshark, tcptrace and scapy on the same capture,
in the same run.

    .venv/bin/python benchmarks/analysis.py                 # makes a capture (root: netns + tcpdump)
    .venv/bin/python benchmarks/analysis.py --pcap F.pcap   # or uses yours

The default capture: Linux TCP, 150 MB with 1% random loss between two namespaces, captured
at the sender with the testbed's Capture (headers only, snaplen 192).

Rows (packets/s = packets in the file / wall time of the best run: --repeat runs for ours and
tcptrace, one for the slow ones; CPU s = user+system CPU time of that run, the figure that a
loaded machine disturbs least):
- analysis read+analyze [engine]: analysis.report.analyze_file (reader, flows, per-direction
  TCP model, handshake, exchanges) -- what `testbed analyze --json` does minus printing --
  with the native fast path and with the Python reference.
- analysis.pcap.read [engine]: the reader alone, all fields into numpy arrays.
- tshark TCP analysis: `tshark -r F -T fields` with its TCP sequence analysis (the default)
  printing the analysis fields comparable to ours (bytes in flight, ACK RTT, retransmission
  flags), whole file.
- tshark fields (analysis on / off): the fields this reader extracts, with and without
  tcp.analyze_sequence_numbers.
- tcptrace -lr: tcptrace's per-connection analysis with RTT statistics (C, one pass).
- scapy rdpcap: full dissection into scapy packets, on the first --scapy-packets packets only
  (scapy is too slow for the whole file); rate extrapolated from that subset.
- scapy RawPcapReader: scapy's record reader without dissection (bytes only), whole file.

The last columns compare each row with ours (native read+analyze): how many times faster ours
is by wall time and by CPU time per packet.  /proc/loadavg is printed before and after: the
machine may be shared.
"""
from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TSHARK_FIELDS = ["frame.time_epoch", "ip.src", "ip.dst", "ip.id", "ip.len", "tcp.srcport",
                 "tcp.dstport", "tcp.flags", "tcp.seq_raw", "tcp.ack_raw", "tcp.window_size_value",
                 "tcp.options.sack_le", "tcp.options.timestamp.tsval", "tcp.len"]
TSHARK_ANALYSIS = ["frame.number", "tcp.stream", "tcp.analysis.bytes_in_flight",
                   "tcp.analysis.ack_rtt", "tcp.analysis.retransmission",
                   "tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission",
                   "tcp.analysis.duplicate_ack", "tcp.analysis.initial_rtt"]


def make_capture(out: Path, size: int, loss: int) -> Path:
    from testbed.host.capture import Capture
    from tests.fixtures.vethpair import veth_pair
    with veth_pair("bench") as p:
        p.loss(loss, 5201)
        cap = Capture(out, "tbt0", popen=lambda argv, **kw: p.popen(p.a, argv, **kw))
        cap.start()
        p.transfer("sink", 5201, size, timeout=300)
        res = cap.stop()
    if res.dropped_by_kernel:
        print(f"warning: tcpdump dropped {res.dropped_by_kernel} packets", file=sys.stderr)
    return out


def best(fn, repeat: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its children) of the fastest run."""
    runs = []
    for _ in range(repeat):
        r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        fn()
        wall = time.perf_counter() - t
        r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in ((r0, r1), (c0, c1)))
        runs.append((wall, cpu))
    return min(runs)


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pcap", type=Path,
                    help="a capture to read (default: capture a TCP transfer of --size bytes with --loss %%)")
    ap.add_argument("--size", type=int, default=150_000_000, help="bytes to transfer (default capture)")
    ap.add_argument("--loss", type=int, default=1, help="loss percent (default capture)")
    ap.add_argument("--repeat", type=int, default=5, help="timed reads per reader")
    ap.add_argument("--scapy-packets", type=int, default=20_000, help="packets scapy reads (it is slow)")
    args = ap.parse_args()

    from analysis import native, pcap, report
    from testbed.spec.errors import SetupError
    tmp = tempfile.TemporaryDirectory(prefix="tbbench")
    try:
        path = args.pcap or make_capture(Path(tmp.name) / "bench.pcap", args.size, args.loss)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    n = len(pcap.read(path))
    size_mb = path.stat().st_size / 1e6
    print(f"capture: {path} ({n} packets, {size_mb:.1f} MB)")
    print(f"loadavg before: {loadavg()}")
    engines = ["native", "python"] if native.engine() == "native" else ["python"]
    if engines == ["python"]:
        print("warning: analysis/native is not built (make -C analysis/native): Python only")

    rows = []
    for e in engines:
        rows.append((f"analysis read+analyze [{e}]", n,
                     *best(lambda e=e: report.analyze_file(path, engine=e),
                           args.repeat if e == "native" else 1)))
    for e in engines:
        rows.append((f"analysis.pcap.read [{e}]", n,
                     *best(lambda e=e: pcap.read(path, engine=e), args.repeat)))

    def tool(argv, repeat=1):
        return best(lambda: subprocess.run(argv, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, check=True), repeat)
    if shutil.which("tshark"):
        rows.append(("tshark TCP analysis", n, *tool(
            ["tshark", "-n", "-r", str(path), "-T", "fields",
             *[x for f in TSHARK_ANALYSIS for x in ("-e", f)]])))
        fields = [x for f in TSHARK_FIELDS for x in ("-e", f)]
        for label, extra in (("tshark fields (TCP analysis on)", []),
                             ("tshark fields (TCP analysis off)",
                              ["-o", "tcp.analyze_sequence_numbers:FALSE"])):
            rows.append((label, n, *tool(["tshark", "-n", "-r", str(path), "-T", "fields",
                                          *extra, *fields])))
    if shutil.which("tcptrace"):
        rows.append(("tcptrace -lr", n, *tool(["tcptrace", "-lr", str(path)], args.repeat)))

    import scapy.all  # noqa: F401  (registers the link layers, so rdpcap dissects)
    from scapy.utils import RawPcapReader, rdpcap
    k = min(n, args.scapy_packets)
    rows.append((f"scapy rdpcap (first {k})", k, *best(lambda: rdpcap(str(path), count=k), 1)))

    def raw():
        for _ in RawPcapReader(str(path)):
            pass
    rows.append(("scapy RawPcapReader (no dissection)", n, *best(raw, 1)))

    ours, ours_cpu = rows[0][1] / rows[0][2], rows[0][1] / rows[0][3]
    print(f"loadavg after:  {loadavg()}")
    print(f"\n{'method':<40} {'packets':>9} {'seconds':>8} {'CPU s':>7} {'packets/s':>11} "
          f"{'ours x faster':>14} {'by CPU':>7}")
    for label, count, sec, cpu in rows:
        rate, cpu_rate = count / sec, count / max(cpu, 1e-9)
        print(f"{label:<40} {count:>9} {sec:>8.3f} {cpu:>7.3f} {rate:>11,.0f} "
              f"{ours / rate:>14.1f} {ours_cpu / cpu_rate:>7.1f}")
    print(f"\ntarget: read+analyze >= 500,000 packets/s: {ours:,.0f},",
          "met" if ours >= 500_000 else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
