"""``testbed run --json`` carries the fidelity verdict and the check read-backs (loopback: no
emulator, verdict unknown; the per-link read-back is tested on frame logs in
tests/experiments/test_sweeps.py)."""
import json
import subprocess
import sys

import pytest

from conftest import REPO  # noqa: E402


@pytest.mark.root
def test_run_json_has_verdict_and_readbacks(tmp_path):
    r = subprocess.run([sys.executable, "-m", "testbed", "run", "reqresp", "--topo", "loopback",
                        "--requests", "2", "--json", "--results", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["status"] == "complete" and d["fidelity"]["verdict"] == "unknown"
    assert d["fidelity"]["reasons"] and d["checks"]["cc"] == ["cubic"] and d["links"] == {}


@pytest.mark.root
def test_run_json_of_a_failed_run_still_prints_its_record(tmp_path):
    r = subprocess.run([sys.executable, "-m", "testbed", "run", "reqresp", "--topo", "loopback",
                        "--requests", "50", "--timeout", "0.05", "--json", "--results", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=180)
    assert r.returncode != 0 and "did not finish within 0.05 s" in r.stderr
    d = json.loads(r.stdout)
    assert d["status"] == "failed" and "did not finish" in d["error"] and "verdict" in d["fidelity"]
