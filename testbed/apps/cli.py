"""``testbed run WORKLOAD``: bring up a topology, apply the factors, run one workload, tear down.

    testbed run reqresp --topo longhaul --set loss_down=0% --mode reuse --requests 10 \
        --cc bbr --window 64KB --ack max:10ms --initcwnd 10 --capture client
    testbed run reqresp --topo relay --path relay --mode new --requests 10
    testbed run bulk --topo longhaul --size 30MB --direction up
    testbed run audio --topo longhaul --transport udp --duration 5s --buffer 40ms,45ms
    testbed run agent --topo longhaul --rounds 30 --reuse
    testbed run reqresp --topo loopback ...     # 127.0.0.1, no root, no host factors

Factors: socket factors (``--cc --window --sndbuf --rcvbuf --window-clamp --nodelay``) go to
both ends' sockets before listen/connect; ``--ack`` (delayed | quick | max:<time>) becomes the
route's ``quickack 1`` on both hosts or TCP_DELACK_MAX_US on both sockets; ``--initcwnd``,
``--initrwnd`` (route options towards the peer) and ``--slow-start-after-idle`` apply in both
hosts' namespaces; tcp_metrics are flushed before every run (``--keep-metrics`` not to).
``--path relay`` (topology ``relay``: client, cgw, sgw, server) starts the SOCKS5 client
gateway on cgw and the server gateway on sgw joined by one tunnel tuned with ``--tunnel-*``.

Results in the run directory: ``client.jsonl``, ``server.jsonl`` (and ``cgw.jsonl``,
``sgw.jsonl``) event logs, ``<host>-<iface>.pcap`` captures, ``apps.json`` (the argv of every
app and the host factors read back in each namespace).
"""
from __future__ import annotations

import contextlib
import json
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import tcpopts
from ..capture import capture_hosts

WORKLOADS = {"reqresp": "request/response (C7)", "bulk": "bulk transfer",
             "audio": "streaming audio (C9)", "agent": "screenshot agent loop (C13)"}
PORTS = {"reqresp": 5000, "bulk": 5001, "audio": 5002, "agent": 5000}
APP_MODULE = {"reqresp": "testbed.apps.reqresp", "bulk": "testbed.apps.bulk",
              "audio": "testbed.apps.audio", "agent": "testbed.apps.reqresp"}
TUNNEL_PORT, SOCKS_PORT = 7000, 1080


def register(sub) -> None:
    p = sub.add_parser("run", help="run a workload (reqresp, bulk, audio, agent) on a topology",
                       description=__doc__.split("\n\n")[0])
    wsub = p.add_subparsers(dest="workload", metavar="WORKLOAD")
    wsub.required = True
    for name, help_ in WORKLOADS.items():
        w = wsub.add_parser(name, help=help_)
        _add_common(w)
        globals()[f"_add_{name}"](w)
        w.set_defaults(func=run)


def _add_common(p) -> None:
    from ..topo_cli import add_topology_args
    p.add_argument("--topo", default="longhaul", help="topology name, or 'loopback' (127.0.0.1, no root)")
    add_topology_args(p)
    p.add_argument("--client-host", default="client")
    p.add_argument("--server-host", default="server")
    p.add_argument("--capture", default="all", metavar="all|none|HOST,...",
                   help="tcpdump (headers only) on every interface of these hosts (default: all)")
    p.add_argument("--full-payload", action="store_true", help="capture whole frames")
    p.add_argument("--sample", default="10ms", help="TCP_INFO sampling interval")
    p.add_argument("--timeout", default=600.0, type=float, help="seconds the client may take")
    tcpopts.add_socket_arguments(p)
    h = p.add_argument_group("host factors (both ends' namespaces)")
    h.add_argument("--ack", default="delayed", help="delayed | quick | max:<time>")
    h.add_argument("--initcwnd", type=int, help="route option towards the peer (segments)")
    h.add_argument("--initrwnd", type=int, help="route option towards the peer (segments)")
    h.add_argument("--slow-start-after-idle", type=int, choices=(0, 1),
                   help="net.ipv4.tcp_slow_start_after_idle in both namespaces")
    h.add_argument("--keep-metrics", action="store_true", help="do not flush tcp_metrics")


