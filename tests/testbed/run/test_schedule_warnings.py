"""The manifest's link-schedule warnings agree with its ``link_changes``: they are derived from
what the links recorded once they had stopped (after drain and teardown), not from the time the
client exited.  A recorded run stands in (no root): the handover topology's default schedules,
the client finishing 5.24 s after the origin and the links applying the 5.5 s items during drain."""
import json
from types import SimpleNamespace

import pytest

from testbed.run.execute import EXEC_WORKLOAD, _finish, _schedule_warnings
from testbed.run.plan import build_topology
from testbed.spec.runresult import RunResult
from testbed.spec.runspec import RunSpec

ORIGIN = 58_575_597_185_386
S = 10**9


def change(kind, item, at, t_s, what, frames=0):
    """A ``ScheduleChange`` as the emulator's summary records it (time-tied: actual = configured)."""
    ns = ORIGIN + round(t_s * S)
    return {"kind": kind, "item": item, "at": at, "configured_ns": ns, "actual_ns": ns,
            "frames_before": frames, "what": what}


# what the emulator recorded on `testbed run bulk --topo handover --direction down` (the
# topology's default schedules: down 20 → 4 Mbit/s at 3 s, both directions out for 0.5 s at 5 s,
# down 4 → 30 Mbit/s at 5.5 s); the links ran on through drain and teardown
RECORDED = {
    "client-server": [change("down", 0, "5.0s", 5.0, "down drop", 2310),
                      change("up", 0, "5.0s+0.5s", 5.5, "up", 2321)],
    "server-client": [change("step", 0, "3.0s", 3.0, "rate=4mbit", 4592),
                      change("down", 0, "5.0s", 5.0, "down drop", 5304),
                      change("step", 1, "5.5s", 5.5, "rate=30mbit", 5314),
                      change("up", 0, "5.0s+0.5s", 5.5, "up", 5314)]}


def metadata(recorded=RECORDED, links=None):
    links = links if links is not None else build_topology("handover", {}, {}).link_records()
    dirs = {d: {"schedule": {"origin_ns": ORIGIN, "changes": cs}} for d, cs in (recorded or {}).items()}
    return {"backend": "userspace", "links": links,
            **({"backend_summary": {"directions": dirs}} if recorded is not None else {})}


def result(tmp_path, end_s, workload="bulk"):
    spec = RunSpec(topology="handover", workload=workload)
    r = RunResult("r", tmp_path, spec, "failed", None, 0.0, 0.0)
    r.link_changes = {"origin": {"origin_requested_ns": ORIGIN}, "workload_end_ns": ORIGIN + round(end_s * S)}
    return r


def test_a_change_during_drain_is_said_to_have_taken_effect_after_the_client_not_never(tmp_path):
    """The client finished at 5.24 s; the 5.5 s step and the outages' up took effect after it.
    The manifest records them, and its warnings say so: after the client finished, so not on the
    measured workload — never that they did not take effect."""
    r = result(tmp_path, 5.24)
    _finish(r, SimpleNamespace(metadata=metadata()), {}, None, compute=False)
    lc = json.loads((tmp_path / "manifest.json").read_text())["link_changes"]
    assert lc["changes"] == RECORDED and lc["workload_end_ns"] == ORIGIN + 5_240_000_000
    up, down = lc["warnings"]
    assert down == ("link cell.down: the client finished 5.24 s from the origin; these took effect "
                    "(in full) only after it, while the run drained or was torn down, not on the "
                    "measured workload: at 5.5s: rate=30mbit; down at 5.0s for 0.5s (drop)")
    assert up.startswith("link cell.up: the client finished 5.24 s") and up.endswith(
        ": down at 5.0s for 0.5s (drop)")
    assert not any("never took effect" in w for w in lc["warnings"])


def test_no_warning_when_every_change_came_while_the_client_ran(tmp_path):
    r = result(tmp_path, 6.0)
    _schedule_warnings(r, metadata(), RECORDED)
    assert r.link_changes["warnings"] == []


