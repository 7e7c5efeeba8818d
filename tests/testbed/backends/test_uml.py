"""The kernel backend (htb + netem) for real, inside a User-Mode Linux guest (testbed/backends/uml/__init__.py).

This machine's kernel has no qdiscs; the UML guest's has.  Each test boots one guest that runs
this file as a script, which:

* ``qdisc`` case: makes two namespaces joined by a veth pair (with the testbed's host sysctls:
  64 MiB socket buffer limits, offloads off), applies to each end the tc argv
  lists of ``testbed.backends.kernel.qdisc_commands`` for one direction's LinkSpec, reads the
  configuration back (``tc -s qdisc``, ``tc class``), measures the RTT and the loss of each
  direction with the UDP echo probe below and TCP goodput per direction with iperf3;
* ``testbed`` case: the same probe through ``Testbed("longhaul", backend="netem")``, the path
  users take.

RTT and loss per direction come from ``testbed.calibrate.probe`` (as in ``testbed calibrate``), with
static ARP entries (Testbed sets its own).  Run as root: ``.venv/bin/pytest tests/test_uml.py``
(about 2 minutes).
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from testbed.calibrate.probe import cpu_times, cpu_window, last_json, probe_argv

PORT = 5700
ME = os.path.abspath(__file__)
NS = ("tbuA", "tbuB")         # guest namespaces: A plays the client, B the server
IFS = ("tbu0", "tbu1")
IPS = ("10.77.0.1", "10.77.0.2")
LOSS_PPS = 500                # per direction; a loaded host leaves the guest ~1,000 echoes/s (docs/uml.md)


def wait_tcp_listening(ns: str, port: int, timeout: float = 30) -> None:
    """Until a TCP socket listens on ``port`` in namespace ``ns`` (iperf3 says nothing when ready)."""
    end = time.monotonic() + timeout
    while not _sh(["ip", "netns", "exec", ns, "ss", "-Htnl", f"sport = :{port}"]).strip():
        assert time.monotonic() < end, f"nothing listening on TCP port {port} in {ns}"
        time.sleep(0.1)


PING_ATTEMPTS = 3     # pings at most, until one whose RTTs spread no more than RTT_SPREAD_MS
RTT_SPREAD_MS = 5.0  # median − minimum RTT of a ping through a path that holds no queue


def measure(popen, run, ips: dict, count: int, wait: float) -> dict:
    """RTT (``probe ping``, 200 probes 10 ms apart) and loss per direction (``probe send`` →
    ``probe recv``, ``count`` datagrams each way at once).  ``popen(host, argv)`` returns a
    text Popen with stdout piped, ``run(host, argv)`` the stdout; hosts: client, server.

    A guest the host did not run for a while (a busy or stolen host CPU) delays the probes of
    that while: ``ping_attempts`` pings until one's median is within ``RTT_SPREAD_MS`` of its
    minimum, each with how the host ran the guest meanwhile (``host``, None outside UML); the
    RTT reported is the attempt of the lowest median.  A path that delays or queues more than it
    should inflates every attempt."""
    from testbed.calibrate.pathprobe import host_window
    echo = popen("server", probe_argv("echo", "--port", PORT))
    assert echo.stdout.readline().startswith("ready")
    attempts = []
    try:
        while len(attempts) < PING_ATTEMPTS:
            ping = last_json(run("client", probe_argv("ping", "--dst", ips["server"], "--port", PORT,
                                                      "--count", 200, "--interval", 0.01,
                                                      "--wait", wait)))
            rtts = sorted(ping["rtt_ms"])
            attempts.append({"rtt_min_ms": rtts[0], "rtt_median_ms": statistics.median(rtts),
                             "host": host_window(ping["realtime"])})
            if attempts[-1]["rtt_median_ms"] - rtts[0] <= RTT_SPREAD_MS:
                break
    finally:
        echo.kill()
        echo.wait()
    best = min(attempts, key=lambda a: a["rtt_median_ms"])
    out = {"rtt_min_ms": best["rtt_min_ms"], "rtt_median_ms": best["rtt_median_ms"],
           "ping_attempts": attempts}
    pairs = (("up", "client", "server", PORT + 1), ("down", "server", "client", PORT + 2))
    rx = {d: popen(dst, probe_argv("recv", "--port", port, "--idle", wait, "--timeout", 600))
          for d, _src, dst, port in pairs}
    for r in rx.values():
        assert r.stdout.readline().startswith("ready")
    tx = {d: popen(src, probe_argv("send", "--dst", ips[dst], "--port", port, "--count", count,
                                   "--rate", LOSS_PPS * 106 * 8, "--stream", 1))
          for d, src, dst, port in pairs}
    for d in ("up", "down"):
        sent = last_json(tx[d].communicate(timeout=600)[0])["sent"]
        got = last_json(rx[d].communicate(timeout=600)[0])["streams"].get("1", {"received": 0})
        out[f"sent_{d}"], out[f"received_{d}"] = sent, got["received"]
    return out


def check_rtt(r: dict, base_ms: float) -> None:
    """The configured delays (``base_ms`` both ways) hold every probe of every attempt, and the
    best attempt's median is within ``RTT_SPREAD_MS`` of them (no queue on an idle path).  The
    message holds each attempt with its host window and, from a guest, the host's CPU over the
    whole guest (``host_cpu``: busy and steal shares)."""
    p = r["probe"]
    why = {"probe": p, "host_cpu": r.get("host_cpu")}
    assert all(a["rtt_min_ms"] >= base_ms for a in p["ping_attempts"]), why
    assert base_ms <= p["rtt_min_ms"] <= p["rtt_median_ms"] <= base_ms + RTT_SPREAD_MS, why


# --- guest side ----------------------------------------------------------------------------------
def _sh(argv: list[str], timeout: float = 60) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=timeout).stdout


def _iperf_goodput(src: int, dst: int, cc: str, seconds: int, omit: int,
                   loopback: bool = False) -> float:
    """TCP goodput in bit/s from namespace NS[src] to NS[dst]: iperf3's receiver figure over
    ``seconds`` after the first ``omit`` seconds (slow start) are left out.  ``loopback``: over
    NS[src]'s loopback instead (no qdisc: what the guest's CPU allows)."""
    dst = src if loopback else dst
    server = subprocess.Popen(["ip", "netns", "exec", NS[dst], "iperf3", "-s", "-1", "-p", "5201"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_tcp_listening(NS[dst], 5201)
        out = _sh(["ip", "netns", "exec", NS[src], "iperf3", "-c",
                   "127.0.0.1" if loopback else IPS[dst], "-p", "5201", "-C", cc,
                   "-t", str(seconds), "-O", str(omit), "--json"], timeout=seconds + omit + 60)
    finally:
        server.wait(timeout=30)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"]


GOODPUT_FLOOR = 0.70   # of the bound (``goodput_bound``) where nothing is lost: _check_qdisc_case
GOODPUT_ATTEMPTS = 3   # iperf3 runs at most in a loss-free direction, until one reaches the floor


def goodput_bound(spec) -> float:
    """TCP payload bit/s through htb at ``spec.rate``: it counts whole frames, 1448 B of payload
    in each 1514."""
    return spec.rate * 1448 / 1514


def _goodput_attempts(src: int, dst: int, cc: str, seconds: int, omit: int, spec) -> list[dict]:
    """``_iperf_goodput`` once where the spec loses frames (TCP's reaction decides), else up to
    ``GOODPUT_ATTEMPTS`` times until one reaches ``GOODPUT_FLOOR`` of the bound: a few seconds
    in which the host did not run the guest drag a window's goodput down, an htb at the wrong
    rate every window's.  Each ``{"bps", "host"}`` (how the host ran the guest meanwhile, None
    outside UML)."""
    from testbed.calibrate.pathprobe import host_window
    tries: list[dict] = []
    while len(tries) < GOODPUT_ATTEMPTS:
        t0 = time.time()
        bps = _iperf_goodput(src, dst, cc, seconds, omit)
        tries.append({"bps": bps, "host": host_window([t0, time.time()])})
        if spec.loss.p > 0 or bps >= GOODPUT_FLOOR * goodput_bound(spec):
            break
    return tries


def guest_qdisc_case(cfg: dict) -> dict:
    from testbed.backends.kernel import qdisc_commands
    from testbed.host.namespace import DEFAULT_SYSCTLS, OFFLOADS_OFF
    from testbed.spec.linkspec import LinkSpec
    specs = [LinkSpec.from_dict(cfg["up"]), LinkSpec.from_dict(cfg["down"])]
    for ns in NS:
        _sh(["ip", "netns", "add", ns])
    try:
        _sh(["ip", "link", "add", IFS[0], "netns", NS[0], "type", "veth", "peer", "name", IFS[1],
             "netns", NS[1]])
        for ns, ifname, ip, spec in zip(NS, IFS, IPS, specs):
            for argv in (["ip", "addr", "add", f"{ip}/24", "dev", ifname],
                         ["ip", "link", "set", ifname, "up"], ["ip", "link", "set", "lo", "up"],
                         ["ethtool", "-K", ifname, *OFFLOADS_OFF], *qdisc_commands(ifname, spec),
                         *(["sysctl", "-q", "-w", f"{k}={v}"] for k, v in DEFAULT_SYSCTLS.items())):
                _sh(["ip", "netns", "exec", ns, *argv])
        macs = [json.loads(_sh(["ip", "-n", ns, "-j", "link", "show", "dev", i]))[0]["address"]
                for ns, i in zip(NS, IFS)]
        for k in (0, 1):
            _sh(["ip", "-n", NS[k], "neigh", "replace", IPS[1 - k], "lladdr", macs[1 - k], "dev",
                 IFS[k], "nud", "permanent"])
        result = {"class": [_sh(["ip", "netns", "exec", ns, "tc", "class", "show", "dev", i])
                            for ns, i in zip(NS, IFS)]}

        ns = {"client": NS[0], "server": NS[1]}

        def popen(host, argv):
            return subprocess.Popen(["ip", "netns", "exec", ns[host], *argv], stdout=subprocess.PIPE,
                                    text=True)

        def run(host, argv):
            return _sh(["ip", "netns", "exec", ns[host], *argv], timeout=300)

        result["probe"] = measure(popen, run, {"client": IPS[0], "server": IPS[1]}, cfg["count"],
                                  1 + specs[0].delay + specs[1].delay)
        result["goodput_attempts"] = {
            direction: _goodput_attempts(src, dst, cc, cfg["seconds"], cfg["omit"], spec)
            for direction, src, dst, cc, spec in (("up", 0, 1, cfg["cc_up"], specs[0]),
                                                  ("down", 1, 0, cfg["cc_down"], specs[1]))}
        result["goodput"] = {d: max(a["bps"] for a in tries) for d, tries in result["goodput_attempts"].items()}
        result["capacity"] = _iperf_goodput(0, 0, "cubic", 2, 1, loopback=True)
        result["qdisc"] = [_sh(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", i])
                           for ns, i in zip(NS, IFS)]
        return result
    finally:
        for ns in NS:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def guest_testbed_case(cfg: dict) -> dict:
    from testbed.run.network import Testbed
    with Testbed("longhaul", backend="netem", overrides=cfg["overrides"],
                 results_root=Path(cfg["results_dir"]) / "runs") as tb:
        def popen(host, argv):
            return tb.popen(host, argv, name="probe", text=True)

        def run(host, argv):
            return tb.run(host, argv, timeout=300, check=True).stdout

        ips = {h: tb.ip(h) for h in ("client", "server")}
        return {"probe": measure(popen, run, ips, cfg["count"], 1.5),
                "backend": tb.metadata["backend"]}


def guest_main(config_path: str) -> int:
    cfg = json.loads(Path(config_path).read_text())
    case = {"qdisc": guest_qdisc_case, "testbed": guest_testbed_case}[cfg["case"]]
    (Path(cfg["results_dir"]) / "result.json").write_text(json.dumps(case(cfg), indent=1))
    return 0


# --- host side: the tests ------------------------------------------------------------------------
def _run_guest(tmp_path: Path, cfg: dict) -> dict:
    from testbed.backends import uml
    ok, reason = uml.availability()
    if not ok:
        pytest.skip(reason)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "results_dir": str(tmp_path)}))
    before = cpu_times()
    res = uml.run_in_guest([sys.executable, ME, str(tmp_path / "config.json")],
                           results_dir=tmp_path, timeout=600)
    assert res.returncode == 0, f"guest failed:\n{res.stdout}\n{res.stderr}"
    return {**json.loads((tmp_path / "result.json").read_text()),
            "host_cpu": cpu_window(before, cpu_times())}


def _netem(qdisc_text: str) -> dict:
    """delay (s), loss (probability), limit, dropped of the netem qdisc in ``tc -s qdisc`` output."""
    from testbed.spec.units import parse_probability, parse_time
    line, stats = re.search(r"qdisc netem .*\n(.*)\n", qdisc_text).group(0, 1)
    loss = re.search(r" loss (\S+)", line)
    return {"delay": parse_time(re.search(r" delay (\S+)", line).group(1)),
            "loss": parse_probability(loss.group(1)) if loss else 0.0,
            "limit": int(re.search(r" limit (\d+)", line).group(1)),
            "dropped": int(re.search(r"dropped (\d+)", stats).group(1))}


def _htb_rate(class_text: str) -> float:
    from testbed.spec.units import parse_rate
    return parse_rate(re.search(r"class htb 1:1 .* rate (\S+)", class_text).group(1))


def _within_binomial(measured: float, p: float, n: int, sigmas: float = 4.0) -> bool:
    return abs(measured - p) <= sigmas * (p * (1 - p) / n) ** 0.5 + 1 / n


def _check_qdisc_case(r: dict, up, down) -> None:
    """Read-back equals the specs; RTT, loss per direction and goodput follow them."""
    from testbed.backends.kernel import netem_limit
    for text_q, text_c, spec in zip(r["qdisc"], r["class"], (up, down)):
        netem = _netem(text_q)
        assert netem["delay"] == pytest.approx(spec.delay)
        assert netem["loss"] == pytest.approx(spec.loss.p)
        assert netem["limit"] == netem_limit(spec)
        assert _htb_rate(text_c) == pytest.approx(spec.rate)
        if spec.loss.p > 0:  # (without loss, drops can still be queue overflow)
            assert netem["dropped"] > 0
    check_rtt(r, (up.delay + down.delay) * 1e3)
    p = r["probe"]
    for d, spec in (("up", up), ("down", down)):
        loss = 1 - p[f"received_{d}"] / p[f"sent_{d}"]
        assert _within_binomial(loss, spec.loss.p, p[f"sent_{d}"]), (d, loss, spec.loss.p)
    # htb counts whole frames: TCP payload is at most 1448/1514 of the configured rate (netem
    # drops before htb, so lost frames use none of it).  Steady-state goodput must reach most of
    # that bound where nothing is lost — neither by the spec nor by the queue overflowing (where
    # loss is, TCP's reaction decides: cubic in a 7.2 guest overflowed the 40 Mbit/s queue 2-16
    # times in 7 s and then reached 61-84% of the bound, in a 6.1 guest more).
    # The guest must have the CPU for it, too: its one virtual CPU is one host thread, and
    # ``capacity`` (TCP over the guest's loopback, measured right after) shows what it had left.
    # The floor, 70 % of the bound: BBR at 200 ms RTT reached 0.93-1.00 of it in 5 s windows on a
    # quiet host and 0.75 once in a CI run (a stall of the guest's host thread drags BBR's
    # bandwidth filter for seconds); 70 % still tells an applied rate from a wrong one (a unit off
    # is 1000x, a missing htb leaves ~900 Mbit/s: the ceiling above).  A window below the floor is
    # measured again (``_goodput_attempts``, up to 3): the best must reach it, and none may pass
    # the ceiling.
    for direction, spec, text_q in (("up", up, r["qdisc"][0]), ("down", down, r["qdisc"][1])):
        bound = goodput_bound(spec)
        tries = r["goodput_attempts"][direction]
        goodput = r["goodput"][direction]
        why = {"direction": direction, "bound": bound, "attempts": tries, "capacity": r["capacity"],
               "host_cpu": r.get("host_cpu")}
        assert all(t["bps"] <= 1.02 * bound for t in tries), why
        if spec.loss.p == 0 and _netem(text_q)["dropped"] == 0:
            if r["capacity"] < 2 * bound:
                warnings.warn(stacklevel=1, message=f"{direction}: goodput {goodput / 1e6:.1f} of {bound / 1e6:.1f} "
                              f"Mbit/s not checked: the guest's CPU allowed only "
                              f"{r['capacity'] / 1e6:.0f} Mbit/s of TCP (host load "
                              f"{os.getloadavg()[0]:.1f})")
            else:
                assert goodput >= GOODPUT_FLOOR * bound, why


FAKE_PANIC = ("Checking that ptrace can change system call numbers...OK\n"
              "Failed to initialize ubd device 0 :Couldn't determine size of device's file\n"
              "userspace - ptrace set fp regs failed, errno = 14\n"
              "Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b\n"
              "reboot: System halted\n")


def fake_build(tmp_path: Path, console: str = FAKE_PANIC, dep: str | None = None):
    """A UMLBuild whose 'kernel' is a script: ``--version`` prints 6.1.176, booting prints
    ``console`` and exits 1 (as Linux 6.1 does on a host with AMX)."""
    from testbed.backends.uml.builds import UMLBuild
    kernel = tmp_path / "bin" / "linux.uml"
    kernel.parent.mkdir()
    (tmp_path / "console.txt").write_text(console)
    kernel.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 6.1.176; exit 0; }}\n"
                      f"cat {tmp_path / 'console.txt'}\nexit 1\n")
    kernel.chmod(0o755)
    mods = tmp_path / "modules" / "6.1.176"
    mods.mkdir(parents=True)
    (mods / "modules.dep").write_text(dep if dep is not None else "".join(
        f"kernel/net/{m}.ko:\n" for m in ("sch_htb", "sch_netem", "veth", "tcp_bbr", "ipv6")))
    return UMLBuild("system", kernel, tmp_path / "modules")


def test_missing_kernel_is_reported(tmp_path):
    from testbed.backends import uml
    from testbed.backends.uml.builds import UMLBuild, check
    build = UMLBuild("system", tmp_path / "linux.uml", tmp_path)
    with pytest.raises(uml.UMLUnavailable, match="apt-get install user-mode-linux") as info:
        check(build)
    assert str(tmp_path / "linux.uml") in str(info.value)
    with pytest.raises(uml.UMLUnavailable, match="apt-get install user-mode-linux"):
        uml.run_in_guest(["true"], results_dir=tmp_path, build=build)
    with pytest.raises(uml.UMLUnavailable, match="TESTBED_UML=provision make install"):
        check(UMLBuild("provisioned", tmp_path / "linux.uml", tmp_path))


def test_missing_and_builtin_modules(tmp_path):
    """Required modules come from modules.dep or are built in (modules.builtin, or — for options
    that are no longer tristate, like ipv6 in 7.x — modules.builtin.modinfo); only the former
    are loaded."""
    from testbed.backends.uml.builds import UMLUnavailable, check
    build = fake_build(tmp_path, dep="kernel/drivers/net/veth.ko:\n")
    with pytest.raises(UMLUnavailable, match="lacks module.*sch_htb, sch_netem, tcp_bbr, ipv6"):
        check(build)
    mods = tmp_path / "modules" / "6.1.176"
    (mods / "modules.dep").write_text("kernel/net/sched/sch_htb.ko:\nkernel/net/sched/sch_netem.ko.xz:"
                                      "\nkernel/drivers/net/veth.ko: kernel/x.ko\n")
    (mods / "modules.builtin").write_text("kernel/net/ipv4/tcp_bbr.ko\n")
    with pytest.raises(UMLUnavailable, match="lacks module.*ipv6"):
        check(build)
    (mods / "modules.builtin.modinfo").write_bytes(b"ipv6.parm=autoconf:x\0af_packet.alias=y\0")
    assert check(build) == ("6.1.176", ["sch_htb", "sch_netem", "veth"])
    (mods / "modules.dep").unlink()
    with pytest.raises(UMLUnavailable, match=r"modules\.dep is missing"):
        check(build)


def test_console_reason():
    from testbed.backends.uml import console_reason
    assert console_reason(FAKE_PANIC) == "userspace - ptrace set fp regs failed, errno = 14"
    assert console_reason("Kernel panic - not syncing: VFS\n") == "Kernel panic - not syncing: VFS"
    glibc = "./linux.uml: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found\n"
    assert console_reason(glibc) == glibc.strip()
    assert console_reason("") == "the console is empty"


def test_guest_that_does_not_boot_is_one_line_error(tmp_path):
    """What failed, the console's reason line and where the full console is, in one line; the
    private directory is gone and no process is left."""
    from testbed.backends import uml
    from testbed.spec.errors import SetupError
    build = fake_build(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    before = _tb_private_dirs()
    with pytest.raises(SetupError) as info:
        uml.run_in_guest(["true"], results_dir=out, build=build, mode="ptrace")
    message = str(info.value)
    assert "\n" not in message
    assert "ptrace set fp regs failed, errno = 14" in message
    assert f"console log: {out / 'uml-console.log'}" in message
    assert "6.1.176" in message and str(build.kernel) in message
    assert info.value.reason == "userspace - ptrace set fp regs failed, errno = 14"
    assert (out / "uml-console.log").read_text() == FAKE_PANIC
    assert _tb_private_dirs() <= before


def test_choice_follows_testbed_uml(tmp_path, monkeypatch):
    from testbed.backends.uml import builds as uml_builds
    monkeypatch.setattr(uml_builds, "STATE_DIR", tmp_path)
    monkeypatch.setenv("TESTBED_UML", "provision")
    with pytest.raises(uml_builds.UMLUnavailable, match="no provisioned UML.*TESTBED_UML=provision"):
        uml_builds.candidates()
    (tmp_path / "build.json").write_text(json.dumps(
        {"kernel": "/k/linux.uml", "modules_root": "/k/modules", "package": "user-mode-linux 7"}))
    assert [b.source for b in uml_builds.candidates()] == ["provisioned"]
    monkeypatch.setenv("TESTBED_UML", "auto")
    assert [b.source for b in uml_builds.candidates()] == ["system", "provisioned"]
    monkeypatch.setenv("TESTBED_UML", "system")
    assert [b.source for b in uml_builds.candidates()] == ["system"]
    monkeypatch.setenv("TESTBED_UML", "newest")
    with pytest.raises(uml_builds.UMLUnavailable, match="allowed auto, system"):
        uml_builds.candidates()


def test_boot_check_is_cached_and_reports_the_reason(tmp_path, monkeypatch):
    from testbed.backends import uml
    from testbed.backends.uml import builds as uml_builds
    monkeypatch.setattr(uml_builds, "STATE_DIR", tmp_path / "state")
    build = fake_build(tmp_path)
    first = uml.boot_check(build, "ptrace")
    assert not first["booted"] and not first["cached"]
    assert first["reason"] == "userspace - ptrace set fp regs failed, errno = 14"
    assert Path(first["console"]).read_text() == FAKE_PANIC
    second = uml.boot_check(build, "ptrace")
    assert second["cached"] and second["reason"] == first["reason"]
    assert not uml.boot_check(build, "ptrace", refresh=True)["cached"]


def test_provision_finds_files_through_symlinks(tmp_path):
    from testbed.backends.uml.provision import ProvisionError, _inside
    lib = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "ld-linux-x86-64.so.2").write_text("loader")
    (tmp_path / "usr" / "lib64").mkdir()
    (tmp_path / "usr" / "lib64" / "ld-linux-x86-64.so.2").symlink_to(
        "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    assert _inside(tmp_path, "/lib64/ld-linux-x86-64.so.2") == lib / "ld-linux-x86-64.so.2"
    with pytest.raises(ProvisionError, match="not in the unpacked"):
        _inside(tmp_path, "/lib/ld-musl-x86_64.so.1")


@pytest.mark.parametrize("kwargs", [{"argv": []}, {"argv": "echo hi"}, {"mem": "lots"},
                                    {"timeout": 0}, {"results_dir": "/nonexistent/tb"}])
def test_bad_arguments(tmp_path, kwargs):
    from testbed.backends import uml
    call = {"argv": ["true"], "results_dir": tmp_path, **kwargs}
    with pytest.raises(ValueError):
        uml.run_in_guest(call.pop("argv"), **call)


@pytest.mark.parametrize("backend", ["netem-uml", "netem-vm"])
def test_guest_cli_argv(backend):
    from testbed.backends.guest import guest_cli_argv
    assert guest_cli_argv(["calibrate", "--backend", backend, "--json"], backend) == \
        ["calibrate", "--backend", "netem", "--json"]
    assert guest_cli_argv(["calibrate", f"--backend={backend}"], backend) == \
        ["calibrate", "--backend=netem"]
    with pytest.raises(ValueError, match=backend):
        guest_cli_argv(["calibrate", "--rate", backend], backend)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (apt-get)")
def test_provision_offline_is_one_clear_line(monkeypatch, capsys):
    """A mirror that refuses: provisioning says so in one line, exits 0, leaves no apt state.
    (Its directory must be outside /tmp and /var/tmp, which the guest covers.)"""
    import shutil
    import tempfile
    from testbed.backends.uml import builds as uml_builds, provision as uml_provision
    Path("/var/lib/testbed").mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="test-uml-", dir="/var/lib/testbed"))
    try:
        monkeypatch.setattr(uml_builds, "STATE_DIR", state)
        monkeypatch.setattr(uml_provision.provision, "__defaults__", (state, None, None))
        monkeypatch.setenv("TESTBED_UML", "provision")
        monkeypatch.setenv("TESTBED_UML_MIRROR", "http://127.0.0.1:9/debian")
        assert uml_provision.main() == 0
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "could not fetch the package lists" in err, err
        assert "127.0.0.1:9" in err and "Everything but `--backend netem-uml` works" in err
        assert not (state / "apt").exists() and uml_builds.provisioned_build() is None
        monkeypatch.setattr(uml_provision.provision, "__defaults__",
                            (Path("/var/tmp/tb-uml"), None, None))
        assert uml_provision.main() == 0
        assert "the guest covers with its own tmpfs" in capsys.readouterr().err
    finally:
        shutil.rmtree(state)


def root_slow(test):
    """Boots a guest: needs root, takes seconds to a minute."""
    for mark in (pytest.mark.root, pytest.mark.slow,
                 pytest.mark.skipif(os.geteuid() != 0, reason="needs root")):
        test = mark(test)
    return test


def _uml_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "exe").endswith("/linux.uml"):
                    pids.add(int(entry.name))
            except OSError:
                pass
    return pids


def _tb_private_dirs() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob("tb*")} if Path("/dev/shm").is_dir() else set()


@root_slow
def test_guest_runs_argv_isolated_and_cleans_up(tmp_path):
    """argv reaches the command verbatim; exit code and both streams come back; the host's root
    is read-only in the guest, its /run/netns untouched; no guest process or private dir is left."""
    from testbed.backends import uml
    if not uml.availability()[0]:
        pytest.skip(uml.availability()[1])
    before_pids, before_dirs = _uml_pids(), _tb_private_dirs()
    marker = Path(ME).with_name("tb-uml-write-test")
    script = ("import json, os, subprocess, sys\n"
              "print(json.dumps(sys.argv[1:]))\n"
              "subprocess.run(['ip', 'netns', 'add', 'tbumlcheck'], check=True)\n"
              f"open({str(tmp_path / 'written')!r}, 'w').write('ok')\n"
              f"try:\n    open({str(marker)!r}, 'w')\nexcept OSError as e:\n    print(e.errno, file=sys.stderr)\n"
              "sys.exit(3)\n")
    args = ["$(touch /tbumlpwned)", "a b; id", "`id`", "'\""]
    res = uml.run_in_guest([sys.executable, "-c", script, *args], results_dir=tmp_path, timeout=120)
    assert res.returncode == 3
    assert json.loads(res.stdout) == args
    assert res.stderr.strip() == "30"  # EROFS
    assert (tmp_path / "written").read_text() == "ok"
    assert not marker.exists() and not Path("/tbumlpwned").exists()
    assert not Path("/run/netns/tbumlcheck").exists()
    assert _uml_pids() <= before_pids and _tb_private_dirs() <= before_dirs
    assert 0 < res.command_time < res.duration


@root_slow
def test_doctor_in_guest_finds_netem(tmp_path):
    """The guest passes the testbed's own qdisc probe: ``testbed doctor`` there picks netem."""
    from testbed.backends import uml
    if not uml.availability()[0]:
        pytest.skip(uml.availability()[1])
    res = uml.run_in_guest([sys.executable, "-m", "testbed", "doctor", "--json"], results_dir=tmp_path)
    report = json.loads(res.stdout)
    assert report["netem"] and report["htb"] and report["backend"] == "netem", report


