import json
import subprocess

import pytest

from conftest import REPO, TESTBED


def run_testbed(*args, timeout=60):
    return subprocess.run([*TESTBED, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_help_lists_commands():
    out = run_testbed("--help")
    assert out.returncode == 0
    for cmd in ("doctor", "topo", "clean"):
        assert cmd in out.stdout


@pytest.mark.root
def test_doctor_json_keys():
    out = run_testbed("doctor", "--json")
    report = json.loads(out.stdout)
    for key in ("root", "netem", "htb", "backend", "congestion_control", "mptcp", "tcpdump",
                "tshark", "ok", "problems"):
        assert key in report
    assert report["root"] is True
    assert set(report["congestion_control"]) >= {"reno", "cubic"}
    assert report["backend"] == ("netem" if report["netem"] and report["htb"] else "userspace")
    assert out.returncode == (0 if report["ok"] else 1)
    emu = report["emulator_cpu"]
    assert emu["cpus"] and emu["forwarder_cpu"] == (emu["cpus"][-1] if len(emu["cpus"]) > 1 else None)
    assert isinstance(emu["cpu_latency_request"], bool)
    assert emu["preemption"] in (None, "none", "voluntary", "full", "lazy", "rt")
    assert emu["rt_cap_percent"] is None or 0 < emu["rt_cap_percent"] <= 100
    from testbed.emulator.forwarder import busy_policy
    assert (emu["native_busy_share_pct"], emu["native_demote"]) == busy_policy(
        emu["forwarder_cpu"], True, emu["rt_cap_percent"])
    assert isinstance(emu["device_irqs"], list)
    text = run_testbed("doctor").stdout
    assert "kernel preemption" in text and "native loop's busy budget" in text
    assert "device interrupts on it" in text


def test_topo_list_names_longhaul():
    out = run_testbed("topo", "list")
    assert out.returncode == 0 and "longhaul" in out.stdout and "loss_down" in out.stdout


@pytest.mark.parametrize("args,message", [
    (["topo", "up", "nosuch"], "unknown topology"),
    (["topo", "up", "longhaul", "--set", "colour=red"], "has no parameter"),
    (["topo", "up", "longhaul", "--set", "loss_down=140%"], "outside [0, 1]"),
    (["topo", "up", "longhaul", "--set", "rate_down"], "expected KEY=VALUE"),
])
def test_bad_input_is_a_clear_error(args, message):
    out = run_testbed(*args)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


def _flat(text):
    return " ".join(text.split())


@pytest.mark.parametrize("workload", ["reqresp", "bulk", "audio", "agent"])
def test_run_help_shows_every_default(workload):
    import dataclasses
    from testbed.spec import factors
    from testbed import workloads
    out = run_testbed("run", workload, "--help")
    assert out.returncode == 0
    text = _flat(out.stdout)
    w = workloads.get(workload)
    for f in dataclasses.fields(w.params):
        if f.default not in (None, False):
            assert f"--{f.name.replace('_', '-')}" in text and f"(default: {f.default})" in text
    for f in factors.FACTORS.values():
        assert f.option in text
        if f.default not in (None, False):
            assert f"(default: {f.default_text()})" in text
    assert "(default: True)" not in text       # --slow-start-after-idle takes 0/1
    for option in ("--seed", "--backend", "--topo", "--capture", "--timeout"):
        assert option in text
    assert "(default: 1)" in text and "(default: longhaul)" in text


def test_topo_show_json_names_links_directions_hosts_roles():
    out = run_testbed("topo", "show", "dualpath", "--link", "access2.up.queue=50", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["roles"] == {"client": "client", "server": "server"}
    assert set(d["hosts"]) == {"client", "gw", "server"}
    links = {link["name"]: link for link in d["links"]}
    assert set(links) == {"access1", "access2", "egress"}
    assert links["access2"]["up"]["from"] == "client" and links["access2"]["down"]["to"] == "client"
    assert links["access2"]["up"]["spec"]["queue_packets"] == 50
    assert links["access2"]["down"]["spec"]["queue_packets"] is None   # only that direction


def test_topo_list_shows_hosts_and_roles():
    out = run_testbed("topo", "list")
    assert "hosts: server, station (client station, server server)" in out.stdout


def test_topo_show_prints_a_shared_medium():
    """The air link's directions are unshaped: its medium gives the rate, and shows it."""
    out = run_testbed("topo", "show", "wifi", "--set", "data_rate=24mbit")
    assert "    medium air, shared by both directions: data 24mbit, MAC ACKs 6mbit, DIFS 34us" in out.stdout


@pytest.mark.parametrize("args,message", [
    (["topo", "show", "dualpath", "--link", "nosuch.up.queue=5"], "links: access1, access2, egress"),
    (["topo", "show", "dualpath", "--link", "access2.sideways.queue=5"], "allowed: up, down"),
    (["topo", "show", "dualpath", "--link", "access2.up.colour=5"], "allowed: rate, delay, jitter"),
    (["topo", "show", "longhaul", "--link", "bottleneck.up.loss"], "expected LINK.DIR.FIELD=VALUE"),
    (["run", "reqresp", "--topo", "relay", "--link", "bottleneck.down.jitter=-1ms"], "jitter"),
    (["run", "reqresp", "--topo", "longhaul", "--path", "relay"], "gateway hosts"),
    (["run", "bulk", "--topo", "wifi"], "exactly one of --size or --duration"),
    (["run", "reqresp", "--topo", "wifi", "--client-host", "client"], "hosts: server, station"),
    (["topo", "up", "image", "--exec", "client", "ping", "{nohost}"], "bad {host} substitution ('nohost')"),
    (["topo", "up", "image", "--full-payload", "--hold", "1"], "--capture none with --full-payload"),
])
def test_bad_names_are_one_line_listing_the_valid_ones(args, message):
    out = run_testbed(*args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.root
def test_topo_up_exec_runs_iperf3_and_saves_output(tmp_path):
    out = run_testbed("topo", "up", "longhaul", "--set", "loss_down=0%", "--set", "delay=5ms",
                      "--set", "rate_up=50mbit", "--set", "rate_down=50mbit", "--backend", "userspace",
                      "--results", str(tmp_path), "--exec", "server", "iperf3", "-s", "-1",
                      "--exec", "client", "iperf3", "-c", "{server}", "-t", "1", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    (run_dir,) = tmp_path.iterdir()
    client = json.loads((run_dir / "exec-1-client.stdout").read_text())
    assert client["start"]["connected"][0]["remote_host"] == "10.0.0.2"   # {server} substituted
    assert 0 < client["end"]["sum_received"]["bits_per_second"] <= 50e6 * 1.01
    assert (run_dir / "exec-0-server.stdout").exists()
    # a run directory: manifest with status and spec, every host's capture in the inventory
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["error"] is None
    assert manifest["spec"]["workload"] == "exec" and manifest["spec"]["topology"] == "longhaul"
    assert manifest["spec"]["topology_params"]["delay"] == "5ms"
    assert manifest["apps"]["exec-1-client"][:3] == ["iperf3", "-c", "10.0.0.2"]
    pcaps = {f["host"] for f in manifest["files"] if f["kind"] == "pcap"}
    assert pcaps == {"client", "server"}
    assert manifest["metrics"]["retransmissions"] >= 0 and manifest["fidelity"]["verdict"] != "unknown"
    assert out.stdout.splitlines()[-1].startswith(f"torn down; run directory {run_dir} (complete, 2 captures)")
    analyzed = run_testbed("analyze", str(run_dir), "--json", timeout=120)
    assert analyzed.returncode == 0, analyzed.stderr
    report = json.loads(analyzed.stdout)
    assert report["status"] == "complete" and len(report["captures"]) == 2
    assert all(any(f["flow"].endswith(":5201") for f in c["flows"]) for c in report["captures"])


@pytest.mark.root
def test_topo_up_exec_capture_options_and_a_failing_program(tmp_path):
    """--capture HOST and --full-payload as in `testbed run`; a last program that fails makes a
    failed run, its error in the manifest."""
    out = run_testbed("topo", "up", "image", "--set", "delay=1ms", "--results", str(tmp_path),
                      "--capture", "client", "--full-payload",
                      "--exec", "client", "ping", "-c", "2", "-s", "1000", "server", timeout=120)
    assert out.returncode == 0, out.stderr
    (run_dir,) = tmp_path.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [f["path"] for f in manifest["files"] if f["kind"] == "pcap"] == ["pcap/client-client-eth0.pcap"]
    assert manifest["capture"]["interfaces"][0]["captured"] >= 4
    meta = json.loads((run_dir / "pcap" / "client-client-eth0.pcap.meta.json").read_text())
    assert meta["snaplen"] == 0                                    # whole frames
    failed = run_testbed("topo", "up", "image", "--results", str(tmp_path / "f"),
                         "--exec", "client", "ls", "/nonexistent", timeout=120)
    assert failed.returncode == 2
    (run_dir,) = (tmp_path / "f").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "ls /nonexistent on client exited 2" in manifest["error"]


def test_topo_up_bad_capture_host_is_one_line_and_creates_nothing(tmp_path):
    out = run_testbed("topo", "up", "image", "--results", str(tmp_path / "r"), "--capture", "cgw",
                      "--exec", "client", "true")
    assert out.returncode == 2 and "capture host(s) ['cgw'] not in topology 'image'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_topo_up_captures_by_default_with_exec_only():
    from testbed.cli import build_parser
    from testbed.cli.topo import up_spec
    parser = build_parser()
    spec = up_spec(parser.parse_args(["topo", "up", "image", "--exec", "client", "true"]))
    assert spec.capture.hosts == "all" and spec.workload == "exec"
    assert up_spec(parser.parse_args(["topo", "up", "image", "--cli"])).capture.hosts == "none"
    spec = up_spec(parser.parse_args(["topo", "up", "relay", "--capture", "client,cgw",
                                      "--full-payload", "--link", "bottleneck.down.loss=1%",
                                      "--hold", "1"]))
    assert spec.capture.hosts == ("client", "cgw") and spec.capture.full_payload
    assert spec.links == {"bottleneck.down.loss": "1%"}


@pytest.mark.root
def test_run_uses_the_topologys_roles(tmp_path):
    """wifi's client is `station`: no --client-host needed."""
    out = run_testbed("run", "bulk", "--topo", "wifi", "--size", "200KB", "--capture", "none",
                      "--results", str(tmp_path), "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["status"] == "complete" and 0 < printed["metrics"]["goodput_mbps"] < 54
    manifest = json.loads((tmp_path / printed["run_id"] / "manifest.json").read_text())
    assert manifest["roles"] == {"client": "station", "server": "server"}


def _pty_session(argv: list[str], lines: list[str], prompt: bytes = b"mininet>",
                 timeout: float = 60) -> str:
    """Run ``argv`` on a pseudo-terminal (as a user at a terminal would), type ``lines`` one at
    a time, each after the prompt appeared; everything the terminal showed, as text."""
    import os
    import select
    import time
    master, slave = os.openpty()
    proc = subprocess.Popen(argv, cwd=REPO, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    seen = b""

    def read_until(token: bytes, after: int) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while token not in seen[after:] and time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    data = os.read(master, 4096)
                except OSError:      # the program exited: its side of the terminal closed
                    return
                if not data:
                    return
                seen += data
    try:
        for line in lines:
            mark = len(seen)
            read_until(prompt, mark)
            os.write(master, line.encode() + b"\n")
            read_until(b"\n", len(seen))
        read_until(b"torn down", 0)
        proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return seen.decode(errors="replace").replace("\r\n", "\n")


@pytest.mark.root
def test_topo_up_cli_prints_every_commands_output(tmp_path):
    """On a terminal, as Mininet's `mn`: `nodes` lists the hosts, a host command's output shows."""
    text = _pty_session([*TESTBED, "topo", "up", "image", "--set", "delay=1ms", "--results",
                         str(tmp_path), "--cli"],
                        ["nodes", "client ping -c 1 server", "exit"])
    assert "available nodes are" in text and "client server" in text, text
    assert "1 packets transmitted, 1 received" in text, text
    assert "torn down" in text
