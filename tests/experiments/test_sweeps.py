"""Sweeps: any RunSpec path as a factor with a derived check, ranges, crossed factors, growing a
finished experiment with --resume, small samples, the curve (fake executor and synthetic frame
logs; no root)."""
import json

import numpy as np
import pytest

from experiments import checks as ck
from experiments import load_definition, run_experiment, write_all
from experiments.definition import Experiment, cli_levels, expand_range
from experiments.order import schedule
from experiments.report import text
from testbed.emulator import linklog
from testbed.spec.errors import UsageError
from tests.fixtures.fake_execute import FakeExecutor

MEDIANS = {"new": 1185.0, "reuse": 240.0}


def test_ranges_expand_linear_log_and_on_the_command_line():
    assert expand_range({"from": "0%", "to": "5%", "step": "1%"}) == ("0%", "1%", "2%", "3%", "4%", "5%")
    assert expand_range({"from": "1ms", "to": "100ms", "n": 3, "log": True}) == ("1ms", "10ms", "100ms")
    assert expand_range({"from": 1, "to": 7, "step": 3}) == (1, 4, 7)
    assert cli_levels("0%:2%:0.5%") == ["0%", "0.5%", "1%", "1.5%", "2%"]
    assert cli_levels("1ms:100ms:log3") == ["1ms", "10ms", "100ms"]
    assert cli_levels("max:10ms") == ["max:10ms"] and cli_levels("new,reuse") == ["new", "reuse"]
    for bad, msg in (({"from": "0%", "to": "5ms", "step": "1%"}, "one unit"),
                     ({"from": "0%", "to": "5%"}, "give from, to and step"),
                     ({"from": "0%", "to": "5%", "n": 3, "log": True}, "needs from, to > 0")):
        with pytest.raises(UsageError, match=msg):
            expand_range(bad)


def test_a_range_without_a_step_and_a_bad_range_say_so_as_written():
    """``--levels 0%:5%`` was one level "0%:5%" (refused later as a loss it could not read), and
    a bad range was shown as a Python dict ``{'from': '5%', ...}``."""
    with pytest.raises(UsageError, match=r"^--levels 0%:5%: a range is FROM:TO:STEP or FROM:TO:logN, "
                                         r"e\.g\. 0%:5%:1%$"):
        cli_levels("0%:5%")
    with pytest.raises(UsageError, match=r'^level range \{from = "5%", to = "1%", step = "1%"\}: step '):
        cli_levels("5%:1%:1%")


def test_levels_option_takes_new_values():
    exp = load_definition("buffer").with_overrides(levels=["20", "50", "1000"])
    assert exp.levels == ("20", "50", "1000") and exp.labels == ("20", "50", "1000")


def _link_exp(**kw):
    d = {"name": "loss", "factor": "links.bottleneck.down.loss", "levels": {"from": "0%", "to": "2%", "step": "1%"},
         "metrics": ["goodput_mbps"], "reps": 2, "warmup": 0,
         "base": {"topology": "longhaul", "workload": "bulk", "params": {"direction": "down", "duration": "1s"}}}
    d.update(kw)
    return Experiment.from_dict(d)


def test_any_link_topology_or_workload_path_gets_a_derived_check():
    exp = _link_exp()
    assert exp.labels == ("0pct", "1pct", "2pct")
    assert set(exp.validate()) == {"0pct", "1pct", "2pct"}           # no "no manipulation check"
    for f in ("links.bottleneck.down.loss", "links.bottleneck.up.delay", "links.bottleneck.down.rate",
              "links.bottleneck.down.jitter", "topology_params.delay", "params.requests"):
        assert ck.check_for(f) is not None, f
    assert ck.check_for("socket.delack_max") is None                 # read back rounded to the tick


def test_socket_and_host_factors_without_a_check_of_their_own():
    sndbuf = ck.check_for("socket.sndbuf")
    assert sndbuf.fn("1MB", {"socket_readback": {"sndbuf": [2_000_000, 2_000_000]}}) is None
    assert "read back [1000000]" in sndbuf.fn("1MB", {"socket_readback": {"sndbuf": [1_000_000]}})
    advmss = ck.check_for("host.advmss")
    ok = {"host_factors": {"client": {"advmss": 1180}, "server": {"advmss": 1180}}}
    assert advmss.fn(1180, ok) is None and advmss.fn(1460, ok)
    assert ck.check_for("socket.nodelay").fn(True, {"socket_readback": {"nodelay": [True, True]}}) is None