@root_slow
def test_timeout_kills_guest(tmp_path):
    from testbed.backends import uml
    if not uml.availability()[0]:
        pytest.skip(uml.availability()[1])
    before_pids, before_dirs = _uml_pids(), _tb_private_dirs()
    start = time.monotonic()
    with pytest.raises(uml.GuestTimeout) as info:
        uml.run_in_guest(["sleep", "120"], results_dir=tmp_path, timeout=6)
    assert time.monotonic() - start < 6 + 2 * uml.TERM_GRACE
    assert info.value.result.returncode is None
    assert _uml_pids() <= before_pids and _tb_private_dirs() <= before_dirs


@root_slow
def test_longhaul_htb_netem_in_guest(tmp_path):
    """The long-haul path's kernel configuration as is: 333 Mbit/s (TCP through htb + netem in the
    guest reaches ~900 Mbit/s), 100 ms each way, 14% loss server→client only.  BBR both ways
    (cubic stalls at 14% loss, which is the chapter's point)."""
    from topologies.longhaul import LongHaul
    (_a, _b, up, down), = LongHaul().link_specs()
    r = _run_guest(tmp_path, {"case": "qdisc", "up": up.to_dict(), "down": down.to_dict(),
                              "count": 2500, "seconds": 5, "omit": 4,
                              "cc_up": "bbr", "cc_down": "bbr"})
    _check_qdisc_case(r, up, down)


