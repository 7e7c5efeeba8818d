"""Bad experiment files, options and result directories: one line naming what is wrong and what
is allowed, exit 2, never a traceback; a damaged manifest is named, never read silently."""
import dataclasses
import json

import pytest

from experiments import run_experiment
from experiments import definition
from experiments.definition import Experiment, expand_range, load_definition
from testbed.cli import main
from testbed.spec.errors import UsageError
from tests.fixtures.fake_execute import FakeExecutor

KEYS_OF_REUSE = {"name": '"bad"', "factor": '"params.mode"', "levels": '["new", "reuse"]',
                 "metrics": '["handshake_ms"]', "reps": "2", "warmup": "0"}
BASE = '[base]\ntopology = "longhaul"\nworkload = "reqresp"\n'


def _error(capsys, argv) -> str:
    """The one line ``testbed ARGV`` printed to stderr, after checking it exited with 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("testbed: error: ") and err.count("\n") == 1, err
    return err


def test_keys_has_every_field_of_an_experiment():
    assert set(definition.KEYS) == {f.name for f in dataclasses.fields(Experiment)} - {"source"}


@pytest.mark.parametrize("key, value, message", [
    ("reps", '"two"', "reps 'two'; allowed: a whole number >= 1"),
    ("warmup", '"x"', "warmup 'x'; allowed: a whole number >= 0"),
    ("reps", "2.5", "reps 2.5; allowed: a whole number"),
    ("reps", "true", "reps True; allowed: a whole number"),
    ("factor", "5", "factor 5; allowed: a RunSpec path"),
    ("name", "5", "name 5; allowed: a string"),
    ("base", "5", "base 5; allowed: a table"),
    ("accept_degraded", '"maybe"', "accept_degraded 'maybe'; allowed: true or false"),
    ("log_x", '"yes"', "log_x 'yes'; allowed: true or false"),
    ("description", "5", "description 5; allowed: a string"),
    ("metrics", '"completion_ms_median"', "metrics 'completion_ms_median'; allowed: a list of metric names"),
    ("seed", '"abc"', "seed 'abc'; allowed: a whole number from 0 to 2^63-1"),
    ("seed", "-1", "seed a whole number from 0 to 2^63-1"),
    ("seed", str(2**64), "seed a whole number from 0 to 2^63-1 (9223372036854775807)"),
    ("models", "5", "models 5; allowed: an array of tables"),
    ("models", '[{model = "nosuch", output = "y", x = "loss"}]', "unknown model 'nosuch'; allowed: "),
    ("levels", '{ from = "1ms", to = "5ms", step = 5 }', "step must be > 0 and in the unit of from and to (ms)"),
    ("levels", '{ from = "0ms", to = "100000ms", step = "1ms" }', "more than 1000 levels"),
])
def test_a_value_of_a_wrong_type_is_one_line(tmp_path, capsys, restore_logging, key, value, message):
    keys = {**KEYS_OF_REUSE, key: value}
    path = tmp_path / "bad.toml"
    path.write_text("".join(f"{k} = {v}\n" for k, v in keys.items()) + ("" if key == "base" else BASE))
    assert message in _error(capsys, ["experiment", "show", str(path)])


def test_a_range_stops_at_its_end_and_its_step_has_the_unit(capsys, restore_logging):
    assert expand_range({"from": "1ms", "to": "6ms", "step": "2ms"}) == ("1ms", "3ms", "5ms")
    assert expand_range({"from": "0.1", "to": "0.5", "step": "0.1"}) == ("0.1", "0.2", "0.3", "0.4", "0.5")
    assert "in the unit of from and to (ms)" in _error(capsys, ["experiment", "show", "reuse",
                                                                "--levels", "1ms:5ms:5"])


@pytest.mark.parametrize("option", ["--levels", "--cross-levels"])
def test_an_empty_levels_option_is_refused(capsys, restore_logging, option):
    assert f"{option} '': no level" in _error(capsys, ["experiment", "show", "reuse", option, ""])


def test_the_runs_are_bounded_before_a_schedule_is_built(capsys, restore_logging):
    """--reps 1000000000 hung building its schedule; 100000 shows the bound without hanging unfixed."""
    err = _error(capsys, ["experiment", "show", "reuse", "--reps", "100000"])
    assert "200002 runs" in err and "at most 1000 arms and 100000 runs" in err
    with pytest.raises(UsageError, match="2000000002 runs"):
        load_definition("reuse").with_overrides(reps=10**9)
    with pytest.raises(UsageError, match="more than 1000 levels"):
        expand_range({"from": 1, "to": 10, "n": 10**9, "log": True})


def _run_dir(d, manifest) -> str:
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    return str(d)


RUN = {"run_id": "tb-1", "status": "complete", "started": 1.0, "spec": {"workload": "bulk", "topology": "image"},
       "metrics": {"goodput_mbps": 2.0}}


def test_resume_into_a_run_directory_is_refused(tmp_path):
    run = _run_dir(tmp_path / "run", RUN)
    exp = load_definition("reuse").with_overrides(reps=1, warmup=0)
    with pytest.raises(UsageError, match=r"run: not an experiment directory \(.*manifest.json is a run's manifest"):
        run_experiment(exp, run, executor=FakeExecutor("params.mode", {"new": 100.0, "reuse": 50.0}),
                       resume=True, quiet=True)


@pytest.mark.parametrize("manifest, message", [
    (RUN, "{d}: not an experiment directory ({d}/manifest.json is a run's manifest"),
    ("[1]", "{d}/manifest.json: a JSON list, not a manifest's object"),
    ('{"kind": "experiment",', "{d}/manifest.json: not valid JSON"),
    ({"kind": "experiment", "definition": {}, "schedule": []}, "{d}/manifest.json: experiment '': missing name"),
])
def test_report_of_what_is_no_experiment_directory(tmp_path, capsys, restore_logging, manifest, message):
    d = _run_dir(tmp_path / "d", manifest)
    assert message.format(d=d) in _error(capsys, ["experiment", "report", d])


def test_results_lists_the_good_runs_and_names_each_unreadable_manifest(tmp_path, capsys, restore_logging):
    _run_dir(tmp_path / "good", RUN)
    bad = {"list": "[1, 2]", "empty": "", "corrupt": '{"run_id": ', "nothing": "{}"}
    for name, text in bad.items():
        _run_dir(tmp_path / name, text)
    assert main(["results", "--results", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "run: bulk on image" in out and str(tmp_path / "good") in out
    lines = err.splitlines()
    assert len(lines) == 4 and all(line.startswith("testbed: warning: ") for line in lines)
    for name in bad:
        assert sum(str(tmp_path / name / "manifest.json") in line for line in lines) == 1


def test_results_of_a_missing_directory_or_a_file_is_an_error(tmp_path, capsys, restore_logging):
    err = _error(capsys, ["results", "--results", str(tmp_path / "nonexist")])
    assert f"{tmp_path / 'nonexist'}: no such directory" in err
    (tmp_path / "f").write_text("")
    with pytest.raises(SystemExit) as exc:              # argparse's own exit
        main(["results", "--results", str(tmp_path / "f")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert f"{tmp_path / 'f'} is not a directory; give the directory the results were written to" in err
    assert "created if missing" not in err


@pytest.mark.parametrize("manifest, message", [("[1, 2]", "a JSON list"), ('{"kind": ', "not valid JSON")])
def test_compare_names_a_damaged_manifest(tmp_path, capsys, restore_logging, manifest, message):
    a = _run_dir(tmp_path / "a", {"kind": "experiment", "definition": {"name": "x"}, "schedule": []})
    b = _run_dir(tmp_path / "b", manifest)
    assert f"{b}/manifest.json: {message}" in _error(capsys, ["results", "compare", a, b])


def test_an_experiment_file_that_is_not_utf8_is_named(tmp_path, capsys, restore_logging):
    """A definition in another encoding raised "'utf-8' codec can't decode ...", naming no file."""
    path = tmp_path / "latin1.toml"
    path.write_bytes("".join(f"{k} = {v}\n" for k, v in KEYS_OF_REUSE.items()).encode()
                     + "# caf\u00e9\n".encode("latin-1") + BASE.encode())
    assert (f"testbed: error: {path}: not UTF-8 text (byte 0xe9 at offset "
            in _error(capsys, ["experiment", "show", str(path)]))


@pytest.mark.parametrize("key, value, message", [
    ("factor", '"socket.delack_max"\nlevels = ["10ms", "40ms"]',
     "no manipulation check for factor 'socket.delack_max'; allowed: a factor "
     "with one (`testbed experiment factors` lists them), or this one unverified, its runs marked so in the "
     'report: set check = "none" in the definition'),
    ("metrics", '["goodput"]', "unknown metric 'goodput'; allowed: one of the 59 metrics `testbed experiment "
     "metrics` lists (closest: goodput_mbps)"),
])
def test_an_error_whose_allowed_list_is_long_is_not_cut(tmp_path, capsys, restore_logging, key, value, message):
    """The lists of checked factors and metrics ran past the error line's 600 characters: cut
    mid-name, the check = "none" way out cut with them."""
    keys = {**KEYS_OF_REUSE, key: value}
    if "levels" in value:
        del keys["levels"]
    path = tmp_path / "bad.toml"
    path.write_text("".join(f"{k} = {v}\n" for k, v in keys.items()) + BASE)
    err = _error(capsys, ["experiment", "show", str(path)])
    assert err.rstrip().endswith(message) and "…" not in err


@pytest.mark.parametrize("key, value, message", [
    ("reps", '"two"', "experiment 'bad': reps 'two'; allowed: a whole number >= 1"),
    ("metrics", '["speed"]', "experiment 'bad': unknown metric 'speed'; allowed: "),
    ("levels", '["new"]', "experiment 'bad': factor 'params.mode' has 1 level; allowed: two or more"),
    ("levels", '["new", "sometimes"]',
     "experiment 'bad', level 'sometimes': reqresp: params.mode 'sometimes': allowed: new, reuse"),
])
@pytest.mark.parametrize("action", ["show", "run"])
def test_an_error_in_an_experiment_file_names_the_file(tmp_path, capsys, restore_logging, key, value, message,
                                                        action):
    """An error named the experiment (and the level) but not the file it was in."""
    path = tmp_path / "bad.toml"
    path.write_text("".join(f"{k} = {v}\n" for k, v in {**KEYS_OF_REUSE, key: value}.items()) + BASE)
    with pytest.raises(UsageError) as exc:
        load_definition(path).validate()
    assert str(exc.value).startswith(f"{path}: {message}")
    out = ["--out", str(tmp_path / "out")] if action == "run" else []
    assert f"testbed: error: {path}: {message}" in _error(capsys, ["experiment", action, str(path), *out])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("factor, levels, message", [
    ('"socket.ccc"', '["cubic", "bbr"]', "experiment 'bad', level 'cubic': unknown socket factor 'ccc'; allowed: "),
    ('"sockets.cc"', '["cubic", "bbr"]', "experiment 'bad', level 'cubic': unknown RunSpec path 'sockets.cc'"),
    ('"links.bottleneck.up.rate"', '["5mbit@1s", "10mbit@1s"]',
     "experiment 'bad': level '5mbit@1s' of factor 'links.bottleneck.up.rate' is a schedule step, which the "
     "rate's check cannot verify; allowed: plain rate levels, or steps as levels of "
     "links.bottleneck.up.schedule (e.g. 'rate=5mbit@1s')"),
])
def test_a_misspelt_factor_or_a_step_as_a_fields_level_is_named_before_any_run(tmp_path, factor, levels,
                                                                              message):
    """A misspelt factor was refused as having "no manipulation check" (set check = "none", and
    only then the real error); a rate level ``5mbit@1s`` (a schedule step) passed ``show`` and
    every run of it was then excluded by the rate's check."""
    path = tmp_path / "bad.toml"
    keys = {**KEYS_OF_REUSE, "factor": factor, "levels": levels}
    path.write_text("".join(f"{k} = {v}\n" for k, v in keys.items()) + BASE)
    with pytest.raises(UsageError) as exc:
        load_definition(path).validate()
    assert str(exc.value).startswith(f"{path}: {message}"), exc.value
    if "schedule step" in message:       # unverified runs may take it (they run it as a step)
        path.write_text(path.read_text().replace("[base]", 'check = "none"\n[base]'))
        assert set(load_definition(path).validate()) == {"5mbit-1s", "10mbit-1s"}


