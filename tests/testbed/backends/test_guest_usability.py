"""What a user of ``--backend netem-uml``/``netem-vm`` and ``testbed vm`` sees and what their runs
record: the host's git revision in a VM run, refusals before a guest boots, why KVM was not used,
why a second guest boots, where ``vm exec`` runs, an interrupted command in a UML guest tearing
down, the advice for links above the UML cap, doctor's note, calibrate's lines.  Without root
and without booting anything, except the last test (root, slow: one UML guest).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from testbed.backends import uml, vm
from testbed.backends.uml import guest_init, stream
from testbed.host import git as checkout
from testbed.host.lifecycle import RunInterrupted, proc_start_time


def _machine(tmp_path: Path, shares: list[Path]) -> vm.Machine:
    """A Machine whose 'qemu' is this process, sharing ``shares``."""
    d = tmp_path / "vm" / "x"
    d.mkdir(parents=True)
    m = vm.Machine(d, {"pid": os.getpid(), "start_time": proc_start_time(os.getpid()),
                       "accel": "tcg", "cpus": 1, "mem": "1G", "console": str(tmp_path / "c.log"),
                       "shares": [str(p) for p in shares], "image": "k", "kernel": "6.1",
                       "boot_seconds": 1.0, "owner_pid": None, "owner_start_time": None})
    m.save()
    return m


def _fake_agent(m: vm.Machine, seen: dict) -> threading.Thread:
    """Answers the first job with exit status 0, keeping the job in ``seen``."""
    jobs = m.dir / "jobs"

    def agent():
        deadline = time.monotonic() + 30            # a job that never comes: the test fails, not hangs
        while not (files := list(jobs.glob("*.json")) if jobs.is_dir() else []):
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        seen.update(json.loads(files[0].read_text()))
        Path(str(files[0])[:-5] + ".rc.json").write_text(json.dumps({"returncode": 0}))
    t = threading.Thread(target=agent)
    t.start()
    return t


# --- 1. the host's git revision in a VM run ---------------------------------------------------
def test_a_vm_command_gets_the_hosts_revision_and_provenance_records_it(tmp_path, monkeypatch):
    """Was ``"git": {"revision": null, "dirty": null}``: the image has no git."""
    from testbed.run import provenance
    m = _machine(tmp_path, [tmp_path, REPO])
    seen: dict = {}
    t = _fake_agent(m, seen)
    assert m.exec(["true"], cwd=tmp_path) == 0
    t.join()
    passed = seen["env"][checkout.HOST_GIT_ENV]
    assert json.loads(passed) == checkout.local_git(REPO) and json.loads(passed)["revision"]
    monkeypatch.setattr(checkout, "_git", lambda repo, *args: None)       # the guest: no git
    monkeypatch.setenv(checkout.HOST_GIT_ENV, passed)
    got = provenance.git_revision()
    assert got["revision"] == json.loads(passed)["revision"] and got["source"] == checkout.FROM_HOST
    monkeypatch.delenv(checkout.HOST_GIT_ENV)
    assert provenance.git_revision() == {"revision": None, "dirty": None}


def test_git_error_text_is_not_a_revision(monkeypatch):
    monkeypatch.setattr(checkout, "_git", lambda repo, *a: "fatal: detected dubious ownership")
    assert checkout.local_git(REPO) == {"revision": None, "dirty": None}


# --- 2. topo up --cli in a guest --------------------------------------------------------------
@pytest.mark.parametrize("backend", ["netem-uml", "netem-vm"])
def test_topo_up_cli_in_a_guest_is_refused_before_it_boots(backend, monkeypatch, capsys):
    """Was: the guest ran Mininet's CLI on /dev/null, it read nothing, and 'success'."""
    from testbed.cli import main
    for mod in (uml, vm):
        monkeypatch.setattr(mod, "run_cli_in_guest", lambda *a, **kw: pytest.fail("booted"))
    assert main(["topo", "up", "longhaul", "--cli", "--backend", backend]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cli" in err[0] and "--exec" in err[0] and "--hold" in err[0], err


# --- 11. an interrupted command in a UML guest ------------------------------------------------
def test_the_guest_init_passes_the_hosts_signal_on_once(tmp_path):
    cancel = tmp_path / "cancel"
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, lambda n, f: sys.exit(42))\n"
              "print('ready', flush=True)\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    threading.Timer(0.3, lambda: cancel.write_text(str(int(signal.SIGINT)))).start()
    t0 = time.monotonic()
    assert guest_init.wait_forwarding(proc, str(cancel), poll=0.05) == 42
    assert time.monotonic() - t0 < 5
    proc.stdout.close()


