"""`testbed run` bad input from a user's walk: one line naming what is wrong and what is
allowed, exit 2, before anything is brought up (no run directory; no root)."""
import pytest


@pytest.mark.parametrize("args,message", [
    (["reqresp", "--sample", "abc"], "reqresp: --sample 'abc': cannot read duration 'abc'"),
    (["reqresp", "--process", "abc"], "reqresp: --process 'abc': cannot read duration 'abc'"),
    (["reqresp", "--cc", "vegasx"], "cc 'vegasx': not available on this kernel; available: "),
    (["reqresp", "--topo", "nosuch"], ", loopback (no topology: 127.0.0.1, no root)"),
    (["reqresp", "--topo", "loopback", "--capture", "none", "--full-payload"],
     "--capture none with --full-payload"),
    (["audio", "--topo", "loopback", "--capture", "none", "--chunk", "0ms"], "audio: --chunk 0ms: give more than 0"),
    (["audio", "--topo", "loopback", "--capture", "none", "--rate", "0"], "audio: --rate 0: give more than 0"),
    (["duplicate", "--topo", "dualpath", "--paths", "10.9.9.9,10.0.2.1", "--chunks", "3"],
     "its addresses: 10.0.1.1, 10.0.2.1"),
    (["multipath", "--topo", "dualpath", "--paths", "10.9.9.9,10.0.2.1"], "its addresses: 10.0.1.1, 10.0.2.1"),
    (["duplicate", "--topo", "dualpath", "--paths", "10.9.9.9"], "duplicate: --paths 10.9.9.9: 10.9.9.9 not"),
    # a negative value with a unit reaches the parameter's own check (argparse took it for an
    # option: "argument --think: expected one argument"), which names the option given
    (["reqresp", "--think", "-1s"], "reqresp: --think '-1s': cannot read duration '-1s'"),
    (["reqresp", "--set", "params.think=-1s"], "reqresp: --set params.think '-1s': cannot read duration"),
    (["bulk", "--topo", "loopback", "--capture", "none"], "bulk: needs exactly one of --size or --duration"),
    (["audio", "--topo", "loopback", "--capture", "none", "--duration", "5ms"],
     "audio: --duration 5ms is shorter than one chunk (20ms)"),
])
def test_bad_run_input_is_one_line_before_bring_up(tmp_path, capsys, restore_logging, args, message):
    from testbed.cli import main
    assert main(["run", *args, "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert "params." not in err.replace("--set params.", ""), err     # named as given here
    assert not list(tmp_path.iterdir())


def test_help_shows_a_boolean_factors_default_as_the_values_it_takes(capsys):
    """`--slow-start-after-idle` takes 0/1 (docs: `0|1`); --help said `(default: True)`."""
    import argparse

    from testbed.spec import factors
    p = argparse.ArgumentParser()
    factors.add_arguments(p, "host")
    text = " ".join(p.format_help().split())
    assert "tcp_slow_start_after_idle (0/1) in both namespaces (default: 1)" in text
    assert "True" not in text
