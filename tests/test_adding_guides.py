"""The "Adding a …" guides (docs/adding.md) taken literally: every file a guide says to save is
written into a temporary directory on ``TESTBED_PATH``, and every ``testbed`` command its shell
blocks show is run (``sys.executable -m testbed``, a fresh process: the registries start
clean).  Commands that bring a topology up run in the root test; the others without root."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO

DOC = REPO / "docs" / "adding.md"
PLUGINS = "~/testbed-plugins"        # the directory the guides save their files in


def sections() -> dict[str, str]:
    """The guide's ``## `` sections by title."""
    parts = re.split(r"^## (.+)$", DOC.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def saved_files(text: str) -> dict[str, str]:
    """File name → content of every code block introduced by "save it as `~/testbed-plugins/NAME`:"."""
    return {name: body + "\n" for name, body in re.findall(
        r"[Ss]ave it as\s+`~/testbed-plugins/([\w.]+)`:\s*```\w*\n(.*?)\n```", text, re.S)}


def commands(text: str) -> list[str]:
    """Every command line of the ``sh`` blocks (comments dropped)."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        lines += [ln.split(" #")[0].strip() for ln in block.splitlines() if ln.strip()]
    return lines


def needs_root(argv: list[str]) -> bool:
    """Whether a ``testbed`` command brings a topology up (a run not on loopback, an experiment
    run, ``topo up``)."""
    if "--help" in argv:
        return False
    if argv[0] == "run":
        return argv[argv.index("--topo") + 1] != "loopback" if "--topo" in argv else True
    return argv[:2] in (["experiment", "run"], ["topo", "up"])


@pytest.fixture
def guide(tmp_path):
    """The guides' files saved in ``tmp_path/plugins``; returns (that directory, the arguments of
    every ``testbed`` command, in the guides' order)."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    text = DOC.read_text()
    for name, body in saved_files(text).items():
        (plugins / name).write_text(body)
    runs = []
    for line in commands(text):
        if line.startswith("export "):
            assert line == f"export TESTBED_PATH={PLUGINS}", line
            continue
        argv = shlex.split(line.replace(PLUGINS, str(plugins)))
        assert argv[0] == "testbed", line
        runs.append(argv[1:])
    return plugins, runs


def run_testbed(argv: list[str], plugins, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "TESTBED_PATH": str(plugins), "PYTHONPATH": str(REPO),
           "TESTBED_STATE_DIR": str(cwd / "state")}
    return subprocess.run([sys.executable, "-m", "testbed", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def manifests(root) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.glob("results/tb-*/manifest.json"))]


def test_the_guides_are_at_most_two_files_each():
    s = sections()
    for title in ("Adding a topology", "Adding a workload", "Adding an experiment", "Adding a model"):
        assert 1 <= len(saved_files(s[title])) <= 2, title
    assert "(adding-a-factor.md)" in DOC.read_text()
    files = [n for text in s.values() for n in saved_files(text)]
    assert sorted(files) == ["bdp.py", "chain.py", "chainbuffer.toml", "pingpong.py"]


def test_the_guides_commands_that_need_no_root(guide, tmp_path):
    plugins, runs = guide
    out = {}
    for argv in filter(lambda a: not needs_root(a), runs):
        r = run_testbed(argv, plugins, tmp_path)
        assert r.returncode == 0, (argv, r.stderr)
        out[" ".join(argv)] = r.stdout

    def printed(*head: str) -> str:
        [text] = [o for cmd, o in out.items() if cmd.split()[:len(head)] == list(head)]
        return text
    assert "chain: client — router — server" in printed("topo", "list")
    assert "down server → router: 20mbit, delay 10ms" in printed("topo", "show", "chain")
    assert "--count COUNT" in printed("run", "pingpong", "--help")
    assert "--cc" not in printed("run", "pingpong", "--help")      # socket_factors=False
    assert "20 of 20 messages echoed" in printed("run", "pingpong", "--topo", "loopback")
    [run] = manifests(tmp_path)                        # the loopback run of the toy workload
    assert run["status"] == "complete" and run["spec"]["workload"] == "pingpong"
    assert run["metrics"]["completion_ms"] > 0 and run["checks"]["echoed"] == 20
    assert printed("experiment", "list").splitlines()[-1].split()[:2] == ["chainbuffer", "links.bottleneck.down.queue"]
    exp = json.loads(printed("experiment", "show"))
    assert exp["base"]["topology"] == str(plugins / "chain.py")     # relative to the TOML file
    assert exp["source"] == str(plugins / "chainbuffer.toml")
    assert printed("model", "list").splitlines()[-1].split()[0] == "bdp"
    assert re.search(r"^ +bdp +250,000 B ", printed("model", "bdp"), re.M), printed("model", "bdp")


def test_a_plugin_that_fails_is_one_line_naming_its_file(guide, tmp_path):
    plugins, _ = guide
    (plugins / "broken.py").write_text("import no_such_module_here\n")
    r = run_testbed(["topo", "show", "chain"], plugins, tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == (f"testbed: error: plugin {plugins / 'broken.py'} failed to load: "
                                "ModuleNotFoundError: No module named 'no_such_module_here'")


@pytest.mark.root
def test_the_guides_commands_that_need_root(guide, tmp_path):
    plugins, runs = guide
    ran = [argv for argv in runs if needs_root(argv)]
    for argv in ran:
        r = run_testbed(argv, plugins, tmp_path)
        assert r.returncode == 0, (argv, r.stderr)
    assert not list((tmp_path / "state").glob("*.json"))        # every run torn down
    done = manifests(tmp_path)
    assert {(m["spec"]["workload"], m["status"]) for m in done} == {("bulk", "complete"),
                                                                    ("pingpong", "complete")}
    toy = [m for m in done if m["spec"]["workload"] == "pingpong"]
    assert [m["spec"]["topology"] for m in toy] == ["chain"] and toy[0]["checks"]["echoed"] == 20
    by_file = [m for m in done if m["spec"]["topology"].endswith("chain.py")]
    assert by_file and by_file[0]["spec"]["topology_params"] == {"delay": "50ms"}
    assert any(a[:2] == ["experiment", "run"] for a in ran)
    [summary] = [json.loads(p.read_text()) for p in tmp_path.glob("results/chainbuffer-*/summary.json")]
    by_level = summary["by_level"]
    assert {lev: s["n_runs"] for lev, s in by_level.items()} == {"10": 2, "1000": 2}
    # a run may be excluded on a busy machine (emulator overloaded); each level keeps a valid one
    assert all(s["n_valid"] >= 1 for s in by_level.values()), by_level
