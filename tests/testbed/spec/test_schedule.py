"""Schedules, traces and their files: parsing, validation (one line naming file and line), JSON
round trip, the inline --link forms, the trace generators and statistics."""
import json
import re

import pytest

from testbed.spec import traces
from testbed.spec.linkspec import Bernoulli, GilbertElliott, LinkSpec
from testbed.spec.schedule import OPPORTUNITY_BYTES, Event, Moment, Outage, Schedule, Step, Trace, parse_inline

TOML = """\
[[step]]
at = "3s"
rate = "10mbit"
delay = "20ms"

[[step]]
at = "10frames"
loss = "ge:1%,30%"

[[outage]]
down = "5s"
duration = "2s"
hold = true

[[event]]
frame = 2
min_bytes = 1000
delay = "45ms"

[[event]]
start = "8s"
end = "8.1s"
drop = true
"""


def test_moments():
    assert Moment.parse("250ms") == Moment("time", 0.25)
    assert Moment.parse(3) == Moment("time", 3.0)
    assert Moment.parse("10frames") == Moment("frames", 10)
    assert Moment.parse("1MB") == Moment("bytes", 1_000_000)
    assert Moment.parse("1500B") == Moment("bytes", 1500)
    for m in (Moment("time", 0.1), Moment("frames", 7), Moment("bytes", 99)):
        assert Moment.parse(str(m)) == m
    for bad, words in (("-3s", "negative"), ("3parsecs", "allowed"), ("2.5frames", "whole")):
        with pytest.raises(ValueError, match=words):
            Moment.parse(bad)