@pytest.mark.parametrize("level, per_ack, ok", [
    ("every", 1.0, True), ("every", 2.0, False), ("n:44", 43.2, True), ("n:44", 1.0, False),
    ("n:44", 60.0, False), ("t:10ms", 3.0, True), ("n:4,t:10ms", 0.5, False)])
def test_the_udp_ack_policy_is_checked_on_the_wire(level, per_ack, ok):
    """The UDP transport's ACK policy shows as the request's symbols per ACK in the capture."""
    check = ck.check_for("params.ack_policy")
    assert check.needs == ("symbols_per_ack",)
    assert (check.fn(level, {"symbols_per_ack": per_ack}) is None) == ok


def _write_frames(path, spec, n, lost, length=1514, rate=None, delay=0.0, gap_ns=None, burst=0, late=()):
    """A synthetic frame log: ``n`` frames reach the loss stage, ``lost`` of them lost; delivered
    ones leave after ``delay`` plus their transmission time at ``rate``."""
    w = linklog.LogWriter(path, {"direction": path.stem, "spec": spec, "seed": 1, "medium": None})
    rng = np.random.default_rng(0)
    lost_idx = set(rng.choice(n, lost, replace=False).tolist())
    ser = int(length * 8 / rate * 1e9) if rate else 0
    gap = gap_ns if gap_ns is not None else ser // 2 or 1000
    t, depart = 1_000_000, 0
    for i in range(n):
        t += gap + (5_000_000 if burst and i % burst == 0 else 0)      # idle between bursts
        depart = max(depart, t) + ser
        verdict = linklog.LOSS if i in lost_idx else linklog.DELIVERED
        sched = depart + int(delay * 1e9) if verdict == linklog.DELIVERED else depart
        sent = sched + (5_000_000 if i in late else 0)          # the emulator fell behind
        w.buf.append(linklog.RECORD.pack(t, t, sched, sent if verdict == linklog.DELIVERED else 0,
                                         1, 2, i, 0x0800, i & 0xFFFF, 1, 2, 6, length, verdict))
    w.close()


def _run_dir(tmp_path, spec_down):
    d = tmp_path / "run"
    (d / "emulator").mkdir(parents=True)
    (d / "metadata.json").write_text(json.dumps({"links": [{
        "name": "bottleneck", "a": "client", "b": "server", "a_to_b": {"loss": {"model": "bernoulli", "p": 0}},
        "b_to_a": spec_down}], "topology": {"name": "longhaul", "params": {"delay": "20ms"}}}))
    return d


def test_loss_check_reads_the_frame_log_and_fails_a_link_that_did_not_apply_the_level(tmp_path):
    from testbed.spec.linkspec import LinkSpec
    spec = LinkSpec.parse(rate="20mbit", delay="20ms", loss="3%").to_dict()
    d = _run_dir(tmp_path, spec)
    _write_frames(d / "emulator" / "server-client.frames", spec, 4000, 120, rate=20e6, delay=0.02)
    rb = ck.derived_readbacks("links.bottleneck.down.loss", d)["link"]
    assert (rb["frames"], rb["lost"], rb["loss"]) == (4000, 120, 0.03)
    lo, hi = rb["loss_ci"]
    assert lo < 0.03 < hi and hi - lo < 0.03 and rb["source"].startswith("frame log")
    assert abs(rb["delay_ms"] - 20.0) < 0.01
    assert abs(rb["rate_mbps"] - 20.0) < 0.2 and rb["rate_pairs"] > 1000
    assert ck.manipulation_reason("links.bottleneck.down.loss", "3%", {"link": rb}) is None
    # the frame log's header says 3 %; a level of 5 % did not reach the link
    why = ck.manipulation_reason("links.bottleneck.down.loss", "5%", {"link": rb})
    assert "loss 5% but the link ran with" in why
    assert ck.manipulation_reason("links.bottleneck.down.delay", "20ms", {"link": rb}) is None
    assert ck.manipulation_reason("links.bottleneck.down.rate", "20mbit", {"link": rb}) is None
    assert "rate 30mbit but the link ran" in ck.manipulation_reason("links.bottleneck.down.rate", "30mbit",
                                                                    {"link": rb})


