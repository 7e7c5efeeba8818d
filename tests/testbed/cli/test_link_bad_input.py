"""Bad link values on the command line (``topo show --set/--link``, ``calibrate --schedule``,
``trace make``): one line ``testbed: error: ...`` saying what is allowed, exit 2, no traceback."""

import pytest

from testbed.cli import main


def refused(capsys, argv: list[str], words: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("testbed: error: ") and words in err and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("option,words", [
    (["--set", "queue=1.5"], "queue limit 1.5: a packet count must be whole"),
    (["--set", "queue=1e30"], "queue limit 1e+30 packets is too large; a queue holds at most 10000000"),
    (["--link", "bottleneck.up.queue=1.5"], "queue limit 1.5: a packet count must be whole"),
    (["--set", "rate_up=5"], "rate 5 bit/s is out of range; a link's rate is 1kbit to 100gbit (a number "
                             "without a unit is bit/s: write 5mbit for Mbit/s)"),
    (["--set", "rate_up=true"], "cannot read rate true"),
    (["--link", "bottleneck.up.rate=5@3s"], "rate 5 has no unit, which is 5 bit/s; write 5mbit"),
    (["--set", "rate_up=1e30gbit"], "rate 1e30gbit is out of range; a link's rate is 1kbit to 100gbit "
                                    "(1e-06gbit to 100gbit), e.g. 10mbit"),
    # a rate with a unit: the range in that unit, not "write 1e-294mbit" (the number in bit/s + mbit)
    (["--link", "bottleneck.up.rate=1e-300mbit"], "rate 1e-300mbit is out of range; a link's rate is "
                                                  "1kbit to 100gbit (0.001mbit to 100000mbit), e.g. 10mbit\n"),
    (["--link", "bottleneck.up.rate=500bit"], "rate 500bit is out of range; a link's rate is 1kbit to "
                                              "100gbit (1000bit to 1e+11bit), e.g. 10mbit\n"),
    (["--link", "bottleneck.up.rate=500bit@3s"], "schedule step at 3.0s: rate 500bit is out of range"),
    (["--link", "bottleneck.up.rate=@3s"], "schedule step at 3.0s: rate '': give a rate (e.g. 4mbit) or "
                                           "'unshaped'"),       # it was an unshaped step
    (["--set", "rate_up=1e-300"], "rate 1e-300 bit/s is out of range; a link's rate is 1kbit to 100gbit, "
                                  "e.g. 10mbit\n"),
    (["--set", "delay=1e12s"], "delay 1e+12 s must be >= 0 s and at most 3600 s (an hour)"),
    # the second step silently replaced the first
    (["--link", "bottleneck.up.rate=4mbit@3s", "--link", "bottleneck.up.rate=2mbit@1s"],
     "--link bottleneck.up.rate given twice; allowed: each key once; several steps of rate go in one "
     "schedule: --link 'bottleneck.up.schedule=rate=VALUE@MOMENT;rate=VALUE@MOMENT'\n"),
    (["--link", "bottleneck.up.schedule=none", "--link", "bottleneck.up.schedule=none"],
     "--link bottleneck.up.schedule given twice; allowed: each key once\n"),
    (["--set", "delay=10ms", "--set", "delay=20ms"], "--set delay given twice; allowed: each key once\n"),
])
def test_topo_show_refuses_bad_link_values(capsys, restore_logging, option, words):
    refused(capsys, ["topo", "show", "image", *option], words)


@pytest.mark.parametrize("text,words", [
    ("step = 5", "step = 5: each step is a table of fields"),
    ('event = "x"', "event = 'x': each event is a table of fields"),
    ("trace = 5", "trace takes file"),
])
def test_a_schedule_file_of_wrong_types_is_one_line(tmp_path, capsys, restore_logging, text, words):
    path = tmp_path / "s.toml"
    path.write_text(text + "\n")
    for argv in (["topo", "show", "image", "--link", f"bottleneck.up.schedule={path}"],
                 ["calibrate", "--schedule", str(path)]):
        assert f"{path}: " in refused(capsys, argv, words)


@pytest.mark.parametrize("args,words", [
    (["constant", "--rate", "12mbit", "--out", "{tmp}"], "--out {tmp}: cannot write the trace (Is a directory)"),
    (["constant", "--rate", "12mbit", "--out", "{tmp}/no/x.trace"], "cannot write the trace (No such file"),
    (["constant", "--rate", "12mbit", "--duration", "4000s", "--out", "{tmp}/x"],
     "trace loop of 4000 s is longer than 3600 s (an hour)"),
    (["constant", "--rate", "200gbit", "--out", "{tmp}/x"], "it must carry from 1 to 10,000,000"),
    (["constant", "--rate", "1bit", "--out", "{tmp}/x"], "a mean rate from 12.032kbit"),
    (["constant", "--rate", "12mbit", "--rates", "1mbit,2mbit", "--dwell", "1s", "--on", "1s", "--out", "{tmp}/x"],
     "trace make constant: --rates is an option of alternating and markov; --on is an option of on-off; "
     "--dwell is an option of markov (give constant --rate, --duration)"),
])
def test_trace_make_refuses_what_it_cannot_write(tmp_path, capsys, restore_logging, args, words):
    refused(capsys, ["trace", "make", *(a.format(tmp=tmp_path) for a in args)], words.format(tmp=tmp_path))
    assert not (tmp_path / "x").exists()
