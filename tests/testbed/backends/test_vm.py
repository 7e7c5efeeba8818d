"""The Debian VM (testbed/backends/vm): its qemu command line, shares, accelerator choice, job
protocol and clean-up without booting anything; then, as root where qemu and the image are
present, one boot that runs the kernel-backend tests (test_netem_kernel.py, marked ``netem``)
inside the guest — the kernel they need is not this machine's.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from testbed.backends import vm
from testbed.backends.vm import image as vm_image
from testbed.host.lifecycle import proc_start_time

NETEM_TESTS = "tests/testbed/backends/test_netem_kernel.py"


def fake_image(tmp_path: Path) -> vm_image.Image:
    return vm_image.Image(tmp_path / "img", {"key": "k"})


def test_qemu_argv_tcg_and_kvm(tmp_path):
    shares = [Path("/work/a"), Path("/srv/b")]
    tcg = vm.qemu_argv(fake_image(tmp_path), tmp_path / "ctl", shares, "tcg", 1, "2G",
                       tmp_path / "console.log")
    assert tcg[tcg.index("-accel") + 1] == "tcg,thread=multi" and tcg[tcg.index("-smp") + 1] == "1"
    assert "-nodefaults" in tcg and not {"-nic", "-netdev", "-net"} & set(tcg)   # no network device
    drive = tcg[tcg.index("-drive") + 1]
    assert "snapshot=on" in drive and str(tmp_path / "img" / "root.img") in drive
    virtfs = [tcg[i + 1] for i, a in enumerate(tcg) if a == "-virtfs"]
    assert virtfs[0].startswith(f"local,path={tmp_path / 'ctl'},mount_tag=tbctl,")
    assert [v.split(",")[1:3] for v in virtfs[1:]] == [["path=/work/a", "mount_tag=s0"],
                                                       ["path=/srv/b", "mount_tag=s1"]]
    assert "clocksource=tsc" in tcg[tcg.index("-append") + 1]
    kvm = vm.qemu_argv(fake_image(tmp_path), tmp_path, [], "kvm", 2, "1G", tmp_path / "c")
    assert kvm[kvm.index("-accel") + 1] == "kvm" and kvm[kvm.index("-cpu") + 1] == "host"


def test_shares_dedupe_nested_and_refuse_root_and_commas(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert vm._shares([tmp_path / "a" / "b", tmp_path / "a", tmp_path / "a"]) == [tmp_path / "a"]
    with pytest.raises(ValueError, match="cannot share /"):
        vm._shares([Path("/")])
    with pytest.raises(ValueError, match="comma"):
        vm._shares([tmp_path / "x,y"])


def test_accel_candidates_forced_detected_and_remembered(tmp_path, monkeypatch):
    monkeypatch.setattr(vm_image, "CACHE_DIR", tmp_path)
    monkeypatch.setenv("TESTBED_VM_ACCEL", "tcg")
    assert vm.accel_candidates() == ["tcg"]
    monkeypatch.setenv("TESTBED_VM_ACCEL", "xen")
    with pytest.raises(ValueError, match="auto, kvm, tcg"):
        vm.accel_candidates()
    monkeypatch.setenv("TESTBED_VM_ACCEL", "auto")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (False, "no /dev/kvm"))
    assert vm.accel_candidates() == ["tcg"]
    monkeypatch.setattr(vm, "kvm_usable", lambda: (True, "/dev/kvm"))
    assert vm.accel_candidates() == ["kvm", "tcg"]          # not tried yet: try it
    vm._store_accel({"kvm": {"booted": False, "reason": "hung"}})
    assert vm.accel_candidates() == ["tcg"]                 # seen not to boot here: not again
    assert vm.accel_report()["kvm_boot"]["reason"] == "hung"
    assert vm.default_cpus("tcg") == 1 and vm.default_cpus("kvm") == min(2, os.cpu_count())


def test_console_reason():
    assert vm.console_reason(Path("/nonexistent/console")) == "no console log"
    assert vm.console_reason(Path("/dev/null")) == "the console is empty"


def test_console_reason_lines(tmp_path):
    log = tmp_path / "c.log"
    log.write_text("Loading\n[ 1.0] Kernel panic - not syncing: VFS: Unable to mount root\nx\n")
    assert vm.console_reason(log) == "[ 1.0] Kernel panic - not syncing: VFS: Unable to mount root"
    log.write_text("Traceback (most recent call last):\n  File \"/run/tbctl/agent.py\", line 3\n"
                   "OSError: [Errno 2] mount -t 9p s0 /work\n")
    assert vm.console_reason(log) == "OSError: [Errno 2] mount -t 9p s0 /work"


def test_image_packages_come_from_install_sh_and_key_follows_them(monkeypatch):
    packages = vm_image.install_packages()
    assert {"mininet", "iperf3", "iproute2", "python3"} <= set(packages)
    assert "qemu-system-x86" not in packages     # the host's tools stay out of the image
    key = vm_image.image_key()
    monkeypatch.setattr(vm_image, "install_packages", lambda: [*packages, "htop"])
    assert vm_image.image_key() != key


def test_mmdebstrap_argv_is_a_list_with_the_host_suite(tmp_path):
    argv = vm_image.mmdebstrap_argv("bookworm", ["iperf3", "linux-image-amd64"], tmp_path / "t",
                                    [Path("/etc/apt/sources.list.d/debian.sources")])
    assert argv[0] == "mmdebstrap" and "--include=iperf3,linux-image-amd64" in argv
    assert argv[-3:] == ["bookworm", str(tmp_path / "t"), "/etc/apt/sources.list.d/debian.sources"]


def _machine(tmp_path: Path, pid: int, owner: int | None = None) -> vm.Machine:
    d = tmp_path / "vm" / "x"
    d.mkdir(parents=True)
    m = vm.Machine(d, {"pid": pid, "start_time": proc_start_time(pid) or 1, "accel": "tcg",
                       "cpus": 1, "mem": "1G", "console": str(tmp_path / "c.log"),
                       "shares": [str(tmp_path)], "image": "k", "kernel": "6.1",
                       "boot_seconds": 1.0, "owner_pid": owner,
                       "owner_start_time": proc_start_time(owner) if owner else None})
    m.save()
    return m


def test_clean_removes_a_dead_guest_and_spares_a_live_owner(tmp_path, monkeypatch):
    from testbed.host import lifecycle
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path)
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        _machine(tmp_path, sleeper.pid, owner=os.getpid())
        assert "left alone" in vm.clean()[0] and (tmp_path / "vm" / "x").is_dir()
        lines = vm.clean(force=True)
        assert any(f"qemu pid {sleeper.pid}" in x for x in lines)
        assert sleeper.wait(5) is not None and not (tmp_path / "vm" / "x").exists()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
    assert vm.clean() == []


def test_exec_streams_output_and_returns_the_status(tmp_path, capfdbinary):
    """The host side of the job protocol against a stand-in for the guest's agent: the argv
    arrives as a list, output is copied as it grows, the status comes back, the job's files go."""
    m = _machine(tmp_path, os.getpid())
    jobs = m.dir / "jobs"
    seen = {}

    def agent():
        while not (files := list(jobs.glob("*.json")) if jobs.is_dir() else []):
            time.sleep(0.01)
        job = json.loads(files[0].read_text())
        seen.update(job)
        base = str(files[0])[:-5]
        Path(base + ".out").write_bytes(b"first\n")
        time.sleep(0.2)
        with open(base + ".out", "ab") as f:
            f.write(b"second\n")
        Path(base + ".err").write_bytes(b"oops\n")
        Path(base + ".rc.json").write_text(json.dumps({"returncode": 3, "seconds": 0.2}))
    t = threading.Thread(target=agent)
    t.start()
    argv = ["$(touch /tbpwned)", "a b; id", "'\""]
    assert m.exec(argv, cwd=tmp_path) == 3
    t.join()
    out = capfdbinary.readouterr()
    assert out.out == b"first\nsecond\n" and out.err == b"oops\n"
    assert seen["argv"] == argv and seen["cwd"] == str(tmp_path)
    assert json.loads(seen["env"]["TESTBED_VM_GUEST"])["accel"] == "tcg"
    assert list(jobs.iterdir()) == []


