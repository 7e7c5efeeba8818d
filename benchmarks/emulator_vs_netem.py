"""Cross-validation: the userspace emulator against kernel netem, with the same TCP stack.

    .venv/bin/python benchmarks/emulator_vs_netem.py [--guest uml|vm] [--quick] [--only SPEC] [--results DIR]

For each link spec below, the same measurements run through ``Testbed("longhaul")`` three times:

1. netem in a guest (``backend="netem"``);
2. the userspace emulator in the same kind of guest (``backend="userspace"``);
3. the userspace emulator on this host.

``--guest uml`` (the default): a User-Mode Linux guest freshly booted for each spec and backend
(``testbed.backends.uml``, the build and mode ``testbed doctor`` reports).  ``--guest vm``: one
boot of the Debian VM (``testbed.backends.vm``; ``testbed vm build`` first) runs every spec on
both backends, so 1 and 2 share one guest kernel.

Table 1 compares 2 with 1: same kernel, same endpoints, same guest; only the link differs, so
this is the emulator's fidelity.  Table 2 compares 3 with 1, labelled as what it is: link
emulation *and* two TCP implementations (the host's kernel against the guest's).  Every column
header names the kernel its endpoints ran on; every row records the host's 1-minute load.  An
unimpaired link is measured the same way everywhere: guest minus host is what the guest itself
adds to an RTT.

Measurements (``testbed.calibrate.probe`` UDP probes; TCP by iperf3 and testbed.apps.reqresp):
- rtt min / median (ms): 200 ping-pong probes of 64 B, 10 ms apart, send time to the echo's
  kernel receive timestamp.
- loss up / down: 3000 datagrams of 64 B per direction, both directions at once, 500/s each
  (on a loaded host a guest's Python echo manages ~1,000 round trips/s: docs/uml.md);
  loss = (sent − received) / sent.
- rate up / down (Mbit/s): a one-second train of 1514 B frames sent at 1.05 × the rate; rate =
  least-squares slope of sequence number over kernel receive time (``testbed.calibrate.probe recv``);
  marked ``*`` where the sender did not exceed the rate (then it measures the sender).
- goodput cubic / bbr (Mbit/s): iperf3 server→client (the direction carrying the loss), 10 s
  after 3 s left out; iperf3's receiver figure.  retransmits cubic / bbr: iperf3's sender count
  of retransmitted segments (TCP_INFO) over the same run.
- completion new / kept-alive (ms): median over K requests of 354,640 B (reply 1000 B, server
  processing 30 ms, cubic) on a new connection each, and on one connection after a warm-up;
  K = 8, 32 on lossy specs (3 and 12 with --quick).
- completion ARQ / FEC (ms): C6 — median over the same K requests of 354,640 B (reply 1000 B,
  30 ms) over the testbed's UDP transport (``testbed.apps.udpreq``, a new transport endpoint
  per request) with selective-repeat ARQ (``--fec off``) and with adaptive RaptorQ FEC
  (``--fec adaptive``, its loss prior the configured loss); the request travels from the server
  host to the client host, the direction carrying the spec's loss, as C6 puts the loss on the
  request's direction (experiments/definitions/fec.toml).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from testbed.calibrate.probe import last_json, probe_argv  # noqa: E402
from testbed.host.ready import wait_ready  # noqa: E402

SPECS = {  # name -> longhaul overrides
    "unimpaired": {"rate_up": "unshaped", "rate_down": "unshaped", "delay": "0ms",
                   "loss_down": "0%"},
    "20M 100ms": {"rate_up": "20mbit", "rate_down": "20mbit", "delay": "50ms", "loss_down": "0%"},
    "50M 200ms 14%down": {"rate_up": "50mbit", "rate_down": "50mbit", "delay": "100ms",
                          "loss_down": "14%"},
    "6.4M 200ms": {"rate_up": "6.4mbit", "rate_down": "6.4mbit", "delay": "100ms",
                   "loss_down": "0%"},
}
LOSS_PPS, LOSS_COUNT = 500, 3000
TRAIN_PAYLOAD, OVERDRIVE = 1472, 1.05
BUSY_LOAD = 1.5


def wait_listening(tb, host: str, port: int, timeout: float = 30) -> None:
    """Until a TCP socket listens on ``port`` in ``host`` (iperf3 and the reqresp server say
    nothing on stdout when ready, and a client before that is refused; the guest is slow)."""
    end = time.monotonic() + timeout
    while not tb.run(host, ["ss", "-Htnl", f"sport = :{port}"], check=True).stdout.strip():
        if time.monotonic() > end:
            raise RuntimeError(f"nothing listening on TCP port {port} in {host} after {timeout} s")
        time.sleep(0.1)


def measure(name: str, overrides: dict, backend: str, results: Path, quick: bool) -> dict:
    """All measurements of one spec on one backend (see the module docstring)."""
    from testbed.run.network import Testbed
    m: dict = {"name": name, "backend": backend, "kernel": os.uname().release,
               "uml": json.loads(os.environ.get("TESTBED_UML_GUEST") or "null"),
               "vm": json.loads(os.environ.get("TESTBED_VM_GUEST") or "null")}
    with Testbed("longhaul", backend=backend, overrides=overrides, results_root=results) as tb:
        c, s = tb.ip("client"), tb.ip("server")
        (_a, _b, up, down), = tb.topo.link_specs()
        wait = 1 + 2 * up.delay
        echo = tb.popen("server", probe_argv("echo", "--port", 5700), name="echo", text=True)
        echo.stdout.readline()  # ready 0.0.0.0:5700
        ping = last_json(tb.run("client", probe_argv("ping", "--dst", s, "--port", 5700,
                                                     "--count", 200, "--interval", 0.01,
                                                     "--wait", wait),
                                timeout=120, check=True).stdout)
        echo.kill()
        rtts = sorted(ping["rtt_ms"])
        m["rtt min (ms)"], m["rtt median (ms)"] = rtts[0], statistics.median(rtts)
        if name == "unimpaired":
            return m
        count = LOSS_COUNT // (3 if quick else 1)
        rx = [tb.popen(h, probe_argv("recv", "--port", p, "--idle", wait, "--timeout", 600),
                       name="recv", text=True) for h, p in (("server", 5701), ("client", 5702))]
        for r in rx:
            r.stdout.readline()
        tx = [tb.popen(h, probe_argv("send", "--dst", d, "--port", p, "--count", count,
                                     "--rate", LOSS_PPS * 106 * 8, "--stream", 1),
                       name="send", text=True)
              for h, d, p in (("client", s, 5701), ("server", c, 5702))]
        sent = [last_json(t.communicate(timeout=600)[0])["sent"] for t in tx]
        for d, r, n in zip(("up", "down"), rx, sent):
            got = last_json(r.communicate(timeout=600)[0])["streams"].get("1", {"received": 0})
            m[f"loss {d}"] = (n - got["received"]) / n
        for d, src, dst, ip, spec in (("up", "client", "server", s, up),
                                      ("down", "server", "client", c, down)):
            frame_bits = (TRAIN_PAYLOAD + 42) * 8
            count = int(spec.rate / frame_bits)
            head = min(0.05, 0.4 * spec.queue_limit_packets * frame_bits / spec.rate)
            r = tb.popen(dst, probe_argv("recv", "--port", 5703, "--idle", wait, "--timeout", 600),
                         name="recv", text=True)
            r.stdout.readline()
            snt = last_json(tb.run(src, probe_argv("send", "--dst", ip, "--port", 5703,
                                                   "--count", count, "--rate", OVERDRIVE * spec.rate,
                                                   "--size", TRAIN_PAYLOAD, "--stream", 3,
                                                   "--burst", head),
                                   timeout=600, check=True).stdout)
            got = last_json(r.communicate(timeout=600)[0])["streams"].get("3") or {}
            rate = got.get("rate_bps")
            m[f"rate {d} (Mbit/s)"] = rate / 1e6 if rate else None
            m[f"rate {d} sender-limited"] = snt["send_rate_bps"] < spec.rate
        seconds = 4 if quick else 10
        for port, cc in ((5201, "cubic"), (5202, "bbr")):
            tb.popen("client", ["iperf3", "-s", "-1", "-p", str(port)], name="iperf3")
            wait_listening(tb, "client", port)
            out = tb.run("server", ["iperf3", "-c", c, "-p", str(port), "-C", cc, "-t", str(seconds),
                                    "-O", "3", "--json"], timeout=seconds + 120, check=True).stdout
            end = json.loads(out)["end"]
            m[f"goodput {cc} (Mbit/s)"] = end["sum_received"]["bits_per_second"] / 1e6
            m[f"retransmits {cc}"] = end["sum_sent"].get("retransmits")
        app = [sys.executable, "-m", "testbed.apps.reqresp"]
        tb.popen("server", [*app, "server", "--listen", ":5000", "--log", str(tb.dir / "rr-server.jsonl"),
                            "--cc", "cubic"], name="reqresp-server")
        wait_listening(tb, "server", 5000)
        # with loss, completion times are bimodal (a loss needing recovery adds RTTs): more samples
        k = (3 if quick else 8) * (4 if up.loss.mean_loss or down.loss.mean_loss else 1)
        for mode, label in (("new", "completion new (ms)"), ("reuse", "completion kept-alive (ms)")):
            out = tb.run("client", [*app, "client", "--server", f"{s}:5000", "--mode", mode,
                                    "--requests", str(k), "--cc", "cubic",
                                    "--log", str(tb.dir / f"rr-client-{mode}.jsonl")],
                         timeout=900, check=True).stdout
            m[label] = float(out.split("median ")[1].split(" ms")[0])
        udp = [sys.executable, "-m", "testbed.apps.udpreq"]
        prior = f"{down.loss.mean_loss:.6g}"
        for port, fec, label in ((5003, "off", "completion ARQ (ms)"),
                                 (5004, "adaptive", "completion FEC (ms)")):
            srv = tb.popen("client", [*udp, "server", "--listen", f":{port}", "--fec", fec,
                                      "--loss-prior", prior,
                                      "--log", str(tb.dir / f"udp-server-{fec}.jsonl")],
                           name="udpreq-server", text=True)
            wait_ready(srv, f"udpreq server ({fec}) on client", timeout=60)
            out = tb.run("server", [*udp, "client", "--server", f"{c}:{port}", "--mode", "new",
                                    "--requests", str(k), "--fec", fec, "--loss-prior", prior,
                                    "--log", str(tb.dir / f"udp-client-{fec}.jsonl")],
                         timeout=900, check=True).stdout
            m[label] = float(out.split("median ")[1].split(" ms")[0])
    emu = tb.metadata.get("backend_summary") or {}  # written at teardown
    m["emulator"] = {k: emu.get(k) for k in ("sched_error_us", "unintended_drops")}
    m["run_dir"] = str(tb.dir)
    return m


def in_guest(name: str, backend: str, results: Path, quick: bool, mem: str, machine=None) -> dict:
    """``measure(name, backend)`` in a guest: in ``machine`` (a booted ``testbed.backends.vm``
    guest) if given, else in a freshly booted UML guest (one boot per spec and backend, so
    nothing a previous run left in the guest's single CPU can disturb the next)."""
    out = results / f"{backend}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    argv = [sys.executable, str(Path(__file__).resolve()), "--results", str(results),
            "--in-guest", str(out), "--spec", name, "--backend", backend,
            *(["--quick"] if quick else [])]
    if machine is not None:
        log = results / f"{backend}-vm-output.txt"
        with open(log, "wb") as f:
            rc = machine.exec(argv, cwd=REPO, stdout=f, stderr=f, timeout=1800)
        text = log.read_text(errors="replace")
        log.unlink()
        if rc != 0:
            raise RuntimeError(f"VM run of {name!r} failed ({rc}):\n{text}")
    else:
        from testbed.backends import uml
        res = uml.run_in_guest(argv, results_dir=results, mem=mem, timeout=1800)
        if res.returncode != 0:
            raise RuntimeError(f"guest run of {name!r} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    m = json.loads(out.read_text())
    out.unlink()
    return m


def loaded(m: dict, load: tuple[float, float]) -> dict:
    """Record the host's 1-minute load average before and after: the guest has one host thread
    as its CPU, so other work on the host shows up in its figures (2 cores here)."""
    return {**m, "host_load": [round(load[0], 2), round(os.getloadavg()[0], 2)]}


ROWS = ["rtt min (ms)", "rtt median (ms)", "loss up", "loss down", "rate up (Mbit/s)",
        "rate down (Mbit/s)", "goodput cubic (Mbit/s)", "goodput bbr (Mbit/s)",
        "retransmits cubic", "retransmits bbr", "completion new (ms)", "completion kept-alive (ms)",
        "completion ARQ (ms)", "completion FEC (ms)"]


def _fmt(v) -> str:
    return f"{v:10.4f}" if v is not None else f"{'-':>10}"


def _where(m: dict) -> str:
    return f"guest {m['kernel']}" if m.get("uml") or m.get("vm") else f"host {m['kernel']}"


def table(title: str, emu: list[dict], netem: list[dict]) -> str:
    heads = (f"emulator, {_where(emu[0])}", f"netem, {_where(netem[0])}")
    w = max(11, *map(len, heads))
    lines = [title, f"{'spec':20} {'measurement':28} {heads[0]:>{w}} {heads[1]:>{w}} {'emu/netem':>9}"
                    f"  load (emu, netem)"]
    for e, n in zip(emu, netem):
        for row in (r for r in ROWS if r in e):
            a, b = e[row], n[row]
            flags = [" ", " "]
            if row.startswith("rate "):
                flags = ["*" if m.get(f"rate {row.split()[1]} sender-limited") else " " for m in (e, n)]
            ratio = f"{a / b:9.3f}" if a is not None and b else f"{'-':>9}"
            lines.append(f"{e['name']:20} {row:28} {_fmt(a):>{w - 1}}{flags[0]} "
                         f"{_fmt(b):>{w - 1}}{flags[1]} {ratio}  {e['host_load']} {n['host_load']}")
    base_e, base_n = emu[0], netem[0]
    lines += [f"unimpaired link (a plain veth on both sides), netem side − emulator side: RTT min "
              f"{base_n['rtt min (ms)'] - base_e['rtt min (ms)']:+.3f} ms, median "
              f"{base_n['rtt median (ms)'] - base_e['rtt median (ms)']:+.3f} ms.",
              "* sender did not exceed the configured rate: the figure is the sender's rate."]
    busy = [f"{m['name']} ({m['backend']}, {_where(m)}: {m['host_load']})" for m in emu + netem
            if max(m["host_load"]) > BUSY_LOAD]
    if busy:
        lines.append(f"host busy (1-min load > {BUSY_LOAD} on 2 cores, the benchmark itself "
                     "included) during: " + ", ".join(busy) + "; the guest's figures suffer first")
    for e in emu[1:]:
        err = (e.get("emulator") or {}).get("sched_error_us")
        if err:
            lines.append(f"emulator scheduling error on {e['name']}: p50 {err.get('p50')} µs, "
                         f"p99 {err.get('p99')} µs, max {err.get('max')} µs; unintended drops "
                         f"{e['emulator'].get('unintended_drops')}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=str(REPO / "results" / "benchmarks"),
                   help="directory for run directories and the JSON result")
    p.add_argument("--quick", action="store_true", help="fewer packets, requests and seconds")
    p.add_argument("--mem", default=None, help="guest memory (default: 768M UML, 2G VM)")
    p.add_argument("--guest", choices=("uml", "vm"), default="uml",
                   help="where netem runs: a UML guest per cell, or one boot of the Debian VM")
    p.add_argument("--only", action="append", default=[], choices=list(SPECS)[1:],
                   help="measure only this spec (repeatable; the unimpaired baseline always runs)")
    p.add_argument("--in-guest", help=argparse.SUPPRESS)  # internal: JSON output path
    p.add_argument("--spec", help=argparse.SUPPRESS)      # internal: the spec to measure there
    p.add_argument("--backend", default="netem", help=argparse.SUPPRESS)  # internal: and how
    args = p.parse_args()
    results = Path(args.results).resolve()
    if args.in_guest:
        m = measure(args.spec, SPECS[args.spec], args.backend, results, args.quick)
        Path(args.in_guest).write_text(json.dumps(m))
        return 0
    results.mkdir(parents=True, exist_ok=True)
    machine, kind = None, {"uml": "UML guest", "vm": "VM"}[args.guest]
    if args.guest == "uml":
        from testbed.backends import uml
        ok, reason = uml.availability()
        if not ok:
            print(f"emulator_vs_netem: {reason}", file=sys.stderr)
            return 1
    else:
        from testbed.backends import vm
        from testbed.spec.errors import SetupError
        try:
            machine = vm.boot(f"bench-{os.getpid()}", shares=vm.default_shares(results),
                              mem=args.mem or vm.DEFAULT_MEM, owner=True,
                              console=results / "vm-console.log")
        except SetupError as exc:
            print(f"emulator_vs_netem: {exc}", file=sys.stderr)
            return 1
        kind = f"VM ({machine.state['accel']}, {machine.state['cpus']} vCPU)"
    netem, emu_guest, emu_host = [], [], []
    try:
        for name in [n for n in SPECS if n == "unimpaired" or not args.only or n in args.only]:
            for label, backend, runs in ((f"netem in the {kind}", "netem", netem),
                                         (f"userspace emulator in the {kind}", "userspace", emu_guest),
                                         ("userspace emulator on the host", None, emu_host)):
                print(f"{name}: {label} ...", file=sys.stderr, flush=True)
                load = os.getloadavg()
                m = (in_guest(name, backend, results, args.quick, args.mem or "768M", machine)
                     if backend else measure(name, SPECS[name], "userspace", results, args.quick))
                runs.append(loaded(m, load))
    finally:
        if machine is not None:
            machine.shutdown()
    out = results / f"emulator_vs_netem-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"netem_guest": netem, "emulator_guest": emu_guest,
                               "emulator_host": emu_host}, indent=1))
    print(table(f"Table 1 — the link alone: emulator and netem in the same {kind} (same kernel, "
                "same endpoints)", emu_guest, netem))
    print()
    print(table("Table 2 — host vs guest: emulator on this host against netem in the guest "
                "(link emulation AND two kernels' TCP)", emu_host, netem))
    print(f"\nraw results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