class _Proc:
    """linux.uml stand-in: the first wait is interrupted, the guest then exits."""
    args = "linux.uml"

    def __init__(self, exc):
        self.exc, self.waits = exc, []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        if len(self.waits) == 1:
            raise self.exc
        return 0


@pytest.mark.parametrize("exc, signum", [(KeyboardInterrupt(), signal.SIGINT),
                                         (RunInterrupted(128 + signal.SIGTERM), signal.SIGTERM)])
def test_an_interrupt_is_passed_to_the_command_in_the_guest_then_raised(tmp_path, exc, signum):
    """Was: the guest was ended at once, the run had no manifest.json.  Once the guest ended,
    the interrupt goes on to every caller (a boot check must not cache a false result)."""
    proc = _Proc(exc)
    with pytest.raises(type(exc)):
        uml._wait(proc, 300, tmp_path / uml.CANCEL_FILE)
    assert (tmp_path / uml.CANCEL_FILE).read_text() == str(int(signum))
    assert proc.waits == [300, uml.INTERRUPT_GRACE]


def test_an_interrupt_the_guest_does_not_answer_is_raised(tmp_path):
    class Hung(_Proc):
        def wait(self, timeout=None):
            self.waits.append(timeout)
            if len(self.waits) == 1:
                raise self.exc
            raise subprocess.TimeoutExpired("linux.uml", timeout)
    proc = Hung(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        uml._wait(proc, 300, tmp_path / uml.CANCEL_FILE)
    assert proc.waits == [300, uml.INTERRUPT_GRACE]


# --- 3. why KVM was not used -----------------------------------------------------------------
def test_vm_up_says_why_kvm_was_not_used_when_that_was_cached(tmp_path, monkeypatch, capsys):
    """Was 'VM up: tcg, …' alone: the cached KVM failure was not printed."""
    from testbed.backends.vm import image as vm_image
    from testbed.cli import main
    monkeypatch.setattr(vm_image, "CACHE_DIR", tmp_path)
    monkeypatch.setenv("TESTBED_VM_ACCEL", "auto")
    monkeypatch.setattr(vm, "kvm_usable", lambda: (True, "/dev/kvm"))
    vm._store_accel({"kvm": {"booted": False, "reason": "kvm_buf_set_msrs: Assertion", "checked": 0}})
    why = vm.kvm_not_used([])
    assert "kvm_buf_set_msrs" in why and "accel.json" in why
    assert vm.kvm_not_used([{"accel": "kvm", "reason": "hung"}]) == "a KVM guest did not boot: hung"
    m = _machine(tmp_path, [tmp_path])
    m.state.update(kvm_not_used=why, tried=[])
    monkeypatch.setattr(vm, "up", lambda **kw: m)
    assert main(["vm", "up"]) == 0
    assert f"KVM not used: {why}" in capsys.readouterr().out


# --- 4. a second guest -----------------------------------------------------------------------
def test_a_second_guest_booting_beside_the_one_up_is_said(tmp_path, monkeypatch, capsys):
    """Was silent: the load rose to 4.5 and every rate line failed."""
    from testbed.spec.errors import SetupError
    m = _machine(tmp_path, [tmp_path / "shared"])
    monkeypatch.setattr(vm.Machine, "load", classmethod(lambda cls, name=vm.MAIN: m))
    monkeypatch.setattr(vm, "boot", lambda *a, **kw: (_ for _ in ()).throw(SetupError("no image")))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SetupError):
        vm.run_cli_in_guest(["calibrate", "--backend", "netem-vm"], results_root=tmp_path / "r")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"does not share {tmp_path}" in err[0] and "second guest" in err[0]


