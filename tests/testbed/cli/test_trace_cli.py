"""``testbed trace make`` and ``testbed trace show``: figures from the generators, one line on bad input."""
import json

import pytest

from testbed.cli import main
from testbed.spec.schedule import Trace


def test_make_then_show_with_a_plot(tmp_path, capsys):
    out = tmp_path / "alt.trace"
    assert main(["trace", "make", "alternating", "--rates", "6mbit,12mbit", "--interval", "1s",
                 "-o", str(out)]) == 0
    trace = Trace.load(out)
    assert trace.period_ms == 2000
    capsys.readouterr()
    assert main(["trace", "show", str(out), "--json", "--plot", str(tmp_path / "alt.png")]) == 0
    shown = json.loads(capsys.readouterr().out)
    # 6 and 12 Mbit/s in turn: the generator rounds to whole 1504 B opportunities per ms
    assert abs(shown["min_bps"] - 6e6) < 0.01 * 6e6 and abs(shown["max_bps"] - 12e6) < 0.01 * 12e6
    assert abs(shown["mean_bps"] - 9e6) < 0.01 * 9e6
    assert shown["opportunities"] == len(trace.ms) and shown["period"] == 2.0
    assert (tmp_path / "alt.png").stat().st_size > 0 and str(tmp_path / "alt.png") in shown["plots"]


def test_bad_input_is_one_line(tmp_path, capsys):
    back = tmp_path / "back.trace"
    back.write_text("5\n3\n")
    assert main(["trace", "show", str(back)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"testbed: error: {back}:2: timestamp 3 goes backwards (after 5); timestamps are nondecreasing"
    assert main(["trace", "make", "on-off", "--rate", "12mbit", "-o", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == "testbed: error: trace make on-off needs --on and --off"
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv,words", [
    (["show", "{trace}", "--window", "-1s"], "--window -1s: cannot read duration '-1s': expected a "
                                            "non-negative number with a unit; units: s, sec, ms, us, ns"),
    (["show", "{trace}", "--window", "nan"], "--window nan: cannot read duration 'nan'"),
    (["show", "{trace}", "--window", "0"], "--window 0: must be > 0 s, e.g. 100ms"),
    (["make", "constant", "--rate", "12mbit", "--duration", "-1s", "-o", "{out}"],
     "--duration -1s: cannot read duration '-1s'"),
    (["make", "constant", "--rate", "12", "-o", "{out}"], "--rate 12: rate 12 has no unit"),
    (["make", "alternating", "--rates", "6mbit,x", "--interval", "1s", "-o", "{out}"],
     "--rates x: cannot read rate 'x'"),
    (["make", "on-off", "--rate", "12mbit", "--on", "1s", "--off", "1 s s", "-o", "{out}"],
     "--off 1 s s: cannot read duration"),
    (["make", "markov", "--rates", "6mbit,12mbit", "--dwell", "x", "--duration", "2s", "-o", "{out}"],
     "--dwell x: cannot read duration 'x'"),
])
def test_a_bad_value_names_its_option(tmp_path, capsys, restore_logging, argv, words):
    """Was: `trace show --window -1s` said "cannot read duration '-1s'" without naming --window."""
    trace, out = tmp_path / "c.trace", tmp_path / "x.trace"
    trace.write_text("1\n2\n")
    assert main(["trace", *(a.format(trace=trace, out=out) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"testbed: error: {words}") and err.count("\n") == 1, err
    assert not out.exists()


def test_a_negative_markov_seed_is_refused(tmp_path, capsys, restore_logging):
    """It was taken (random.Random(-1) draws as Random(1))."""
    with pytest.raises(SystemExit) as exc:
        main(["trace", "make", "markov", "--rates", "6mbit,12mbit", "--dwell", "1s", "--duration", "2s",
              "--seed", "-1", "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --seed: '-1': give a whole number from 0 to 2^63-1" in err


def test_show_resolves_the_trace_by_default(tmp_path, capsys):
    """A trace alternating every 500 ms over a 1 s loop: the default window is the trace's own
    (100 ms), not one as long as the loop, which would show only the mean."""
    out = tmp_path / "cell.up"
    assert main(["trace", "make", "alternating", "--rates", "6mbit,24mbit", "--interval", "500ms",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["trace", "show", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["window"] == 0.1
    assert abs(shown["min_bps"] - 6e6) < 0.02 * 6e6 and abs(shown["max_bps"] - 24e6) < 0.01 * 24e6
    assert main(["trace", "show", str(out), "--window", "1s"]) == 0
    assert "min 14.992 and max 14.992 Mbit/s per 1 s window" in capsys.readouterr().out


def test_show_names_the_window_it_used(tmp_path, capsys, restore_logging):
    """A window below 1 ms is cut at the trace's whole ms: it said "per 1e-09 s window"."""
    out = tmp_path / "c.trace"
    assert main(["trace", "make", "constant", "--rate", "10mbit", "--duration", "1s", "--out", str(out)]) == 0
    capsys.readouterr()
    for given, used in (("1e-9s", 0.001), ("1.4ms", 0.001), ("2.6ms", 0.003), ("1e300s", 1.0)):
        assert main(["trace", "show", str(out), "--window", given, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["window"] == used, given


def test_a_timestamp_beyond_the_longest_loop_is_refused(tmp_path, capsys, restore_logging):
    """A damaged line (a run of digits) was read as a loop of 10^20 s at 0.000 Mbit/s."""
    big = tmp_path / "big.trace"
    big.write_text("1\n99999999999999999999999\n")
    assert main(["trace", "show", str(big)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"testbed: error: {big}:2: timestamp 99999999999999999999999 ms is beyond 1,000,000,000 ms (about "
        "11.6 days), the longest a trace's loop may last")
    with pytest.raises(ValueError, match="timestamp 1000000001 ms is beyond 1,000,000,000 ms"):
        Trace((1, 10**9 + 1))
    assert Trace((1, 10**9)).period_ms == 10**9
