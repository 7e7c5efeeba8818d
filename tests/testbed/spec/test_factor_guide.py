"""docs/adding-a-factor.md as written: its records, taken from the page's code blocks, work from a
``TESTBED_PATH`` directory (``testbed`` and the in-host programs in subprocesses, on loopback)
and in this process (registered for one test, the registry as it was afterwards).  No root."""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.spec import factors
from testbed.spec.errors import UsageError

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "adding-a-factor.md"
TESTBED = [sys.executable, "-m", "testbed"]
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)


def guide_blocks() -> dict[str, str]:
    """The page's Python blocks by the name their docstring starts with (``notsent_lowat``, ``ecn``)."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    return {re.match(r'"""(\w+):', b).group(1): b for b in blocks}


@pytest.fixture
def plugin_dir(tmp_path):
    d = tmp_path / "plugins"
    d.mkdir()
    for name, code in guide_blocks().items():
        (d / f"{name}.py").write_text(code)
    return d


@pytest.fixture
def registered(monkeypatch):
    """The guide's records registered in this process, for this test only."""
    factors.FACTORS.names()                                   # built-ins and loaders first
    monkeypatch.setattr(factors.FACTORS, "_records", dict(factors.FACTORS._records))
    for name, code in guide_blocks().items():
        exec(compile(code, f"{GUIDE.name}:{name}", "exec"), {"__name__": name})


def run_testbed(*argv, path=None, tmp_path=None):
    env = {k: v for k, v in os.environ.items() if k != "TESTBED_PATH"}
    if path is not None:
        env["TESTBED_PATH"] = str(path)
    if tmp_path is not None:
        env["TESTBED_STATE_DIR"] = str(tmp_path / "state")
    return subprocess.run([*TESTBED, *argv], env=env, capture_output=True, text=True, timeout=120)


def test_the_guide_has_both_records():
    assert set(guide_blocks()) == {"notsent_lowat", "ecn"}
    assert "notsent_lowat" not in factors.FACTORS and "ecn" not in factors.FACTORS


def test_options_appear_on_testbed_run_from_testbed_path(plugin_dir):
    out = run_testbed("run", "reqresp", "--help", path=plugin_dir)
    assert out.returncode == 0, out.stderr
    assert "--notsent-lowat VALUE" in out.stdout and "--ecn VALUE" in out.stdout
    assert "TCP_NOTSENT_LOWAT: unsent bytes" in " ".join(out.stdout.split())
    without = run_testbed("run", "reqresp", "--help")
    assert without.returncode == 0 and "--notsent-lowat" not in without.stdout


