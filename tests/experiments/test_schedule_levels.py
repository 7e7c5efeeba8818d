"""A link's schedule as an experiment's factor (``links.LINK.DIR.schedule``): levels that are
``none``, inline items or files relative to the definition; every arm's run records the schedule
it ran (metadata.json ``links``, the manifest's ``environment.links``) and the derived check reads
it back.  A fake executor stands in for ``execute`` (no root, no packets)."""
import json
import shutil
from pathlib import Path

import pytest

from experiments import checks as ck
from experiments import load_definition, run_experiment, write_all
from experiments.definition import BUILTIN_DIR
from testbed.spec.errors import UsageError
from testbed.spec.runresult import RunResult

FACTOR = "links.cell.down.schedule"


class LinkRecordingExecutor:
    """Writes what a real run records about its links (``metadata.json``: the plan's topology's
    link records, with each direction's schedule) and a manifest with those records in its
    environment; ``tamper``: a level whose run records no schedule (a backend that ignored it)."""

    def __init__(self, tamper=None):
        self.tamper, self.calls = tamper, []

    def __call__(self, plan, out_dir, **kw):
        out = Path(out_dir)
        out.mkdir(parents=True)
        level = plan.spec.get(FACTOR)
        self.calls.append(level)
        links = plan.topology.link_records()
        if level == self.tamper:
            links[0]["b_to_a"].pop("schedule", None)
        (out / "metadata.json").write_text(json.dumps({"links": links}))
        down = plan.topology.named["cell"]["spec_ba"]
        outage = sum(o.duration for o in down.schedule.outages) if down.schedule else 0.0
        r = RunResult(run_id=f"fake-{len(self.calls)}", dir=out, spec=plan.spec, status="complete",
                      error=None, started=0.0, finished=0.0,
                      metrics={"goodput_mbps": 20.0 * (6 - outage) / 6, "retransmissions": 0},
                      fidelity={"verdict": "ok", "backend": "fake", "unintended_drops": 0},
                      environment={"links": links}, roles={"client": "client", "server": "server"})
        r.write()
        return r


def definition(tmp_path, levels=None):
    """The built-in handover definition, copied with its schedule file beside a tmp directory."""
    (tmp_path / "definitions").mkdir()
    shutil.copytree(BUILTIN_DIR.parent / "schedules", tmp_path / "schedules")
    text = (BUILTIN_DIR / "handover.toml").read_text()
    (tmp_path / "definitions" / "handover.toml").write_text(text)
    exp = load_definition(tmp_path / "definitions" / "handover.toml")
    return exp.with_overrides(reps=2, levels=levels) if levels else exp.with_overrides(reps=2)


def test_levels_are_none_inline_items_and_a_file_relative_to_the_definition(tmp_path):
    exp = definition(tmp_path)
    assert exp.labels == ("none", "down-2s-0.5s", "down-2s-2s", "cell-edge.toml")
    assert not exp.topology_may_stay_up()                           # a link factor: rebuilt per run
    plans = exp.validate()
    downs = {lab: p.topology.named["cell"]["spec_ba"].schedule for lab, p in plans.items()}
    assert downs["none"] is None
    assert downs["down-2s-2s"].describe_items() == ["down at 2.0s for 2.0s (drop)"]
    assert downs["cell-edge.toml"].describe_items() == [
        "at 1.0s: rate=4mbit", "at 4.0s: rate=20mbit", "down at 3.0s for 1.0s (drop)"]
    assert all(p.topology.named["cell"]["spec_ab"].schedule is None for p in plans.values())
    assert exp.levels[-1] == str((tmp_path / "schedules" / "cell-edge.toml").resolve())
    assert exp.level("cell-edge.toml") == exp.levels[-1]            # --levels cell-edge.toml


def test_each_arm_records_its_schedule_and_the_check_reads_it_back(tmp_path):
    exp = definition(tmp_path)
    fx = LinkRecordingExecutor(tamper="down=2s+2s")
    out = run_experiment(exp, tmp_path / "out", executor=fx, quiet=True)
    s = write_all(out, plots=False)
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("runs/*/manifest.json"))]
    by_level = {}
    for m in runs:
        by_level.setdefault(m["spec"]["links"].get("cell.down.schedule"), []).append(m)
    assert len(by_level) == 4 and all(len(v) == 3 for v in by_level.values())   # warm-up + 2
    edge = next(v for k, v in by_level.items() if k and k.endswith("cell-edge.toml"))[0]
    recorded = edge["environment"]["links"][0]["b_to_a"]["schedule"]
    assert [s["at"] for s in recorded["step"]] == ["1.0s", "4.0s"] and recorded["outage"][0]["down"] == "3.0s"
    assert "schedule" not in by_level["none"][0]["environment"]["links"][0]["b_to_a"]
    excluded = {e["level"]: e["reason"] for e in s["excluded"]}
    # the tampered level's runs ran without the schedule they asked for: invalid, said so
    assert set(excluded) == {"down-2s-2s"}
    assert excluded["down-2s-2s"].startswith("schedule down=2s+2s but cell.down ran with no schedule")


def test_check_of_a_trace_level_and_a_bad_level(tmp_path):
    trace = tmp_path / "cell.up"
    trace.write_text("1\n2\n3\n10\n")
    check = ck.check_for("links.cell.down.trace")
    from testbed.spec.linkspec import LinkSpec
    ran = LinkSpec().with_override("trace", str(trace)).to_dict()
    assert check.fn(str(trace), {"link": {"link": "cell.down", "configured": ran}}) is None
    assert "ran with no schedule" in check.fn(str(trace), {"link": {"link": "cell.down", "configured": {}}})
    assert "cannot read it" in ck.check_for(FACTOR).fn("nothing.toml", {"link": {"link": "cell.down"}})


def test_a_bad_inline_level_is_refused_before_anything_runs(tmp_path):
    exp = definition(tmp_path, levels=["none", "down=2s"])
    with pytest.raises(UsageError, match=r"level 'down-2s': .*expected MOMENT\+DURATION"):
        exp.validate()
