"""The reproduce table (experiments/reproduce*.py) and the two CLIs (testbed model, testbed
reproduce), without root: measurements come from tests.fixtures.fake_execute's executor."""
import argparse
import json
import statistics
from pathlib import Path

import pytest

from analysis.models import MODELS
from experiments.reproduce.cases import REPLACE_BLOCKS, ROWS, select, within
from experiments.reproduce.report import write
from experiments.reproduce.run import measure_all, pooled_values, result_rows


def _cli(argv, modules=("testbed.cli.model", "testbed.cli.reproduce")):
    import importlib
    p = argparse.ArgumentParser(prog="testbed")
    sub = p.add_subparsers(dest="command")
    for m in modules:
        importlib.import_module(m).register(sub)
    args = p.parse_args(argv)
    return args.func(args)


def test_every_case_has_rows_ids_are_unique_and_models_evaluate():
    assert {r.case for r in ROWS} == {f"C{i}" for i in range(1, 16)}
    assert len({r.id for r in ROWS}) == len(ROWS)
    for r in ROWS:
        if r.model is not None:
            assert r.model.name in MODELS and isinstance(r.model.value(), float), r.id
        assert (r.measure is None) == bool(r.unmeasured), f"{r.id}: a measure or a reason, not both"
        assert r.unmeasured == "" or r.unmeasured.startswith(("not yet measured", "model-only")), r.id


def test_select_cases_ids_and_refusal():
    assert {r.case for r in select(["C1", "C7"])} == {"C1", "C7"}
    assert [r.id for r in select(["C7.ratio_new"])] == ["C7.ratio_new"]
    assert select(["c7"]) == select(["C7"]) and select(["c7.ratio_new"]) == select(["C7.ratio_new"])
    assert select(["All"]) == select([])
    with pytest.raises(ValueError, match="valid: all, C1, C2"):
        select(["C99"])


def test_within_is_relative_and_none_without_a_value():
    assert within(105, 100, 0.05) and not within(106, 100, 0.05)
    assert within(None, 1, 0.1) is None


class _Dispatch:
    """One fake executor per topology: relay (direct 1200 / relay 300 ms) and longhaul (reuse)."""

    def __init__(self):
        from tests.fixtures.fake_execute import FakeExecutor
        self.relay = FakeExecutor("params.path", {"direct": 1200.0, "relay": 300.0})
        self.reuse = FakeExecutor("params.mode", {"new": 1200.0, "reuse": 250.0})
        self.specs = []

    def __call__(self, plan, out_dir, **kw):
        self.specs.append(plan.spec)
        return (self.relay if plan.spec.topology == "relay" else self.reuse)(plan, out_dir, **kw)


def test_measured_rows_come_from_the_experiment_runs(tmp_path):
    rows = select(["C7"])
    ex = _Dispatch()
    measured = measure_all(rows, tmp_path, quick=True, executor=ex)
    assert all("error" not in v for v in measured.values()), measured
    # relay (new), relay with params.mode=reuse, reuse: only the levels the rows read, 2 reps each
    assert len(measured) == 3 and len(ex.specs) == 3 * 2 * 2
    assert {s.get("params.mode") for s in ex.specs if s.topology == "relay"} == {"new", "reuse"}
    # relay new connections as the model assumes them (SOCKS5 reply at once); --quick: 5 requests
    assert {s.get("params.connect_mode") for s in ex.specs
            if s.topology == "relay" and s.get("params.mode") == "new"} == {"optimistic"}
    assert {str(s.get("params.requests")) for s in ex.specs} == {"5"}
    res = {r["id"]: r for r in result_rows(rows, measured, quick=True)}
    assert res["C7.direct_new"]["measured"] == pytest.approx(1200, rel=0.15)
    # C7: the median of every request (the chapter's statistic): n = 2 runs x 10 requests (fake)
    assert res["C7.direct_new"]["n"] == 2 * 10 and res["C7.direct_new"]["experiment_dir"]
    assert res["C7.ratio_new"]["measured"] == pytest.approx(4.0, rel=0.2)
    # a ratio row is the quotient of its experiment's two levels' medians over every request
    exp_dir = Path(res["C7.ratio_new"]["experiment_dir"])
    summary = json.loads((exp_dir / "summary.json").read_text())
    direct, relay = (statistics.median(pooled_values(exp_dir, summary, lv, "completion_ms"))
                     for lv in ("direct", "relay"))
    assert res["C7.ratio_new"]["measured"] == pytest.approx(direct / relay)
    assert res["C7.ratio_new"]["ci95"] is None       # 2 runs a level: a CI needs MIN_N_CI runs
    assert res["C7.direct_keepalive"]["measured"] == pytest.approx(250, rel=0.15)
    # the chapter's 301.6 ms vs a fake 300 ms: within 15 %; 236.5 vs 300: a miss with its cause
    assert res["C7.relay_new"]["ok"] is True
    assert res["C7.relay_keepalive"]["ok"] is False
    assert res["C7.relay_keepalive"]["note"].startswith("miss: ")
    # a miss says how busy the host was during its experiment (load, CPU busy, steal)
    assert "during its experiment: host load" in res["C7.relay_keepalive"]["note"]
    assert res["C7.relay_keepalive"]["host"]["cores"] >= 1
    # pooled statistics read every request of the level's valid runs from their manifests
    from experiments.reproduce.cases import Measure
    from experiments.reproduce.run import measured_value
    relay = next(v for k, v in measured.items() if k == ("relay", (("params.connect_mode", "optimistic"),)))
    mean, ci, n, _ = measured_value(relay["summary"], Measure("relay", "completion_ms", "direct",
                                                              statistic="pooled_mean"), relay["dir"])
    # the fake executor logs 10 requests a run; 2 runs give no CI (the run is the unit)
    assert n == 2 * 10 and ci is None and mean == pytest.approx(1200, rel=0.1)