def test_a_loopback_run_sets_reads_back_and_checks_the_factor(plugin_dir, tmp_path, registered):
    """The run's in-host programs load the plugin too: their argv carries the option, every
    socket reads TCP_NOTSENT_LOWAT back, and the experiment's check takes the run's read-back."""
    from experiments.checks import check_for, manipulation_reason
    from testbed.spec.runresult import load_run
    results = tmp_path / "results"
    out = run_testbed("run", "reqresp", "--topo", "loopback", "--requests", "2", "--notsent-lowat", "16KB",
                  "--results", str(results), path=plugin_dir, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    (run_dir,) = results.iterdir()
    r = load_run(run_dir)
    for role in ("client", "server"):
        argv = r.apps[role]
        assert argv[argv.index("--notsent-lowat") + 1] == "16KB"
    events = [json.loads(line) for log in ("client.jsonl", "server.jsonl")
              for line in (run_dir / log).read_text().splitlines()]
    readbacks = [e["readback"] for e in events if e["event"] == "factors"]
    assert readbacks and all(rb["notsent_lowat"] == 16_000 for rb in readbacks)
    assert r.checks["socket_readback"]["notsent_lowat"] == [16_000]
    check = check_for("socket.notsent_lowat")
    assert check.needs == ("socket_readback",)
    from experiments.summary import _shown_checks                  # what a report lists per run
    assert _shown_checks("socket.notsent_lowat", check, r.checks) == {"notsent_lowat (read back)": [16_000]}
    assert manipulation_reason("socket.notsent_lowat", "16KB", r.checks) is None
    assert manipulation_reason("socket.notsent_lowat", 16000, r.checks) is None
    assert manipulation_reason("socket.notsent_lowat", "32KB", r.checks) == \
        "notsent_lowat 32KB but read back [16000]"
    mixed = {"socket_readback": {"notsent_lowat": [16_000, 4_294_967_295]}}   # one socket kept the default
    assert manipulation_reason("socket.notsent_lowat", "16KB", mixed) is not None
    assert manipulation_reason("socket.notsent_lowat", "16KB", {"cc": ["cubic"]}) == \
        "no read-back socket_readback in the run's checks"


def test_a_bad_value_is_the_records_own_message(plugin_dir, tmp_path):
    out = run_testbed("run", "reqresp", "--topo", "loopback", "--notsent-lowat", "lots",
                  "--results", str(tmp_path / "results"), path=plugin_dir, tmp_path=tmp_path)
    assert out.returncode == 2
    assert "notsent_lowat 'lots': a size > 0 bytes" in out.stderr and "Traceback" not in out.stderr


def test_the_socket_record_on_real_sockets(registered):
    from testbed.apps import tcpopts
    argv = factors.socket_argv({"notsent_lowat": "16KB", "cc": "reno"})
    assert argv == ["--cc", "reno", "--notsent-lowat", "16KB"]
    p = argparse.ArgumentParser()
    tcpopts.add_socket_arguments(p)                   # what every in-host TCP program adds
    sf = tcpopts.socket_factors(p.parse_args(argv))
    assert sf.notsent_lowat == 16_000 and sf.cc == "reno"
    lst = socket.socket()
    sf.apply(lst)
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    c = socket.socket()
    sf.apply(c)
    c.connect(lst.getsockname())
    s, _ = lst.accept()
    for sock in (c, s, lst):                          # accepted sockets inherit from the listener
        assert sock.getsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT) == 16_000
        assert tcpopts.read_back(sock)["notsent_lowat"] == 16_000
        sock.close()
    with socket.socket() as plain:                    # not given: not set, the kernel's own
        tcpopts.SocketFactors(**factors.socket_fields({})).apply(plain)
        assert tcpopts.read_back(plain)["notsent_lowat"] != 16_000


def test_the_host_record_reaches_the_host_program_and_its_check(registered, monkeypatch, capsys):
    from experiments.checks import manipulation_reason
    from testbed.apps import tcpopts
    h = tcpopts.HostFactors("10.0.0.2", **factors.host_fields({"ecn": "1"}))
    assert h.argv() == ["--peer", "10.0.0.2", "--ecn", "1"]
    monkeypatch.setattr(tcpopts, "apply_host", lambda got: got.values)
    assert tcpopts.main(["host", *h.argv()]) == 0
    assert json.loads(capsys.readouterr().out)["ecn"] == 1
    assert factors.FACTORS.get("ecn").sysctl.path == Path("/proc/sys/net/ipv4/tcp_ecn")
    assert factors.namespace_effects({"ecn": 1}) == ["ecn"]          # so loopback refuses it
    with pytest.raises(UsageError, match=r"ecn 'on': 0 \(off\), 1 \(request ECN\)"):
        factors.parse_all({"ecn": "on"}, "host")
    both = {"host_factors": {"client": {"ecn": 1}, "server": {"ecn": 1}}}
    assert manipulation_reason("host.ecn", 1, both) is None
    one = {"host_factors": {"client": {"ecn": 1}, "server": {"ecn": 2}}}
    assert manipulation_reason("host.ecn", 1, one) == "ecn 1 but read back [1, 2]"
    from experiments.checks import check_for
    from experiments.summary import _shown_checks
    assert _shown_checks("host.ecn", check_for("host.ecn"), one) == {"ecn (read back)": {"client": 1, "server": 2}}
