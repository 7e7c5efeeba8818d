"""``testbed results``: past results found by their files, compared, exported tidy."""
import argparse
import csv
import json

import pytest

from experiments import load_definition, run_experiment, write_all
from experiments.results import compare, find, tidy
from tests.fixtures.fake_execute import FakeExecutor


def _exp(out, medians, reps=5):
    exp = load_definition("reuse").with_overrides(reps=reps).replace(warmup=0)
    write_all(run_experiment(exp, out, executor=FakeExecutor("params.mode", medians), quiet=True))
    return out


def test_find_compare_and_the_tidy_export(tmp_path):
    a = _exp(tmp_path / "a", {"new": 1200.0, "reuse": 250.0})
    b = _exp(tmp_path / "b", {"new": 600.0, "reuse": 250.0})
    (tmp_path / "junk").mkdir()
    found = find(tmp_path)
    assert [e.kind for e in found] == ["experiment", "experiment"]
    assert "new" in found[0].headline and found[0].verdict.startswith("complete, 10/10")
    c = compare(a, b)
    new = next(m for m in c["metrics"] if m["arm"] == "new" and m["metric"] == "completion_ms_median")
    assert new["ratio"] == pytest.approx(0.5, rel=0.1)            # B halved the new arm
    lo, hi = new["ratio_ci"]
    assert lo <= new["ratio"] <= hi < 0.8
    same = next(m for m in c["metrics"] if m["arm"] == "reuse" and m["metric"] == "completion_ms_median")
    assert same["ratio_ci"][0] < 1 < same["ratio_ci"][1] or same["ratio"] == pytest.approx(1, rel=0.05)
    rows = list(csv.DictReader(open(a / "results.csv")))
    assert len(rows) == len(tidy(a)) == 10      # 10 runs x the one metric the fake runs record
    assert {r["metric"] for r in rows} == {"completion_ms_median"}
    assert {r["valid"] for r in rows} == {"True"} and all(float(r["value"]) > 0 for r in rows)
    with pytest.raises(ValueError, match="compare two of a kind|not an experiment"):
        compare(a, tmp_path / "junk")


def test_the_cli_lists_and_compares(tmp_path, capsys):
    from testbed.cli import results as cli
    a = _exp(tmp_path / "a", {"new": 1200.0, "reuse": 250.0}, reps=2)
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["results", "--results", str(tmp_path), "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)[0]["kind"] == "experiment"
    args = p.parse_args(["results", "compare", str(a), str(a)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "differences: none" in out
    assert "(95 % CI –: an arm with fewer than 5 valid runs in A or B" in out     # 2 runs: why no CI


def test_large_numbers_print_whole_not_in_e_notation(tmp_path, capsys):
    """C3.bdp's 240,411 B printed as 2.404e+05 in compare's table (and a headline would too)."""
    from experiments.results import _num
    from testbed.cli import results as cli
    for d, v in (("a", 240220.5), ("b", 240411.0)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "summary.json").write_text(json.dumps(
            {"meta": {"title": "C3"}, "rows": [{"id": "C3.bdp", "unit": "B", "measured": v}]}))
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["results", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "240,220  240,411  1.001" in out and "e+05" not in out
    assert (_num(240411.0), _num(1236.8), _num(0.5)) == ("240,411", "1237", "0.5")


def test_a_compare_of_two_kinds_names_them_in_english(tmp_path):
    a = _exp(tmp_path / "a", {"new": 1200.0, "reuse": 250.0}, reps=2)
    r = tmp_path / "r"
    r.mkdir()
    (r / "summary.json").write_text(json.dumps({"meta": {"title": "C7"}, "rows": [{"id": "C7.direct_new"}]}))
    with pytest.raises(ValueError, match=f"^{a} is an experiment and {r} a reproduction: compare two of a kind"):
        compare(a, r)


@pytest.mark.parametrize("text", ['{"primary": "completion_ms_median", "by_', '{"x": 1}', "[]"])
def test_a_damaged_summary_is_named_never_read(tmp_path, text):
    a = _exp(tmp_path / "a", {"new": 1200.0, "reuse": 250.0}, reps=2)
    b = _exp(tmp_path / "b", {"new": 600.0, "reuse": 250.0}, reps=2)
    (b / "summary.json").write_text(text)
    listed = {e.path.name: e for e in find(tmp_path)}
    assert listed["a"].verdict.startswith("complete")
    assert listed["b"].verdict.startswith("summary damaged") and listed["b"].headline == "–"
    with pytest.raises(ValueError, match=f"{b}: no sound summary.json"):
        compare(a, b)
    write_all(b)                                    # the report writes it anew from the runs
    assert compare(a, b)["metrics"]


def test_a_damaged_reproduction_summary_is_left_out_with_its_name(tmp_path, caplog):
    (tmp_path / "reproduce-x").mkdir()
    (tmp_path / "reproduce-x" / "summary.json").write_text('{"meta": {"title"')
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / "summary.json").write_text('{"link": {}}')   # sound, not a reproduction
    with caplog.at_level("WARNING", logger="experiments.results"):
        assert find(tmp_path) == []
    assert "reproduce-x/summary.json: damaged" in caplog.text and "calibration" not in caplog.text


@pytest.mark.parametrize("damage", [
    lambda s: s["by_level"]["new"].pop("metrics"),
    lambda s: s.update(by_level={"new": 5}),
    lambda s: s.update(runs=[1]),
    lambda s: s.update(levels="new"),
])
def test_a_summary_of_the_wrong_shape_is_damaged_not_a_traceback(tmp_path, damage):
    """Valid JSON with the keys but a field gone or of another kind: was a KeyError or TypeError."""
    a = _exp(tmp_path / "a", {"new": 1200.0, "reuse": 250.0}, reps=2)
    b = _exp(tmp_path / "b", {"new": 600.0, "reuse": 250.0}, reps=2)
    s = json.loads((b / "summary.json").read_text())
    damage(s)
    (b / "summary.json").write_text(json.dumps(s))
    assert {e.path.name: e for e in find(tmp_path)}["b"].verdict.startswith("summary damaged")
    with pytest.raises(ValueError, match=f"{b}: no sound summary.json"):
        compare(a, b)
    assert tidy(b) == []


@pytest.mark.parametrize("summary", [{"meta": 1, "rows": []}, {"meta": {}, "rows": 5},
                                     {"meta": {}, "rows": [1]}, {"meta": {}, "rows": [{"x": 1}]}])
def test_a_reproduction_summary_of_the_wrong_shape_is_left_out_with_its_name(tmp_path, caplog, summary):
    (tmp_path / "reproduce-x").mkdir()
    (tmp_path / "reproduce-x" / "summary.json").write_text(json.dumps(summary))
    with caplog.at_level("WARNING", logger="experiments.results"):
        assert find(tmp_path) == []
    assert "reproduce-x/summary.json: damaged (a reproduction's has an object meta and a list rows" in caplog.text
    with pytest.raises(ValueError, match="reproduce-x/summary.json: damaged"):
        compare(tmp_path / "reproduce-x", tmp_path / "reproduce-x")


def test_reproduction_rows_without_a_measurement_compare_as_none(tmp_path, capsys):
    from testbed.cli import results as cli
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"meta": {}, "rows": [{"id": "C1.a"}]}))
    c = compare(tmp_path / "x", tmp_path / "y")        # was a KeyError: 'measured'
    assert c["metrics"] == [{"id": "C1.a", "metric": None, "a": None, "b": None, "ratio": None, "ratio_ci": None}]
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["results", "compare", str(tmp_path / "x"), str(tmp_path / "y")])
    assert args.func(args) == 0 and "C1.a  –" in capsys.readouterr().out


