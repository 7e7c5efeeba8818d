"""The kernel backend (htb + netem) for real, inside a User-Mode Linux guest (testbed/uml.py).

This machine's kernel has no qdiscs; the UML guest's has.  Each test boots one guest that runs
this file as a script (``guest`` mode), which:

* ``qdisc`` case: makes two namespaces joined by a veth pair, applies to each end the tc argv
  lists of ``testbed.backends.kernel.qdisc_commands`` for one direction's LinkSpec, reads the
  configuration back (``tc -s qdisc``, ``tc class``), measures the RTT and the loss of each
  direction with the UDP echo probe below and TCP goodput per direction with iperf3;
* ``testbed`` case: the same probe through ``Testbed("longhaul", backend="netem")``, the path
  users take.

Probe loss per direction: the echo server counts the distinct probes that reached it (up =
1 − received/sent), the client counts the echoes of those that came back (down = 1 − echoed/
received).  Run: ``sudo .venv/bin/pytest tests/test_uml.py`` (about 2 minutes).
"""
from __future__ import annotations

import json
import os
import re
import select
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROBE = struct.Struct("!IQ")  # sequence number, client send time (ns)
PROBE_SIZE = 100              # UDP payload bytes
WARMUP = 0x80000000           # sequence numbers with this bit resolve ARP first; not counted
PORT = 5001
ME = os.path.abspath(__file__)
NS = ("tbuA", "tbuB")         # guest namespaces: A plays the client, B the server
IFS = ("tbu0", "tbu1")
IPS = ("10.77.0.1", "10.77.0.2")


# --- UDP echo probe ------------------------------------------------------------------------------
def echo_server(port: int, idle: float) -> dict:
    """Echo every datagram back; stop ``idle`` s after the last one; count distinct sequences."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    print("ready", flush=True)
    seen: set[int] = set()
    sock.settimeout(60)  # until the first probe
    while True:
        try:
            data, addr = sock.recvfrom(2048)
        except socket.timeout:
            break
        seq = PROBE.unpack_from(data)[0]
        if not seq & WARMUP:
            sock.settimeout(idle)
            seen.add(seq)
        sock.sendto(data, addr)
    return {"received": len(seen)}


def probe_client(host: str, port: int, count: int, interval: float, drain: float) -> dict:
    """Send ``count`` probes every ``interval`` s; collect echoes until ``drain`` s after the last.

    rtt_*_ms: from the probe's send time to its echo's arrival (CLOCK_MONOTONIC), first echo of
    each sequence number.  Before them, warm-up probes every 50 ms until one comes back (up to
    20 s), so that ARP in both directions is resolved and does not drop the first probes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = bytes(PROBE_SIZE - PROBE.size)
    sock.settimeout(0.05)
    for i in range(400):
        sock.sendto(PROBE.pack(WARMUP | i, 0) + pad, (host, port))
        try:
            sock.recv(2048)
            break
        except socket.timeout:
            pass
    else:
        raise SystemExit("probe: no echo within 20 s")
    time.sleep(1.0)  # let late warm-up echoes arrive before counting starts
    while True:  # drain them
        try:
            sock.recv(2048)
        except socket.timeout:
            break
    sock.setblocking(False)
    rtts: dict[int, float] = {}
    start = time.monotonic_ns()
    sent, end = 0, None
    while True:
        now = time.monotonic_ns()
        if sent < count and now >= start + sent * interval * 1e9:
            sock.sendto(PROBE.pack(sent, now) + pad, (host, port))
            sent += 1
            if sent == count:
                end = now + drain * 1e9
            continue
        if end is not None and now >= end:
            break
        wake = end if end is not None else start + sent * interval * 1e9
        if select.select([sock], [], [], max(0.0, (wake - now) / 1e9))[0]:
            while True:
                try:
                    data = sock.recv(2048)
                except BlockingIOError:
                    break
                seq, t_sent = PROBE.unpack_from(data)
                if not seq & WARMUP:
                    rtts.setdefault(seq, (time.monotonic_ns() - t_sent) / 1e6)
    values = sorted(rtts.values())
    return {"sent": sent, "echoed": len(values), "rtt_min_ms": values[0] if values else None,
            "rtt_median_ms": statistics.median(values) if values else None}