def _add_reqresp(p) -> None:
    p.add_argument("--path", choices=("direct", "relay"), default="direct",
                   help="direct, or through the SOCKS5 gateway pair (topology relay)")
    p.add_argument("--mode", choices=("new", "reuse"), default="new",
                   help="a new connection per request, or one warmed connection")
    p.add_argument("--requests", type=int, default=1, help="timed requests K")
    p.add_argument("--think", default="0", help="pause between requests")
    p.add_argument("--warmup", type=int, default=10,
                   help="at most this many untimed requests to warm the reused connection")
    p.add_argument("--size", default="354640", help="request body (the fixed generated file)")
    p.add_argument("--reply-size", default="1000", help="reply size M")
    p.add_argument("--process", default="30ms", help="server processing time T")
    p.add_argument("--tls", action="store_true", help="TLS 1.3")
    p.add_argument("--resume", action="store_true", help="TLS session resumption (mode new)")
    p.add_argument("--write", choices=("one", "blocks"), default="one",
                   help="request write pattern: one send() (default) or 64 KiB blocks")
    g = p.add_argument_group("relay tunnel (with --path relay)")
    g.add_argument("--relay-hosts", default="cgw,sgw", help="client-side,server-side gateway hosts")
    g.add_argument("--tunnel-buffers", default="16MB", help="SO_SNDBUF/SO_RCVBUF of the tunnel")
    g.add_argument("--tunnel-initcwnd", type=int, default=256,
                   help="route initcwnd/initrwnd between the gateways (256 ≥ 245 segments of the request)")
    g.add_argument("--tunnel-cc", default="cubic", help="TCP_CONGESTION of the tunnel (default cubic)")


def _add_bulk(p) -> None:
    p.add_argument("--direction", choices=("up", "down"), default="up", help="up: client sends")
    p.add_argument("--size", help="bytes to transfer, e.g. 30MB")
    p.add_argument("--duration", help="or: transfer for this long, e.g. 10s")


def _add_audio(p) -> None:
    p.add_argument("--transport", choices=("tcp", "udp"), default="tcp")
    p.add_argument("--rate", default="24000", help="sample rate, Hz")
    p.add_argument("--sample-bytes", default="2", help="bytes per (mono) sample")
    p.add_argument("--chunk", default="20ms", help="chunk duration τ")
    p.add_argument("--duration", default="2s", help="stream length")
    p.add_argument("--process", default="12ms", help="server processing per chunk m")
    p.add_argument("--buffer", default="40ms,45ms", help="initial buffer(s) J of the players")


def _add_agent(p) -> None:
    p.add_argument("--rounds", type=int, default=30, help="rounds N")
    p.add_argument("--screenshot", default="0.8MB", help="upload S per round")
    p.add_argument("--model", default="2s", help="server think time T per round")
    p.add_argument("--action", default="200", help="action size returned")
    p.add_argument("--terminal", default="0.3s", help="terminal work between rounds")
    p.add_argument("--reuse", action="store_true", help="one connection for all rounds")
    p.add_argument("--tls", action="store_true", help="TLS 1.3")


def _flags(args, names) -> list[str]:
    """``--name value`` for each set option (store_true options as bare flags)."""
    out = []
    for name in names:
        value = getattr(args, name.replace("-", "_"))
        if value is True:
            out.append(f"--{name}")
        elif value not in (None, False):
            out += [f"--{name}", str(value)]
    return out


def client_argv(args, server: str, socks: str | None, log: Path) -> list[str]:
    common = ["--log", str(log), "--sample", args.sample]
    if args.workload == "reqresp":
        return ["client", "--server", server, *common, *(["--socks", socks] if socks else []),
                *_flags(args, ["mode", "requests", "think", "warmup", "size", "reply-size",
                               "process", "tls", "resume", "write"])]
    if args.workload == "bulk":
        return ["client", "--server", server, *common, *_flags(args, ["direction", "size", "duration"])]
    if args.workload == "audio":
        return ["client", "--server", server, "--log", str(log),
                *_flags(args, ["transport", "rate", "sample-bytes", "chunk", "duration", "process", "buffer"])]
    return ["--server", server, *common,
            *_flags(args, ["rounds", "screenshot", "model", "action", "terminal", "reuse", "tls"])]


def server_argv(args, port: int, log: Path) -> list[str]:
    argv = ["server", "--listen", f"0.0.0.0:{port}", "--log", str(log)]
    if args.workload == "audio":
        return argv + ["--transport", args.transport, "--sample", args.sample]
    return argv + ["--sample", args.sample] + (["--tls"] if getattr(args, "tls", False) else [])


