"""experiments.stats against values computed independently (by hand or by brute force)."""
import itertools

import numpy as np
import pytest

from experiments import stats


def test_describe_percentiles_by_hand():
    d = stats.describe(list(range(1, 11)), seed=3)
    # linear interpolation: p10 at rank 0.9 -> 1 + 0.9 = 1.9; p90 at rank 8.1 -> 9.1; p99 -> 9.91
    assert (d["n"], d["median"], d["p10"], d["p90"]) == (10, 5.5, pytest.approx(1.9), pytest.approx(9.1))
    assert d["p99"] is None                     # p99 from 100 values up
    assert stats.describe(list(range(1, 101)))["p99"] == pytest.approx(99.01)
    lo, hi = d["median_ci"]
    assert lo <= 5.5 <= hi and 1 <= lo and hi <= 10


def test_describe_empty_and_single():
    assert stats.describe([])["n"] == 0 and stats.describe([])["median"] is None
    one = stats.describe([4.0])
    assert one["median"] == 4.0 and one["median_ci"] is None


def test_cliffs_delta_by_hand_and_brute_force():
    # a=[1,2,3], b=[2,3,4]: a>b once (3>2), a<b six times, two ties -> (1-6)/9
    assert stats.cliffs_delta([1, 2, 3], [2, 3, 4]) == pytest.approx(-5 / 9)
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 6, 13), rng.integers(0, 6, 9)
    gt = sum(x > y for x in a for y in b)
    lt = sum(x < y for x in a for y in b)
    assert stats.cliffs_delta(a, b) == pytest.approx((gt - lt) / (len(a) * len(b)))


def _exact_mwu(a, b):
    """U of a and the two-sided exact p by enumerating every split of the pooled sample."""
    def u(x, y):
        return sum((p > q) + 0.5 * (p == q) for p in x for q in y)
    pooled = list(a) + list(b)
    u_obs = u(a, b)
    us = []
    for idx in itertools.combinations(range(len(pooled)), len(a)):
        x = [pooled[i] for i in idx]
        y = [pooled[i] for i in range(len(pooled)) if i not in idx]
        us.append(u(x, y))
    us = np.asarray(us)
    p = 2 * min((us <= u_obs).mean(), (us >= u_obs).mean())
    return u_obs, min(p, 1.0)


@pytest.mark.parametrize("a,b", [([1.2, 3.4, 5.0, 7.7], [2.1, 8.8, 9.0, 9.5, 10.1]),
                                 ([10, 11, 12, 13, 14], [2, 3, 2.5, 3.1, 2.9]),
                                 ([23, 23], [32, 554]),                       # ties within an arm
                                 ([1, 2, 2, 3], [2, 3, 3, 5, 5]),               # ties across the arms
                                 ([4, 4, 4], [4, 4, 4])])
def test_mann_whitney_matches_exact_enumeration(a, b):
    u, p = _exact_mwu(a, b)
    got = stats.mann_whitney(a, b)
    assert got["u"] == pytest.approx(u)
    assert got["p"] == pytest.approx(p, rel=1e-9)


def _manual_bootstrap_median_ci(x, n=20000, seed=11):
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(x, size=(n, len(x)), replace=True), axis=1)
    return np.percentile(meds, [2.5, 97.5])


def test_bootstrap_median_ci_agrees_with_an_independent_bootstrap():
    x = np.random.default_rng(2).lognormal(5, 0.4, 31)
    lo, hi = stats.describe(x, seed=9)["median_ci"]
    mlo, mhi = _manual_bootstrap_median_ci(x)
    s = np.sort(x)
    # a percentile CI of the median lands on (or between) order statistics: same or adjacent ones
    rank = lambda v: np.searchsorted(s, v - 1e-9)
    assert abs(rank(lo) - rank(mlo)) <= 1 and abs(rank(hi) - rank(mhi)) <= 1