def test_what_the_links_never_applied_is_named(tmp_path, caplog):
    """The links stopped before the 5.5 s items (a recorded run cut short): the step and the up
    of each outage never took effect; a frame-tied step never reached is named too."""
    topo = build_topology("handover", {}, {"cell.down.schedule": "rate=4mbit@3s;delay=40ms@100000frames;"
                                           "down=5s+0.5s"})
    steps = topo.named["cell"]["spec_ba"].schedule.steps
    timed = next(i for i, s in enumerate(steps) if s.at.kind == "time")
    recorded = {"client-server": RECORDED["client-server"][:1],
                "server-client": [change("step", timed, "3.0s", 3.0, "rate=4mbit"),
                                  change("down", 0, "5.0s", 5.0, "down drop")]}
    links = topo.link_records()
    r = result(tmp_path, 5.24)
    _schedule_warnings(r, metadata(recorded, links), recorded)
    up, down = r.link_changes["warnings"]
    assert up.startswith("link cell.up: never took effect by the time the links stopped (at most ")
    assert up.endswith("s from the origin): the up of down at 5.0s for 0.5s (drop) (the link was still "
                       "down when it stopped)")
    assert down.endswith("s from the origin): at 100000frames: delay=40ms; the up of down at 5.0s for "
                         "0.5s (drop) (the link was still down when it stopped)")
    assert up in caplog.text and down in caplog.text


def test_without_a_record_only_what_was_configured_after_the_end_is_said(tmp_path):
    """No backend summary (a testbed still up, shared between runs): what took effect is unknown;
    the time-tied items configured after the workload's end cannot have acted on it."""
    r = result(tmp_path, 5.24, workload=EXEC_WORKLOAD)
    _schedule_warnings(r, metadata(recorded=None), {})
    up, down = r.link_changes["warnings"]
    assert up == ("link cell.up: none of its schedule's changes are recorded (no link backend "
                  "summary), so what took effect is unknown")
    assert down == ("link cell.down: none of its schedule's changes are recorded (no link backend "
                    "summary), so what took effect is unknown; configured after the session's block "
                    "ended (5.24 s from the origin), so not on the measured workload: at 5.5s: rate=30mbit")


@pytest.mark.parametrize("origin", [None, {}])
def test_no_origin_no_warnings(tmp_path, origin):
    r = RunResult("r", tmp_path, RunSpec(), "failed", None, 0.0, 0.0)
    if origin is not None:
        r.link_changes = {"origin": origin}
    _schedule_warnings(r, metadata(), RECORDED)
    assert "warnings" not in r.link_changes


UNMATCHED = "none of its schedule's changes are recorded (the backend recorded none that is this link's alone)"


@pytest.mark.parametrize("recorded, said", [
    ({"client-gw.0": [change("step", 0, "1.0s", 1.0, "rate=4mbit")],       # the userspace emulator's
      "client-gw.1": []}, {"access2.up": "never took effect"}),
    ({"client-gw": [change("step", 0, "1.0s", 1.0, "rate=4mbit")]},          # the kernel's: one for both
     {"access1.up": UNMATCHED, "access2.up": UNMATCHED}),
])
def test_two_links_between_the_same_hosts_are_told_apart_or_not_judged(tmp_path, recorded, said):
    """dualpath's access1 and access2 both join client and gw.  The userspace emulator numbers
    their directions in the links' order; the kernel backend records one direction per host
    pair, which is neither link's alone: judged against it, one link's schedule was said to have
    taken effect by the other's changes."""
    links = build_topology("dualpath", {}, {"access1.up.schedule": "rate=4mbit@1s",
                                            "access2.up.schedule": "rate=4mbit@1s"}).link_records()
    r = result(tmp_path, 5.0)
    _schedule_warnings(r, metadata(recorded, links), recorded)
    warnings = {w.split(":")[0].removeprefix("link "): w for w in r.link_changes["warnings"]}
    assert set(warnings) == set(said) and all(said[k] in w for k, w in warnings.items()), warnings