@root_slow
def test_asymmetric_htb_netem_in_guest(tmp_path):
    """An asymmetric spec: 10 Mbit/s, 15 ms, 5% loss up; 40 Mbit/s, 25 ms, no loss down."""
    from testbed.spec.linkspec import LinkSpec
    up = LinkSpec.parse(rate="10mbit", delay="15ms", loss="5%")
    down = LinkSpec.parse(rate="40mbit", delay="25ms")
    r = _run_guest(tmp_path, {"case": "qdisc", "up": up.to_dict(), "down": down.to_dict(),
                              "count": 2500, "seconds": 5, "omit": 2,
                              "cc_up": "bbr", "cc_down": "cubic"})
    _check_qdisc_case(r, up, down)


@root_slow
def test_testbed_longhaul_netem_backend_in_guest(tmp_path):
    """``Testbed("longhaul", backend="netem")`` as users run it: 200 ms RTT, loss down only."""
    r = _run_guest(tmp_path, {"case": "testbed", "count": 1500,
                              "overrides": {"rate_up": "50mbit", "rate_down": "50mbit"}})
    p = r["probe"]
    assert r["backend"] == "netem"
    check_rtt(r, 200.0)
    assert p["received_up"] == p["sent_up"]
    assert _within_binomial(1 - p["received_down"] / p["sent_down"], 0.14, p["sent_down"])