class Loopback:
    """The Testbed interface for ``--topo loopback``: processes on this host, 127.0.0.1."""

    def __init__(self, results_root):
        from ..lifecycle import Run
        self.run_ = Run(results_root)

    @property
    def dir(self) -> Path:
        return self.run_.dir

    def ip(self, host: str) -> str:
        return "127.0.0.1"

    def popen(self, host, argv, name="process", **kwargs):
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen(list(argv), start_new_session=True, **kwargs)
        self.run_.record_pid(proc.pid, f"{name} on {host}", group=True)
        return proc

    def run(self, host, argv, timeout=60, name="command", **_):
        proc = self.popen(host, argv, name=name, text=True, stdin=subprocess.DEVNULL)
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)

    def __enter__(self):
        self.run_.__enter__()
        return self

    def __exit__(self, *exc):
        self.run_.close()


def wait_ready(proc: subprocess.Popen, what: str, timeout: float = 15.0) -> str:
    """Wait for the app's ``ready HOST:PORT`` line; a clear error if it exits instead."""
    deadline = time.monotonic() + timeout
    fd = proc.stdout
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            line = fd.readline()
            line = line.decode() if isinstance(line, bytes) else line
            if line.startswith("ready "):
                return line.split()[1]
            if not line:
                break
    err = proc.stderr.read() if proc.poll() is not None else b""
    err = err.decode(errors="replace") if isinstance(err, bytes) else err
    raise RuntimeError(f"{what} did not start: {err.strip() or 'no ready line in time'}")


def run(args) -> int:
    """Bad input raises ValueError (the CLI prints it, exit 2); a run that cannot start or a
    client that fails prints one line and returns 1."""
    try:
        return _run(args)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"testbed: error: {exc}", file=sys.stderr)
        return 1


def _run(args) -> int:
    from ..topo_cli import parse_overrides
    quick, delack = tcpopts.parse_ack(args.ack)
    if delack is not None:
        args.delack_max = f"{delack}us"
    factors = tcpopts.socket_factors(args)          # validates cc, sizes before anything starts
    with socket.socket() as probe:                   # and what only the kernel knows (delack)
        factors.apply(probe)
    relay = getattr(args, "path", "direct") == "relay"
    if args.workload == "bulk" and (args.size is None) == (args.duration is None):
        raise ValueError("bulk needs exactly one of --size or --duration")
    host_factors_wanted = quick or args.initcwnd or args.initrwnd or args.slow_start_after_idle is not None
    if args.topo == "loopback":
        if host_factors_wanted or relay:
            raise ValueError("--topo loopback has no namespaces: --ack quick, --initcwnd, --initrwnd, "
                             "--slow-start-after-idle and --path relay need a topology")
        bed = Loopback(args.results)
    else:
        from ..network import Testbed
        bed = Testbed(args.topo, backend=args.backend, overrides=parse_overrides(args.overrides),
                      results_root=args.results, seed=args.seed)
    py = [sys.executable, "-m"]
    record: dict = {"workload": args.workload, "argv": sys.argv[1:], "apps": {}, "host_factors": {}}
    with bed as tb:
        client, server = args.client_host, args.server_host
        server_ip = tb.ip(server)
        if args.topo != "loopback":
            pairs = [(client, server_ip), (server, tb.ip(client))]
            for host, peer in pairs:
                h = tcpopts.HostFactors(peer, quick, args.initcwnd, args.initrwnd,
                                        None if args.slow_start_after_idle is None else bool(args.slow_start_after_idle),
                                        not args.keep_metrics)
                record["host_factors"][host] = _host_apply(tb, py, host, h)
        with contextlib.ExitStack() as stack:
            hosts = _capture_hosts(tb, args.capture)
            captures = (stack.enter_context(capture_hosts(tb, hosts, full_payload=args.full_payload))
                        if hosts else [])
            try:
                port = PORTS[args.workload]
                module = APP_MODULE[args.workload]
                sargv = py + [module, *server_argv(args, port, tb.dir / "server.jsonl"), *tcpopts.socket_argv(factors)]
                record["apps"]["server"] = sargv
                sproc = tb.popen(server, sargv, name=f"{args.workload} server")
                wait_ready(sproc, f"{args.workload} server on {server}")
                socks = _start_relay(tb, py, args, record) if relay else None
                cmodule = "testbed.apps.agent" if args.workload == "agent" else module
                cargv = py + [cmodule, *client_argv(args, f"{server_ip}:{port}", socks, tb.dir / "client.jsonl"),
                              *tcpopts.socket_argv(factors)]
                record["apps"]["client"] = cargv
                result = tb.run(client, cargv, timeout=args.timeout, name=f"{args.workload} client")
                if captures:
                    time.sleep(drain_time(tb))
            finally:
                stack.close()
                record["captures"] = [_capture_record(c) for c in captures]
                (tb.dir / "apps.json").write_text(json.dumps(record, indent=1, default=str))
        sys.stdout.write(result.stdout)
        print(f"results in {tb.dir}")
    if result.returncode:
        sys.stderr.write(result.stderr)
    return result.returncode