# --- 5. where vm exec runs -------------------------------------------------------------------
def test_vm_exec_from_an_unshared_directory_says_where_it_runs(tmp_path, capfdbinary):
    """Was: `vm exec -- pwd` from /tmp printed /work/main, nothing said."""
    m = _machine(tmp_path / "m", [REPO])
    seen: dict = {}
    t = _fake_agent(m, seen)
    assert m.exec(["pwd"], cwd=tmp_path) == 0
    t.join()
    err = capfdbinary.readouterr().err.decode()
    assert seen["cwd"] == str(vm.REPO)
    assert err.count("\n") == 1 and f"{tmp_path} is not shared" in err and f"runs in {vm.REPO}" in err


# --- 6. the advice above the UML cap ---------------------------------------------------------
def test_the_uml_rate_cap_advice_names_the_vm_where_kvm_boots_not_under_tcg(monkeypatch):
    from testbed.calibrate import link
    from testbed.spec.errors import UsageError
    monkeypatch.setenv("TESTBED_IN_UML", "1")
    monkeypatch.setattr(link, "measure", lambda *a: pytest.fail("measured"))
    with pytest.raises(UsageError) as got:
        link.calibrate(rate="20mbit", delay="50ms")
    assert "netem-vm where KVM boots" in str(got.value) and "TCG" in str(got.value)


# --- 9. doctor's note ------------------------------------------------------------------------
def test_doctor_names_both_guest_backends_and_the_image(monkeypatch):
    from testbed.backends import kernel
    from testbed.cli import doctor
    monkeypatch.setattr(doctor.os, "geteuid", lambda: 0)
    monkeypatch.setattr(kernel, "probe_qdiscs", lambda: {"netns": True, "veth": True, "netem": False,
                                                         "htb": False, "errors": {}})
    monkeypatch.setattr(uml, "doctor_report", lambda refresh=False: {
        "available": True, "reason": "system UML 6.1 (ptrace)", "lines": []})
    monkeypatch.setattr(vm, "doctor_report", lambda: {
        "available": False, "reason": "qemu-system-x86_64 is not installed", "lines": []})
    note = doctor.diagnose()["backend_note"]
    assert "--backend netem-uml (a UML guest; available here)" in note
    assert "--backend netem-vm (the Debian VM, docs/vm.md; not here: qemu-system-x86_64" in note
    assert "Vagrant" not in note


def test_doctor_help_names_the_vm_it_checks(capsys):
    """`testbed doctor --help` named the UML guest only, though doctor reports the VM too."""
    from testbed.cli import main
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    assert "the Debian VM" in " ".join(capsys.readouterr().out.split())


def test_vm_doctor_report_shows_the_image_and_the_accelerator(monkeypatch, tmp_path):
    from testbed.backends.vm import image as vm_image
    monkeypatch.delenv("TESTBED_VM_GUEST", raising=False)
    monkeypatch.delenv("TESTBED_UML_GUEST", raising=False)
    monkeypatch.setattr(vm, "qemu_available", lambda: (True, "/usr/bin/qemu-system-x86_64"))
    monkeypatch.setattr(vm, "accel_candidates", lambda: ["tcg"])
    monkeypatch.setattr(vm, "kvm_not_used", lambda failures: "no /dev/kvm")
    (tmp_path / "root.img").write_bytes(b"x")
    img = vm_image.Image(tmp_path, {"suite": "bookworm", "kernel_release": "6.1.0"})
    monkeypatch.setattr(vm_image, "cached", lambda: img)
    r = vm.doctor_report()
    assert r["available"] and r["image"] == str(tmp_path) and r["accel"] == "tcg"
    assert r["lines"][0].startswith(f"image: {tmp_path} (Debian bookworm, kernel 6.1.0, ")
    assert r["lines"][1] == "boots with TCG (emulated CPU, slower); KVM not used: no /dev/kvm"
    monkeypatch.setattr(vm_image, "cached", lambda: None)
    assert vm.doctor_report()["lines"][0].startswith("image: not built (`testbed vm build`")