def test_cli_without_a_vm_is_one_line(tmp_path, monkeypatch, capsys):
    from testbed.cli import main
    from testbed.host import lifecycle
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path)
    assert main(["vm", "exec", "true"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["testbed: error: no VM is up: `testbed vm up` starts one"]
    assert main(["vm", "down"]) == 0 and capsys.readouterr().out.strip() == "no VM is up"


@pytest.mark.parametrize("argv,command", [
    (["uname", "-r"], ["uname", "-r"]),
    (["--", "uname", "-r"], ["uname", "-r"]),
    (["--timeout", "5", "tc", "-s", "qdisc", "show"], ["tc", "-s", "qdisc", "show"]),
    (["tc", "--timeout", "5"], ["tc", "--timeout", "5"]),
])
def test_vm_exec_gives_the_command_its_own_options(isolated_state, monkeypatch, argv, command):
    """Was: `testbed vm exec uname -r` failed "unrecognized arguments: -r (see testbed --help)":
    the command's options were taken for testbed's unless a -- came first."""
    from testbed.cli import main
    calls = []

    class Up:
        def exec(self, argv, **kw):
            calls.append((argv, kw))
            return 3
    monkeypatch.setattr(vm, "running", lambda *a, **kw: Up())
    assert main(["vm", "exec", *argv]) == 3
    assert calls == [(command, {"timeout": 5.0 if argv[0] == "--timeout" else None})]


@pytest.mark.parametrize("argv", [[], ["--"], ["--timeout", "5"]])
def test_vm_exec_without_a_command_is_one_line(isolated_state, monkeypatch, capsys, argv):
    from testbed.cli import main
    monkeypatch.setattr(vm, "running", lambda *a, **kw: pytest.fail("the VM was reached"))
    assert main(["vm", "exec", *argv]) == 2
    assert capsys.readouterr().err == ("testbed: error: vm exec: no command; give one to run in "
                                       "the VM, e.g. testbed vm exec uname -r\n")


@pytest.mark.parametrize("argv,words", [
    (["up", "--cpus", "0"], "argument --cpus: '0': give a whole number of virtual CPUs from 1 to 64"),
    (["up", "--cpus", "65"], "argument --cpus: '65': give a whole number of virtual CPUs from 1 to 64"),
    (["up", "--cpus", "1e3"], "argument --cpus: '1e3': give a whole number of virtual CPUs from 1 to 64"),
    (["up", "--mem", "0"], "argument --mem: '0': give a whole number of M or G from 256M to "),
    (["up", "--mem", "1M"], "argument --mem: '1M' is 1 MiB: give a whole number of M or G from 256M"),
    (["up", "--mem", "99999999G"], "(this host's memory), e.g. 2G"),
    (["exec", "--timeout", "nan", "--", "true"], "argument --timeout: 'nan': give a number of seconds > 0"),
    (["exec", "--timeout", "inf", "true"], "argument --timeout: 'inf': give a number of seconds > 0"),
    (["exec", "--timeout", "-1", "true"], "argument --timeout: '-1': give a number of seconds > 0"),
    (["exec", "--timeout", "0", "true"], "argument --timeout: '0': give a number of seconds > 0, e.g. 60 "
                                         "(leave --timeout out for no limit)"),
])
def test_cli_bad_vm_options_are_refused_before_a_vm_is_reached(tmp_path, monkeypatch, capsys, argv, words):
    """`vm up --cpus 0` said "cpus 0: give 1 to 64" without naming --cpus; `vm exec --timeout nan`
    went on to the VM (a NaN deadline never passes).  No VM is up and none may boot here."""
    from testbed.cli import main
    from testbed.host import lifecycle
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path)
    for name in ("boot", "up", "running"):
        monkeypatch.setattr(vm, name, lambda *a, **kw: pytest.fail("the VM was reached"))
    with pytest.raises(SystemExit) as exc:
        main(["vm", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(f"testbed vm {argv[0]}: error: ") and words in err, err
    assert err.count("\n") == 1



def test_cli_cpus_says_the_backends_refusal(monkeypatch):
    """`--cpus` wrote its own copy of ``cpus_refusal``'s words; it says the backend's."""
    import argparse
    from testbed.cli import vm as cli_vm
    monkeypatch.setattr(vm, "cpus_refusal", lambda c: None if c == 2 else f"{c!r}: the backend's words")
    assert cli_vm.cpus("2") == 2
    for text in ("0", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"^'{text}': the backend's words$"):
            cli_vm.cpus(text)

def test_boot_and_exec_refuse_bad_values_themselves(tmp_path):
    with pytest.raises(ValueError, match="cpus 0: give a whole number of virtual CPUs from 1 to 64"):
        vm.boot("x", cpus=0)
    with pytest.raises(ValueError, match="mem '1M' is 1 MiB: give a whole number of M or G from 256M"):
        vm.boot("x", mem="1M")
    m = vm.Machine(tmp_path, {"pid": os.getpid()})
    with pytest.raises(ValueError, match="timeout nan: give seconds > 0"):
        m.exec(["true"], timeout=float("nan"))
    assert not list(tmp_path.iterdir())      # no job was written


# --- one boot: the kernel-backend tests inside the guest ------------------------------------
@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    ok, why = vm.qemu_available()
    if not ok:
        pytest.skip(why)
    if shutil.which("mmdebstrap") is None and vm_image.cached() is None:
        pytest.skip("no VM image and no mmdebstrap to build one (scripts/install.sh installs it)")
    vm_image.build()          # cached: builds only when install.sh's package list changed
    shared = tmp_path_factory.mktemp("vm")
    m = vm.boot(f"test-{os.getpid()}", shares=vm.default_shares(shared), owner=True,
                console=shared / "vm-console.log")
    try:
        yield m, shared
    finally:
        pid, d = m.state["pid"], m.dir
        m.shutdown()
        assert proc_start_time(pid) is None and not d.exists()


@pytest.mark.root
@pytest.mark.slow
def test_guest_runs_argv_verbatim_with_netem(guest):
    m, shared = guest
    script = ("import json, os, sys\nprint(json.dumps(sys.argv[1:]))\n"
              "print(open('/proc/sys/kernel/osrelease').read().strip(), file=sys.stderr)\n"
              f"open({str(shared / 'written')!r}, 'w').write(os.environ['TESTBED_IN_VM'])\n"
              "sys.exit(4)\n")
    args = ["$(touch /tbvmpwned)", "a b; id", "`id`", "'\""]
    out, err = shared / "out", shared / "err"
    with open(out, "wb") as o, open(err, "wb") as e:
        assert m.exec([sys.executable, "-c", script, *args], stdout=o, stderr=e) == 4
    assert json.loads(out.read_text()) == args
    assert err.read_text().strip() == m.state["kernel"] != os.uname().release
    assert (shared / "written").read_text() == "1" and not Path("/tbvmpwned").exists()
    with open(out, "wb") as o:
        assert m.exec(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                      stdout=o) == 0


@pytest.mark.root
@pytest.mark.slow
def test_kernel_backend_tests_pass_in_the_guest(guest):
    """test_netem_kernel.py, skipped on this kernel, runs in the guest: every test passes."""
    m, shared = guest
    report = shared / "netem-tests.xml"
    log = shared / "netem-tests.txt"
    with open(log, "wb") as f:
        rc = m.exec([sys.executable, "-m", "pytest", NETEM_TESTS, "-q", "-ra", "-p",
                     "no:cacheprovider", f"--junitxml={report}"], cwd=REPO, stdout=f, stderr=f,
                    timeout=1200)
    text = log.read_text(errors="replace")
    assert rc == 0, f"in the VM ({m.state['accel']}):\n{text[-4000:]}"
    import xml.etree.ElementTree as ET
    suite = ET.parse(report).getroot().find("testsuite")
    assert int(suite.get("tests")) >= 3 and int(suite.get("skipped")) == 0, text[-2000:]
    print(f"kernel-backend tests in the VM ({m.state['accel']}, {m.state['cpus']} vCPU, boot "
          f"{m.state['boot_seconds']} s): {suite.get('tests')} passed in {suite.get('time')} s")


def test_netem_vm_runs_the_command_in_the_guest_that_is_up(tmp_path, monkeypatch, isolated_state):
    """``--backend netem-vm`` with a ``vm up`` guest sharing the paths: the command runs there
    with ``--backend netem``; without one a guest is booted for it (here: refused, no image)."""
    from testbed.spec.errors import SetupError
    calls = []
    m = _machine(tmp_path, os.getpid())
    monkeypatch.setattr(vm.Machine, "load", classmethod(lambda cls, name=vm.MAIN: m))
    monkeypatch.setattr(vm.Machine, "exec", lambda self, argv, **kw: calls.append((argv, kw)) or 7)
    monkeypatch.chdir(tmp_path)
    argv = ["calibrate", "--backend", "netem-vm", "--rate", "10mbit"]
    assert vm.run_cli_in_guest(argv, results_root=tmp_path / "results") == 7
    assert calls[0][0] == [sys.executable, "-m", "testbed", "calibrate", "--backend", "netem",
                           "--rate", "10mbit"] and calls[0][1]["cwd"] == tmp_path
    monkeypatch.setattr(vm.Machine, "load", classmethod(lambda cls, name=vm.MAIN: None))
    monkeypatch.setattr(vm, "boot", lambda *a, **kw: (_ for _ in ()).throw(SetupError("no image")))
    with pytest.raises(SetupError, match="no image"):
        vm.run_cli_in_guest(argv, results_root=tmp_path / "results")
