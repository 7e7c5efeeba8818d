"""Benchmarks of the testbed's UDP transport (testbed/transport): figures printed, nothing
asserted.  Figures depend on the machine's load: each part prints /proc/loadavg next to them.

    .venv/bin/python benchmarks/fec.py codec      # RaptorQ encode/decode of 245 + 63 symbols of 1448 B
    .venv/bin/python benchmarks/fec.py virtual    # ARQ and FEC completion in virtual time vs closed form
    .venv/bin/python benchmarks/fec.py veth  # goodput on an unimpaired veth, ours vs aioquic

codec: median and min over ``--reps`` of RaptorQ encoding (Encoder + 63 repair symbols) and of
decoding with 34 random source symbols missing (the expected loss at p = 0.14; symbols fed until
the decoder succeeds, normally at the 245th), next to the 10.7 ms the 308 symbols take to send at
333 Mbit/s.

virtual: ``--trials`` (10,000) transfers of the round model (testbed/transport/model.py) through
the emulator's DirectionModel (333 Mbit/s, 100 ms one way, 14 % Bernoulli loss, seeded), ARQ
(r = 0) and FEC (r = 63), against the closed form (analysis.models "fec"); then
``--protocol-trials`` requests of the real sans-I/O endpoint over the same kind of link (ACK
path lossless), which adds loss detection by reordering threshold, time threshold and probe
timeouts to the ideal model.

veth: two network namespaces joined by one veth pair (no qdisc, no emulator, offloads as the
kernel sets them), a ``--bytes`` transfer client → server: this transport (sans-I/O endpoint +
UDP loop, fec off, pacing at the delivery-rate estimate; ACK every packet and every 8) and
aioquic (one stream written in 64 KB chunks with at most 1 MB unacknowledged in its send buffer,
write_eof, the server answers one byte at end of stream), alternated
``--reps`` times.  Goodput = bytes / (first byte handed to the stack → the sender learned
everything arrived).  Namespaces and processes are removed on exit, Ctrl-C and SIGTERM.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
MS = 1_000_000


def load() -> str:
    return open("/proc/loadavg").read().split(" ", 3)[:3].__str__()


# ------------------------------------------------------------------ codec

def codec(reps: int) -> None:
    import raptorq
    data = random.Random(1).randbytes(354_640)
    enc_t, dec_t, needed_more = [], [], 0
    for i in range(reps):
        t = time.perf_counter()
        packets = raptorq.Encoder.with_defaults(data, 1448).get_encoded_packets(63)
        enc_t.append(time.perf_counter() - t)
        rng = random.Random(i)
        lost = set(rng.sample(range(245), 34))
        got = [p for j, p in enumerate(packets) if j not in lost]
        t = time.perf_counter()
        dec = raptorq.Decoder.with_defaults(len(data), 1448)
        out = None
        for n, p in enumerate(got, 1):  # noqa: B007 (n: symbols needed, read after the loop)
            out = dec.decode(p)
            if out is not None:
                break
        dec_t.append(time.perf_counter() - t)
        needed_more += n > 245
        if out is None or bytes(out) != data:
            raise SystemExit(f"decode {i} failed: {None if out is None else len(out)}")
    send = 308 * 1448 * 8 / 333e6
    for name, v in (("encode 245 + 63", enc_t), ("decode, 34 sources missing", dec_t)):
        print(f"  {name:28s} median {statistics.median(v) * 1e3:6.2f} ms  min {min(v) * 1e3:6.2f} ms  "
              f"({statistics.median(v) / send:.2f} x the 10.7 ms sending time at 333 Mbit/s)")
    print(f"  decoding needed more than k = 245 symbols in {needed_more} of {reps} reps "
          f"(RFC 6330: < 1 % at k); reps {reps}, load {load()}")


# ------------------------------------------------------------------ virtual time

def virtual(trials: int, protocol_trials: int) -> None:
    from analysis.models import evaluate
    from testbed.emulator.direction import DirectionModel
    from testbed.spec.linkspec import LinkSpec
    from testbed.transport import model
    cf = evaluate("fec")

    def link(seed, loss="14%"):
        return DirectionModel(LinkSpec.parse(rate="333mbit", delay="100ms", loss=loss, queue="100000"), seed)
    print(f"  closed form: ARQ mean {cf['arq_mean'].value:.4f} s, p99 {cf['arq_quantile'].value:.4f} s; "
          f"FEC r = {cf['fec_repair'].value}, {cf['fec_completion'].value:.1f} ms")
    for name, r in (("ARQ", 0), ("FEC r=63", 63)):
        t = time.perf_counter()
        res = [c / 1e9 for c, _ in model.trials(trials, 245, r, link(1), 200 * MS, 30 * MS, 1448)]
        print(f"  round model {name:9s} {trials} trials: mean {statistics.mean(res):.4f} s, "
              f"p50 {model.quantile(res, .5):.4f} s, p99 {model.quantile(res, .99):.4f} s "
              f"({time.perf_counter() - t:.1f} s wall)")
    from testbed.apps import payload
    from testbed.transport.config import TransportConfig
    from testbed.transport.endpoint import Endpoint, MessageReceived
    from testbed.transport.sim import Simulation
    body = payload.body()
    for fec in ("off", "adaptive"):
        cfg = TransportConfig.from_factors(fec=fec, loss_prior="14%")
        res, t = [], time.perf_counter()
        for seed in range(protocol_trials):
            c, s = Endpoint(cfg), Endpoint(cfg)
            sim = Simulation(c, s, link(seed), link(seed + 10**6, "0%"))
            got = {}

            def on(sim, side, ev, s=s, got=got):
                if side == "b" and isinstance(ev, MessageReceived):
                    def answer(sim):
                        s.send_message(sim.now, b"r" * 1000)
                        sim.flush("b")
                    sim.at(sim.now + 30 * MS, answer)
                elif side == "a" and isinstance(ev, MessageReceived):
                    got["t"] = sim.now
            sim.on_event(on)
            c.send_message(0, body)
            sim.flush("a")
            sim.run(stop=lambda got=got: "t" in got)
            res.append(got["t"] / 1e9)
        print(f"  endpoint fec={fec:8s} {protocol_trials} trials: mean {statistics.mean(res):.4f} s, "
              f"p50 {model.quantile(res, .5):.4f} s, p99 {model.quantile(res, .99):.4f} s "
              f"({time.perf_counter() - t:.1f} s wall)")
    print(f"  load {load()}")


# ------------------------------------------------------------------ veth

def _udp_server(port: int) -> None:
    from testbed.transport.config import TransportConfig
    from testbed.apps.udploop import UdpLoop, udp_socket
    sock = udp_socket(("0.0.0.0", port))
    loop = UdpLoop(sock, TransportConfig.from_factors(ack=os.environ.get("TB_ACK", "every")), accept=True)
    print("ready", flush=True)
    loop.run(lambda a, e: None, lambda: False)


def _udp_client(addr: str, port: int, nbytes: int, ack: str) -> None:
    from testbed.transport.config import TransportConfig
    from testbed.apps.udploop import UdpLoop, udp_socket
    sock = udp_socket()
    loop = UdpLoop(sock, TransportConfig.from_factors(ack=ack, pacing="estimate"))
    ep = loop.endpoint((addr, port))
    chunk = 1_000_000
    t0 = time.monotonic_ns()
    for _ in range(nbytes // chunk):
        ep.send_message(t0, bytes(chunk))
    ok = loop.run(lambda a, e: None, lambda: not ep.busy, t0 + 120 * 10**9)
    dt = (time.monotonic_ns() - t0) / 1e9
    print(f"{nbytes // chunk * chunk * 8 / dt / 1e6:.1f} {int(ok)} {ep.stats['lost']} {ep.stats['packets_sent']}")


def _quic_server(port: int, cert: str, key: str) -> None:
    import asyncio
    from aioquic.asyncio import serve
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import StreamDataReceived

    class Sink(QuicConnectionProtocol):
        def quic_event_received(self, event):
            if isinstance(event, StreamDataReceived) and event.end_stream:
                self._quic.send_stream_data(event.stream_id, b"k", end_stream=True)
                self.transmit()

    async def main():
        cfg = QuicConfiguration(is_client=False, alpn_protocols=["bench"])
        cfg.load_cert_chain(cert, key)
        await serve("0.0.0.0", port, configuration=cfg, create_protocol=Sink)
        print("ready", flush=True)
        await asyncio.Future()
    asyncio.run(main())


def _quic_client(addr: str, port: int, nbytes: int) -> None:
    import asyncio
    import ssl
    from aioquic.asyncio import connect
    from aioquic.quic.configuration import QuicConfiguration

    async def main():
        cfg = QuicConfiguration(is_client=True, alpn_protocols=["bench"], verify_mode=ssl.CERT_NONE)
        async with connect(addr, port, configuration=cfg) as client:
            reader, writer = await client.create_stream()
            t0 = time.monotonic_ns()
            chunk = bytes(65536)
            writer.write(chunk)
            sender = client._quic._streams[writer.get_extra_info("stream_id")].sender
            for _ in range(nbytes // len(chunk) - 1):
                # aioquic 1.x drops ACKed bytes with `del buffer[:n]`: keep its send buffer at
                # 1 MB so that memmove does not turn a large write quadratic
                while len(sender._buffer) > 1_000_000:
                    await asyncio.sleep(0.0005)
                writer.write(chunk)
            writer.write_eof()
            await asyncio.wait_for(reader.read(), 120)
            dt = (time.monotonic_ns() - t0) / 1e9
            print(f"{nbytes // len(chunk) * len(chunk) * 8 / dt / 1e6:.1f} 1 - -")
    asyncio.run(main())


def veth(reps: int, nbytes: int) -> None:
    if os.geteuid() != 0:
        raise SystemExit("fec.py veth: needs root (network namespaces): run it as root")
    tag = f"tbfec{os.getpid()}"
    ns = (f"{tag}a", f"{tag}b")
    procs: list[subprocess.Popen] = []
    tmp = tempfile.mkdtemp(prefix="tbfec-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def start(n, argv, env=None):
        p = subprocess.Popen(["ip", "netns", "exec", n, sys.executable, __file__, *argv], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **(env or {})})
        procs.append(p)
        return p
    try:
        for n in ns:
            ip("netns", "add", n)
        ip("link", "add", f"{tag}x", "netns", ns[0], "type", "veth", "peer", "name", f"{tag}y", "netns", ns[1])
        for n, dev, a in ((ns[0], f"{tag}x", "10.253.0.1/24"), (ns[1], f"{tag}y", "10.253.0.2/24")):
            ip("-n", n, "addr", "add", a, "dev", dev)
            ip("-n", n, "link", "set", dev, "up")
            ip("-n", n, "link", "set", "lo", "up")
        from testbed.apps import tls
        cert, key = tls.make_cert(tmp)
        servers = {"udp-every": start(ns[1], ["_udp-server", "6001"]),
                   "udp-n8": start(ns[1], ["_udp-server", "6002"], {"TB_ACK": "n:8"}),
                   "aioquic": start(ns[1], ["_quic-server", "6003", str(cert), str(key)])}
        for name, p in servers.items():
            if not p.stdout.readline().startswith("ready"):
                raise SystemExit(f"{name} server did not start: {p.stderr.read()[-300:]}")
        arms = {"udp-every": ["_udp-client", "10.253.0.2", "6001", str(nbytes), "every"],
                "udp-n8": ["_udp-client", "10.253.0.2", "6002", str(nbytes), "n:8"],
                "aioquic": ["_quic-client", "10.253.0.2", "6003", str(nbytes)]}
        res: dict[str, list[float]] = {a: [] for a in arms}
        for _ in range(reps):
            for arm, argv in arms.items():
                c = start(ns[0], argv)
                out, err = c.communicate(timeout=300)
                procs.remove(c)
                fields = out.split()
                if c.returncode or not fields or fields[1] != "1":
                    print(f"  {arm}: failed ({(err or out).strip()[-200:]})")
                    continue
                res[arm].append(float(fields[0]))
        quic = statistics.median(res["aioquic"]) if res["aioquic"] else None
        for arm, v in res.items():
            if v:
                ratio = f", {statistics.median(v) / quic:.2f} x aioquic" if quic else ""
                print(f"  {arm:10s} goodput median {statistics.median(v):7.1f} Mbit/s "
                      f"(min {min(v):.1f}, max {max(v):.1f}, n={len(v)}){ratio}")
        print(f"  {nbytes / 1e6:g} MB per transfer, load {load()}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):      # helpers run inside a namespace
        cmd, args = sys.argv[1], sys.argv[2:]
        {"_udp-server": lambda: _udp_server(int(args[0])),
         "_udp-client": lambda: _udp_client(args[0], int(args[1]), int(args[2]), args[3]),
         "_quic-server": lambda: _quic_server(int(args[0]), args[1], args[2]),
         "_quic-client": lambda: _quic_client(args[0], int(args[1]), int(args[2]))}[cmd]()
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("parts", nargs="*", choices=("codec", "virtual", "veth"), default=None,
                   help="which parts (default: codec virtual, plus veth as root)")
    p.add_argument("--reps", type=int, default=20, help="codec repetitions (veth: 5)")
    p.add_argument("--trials", type=int, default=10_000, help="round-model trials per arm")
    p.add_argument("--protocol-trials", type=int, default=300, help="endpoint trials per arm")
    p.add_argument("--bytes", type=int, default=30_000_000, help="veth transfer size")
    a = p.parse_args()
    parts = a.parts or ["codec", "virtual"] + (["veth"] if os.geteuid() == 0 else [])
    for part in parts:
        print(part)
        if part == "codec":
            codec(a.reps)
        elif part == "virtual":
            virtual(a.trials, a.protocol_trials)
        else:
            veth(min(a.reps, 5), a.bytes)


if __name__ == "__main__":
    main()
