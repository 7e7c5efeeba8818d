"""Reader and analysis speed vs scapy and tshark on the same capture, in the same run.

    .venv/bin/python benchmarks/analysis.py                 # makes a capture (root: netns + tcpdump)
    .venv/bin/python benchmarks/analysis.py --pcap F.pcap   # or uses yours

The default capture: Linux TCP, 150 MB with 1% random loss between two namespaces, captured
at the sender with the testbed's Capture (headers only, snaplen 192).

Rows (packets/s = packets in the file / wall time, best of --repeat runs):
- analysis.pcap.read: this reader, all fields into numpy arrays.
- analysis read+analyze: analysis.report.analyze_file (reader, flows, per-direction TCP model,
  handshake, exchanges) -- what `testbed analyze --json` does minus printing.
- scapy rdpcap: full dissection into scapy packets, on the first --scapy-packets packets only
  (scapy is too slow for the whole file); rate extrapolated from that subset.
- scapy RawPcapReader: scapy's record reader without dissection (bytes only), whole file.
- tshark fields: `tshark -r F -T fields` with TCP sequence analysis (its default) and the
  fields this reader extracts, whole file.
- tshark no analysis: same with tcp.analyze_sequence_numbers off.
"""
from __future__ import annotations

import argparse
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


def make_capture(out: Path, size: int, loss: int) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from analysis_netns import veth_pair
    from testbed.capture import Capture
    with veth_pair("bench") as p:
        p.loss(loss, 5201)
        cap = Capture(out, "tbt0", popen=lambda argv, **kw: p.popen(p.a, argv, **kw))
        cap.start()
        p.transfer("sink", 5201, size, timeout=300)
        res = cap.stop()
    if res.dropped_by_kernel:
        print(f"warning: tcpdump dropped {res.dropped_by_kernel} packets", file=sys.stderr)
    return out


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pcap", type=Path)
    ap.add_argument("--size", type=int, default=150_000_000, help="bytes to transfer (default capture)")
    ap.add_argument("--loss", type=int, default=1, help="loss percent (default capture)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scapy-packets", type=int, default=20_000)
    args = ap.parse_args()

    from analysis import pcap, report
    tmp = tempfile.TemporaryDirectory(prefix="tbbench")
    path = args.pcap or make_capture(Path(tmp.name) / "bench.pcap", args.size, args.loss)
    n = len(pcap.read(path))
    size_mb = path.stat().st_size / 1e6
    print(f"capture: {path} ({n} packets, {size_mb:.1f} MB)")

    rows = []
    rows.append(("analysis.pcap.read", n, best(lambda: pcap.read(path), args.repeat)))
    rows.append(("analysis read+analyze", n,
                 best(lambda: report.analyze_file(path), max(1, args.repeat - 1))))

    import scapy.all  # noqa: F401  (registers the link layers, so rdpcap dissects)
    from scapy.utils import RawPcapReader, rdpcap
    k = min(n, args.scapy_packets)
    rows.append((f"scapy rdpcap (first {k})", k, best(lambda: rdpcap(str(path), count=k), 1)))

    def raw():
        for _ in RawPcapReader(str(path)):
            pass
    rows.append(("scapy RawPcapReader (no dissection)", n, best(raw, 1)))

    fields = [x for f in TSHARK_FIELDS for x in ("-e", f)]
    for label, extra in (("tshark fields (TCP analysis on)", []),
                         ("tshark fields (TCP analysis off)",
                          ["-o", "tcp.analyze_sequence_numbers:FALSE"])):
        argv = ["tshark", "-n", "-r", str(path), "-T", "fields", *extra, *fields]
        rows.append((label, n, best(lambda: subprocess.run(argv, stdout=subprocess.DEVNULL,
                                                           stderr=subprocess.DEVNULL, check=True), 1)))

    ours = rows[0][1] / rows[0][2]
    print(f"\n{'method':<40} {'packets':>9} {'seconds':>9} {'packets/s':>12} {'reader is x faster':>19}")
    for label, count, sec in rows:
        rate = count / sec
        print(f"{label:<40} {count:>9} {sec:>9.3f} {rate:>12,.0f} {ours / rate:>19.1f}")
    print("\ntarget: reader >= 500,000 packets/s:", "met" if ours >= 500_000 else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
