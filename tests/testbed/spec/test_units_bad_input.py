"""Bad link values: a value of the wrong type or size is one ValueError saying what is allowed,
never a TypeError or OverflowError, and an absurd value is refused, not used."""
import pytest

from testbed.spec import traces
from testbed.spec.linkspec import LinkSpec
from testbed.spec.schedule import Schedule
from testbed.spec.units import parse_count, parse_queue, parse_rate, parse_size, parse_time


@pytest.mark.parametrize("value,words", [
    (1.5, "a packet count must be whole"), (float("inf"), "cannot read queue limit"),
    (True, "cannot read queue limit"), ([5], "cannot read queue limit"),
])
def test_a_queue_given_as_a_number_reads_as_its_text(value, words):
    with pytest.raises(ValueError, match=words):
        parse_queue(value)
    assert parse_queue(1000) == parse_queue(1000.0) == (1000, None)


def test_a_bool_is_never_a_quantity_and_a_bare_small_rate_string_is_refused():
    with pytest.raises(ValueError, match="cannot read rate true"):
        parse_rate(True)
    with pytest.raises(ValueError, match="rate 5 has no unit, which is 5 bit/s; write 5mbit"):
        parse_rate("5")
    assert parse_rate("1000") == 1000.0 and parse_rate(5) == 5.0 and parse_rate(333e6) == 333e6
    with pytest.raises(ValueError, match="cannot read size inf"):
        parse_size(float("inf"))
    with pytest.raises(ValueError, match="must be a whole number"):
        parse_count(float("inf"), "event count")


@pytest.mark.parametrize("parse,text,words", [
    (parse_size, "1e400", "size '1e400' is too large: not a finite number"),       # was an OverflowError
    (parse_size, "1e300GB", "size '1e300GB' is too large: not a finite number of bytes"),
    (parse_queue, "1e400MB", "queue limit '1e400MB' is too large: not a finite number"),
    (parse_rate, "1e400mbit", "rate '1e400mbit' is too large: not a finite number"),
    (parse_time, "1e400s", "duration '1e400s' is too large: not a finite number"),
])
def test_a_number_too_large_for_a_float_is_refused(parse, text, words):
    with pytest.raises(ValueError, match=words):
        parse(text)


@pytest.mark.parametrize("fields,words", [
    (dict(rate=5), "rate 5 bit/s is out of range; a link's rate is 1kbit to 100gbit .*write 5mbit"),
    (dict(rate="1e30gbit"), "out of range; a link's rate is 1kbit to 100gbit"),
    (dict(rate=True), "cannot read rate true"),
    (dict(delay="1e12s"), r"delay 1e\+12 s must be >= 0 s and at most 3600 s"),
    (dict(jitter="7200s"), "jitter 7200 s must be >= 0 s and at most 3600 s"),
    (dict(queue=1e30), r"queue limit 1e\+30 packets is too large; a queue holds at most 10000000 packets"),
    (dict(queue="20GB"), "at most 10000000 packets or 10 GB"),
    (dict(queue_packets=1.5), "queue_packets 1.5 must be a whole number"),
])
def test_link_values_have_bounds(fields, words):
    with pytest.raises(ValueError, match=words):
        LinkSpec.parse(**fields)


@pytest.mark.parametrize("rate,words", [
    ("1e-300mbit", "rate 1e-300mbit is out of range; a link's rate is 1kbit to 100gbit (0.001mbit to "
                   "100000mbit), e.g. 10mbit"),
    ("500bit", "rate 500bit is out of range; a link's rate is 1kbit to 100gbit (1000bit to 1e+11bit), "
               "e.g. 10mbit"),
    ("200Gbit/s", "rate 200Gbit/s is out of range; a link's rate is 1kbit to 100gbit (1e-06gbit to "
                  "100gbit), e.g. 10mbit"),
    (1e-300, "rate 1e-300 bit/s is out of range; a link's rate is 1kbit to 100gbit, e.g. 10mbit"),
    (500, "rate 500 bit/s is out of range; a link's rate is 1kbit to 100gbit (a number without a unit "
          "is bit/s: write 500mbit for Mbit/s)"),
])
def test_an_out_of_range_rate_says_the_range_in_the_unit_written(rate, words):
    """Was: '1e-300mbit' → "write 1e-294mbit for Mbit/s" (the bit/s number with mbit after it)."""
    with pytest.raises(ValueError) as exc:
        LinkSpec.parse(rate=rate)
    assert str(exc.value) == words
    with pytest.raises(ValueError) as exc:
        Schedule.from_dict({"step": [{"at": "3s", "rate": rate}]})
    assert str(exc.value).endswith(f"schedule step at 3.0s: {words}")


