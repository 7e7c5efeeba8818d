"""A run whose manifest or run record is damaged is excluded with a reason naming the file, and
the rest of the experiment is summarised and reported (``testbed experiment report`` exits 0)."""
import pytest

from experiments import load_definition, run_experiment, write_all
from experiments.report import markdown, prune_pcaps, text
from experiments.runner import RUN_INFO
from testbed.cli import main
from tests.fixtures.fake_execute import FakeExecutor


@pytest.fixture
def exp(tmp_path):
    """A finished experiment of 2 x 2 runs (no warm-up)."""
    return run_experiment(load_definition("reuse").with_overrides(reps=2).replace(warmup=0), tmp_path / "e",
                          executor=FakeExecutor("params.mode", {"new": 1200.0, "reuse": 300.0}), quiet=True)


def _cut(path, keep: int) -> None:
    path.write_text(path.read_text()[:keep])


def _excluded_as_damaged(s: dict, run: str, says: str) -> None:
    """``run`` alone is excluded, its reason naming the damaged file; the other three are summarised."""
    (rec,) = [r for r in s["runs"] if r["dir"] == run]
    assert not rec["valid"] and rec["reason"].startswith(f"damaged: {run}/{says}"), rec["reason"]
    assert s["excluded"] == [{"dir": run, "level": "new", "reason": rec["reason"]}]
    assert s["by_level"]["new"]["n_valid"] == 1 and s["by_level"]["reuse"]["n_valid"] == 2
    assert s["by_level"]["new"]["representative"] != run
    assert f"excluded {run}: {rec['reason']}" in text(s)


@pytest.mark.parametrize("name,says", [("manifest.json", "manifest.json: not valid JSON"),
                                       (RUN_INFO, f"{RUN_INFO}: not valid JSON")])
def test_a_run_whose_manifest_or_record_is_cut_short_is_excluded(exp, name, says):
    _cut(exp / "runs/000-new" / name, 100)
    s = write_all(exp, plots=False)
    _excluded_as_damaged(s, "runs/000-new", says)
    assert s["runs"][0]["status"] == "damaged" and s["by_level"]["new"]["n_runs"] == 2
    assert s["overhead"]["runs"] == 3 and s["complete"]        # its cost is unknown; it did run
    assert f"- `runs/000-new`: {s['runs'][0]['reason']}" in markdown(s, [], exp)
    assert prune_pcaps(exp, s, "representative") == []         # its unreadable inventory is left alone


def test_experiment_report_of_a_damaged_run_exits_0_and_says_so(exp, capsys, restore_logging):
    _cut(exp / "runs/002-new/manifest.json", 100)
    assert main(["experiment", "report", str(exp)]) == 0
    out = capsys.readouterr().out
    assert "new: n valid 1/2" in out and "excluded runs/002-new: damaged: runs/002-new/manifest.json: " \
                                         "not valid JSON" in out
    assert "damaged: runs/002-new/manifest.json" in (exp / "report.html").read_text()
