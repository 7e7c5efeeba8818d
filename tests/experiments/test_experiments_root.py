"""A short real ``reuse`` study through the CLI: real execute, real packets, on the long-haul
topology scaled to a 40 ms RTT and 50 Mbit/s without random loss (so three repetitions suffice
and a lost SYN/ACK's 1 s retransmission timeout cannot decide the outcome)."""
import json
import subprocess
import sys

import pytest

from conftest import REPO, sigint_default

SCALED = ["--set", "topology_params.delay=20ms", "--set", "topology_params.rate_up=50mbit",
          "--set", "topology_params.rate_down=50mbit", "--set", "topology_params.loss_down=0%",
          "--set", "params.requests=3"]


@pytest.mark.root
@pytest.mark.slow
def test_real_reuse_study(tmp_path):
    out = tmp_path / "reuse"
    r = subprocess.run([sys.executable, "-m", "testbed", "experiment", "run", "reuse", "--reps", "3",
                        *SCALED, "--out", str(out), "--no-progress"], cwd=REPO, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "new/reuse: ratio of medians" in r.stdout and "syn_per_request" in r.stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["complete"]
    runs = [x for x in s["runs"] if not x["warmup"]]
    assert all(x["status"] == "complete" for x in runs), [x.get("error") for x in runs]
    # the factor took effect in every run: no run was excluded by the manipulation check
    assert not [e for e in s["excluded"] if "SYNs per request" in e["reason"]]
    ver = {lab: lv["verification"]["syn_per_request"] for lab, lv in s["by_level"].items()}
    assert ver["new"]["min"] >= 1.0 and ver["reuse"]["max"] < 0.5
    # distinct link seeds per repetition, recorded in every run's spec
    seeds = [json.loads((out / x["dir"] / "manifest.json").read_text())["spec"]["seed"] for x in runs]
    assert seeds == [x["seed"] for x in runs] and len(set(seeds)) == 3
    c = next(c for c in s["comparisons"] if c["metric"] == "completion_ms_median")
    if all(lv["n_valid"] >= 2 for lv in s["by_level"].values()):
        assert c["ratio"] > 1, c
    # 3 repetitions per arm: fewer than stats.MIN_N_CI, so no CI is claimed for the ratio
    assert c["ratio_ci"] is None and s["min_n_ci"] > 3, c
    assert (out / "plots" / "representative.png").is_file()
    # keep_pcaps = representative: only the representative runs still hold pcaps
    reps = {lv["representative"] for lv in s["by_level"].values()}
    with_pcaps = {x["dir"] for x in s["runs"] if list((out / x["dir"]).rglob("*.pcap"))}
    assert with_pcaps <= reps


@pytest.mark.root
@pytest.mark.slow
def test_real_interrupt_then_resume_redoes_no_finished_run(tmp_path):
    """Ctrl-C (SIGINT) in the middle of a real experiment, then --resume."""
    import signal
    import time
    out = tmp_path / "reuse"
    argv = [sys.executable, "-m", "testbed", "experiment", "run", "reuse", "--reps", "2", "--warmup", "0",
            *SCALED, "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            runs = out / "runs"
            if runs.is_dir() and len([p for p in runs.iterdir() if not p.name.startswith(".")]) >= 2:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    finished = {p.name for p in (out / "runs").iterdir() if not p.name.startswith(".")}
    assert 2 <= len(finished) < 4, err[-1000:]
    assert "--resume" in err
    mtimes = {n: (out / "runs" / n / "manifest.json").stat().st_mtime_ns for n in finished}
    r = subprocess.run(argv + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert {n: (out / "runs" / n / "manifest.json").stat().st_mtime_ns for n in finished} == mtimes
    s = json.loads((out / "summary.json").read_text())
    assert s["complete"] and len([x for x in s["runs"] if x["status"] != "missing"]) == 4
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]