def test_bootstrap_is_seeded():
    x = np.random.default_rng(4).normal(10, 1, 20)
    y = np.random.default_rng(5).normal(5, 1, 20)
    assert stats.describe(x, seed=1)["median_ci"] == stats.describe(x, seed=1)["median_ci"]
    assert stats.compare(x, y, seed=1)["ratio_ci"] == stats.compare(x, y, seed=1)["ratio_ci"]
    assert stats.compare(x, y, seed=1)["ratio_ci"] != stats.compare(x, y, seed=2)["ratio_ci"]


def test_compare_ratio_difference_and_pairs():
    rng = np.random.default_rng(8)
    a = 1185 * np.exp(rng.normal(0, 0.1, 8))
    b = 240 * np.exp(rng.normal(0, 0.1, 8))
    c = stats.compare(a, b, list(zip(a, b)), seed=1)
    assert c["ratio"] == pytest.approx(np.median(a) / np.median(b))
    assert c["difference"] == pytest.approx(np.median(a) - np.median(b))
    assert c["ratio_ci"][0] > 1 and c["ratio_ci"][0] <= c["ratio"] <= c["ratio_ci"][1]
    assert c["paired_difference"]["median"] == pytest.approx(np.median(a - b))
    assert c["paired_difference"]["n_pairs"] == 8
    assert c["cliffs_delta"] == 1.0


def test_compare_same_distribution_ratio_ci_contains_one():
    rng = np.random.default_rng(1)
    a, b = rng.normal(100, 10, 15), rng.normal(100, 10, 15)
    c = stats.compare(a, b, seed=1)
    assert c["ratio_ci"][0] < 1 < c["ratio_ci"][1]
    assert c["paired_difference"]["n_pairs"] == 0 and c["paired_difference"]["ci"] is None


def test_ratio_ci_is_none_when_a_resampled_denominator_median_can_be_zero():
    """b's median is 1 but a resample of b can have median 0: no warning, no infinite bound."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = stats.compare([3.0, 4.0, 5.0], [0.0, 1.0, 1.0])
    assert c["ratio"] == pytest.approx(4.0)
    assert c["ratio_ci"] is None or all(np.isfinite(c["ratio_ci"]))


def test_small_samples_no_ci_and_the_smallest_attainable_p():
    assert stats.describe([1.0, 2.0, 3.0, 4.0])["median_ci"] is None          # below MIN_N_CI
    assert stats.describe([1.0, 2.0, 3.0, 4.0, 5.0])["median_ci"] is not None
    two = stats.describe([1.0, 2.0])
    assert two["p99"] is None and two["p10"] is None and two["p90"] is None   # no p99 from 2 values
    mw = stats.mann_whitney([1, 2], [3, 4])
    assert mw["p"] == pytest.approx(1 / 3) and mw["p_min"] == pytest.approx(1 / 3)   # 2 / C(4, 2)
    assert stats.mann_whitney([1, 2, 3], [4, 5, 6])["p_min"] == pytest.approx(0.1)  # 2 / C(6, 3)


def test_tied_small_samples_never_get_a_p_below_the_smallest_possible():
    """Two runs of 23 retransmissions against two of more: scipy's default switched to the normal
    approximation for the ties and gave p 0.22, below the 0.33 the exact test can reach."""
    mw = stats.mann_whitney([23, 23], [32, 554])
    assert mw["p"] == pytest.approx(1 / 3) and mw["p"] >= mw["p_min"]
    rng = np.random.default_rng(3)
    for n_a, n_b in [(2, 3), (3, 3), (4, 4), (8, 8)]:
        a, b = rng.integers(0, 3, n_a), rng.integers(5, 8, n_b)   # apart, with ties
        mw = stats.mann_whitney(a, b)
        assert mw["p"] == pytest.approx(mw["p_min"]), (a, b)


def test_above_the_exact_bound_the_p_is_scipys():
    from scipy.stats import mannwhitneyu
    a, b = [1, 2, 2, 3, 4, 4, 5, 6, 7], [3, 4, 5, 5, 6, 7, 8, 8, 9]          # C(18, 9) = 48620 splits
    assert stats.mann_whitney(a, b)["p"] == pytest.approx(mannwhitneyu(a, b).pvalue)


def _nanmedian(x, axis=-1):
    return np.nanmedian(x, axis=axis)


def test_run_bootstrap_ci_is_as_wide_as_the_runs_differ():
    """Five runs of 50 requests each, every request of a run alike (one link seed): resampling
    the 250 requests alone gives a CI of the median a few ms wide; resampling runs gives the
    spread of the runs' values, which is all the data can say."""
    runs = [[v] * 50 for v in (100.0, 110.0, 120.0, 130.0, 140.0)]
    pooled = stats.bootstrap_ci(([x for r in runs for x in r],), stats._median, seed=1)
    by_run = stats.run_bootstrap_ci((runs,), _nanmedian, seed=1)
    assert pooled[1] - pooled[0] <= 20.0
    assert by_run[0] <= 110.0 and by_run[1] >= 130.0 and by_run[1] - by_run[0] >= 2 * (pooled[1] - pooled[0])