def run_probe(popen, run, server_ip: str, count: int, interval: float) -> dict:
    """Echo server via ``popen``, probe client via ``run`` (both take an argv list)."""
    server = popen([sys.executable, ME, "echo", str(PORT), "3"])
    assert server.stdout.readline().strip() == "ready", "echo server did not start"
    client = run([sys.executable, ME, "probe", server_ip, str(PORT), str(count), str(interval), "3"])
    out, _ = server.communicate(timeout=30)
    return {**json.loads(client), **json.loads(out)}


# --- guest side ----------------------------------------------------------------------------------
def _sh(argv: list[str], timeout: float = 60) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=timeout).stdout


def _iperf_goodput(src: int, dst: int, cc: str, seconds: int, omit: int) -> float:
    """TCP goodput in bit/s from namespace NS[src] to NS[dst]: iperf3's receiver figure over
    ``seconds`` after the first ``omit`` seconds (slow start) are left out."""
    server = subprocess.Popen(["ip", "netns", "exec", NS[dst], "iperf3", "-s", "-1", "-p", "5201"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        out = _sh(["ip", "netns", "exec", NS[src], "iperf3", "-c", IPS[dst], "-p", "5201", "-C", cc,
                   "-t", str(seconds), "-O", str(omit), "--json"], timeout=seconds + omit + 60)
    finally:
        server.wait(timeout=30)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"]


def guest_qdisc_case(cfg: dict) -> dict:
    from testbed.backends.kernel import qdisc_commands
    from testbed.hosts import OFFLOADS_OFF
    from testbed.linkspec import LinkSpec
    specs = [LinkSpec.from_dict(cfg["up"]), LinkSpec.from_dict(cfg["down"])]
    for ns in NS:
        _sh(["ip", "netns", "add", ns])
    try:
        _sh(["ip", "link", "add", IFS[0], "netns", NS[0], "type", "veth", "peer", "name", IFS[1],
             "netns", NS[1]])
        for ns, ifname, ip, spec in zip(NS, IFS, IPS, specs):
            for argv in (["ip", "addr", "add", f"{ip}/24", "dev", ifname],
                         ["ip", "link", "set", ifname, "up"], ["ip", "link", "set", "lo", "up"],
                         ["ethtool", "-K", ifname, *OFFLOADS_OFF], *qdisc_commands(ifname, spec)):
                _sh(["ip", "netns", "exec", ns, *argv])
        result = {"class": [_sh(["ip", "netns", "exec", ns, "tc", "class", "show", "dev", i])
                            for ns, i in zip(NS, IFS)]}

        def popen(argv):
            return subprocess.Popen(["ip", "netns", "exec", NS[1], *argv], stdout=subprocess.PIPE,
                                    text=True)

        def run(argv):
            return _sh(["ip", "netns", "exec", NS[0], *argv], timeout=300)

        result["probe"] = run_probe(popen, run, IPS[1], cfg["count"], cfg["interval"])
        result["goodput"] = {direction: _iperf_goodput(src, dst, cc, cfg["seconds"], cfg["omit"])
                             for direction, src, dst, cc in (("up", 0, 1, cfg["cc_up"]),
                                                             ("down", 1, 0, cfg["cc_down"]))}
        result["qdisc"] = [_sh(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", i])
                           for ns, i in zip(NS, IFS)]
        return result
    finally:
        for ns in NS:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def guest_testbed_case(cfg: dict) -> dict:
    from testbed.network import Testbed
    with Testbed("longhaul", backend="netem", overrides=cfg["overrides"],
                 results_root=Path(cfg["results_dir"]) / "runs") as tb:
        def popen(argv):
            return tb.popen("server", argv, name="echo", text=True)

        def run(argv):
            return tb.run("client", argv, timeout=300, check=True).stdout

        return {"probe": run_probe(popen, run, tb.ip("server"), cfg["count"], cfg["interval"]),
                "backend": tb.metadata["backend"]}


def guest_main(config_path: str) -> int:
    cfg = json.loads(Path(config_path).read_text())
    case = {"qdisc": guest_qdisc_case, "testbed": guest_testbed_case}[cfg["case"]]
    (Path(cfg["results_dir"]) / "result.json").write_text(json.dumps(case(cfg), indent=1))
    return 0


# --- host side: the tests ------------------------------------------------------------------------
def _run_guest(tmp_path: Path, cfg: dict) -> dict:
    from testbed import uml
    ok, reason = uml.availability()
    if not ok:
        pytest.skip(reason)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "results_dir": str(tmp_path)}))
    res = uml.run_in_guest([sys.executable, ME, "guest", str(tmp_path / "config.json")],
                           results_dir=tmp_path, timeout=600)
    assert res.returncode == 0, f"guest failed:\n{res.stdout}\n{res.stderr}"
    return json.loads((tmp_path / "result.json").read_text())