def test_a_miss_names_the_cause_of_its_direction_and_a_model_it_matches(tmp_path):
    """The fake relay arm measures 300 ms: against a chapter value above it the row's cause_low
    is named, against one below it its cause; a miss within tolerance of the model says so."""
    import dataclasses

    class Model:
        def __init__(self, v):
            self.v = v

        def value(self):
            return self.v

        def describe(self):
            return "fake"
    row = select(["C7.relay_new"])[0]
    measured = measure_all([row], tmp_path, quick=True, executor=_Dispatch())
    variants = [dataclasses.replace(row, chapter=400.0, cause="HIGH", cause_low="LOW", model=Model(1000.0)),
                dataclasses.replace(row, chapter=200.0, cause="HIGH", cause_low="LOW", model=Model(290.0))]
    low, high = result_rows(variants, measured, quick=True)
    assert low["ok"] is False and low["note"].startswith("miss: LOW;") and "model's" not in low["note"]
    assert high["ok"] is False and high["note"].startswith(
        "miss: HIGH (the measured value is within tolerance of the model's 290);")


def test_failed_experiment_is_a_note_not_a_number(tmp_path):
    def broken(plan, out_dir, **kw):
        from testbed.spec.errors import SetupError
        raise SetupError("no netem here")
    rows = select(["C7.direct_new"])
    res = result_rows(rows, measure_all(rows, tmp_path, quick=True, executor=broken), quick=True)
    assert res[0]["measured"] is None and "no netem here" in res[0]["note"]


