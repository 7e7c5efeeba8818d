"""Progress on the command line (testbed/cli/progress.py): `testbed run` shows what a transfer
has done while it runs — through a pty, as a user sees it — and nothing under -q or into a pipe;
a warning logged while a bar is drawn is written above the bar, not through it."""
import fcntl
import json
import logging
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from testbed.cli.progress import RunProgress, interactive, warnings_above_bars

RUN = [sys.executable, "-m", "testbed"]


def in_pty(argv, timeout=120.0) -> str:
    """Run ``argv`` with stdin, stdout and stderr on a 120-column pty; everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:          # the child closed the pty
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    return out.decode(errors="replace")


def test_run_shows_a_progress_line_for_a_long_transfer(tmp_path):
    """`testbed run … --duration 3s` was silent until done: now the bytes done so far."""
    out = in_pty([*RUN, "run", "bulk", "--topo", "loopback", "--duration", "3s",
                  "--results", str(tmp_path)])
    lines = [x.strip() for x in out.replace("\r", "\n").splitlines() if x.strip().startswith("run: ")]
    assert any("MB" in x or "GB" in x for x in lines), out
    assert len(lines) >= 4 and "results in" in out
    assert any(x.endswith(" s") and x != lines[0] for x in lines)


def test_no_progress_under_quiet_or_into_a_pipe(tmp_path):
    out = in_pty([*RUN, "-q", "run", "bulk", "--topo", "loopback", "--size", "50MB",
                  "--results", str(tmp_path / "q")])
    assert "run: " not in out and "results in" in out
    piped = subprocess.run([*RUN, "run", "bulk", "--topo", "loopback", "--size", "50MB",
                            "--results", str(tmp_path / "p")], capture_output=True, text=True,
                           timeout=120)
    assert piped.returncode == 0 and "run: " not in piped.stderr + piped.stdout
    assert not interactive(quiet=True)


def test_the_line_follows_the_client_log_as_it_grows(tmp_path):
    log = tmp_path / "client.jsonl"
    p = RunProgress(tmp_path, enabled=False)
    p.poll()                                           # no log yet
    assert p.line().startswith("run: starting")
    log.write_text(json.dumps({"event": "bulk_start", "direction": "down", "size": 30_000_000}) + "\n"
                   + '{"event": "tcp_info", "bytes_received": 12000')       # half a line
    p.poll()
    assert p.line().startswith("run: 0 B of 30.0 MB down (0%)")
    with log.open("a") as f:
        f.write(', "bytes_acked": 1}\n')
        f.write(json.dumps({"event": "last_response_byte"}) + "\n")
        f.write(json.dumps({"event": "round_end"}) + "\n" + json.dumps({"event": "round_end"}) + "\n")
    p.poll()
    assert p.line().startswith("run: 12.0 KB of 30.0 MB down (0%), 1 requests done, 2 rounds done, ")


def test_a_warning_during_a_bar_goes_above_it(capsys):
    """Warnings split the experiment's bar into dozens of lines: through tqdm.write they are
    printed on a line of their own and the bar is drawn again."""
    from tqdm import tqdm

    from testbed.cli import setup_logging
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        setup_logging()
        with warnings_above_bars():
            bar = tqdm(total=3, desc="exp", file=sys.stderr, ncols=60, mininterval=0)
            bar.update(1)
            logging.getLogger("testbed.test").warning("the machine was busy")
            bar.update(1)
            bar.close()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "\rtestbed: warning: the machine was busy\n" in err, repr(err)
    assert err.split("the machine was busy\n", 1)[1].lstrip("\r").startswith("exp:")


@pytest.mark.parametrize("argv", [["topo", "list"]])
def test_every_command_runs_with_warnings_above_bars(argv, capsys, monkeypatch):
    from tqdm.contrib import logging as tqdm_logging

    from testbed.cli import main
    used = []
    real = tqdm_logging.logging_redirect_tqdm

    def spy(*a, **k):
        used.append(True)
        return real(*a, **k)
    monkeypatch.setattr(tqdm_logging, "logging_redirect_tqdm", spy)
    assert main(argv) == 0 and used