def _host_apply(tb, py, host, h: tcpopts.HostFactors) -> dict:
    r = tb.run(host, py + ["testbed.apps.tcpopts", "host", *h.argv()], timeout=30, name="tcpopts")
    if r.returncode:
        raise RuntimeError(f"applying host factors on {host} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def _start_relay(tb, py, args, record) -> str:
    from ..units import parse_size
    cgw, sgw = args.relay_hosts.split(",")
    cgw_ip = tb.ip(cgw)                                          # where the application connects
    cgw_tunnel_ip, sgw_ip = _link_ips(tb, cgw, sgw)              # the tunnel's two ends
    tunnel = ["--sndbuf", str(parse_size(args.tunnel_buffers)), "--rcvbuf", str(parse_size(args.tunnel_buffers))]
    if args.tunnel_cc:
        tunnel += ["--cc", args.tunnel_cc]
    tcpopts.SocketFactors(cc=args.tunnel_cc)                     # validate before starting
    for host, peer in ((cgw, sgw_ip), (sgw, cgw_tunnel_ip)):
        h = tcpopts.HostFactors(peer, False, args.tunnel_initcwnd, args.tunnel_initcwnd, False,
                                not args.keep_metrics)
        record["host_factors"][host] = _host_apply(tb, py, host, h)
    sargv = py + ["testbed.apps.relay", "server-gw", "--listen", f"0.0.0.0:{TUNNEL_PORT}",
                  "--log", str(tb.dir / "sgw.jsonl"), *tunnel]
    record["apps"]["sgw"] = sargv
    wait_ready(tb.popen(sgw, sargv, name="relay server-gw"), f"server gateway on {sgw}")
    cargv = py + ["testbed.apps.relay", "client-gw", "--socks", f"0.0.0.0:{SOCKS_PORT}",
                  "--tunnel", f"{sgw_ip}:{TUNNEL_PORT}", "--log", str(tb.dir / "cgw.jsonl"), *tunnel]
    record["apps"]["cgw"] = cargv
    wait_ready(tb.popen(cgw, cargv, name="relay client-gw"), f"client gateway on {cgw}")
    return f"{cgw_ip}:{SOCKS_PORT}"


def _link_ips(tb, a: str, b: str) -> tuple[str, str]:
    """IP addresses of ``a`` and ``b`` on the link joining them."""
    links = tb.net.linksBetween(tb.host(a), tb.host(b))
    if not links:
        raise ValueError(f"no link between {a} and {b}; --relay-hosts names the two gateways")
    by_node = {link_end.node.name: link_end.IP() for link_end in (links[0].intf1, links[0].intf2)}
    return by_node[a], by_node[b]


def _capture_hosts(tb, spec: str) -> list[str]:
    """Hosts to capture on: ``all`` (every host; none on loopback), ``none``, or a list."""
    if spec == "none" or (spec == "all" and isinstance(tb, Loopback)):
        return []
    if isinstance(tb, Loopback):
        raise ValueError("--topo loopback has no hosts to capture on; use --capture none")
    if spec == "all":
        return sorted(tb.hosts)
    hosts = [h for h in spec.split(",") if h]
    for host in hosts:
        tb.host(host)  # a clear error for an unknown host
    return hosts


def drain_time(tb) -> float:
    """Seconds to keep capturing after the workload ends, so its last ACKs and FINs are on file:
    twice the sum of every link direction's delay and jitter (an upper bound on any path's RTT)
    plus 100 ms."""
    total = sum(spec["delay"] + spec["jitter"] for link in tb.metadata["links"]
                for spec in (link["a_to_b"], link["b_to_a"]) if spec)
    return 2 * total + 0.1


def _capture_record(cap) -> dict:
    result = cap.result
    return {"pcap": result.pcap, "interface": result.interface, "ok": result.ok,
            "captured": result.captured, "dropped_by_kernel": result.dropped_by_kernel}