BURN = """
import json, time
t = time.time()
own = []                                   # its own clock: (CLOCK_REALTIME s, CPU s), every 5 ms
while time.time() - t < 0.6:
    if not own or time.time() - own[-1][0] >= 0.005:
        own.append((time.time(), time.process_time()))
own.append((time.time(), time.process_time()))
print(json.dumps(own))
"""


def test_host_cpu_samples_a_process_group_and_windows_read_them(tmp_path):
    """HostCPU sums the CPU and run-queue wait of every thread of a process group (the guest's
    linux.uml and helpers); host_cpu_window turns two samples around a window into shares.
    What they read is compared with the burner's own CPU clock at the same moments, not with a
    share of the wall time: on a busy or stolen CPU the burner gets what the machine leaves it
    (half its 0.6 s beside another task), the same by both clocks; a unit or a thread wrong is
    off by far more than the 50 ms of CPU (one sample period) allowed."""
    import numpy as np
    from testbed.backends.uml import HostCPU, host_cpu_window
    burn = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    path = tmp_path / "uml-host-cpu.jsonl"
    sampler = HostCPU(burn.pid, path, interval=0.05).start()
    own = np.array(json.loads(burn.communicate()[0]))
    reaped = time.time()
    time.sleep(0.3)
    sampler.stop()
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    born, ended = own[0, 0], own[-1, 0]

    def cpu_at(t: float) -> float:
        return float(np.interp(t, own[:, 0], own[:, 1]))
    inside = [(x["t"], x["cpu_s"], cpu_at(x["t"])) for x in samples if born <= x["t"] <= ended]
    why = {"samples": samples, "own_cpu_s": own[-1, 1], "own_wall_s": ended - born}
    assert len(samples) >= 5 and samples[-1]["threads"] >= 1 and len(inside) >= 2, why
    assert own[-1, 1] > 0.05 and all(abs(got - mine) <= 0.05 for _t, got, mine in inside), (inside, why)
    gone = {x["cpu_s"] for x in samples if x["t"] > reaped}                # kept after the exit
    assert len(gone) == 1 and inside[-1][1] <= min(gone) <= own[-1, 1] + 0.05, why
    window = host_cpu_window(path, born + 0.2, born + 0.45)
    a = [x for x in samples if x["t"] <= born + 0.2][-1]                 # the samples it reads
    b = next(x for x in samples if x["t"] >= born + 0.45)
    share = (cpu_at(b["t"]) - cpu_at(a["t"])) / (b["t"] - a["t"])        # the burner's, by its clock
    why.update(window=window, own_share=share)
    assert window["cpu_share"] == pytest.approx(share, abs=0.2) and 0 < window["cpu_share"] <= 1.05, why
    assert 0 <= window["wait_share"] <= 1 and window["span_s"] == pytest.approx(b["t"] - a["t"], abs=1e-3), why
    assert host_cpu_window(path, born - 60, born) is None       # no sample before the window
    lines = [{"t": 10.0, "cpu_s": 1.0, "wait_s": 0.5, "threads": 3, "load1": 2.5},
             {"t": 11.0, "cpu_s": 1.6, "wait_s": 0.7, "threads": 3, "load1": 2.6}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert host_cpu_window(path, 10.2, 10.8) == {"cpu_share": 0.6, "wait_share": 0.2,
                                                 "span_s": 1.0, "load1": 2.6}


if __name__ == "__main__":
    sys.exit(guest_main(sys.argv[1]))