def test_rate_measured_only_over_departures_the_queue_kept_busy(tmp_path):
    """Bursts of 4 frames with idle time between and losses among them: the idle time does not
    count as transmission time."""
    from testbed.spec.linkspec import LinkSpec
    spec = LinkSpec.parse(rate="20mbit", delay="20ms", loss="10%").to_dict()
    d = _run_dir(tmp_path, spec)
    _write_frames(d / "emulator" / "server-client.frames", spec, 4000, 400, rate=20e6, delay=0.02, burst=4)
    rb = ck.link_readback(d, "bottleneck.down")
    assert rb["rate_pairs"] > 500 and rb["rate_mbps"] == pytest.approx(20.0, rel=0.01)


def test_rate_read_back_is_not_skewed_by_a_stretch_of_late_sends(tmp_path):
    from testbed.spec.linkspec import LinkSpec
    spec = LinkSpec.parse(rate="20mbit", delay="20ms").to_dict()
    d = _run_dir(tmp_path, spec)
    late = set(range(100, 400)) | set(range(1000, 1300))
    _write_frames(d / "emulator" / "server-client.frames", spec, 2000, 0, rate=20e6, delay=0.02, late=late)
    rb = ck.link_readback(d, "bottleneck.down")
    assert rb["rate_mbps"] == pytest.approx(20.0, rel=0.005)
    assert ck.manipulation_reason("links.bottleneck.down.rate", "20mbit", {"link": rb}) is None


def test_loss_check_fails_when_the_measured_loss_contradicts_the_configured_level(tmp_path):
    """Tampered run: the header says 5 % but only 0.5 % of the frames were lost."""
    from testbed.spec.linkspec import LinkSpec
    spec = LinkSpec.parse(rate="20mbit", delay="20ms", loss="5%").to_dict()
    d = _run_dir(tmp_path, spec)
    _write_frames(d / "emulator" / "server-client.frames", spec, 4000, 20, rate=20e6, delay=0.02)
    rb = ck.link_readback(d, "bottleneck.down")
    why = ck.manipulation_reason("links.bottleneck.down.loss", "5%", {"link": rb})
    assert why.startswith("loss 5% but 20 of 4000 frames lost on bottleneck.down: 0.0050 [")
    # without a frame log (kernel backend): the built spec, nothing measured
    (d / "emulator" / "server-client.frames").unlink()
    rb = ck.link_readback(d, "bottleneck.down")
    assert "frames" not in rb and rb["source"].startswith("metadata.json")
    assert ck.manipulation_reason("links.bottleneck.down.loss", "5%", {"link": rb}) is None


def test_wilson_interval_by_hand():
    lo, hi = ck.wilson(10, 100, 0.95)          # textbook: 0.0552, 0.1744
    assert lo == pytest.approx(0.0552, abs=1e-4) and hi == pytest.approx(0.1744, abs=1e-4)
    assert ck.wilson(0, 0) is None and ck.wilson(0, 50)[0] == 0.0


def test_topology_and_workload_parameters_checked_from_the_run_records(tmp_path):
    d = _run_dir(tmp_path, None)
    (d / "manifest.json").write_text(json.dumps({"spec": {"params": {"requests": 5}}}))
    rb = ck.derived_readbacks("topology_params.delay", d)
    assert rb == {"topology_param": "20ms"}
    assert ck.manipulation_reason("topology_params.delay", "20ms", rb) is None
    assert ck.manipulation_reason("topology_params.delay", "50ms", rb) == "topology_param 50ms but the run logged 20ms"
    assert ck.manipulation_reason("params.requests", 5, ck.derived_readbacks("params.requests", d)) is None


def reuse(reps=3, **kw):
    return load_definition("reuse").with_overrides(reps=reps).replace(**kw)


def test_resume_adds_repetitions_without_redoing_a_run(tmp_path):
    fx = FakeExecutor("params.mode", MEDIANS)
    out = run_experiment(reuse(2), tmp_path / "e", executor=fx, quiet=True)
    write_all(out, plots=False)
    before = {p.name: (p / "manifest.json").stat().st_mtime_ns for p in (out / "runs").iterdir()}
    assert len(before) == 6 and len(fx.calls) == 6
    fx2 = FakeExecutor("params.mode", MEDIANS)
    run_experiment(reuse(4), out, executor=fx2, resume=True, quiet=True)
    assert len(fx2.calls) == 4                                      # only the new repetitions
    after = {p.name: (p / "manifest.json").stat().st_mtime_ns for p in (out / "runs").iterdir()}
    assert {k: after[k] for k in before} == before                  # no run redone
    assert sorted(set(after) - set(before)) == ["006-new", "007-reuse", "008-new", "009-reuse"]
    # the new runs are exactly the runs a 4-repetition experiment would have made
    assert sorted(after) == sorted(s.dirname for s in schedule(reuse(4)))
    m = json.loads((out / "manifest.json").read_text())
    assert m["definition"]["reps"] == 4 and m["growth"][0]["reps"] == {"was": 2, "now": 4}
    s = write_all(out, plots=False)
    assert s["complete"] and s["by_level"]["new"]["n_valid"] == 4


