"""The closed forms of CHAPTER12.md C6 and the round model in virtual time over the emulator's
seeded Bernoulli loss (assumptions in testbed/transport/model.py)."""
import statistics

import pytest

from testbed.emulator.direction import DirectionModel
from testbed.linkspec import LinkSpec
from testbed.transport import model

MS = 1_000_000


def test_closed_form_matches_the_chapter():
    cf = model.arq_completion(245, 0.14, 0.2, 0.0385)
    assert cf["mean"] == pytest.approx(0.756, abs=0.0005)
    assert cf["p99"] == pytest.approx(1.2385)
    assert model.arq_quantile_rounds(0.99, 245, 0.14) == 6


def trials(r, n, seed):
    link = DirectionModel(LinkSpec.parse(rate="333mbit", delay="100ms", loss="14%", queue="100000"), seed)
    out, t = [], 0
    for _ in range(n):
        c, _ = model.round_trial(245, r, link, 200 * MS, 30 * MS, 1448, t)
        out.append(c / 1e9)
        t += c + 1000 * MS
    return out


def test_ten_thousand_arq_trials_agree_with_the_closed_form():
    res = trials(0, 10_000, seed=1)
    cf = model.arq_completion(245, 0.14, 0.2, 0.0385)
    mean, p99 = statistics.mean(res), model.quantile(res, 0.99)
    print(f"\n10,000 virtual-time ARQ trials: mean {mean:.4f} s (closed form {cf['mean']:.4f}), "
          f"p99 {p99:.4f} s (closed form {cf['p99']:.4f})")
    assert mean == pytest.approx(cf["mean"], rel=0.02)
    assert p99 == pytest.approx(cf["p99"], rel=0.02)


def test_fec_trials_complete_in_one_round():
    res = trials(63, 2000, seed=2)
    assert 0.238 < statistics.median(res) < 0.242
    assert sum(x > 0.3 for x in res) / len(res) < 0.005       # the 0.1 % that need a second round