def test_a_schedule_step_beyond_the_bounds_names_the_step():
    spec = LinkSpec.parse(rate="10mbit")
    with pytest.raises(ValueError, match="schedule step at 3.0s: rate 5 bit/s is out of range"):
        spec.replace(schedule=Schedule.from_dict({"step": [{"at": "3s", "rate": 5}]}))


@pytest.mark.parametrize("text,words", [
    ("step = 5", "step = 5: each step is a table of fields ([[step]] in TOML"),
    ('outage = "x"', "outage = 'x': each outage is a table of fields"),
    ("trace = 5", "trace takes file"),
    ("[trace]\nfile = 5", "trace takes file"),
    ("[trace]\nms = 5", "trace takes file"),
    ('[[step]]\nat = "1s"\nrate = "5"', "rate 5 has no unit"),
    ('[[step]]\nat = "1s"\nrate = [5]', "cannot read rate [5]"),
    ('[[step]]\nat = "1s"\nqueue_packets = "abc"', "queue_packets 'abc' must be a whole number"),
    ('[[step]]\nat = "1s"\nloss = {p = "x"}', "cannot read probability 'x'"),
    ('[[step]]\nat = "1s"\nloss = {q = 1}', "give model = bernoulli (p), gilbert-elliott"),
    ('[[step]]\nat = "1s"\nloss = {model = "droplist", indices = 5}', "droplist (indices"),
    ("[[event]]\nframe = [1]\ndrop = true", "event frame [1] must be a whole number"),
    ("[[event]]\nframe = 1\ncount = inf\ndrop = true", "event count inf must be a whole number"),
    ("[[event]]\nframe = 1\nmin_bytes = inf\ndrop = true", "cannot read size inf"),
])
def test_a_wrong_type_in_a_schedule_file_is_one_line_naming_the_file(tmp_path, text, words):
    path = tmp_path / "s.toml"
    path.write_text(text + "\n")
    with pytest.raises(ValueError) as exc:
        Schedule.load(path)
    message = str(exc.value)
    assert message.startswith(str(path)) and words in message and "\n" not in message, message


@pytest.mark.parametrize("make,words", [
    (lambda: traces.constant(1, 1.0), "carries 8.31e-05 delivery opportunities of 1504 B; it must carry "
                                      "from 1 to 10,000,000: a mean rate from 12.032kbit to 120.32gbit"),
    (lambda: traces.constant(2e11, 1.0), "carries 1.66e+07 delivery opportunities"),
    (lambda: traces.constant(12e6, 4000), "trace loop of 4000 s is longer than 3600 s"),
    (lambda: traces.alternating([1e6, 2e6], 1.0, 2000), "trace loop of 4000 s is longer than 3600 s"),
])
def test_a_generated_trace_is_bounded(make, words):
    with pytest.raises(ValueError, match=words.replace("+", r"\+")):
        make()


def test_a_binary_trace_or_schedule_is_named(tmp_path):
    from testbed.spec.schedule import Schedule, Trace
    for name, load, says in (("x.trace", Trace.load, "not text; a trace is one delivery time"),
                             ("x.toml", Schedule.load, "not text; a schedule is a TOML or JSON file")):
        (tmp_path / name).write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00")
        with pytest.raises(ValueError, match=says):
            load(tmp_path / name)


@pytest.mark.parametrize("rate", [0, -5, "0mbit", "5", "500bit", 1e-300])
def test_a_steps_rate_is_read_and_refused_as_a_links(rate):
    """A step read its rate apart from ``LinkSpec.parse`` ("rate 0 must be > 0 bit/s (or
    'unshaped')", a unitless "5" without the step's moment), its range checked in ``Step.from_dict``:
    now both read it with ``units.parse_link_rate``, the step named as ``LinkSpec`` names it."""
    with pytest.raises(ValueError) as link:
        LinkSpec.parse(rate=rate)
    with pytest.raises(ValueError) as step:
        Schedule.from_dict({"step": [{"at": "3s", "rate": rate}]})
    assert str(step.value).endswith(f"schedule step at 3.0s: {link.value}")


def test_numbers_and_counts_read_as_a_table_writes_them():
    """One rule for the tables of results, compare and reproduce (four copies before)."""
    from testbed.spec.units import counted, format_number
    assert [format_number(v) for v in (240411.3, 0.15478, 1185.3, -2.4e6)] == [
        "240,411", "0.1548", "1185", "-2,400,000"]
    assert format_number(1185.3, 5) == "1185.3" and format_number(250000.0, 5) == "250,000"
    assert [counted(n, "outage") for n in (0, 1, 2)] == ["0 outages", "1 outage", "2 outages"]
