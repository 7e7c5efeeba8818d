"""Link schedules on the kernel backend as tc commands (``testbed.backends.tc_schedule``), without
root: every action, its moment and its argv exactly as the I/O loop would run them."""
import itertools

import pytest

from testbed.backends.kernel import qdisc_commands
from testbed.backends.tc_schedule import MIN_RATE, UNSHAPED_RATE, TcSchedule, refusal
from testbed.spec import traces
from testbed.spec.errors import UsageError
from testbed.spec.linkspec import LinkSpec
from testbed.spec.schedule import Schedule, Trace


def scheduled(schedule: dict, **fields) -> LinkSpec:
    return LinkSpec.parse(**fields).replace(schedule=Schedule.from_dict(schedule))


def test_rate_step_and_outage_become_htb_and_netem_changes_in_time_order():
    spec = scheduled({"step": [{"at": "3s", "rate": "5mbit", "delay": "40ms"}],
                      "outage": [{"down": "5s", "duration": "2s"}]},
                     rate="20mbit", delay="20ms", loss="1%")
    acts = TcSchedule("c-eth0", spec, seed=7).until(60)
    assert [(a.at, a.kind, a.item, a.label) for a in acts] == [
        (3.0, "step", 0, "3.0s"), (5.0, "down", 0, "5.0s"), (7.0, "up", 0, "5.0s+2.0s")]
    step, down, up = ([" ".join(c) for c in a.argv] for a in acts)
    assert step == [
        "tc class change dev c-eth0 parent 1: classid 1:1 htb rate 5000000bit ceil 5000000bit "
        "quantum 1514 overhead 0",
        # the limit follows: delay line (17 frames in 40 ms at 5 Mbit/s) + BDP default (100 min)
        f"tc qdisc change dev c-eth0 handle 10: netem delay 40000us loss random 1% limit 117 seed {(7 << 20) + 1}"]
    assert down == [f"tc qdisc change dev c-eth0 handle 10: netem delay 40000us loss random 100% "
                    f"limit 117 seed {(7 << 20) + 2}"]
    assert up == [f"tc qdisc change dev c-eth0 handle 10: netem delay 40000us loss random 1% "
                  f"limit 117 seed {(7 << 20) + 3}"]
    assert acts[0].what == "delay=40ms rate=5mbit"


def test_without_seed_support_changes_carry_no_seed_and_a_delay_step_leaves_htb_alone():
    spec = scheduled({"step": {"at": "1s", "delay": "50ms"}}, rate="10mbit", delay="10ms")
    (act,) = TcSchedule("x", spec, seed=None).until(10)
    assert len(act.argv) == 1 and act.argv[0][:7] == ("tc", "qdisc", "change", "dev", "x", "handle", "10:")
    assert "seed" not in act.argv[0]


def test_the_tree_fits_every_value_in_force():
    """Unshaped with a rate step: htb from the start at UNSHAPED_RATE; jitter only after a step
    (no reorder): the pfifo child from the start, its limit the largest netem limit."""
    spec = scheduled({"step": [{"at": "1s", "rate": "10mbit", "jitter": "5ms", "delay": "50ms"},
                               {"at": "2s", "rate": "unshaped"}]}, delay="10ms")
    got = [" ".join(c) for c in qdisc_commands("x", spec)]
    assert got[1].startswith(f"tc class add dev x parent 1: classid 1:1 htb rate {UNSHAPED_RATE:.0f}bit")
    assert got[2].startswith("tc qdisc add dev x parent 1:1 handle 10: netem delay 10000us limit 100000")
    assert got[3] == "tc qdisc add dev x parent 10:1 handle 11: pfifo limit 100000"
    acts = TcSchedule("x", spec).until(10)
    assert " rate 10000000bit " in " ".join(acts[0].argv[0])
    assert f" rate {UNSHAPED_RATE:.0f}bit " in " ".join(acts[1].argv[0])


@pytest.mark.parametrize("schedule, fields, words", [
    ({"step": {"at": "10frames", "rate": "5mbit"}}, {"rate": "10mbit"}, "moment(s) 10frames count frames or bytes"),
    ({"outage": {"down": "1MB", "duration": "1s"}}, {}, "moment(s) 1000000B count frames or bytes"),
    ({"event": {"frame": 2, "delay": "45ms"}}, {}, "1 per-frame event(s)"),
    ({"event": {"frame": 2, "drop": True, "copies_until": "7s"}}, {}, "1 with copies_until"),
    ({"outage": {"down": "1s", "duration": "1s", "hold": True}}, {}, "an outage with hold"),
    ({"step": {"at": "1s", "reorder": True}}, {"jitter": "2ms"}, "a step sets reorder"),
    ({"trace": {"ms": [1, 2], "exact": True}}, {}, "asks for exact replay"),
])
def test_what_tc_cannot_apply_is_refused_in_one_line_naming_the_direction(schedule, fields, words):
    spec = scheduled(schedule, **fields)
    why = refusal(spec, "link bottleneck.down")
    assert why.startswith("link bottleneck.down: ") and words in why and "\n" not in why
    assert "--backend userspace" in why
    with pytest.raises(ValueError, match="link bottleneck.down"):
        TcSchedule("x", spec, where="link bottleneck.down")