# --- 10. calibrate's lines in a guest --------------------------------------------------------
def test_calibrate_says_it_ran_in_a_guest(monkeypatch):
    from testbed.calibrate import guest
    monkeypatch.delenv("TESTBED_VM_GUEST", raising=False)
    monkeypatch.delenv("TESTBED_UML_GUEST", raising=False)
    assert guest() is None
    monkeypatch.setenv("TESTBED_VM_GUEST", json.dumps({"accel": "tcg", "cpus": 1, "kernel": "6.1.0"}))
    assert guest() == "the VM (tcg, 1 vCPU, kernel 6.1.0)"
    monkeypatch.setenv("TESTBED_UML_GUEST", json.dumps({"release": "6.1.176", "mode": "ptrace"}))
    assert guest() == "a UML guest (UML 6.1.176, ptrace)"


def test_the_overflow_line_on_netem_prints_no_none():
    """Was 'drops: queue None, random loss None, the emulator's own None'."""
    from testbed.cli.calibrate import overflow_line
    o = {"drops": {"queue": None, "random_loss": None, "emulator_unintended": None,
                   "receive_path": 0, "qdisc": {"htb": 1213, "netem": 1213}, "unsent": 0},
         "loss": 0.4441, "offered_mbps": 18.0, "delivered_mbps": 10.0, "offered_target_mbps": 18.0,
         "rate_mbps": 10.0, "window": 9000, "fidelity": {}, "run_dir": "r"}
    line = overflow_line(o)
    assert "None" not in line
    assert ("drops: unknown by reason (netem gives no per-reason counts; tc -s counted htb 1213, "
            "netem 1213 in all), receive path 0;") in line


# --- 11, for real: Ctrl-C on a run in a UML guest --------------------------------------------
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_ctrl_c_on_a_uml_run_leaves_a_complete_record(tmp_path):
    """SIGINT to ``testbed run … --backend netem-uml`` while the command runs in the guest: the
    command there tears down and writes manifest.json (status failed, "interrupted (SIGINT)"),
    and what it printed is shown."""
    if not uml.availability()[0]:
        pytest.skip(uml.availability()[1])
    proc = subprocess.Popen([sys.executable, "-m", "testbed", "run", "reqresp", "--topo", "relay",
                             "--path", "relay", "--requests", "2000", "--backend", "netem-uml",
                             "--results", str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    while not list(tmp_path.glob("tb-*/metadata.json")):       # the run is up in the guest
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=uml.INTERRUPT_GRACE + 30)
    assert proc.returncode == 130, err
    manifest = json.loads(next(tmp_path.glob("tb-*/manifest.json")).read_text())
    assert manifest["status"] == "failed" and manifest["error"] == "interrupted (SIGINT)"
    assert "interrupted" in err and not (tmp_path / uml.CANCEL_FILE).exists()


# --- 8. docs/uml.md's Python block runs as written --------------------------------------------
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_the_python_block_of_uml_md_runs_as_written(tmp_path, monkeypatch, capsys):
    """Was: NameError (no Path import), ValueError (out/ missing), exit 1 (doctor's MPTCP)."""
    if not uml.availability()[0]:
        pytest.skip(uml.availability()[1])
    text = (REPO / "docs" / "uml.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/uml.md", "exec"), {})
    words = capsys.readouterr().out.split()
    assert words[0] == "0" and words[-1] in ("ptrace", "seccomp"), words


@pytest.mark.parametrize("exc, signum", [(KeyboardInterrupt(), signal.SIGINT),
                                         (RunInterrupted(128 + signal.SIGTERM), signal.SIGTERM)])
def test_an_interrupt_while_ticking_is_still_passed_to_the_guest(tmp_path, exc, signum):
    proc, ticks = _Proc(exc), []
    with pytest.raises(type(exc)):
        uml._wait(proc, 300, tmp_path / uml.CANCEL_FILE, lambda: ticks.append(1))
    assert (tmp_path / uml.CANCEL_FILE).read_text() == str(int(signum))
    assert proc.waits == [stream.INTERVAL, stream.INTERVAL]   # then the guest exited in its grace