@pytest.mark.parametrize("extra, base_links, message", [
    ('factor = "links.bottleneck.down.down"\nlevels = ["default", "2s+0.5s"]\n', "",
     "level 'default' of factor 'links.bottleneck.down.down' gives no item to verify; allowed: its "
     "items as levels (no down: links.bottleneck.down.schedule level 'none')"),
    ('factor = "links.bottleneck.down.schedule"\nlevels = ["none", "rate=4mbit@1s"]\n'
     'cross = { factor = "links.bottleneck.down.down", levels = ["2s+0.5s", "3s+1s"] }\n', "",
     "factor 'links.bottleneck.down.schedule' and factor 'links.bottleneck.down.down' both set link "
     "bottleneck.down's schedule, and the check of 'links.bottleneck.down.schedule' asks for its "
     "level's items and no others"),
    ('factor = "links.bottleneck.down.schedule"\nlevels = ["none", "delay=50ms@2s"]\n',
     '"bottleneck.down.rate" = "4mbit@1s"\n',
     "[base.links] 'bottleneck.down.rate' and factor 'links.bottleneck.down.schedule' both set link "
     "bottleneck.down's schedule"),
    ('factor = "links.bottleneck.down.down"\nlevels = ["2s+0.5s", "3s+1s"]\n',
     '"bottleneck.down.schedule" = "none"\n',
     "[base.links] 'bottleneck.down.schedule' = 'none' removes the outage of factor "
     "'links.bottleneck.down.down'"),
])
def test_link_levels_whose_check_would_exclude_every_run_are_refused(tmp_path, extra, base_links, message):
    """`default` of an outage factor, a schedule crossed with an outage on one direction, a
    schedule over a step of [base.links], an outage the base's schedule none removes: each
    validated, then every run failed its check."""
    path = tmp_path / "bad.toml"
    keys = {k: v for k, v in KEYS_OF_REUSE.items() if k not in ("factor", "levels")}
    base = BASE + (f"[base.links]\n{base_links}" if base_links else "")
    path.write_text("".join(f"{k} = {v}\n" for k, v in keys.items()) + extra + base)
    with pytest.raises(UsageError) as exc:
        load_definition(path).validate()
    assert str(exc.value).startswith(f"{path}: experiment 'bad': {message}"), exc.value
    path.write_text(path.read_text().replace("[base]", 'check = "none"\n[base]'))
    load_definition(path).validate()                    # unverified runs may take it
