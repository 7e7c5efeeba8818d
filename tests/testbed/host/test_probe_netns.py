"""The kernel backend's probe namespace: removed when the probe is interrupted, found by `testbed
clean` when its process is gone (and only then); how an interrupted run names the signal."""
import os
import signal
import subprocess

import pytest

from testbed.backends import kernel
from testbed.host import lifecycle
from testbed.host.lifecycle import RunInterrupted, interruption, proc_start_time


def _gone_pid() -> tuple[int, int]:
    """The PID and start time of a process that has exited."""
    proc = subprocess.Popen(["sleep", "30"])
    start = proc_start_time(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, start


@pytest.fixture
def sigterm_noted():
    """SIGTERM only noted (a list of the signals), so that a test without a handler of its own
    to raise fails instead of ending pytest; the handler before is put back."""
    seen: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda n, f: seen.append(n))
    yield seen
    signal.signal(signal.SIGTERM, old)


def test_interruption_names_the_signal():
    assert interruption(KeyboardInterrupt()) == "interrupted (SIGINT)"
    assert interruption(RunInterrupted(143)) == "interrupted (SIGTERM)"
    assert interruption(RunInterrupted(129)) == "interrupted (SIGHUP)"
    assert interruption(RunInterrupted(130)) == "interrupted (SIGINT)"     # Ctrl-C during teardown
    assert interruption(SystemExit(1)) is None and interruption(RuntimeError("x")) is None


def test_signals_raise_makes_sigterm_an_exception_and_puts_the_handler_back(sigterm_noted):
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted) as info:
        with lifecycle.signals_raise():
            signal.raise_signal(signal.SIGTERM)
    assert info.value.code == 143 and not sigterm_noted
    assert signal.getsignal(signal.SIGTERM) is handler


def test_the_probe_namespace_names_its_process_and_start_time():
    name = lifecycle.probe_netns_name()
    assert name.startswith(f"tbprobe-{os.getpid()}-{proc_start_time(os.getpid())}-")


@pytest.mark.parametrize("interrupt", ["sigterm", "ctrl-c"])
def test_a_probe_interrupted_right_after_making_its_namespace_deletes_it(monkeypatch, tmp_path, sigterm_noted,
                                                                        interrupt):
    """SIGTERM (or Ctrl-C) while ``ip netns add`` runs: the namespace it made is deleted."""
    monkeypatch.setattr(lifecycle, "NETNS_DIR", tmp_path)
    calls = []

    def ip(argv, **kw):
        calls.append(argv[1:3])
        if argv[1:3] == ["netns", "add"]:
            (tmp_path / argv[3]).touch()
            if interrupt == "ctrl-c":
                raise KeyboardInterrupt
            signal.raise_signal(signal.SIGTERM)
        if argv[1:3] == ["netns", "del"]:
            (tmp_path / argv[3]).unlink()
        return subprocess.CompletedProcess(argv, 0, "", "")
    monkeypatch.setattr(subprocess, "run", ip)
    kernel.probe_qdiscs.cache_clear()
    with pytest.raises(KeyboardInterrupt if interrupt == "ctrl-c" else RunInterrupted):
        kernel.probe_qdiscs()
    assert calls[0] == ["netns", "add"] and calls[-1] == ["netns", "del"]
    assert not list(tmp_path.iterdir()) and not sigterm_noted


def test_clean_deletes_the_probe_namespaces_whose_process_is_gone(monkeypatch, tmp_path):
    """Gone, or its PID reused (another start time): deleted; a live process's left alone, also
    with --force; an older testbed's (no process in the name) only with --force."""
    monkeypatch.setattr(lifecycle, "NETNS_DIR", tmp_path)
    deleted = []
    monkeypatch.setattr(lifecycle, "delete_netns", lambda name: deleted.append(name))
    me, start = os.getpid(), proc_start_time(os.getpid())
    gone = "tbprobe-%d-%d-aaaaaa" % _gone_pid()
    reused, live, old = f"tbprobe-{me}-{start - 1}-bbbbbb", f"tbprobe-{me}-{start}-cccccc", "tbprobe-dddddd"
    for name in (gone, reused, live, old, "tb-other"):
        (tmp_path / name).touch()
    lines = lifecycle.clean_probe_namespaces()
    assert sorted(deleted) == sorted([gone, reused])
    assert f"{gone}: probe namespace removed" in lines
    assert f"{live}: probe namespace of a running process (pid {me}); left alone" in lines
    assert f"{old}: probe namespace naming no process (an older testbed's); left alone (--force removes it)" in lines
    deleted.clear()
    lifecycle.clean_probe_namespaces(force=True)
    assert sorted(deleted) == sorted([gone, reused, old])


@pytest.mark.root
@pytest.mark.usefixtures("isolated_state")          # no other run's leftovers are cleaned here
def test_clean_deletes_a_real_probe_namespace_of_a_gone_process_and_not_a_live_ones():
    """What a SIGKILL during the probe leaves: ``ip netns`` lists it until ``clean`` deletes it;
    the probe of a live process (this one) stays."""
    gone = "tbprobe-%d-%d-test00" % _gone_pid()
    live = lifecycle.probe_netns_name()
    for name in (gone, live):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        lines = lifecycle.clean()
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"{gone}: probe namespace removed" in lines and gone not in listed
        assert live in listed
    finally:
        for name in (gone, live):
            assert lifecycle.delete_netns(name) is None


def test_a_run_whose_teardown_fails_still_puts_its_signal_handlers_back(tmp_path, monkeypatch):
    """Run.close restores SIGTERM/SIGHUP's handlers also when removing its record raises: else
    a later SIGTERM would raise RunInterrupted in code that expects none."""
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path)
    before = signal.getsignal(signal.SIGTERM)

    def broken(*a, **kw):
        raise OSError("teardown failed")
    monkeypatch.setattr(lifecycle, "remove_state", broken)
    run = lifecycle.Run(None).__enter__()
    assert signal.getsignal(signal.SIGTERM) == lifecycle.Run._on_signal
    with pytest.raises(OSError, match="teardown failed"):
        run.close()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_closed_run_puts_its_signal_handlers_back(tmp_path, monkeypatch):
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    lifecycle.Run(None).__enter__().close()
    assert signal.getsignal(signal.SIGTERM) == before
