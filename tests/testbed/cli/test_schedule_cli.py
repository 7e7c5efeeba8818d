"""A bad link schedule is one line naming its file and line, on every command that brings links
up, before anything starts (no root needed to be refused)."""
import pytest

from testbed.cli import main

COMMANDS = {
    "topo show": ["topo", "show", "longhaul"],
    "topo up": ["topo", "up", "longhaul", "--hold", "1"],
    "run": ["run", "bulk", "--duration", "1s", "--backend", "userspace"],
    "experiment show": ["experiment", "show", "handover", "--levels"],   # a schedule as a level
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_steps_out_of_order_name_the_file_and_line(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)                   # where a run would make results/
    bad = tmp_path / "bad.toml"
    bad.write_text('[[step]]\nat = "3s"\nrate = "10mbit"\n\n[[step]]\nat = "2s"\nrate = "5mbit"\n')
    assert main([*COMMANDS[command], f"none,{bad}"] if command == "experiment show" else
                [*COMMANDS[command], "--link", f"bottleneck.down.schedule={bad}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("testbed: error: ")
    assert f"{bad}:5: step at 2.0s is not after the step before it (3.0s)" in err
    assert not (tmp_path / "results").exists()


def test_a_backwards_trace_and_an_unknown_field_are_one_line(tmp_path, capsys):
    trace = tmp_path / "back.trace"
    trace.write_text("5\n3\n")
    assert main(["topo", "show", "longhaul", "--link", f"bottleneck.up.trace={trace}"]) == 2
    assert f"{trace}:2: timestamp 3 goes backwards" in capsys.readouterr().err
    sched = tmp_path / "s.json"
    sched.write_text('{"step": [{"at": "1s", "rat": "5mbit"}]}')
    assert main(["topo", "show", "longhaul", "--link", f"bottleneck.up.schedule={sched}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown field(s) ['rat']; allowed: at, rate" in err


def test_topo_show_prints_a_trace_in_the_rate_s_place(tmp_path, capsys):
    """A trace replaces the rate from the origin on: the direction shows the trace and its mean,
    the rate only as what holds until the origin; the other direction keeps its rate."""
    trace = tmp_path / "cell.up"
    assert main(["trace", "make", "alternating", "--rates", "6mbit,24mbit", "--interval", "500ms",
                 "--out", str(trace)]) == 0
    capsys.readouterr()
    assert main(["topo", "show", "longhaul", "--link", f"bottleneck.down.trace={trace}",
                 "--link", "bottleneck.down.down=2s+1s"]) == 0
    lines = {line.split(":", 1)[0].split()[0]: line.split(": ", 1)[1]
             for line in capsys.readouterr().out.splitlines() if "→" in line}
    assert lines["down"] == (f"trace {trace} (14.9919mbit mean; 333mbit until the origin), delay 100ms, "
                             "loss 14%, queue 5499p, schedule: 0 steps, 1 outage, 0 events")
    assert lines["up"] == "333mbit, delay 100ms, queue 5499p"