def test_report_files_and_html_embed_every_figure(tmp_path):
    rows = select(["C1", "C4", "C6", "C7", "C9", "C10", "C11"])
    measured = measure_all(select(["C7"]), tmp_path, quick=True, executor=_Dispatch())
    res = result_rows(rows, measured, quick=True)
    meta = {"title": "test", "started": "s", "finished": "f", "load_before": "0", "load_after": "0",
            "mode": "quick", "rows": len(res), "measured": 6, "ok": 0}
    summary = write(tmp_path, meta, res)
    html = (tmp_path / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(summary["figures"]) == 9
    assert {f["case"] for f in summary["figures"]} == {"C1", "C4", "C6", "C7", "C9", "C10", "C11"}
    assert {f["png"] for f in summary["figures"] if f["case"] == "C7"} == {"figures/measured-c7.png",
                                                                           "figures/c7.png"}
    assert html.count("<details>") >= len(res)      # every row's explanation one click away
    assert json.loads((tmp_path / "summary.json").read_text())["rows"][0]["id"] == "C1.serial_total"
    assert "| C7.ratio_new |" in (tmp_path / "report.md").read_text()


def test_model_cli_evaluates_with_units_and_json(capsys):
    assert _cli(["model", "fec", "--loss", "5%", "--packets", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"]["loss"] == 0.05 and out["outputs"]["fec_repair"]["value"] == 14
    assert _cli(["model", "serial", "--uplink", "100mbit"]) == 0
    assert "3.2" in capsys.readouterr().out
    assert _cli(["model", "list"]) == 0
    assert "migration" in capsys.readouterr().out
    assert _cli(["model", "placement", "--rounds", "3", "--cloud-uplinks", "6.4mbit,3.2mbit,12.8mbit",
                 "--disconnect-after", "2", "--committed", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"]["cloud_uplinks"] == [6.4e6, 3.2e6, 12.8e6]
    assert out["outputs"]["total_cloud"]["value"] == pytest.approx(0.14 + 3 * 0.573 + 1 + 2 + 0.5)


@pytest.mark.parametrize("argv,needle", [
    (["model", "fec", "--bogus", "1"], "unrecognized arguments: --bogus 1; valid: --size"),
    (["model", "fec", "--loss", "abc"], "invalid number value"),
    (["model", "nosuch"], "invalid choice: 'nosuch'"),
])
def test_model_cli_bad_input_is_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        _cli(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and err.count("\n") == 1


def test_reproduce_cli_model_only(tmp_path, capsys):
    assert _cli(["reproduce", "C6", "C10", "--model-only", "--json", "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["id"]: r for r in out["rows"]}
    assert rows["C6.fec_repair"]["model"] == 63 and rows["C6.fec_repair"]["measured"] is None
    assert rows["C10.data_exchange"]["note"].startswith("model-only: ")
    assert (tmp_path / "report.html").is_file()
    # how it was run, so that `results compare` tells a cluster's or a backend's run from another
    assert {k: out["meta"][k] for k in ("backend", "cluster", "keep_topology")} == {
        "backend": "auto", "cluster": "this machine", "keep_topology": False}


def test_path_rows_read_testbed_calibrate_json():
    from experiments.reproduce.cases import ROWS
    from experiments.reproduce.run import _calibrated
    res = {"dir": "x", "calibrate": {"measured": {
        "rtt_ms": {"min": 200.2, "median": 200.4, "probes": 200, "echoed": 200},
        "loss": {"up": 0.0, "down": 0.1377}, "loss_sent": {"up": 10000, "down": 10000}}}}
    rows = {r.id: r for r in ROWS}
    assert _calibrated(res, rows["C5.rtt_min"].measure) == (200.2, None, 200, "")
    assert _calibrated(res, rows["C5.loss_down"].measure)[:3] == (0.1377, None, 10000)
    res["calibrate"]["measured"]["loss"].pop("up")
    assert _calibrated(res, rows["C5.lost_up"].measure)[0] is None


def test_every_measure_names_a_valid_experiment_level_and_spec():
    """Typos in the table (experiment, level, --set path) are caught without running anything."""
    from experiments.reproduce.cases import CALIBRATE
    from experiments.reproduce.run import experiment_for
    for r in ROWS:
        m = r.measure
        if m is None or m.experiment == CALIBRATE:
            continue
        exp = experiment_for(m, set(m.levels or (m.level,)), 2, True, None)
        exp.validate()
        assert set(m.levels or (m.level,)) <= set(exp.labels), r.id
        assert m.statistic in ("median", "ratio", "difference", "pooled_mean", "pooled_median",
                               "pooled_p99", "pooled_max", "pooled_ratio"), r.id


def test_an_experiment_runs_only_the_arms_its_rows_read():
    from experiments.reproduce.run import experiment_for, wanted_measures
    wanted = {m.experiment: (m, levels) for m, levels in wanted_measures(list(ROWS), True).values()
              if not m.sets}
    m, levels = wanted["initcwnd"]                      # C4 reads the initial window of 10 only
    assert levels == {"10"} and experiment_for(m, levels, 2, True, None).labels == ("10",)
    m, levels = wanted["reuse"]                         # C6/C7 read both arms
    assert experiment_for(m, levels, 2, True, None).labels == ("new", "reuse")


def test_a_pooled_p99_needs_100_values(monkeypatch):
    import experiments.reproduce.run as rr
    m = next(r for r in ROWS if r.id == "C6.arq_p99_rounds").measure
    values = [1.0] * 98 + [5.0, 6.0]
    runs = [values[i:i + 20] for i in range(0, 100, 20)]
    monkeypatch.setattr(rr, "pooled_runs", lambda *a, **k: [values[:99]])
    value, ci, n, why = rr.pooled("x", {}, m)
    assert value is None and n == 99 and "needs 100 values, the runs have 99 (the largest is 5)" in why
    monkeypatch.setattr(rr, "pooled_runs", lambda *a, **k: runs)
    value, ci, n, why = rr.pooled("x", {}, m)
    assert n == 100 and 5.0 < value < 6.0 and not why and ci[0] <= value <= ci[1]


def test_a_pooled_value_of_fewer_than_five_runs_has_no_ci(monkeypatch):
    """One agent run (--quick on a path without random draws) gave "CI [107.43, 107.43]"; and
    the requests of a run share its link seed, so many values of few runs are no more a CI than
    few values: experiments.stats gives none below MIN_N_CI runs."""
    import experiments.reproduce.run as rr
    from experiments.stats import MIN_N_CI
    m = next(r for r in ROWS if r.id == "C12.total_reuse").measure
    for k in (1, MIN_N_CI - 1, MIN_N_CI):
        monkeypatch.setattr(rr, "pooled_runs", lambda *a, k=k, **kw: [[100.0 + i, 101.0 + i] for i in range(k)])
        value, ci, got, why = rr.pooled("x", {}, m)
        assert got == 2 * k and not why and (ci is None) == (k < MIN_N_CI)


def test_a_measure_of_the_chapters_n_pools_the_first_runs_only(tmp_path, monkeypatch):
    """C9.real_stall_max is the worst of the first 8 receptions (the chapter's n), in run order,
    valid runs only, whatever the experiment's repetitions."""
    import experiments.reproduce.run as rr
    from types import SimpleNamespace
    runs = [{"dir": f"runs/{i:03d}-40ms", "level": "40ms", "valid": i != 2} for i in range(10)]
    monkeypatch.setattr("testbed.spec.runresult.load_run", lambda d: SimpleNamespace(
        metrics={"audio_stall_ms": 100.0 * int(Path(d).name[:3])}, checks={}))
    m = next(r for r in ROWS if r.id == "C9.real_stall_max").measure
    assert m.runs == 8
    values = rr.pooled_values(tmp_path, {"runs": runs[::-1]}, "40ms", m.metric, m.source, m.runs)
    assert values == [0, 100, 300, 400, 500, 600, 700, 800]         # run 2 invalid, 9 the 9th valid
    assert rr.pooled(tmp_path, {"runs": runs}, m)[:1] == (800,)


def test_commands_are_registered_in_the_testbed_cli():
    import subprocess
    import sys
    from conftest import REPO
    out = subprocess.run([sys.executable, "-m", "testbed", "model", "window", "--window", "64KB",
                          "--json"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outputs"]["batch_cycle"]["value"] == pytest.approx(125.6)
    bad = subprocess.run([sys.executable, "-m", "testbed", "reproduce", "C99", "--model-only"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and "valid: all, C1" in bad.stderr and "Traceback" not in bad.stderr


def test_host_load_flags_a_busy_machine():
    from experiments.reproduce.run import describe_load, host_load
    cpu0 = [0] * 10
    quiet = host_load(((0.5, 0, 0), cpu0), ((0.7, 0, 0), [50, 0, 0, 150, 0, 0, 0, 0, 0, 0]))
    assert not quiet["busy"] and quiet["cpu_busy"] == 0.25 and quiet["steal"] == 0
    stolen = host_load(((0.5, 0, 0), cpu0), ((0.5, 0, 0), [80, 0, 0, 10, 0, 0, 0, 10, 0, 0]))
    assert stolen["busy"] and stolen["steal"] == 0.1
    loaded = host_load(((2 * stolen["cores"], 0, 0), cpu0), ((0.5, 0, 0), [1, 0, 0, 1, 0, 0, 0, 0, 0, 0]))
    assert loaded["busy"] and "steal 10.0%" in describe_load(stolen)
    instant = host_load(((0.5, 0, 0), cpu0), ((0.5, 0, 0), [3, 0, 0, 0, 0, 0, 0, 0, 0, 0]))  # 3 ticks
    assert instant["cpu_busy"] is None and not instant["busy"] and "not measured" in describe_load(instant)


def test_pooled_ratio_is_the_quotient_of_the_pooled_medians(monkeypatch):
    """Not the ratio of per-run medians: run medians 1 and 10 (median 5.5) vs every value."""
    import experiments.reproduce.run as rr
    from experiments.reproduce.cases import Measure
    runs = {"a": [[1.0], [1.0], [1.0], [10.0], [10.0]], "b": [[2.0], [2.0], [2.0], [2.0], [2.0]]}
    monkeypatch.setattr(rr, "pooled_runs", lambda d, s, level, metric, source="metrics": runs[level])
    m = Measure("e", "completion_ms", statistic="pooled_ratio", levels=("a", "b"))
    value, ci, n, why = rr.pooled_ratio("x", {}, m)
    assert value == pytest.approx(0.5) and n == 5 and not why
    assert ci[0] <= value <= ci[1]
    runs["b"] = [[2.0] * 3] * 4                  # fewer than MIN_N_CI runs: no CI, as stats.describe
    assert rr.pooled_ratio("x", {}, m)[1:3] == (None, 5)
    runs["b"] = []
    assert rr.pooled_ratio("x", {}, Measure("e", "m", statistic="pooled_ratio", levels=("a", "b")))[0] is None


def test_a_calibration_whose_check_failed_still_measures(tmp_path, monkeypatch):
    """`testbed calibrate` exits 1 when a check fails (e.g. the scheduling error on a busy
    machine): its JSON still holds the path's RTT and loss, which the C5 rows read."""
    import subprocess as sp
    from experiments.reproduce import run as rr
    result = {"ok": False, "measured": {"rtt_ms": {"min": 200.3, "echoed": 200}}}
    monkeypatch.setattr(sp, "run", lambda *a, **k: sp.CompletedProcess(a, 1, json.dumps(result), ""))
    res = rr.calibrate(tmp_path / "c", None)
    assert res["calibrate"] == result and (tmp_path / "c" / "calibrate.json").is_file()
    monkeypatch.setattr(sp, "run", lambda *a, **k: sp.CompletedProcess(a, 1, "", "testbed: error: x"))
    assert rr.calibrate(tmp_path / "d", None) == {"error": "testbed calibrate exited 1: testbed: error: x"}


def test_an_interrupted_reproduce_says_that_the_same_out_continues_it(capsys, monkeypatch, tmp_path):
    """Finished runs are reused by a reproduce into the same --out: interrupted (here SIGTERM;
    Ctrl-C alike), it says so, with the command."""
    import signal
    import sys

    from experiments.reproduce import run as rr

    def interrupted(*a, **k):
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop reproduce")
    monkeypatch.setattr(rr, "can_measure", lambda: None)
    monkeypatch.setattr(rr, "measure_all", interrupted)
    argv = ["reproduce", "C7", "--quick", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", ["testbed", *argv])
    old = signal.signal(signal.SIGTERM, lambda *a: None)    # without a handler of its own: noted only
    try:
        with pytest.raises(SystemExit, match="143"):
            _cli(argv)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert capsys.readouterr().err == (f"testbed: reproduce interrupted; its finished runs are kept in {tmp_path}; "
                                       "running it again with the same --out continues, reusing them:\n"
                                       f"  testbed reproduce C7 --quick --out {tmp_path}\n")


def test_bare_reproduce_lists_the_cases_with_estimates_and_starts_nothing(capsys, monkeypatch):
    """A bare `testbed reproduce` started everything (≈ 2.5 h)."""
    from experiments.reproduce import run as rr

    def started(*a, **k):
        raise AssertionError("a bare reproduce must not measure")
    monkeypatch.setattr(rr, "measure_all", started)
    assert _cli(["reproduce"]) == 0
    out = capsys.readouterr().out
    assert "nothing was started" in out and "--quick" in out and "full" in out
    lines = {line.split()[0]: line for line in out.splitlines()[2:] if line.startswith("  C") or
             line.startswith("  all")}
    assert set(lines) == {r.case for r in ROWS} | {"all"}
    assert "(12 runs)" in lines["C7"] and " min " in lines["C7"]     # 3 arms x 2 reps x 2 levels
    assert " h (" in lines["all"]                                    # the full run takes hours
    assert lines["C8"].split()[1:3] == ["7", "7"]                    # rows, measured
    # the estimate is runs x the measured seconds per run of each experiment (+ a calibration)
    # + the report's figures per case
    from experiments.reproduce.cases import CALIBRATE_SECONDS, REPORT_SECONDS, RUN_SECONDS
    c7 = rr.estimate(select(["C7"]), quick=True)
    assert c7["runs"] == 12 and c7["seconds"] == pytest.approx(
        4 * RUN_SECONDS["relay"][0] * 2 + 4 * RUN_SECONDS["reuse"][0] + REPORT_SECONDS)
    c5 = rr.estimate(select(["C5.rtt_min"]), quick=True)
    assert c5 == {"experiments": 1, "runs": 0, "seconds": CALIBRATE_SECONDS + REPORT_SECONDS}
    assert rr.estimate(select(["C7", "C8"]), quick=True)["seconds"] == pytest.approx(
        c7["seconds"] + rr.estimate(select(["C8"]), quick=True)["seconds"])
    full = rr.estimate(select(["C7"]), quick=False)
    # relay (new), relay reuse, reuse: 2 arms x (10 + 1); the relay's default (full only): its
    # relay arm alone
    assert full["runs"] == 3 * 2 * (10 + 1) + (10 + 1) and full["seconds"] > c7["seconds"]


def test_the_table_is_followed_by_one_short_line_per_miss(tmp_path, capsys):
    """`make demo` ended with seven paragraphs of up to 150 words: now one line per miss; every
    note with -v (and in report.md)."""
    from testbed.cli.reproduce import print_table
    rows = select(["C7"])
    res = result_rows(rows, measure_all(rows, tmp_path, quick=True, executor=_Dispatch()), quick=True)
    meta = {"rows": len(res), "measured": 7, "ok": 3, "load_before": "0", "load_after": "0",
            "cores": 2, "cpu": "CPU busy 1%", "resumed": 0}
    print_table(res, meta, tmp_path)
    short = capsys.readouterr().out
    misses = [r for r in res if r["ok"] is False]
    assert misses and all(r["miss"] for r in misses)
    lines = [x for x in short.splitlines() if x.startswith("MISS ")]
    assert len(lines) == len(misses) and all(len(x) < 200 for x in lines)
    assert "evidence: " not in short and "during its experiment" not in short
    assert "with testbed -v reproduce" in short
    print_table(res, meta, tmp_path, verbose=True)
    full = capsys.readouterr().out
    assert "MISS " not in full and all(r["note"] in full for r in misses)


def test_asked_to_measure_where_it_cannot_says_so(tmp_path, monkeypatch, capsys):
    """A non-root `testbed reproduce C7 --quick` printed a model-only table, exit 0, and never
    said that nothing was measured nor why (only report.md's mode did)."""
    from testbed.cli import main
    monkeypatch.setattr("experiments.reproduce.run.can_measure", lambda: "needs root (network namespaces)")
    assert main(["reproduce", "C7", "--quick", "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert "nothing measured: needs root (network namespaces)" in err
    assert main(["reproduce", "C7", "--model-only", "--out", str(tmp_path / "m")]) == 0
    assert "nothing measured" not in capsys.readouterr().err


def test_large_values_print_as_the_chapter_column_does():
    """C3.bdp measured 240,220.5 B printed as 2.4022e+05 beside the chapter's 250,000."""
    from experiments.reproduce.report import _fmt
    from testbed.cli.reproduce import _show
    for show in (_show, _fmt):
        assert (show(240220.5), show(250000), show(99999.5), show(-123456.7)) == \
            ("240,220", "250,000", "100,000", "-123,457")
        assert (show(4.9323), show(12345.67), show(0.000123)) == ("4.9323", "12346", "0.000123")
    assert _show([239936.0, 241007.5]) == "[239936,241008]"           # the CLI's CI: one bound each
    assert _fmt([239936.0, 241007.5]) == "[239,936, 241,008]"


def test_failed_experiments_are_one_line_each(tmp_path, capsys):
    from testbed.cli.reproduce import print_table

    def broken(plan, out_dir, **kw):
        from testbed.spec.errors import SetupError
        raise SetupError("no netem here")
    rows = select(["C7"])
    res = result_rows(rows, measure_all(rows, tmp_path, quick=True, executor=broken), quick=True)
    print_table(res, {"rows": 7, "measured": 0, "ok": 0, "load_before": "0", "load_after": "0",
                      "cores": 2, "cpu": "", "resumed": 0}, tmp_path)
    failed = [x for x in capsys.readouterr().out.splitlines() if x.startswith("FAILED ")]
    assert failed and all("no netem here" in x for x in failed)
    assert sum(x.count("C7.") for x in failed) == sum("experiment failed" in r["note"] for r in res) > 1
    assert len(failed) == 1                      # one line for the rows of one error


def test_the_model_figures_pass_the_layout_check(tmp_path):
    from analysis import plots
    from experiments.reproduce.report import MODEL_FIGURES
    plots.LAYOUT_PROBLEMS.clear()
    for case, (fn, _) in MODEL_FIGURES.items():
        assert [p.rsplit(".", 1)[1] for p in fn(tmp_path / case)] == ["png", "svg", "pdf"]
    assert plots.LAYOUT_PROBLEMS == []


def test_c11s_figure_with_measured_points_keeps_its_legend_off_the_lines_and_says_when_no_ci(
        tmp_path, monkeypatch):
    """With the measured points the legend (upper center, inside) lay over the model's lines,
    and its "95 % CI" was said of --quick's single run."""
    from analysis import plots
    from experiments.reproduce import report
    figs = []
    real = report._save
    monkeypatch.setattr(report, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    plots.LAYOUT_PROBLEMS.clear()
    report.fig_c11(tmp_path / "c11", {1.0: {"measured": 12.6, "ci95": None}, 2 / 3: {"measured": 8.5, "ci95": None}})
    assert plots.LAYOUT_PROBLEMS == []
    (fig,) = figs
    (legend,) = fig.legends
    assert not fig.axes[0].get_legend()
    assert "measured, egress unshaped (multipath experiment, median; no CI: fewer than 5 runs)" in [
        t.get_text() for t in legend.get_texts()]


def test_derived_values_read_round_zero_and_scale_the_agent_to_the_chapters_rounds():
    """fec_send spans round 0 only (k + r symbols), not a repair sent while the ACK travels;
    first-round losses are round 1's source symbols; an agent run of 3 rounds is scaled to 30."""
    from types import SimpleNamespace
    from experiments.reproduce.run import DERIVED
    conn = {"first_ns": 0, "round0_last_ns": 10_000_000, "last_ns": 210_000_000, "rounds": 1,
            "round1_source": 33, "round0_repair": 63}
    udp = SimpleNamespace(checks={"transport_connections": [conn]}, metrics={})
    assert DERIVED["symbol_span_ms"](udp) == [10.0]
    assert DERIVED["first_round_lost"](udp) == [33] and DERIVED["first_round_repair"](udp) == [63]
    agent = SimpleNamespace(checks={}, metrics={"setup_s": 0.4, "round_s": [3.4, 3.5, 3.6], "total_s": 10.9})
    # the first round (a kept connection's first slow start) once, the mean of the others 29 times
    assert DERIVED["agent_total_30"](agent) == [pytest.approx(0.4 + 3.4 + 29 * 3.55)]
    assert DERIVED["agent_total_20"](agent) == [pytest.approx(0.4 + 3.4 + 19 * 3.55)]
    assert DERIVED["agent_total_30"](SimpleNamespace(checks={}, metrics={})) == []


def test_break_even_divides_two_measured_quantities(monkeypatch):
    """C15: floor(M/Δt) + 1 with M and Δt each measured; the CI from the ends of both CIs."""
    import experiments.reproduce.run as rr
    from experiments.reproduce.cases import Measure
    per = Measure("c12-agent", "completion_ms_median", statistic="difference", levels=("false", "true"))
    monkeypatch.setattr(rr, "measured_value", lambda summary, m, d=None: (0.4, [0.35, 0.45], 4, ""))
    assert rr.break_even(7.7, [7.6, 7.9], 2, {"summary": {}, "dir": "x"}, per) == (20, [17, 23], 2, "")
    assert rr.break_even(7.7, None, 2, None, per)[0] is None
    monkeypatch.setattr(rr, "measured_value", lambda summary, m, d=None: (-0.1, None, 4, ""))
    value, _, _, why = rr.break_even(7.7, None, 2, {"summary": {}, "dir": "x"}, per)
    assert value is None and "not positive" in why
    # the saving's experiment is run too when a row needs it
    rows = [r for r in ROWS if r.id == "C15.break_even"]
    assert {k[0] for k in rr.wanted_measures(rows, quick=True)} == {"c15-migration", "c12-agent"}


def test_quick_runs_one_repetition_where_no_arm_draws_at_random(tmp_path):
    """--quick: 2 repetitions on the 14 %-loss long-haul path, 1 on edgecloud's lossless path
    (its runs differ only by the hosts' scheduling), the note says so; --reps and the full run
    are unchanged."""
    from experiments.reproduce.cases import FULL_REPS, QUICK_REPS, QUICK_REPS_NO_RANDOM
    from experiments.reproduce.run import experiment_for, wanted_measures
    from tests.fixtures.fake_execute import FakeExecutor
    wanted = {m.experiment: (m, levels) for m, levels in wanted_measures(list(ROWS), True).values()
              if not m.sets}
    reps = {name: experiment_for(*wanted[name], None, True, None).reps for name in ("reuse", "c12-agent")}
    assert reps == {"reuse": QUICK_REPS, "c12-agent": QUICK_REPS_NO_RANDOM} and QUICK_REPS_NO_RANDOM == 1
    assert experiment_for(*wanted["c12-agent"], 2, True, None).reps == 2                     # --reps 2
    assert experiment_for(*wanted["c12-agent"], None, False, None).reps == FULL_REPS
    rows = select(["C12.extra_once"])
    ex = FakeExecutor("params.reuse", {False: 3900.0, True: 3500.0})
    res = result_rows(rows, measure_all(rows, tmp_path, quick=True, executor=ex), quick=True)
    assert len(ex.calls) == 2 and res[0]["n"] == 1
    assert "--quick: 1 run per arm (its topology draws nothing at random" in res[0]["note"]
    ex2 = FakeExecutor("params.reuse", {False: 3900.0, True: 3500.0})
    res = result_rows(rows, measure_all(rows, tmp_path / "r2", quick=True, reps=2, executor=ex2), quick=True)
    assert len(ex2.calls) == 4 and "1 run per arm" not in res[0]["note"]


def test_a_quick_run_excluded_because_the_machine_stalled_is_replaced(tmp_path):
    """C12.extra_once's one quick run per arm: the second arm's run is overloaded by a stall of
    the machine; one more repetition of both arms measures the row, and its note says why."""
    from tests.fixtures.fake_execute import FakeExecutor
    rows = select(["C12.extra_once"])
    ex = FakeExecutor("params.reuse", {False: 3900.0, True: 3500.0}, overloaded=(1,))
    rec, = result_rows(rows, measure_all(rows, tmp_path, quick=True, executor=ex), quick=True)
    assert len(ex.calls) == 4 and rec["measured"] is not None and rec["n"] == 1
    assert "1 repetition block(s) added to replace 1 run(s) excluded because the machine stalled " \
           "(runs/001-true)" in rec["note"]
    stuck = FakeExecutor("params.reuse", {False: 3900.0, True: 3500.0}, overloaded=(1, 3, 5))
    rec, = result_rows(rows, measure_all(rows, tmp_path / "b", quick=True, executor=stuck), quick=True)
    assert len(stuck.calls) == 2 + 2 * REPLACE_BLOCKS and rec["measured"] is None


def test_a_row_says_what_it_would_be_without_the_runs_rated_degraded(tmp_path, capsys):
    """C7.relay_new's two quick runs (the fake relay arm: 300 ms), the second rated degraded and
    twice as slow: the row keeps it (the fidelity rule) and misses; without it the row is within
    tolerance, and its note and the table's summary say so.  Without degraded runs, no such note."""
    import re

    from tests.fixtures.fake_execute import FakeExecutor
    from testbed.cli.reproduce import print_table
    row = select(["C7.relay_new"])[0]
    slow = FakeExecutor("params.path", {"direct": 1200.0, "relay": 300.0}, degraded=(1,), degraded_by=2.0)
    rec, = result_rows([row], measure_all([row], tmp_path / "a", quick=True, executor=slow), quick=True)
    assert rec["ok"] is False and rec["measured"] > 400
    assert (rec["degraded_runs"], rec["ok_without_degraded"]) == (1, True)
    got = re.search(r"1 of the 2 runs used were rated degraded by the link fidelity check \(kept\); "
                    r"without them ([0-9.]+) \(n=10\), within tolerance", rec["note"])
    assert got and float(got[1]) == pytest.approx(300, rel=0.1)
    print_table([rec], {"rows": 1, "measured": 1, "ok": 0, "load_before": "0", "load_after": "0",
                        "cores": 2, "cpu": "", "resumed": 0}, tmp_path)
    assert "1 row(s) used runs rated degraded; without those runs the verdict of C7.relay_new would " \
           "change" in capsys.readouterr().out
    only = {**rec, "id": "C7.only", "ok_without_degraded": None}      # its one run was degraded
    print_table([rec, only], {"rows": 2, "measured": 2, "ok": 0, "load_before": "0", "load_after": "0",
                              "cores": 2, "cpu": "", "resumed": 0}, tmp_path)
    assert "2 row(s) used runs rated degraded; without those runs the verdict of C7.relay_new would " \
           "change and C7.only would have no value (all their runs were)" in capsys.readouterr().out
    plain = FakeExecutor("params.path", {"direct": 1200.0, "relay": 300.0})
    rec, = result_rows([row], measure_all([row], tmp_path / "b", quick=True, executor=plain), quick=True)
    assert rec["ok"] is True and "degraded_runs" not in rec and "rated degraded" not in rec["note"]


def test_reproduce_model_only_refuses_options_that_would_do_nothing(tmp_path, capsys):
    from testbed.spec.errors import UsageError
    with pytest.raises(UsageError, match="--model-only runs nothing, so --quick, --reps would do nothing"):
        _cli(["reproduce", "C7", "--model-only", "--quick", "--reps", "3", "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())
    with pytest.raises(UsageError, match="--model-only runs nothing, so --cluster would do nothing"):
        _cli(["reproduce", "C7", "--model-only", "--cluster", "", "--out", str(tmp_path)])   # was ignored


@pytest.mark.parametrize("cases,says", [
    (["all", "C1"], "cases all C1: 'all' selects every case, so it goes alone; valid: all, C1, "),
    ([""], "unknown case(s) ''; valid: all, C1, "),
])
def test_reproduce_names_what_is_wrong_with_the_cases(tmp_path, cases, says):
    """'all' among cases was "unknown case(s) all; valid: all, …"; an empty one was named as nothing."""
    from testbed.spec.errors import UsageError
    with pytest.raises(UsageError) as exc:
        _cli(["reproduce", *cases, "--model-only", "--out", str(tmp_path)])
    assert str(exc.value).startswith(says)


def test_keep_topology_is_ignored_with_a_warning_where_a_link_has_a_schedule(tmp_path, caplog):
    """C11's common failure is a link schedule on both access paths: kept up, the block's second
    run could not start it again, so the topology is rebuilt for every run, said once."""
    from tests.fixtures.fake_execute import FakeExecutor
    fake = FakeExecutor("params.send", {"duplicate": 0.02}, metric="failed_fraction")
    measured = measure_all(select(["C11.p_fail"]), tmp_path, quick=True, executor=fake, keep_topology=True)
    assert all("error" not in v for v in measured.values()), measured
    assert fake.calls and all(c[2] is None for c in fake.calls)          # no topology handed over
    warned = [r.getMessage() for r in caplog.records if "--keep-topology ignored" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("c11-fail: --keep-topology ignored: the topology is "
                                                     "rebuilt for every run, as its links change during a run")


def test_a_pooled_rows_note_says_what_its_n_and_ci_count(tmp_path):
    """C7.direct_new pools every request of its runs: n = 2 runs x 10 requests, said in the note
    (a reader took n for runs)."""
    from experiments.reproduce.run import POOLED_N
    rows = select(["C7.direct_new"])
    (res,) = result_rows(rows, measure_all(rows, tmp_path, quick=True, executor=_Dispatch()), quick=True)
    assert res["n"] == 20 and POOLED_N in res["note"]


def test_c7s_value_labels_sit_above_the_ci_whiskers(tmp_path, monkeypatch):
    """A measured median's label was at the bar's top, struck through by its own CI's whisker."""
    from experiments.reproduce import report
    figs = []
    real = report._save
    monkeypatch.setattr(report, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    rows = [{"id": cid, "chapter": 300.0, "model": 240.0, "measured": 400.0, "ci95": [250.0, 900.0],
             "ok": False, "n": 10} for cid, *_ in report.C7_CELLS]
    assert report.fig_c7(rows, tmp_path / "c7")
    labels = [t for t in figs[0].axes[0].texts if t.get_text() == "400"]
    assert labels and all(t.xy[1] >= 900.0 for t in labels)


def test_c7s_figure_says_a_cell_was_not_measured_and_keeps_its_values_inside(tmp_path, monkeypatch):
    """Model only: no "n=0 requests" under a bar that is not there; the values above the bars
    stay inside the axes (they were struck through by its top spine)."""
    from analysis import plots
    from experiments.reproduce import report
    figs = []
    real = report._save
    monkeypatch.setattr(report, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    rows = [{"id": cid, "chapter": 1185.0, "model": 1238.5, "measured": None, "ci95": None, "n": 0,
             "ok": None} for cid, _, _ in report.C7_CELLS]
    plots.LAYOUT_PROBLEMS.clear()
    report.fig_c7(rows, tmp_path / "c7")
    assert plots.LAYOUT_PROBLEMS == []
    ticks = [t.get_text() for ax in figs[0].axes for t in ax.get_xticklabels()]
    assert ticks and all(t.endswith("(not measured)") for t in ticks)


def test_the_measured_figure_names_each_rows_quantity_and_unit():
    from experiments.reproduce.report import _quantity_label
    assert _quantity_label({"quantity": "direct / relay, kept alive", "unit": "1"}) == \
        "direct / relay, kept alive\n(dimensionless)"
    assert _quantity_label({"quantity": "relay, kept alive (median)", "unit": "ms"}).endswith("(ms)")