def test_a_manifest_that_is_not_utf8_is_left_out_with_its_name(tmp_path, caplog):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_bytes(b'{"run_id": "\xff"}')
    with caplog.at_level("WARNING", logger="experiments.results"):
        assert find(tmp_path) == []                # was a UnicodeDecodeError naming no file
    assert "run/manifest.json: not UTF-8 text (byte 0xff at offset 12)" in caplog.text


def test_compare_of_experiments_that_share_no_arm_says_what_each_has(tmp_path, capsys):
    """reuse against buffer: the differences, then an empty table and no word on why."""
    from testbed.cli import results as cli
    a = _exp(tmp_path / "a", {"new": 1200.0, "reuse": 250.0}, reps=1)
    buffer = load_definition("buffer").with_overrides(reps=1).replace(warmup=0)
    b = tmp_path / "b"
    write_all(run_experiment(buffer, b, executor=FakeExecutor("links.bottleneck.up.queue", {"20": 5.0, "1000": 14.0},
                                                              metric="goodput_mbps"), quiet=True))
    c = compare(a, b)
    assert c["metrics"] == []
    assert c["not_compared"] == "no arm in common (A: new, reuse; B: 20, 1000)"
    assert compare(a, a)["not_compared"] is None
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["results", "compare", str(a), str(b)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"nothing to compare: {c['not_compared']}" in out and "B / A" not in out


def test_compare_reads_each_summary_once(tmp_path, monkeypatch):
    """compare read every summary.json twice: once to tell what the directory is, once to compare."""
    from pathlib import Path
    a = _exp(tmp_path / "a", {"new": 1200.0, "reuse": 250.0}, reps=1)
    b = _exp(tmp_path / "b", {"new": 600.0, "reuse": 250.0}, reps=1)
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"meta": {}, "rows": [{"id": "C1.a"}]}))
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda p, *a, **k: (reads.append(p.name), real(p, *a, **k))[1])
    for pair in ((a, b), (tmp_path / "x", tmp_path / "y")):
        reads.clear()
        assert compare(*pair)["metrics"]
        assert reads.count("summary.json") == 2, reads