def _netem(qdisc_text: str) -> dict:
    """delay (s), loss (probability), limit, dropped of the netem qdisc in ``tc -s qdisc`` output."""
    from testbed.units import parse_probability, parse_time
    line, stats = re.search(r"qdisc netem .*\n(.*)\n", qdisc_text).group(0, 1)
    loss = re.search(r" loss (\S+)", line)
    return {"delay": parse_time(re.search(r" delay (\S+)", line).group(1)),
            "loss": parse_probability(loss.group(1)) if loss else 0.0,
            "limit": int(re.search(r" limit (\d+)", line).group(1)),
            "dropped": int(re.search(r"dropped (\d+)", stats).group(1))}


def _htb_rate(class_text: str) -> float:
    from testbed.units import parse_rate
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
    p = r["probe"]
    base = (up.delay + down.delay) * 1e3
    assert base <= p["rtt_min_ms"] <= p["rtt_median_ms"] <= base + 5.0, p
    loss_up = 1 - p["received"] / p["sent"]
    loss_down = 1 - p["echoed"] / p["received"]
    assert _within_binomial(loss_up, up.loss.p, p["sent"]), (loss_up, up.loss.p)
    assert _within_binomial(loss_down, down.loss.p, p["received"]), (loss_down, down.loss.p)
    # htb counts whole frames: TCP payload is at most 1448/1514 of the configured rate (netem
    # drops before htb, so lost frames use none of it).  Steady-state goodput must reach most of
    # that bound where nothing is lost (where loss is, TCP's reaction decides).
    for direction, spec in (("up", up), ("down", down)):
        bound = spec.rate * 1448 / 1514
        goodput = r["goodput"][direction]
        assert goodput <= 1.02 * bound, (direction, goodput, bound)
        if spec.loss.p == 0:
            assert goodput >= 0.85 * bound, (direction, goodput, bound)


def test_missing_kernel_is_reported(tmp_path):
    from testbed import uml
    ok, reason = uml.availability(kernel=tmp_path / "linux.uml")
    assert not ok and "apt-get install user-mode-linux" in reason
    assert str(tmp_path / "linux.uml") in reason
    with pytest.raises(uml.UMLUnavailable, match="apt-get install user-mode-linux"):
        uml.run_in_guest(["true"], results_dir=tmp_path, kernel=tmp_path / "linux.uml")


def test_missing_modules_are_reported(tmp_path):
    from testbed import uml
    if not uml.KERNEL.exists():
        pytest.skip("user-mode-linux not installed")
    with pytest.raises(uml.UMLUnavailable, match=r"modules\.dep is missing.*apt-get install"):
        uml.check(modules_root=tmp_path)
    version = uml.kernel_version()
    (tmp_path / version).mkdir()
    (tmp_path / version / "modules.dep").write_text("kernel/drivers/net/veth.ko:\n")
    with pytest.raises(uml.UMLUnavailable, match="lacks module.*sch_htb, sch_netem"):
        uml.check(modules_root=tmp_path)


