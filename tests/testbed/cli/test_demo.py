"""``testbed demo`` ends by printing the path of its reproduction's HTML report (the two commands
it runs are stood in for: no root, no packets)."""
import argparse
import subprocess
from pathlib import Path

from testbed.cli import demo, doctor


def test_demo_ends_with_the_reports_path(tmp_path, capsys, monkeypatch):
    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        if "reproduce" in argv:
            out = Path(argv[argv.index("--out") + 1])
            out.mkdir(parents=True)
            (out / "report.html").write_text("<!DOCTYPE html>")
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(doctor, "diagnose", lambda: {"backend": "userspace", "congestion_control": ["cubic"]})
    p = argparse.ArgumentParser()
    p.add_argument("-v", dest="verbose", action="count", default=0)
    p.add_argument("-q", dest="quiet", action="store_true")
    demo.register(p.add_subparsers())
    args = p.parse_args(["demo", "--results", str(tmp_path)])
    assert args.func(args) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("testbed demo: report ") and last.endswith("report.html")
    assert Path(last.split("report ", 1)[1]).is_file()
    assert [c for c in calls if "reproduce" in c][0][-4:-2] == ["C7", "--quick"]
