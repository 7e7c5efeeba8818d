"""The round model in virtual time over the emulator's seeded Bernoulli loss against the closed
forms of analysis.models (assumptions in testbed/transport/model.py)."""
import statistics

import pytest

from analysis.models import evaluate
from analysis.models.recovery import fec_repair
from testbed.emulator.direction import DirectionModel
from testbed.spec.linkspec import LinkSpec
from testbed.transport import model
from testbed.transport.fec import adaptive_repair

MS = 1_000_000


def link(seed):
    return DirectionModel(LinkSpec.parse(rate="333mbit", delay="100ms", loss="14%", queue="100000"), seed)


def test_ten_thousand_arq_trials_agree_with_the_closed_form():
    res = [c / 1e9 for c, _ in model.trials(10_000, 245, 0, link(1), 200 * MS, 30 * MS, 1448)]
    cf = evaluate("fec")
    mean, p99 = statistics.mean(res), model.quantile(res, 0.99)
    print(f"\n10,000 virtual-time ARQ trials: mean {mean:.4f} s (closed form {cf['arq_mean'].value:.4f}), "
          f"p99 {p99:.4f} s (closed form {cf['arq_quantile'].value:.4f})")
    assert mean == pytest.approx(cf["arq_mean"].value, rel=0.02)
    assert p99 == pytest.approx(cf["arq_quantile"].value, rel=0.02)


def test_fec_trials_complete_in_one_round():
    out = model.trials(2000, 245, 63, link(2), 200 * MS, 30 * MS, 1448)
    res = [c / 1e9 for c, _ in out]
    assert statistics.median(res) == pytest.approx(evaluate("fec")["fec_completion"].value / 1e3, abs=0.002)
    assert sum(r > 1 for _, r in out) / len(out) < 0.005      # P(more than 63 of 308 lost) ≈ 0.001


@pytest.mark.parametrize("k,p", [(245, 0.14), (245, 0.05), (100, 0.3), (10, 0.01), (1, 0.14)])
def test_runtime_redundancy_rule_matches_the_model_package(k, p):
    assert adaptive_repair(k, p) == fec_repair(k, p, 0.999)