@pytest.mark.parametrize("kwargs", [{"argv": []}, {"argv": "echo hi"}, {"mem": "lots"},
                                    {"timeout": 0}, {"results_dir": "/nonexistent/tb"}])
def test_bad_arguments(tmp_path, kwargs):
    from testbed import uml
    call = {"argv": ["true"], "results_dir": tmp_path, **kwargs}
    with pytest.raises(ValueError):
        uml.run_in_guest(call.pop("argv"), **call)


def test_guest_cli_argv():
    from testbed.uml import guest_cli_argv
    assert guest_cli_argv(["calibrate", "--backend", "netem-uml", "--json"]) == \
        ["calibrate", "--backend", "netem", "--json"]
    assert guest_cli_argv(["calibrate", "--backend=netem-uml"]) == ["calibrate", "--backend=netem"]
    with pytest.raises(ValueError, match="netem-uml"):
        guest_cli_argv(["calibrate", "--rate", "netem-uml"])


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
                if os.readlink(entry / "exe") == "/usr/bin/linux.uml":
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
    from testbed import uml
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
    from testbed import uml
    if not uml.availability()[0]:
        pytest.skip(uml.availability()[1])
    res = uml.run_in_guest([sys.executable, "-m", "testbed", "doctor", "--json"], results_dir=tmp_path)
    report = json.loads(res.stdout)
    assert report["netem"] and report["htb"] and report["backend"] == "netem", report


@root_slow
def test_timeout_kills_guest(tmp_path):
    from testbed import uml
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
    """The long-haul path's kernel configuration at 50 Mbit/s (the guest's TCP ceiling is near
    200 Mbit/s): 100 ms each way, 14% loss server→client only.  BBR upstream (its ACKs cross the
    lossy direction), BBR downstream (cubic stalls at 14% loss, which is the chapter's point)."""
    from topologies.longhaul import LongHaul
    (_a, _b, up, down), = LongHaul(rate_up="50mbit", rate_down="50mbit").link_specs()
    r = _run_guest(tmp_path, {"case": "qdisc", "up": up.to_dict(), "down": down.to_dict(),
                              "count": 2500, "interval": 0.004, "seconds": 5, "omit": 4,
                              "cc_up": "bbr", "cc_down": "bbr"})
    _check_qdisc_case(r, up, down)


@root_slow
def test_asymmetric_htb_netem_in_guest(tmp_path):
    """An asymmetric spec: 10 Mbit/s, 15 ms, 5% loss up; 40 Mbit/s, 25 ms, no loss down."""
    from testbed.linkspec import LinkSpec
    up = LinkSpec.parse(rate="10mbit", delay="15ms", loss="5%")
    down = LinkSpec.parse(rate="40mbit", delay="25ms")
    r = _run_guest(tmp_path, {"case": "qdisc", "up": up.to_dict(), "down": down.to_dict(),
                              "count": 2500, "interval": 0.004, "seconds": 5, "omit": 2,
                              "cc_up": "bbr", "cc_down": "cubic"})
    _check_qdisc_case(r, up, down)


@root_slow
def test_testbed_longhaul_netem_backend_in_guest(tmp_path):
    """``Testbed("longhaul", backend="netem")`` as users run it: 200 ms RTT, loss down only."""
    r = _run_guest(tmp_path, {"case": "testbed", "count": 1500, "interval": 0.004,
                              "overrides": {"rate_up": "50mbit", "rate_down": "50mbit"}})
    p = r["probe"]
    assert r["backend"] == "netem"
    assert 200.0 <= p["rtt_min_ms"] <= p["rtt_median_ms"] <= 205.0, p
    assert p["received"] == p["sent"]
    assert _within_binomial(1 - p["echoed"] / p["received"], 0.14, p["received"])


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "guest":
        sys.exit(guest_main(args[0]))
    if mode == "echo":
        print(json.dumps(echo_server(int(args[0]), float(args[1]))), flush=True)
    elif mode == "probe":
        print(json.dumps(probe_client(args[0], int(args[1]), int(args[2]), float(args[3]),
                                      float(args[4]))))
