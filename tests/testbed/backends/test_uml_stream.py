"""The command's output while a UML guest runs (testbed/backends/uml/stream.py, ``run_in_guest(output=…)``).

Was: ``testbed … --backend netem-uml`` printed nothing until the guest had ended, minutes for a
long run.  The reader and the waiting loop are tested on ordinary files and processes; one test
(root, UML) boots a guest whose command prints, sleeps 2 s, prints again.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from testbed.backends import uml
from testbed.backends.uml import stream


# --- FileTail ------------------------------------------------------------------------------
def test_tail_returns_new_whole_lines_then_the_partial_last_line_at_the_end(tmp_path):
    path = tmp_path / "uml-stdout.txt"
    path.write_bytes(b"one\ntw")
    tail = stream.FileTail(path)
    assert tail.read() == b"one\n"
    assert tail.read() == b""                   # "tw" waits for its line end
    with open(path, "ab") as f:
        f.write("o\nthré".encode()[:-1])        # ends inside a UTF-8 character, no line end
    assert tail.read() == b"two\n"
    with open(path, "ab") as f:
        f.write(b"\xa9 50%\r60%")               # a progress line ends in \r
    assert tail.read() == "thré 50%\r".encode()
    assert tail.read(final=True) == b"60%"
    assert tail.read(final=True) == b""
    assert tail.offset == path.stat().st_size


def test_tail_of_a_file_that_appears_late(tmp_path):
    path = tmp_path / "late.txt"
    tail = stream.FileTail(path)
    assert tail.read() == b""
    path.write_bytes(b"a\nb")
    assert tail.read() == b"a\n"
    assert tail.read(final=True) == b"b"


def test_tail_of_a_file_that_never_appears(tmp_path):
    tail = stream.FileTail(tmp_path / "never.txt")
    assert tail.read() == b"" and tail.read(final=True) == b""
    assert tail.offset == 0


# --- GuestOutput ---------------------------------------------------------------------------
def test_output_is_each_file_exactly_once(tmp_path):
    got = {"stdout": b"", "stderr": b""}
    out = stream.GuestOutput(tmp_path, lambda name, data: got.__setitem__(name, got[name] + data))
    out.pump()
    (tmp_path / "uml-stdout.txt").write_bytes(b"x\ny")
    out.pump()
    assert got == {"stdout": b"x\n", "stderr": b""}
    (tmp_path / "uml-stderr.txt").write_bytes(b"warn\n")
    with open(tmp_path / "uml-stdout.txt", "ab") as f:
        f.write(b"z\nlast")
    out.pump()
    out.finish()
    assert got == {"stdout": b"x\nyz\nlast", "stderr": b"warn\n"}


def test_a_failing_sink_stops_the_output_and_keeps_its_error(tmp_path):
    calls = []

    def sink(name, data):
        calls.append(name)
        raise BrokenPipeError(32, "Broken pipe")
    (tmp_path / "uml-stdout.txt").write_bytes(b"a\n")
    out = stream.GuestOutput(tmp_path, sink)
    out.pump()
    out.pump()
    out.finish()
    assert calls == ["stdout"] and isinstance(out.error, BrokenPipeError)


def test_an_interrupt_in_the_sink_loses_nothing(tmp_path):
    """A Ctrl-C while writing: what was read is written at the next call, once."""
    got, calls = [], []

    def sink(name, data):
        calls.append(data)
        if len(calls) == 1:
            raise KeyboardInterrupt
        got.append(data)
    (tmp_path / "uml-stdout.txt").write_bytes(b"a\n")
    out = stream.GuestOutput(tmp_path, sink)
    with pytest.raises(KeyboardInterrupt):
        out.pump()
    out.finish()
    assert got == [b"a\n"] and out.error is None


def test_console_prints_and_flushes(capsys):
    stream.console("stdout", "é\n".encode())
    stream.console("stderr", b"\xffx")
    assert capsys.readouterr() == ("é\n", "\ufffdx")


# --- the waiting loop ----------------------------------------------------------------------
def test_wait_ticks_while_the_guest_runs_and_keeps_its_timeout(tmp_path):
    ticks = []
    proc = subprocess.Popen(["sleep", "0.7"])
    assert uml._wait(proc, 30, tmp_path / uml.CANCEL_FILE, lambda: ticks.append(time.monotonic()))
    assert len(ticks) >= 2, ticks
    proc = subprocess.Popen(["sleep", "30"])
    try:
        t0 = time.monotonic()
        assert not uml._wait(proc, 0.5, tmp_path / uml.CANCEL_FILE, lambda: None)
        assert 0.5 <= time.monotonic() - t0 < 3
    finally:
        proc.kill()
        proc.wait()




def test_cli_in_guest_prints_through_the_stream(tmp_path, monkeypatch, capsys):
    """``testbed … --backend netem-uml`` (no guest booted here): its output goes through
    ``stream.console``; the command's Python runs with -u; nothing is printed twice."""
    seen = {}

    def fake(argv, *, results_dir, output, **kw):
        seen["argv"] = argv
        output("stdout", b"line\n")
        output("stderr", b"warn\n")
        return uml.GuestResult(3, "line\n", "warn\n", 1.0)
    monkeypatch.setattr(uml, "run_in_guest", fake)
    assert uml.run_cli_in_guest(["calibrate", "--backend", "netem-uml"],
                                results_root=tmp_path / "r") == 3
    assert seen["argv"][:4] == [sys.executable, "-u", "-m", "testbed"]
    assert capsys.readouterr() == ("line\n", "warn\n")


# --- in a guest ----------------------------------------------------------------------------
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_first_line_reaches_the_caller_before_the_guest_ends(tmp_path):
    if not uml.availability()[0]:
        pytest.skip(uml.availability()[1])
    got = []
    script = ("import sys, time\n"
              "print('first', flush=True)\n"
              "print('to stderr', file=sys.stderr, flush=True)\n"
              "time.sleep(2)\n"
              "sys.stdout.write('second\\nno line end')\n")
    res = uml.run_in_guest([sys.executable, "-c", script], results_dir=tmp_path, timeout=120,
                           output=lambda name, data: got.append((time.monotonic(), name, data)))
    ended = time.monotonic()
    assert res.returncode == 0
    out = b"".join(d for _, n, d in got if n == "stdout")
    err = b"".join(d for _, n, d in got if n == "stderr")
    assert out == (tmp_path / "uml-stdout.txt").read_bytes() == b"first\nsecond\nno line end"
    assert err == (tmp_path / "uml-stderr.txt").read_bytes() == b"to stderr\n"
    first = next(t for t, n, d in got if d.startswith(b"first"))
    second = next(t for t, n, d in got if b"second" in d)
    assert second - first > 1.5, got          # the first line came while the command slept
    assert ended - first > 1.5, got
