"""Bring-up, traffic and teardown of a topology; nothing may remain after exit, SIGTERM or SIGKILL."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, TESTBED, sigint_default
from testbed.host.lifecycle import STATE_DIR, RunState, processes_in_netns

pytestmark = pytest.mark.root
# Emulated links (userspace backend here): the run has hosts, an emulator node and its process.
SMALL_PATH = ["--set", "rate_up=50mbit", "--set", "rate_down=50mbit", "--set", "delay=5ms",
              "--set", "loss_down=1%"]


def assert_nothing_left(state: RunState):
    alive = [p for p in state.processes if p.alive()]
    assert not alive, f"processes left: {alive}"
    assert not processes_in_netns(set(state.netns_inodes)), "processes left in testbed namespaces"
    assert not (STATE_DIR / f"{state.run_id}.json").exists(), "state file left"


def test_longhaul_unshaped_tcp_transfer_and_clean_exit(results_root):
    from testbed.run.network import Testbed
    overrides = dict(rate_up="unshaped", rate_down="unshaped", delay="0ms", loss_down="0%")
    with Testbed("longhaul", overrides=overrides, results_root=results_root) as tb:
        server = tb.popen("server", [sys.executable, "-m", "testbed.apps.bulk", "server",
                                     "--listen", ":5001", "--log", str(tb.dir / "server.jsonl")],
                          name="bulk server", text=True)
        assert server.stdout.readline().startswith("ready")
        out = tb.run("client", [sys.executable, "-m", "testbed.apps.bulk", "client", "--server",
                                f"{tb.ip('server')}:5001", "--size", "20MB", "--log",
                                str(tb.dir / "client.jsonl")], timeout=60, check=True)
        assert out.stdout.startswith("up: 20000000 B")  # the client checks every byte arrived
        assert tb.run("client", ["ethtool", "-k", "client-eth0"]).stdout.count(": off") >= 4
        state = RunState.load(tb.run_.state_path)
        assert len(state.netns_inodes) == 2  # client and server namespaces
        meta = json.loads((tb.dir / "metadata.json").read_text())
        assert meta["topology"]["name"] == "longhaul" and meta["backend"] in ("userspace", "netem")
        assert meta["hosts"]["client"]["sysctls"]["net.ipv4.tcp_no_metrics_save"] == "1"
    assert_nothing_left(state)


def start_topology(results_root):
    proc = subprocess.Popen([*TESTBED, "topo", "up", "longhaul", *SMALL_PATH, "--hold", "120",
                             "--results", str(results_root)], cwd=REPO, preexec_fn=sigint_default,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for path in STATE_DIR.glob("tb-*.json"):
            try:
                state = RunState.load(path)
            except (ValueError, OSError):
                continue
            if state.owner_pid == proc.pid and (Path(state.results_dir) / "metadata.json").exists():
                return proc, state  # metadata is written when bring-up is complete
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"topology did not come up: {proc.communicate()}")


def test_sigterm_during_a_run_leaves_nothing(results_root):
    proc, state = start_topology(results_root)
    assert all(p.alive() for p in state.processes)
    assert any(p.what == "emulator" for p in state.processes)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "interrupted (SIGTERM); the processes, namespaces and temporary files" in err
    assert_nothing_left(state)


def test_clean_after_sigkill_leaves_nothing(results_root):
    proc, state = start_topology(results_root)
    assert any(p.what == "emulator" for p in state.processes)
    proc.kill()
    proc.wait()
    out = subprocess.run([*TESTBED, "clean"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert state.run_id in out.stdout
    assert_nothing_left(state)


def test_clean_leaves_a_live_run_alone(results_root):
    proc, state = start_topology(results_root)
    try:
        out = subprocess.run([*TESTBED, "clean"], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert "still running" in out.stdout
        assert all(p.alive() for p in state.processes)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert_nothing_left(state)


def test_two_runs_coexist(results_root):
    """Two emulated topologies at once: same host names, addresses and interface names, each
    with its own emulator; both forward, neither disturbs the other."""
    from testbed.run.network import Testbed
    overrides = dict(rate_up="100mbit", rate_down="100mbit", delay="5ms", loss_down="0%")
    with Testbed("longhaul", overrides=overrides, results_root=results_root) as a, \
            Testbed("longhaul", overrides=overrides, results_root=results_root) as b:
        assert a.run_.id != b.run_.id
        for tb in (a, b):
            out = tb.run("client", ["ping", "-c", "3", "-i", "0.2", "-W", "2", tb.ip("server")])
            assert out.returncode == 0 and " 0% packet loss" in out.stdout
        states = [RunState.load(tb.run_.state_path) for tb in (a, b)]
        assert not set(states[0].netns_inodes) & set(states[1].netns_inodes)
    for state in states:
        assert_nothing_left(state)


def _in_own_netns(argv, processes: int = 1):
    """A process in a network namespace of its own (``unshare -n``), once ``processes`` are in
    that namespace, and its inode."""
    from testbed.host.lifecycle import netns_inode
    proc = subprocess.Popen(["unshare", "-n", *argv])
    deadline = time.monotonic() + 10
    while netns_inode(proc.pid) in (None, netns_inode(os.getpid())) or \
            len(processes_in_netns({netns_inode(proc.pid)})) < processes:
        assert time.monotonic() < deadline, "unshare -n did not take effect"
        time.sleep(0.01)
    return proc, netns_inode(proc.pid)


def test_clean_ends_what_is_in_a_namespace_a_recorded_process_holds_and_nothing_in_a_reused_inode():
    """The kernel reuses a freed namespace's inode at once: a crashed run's recorded inode may
    name someone else's namespace.  Processes there are ended only while a process of the run
    still holds it; otherwise they are named and left alone."""
    from testbed.host.lifecycle import ProcessRecord, plan_removal, proc_start_time, remove_state
    ours, inode = _in_own_netns(["sh", "-c", "sleep 60 & exec sleep 61"], 2)    # a child not recorded
    theirs, other = _in_own_netns(["sleep", "60"])
    try:
        def state(rec, inodes):
            return RunState("tb-test", 0, 0, "", processes=rec, netns_inodes=inodes)
        dead = ProcessRecord(2 ** 22 + 1, 1, "gone")             # a recorded process that exited
        lines = remove_state(state([dead], [other]))
        assert theirs.poll() is None, "a process in a namespace the run no longer held was ended"
        assert lines == [f"left alone: processes {theirs.pid} in a namespace whose inode the run recorded "
                         "but none of its processes holds any more (the kernel reuses inodes): end them by "
                         "hand if they are the run's"]
        child = [pid for pid in processes_in_netns({inode}) if pid != ours.pid]
        assert len(child) == 1
        recorded = state([ProcessRecord(ours.pid, proc_start_time(ours.pid), "server")], [inode])
        said = plan_removal(recorded).describe()                 # testbed clean --dry-run: nothing ended
        assert said == [f"would end server (pid {ours.pid}): sleep 61",
                        f"would end process {child[0]} left in a testbed namespace: sleep 60"]
        assert ours.poll() is None and sorted(processes_in_netns({inode})) == sorted([ours.pid, child[0]])
        lines = remove_state(recorded)
        ours.wait(5)
        assert lines == [f"ended server (pid {ours.pid})", f"ended process {child[0]} left in a testbed namespace"]
        assert not processes_in_netns({inode})
    finally:
        for p in (ours, theirs):
            p.kill()
            p.wait()