def test_a_byte_queue_step_is_refused_as_netem_refuses_byte_queues():
    spec = scheduled({"step": {"at": "1s", "queue": "64KB"}}, rate="10mbit")
    with pytest.raises(ValueError, match="limits queues in packets"):
        TcSchedule("x", spec)


def test_trace_becomes_rate_steps_per_window_and_loops():
    """12.032 Mbit/s (one opportunity per ms, timestamps 1..300) then nothing until the period's
    one opportunity at 500 ms, looping: windows (k·100, (k+1)·100] ms carry 100 full-size frames
    (1514 B), none, or one; an action only where the rate changes."""
    trace = traces.from_rates([(0.3, 12.032e6), (0.2, 0.0)], "test")
    assert trace.ms[-2:] == (300, 500)
    spec = LinkSpec.parse(delay="10ms").replace(schedule=Schedule(trace=trace))
    acts = TcSchedule("x", spec).until(1.25)
    full, one = 100 * 1514 * 8 / 0.1, 1514 * 8 / 0.1
    assert [(a.at, a.kind, a.item) for a in acts] == [
        (0.0, "trace", 0), (0.3, "trace", 3), (0.4, "trace", 4), (0.5, "trace", 5),
        (0.8, "trace", 8), (0.9, "trace", 9), (1.0, "trace", 10)]
    rates = [float(a.argv[0][a.argv[0].index("rate") + 1].removesuffix("bit")) for a in acts]
    assert rates == [round(full), MIN_RATE, round(one), round(full), MIN_RATE, round(one), round(full)]
    assert all(len(a.argv) == 1 and a.argv[0][1] == "class" for a in acts)
    assert acts[0].what == "rate=12.112mbit (100 opportunities in 100 ms)"
    assert len(list(itertools.islice(TcSchedule("x", spec).actions(), 50))) == 50   # it loops


def test_trace_resolution_is_the_traces_own():
    trace = Trace((1, 2, 3, 4, 400), "t", resolution=0.05)
    spec = LinkSpec().replace(schedule=Schedule(trace=trace))
    sch = TcSchedule("x", spec)
    assert sch.resolution == 0.05
    # (0, 50] ms: 4 opportunities; none until the period's one at 400 ms; 4 again from 400 ms
    assert [a.at for a in sch.until(0.4)] == [0.0, 0.05, 0.35, 0.4]


def test_trace_exact_and_resolution_round_trip_and_bad_resolution_is_one_line():
    d = {"trace": {"ms": [5, 10], "exact": "true", "resolution": "50ms"}}
    sch = Schedule.from_dict(d)
    assert sch.trace.exact and sch.trace.resolution == 0.05
    assert Schedule.from_dict(sch.to_dict()) == sch
    assert "exact" not in Schedule(trace=Trace((5, 10))).to_dict()["trace"]
    with pytest.raises(ValueError, match="whole number of ms"):
        Schedule.from_dict({"trace": {"ms": [5, 10], "resolution": "0.5ms"}})


def test_a_run_on_netem_is_refused_before_anything_is_built():
    from testbed.run.plan import resolve
    from testbed.spec.runspec import RunSpec
    with pytest.raises(UsageError, match=r"^link bottleneck.down: moment\(s\) 10frames"):
        resolve(RunSpec(topology="longhaul", backend="netem",
                        links={"bottleneck.down.loss": "5%@10frames"}))
    plan = resolve(RunSpec(topology="longhaul", backend="userspace",
                           links={"bottleneck.down.loss": "5%@10frames"}))
    assert plan.topology.named["bottleneck"]["spec_ba"].schedule.steps


FRAMES = ("link cell.down: moment(s) 10frames count frames or bytes; netem applies steps and "
          "outages at times after the run's start (3s, 250ms) and traces as rate steps; use "
          "--backend userspace for those")
AIR = ("topology 'wifi': the shared Wi-Fi medium (link air) exists only in the userspace emulator; "
       "use --backend userspace")


@pytest.mark.parametrize("argv, message", [
    (["run", "bulk", "--topo", "handover", "--direction", "down", "--duration", "1s",
      "--link", "cell.down.rate=1mbit@10frames"], FRAMES),
    (["topo", "up", "handover", "--link", "cell.down.rate=1mbit@10frames"], FRAMES),
    # wifi's air exists only in the userspace emulator: refused here, not after a guest booted
    # (seconds for UML, ~10 s for a TCG VM) only to refuse it there
    (["run", "bulk", "--topo", "wifi", "--direction", "down", "--duration", "1s"], AIR),
    (["topo", "up", "wifi"], AIR),
])
@pytest.mark.parametrize("guest", ["netem-uml", "netem-vm"])
def test_a_guest_command_is_refused_before_the_guest_boots(argv, message, guest, capsys, monkeypatch):
    from testbed.backends import uml, vm
    from testbed.cli import main

    def boot(*a, **kw):
        raise AssertionError("a guest was booted")
    monkeypatch.setattr(uml, "run_cli_in_guest", boot)
    monkeypatch.setattr(vm, "run_cli_in_guest", boot)
    assert main([*argv, "--backend", guest]) == 2
    assert capsys.readouterr().err.strip() == f"testbed: error: {message}"
