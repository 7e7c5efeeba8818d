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
