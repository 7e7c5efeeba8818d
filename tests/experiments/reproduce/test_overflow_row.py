"""C5.overflow_loss reads calibrate's overflow train: its loss when the link delivered it at its
rate and its run's link fidelity is ok, nothing (with the reason) otherwise, and the train's
figures as the evidence of a miss."""
import copy

from experiments.reproduce.cases import CALIBRATE, ROWS
from experiments.reproduce.run import _calibrated, result_rows

ROW = next(r for r in ROWS if r.id == "C5.overflow_loss")
RES = {"dir": "x", "calibrate": {"measured": {"overflow": {
    "loss": 0.4431, "window": 86500, "offered_mbps": 598.2, "expected": 0.4433,
    "rate_mbps": 333.0, "delivered_mbps": 333.1,
    "drops": {"queue": 42000, "random_loss": 0, "emulator_unintended": 0, "receive_path": 0},
    "fidelity": {"verdict": "ok", "reasons": [], "lag_p99_ms": 0.4, "late_p99_ms": 0.05}}}}}


def _with(verdict=None, **changes):
    res = copy.deepcopy(RES)
    o = res["calibrate"]["measured"]["overflow"]
    o.update(changes)
    if verdict:
        o["fidelity"].update(verdict=verdict, reasons=["1 % of the frames waited ≥ 21.0 ms in the socket"])
    return res


def test_the_row_reads_the_overflow_trains_loss_and_window():
    assert ROW.measure.experiment == CALIBRATE and ROW.tolerance == 0.10
    assert _calibrated(RES, ROW.measure) == (0.4431, None, 86500, "")


def test_a_run_the_verdict_discards_gives_no_value_and_says_why():
    value, _, n, why = _calibrated(_with("overloaded"), ROW.measure)
    assert value is None and n == 0
    assert "fidelity is overloaded" in why and "21.0 ms" in why
    assert _calibrated(_with("degraded"), ROW.measure)[0] is None
    assert _calibrated(_with(loss=None), ROW.measure)[3] == "calibrate reported no overflow.loss"
    assert _calibrated(_with(fidelity={"verdict": "unknown", "reasons": []}), ROW.measure)[0] is None
    # the kernel backend has no emulator and no verdict: its train counts as measured when the
    # link delivered it at its rate, and not when it did not (any backend)
    assert _calibrated(_with(fidelity=None), ROW.measure)[:3] == (0.4431, None, 86500)
    for changes in ({"fidelity": None}, {}):
        value, _, n, why = _calibrated(_with(delivered_mbps=301.4, **changes), ROW.measure)
        assert value is None and n == 0
        assert why == ("the link delivered the overflow train at 301.4 Mbit/s, not its 333 (±2%), "
                       "so its loss is not used")


def test_a_miss_quotes_the_trains_figures():
    measured = {ROW.measure.key: _with(loss=0.30, offered_mbps=470.0, expected=0.29)}
    rec, = result_rows([ROW], measured, quick=True)
    assert rec["ok"] is False and rec["measured"] == 0.30
    assert "Mbit/s offered over the window 470" in rec["note"] and "queue drops 42000" in rec["note"]
    rec, = result_rows([ROW], {ROW.measure.key: RES}, quick=True)
    assert rec["ok"] is True and rec["n"] == 86500
