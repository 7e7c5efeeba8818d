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


def took_effect(schedule, skip=()):
    """The manifest's ``link_changes`` changes of one direction whose schedule took effect: a
    ``ScheduleChange`` record per item (an outage's down and up), but the (kind, item)s of ``skip``."""
    from testbed.emulator.schedule_model import describe_change
    kinds = ([("step", i) for i in range(len(schedule.steps))]
             + [(k, i) for i in range(len(schedule.outages)) for k in ("down", "up")]
             + [("event", i) for i in range(len(schedule.events))]
             + ([("trace", 0)] if schedule.trace else []))
    return [{"kind": k, "item": i, "at": describe_change(schedule, k, i)[0], "configured_ns": 0,
             "actual_ns": 0, "frames_before": 0, "what": describe_change(schedule, k, i)[1]}
            for k, i in kinds if (k, i) not in skip]


class LinkRecordingExecutor:
    """Writes what a real run records about its links (``metadata.json``: the plan's topology's
    link records, with each direction's schedule) and a manifest with those records in its
    environment and the changes that took effect (``link_changes``); ``tamper``: a level whose
    run records no schedule (a backend that ignored it); ``unrecorded``: a level whose run
    records its schedule but none of its changes; ``late``: a level whose outage's up never
    took effect (the run ended during the outage)."""

    def __init__(self, tamper=None, unrecorded=None, late=None):
        self.tamper, self.unrecorded, self.late, self.calls = tamper, unrecorded, late, []

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
        changes = {"server-client": took_effect(down.schedule, {("up", 0)} if level == self.late else ())} \
            if down.schedule and level != self.unrecorded else {}
        r = RunResult(run_id=f"fake-{len(self.calls)}", dir=out, spec=plan.spec, status="complete",
                      error=None, started=0.0, finished=0.0,
                      metrics={"goodput_mbps": 20.0 * (6 - outage) / 6, "retransmissions": 0},
                      fidelity={"verdict": "ok", "backend": "fake", "unintended_drops": 0},
                      environment={"links": links}, roles={"client": "client", "server": "server"},
                      link_changes={"changes": changes} if changes else {})
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
    shown = {lv: json.loads(v["verification"]["schedule_took_effect"]["values"][0])
             for lv, v in s["by_level"].items()}
    assert shown["none"] == [] and shown["down-2s-0.5s"] == ["down at 2.0s for 0.5s (drop)"]
    assert shown["cell-edge.toml"] == ["at 1.0s: rate=4mbit", "at 4.0s: rate=20mbit", "down at 3.0s for 1.0s (drop)"]


def test_a_schedule_whose_changes_were_not_recorded_or_did_not_all_take_effect_is_invalid(tmp_path):
    """The read-back is what took effect, from the manifest's link_changes: none recorded for a
    scheduled direction is no read-back; an item that never took effect (an outage's up after
    the run's end) is named."""
    exp = definition(tmp_path)
    fx = LinkRecordingExecutor(unrecorded="down=2s+0.5s", late=exp.levels[-1])
    out = run_experiment(exp, tmp_path / "out", executor=fx, quiet=True)
    s = write_all(out, plots=False)
    excluded = {e["level"]: e["reason"] for e in s["excluded"]}
    assert set(excluded) == {"down-2s-0.5s", "cell-edge.toml"}
    assert excluded["down-2s-0.5s"] == "no read-back schedule_took_effect in the run's checks"
    assert excluded["cell-edge.toml"].endswith("but on cell.down did not take effect (in full): down at 3.0s "
                                               "for 1.0s (drop) (the manifest's link_changes)")
    runs = {r["level"]: r for r in s["runs"] if not r["warmup"]}
    assert runs["down-2s-0.5s"]["checks"] == {}
    assert runs["cell-edge.toml"]["checks"]["schedule_took_effect"] == ["at 1.0s: rate=4mbit", "at 4.0s: rate=20mbit"]


def test_check_of_a_trace_level_and_a_bad_level(tmp_path):
    trace = tmp_path / "cell.up"
    trace.write_text("1\n2\n3\n10\n")
    check = ck.check_for("links.cell.down.trace")
    from testbed.spec.linkspec import LinkSpec
    ran = LinkSpec().with_override("trace", str(trace)).to_dict()
    took = [f"trace {trace}: 4.8128mbit mean, period 0.01 s, resolution 100ms"]
    assert LinkSpec().with_override("trace", str(trace)).schedule.describe_items() == took
    link = {"link": "cell.down", "configured": ran}
    assert check.fn(str(trace), {"link": link, "schedule_took_effect": took}) is None
    assert "did not take effect (in full): trace" in check.fn(str(trace), {"link": link, "schedule_took_effect": []})
    assert "ran with no schedule" in check.fn(str(trace), {"link": {"link": "cell.down", "configured": {}}})
    assert "cannot read it" in ck.check_for(FACTOR).fn("nothing.toml", {"link": {"link": "cell.down"}})


def test_a_bad_inline_level_is_refused_before_anything_runs(tmp_path):
    exp = definition(tmp_path, levels=["none", "down=2s"])
    with pytest.raises(UsageError, match=r"level 'down-2s': .*expected MOMENT\+DURATION"):
        exp.validate()
