"""An experiment's pruning leaves a record (``pruned.json``) in each run directory it deleted
captures of, and ``testbed analyze RUN_DIR`` calls a gone capture pruned only when that record
names it: one deleted by hand, or by a testbed that kept no record, is missing."""
import json

import pytest

from analysis import runcheck
from experiments import load_definition, run_experiment, write_all
from experiments.report import prune_pcaps
from tests.fixtures.fake_execute import FakeExecutor

PCAP = "pcap/client-client-eth0.pcap"


@pytest.fixture
def exp(tmp_path):
    """A finished experiment of 2 x 2 runs (no warm-up), each with a capture, not pruned yet."""
    pcap = tmp_path / "any.pcap"
    pcap.write_bytes(b"not read: pruning only deletes it")
    fx = FakeExecutor("params.mode", {"new": 1200.0, "reuse": 300.0}, pcap=pcap)
    return run_experiment(load_definition("reuse").with_overrides(reps=2).replace(warmup=0), tmp_path / "e",
                          executor=fx, quiet=True)


def _why(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return runcheck.missing_captures(run_dir, manifest, runcheck.captures(run_dir))


def test_pruning_records_what_it_deleted_in_each_run_it_pruned(exp):
    s = write_all(exp, plots=False, prune=True)
    reps = sorted(lv["representative"] for lv in s["by_level"].values())
    pruned = sorted(r["dir"] for r in s["runs"] if r["dir"] not in reps)
    assert len(reps) == 2 and len(pruned) == 2
    for run in pruned:
        record = json.loads((exp / run / runcheck.PRUNED).read_text())
        assert record["files"] == [PCAP] and record["keep_pcaps"] == "representative"
        assert record["representatives"] == reps and record["when"][:2] == "20"
        assert not (exp / run / PCAP).exists()
    for run in reps:                                    # kept: its capture, and no record
        assert (exp / run / PCAP).is_file() and not (exp / run / runcheck.PRUNED).exists()


def test_no_record_where_nothing_is_pruned(exp):
    s = write_all(exp, plots=False)
    assert prune_pcaps(exp, s, "all") == []
    assert not list(exp.glob(f"runs/*/{runcheck.PRUNED}"))


def test_analysis_reads_the_record_not_the_keep_policy(exp):
    """A pruned run is said pruned from its record, also when the experiment's summary has since
    made it a representative (resumed, recomputed): the rule is not worked out again."""
    s = write_all(exp, plots=False, prune=True)
    run = next(exp / r["dir"] for r in s["runs"] if (exp / r["dir"] / runcheck.PRUNED).exists())
    gone, why = _why(run)
    assert gone == [PCAP]
    assert why.startswith('1 of the run\'s 1 captures were pruned by its experiment (keep_pcaps = "representative"')
    assert PCAP in why and runcheck.PRUNED in why
    summary = json.loads((exp / "summary.json").read_text())
    for lv in summary["by_level"].values():
        lv["representative"] = f"runs/{run.name}"
    (exp / "summary.json").write_text(json.dumps(summary))
    assert _why(run) == (gone, why)


def test_a_capture_deleted_by_hand_is_missing_not_pruned(exp):
    """A representative's capture deleted by hand, and a pruned run's whose record is gone (as a
    testbed older than the record left it): missing, the latter saying the experiment may have
    pruned it; a pruned run's capture not in its record is missing beside the pruned ones."""
    s = write_all(exp, plots=False, prune=True)
    rep = exp / s["by_level"]["new"]["representative"]
    (rep / PCAP).unlink()
    gone, why = _why(rep)
    assert gone == [PCAP] and "pruned" not in why.split("(deleted or moved since the run)")[0]
    assert why.startswith(f"1 of the run's 1 captures are missing: {PCAP} (deleted or moved since the run)")
    pruned = next(exp / r["dir"] for r in s["runs"] if (exp / r["dir"] / runcheck.PRUNED).exists())
    (pruned / runcheck.PRUNED).unlink()
    gone, why = _why(pruned)
    assert gone == [PCAP] and why.startswith(f"1 of the run's 1 captures are missing: {PCAP}")
    assert f"no {runcheck.PRUNED} says its experiment pruned them" in why and "may have" in why
    (pruned / runcheck.PRUNED).write_text(json.dumps({"files": ["pcap/server-server-eth0.pcap"]}))
    assert _why(pruned)[1].startswith("1 of the run's 1 captures are missing")


def test_a_damaged_record_is_no_record(exp):
    s = write_all(exp, plots=False, prune=True)
    run = next(exp / r["dir"] for r in s["runs"] if (exp / r["dir"] / runcheck.PRUNED).exists())
    (run / runcheck.PRUNED).write_text('{"files": ["pcap/cl')
    assert runcheck.pruned_record(run) is None
    assert _why(run)[1].startswith("1 of the run's 1 captures are missing")


def test_a_run_pruned_again_keeps_what_its_record_said(exp):
    """A second pruning (a resumed experiment's) adds to a run's record, never drops from it."""
    s = write_all(exp, plots=False, prune=True)
    run = next(exp / r["dir"] for r in s["runs"] if (exp / r["dir"] / runcheck.PRUNED).exists())
    other = run / "pcap" / "server-server-eth0.pcap"
    other.write_bytes(b"x")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["files"].append({"path": "pcap/server-server-eth0.pcap", "kind": "pcap"})
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert prune_pcaps(exp, s, "representative") == [f"{run.relative_to(exp)}/pcap/server-server-eth0.pcap"]
    assert json.loads((run / runcheck.PRUNED).read_text())["files"] == [PCAP, "pcap/server-server-eth0.pcap"]
    gone, why = _why(run)
    assert gone == [PCAP, "pcap/server-server-eth0.pcap"] and "2 of the run's 2 captures were pruned" in why
