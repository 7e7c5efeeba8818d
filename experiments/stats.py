"""Statistics of an experiment: small pure functions over plain sequences of per-run values.

The unit of analysis is the run (each with its own link seed), never the request inside a run.

* :func:`describe`: n, median, p10/p90/p99 (numpy's linear interpolation; a percentile only
  from enough values to have one beyond it: p10/p90 from 10, p99 from 100, else None), and the
  95 % bootstrap confidence interval of the median (percentile method, ``B`` resamples from a
  generator seeded by ``seed``; None with fewer than ``MIN_N_CI`` values: "n too small for a
  CI").
* :func:`compare`: level A (the reference, the definition's first level) against level B:
  ratio ``median(A) / median(B)`` and difference ``median(A) - median(B)``, each with a 95 %
  bootstrap CI (A and B resampled independently); the paired difference over alternated pairs
  (runs of A and B in the same repetition, hence with the same link seed): median of
  ``A_rep - B_rep`` with its bootstrap CI; the two-sided Mann–Whitney U test (:func:`mann_whitney`;
  U is A's statistic), with ``p_min``, the smallest two-sided p the exact test can give at these
  sample sizes (2 / C(n_a + n_b, n_a)): with 3 and 3 runs no difference can reach p < 0.1; Cliff's
  delta ``P(A > B) - P(A < B)`` in [-1, 1].
* :func:`run_bootstrap_ci`: for values nested in runs (one per request, pooled over a level's
  runs by the reproduction's ``pooled_*`` rows), a bootstrap CI that resamples whole runs, so
  it is as wide as the runs' differences make it.
"""
from __future__ import annotations

import itertools
from math import comb
from typing import Callable, Sequence

import numpy as np

B = 9999
LEVEL = 0.95
#: fewer values than this per arm: no bootstrap CI (the report says "n too small for a CI")
MIN_N_CI = 5
#: a percentile is given from this many values up (one value beyond it on its side)
MIN_N_PERCENTILE = {10: 10, 90: 10, 99: 100}
#: the Mann–Whitney p is exact, ties included, up to this many splits of the pooled values into
#: the two samples (8 and 8 runs: 12,870), and scipy's approximation above
EXACT_SPLITS = 20_000


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), 7]))


