"""``testbed topo list``, ``testbed topo show NAME [--set KEY=VALUE ...] [--link ...] [--json]``
and ``testbed topo up NAME [--set KEY=VALUE ...] [--link LINK.DIR.FIELD=VALUE ...] [--backend B]
[--cli | --hold S | --exec HOST CMD ... [--exec ...]]``.

``--set`` and ``--link`` mean what they mean in ``testbed run`` (``testbed/cli/options.py``), with
the topology's paths only: ``--set KEY=VALUE`` (= ``--set topology_params.KEY=VALUE``) and
``--link LINK.DIR.FIELD=VALUE`` (= ``--set links.LINK.DIR.FIELD=VALUE``).

``--exec HOST CMD ARGS...`` runs an outside program in a host (argv split without a shell;
``{host}`` in an argument becomes that host's address, e.g. ``{server}``; host names resolve
inside the hosts too); every program's output goes to ``<run dir>/exec-<n>-<host>.stdout``/
``.stderr``; all but the last run in the background (servers), the last in the foreground; the
exit status is the last one's.  ``--exec`` options come last (everything after the first one
belongs to the programs).

The result directory is a run directory (``testbed.run.execute.session``): captures as in
``testbed run`` (``--capture``, default every host with ``--exec``, none otherwise;
``--full-payload``), ``manifest.json`` written after teardown; ``testbed analyze DIR`` reads it.

    testbed topo up longhaul --set loss_down=0% --exec server iperf3 -s \
        --exec client iperf3 -c {server} -t 5
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from testbed.cli.options import add_json, add_set_link, add_topology_args, topology_sets
from testbed.spec.errors import UsageError
from testbed.spec.units import counted, format_rate, format_time

log = logging.getLogger(__name__)


def register(sub) -> None:
    p = sub.add_parser("topo", help="list topologies or bring one up")
    tsub = p.add_subparsers(dest="topo_command", metavar="ACTION")
    tsub.required = True
    lp = tsub.add_parser("list", help="list the topologies: hosts, roles, links and parameters")
    lp.set_defaults(func=run_list)
    sp = tsub.add_parser("show", help="one topology's hosts, roles, and links with both directions' specs",
                         description="One topology as --set and --link make it: a line saying what "
                                     "the path is, its roles, hosts and addresses, and every named "
                                     "link with both directions' specs (and schedules). Nothing is "
                                     "brought up; no root needed.")
    sp.add_argument("name", metavar="NAME", help=TOPOLOGY_NAME)
    add_set_link(sp, topology_only=True)
    add_json(sp)
    sp.set_defaults(func=run_show)
    up = tsub.add_parser("up", help="bring a topology up, print it, tear it down on exit",
                         description="Bring a topology up (as root) as one run directory, then open "
                                     "Mininet's CLI (--cli), hold it (--hold), or run programs in "
                                     "its hosts (--exec); tear it down on exit. `testbed analyze` "
                                     "reads the directory it names.")
    up.add_argument("name", metavar="NAME", help=TOPOLOGY_NAME)
    add_topology_args(up, topology_only=True)
    up.add_argument("--cli", action="store_true", help="open Mininet's CLI to poke around")
    up.add_argument("--hold", type=float, default=0, metavar="SECONDS",
                    help="without --cli: keep the topology up this long (default: tear down at once)")
    up.add_argument("--capture", default=None, metavar="all|none|HOST,...",
                    help="tcpdump (headers only) on every interface of these hosts, into the run "
                         "directory (default: all with --exec, none otherwise)")
    up.add_argument("--full-payload", action="store_true", help="capture whole frames")
    up.add_argument("--exec", dest="execs", action="append", nargs=argparse.REMAINDER, default=[],
                    metavar="HOST CMD", help="HOST CMD [ARG ...]: run CMD in HOST ({host} in "
                    "an argument → that host's address); the last --exec runs in the foreground, the "
                    "others in the background; --exec options come last (what follows one is the "
                    "programs')")
    up.set_defaults(func=run_up, check_in_guest=check_in_guest)


TOPOLOGY_NAME = "a topology (testbed topo list), or a .py file that registers one"


def build(args):
    """The topology of ``args.name`` with its ``--set``/``--link`` applied (built once)."""
    from testbed.run.plan import build_topology
    return build_topology(args.name, *topology_sets(args.overrides, args.link))


def check_in_guest(args) -> None:
    """Refuse here, before a guest boots, what cannot work there (``--backend
    netem-uml``/``netem-vm`` re-run the command there with ``--backend netem``): ``--cli`` (the
    command in a guest reads no terminal) and a link schedule netem cannot apply."""
    if args.cli:
        raise UsageError(f"--cli with --backend {args.backend}: the command runs in a guest, whose "
                         "stdin is not your terminal, so Mininet's CLI would read nothing; use "
                         "--exec HOST CMD … or --hold SECONDS")
    from testbed.backends.tc_schedule import topology_refusal
    why = topology_refusal(build(args))
    if why:
        raise UsageError(why)


def describe(topo) -> dict:
    """Hosts (addresses), roles, parameters and named links (both directions) of a topology
    instance (``testbed.run.plan.build_topology``)."""
    cls = type(topo)
    hosts = {}
    for h in topo.hosts():
        ips = [info[key]["ip"] for _, _, info in topo.links(withInfo=True)
               for node, key in ((info["node1"], "params1"), (info["node2"], "params2"))
               if node == h and info.get(key, {}).get("ip")]
        hosts[h] = {"ips": ips or ([topo.nodeInfo(h)["ip"]] if topo.nodeInfo(h).get("ip") else []),
                    "router": bool(topo.nodeInfo(h).get("router"))}
    return {"name": cls.name, "chapter_case": cls.chapter_case, "description": topo.summary(),
            "roles": dict(cls.roles), "hosts": hosts,
            "params": {k: {"value": topo.values[k], "default": d, "help": h}
                       for k, (d, h) in cls.params.items()},
            "links": topo.link_table()}


def run_list(args) -> int:
    from testbed.run.plan import build_topology
    from topologies import TOPOLOGIES
    for name in TOPOLOGIES:
        d = describe(build_topology(name))
        case = f" [{d['chapter_case']}]" if d["chapter_case"] else ""
        print(f"{name}{case}: {d['description']}")
        scheduled = [f"{link['name']}.{x}" for link in d["links"] for x in ("up", "down")
                     if (link[x]["schedule"] or {}).get("from") == "topology"]
        print(f"    hosts: {', '.join(d['hosts'])} (client {d['roles']['client']}, "
              f"server {d['roles']['server']}); links: {', '.join(l['name'] for l in d['links'])}"
              + (f"; default schedules on {', '.join(scheduled)} (topo show)" if scheduled else ""))
        width = max(map(len, d["params"]), default=0)
        for key, p in d["params"].items():
            print(f"    {key:<{width}}  {str(p['default']):<10} {p['help']}")
    return 0


def run_show(args) -> int:
    d = describe(build(args))
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    print(f"{d['name']}: {d['description']}")
    print(f"  roles: client {d['roles']['client']}, server {d['roles']['server']}")
    for host, info in d["hosts"].items():
        print(f"  host {host}: {', '.join(info['ips']) or '-'}{' (router)' if info['router'] else ''}")
    for link in d["links"]:
        print(f"  link {link['name']}:")
        for direction in ("up", "down"):
            x = link[direction]
            print(f"    {direction:<4} {x['from']} → {x['to']}: {x['describe']}")
            if x["schedule"]:
                origin = {"topology": " (the topology's default)", "links": " (--link)"}
                print(f"         schedule{origin.get(x['schedule']['from'], '')}, from the client's start:")
                for item in x["schedule"]["items"]:
                    print(f"           {item}")
        if link["medium"]:
            print(f"    medium {medium_line(link['medium'])}")
    return 0


def medium_line(m: dict) -> str:
    """A shared medium (``AirtimeSpec.to_dict``) as ``topo show`` prints it: both directions of
    its link take turns on it, at its data rate, each frame with its MAC framing and ACK."""
    return (f"{m['name']}, shared by both directions: data {format_rate(m['data_rate'])}, MAC ACKs "
            f"{format_rate(m['control_rate'])}, DIFS {format_time(m['difs'])}, SIFS {format_time(m['sifs'])}, "
            f"slot {format_time(m['slot'])}, {m['mac_overhead']} B MAC overhead, {m['ack_bytes']} B ACK, "
            f"cw_min {m['cw_min']} slots")


def check_up_args(args, topo) -> None:
    """What ``topo up`` can refuse before it brings ``topo`` up: alternatives, --hold, --exec
    hosts and the host names in their arguments (``{host}``), --full-payload without captures."""
    from testbed.run.network import substitute_hosts
    from testbed.run.plan import check_capture
    if sum(map(bool, (args.cli, args.hold, args.execs))) > 1:
        raise UsageError("--cli, --hold and --exec are alternatives; give one of them")
    check_capture(up_spec(args).capture)
    if args.hold < 0:
        raise UsageError(f"--hold {args.hold:g}: give the seconds to keep the topology up (>= 0)")
    hosts = set(topo.hosts())
    for item in split_execs(args.execs) if args.execs else []:
        if len(item) < 2 or item[0] not in hosts:
            raise UsageError(f"--exec {' '.join(item)!r}: expected HOST CMD [ARG...] with HOST one "
                             f"of {', '.join(sorted(hosts))}")
        try:                                    # {host} becomes its address once it is up
            substitute_hosts(item[1:], {h: h for h in hosts})
        except ValueError as exc:
            raise UsageError(f"--exec {' '.join(item)!r}: {exc}") from None


def up_spec(args):
    """The RunSpec of a ``topo up`` command line (workload ``exec``: no registered workload)."""
    from testbed.run.execute import EXEC_WORKLOAD
    from testbed.spec.runspec import CaptureSpec, RunSpec
    params, links = topology_sets(args.overrides, args.link)
    hosts = args.capture if args.capture is not None else ("all" if args.execs else "none")
    return RunSpec(topology=args.name, topology_params=params, links=links, backend=args.backend,
                   seed=args.seed, workload=EXEC_WORKLOAD,
                   capture=CaptureSpec(hosts, args.full_payload, True))


def run_up(args) -> int:
    from testbed.run.execute import session
    topo = build(args)
    check_up_args(args, topo)
    spec = up_spec(args)
    t0 = time.monotonic()
    with session(spec, topo, results_root=args.results) as (tb, result):
        log.info("topo up took %.3f s", time.monotonic() - t0)
        print(f"{tb.topo.name} up with backend {tb.backend.name}; results in {tb.dir}")
        for link in tb.metadata["links"]:
            print(f"  {link['name']} up   {link['a']} → {link['b']}: {link['describe'][0]}")
            print(f"  {link['name']} down {link['b']} → {link['a']}: {link['describe'][1]}")
        for name, info in tb.metadata["hosts"].items():
            print(f"  {name}: {', '.join(f'{i} {ip}' for i, ip in info['ips'].items())}")
        if spec.capture.hosts != "none":
            hosts = sorted(tb.hosts) if spec.capture.hosts == "all" else spec.capture.hosts
            print(f"  capturing on {', '.join(hosts)} "
                  + ("(whole frames)" if spec.capture.full_payload else "(headers only)"))
        status = 0
        if args.execs:
            status = run_execs(tb, args.execs, result)
        elif args.cli:
            run_cli(tb.net)
        elif args.hold:
            time.sleep(args.hold)
    if (result.fidelity or {}).get("verdict", "unknown") != "unknown":   # the links' verdict
        from testbed.emulator.fidelity import line
        print(line(result.fidelity))
    pcaps = len(result.files_of("pcap"))
    print(f"torn down; run directory {result.dir} ({result.status}"
          + (f", {counted(pcaps, 'capture')}" if pcaps else "") + f"): testbed analyze {result.dir}")
    return status


def run_cli(net) -> None:
    """Mininet's CLI on ``net``, printing what its commands print.  The CLI writes every
    command's output (``nodes``, ``client ping server``) through Mininet's logger at its level
    ``output``; the Testbed keeps that logger at ``error`` (no Mininet chatter in runs), which
    silenced them.  Here the logger is at ``output`` with its own handler only (not also the
    testbed's ``testbed: …`` handler on the root logger), and put back afterwards."""
    from mininet.cli import CLI
    from mininet.log import lg
    level, propagate = lg.getEffectiveLevel(), lg.propagate
    lg.setLogLevel("output")
    lg.propagate = False
    try:
        CLI(net)
    finally:
        lg.setLevel(level)
        lg.ch.setLevel(level)
        lg.propagate = propagate


def split_execs(execs: list[list[str]]) -> list[list[str]]:
    """argparse gives the first ``--exec`` everything after it: split at each ``--exec``."""
    out: list[list[str]] = []
    for group in execs:
        current: list[str] = []
        for token in group:
            if token == "--exec":
                out.append(current)
                current = []
            else:
                current.append(token)
        out.append(current)
    return out


def run_execs(tb, execs: list[list[str]], result=None) -> int:
    """Run each ``[HOST, CMD, ARG...]`` in its host (``Testbed.run_programs``: the last in the
    foreground), print each one's output; the exit status is the last one's.  ``result``: the
    session's RunResult, which records each program's argv (``apps``) and a last program that
    failed (``error``)."""
    programs = tb.run_programs([(item[0], item[1:]) for item in split_execs(execs)])
    if result is not None:
        result.apps.update({f"exec-{n}-{p['host']}": p["argv"] for n, p in enumerate(programs)})
    for prog in programs:
        text = prog["stdout"].read_text(errors="replace")
        print(f"--- {prog['host']}: {' '.join(prog['argv'])}\n{text}", end="" if text.endswith("\n") else "\n")
    last = programs[-1]
    if last["returncode"]:           # e.g. a program the host cannot find: say so, and where
        err = last["stderr"].read_text(errors="replace").strip()
        message = (f"{' '.join(last['argv'])} on {last['host']} exited {last['returncode']}"
                   + (f": {err.splitlines()[-1]}" if err else ""))
        print(f"testbed: {message}", file=sys.stderr)
        if result is not None:
            result.error = message
    return last["returncode"]
