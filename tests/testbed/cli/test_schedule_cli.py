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
