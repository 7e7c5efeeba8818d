"""``links.LINK.DIR.down`` (an outage added to the direction's schedule) as an experiment's
factor: it has a manipulation check, the schedule field's — the direction ran with the level's
outage, and the outage took effect (its down and its up) while the client ran, by the manifest's
``link_changes`` — and ``testbed experiment factors`` lists it.  Every field a link override may
set has a check.  A fake executor stands in for ``execute`` (no root, no packets)."""
import dataclasses
import json
from pathlib import Path

import pytest

from experiments import checks as ck
from experiments import load_definition, run_experiment, write_all
from testbed.spec.linkspec import LinkSpec
from testbed.spec.runresult import RunResult

FACTOR = "links.cell.down.down"
S = 10**9
ORIGIN = 1_000 * S
DEFINITION = """\
name = "outage"
description = "a download while the downlink goes down at 2 s for 0.5 s or 2 s"
factor = "links.cell.down.down"
levels = ["2s+0.5s", "2s+2s"]
metrics = ["goodput_mbps"]
reps = 2
warmup = 0

[base]
topology = "handover"
workload = "bulk"
backend = "userspace"

[base.params]
direction = "down"
duration = "6s"

[base.links]
"cell.up.schedule" = "none"
"cell.down.schedule" = "rate=4mbit@1s"
"""


def changes(schedule, end_s):
    """The ``ScheduleChange`` records of a direction whose time-tied items all took effect at
    their moments (the links ran until ``end_s`` after the origin)."""
    out = []
    for i, s in enumerate(schedule.steps):
        out.append(("step", i, str(s.at), s.at.value, s.describe()))
    for i, o in enumerate(schedule.outages):
        out += [("down", i, str(o.down), o.down.value, "down drop"),
                ("up", i, f"{o.down}+{o.duration!r}s", o.down.value + o.duration, "up")]
    return [{"kind": k, "item": i, "at": at, "configured_ns": ORIGIN + round(t * S),
             "actual_ns": ORIGIN + round(t * S), "frames_before": 0, "what": what}
            for k, i, at, t, what in sorted(out, key=lambda x: x[3]) if t <= end_s]


class Executor:
    """Writes what a real run records about its links: ``metadata.json`` (the plan's link
    records) and a manifest with them in its environment and ``link_changes`` (the origin, the
    client's end, every change the links applied until they stopped, 0.5 s after the client).
    ``client_s``: per level, when the client finished (default 6 s); ``drop``: a level whose run
    records a schedule without the outage (a backend that ignored it)."""

    def __init__(self, client_s=None, drop=None):
        self.client_s, self.drop = client_s or {}, drop

    def __call__(self, plan, out_dir, **kw):
        out = Path(out_dir)
        out.mkdir(parents=True)
        level = plan.spec.get(FACTOR)
        links = plan.topology.link_records()
        down = plan.topology.named["cell"]["spec_ba"].schedule
        if level == self.drop:
            down = dataclasses.replace(down, outages=())
            links[0]["b_to_a"]["schedule"] = down.to_dict()
        (out / "metadata.json").write_text(json.dumps({"links": links}))
        end = self.client_s.get(level, 6.0)
        r = RunResult(run_id=out.name, dir=out, spec=plan.spec, status="complete", error=None,
                      started=0.0, finished=0.0, metrics={"goodput_mbps": 10.0},
                      fidelity={"verdict": "ok", "backend": "fake", "unintended_drops": 0},
                      environment={"links": links}, roles={"client": "client", "server": "server"},
                      link_changes={"origin": {"origin_requested_ns": ORIGIN},
                                    "workload_end_ns": ORIGIN + round(end * S),
                                    "changes": {"server-client": changes(down, end + 1.5)}})
        r.write()
        return r


def experiment(tmp_path):
    (tmp_path / "outage.toml").write_text(DEFINITION)
    return load_definition(tmp_path / "outage.toml")


def test_down_has_a_check_and_is_listed(capsys):
    from testbed.cli import main
    check = ck.check_for(FACTOR)
    assert check is not None and check.needs == ("schedule_took_effect",)
    assert "links.*.*.down" in ck.checked_factors()
    assert main(["experiment", "factors", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert "its down and its up" in listed["checked"]["links.*.*.down"]
    assert "links.*.*.down" not in listed["unchecked"]


def test_every_field_a_link_override_may_set_has_a_check():
    from topologies.base import LINK_FIELDS
    assert [f for f in LINK_FIELDS if ck.check_for(f"links.cell.down.{f}") is None] == []


def test_an_experiment_over_down_runs_and_each_outage_is_checked(tmp_path):
    exp = experiment(tmp_path)
    assert exp.labels == ("2s-0.5s", "2s-2s")
    out = run_experiment(exp, tmp_path / "out", executor=Executor(), quiet=True)
    s = write_all(out, plots=False)
    assert s["excluded"] == []
    took = {r["level"]: r["checks"]["schedule_took_effect"] for r in s["runs"]}
    # the direction's schedule holds the base's step too: the check asks for the level's outage
    assert took == {"2s-0.5s": ["at 1.0s: rate=4mbit", "down at 2.0s for 0.5s (drop)"],
                    "2s-2s": ["at 1.0s: rate=4mbit", "down at 2.0s for 2.0s (drop)"]}


def test_an_outage_missing_or_ending_after_the_client_is_invalid(tmp_path):
    """A run that ran without the outage, and one whose client finished (3 s) before the outage's
    up (4 s, recorded during drain): the outage did not take effect while the client ran."""
    exp = experiment(tmp_path)
    out = run_experiment(exp, tmp_path / "out", executor=Executor({"2s+2s": 3.0}, drop="2s+0.5s"),
                         quiet=True)
    s = write_all(out, plots=False)
    excluded = {e["level"]: e["reason"] for e in s["excluded"]}
    assert excluded["2s-0.5s"] == ("down 2s+0.5s but cell.down ran with a schedule of 1 step, "
                                   "0 outages, 0 events, without that outage (metadata.json (the "
                                   "spec the topology was built with; nothing measured: no frame log))")
    assert excluded["2s-2s"] == ("down 2s+2s but on cell.down took effect only after the client "
                                 "finished, not on the measured workload: down at 2.0s for 2.0s (drop) "
                                 "(the manifest's link_changes)")


@pytest.mark.parametrize("level, configured, took, reason", [
    ("5s+2s", "rate=4mbit@1s;down=5s+2s", ["down at 5.0s for 2.0s (drop)"], None),
    ("5s+2s,hold", "down=5s+2s,hold", ["down at 5.0s for 2.0s (hold)"], None),
    ("5s+2s", "down=5s+2s,hold", [], "without that outage"),
    ("5s+2s", "down=5s+2s", [], "did not take effect (in full): down at 5.0s for 2.0s (drop)"),
    ("5s", "down=5s+2s", [], "down 5s: down=5s: expected MOMENT+DURATION"),
])
def test_the_check_of_a_down_level(level, configured, took, reason):
    link = {"link": "cell.down", "source": "frame log",
            "configured": LinkSpec().with_override("schedule", configured).to_dict()}
    got = ck.check_for(FACTOR).fn(level, {"link": link, "schedule_took_effect": took})
    assert got is None if reason is None else reason in got
