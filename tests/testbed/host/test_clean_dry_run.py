"""``testbed clean --dry-run``: the plan ``clean`` executes, described instead — every state
file, process (by PID, with its command line), temp dir, probe namespace and VM guest it would
remove or end, and what it leaves alone — with nothing touched.  No root: a state directory, a
netns directory and processes of the test's own, no namespace recorded (a recorded inode would
name the test's own namespace, and every process in it)."""
import json
import os
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

from testbed.backends import vm
from testbed.cli import main
from testbed.host import lifecycle
from testbed.host.lifecycle import ProcessRecord, RunState, proc_start_time
from test_probe_netns import _gone_pid


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


@pytest.fixture
def leftovers(tmp_path, monkeypatch):
    """What crashed runs left in a state directory of the test's own: a run whose owner is gone
    (a live recorded process, a temp dir), a live run, an unreadable state file, a probe
    namespace of a gone process and of this one, a VM guest whose owner is gone."""
    state_dir, netns = tmp_path / "state", tmp_path / "netns"
    state_dir.mkdir()
    netns.mkdir()
    monkeypatch.setattr(lifecycle, "STATE_DIR", state_dir)
    monkeypatch.setattr(lifecycle, "NETNS_DIR", netns)
    procs = [subprocess.Popen(["sleep", str(60 + i)], start_new_session=True) for i in range(3)]
    try:
        crashed, owner, qemu = procs
        gone, gone_start = _gone_pid()
        tmp = tmp_path / "scratch"
        (tmp / "x").mkdir(parents=True)
        dead = RunState("tb-20250101-000000-dead", gone, gone_start, str(tmp_path / "results"),
                        processes=[ProcessRecord(crashed.pid, proc_start_time(crashed.pid), "bulk server")],
                        tmpdirs=[str(tmp), str(tmp_path / "already-gone")])
        live = RunState("tb-20250101-000000-live", owner.pid, proc_start_time(owner.pid), "")
        for st in (dead, live):
            (state_dir / f"{st.run_id}.json").write_text(json.dumps(asdict(st)))
        (state_dir / "tb-20250101-000000-bad.json").write_text('{"run_id": ')
        probe = "tbprobe-%d-%d-aaaaaa" % (gone, gone_start)
        mine = lifecycle.probe_netns_name()
        for name in (probe, mine):
            (netns / name).touch()
        guest = state_dir / "vm" / "cmd-1"
        guest.mkdir(parents=True)
        (guest / "state.json").write_text(json.dumps({
            "pid": qemu.pid, "start_time": proc_start_time(qemu.pid), "owner_pid": gone,
            "owner_start_time": gone_start}))
        deleted = []

        def delete_netns(name):
            (netns / name).unlink()
            deleted.append(name)
        monkeypatch.setattr(lifecycle, "delete_netns", delete_netns)
        yield {"root": tmp_path, "crashed": crashed, "owner": owner, "qemu": qemu, "tmp": tmp,
               "dead": dead, "live": live, "probe": probe, "mine": mine, "guest": guest, "deleted": deleted}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def test_dry_run_lists_everything_and_touches_nothing(leftovers, capsys, restore_logging):
    x = leftovers
    before = _tree(x["root"])
    assert main(["clean", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    state = lifecycle.STATE_DIR
    probes = {x["mine"]: f"{x['mine']}: probe namespace of a running process (pid {os.getpid()}); left alone",
              x["probe"]: f"{x['probe']}: probe namespace would be removed (ip netns del)"}
    assert out == [
        *(probes[name] for name in sorted(probes)),            # in the order of their names
        f"{state}/tb-20250101-000000-bad.json: unreadable state file (Expecting value: line 1 column 12 "
        "(char 11)); would be removed",
        f"tb-20250101-000000-dead: would be cleaned (its owner (pid {x['dead'].owner_pid}) is gone)",
        f"  would end bulk server (pid {x['crashed'].pid}): sleep 60",
        f"  would remove {x['tmp']}",
        f"  would remove its state file {state}/tb-20250101-000000-dead.json",
        f"tb-20250101-000000-live: still running (pid {x['owner'].pid}); left alone",
        f"would end VM cmd-1 (qemu pid {x['qemu'].pid}): sleep 62",
        f"would remove {x['guest']}",
    ]
    assert _tree(x["root"]) == before, "--dry-run removed or changed a file"
    assert all(x[p].poll() is None for p in ("crashed", "owner", "qemu")), "--dry-run ended a process"
    assert x["deleted"] == [], "--dry-run deleted a namespace"


def test_clean_does_what_the_dry_run_said(leftovers, capsys, restore_logging):
    """The plan executed: what the dry run said it would remove or end is gone, in the same order,
    and what it said it leaves alone is there."""
    x = leftovers
    assert main(["clean", "--dry-run"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert main(["clean"]) == 0
    done = capsys.readouterr().out.splitlines()
    assert x["crashed"].wait(5) is not None and x["qemu"].wait(5) is not None
    assert x["owner"].poll() is None
    assert not x["tmp"].exists() and not x["guest"].exists() and x["deleted"] == [x["probe"]]
    state = lifecycle.STATE_DIR
    assert sorted(p.name for p in state.glob("*.json")) == ["tb-20250101-000000-live.json"]
    assert (lifecycle.NETNS_DIR / x["mine"]).exists()
    assert [line.split(":")[0] for line in said if "left alone" in line] == \
        [line.split(":")[0] for line in done if "left alone" in line]
    assert f"  ended bulk server (pid {x['crashed'].pid})" in done and f"removed {x['guest']}" in done
    assert len(done) == len(said) - 1               # the state file's removal is said only when dry


def test_nothing_to_clean(tmp_path, monkeypatch, capsys, restore_logging):
    monkeypatch.setattr(lifecycle, "STATE_DIR", tmp_path / "none")
    monkeypatch.setattr(lifecycle, "NETNS_DIR", tmp_path)
    assert main(["clean", "--dry-run"]) == 0
    assert capsys.readouterr().out == "nothing to clean\n"
    assert vm.plan_clean().describe() == [] and lifecycle.clean() == ["nothing to clean"]