def test_run_bootstrap_ci_of_runs_without_a_run_effect_is_like_the_pooled_one():
    """Requests independent of their run: the CI over runs is as wide as over requests, within
    the sampling error of five runs (not the double count of resampling at both levels)."""
    rng = np.random.default_rng(4)
    widths = []
    for _ in range(20):
        runs = [list(rng.exponential(100.0, 40)) for _ in range(8)]
        pooled = stats.bootstrap_ci(([x for r in runs for x in r],), stats._median, seed=1)
        by_run = stats.run_bootstrap_ci((runs,), _nanmedian, seed=1, n_resamples=2000)
        widths.append((by_run[1] - by_run[0]) / (pooled[1] - pooled[0]))
    assert 0.6 <= float(np.median(widths)) <= 1.4, widths


def test_run_bootstrap_ci_needs_five_runs_and_ignores_padding():
    assert stats.run_bootstrap_ci(([[1.0, 2.0, 3.0]] * (stats.MIN_N_CI - 1),), _nanmedian, seed=1) is None
    assert stats.run_bootstrap_ci(([[1.0]] * 5 + [[]],), _nanmedian, seed=1) == [1.0, 1.0]
    # runs of 1 and 9 values, all 5.0: the NaN padding of the short runs never enters a resample
    runs = [[5.0], [5.0] * 9, [5.0] * 9, [5.0], [5.0] * 9]
    assert stats.run_bootstrap_ci((runs,), lambda x, axis=-1: np.nanmean(x, axis=axis), seed=1) == [5.0, 5.0]
    # a run weighs with its values: a run of one 0 among runs of nine 1s, drawn j times of 5,
    # gives a mean of 9(5 − j) / (9(5 − j) + j): 0.857 for j = 3 (P(j ≥ 3) = 5.8 %); were the
    # padding read as 0, j = 2 would give 0.6 (P(j ≥ 2) = 26 %)
    runs = [[0.0], [1.0] * 9, [1.0] * 9, [1.0] * 9, [1.0] * 9]
    lo, hi = stats.run_bootstrap_ci((runs,), lambda x, axis=-1: np.nanmean(x, axis=axis), seed=1)
    assert 0.8 < lo < 1.0 and hi == 1.0
    # seeded; two samples resampled independently (a ratio)
    a, b = [[float(i), i + 1.0] for i in range(1, 7)], [[2.0, 3.0]] * 6
    def ratio(x, y, axis=-1):
        return np.nanmedian(x, axis=axis) / np.nanmedian(y, axis=axis)
    assert stats.run_bootstrap_ci((a, b), ratio, seed=3) == stats.run_bootstrap_ci((a, b), ratio, seed=3)