def test_resume_of_a_manifest_without_the_newer_keys(tmp_path):
    out = run_experiment(reuse(2), tmp_path / "e", executor=FakeExecutor("params.mode", MEDIANS), quiet=True)
    m = json.loads((out / "manifest.json").read_text())
    for k in ("cross", "check", "models", "log_x"):          # as written before sweeps existed
        del m["definition"][k]
    (out / "manifest.json").write_text(json.dumps(m))
    fx = FakeExecutor("params.mode", MEDIANS)
    run_experiment(reuse(3), out, executor=fx, resume=True, quiet=True)
    assert len(fx.calls) == 2


def test_resume_adds_levels_block_by_block(tmp_path):
    exp = load_definition("buffer").with_overrides(reps=2)
    fx = FakeExecutor("links.bottleneck.up.queue", {"20": 1.0, "1000": 2.0, "50": 3.0})
    out = run_experiment(exp, tmp_path / "b", executor=fx, quiet=True)
    n0 = len(fx.calls)
    grown = exp.with_overrides(levels=["20", "1000", "50"])
    run_experiment(grown, out, executor=fx, resume=True, quiet=True)
    new = [c[0] for c in fx.calls[n0:]]
    assert new == ["50", "50", "50"]                                # warm-up + 2 reps of the new level
    m = json.loads((out / "manifest.json").read_text())
    added = [s for s in m["schedule"] if s["level"] == "50"]
    assert [(s["warmup"], s["rep"]) for s in added] == [(True, 0), (False, 0), (False, 1)]
    assert [s["index"] for s in added] == [6, 7, 8]
    with pytest.raises(UsageError, match="--levels leaves out 1000"):
        run_experiment(exp.with_overrides(levels=["20", "50"]), out, executor=fx, resume=True, quiet=True)


def test_crossed_factors_full_factorial_alternated_and_compared_within_each_cross_level(tmp_path):
    exp = reuse(2).replace(cross={"factor": "socket.cc", "levels": ("cubic", "bbr")})
    assert exp.labels == ("cubic@new", "bbr@new", "cubic@reuse", "bbr@reuse")
    main = [s.level for s in schedule(exp) if not s.warmup]
    assert main == list(exp.labels) * 2                             # every cell once per block
    fx = FakeExecutor("params.mode", MEDIANS)
    out = run_experiment(exp, tmp_path / "x", executor=fx, quiet=True)
    assert {(c[0]) for c in fx.calls} == {"new", "reuse"}
    s = write_all(out, plots=False)
    assert "levels `new`, `reuse`, crossed with `socket.cc` (`cubic`, `bbr`): 4 arms" in (out / "report.md").read_text()
    pairs = {(c["a"], c["b"]) for c in s["comparisons"]}
    assert pairs == {("cubic@new", "cubic@reuse"), ("bbr@new", "bbr@reuse")}
    # the fake's read-back covers params.mode only: the cc check finds no read-back, runs invalid
    assert all("no read-back cc" in e["reason"] for e in s["excluded"])


def test_check_none_runs_marked_unverified(tmp_path):
    exp = reuse(2).replace(check="none")
    out = run_experiment(exp, tmp_path / "n", executor=FakeExecutor("params.mode", MEDIANS,
                                                                    broken=("new",), broken_as="reuse"), quiet=True)
    s = write_all(out, plots=False)
    assert len(s["unverified"]) == 4 and not s["excluded"]
    assert "UNVERIFIED (check = none)" in text(s)
    assert "NOT verified" in (out / "report.md").read_text()


def test_small_samples_said_as_such(tmp_path):
    out = run_experiment(reuse(3), tmp_path / "s", executor=FakeExecutor("params.mode", MEDIANS), quiet=True)
    s = write_all(out, plots=False)
    t = text(s)
    assert "(n=3 too small for a CI)" in t and "95% CI" not in t.split("\n")[1]
    assert "smallest possible at this n: 0.1" in t
    lv = s["by_level"]["new"]["metrics"]["completion_ms_median"]
    assert lv["p99"] is None and lv["p10"] is None and lv["median_ci"] is None
    md = (out / "report.md").read_text()
    assert "n too small for a CI" in md