def test_toml_file_and_json_round_trip(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(TOML)
    sch = Schedule.load(path)
    assert sch.steps[0] == Step(Moment("time", 3.0), (("delay", 0.02), ("rate", 10e6)))
    assert sch.steps[1].changes == (("loss", GilbertElliott(0.01, 0.3)),)
    assert sch.outages == (Outage(Moment("time", 5.0), 2.0, True),)
    assert sch.events[0] == Event(frame=2, min_bytes=1000, delay=0.045)
    assert sch.events[1] == Event(start=8.0, end=8.1, drop=True)
    assert Schedule.from_dict(json.loads(json.dumps(sch.to_dict()))) == sch
    jpath = tmp_path / "s.json"
    jpath.write_text(json.dumps(sch.to_dict(), indent=1))
    assert Schedule.load(jpath) == sch


def test_linkspec_round_trip_and_unchanged_without_schedule(tmp_path):
    plain = LinkSpec.parse(rate="6mbit", delay="10ms", loss="1%")
    assert "schedule" not in plain.to_dict()
    (tmp_path / "t.txt").write_text("1\n1\n3\n")
    spec = (plain.with_override("rate", "10mbit@3s").with_override("down", "5s+2s,hold")
            .with_override("delay", "40ms@1MB"))
    assert spec.schedule.steps == (Step(Moment("bytes", 1_000_000), (("delay", 0.04),)),
                                   Step(Moment("time", 3.0), (("rate", 10e6),)))
    assert spec.schedule.outages == (Outage(Moment("time", 5.0), 2.0, True),)
    back = LinkSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec and back.to_dict() == spec.to_dict()
    traced = plain.with_override("trace", str(tmp_path / "t.txt"))
    assert traced.schedule.trace.ms == (1, 1, 3)
    assert LinkSpec.from_dict(json.loads(json.dumps(traced.to_dict()))) == traced
    assert plain.with_override("loss", "3%").loss == Bernoulli(0.03)


@pytest.mark.parametrize("fmt", ["toml", "json"])
@pytest.mark.parametrize("items, line, words", [
    ({"step": [{"at": "3s", "rate": "1mbit"}, {"at": "2s", "rate": "2mbit"}]}, 2, "not after"),
    ({"step": [{"at": "1s", "rate": "1mbit"}, {"at": "2s", "bandwidth": "2mbit"}]}, 2,
     "allowed: at, rate, delay, jitter, reorder, loss, queue_packets, queue_bytes, queue"),
    ({"outage": [{"down": "1s", "duration": "2s"}, {"down": "2s", "duration": "1s"}]}, 2, "overlaps"),
    ({"outage": [{"down": "-1s", "duration": "2s"}]}, 1, "negative"),
    ({"outage": [{"down": "1s", "duration": "0s"}]}, 1, "must be > 0"),
    ({"event": [{"frame": 2, "start": "1s", "end": "2s", "drop": True}]}, 1, "not both"),
    ({"event": [{"frame": 2, "delay": "5ms", "copies_until": "7s"}]}, 1, "needs drop = true"),
    ({"event": [{"frame": 2, "drop": True, "copies_until": "-1s"}]}, 1, "non-negative"),
])
def test_bad_schedule_is_one_line_with_file_and_line(tmp_path, fmt, items, line, words):
    path = tmp_path / f"bad.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(items, indent=2))
        text = path.read_text().splitlines()
        section = next(iter(items))
        starts = [no for no, t in enumerate(text, 1) if t.strip().startswith("{") and no > 1]
        line = starts[line - 1] if section else line
    else:
        out = []
        for section, lst in items.items():
            for item in lst:
                out.append(f"[[{section}]]")
                out += [f"{k} = {json.dumps(v)}" for k, v in item.items()]
        path.write_text("\n".join(out) + "\n")
        line = [no for no, t in enumerate(path.read_text().splitlines(), 1) if t.startswith("[[")][line - 1]
    with pytest.raises(ValueError) as err:
        Schedule.load(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}:{line}: ") and words in msg, msg


def test_rate_step_with_trace_and_unknown_key_refused(tmp_path):
    with pytest.raises(ValueError, match="trace gives this direction's rate"):
        Schedule(steps=(Step(Moment("time", 1.0), (("rate", 1e6),)),), trace=Trace((1,)))
    path = tmp_path / "s.toml"
    path.write_text("[[steps]]\nat = '1s'\n")
    with pytest.raises(ValueError, match=r"s.toml: unknown schedule key\(s\) \['steps'\]; allowed"):
        Schedule.load(path)


@pytest.mark.parametrize("text, where, words", [
    ("1\n5\n3\n", ":3:", "goes backwards (after 5)"),
    ("", ": ", "empty trace"),
    ("0\n0\n", ":2:", "lasts 0 ms"),
    ("1\n\n2\n", ":2:", "not a whole number"),
    ("1\n2.5\n", ":2:", "not a whole number"),
])
def test_bad_trace_is_one_line(tmp_path, text, where, words):
    path = tmp_path / "t.trace"
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        Trace.load(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}{where}") and words in msg, msg


def test_inline_forms_refused_in_one_line():
    spec = LinkSpec.parse(rate="6mbit")
    for name, value, words in (("down", "5s", "MOMENT+DURATION"), ("mtu", "9000@3s", "a step sets one of"),
                               ("rate", "10mbit@soon", "moment"), ("down", "5s+2s,keep", "hold")):
        with pytest.raises(ValueError, match=re.escape(words)):
            spec.with_override(name, value)


def test_generators_and_stats():
    const = traces.constant(2 * OPPORTUNITY_BYTES * 8 * 1000, 1.0)    # two per ms
    assert const.ms[:4] == (1, 1, 2, 2) and const.period_ms == 1000 and len(const.ms) == 2000
    st = traces.trace_stats(const, 0.1)
    assert st.mean_bps == st.min_bps == st.max_bps == 2 * OPPORTUNITY_BYTES * 8 * 1000
    onoff = traces.on_off(12.032e6, on=0.3, off=0.2)
    assert onoff.ms[0] == 201 and onoff.period_ms == 500
    series = traces.rate_series(onoff, 0.1)
    assert [r for _, r in series] == [0.0, 0.0, 12.032e6, 12.032e6, 12.032e6]
    alt = traces.alternating([6.016e6, 12.032e6], 0.5)
    assert [r for _, r in traces.rate_series(alt, 0.5)] == [6.016e6, 12.032e6]
    a, b = traces.markov([1e6, 10e6, 30e6], 0.2, 5.0, seed=3), traces.markov([1e6, 10e6, 30e6], 0.2, 5.0, seed=3)
    assert a == b and a != traces.markov([1e6, 10e6, 30e6], 0.2, 5.0, seed=4)
    st = traces.trace_stats(a, 0.2)
    assert a.period_ms == 5000 and 1e6 * 0.9 <= st.min_bps < st.mean_bps < st.max_bps <= 30e6 * 1.1
    # each names its rates as a rate is written ("6e+06/1.2e+07 bit/s" before)
    assert [t.source for t in (traces.constant(12e6), onoff, alt, a)] == [
        "constant 12mbit", "on/off 12.032mbit 0.3 s on 0.2 s off", "alternating 6.016mbit/12.032mbit every 0.5 s",
        "markov seed 3 states 1mbit/10mbit/30mbit"]


def test_opportunities_at_a_loop_s_period_belong_to_that_loop():
    """Opportunity n is at (n // len) * period + ms[n % len]: those at the period are the loop's
    last, counted before any time past it and not before the period itself."""
    t = Trace((1, 1000, 1000))
    assert [t.opportunities_before(x) for x in (0, 1, 2, 1000, 1001, 1002, 2000, 2001)] == [0, 0, 1, 1, 3, 4, 4, 6]
    fast = traces.constant(10e9, 1.0)                            # 831 opportunities in every ms
    rates = [r for _, r in traces.rate_series(fast, 0.001)]
    assert len(rates) == 1000 and min(rates) > 0.99 * 10e9        # the loop's last ms too


def test_the_default_window_resolves_the_trace():
    """The shortest 1-2-5 window holding WINDOW_OPPORTUNITIES at the mean rate, and at least
    1/MAX_WINDOWS of the loop and 1 ms."""
    alt = traces.alternating([6e6, 24e6], 0.5)                  # 1.25 opportunities per ms
    assert traces.default_window(alt) == 0.1
    st = traces.trace_stats(alt)
    assert st.window == 0.1 and st.min_bps < 6.1e6 and st.max_bps > 23.9e6
    assert traces.default_window(traces.constant(10e9, 1.0)) == 0.001
    assert traces.default_window(traces.constant(33e6, 3600)) == 5.0   # 3.6 s: 1/1000 of the loop
    assert traces.default_window(traces.on_off(12.032e6, on=0.3, off=0.2)) == 0.2


def test_event_copies_until_round_trip_and_text():
    ev = Event.from_dict({"frame": 1290, "min_bytes": 1000, "drop": True, "copies_until": "7s"})
    assert ev.copies_until == 7.0 and Event.from_dict(ev.to_dict()) == ev
    assert ev.describe() == ("frame 1290 of >= 1000 B: drop, and until 7.0s TCP resends of its bytes "
                             "(UDP: the frame only)")
    assert "copies_until" not in Event(frame=3, drop=True).to_dict()
    with pytest.raises(ValueError, match="time >= 0 s"):
        Event(frame=1, drop=True, copies_until=-0.5)


def test_inline_steps_at_one_moment_merge_into_one_step():
    """Inline items set one field each: two at one moment are one step (a file writes them as
    one step); one field set twice at one moment is refused, naming both values."""
    spec = LinkSpec.parse(rate="20mbit").with_override("schedule", "rate=4mbit@3s;delay=30ms@3s;loss=1%@1s")
    assert spec.schedule.steps == (Step(Moment("time", 1.0), (("loss", Bernoulli(0.01)),)),
                                   Step(Moment("time", 3.0), (("delay", 0.03), ("rate", 4e6))))
    again = LinkSpec.parse(rate="20mbit").with_override("rate", "4mbit@3s").with_override("delay", "30ms@3s")
    assert again.schedule.steps == spec.schedule.steps[1:]
    with pytest.raises(ValueError, match=r"two steps at 3.0s set rate \(rate=4mbit; rate=2mbit\)"):
        LinkSpec.parse(rate="20mbit").with_override("schedule", "rate=4mbit@3s;rate=2mbit@3s")


def test_a_schedule_file_given_as_a_trace_says_so(tmp_path):
    """`--link X.trace=cell-edge.toml` or `testbed trace show cell-edge.toml` reported the
    file's first line as "not a whole number of ms"; the other way round already said "a schedule
    file ends in .toml or .json"."""
    path = tmp_path / "edge.toml"
    path.write_text('# a comment\n[[step]]\nat = "1s"\nrate = "4mbit"\n')
    with pytest.raises(ValueError, match=r"edge.toml: a schedule file, not a trace .*LINK.DIR.schedule=FILE"):
        Trace.load(path)
    with pytest.raises(ValueError, match="a schedule file, not a trace"):
        LinkSpec.parse(rate="6mbit").with_override("trace", str(path))
    (tmp_path / "t.json").write_text("1\n2\n")        # a trace is a trace whatever its name
    assert Trace.load(tmp_path / "t.json").ms == (1, 2)
    (tmp_path / "bad.json").write_text("5\n3\n")      # neither: the trace's own error, not "a schedule"
    with pytest.raises(ValueError) as err:
        Trace.load(tmp_path / "bad.json")
    assert "goes backwards" in str(err.value) and "a schedule file" not in str(err.value), err.value


def test_item_effects_say_when_each_item_took_effect_against_the_workloads_end():
    """One rule for the warnings and the checks: all of an item's records by the end (a trace:
    any of its records — the kernel backend records every window, on into drain) is "during"."""
    sch = parse_inline("schedule", "delay=40ms@1s;delay=80ms@3s;down=2s+0.5s;loss=1%@10frames")
    sch = sch.merge(Schedule(trace=traces.constant(12e6)))
    assert [item.text for item in sch.items()] == sch.describe_items() and [
        item.moment for item in sch.items()] == [None, 1.0, 3.0, 2.0, 0.0]     # frame-tied steps first

    def rec(kind, item, t):
        return {"kind": kind, "item": item, "actual_ns": int(t * 1e9)}
    changes = [rec("step", 1, 1.0), rec("down", 0, 2.0), rec("up", 0, 2.5), rec("step", 2, 3.0),
               rec("trace", 0, 0.0), rec("trace", 1, 3.1)]
    end = int(2.8e9)
    assert [e for _, e in sch.item_effects(changes, end)] == ["never", "during", "after", "during", "during"]
    assert [e for _, e in sch.item_effects(changes, int(2.2e9))][3] == "after"    # up after the end
    assert [e for _, e in sch.item_effects(changes[:2] + changes[3:], end)][3] == "partly"   # never up
    assert [e for _, e in sch.item_effects(changes)] == ["never", "during", "during", "during", "during"]
