"""``testbed doctor [--json]``: what this machine can do for the testbed, and how to fix what it can't."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from testbed.cli.options import add_json

TOOLS = ("mnexec", "tcpdump", "tshark", "iperf3", "ethtool", "ip", "ping")
FIX_PACKAGES = {"mnexec": "mininet", "tcpdump": "tcpdump", "tshark": "tshark", "iperf3": "iperf3",
                "ethtool": "ethtool", "ip": "iproute2", "ping": "iputils-ping"}


def register(sub) -> None:
    p = sub.add_parser("doctor", help="check what this machine supports and how to fix problems",
                       description="What this machine can do for the testbed — root, namespaces, "
                                   "Mininet, tools, qdiscs, congestion controls, MPTCP, the backend "
                                   "auto picks, the emulator's CPU, the UML guest, the Debian VM "
                                   "(its image, KVM or TCG) — and each problem with its fix; exit "
                                   "status 1 when there is one.")
    add_json(p, "print a JSON object")
    p.add_argument("--refresh", action="store_true",
                   help="boot the UML guest again instead of using the cached boot check")
    p.set_defaults(func=run)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def diagnose(refresh: bool = False) -> dict[str, Any]:
    problems: list[str] = []
    report: dict[str, Any] = {"root": os.geteuid() == 0, "python": sys.version.split()[0]}
    if not report["root"]:
        problems.append("not root: namespaces, veths and captures need root; run as root (sudo)")
    for tool in TOOLS:
        report[tool] = shutil.which(tool)
        if report[tool] is None:
            problems.append(f"{tool} not found: apt-get install {FIX_PACKAGES[tool]} (or `make install`)")
    try:
        import mininet.net  # noqa: F401  (the import itself is the check)
        from mininet.net import VERSION
        report["mininet"] = VERSION
    except ImportError as exc:
        report["mininet"] = None
        problems.append(f"Mininet's Python module does not import ({exc}): apt-get install mininet and "
                        "use the project's virtualenv (.venv, built on the system Python by `make install`)")
    cc = _read("/proc/sys/net/ipv4/tcp_available_congestion_control")
    report["congestion_control"] = cc.split() if cc else []
    for name in ("reno", "cubic", "bbr"):
        if name not in report["congestion_control"]:
            problems.append(f"congestion control {name} missing: modprobe tcp_{name}")
    report["mptcp"] = _read("/proc/sys/net/mptcp/enabled") == "1"
    if not report["mptcp"]:
        problems.append("MPTCP not enabled: sysctl -w net.mptcp.enabled=1 (kernel ≥ 5.6 with CONFIG_MPTCP)")
    if report["root"]:
        from testbed.backends.kernel import probe_qdiscs
        probe = probe_qdiscs()
        report.update({k: probe[k] for k in ("netns", "veth", "netem", "htb")})
        report["qdisc_errors"] = probe["errors"]
        if not probe["netns"] or not probe["veth"]:
            problems.append(f"cannot create network namespaces/veths ({probe['errors']}): the testbed "
                            "needs CONFIG_NET_NS and CONFIG_VETH and root")
    else:
        report.update({"netns": None, "veth": None, "netem": None, "htb": None})
    report["backend"] = "netem" if report["netem"] and report["htb"] else "userspace"
    from testbed.backends import uml, vm
    report["netem_uml"] = uml.doctor_report(refresh)
    report["netem_vm"] = vm.doctor_report()
    if report["backend"] == "userspace":
        report["backend_note"] = _backend_note(report)
    from testbed.emulator.forwarder import busy_policy, device_irqs_on, kernel_scheduling
    from testbed.emulator.native import available as native_available
    native_ok, native_where = native_available()
    report["emulator_engines"] = ["native", "python"] if native_ok else ["python"]
    report["native_engine"] = native_where
    cpus = sorted(os.sched_getaffinity(0))
    report["emulator_cpu"] = {  # see backends.userspace (CPUs) and emulator.config (cpu_latency)
        "cpus": cpus, "forwarder_cpu": cpus[-1] if len(cpus) > 1 else None,
        "cpu_latency_request": os.access("/dev/cpu_dma_latency", os.W_OK),
        "cpuidle_driver": _read("/sys/devices/system/cpu/cpuidle/current_driver"),
        **kernel_scheduling()}
    emu = report["emulator_cpu"]
    share, demote = busy_policy(emu["forwarder_cpu"], True, emu["rt_cap_percent"])
    emu.update(native_busy_share_pct=share, native_demote=demote,
               device_irqs=device_irqs_on(emu["forwarder_cpu"]) if emu["forwarder_cpu"] is not None else [])
    report["problems"] = problems
    report["ok"] = not problems
    return report


def _backend_note(report: dict[str, Any]) -> str:
    """Why links use the userspace emulator, and the ways to real netem with whether each is
    available here (the UML guest boots; qemu and root for the VM)."""
    missing = ("not root, netem/htb not probed" if report["netem"] is None else
               "no " + "/".join(q for q in ("netem", "htb") if not report[q]) + " in this kernel")

    def works(entry: dict[str, Any]) -> str:
        return "available here" if entry["available"] else f"not here: {entry['reason']}"
    return (f"{missing}: links use the userspace emulator; for real netem, --backend netem-uml "
            f"(a UML guest; {works(report['netem_uml'])}) or --backend netem-vm (the Debian VM, "
            f"docs/vm.md; {works(report['netem_vm'])}), or modprobe sch_netem sch_htb where the "
            "kernel has them")


def _cpu_line(e: dict[str, Any]) -> str:
    if e["forwarder_cpu"] is None:
        return "no (one CPU: the forwarder shares it with the hosts)"
    others = ",".join(map(str, e["cpus"][:-1]))
    return f"CPU {e['forwarder_cpu']} (hosts and their receive processing on {others})"


def _preemption_line(e: dict[str, Any]) -> str:
    mode = e["preemption"]
    if mode in ("none", "voluntary"):
        return (f"{mode} ({e['preemption_source']}): a kernel thread on the emulator's CPU can "
                "delay its departures until it yields")
    return f"{mode} ({e['preemption_source']})" if mode else "unknown"


def _rt_line(e: dict[str, Any]) -> str:
    cap = e["rt_cap_percent"]
    if cap is None:
        return "none"
    return f"{cap:g}% of a CPU (a real-time loop busy beyond it is stopped until the period ends)"


def _budget_line(e: dict[str, Any]) -> str:
    share = e["native_busy_share_pct"]
    if e["native_demote"]:
        return (f"{share}% of its CPU as SCHED_FIFO, then SCHED_OTHER at nice -20 until 1 ms "
                "is saved up again (RT throttling never starts)")
    if share < 100:
        return f"busy {share}% of the time, then it sleeps (it shares a CPU with the hosts)"
    return "none (no RT throttling to stay under)"


def run(args) -> int:
    report = diagnose(getattr(args, "refresh", False))
    if args.json:
        print(json.dumps(report, indent=1))
        return 0 if report["ok"] else 1
    def mark(v):
        return "yes" if v is True else "no" if v is False or v is None else str(v)
    rows = [("root", report["root"]), ("network namespaces", report["netns"]), ("veth", report["veth"]),
            ("Mininet module", report["mininet"]), *[(t, report[t]) for t in TOOLS],
            ("netem qdisc", report["netem"]), ("htb qdisc", report["htb"]),
            ("congestion control", " ".join(report["congestion_control"])), ("MPTCP", report["mptcp"]),
            ("netem in a UML guest", report["netem_uml"]["available"]),
            ("netem in the VM", report["netem_vm"]["available"]),
            ("backend for --backend auto", report["backend"]),
            ("userspace emulator engines", " ".join(report["emulator_engines"])),
            ("emulator's own CPU", _cpu_line(report["emulator_cpu"])),
            ("0 µs CPU latency request", report["emulator_cpu"]["cpu_latency_request"]),
            ("kernel preemption", _preemption_line(report["emulator_cpu"])),
            ("RT throttling cap", _rt_line(report["emulator_cpu"])),
            ("native loop's busy budget", _budget_line(report["emulator_cpu"])),
            ("device interrupts on it", ", ".join(report["emulator_cpu"]["device_irqs"]) or "none")]
    for label, value in rows:
        print(f"{label:<28} {mark(value)}")
    for line in report["netem_uml"]["lines"]:
        print(f"  UML: {line}")
    for line in report["netem_vm"]["lines"]:
        print(f"  VM: {line}")
    if report.get("backend_note"):
        print(f"note: {report['backend_note']}")
    for problem in report["problems"]:
        print(f"problem: {problem}")
    print("ok" if report["ok"] else f"{len(report['problems'])} problem(s)")
    return 0 if report["ok"] else 1