def test_curve_with_model_lines_for_numeric_levels(tmp_path):
    exp = Experiment.from_dict({**json.loads(json.dumps(load_definition("loss-cc").to_dict())),
                                "levels": ["1%", "3%"], "reps": 1, "warmup": 0})
    exp = exp.replace(cross={"factor": "socket.cc", "levels": ("reno", "bbr")}, check="none")
    medians = {"1%": 5.0, "3%": 2.0}
    out = run_experiment(exp, tmp_path / "c", executor=FakeExecutor(exp.factor, medians, metric="goodput_mbps",
                                                                   overloaded=(0,)), quiet=True)
    s = write_all(out)
    assert s["by_level"]["reno@1pct"]["n_valid"] == 0              # an arm without a valid run is drawn too
    assert (out / "plots" / "goodput_mbps-curve.png").is_file()
    from experiments.plots import model_curve, numeric_axis
    xs, unit, to_base = numeric_axis(["0%", "1%", "3%"])
    assert xs == [0, 1, 3] and unit == "%" and to_base(3) == 0.03
    ys, yunit = model_curve(s["models"][0], [0.0, 0.01], s["base"])
    assert ys[0] is None and yunit == "Mbit/s"                     # Mathis at p = 0: no bound
    assert ys[1] == pytest.approx(1448 * 8 / (0.2 * 0.1) / 1e6)   # C·MSS/(RTT·√p), RTT = 2 x 100 ms
    ys, _ = model_curve(s["models"][1], [0.01], s["base"])
    assert ys[0] == pytest.approx(0.99 * 333)


def test_builtin_studies_validate():
    for name in ("loss-cc", "rtt", "rate-window"):
        exp = load_definition(name)
        assert exp.models and len(exp.validate()) == len(exp.labels)
    assert len(load_definition("loss-cc").labels) == 24




def test_uplinks_check_reads_where_the_steps_landed():
    fn = ck.check_for("params.uplinks").fn
    steps = [{"round": 0, "ok": True}, {"round": 1, "ok": True}]
    assert fn("6.4mbit,3.2mbit", {"uplink_steps": {"ok": True, "steps": steps}}) is None
    steps[1]["ok"] = False
    assert "round(s) [1] did not land" in fn("6.4mbit,3.2mbit", {"uplink_steps": {"ok": False, "steps": steps}})
    from experiments.summary import _shown_checks
    checks = {"uplink_steps": {"ok": False, "steps": steps}}
    shown = _shown_checks("params.uplinks", ck.check_for("params.uplinks"), checks)
    assert shown == {"uplink_steps": "1/2 steps landed"}


def test_long_arm_names_are_shortened_in_figures_unless_they_would_clash():
    from experiments.plots import shown_levels
    long = ",".join(["6.4mbit", "3.2mbit"] * 10)
    names = shown_levels(["6.4mbit", long])
    assert names["6.4mbit"] == "6.4mbit" and len(names[long]) < 45 and f"({len(long)} ch)" in names[long]
    other = long[:-1] + "9"                    # same start, another end: still told apart
    assert len(set(shown_levels([long, other]).values())) == 2
    same_ends = long[:20] + "x" + long[21:]    # differs only in the middle: left whole
    assert shown_levels([long, same_ends]) == {long: long, same_ends: same_ends}


def test_levels_option_keeps_an_outage_s_hold_flag():
    """``down=MOMENT+DURATION,hold`` has a comma of its own: --levels keeps it in its level."""
    assert cli_levels("none,down=2s+0.5s,hold") == ["none", "down=2s+0.5s,hold"]
    assert cli_levels("2s+0.5s,hold,3s+1s") == ["2s+0.5s,hold", "3s+1s"]         # levels of a down factor
    assert cli_levels("new,hold") == ["new", "hold"]
    assert cli_levels("down=2s+0.5s,hold;rate=4mbit@3s,down=1s+1s") == [
        "down=2s+0.5s,hold;rate=4mbit@3s", "down=1s+1s"]
    assert cli_levels("rate=4mbit@3s;down=2s+1s,hold,none") == ["rate=4mbit@3s;down=2s+1s,hold", "none"]
    exp = load_definition("handover").with_overrides(levels=cli_levels("none,down=2s+0.5s,hold"))
    assert exp.labels == ("none", "down-2s-0.5s-hold")
    assert set(exp.validate()) == {"none", "down-2s-0.5s-hold"}