def bootstrap_ci(samples: tuple, statistic: Callable, seed: int, paired: bool = False):
    """Percentile bootstrap 95 % CI of ``statistic(*samples, axis=-1)``; None if any sample has
    fewer than 2 values or the interval is undefined or unbounded (a ratio whose denominator's
    resampled median can be 0)."""
    if any(len(s) < max(2, MIN_N_CI) for s in samples):
        return None
    from scipy.stats import bootstrap
    with np.errstate(divide="ignore", invalid="ignore"):   # a resample's median may be 0
        res = bootstrap(tuple(np.asarray(s, float) for s in samples), statistic, paired=paired,
                        vectorized=True, n_resamples=B, confidence_level=LEVEL,
                        method="percentile", random_state=_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return [lo, hi] if np.isfinite(lo) and np.isfinite(hi) else None


#: values held in memory per chunk of run-level resamples
_CHUNK_VALUES = 5_000_000


def _resample_runs(runs: list[np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` resamples of values nested in ``runs``, each drawing len(runs) runs with
    replacement and keeping every value of a drawn run: rows NaN-padded to a common width."""
    width = max(len(r) for r in runs)
    padded = np.full((len(runs), width), np.nan)
    for i, r in enumerate(runs):
        padded[i, :len(r)] = r
    return padded[rng.integers(0, len(runs), (n, len(runs)))].reshape(n, -1)


def run_bootstrap_ci(samples: tuple, statistic: Callable, seed: int, n_resamples: int = B):
    """Percentile bootstrap 95 % CI of ``statistic(*values, axis=-1)`` where each sample is a
    sequence of runs, each a sequence of values (e.g. one per request): a resample draws the
    sample's runs with replacement, each with all its values (the cluster bootstrap: Davison &
    Hinkley, *Bootstrap Methods*, 1997, §3.8, strategy 2; samples independently).  Pooling the
    values and resampling them alone would treat the requests of one run — one link seed, one
    host's timing — as independent, and give a CI narrower than the runs support.
    ``statistic`` must ignore NaN (``np.nanmedian``, …: runs of unequal size are padded with
    it).  None if a sample has fewer than ``MIN_N_CI`` runs with values (the unit of analysis is
    the run, as for :func:`bootstrap_ci`) or the interval is not finite."""
    groups = [[np.asarray(r, float) for r in runs if len(r)] for runs in samples]
    if any(len(g) < MIN_N_CI for g in groups):
        return None
    rng = _rng(seed)
    chunk = max(1, _CHUNK_VALUES // max(len(g) * max(map(len, g)) for g in groups))
    stats = []
    with np.errstate(divide="ignore", invalid="ignore"):   # a resample's median may be 0
        for start in range(0, n_resamples, chunk):
            n = min(chunk, n_resamples - start)
            stats.append(statistic(*(_resample_runs(g, n, rng) for g in groups), axis=-1))
        lo, hi = np.percentile(np.concatenate(stats), [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    return [float(lo), float(hi)] if np.isfinite(lo) and np.isfinite(hi) else None


def _median(x, axis=-1):
    return np.median(x, axis=axis)


def _ratio(a, b, axis=-1):
    return np.median(a, axis=axis) / np.median(b, axis=axis)


def _difference(a, b, axis=-1):
    return np.median(a, axis=axis) - np.median(b, axis=axis)


def describe(values: Sequence[float], seed: int = 1) -> dict:
    x = np.asarray(values, float)
    if not len(x):
        return {"n": 0, "median": None, "median_ci": None, "p10": None, "p90": None, "p99": None}
    pct = {q: float(np.percentile(x, q)) if len(x) >= MIN_N_PERCENTILE[q] else None for q in (10, 90, 99)}
    return {"n": int(len(x)), "median": float(np.median(x)), "median_ci": bootstrap_ci((x,), _median, seed),
            "p10": pct[10], "p90": pct[90], "p99": pct[99]}


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float | None:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not len(a) or not len(b):
        return None
    sign = np.sign(a[:, None] - b[None, :])
    return float(sign.sum() / sign.size)


def _exact_p(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sided exact p of the Mann–Whitney U of ``a`` against ``b``, ties included: over every
    split of the pooled values into ``len(a)`` and ``len(b)`` (equally likely when the arms do not
    differ), twice the smaller share of splits whose rank sum of the first group (midranks for ties;
    U plus a constant) is at most / at least ``a``'s, at most 1.  Never below ``2 / splits``."""
    from scipy.stats import rankdata
    ranks = rankdata(np.r_[a, b])
    groups = np.array(list(itertools.combinations(range(len(ranks)), len(a))))
    sums, observed = ranks[groups].sum(axis=1), ranks[:len(a)].sum()
    return float(min(1.0, 2 * min(np.mean(sums <= observed), np.mean(sums >= observed))))


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> dict | None:
    """The two-sided Mann–Whitney U test of ``a`` against ``b``: ``u`` (a's statistic,
    ``scipy.stats.mannwhitneyu``), ``p`` and ``p_min`` (the smallest p the exact test can give at
    these sample sizes, 2 / C(n_a + n_b, n_a)).  ``p`` is exact (:func:`_exact_p`) up to
    :data:`EXACT_SPLITS` splits, so at small n it is never below ``p_min`` whatever the ties;
    above, scipy's default: the exact distribution without ties when a sample has at most 8
    values, else the normal approximation with tie correction.  None when a sample is empty."""
    if not len(a) or not len(b):
        return None
    from scipy.stats import mannwhitneyu
    a, b = np.asarray(a, float), np.asarray(b, float)
    res = mannwhitneyu(a, b, alternative="two-sided")
    splits = comb(len(a) + len(b), len(a))
    return {"u": float(res.statistic), "p": _exact_p(a, b) if splits <= EXACT_SPLITS else float(res.pvalue),
            "p_min": min(1.0, 2 / splits)}


def paired_difference(pairs: Sequence[tuple[float, float]], seed: int = 1) -> dict:
    d = np.asarray([x - y for x, y in pairs], float)
    return {"n_pairs": int(len(d)), "median": float(np.median(d)) if len(d) else None,
            "ci": bootstrap_ci((d,), _median, seed)}


def compare(a: Sequence[float], b: Sequence[float], pairs: Sequence[tuple[float, float]] = (),
            seed: int = 1) -> dict:
    a, b = np.asarray(a, float), np.asarray(b, float)
    both = len(a) > 0 and len(b) > 0
    mb = float(np.median(b)) if len(b) else None
    return {
        "ratio": float(np.median(a) / mb) if both and mb else None,
        "ratio_ci": bootstrap_ci((a, b), _ratio, seed) if both and mb else None,
        "difference": float(np.median(a) - mb) if both else None,
        "difference_ci": bootstrap_ci((a, b), _difference, seed) if both else None,
        "paired_difference": paired_difference(pairs, seed),
        "mann_whitney": mann_whitney(a, b),
        "cliffs_delta": cliffs_delta(a, b),
    }
