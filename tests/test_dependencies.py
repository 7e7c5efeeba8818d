"""One dependency list: a fresh virtualenv with the project (``--no-deps``) and setup.cfg's
``install_requires`` alone — no test extra — imports every workload's in-host program
(``testbed/apps``), every subcommand, and every third-party module the packages import anywhere
(also the ones imported inside a function, as the QUIC arm imports aioquic); each subcommand's
``--help`` runs.  The venv uses the system site-packages only for Mininet (a system package,
docs/install.md).  Skipped, with pip's own words, when pip cannot reach a package index."""
import configparser
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO
from test_hygiene import PACKAGES, imports, modules

pytestmark = pytest.mark.slow

IGNORE = shutil.ignore_patterns(".git", ".venv", "results", "build", "*.egg-info", "__pycache__",
                                "*.so", "*.so.tmp", ".pytest_cache")
CHECK = r"""
import importlib, pkgutil, sys
import testbed.apps, testbed.cli
assert "/site-packages/" in testbed.__file__, testbed.__file__     # the installed copy
apps = [m.name for m in pkgutil.iter_modules(testbed.apps.__path__, "testbed.apps.")]
cli = [m.name for m in pkgutil.iter_modules(testbed.cli.__path__, "testbed.cli.")]
for name in apps + cli + sys.argv[1:]:
    importlib.import_module(name)
from testbed.cli import build_parser
commands = sorted(build_parser()._subparsers._group_actions[0].choices)
print(len(apps), len(cli), " ".join(commands))
"""


def _applies(line: str) -> bool:
    """Whether a requirement's environment marker holds here (setup.cfg uses python_version)."""
    if ";" not in line:
        return True
    marker = line.split(";", 1)[1].strip()
    m = re.fullmatch(r'python_version\s*(<|>=)\s*"(\d+)\.(\d+)"', marker)
    assert m, f"marker {marker!r}: this test reads only python_version < or >="
    below = sys.version_info[:2] < (int(m[2]), int(m[3]))
    return below if m[1] == "<" else not below


def _pip(venv, *args, timeout=900):
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_install_requires_alone_runs_every_app_and_subcommand(tmp_path):
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    runtime = [line.strip() for line in cfg["options"]["install_requires"].splitlines()
               if line.strip() and not line.strip().startswith("#")]
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   capture_output=True)
    probe = _pip(venv, "download", "--no-deps", "-d", str(tmp_path / "probe"), "tqdm", timeout=120)
    if probe.returncode:
        pytest.skip("pip cannot reach a package index: "
                    + (probe.stderr.strip().splitlines() or ["(no message)"])[-1])
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=IGNORE)
    for args in (["install", "-q", "--no-deps", str(src)], ["install", "-q", *runtime]):
        r = _pip(venv, *args)
        assert r.returncode == 0, r.stderr[-2000:]
    installed = _pip(venv, "list", "--format=freeze").stdout.lower()
    for tool in ("pytest", "scapy", "ruff"):           # the test extra stayed out
        assert f"\n{tool}==" not in f"\n{installed}", tool
    not_here = {re.split(r"[<>=;\s]", line)[0] for line in runtime if not _applies(line)}
    not_here |= {re.split(r"[<>=;\s]", line.strip())[0] for key, text in cfg["options.extras_require"].items()
                 if key != "test" for line in text.splitlines()
                 if line.strip() and not line.strip().startswith("#")}    # optional extras: lazily imported
    third_party = sorted({n for m, p in modules().items() for n in imports(m, p)
                          if n.split(".")[0] not in (*sys.stdlib_module_names, *PACKAGES,
                                                      "__future__", *not_here)})
    assert "aioquic.asyncio.client" in third_party
    out = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK, *third_party],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    n_apps, n_cli, *commands = out.stdout.split()
    assert int(n_apps) >= 10 and int(n_cli) >= 10 and "run" in commands and "analyze" in commands
    for cmd in commands:
        r = subprocess.run([str(venv / "bin" / "testbed"), cmd, "--help"], capture_output=True,
                           text=True, cwd=tmp_path, timeout=120)
        assert r.returncode == 0 and "usage:" in r.stdout, (cmd, r.stderr[-1000:])
