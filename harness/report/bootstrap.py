"""Ratio of medians with a 95% percentile-bootstrap interval, seeded so a report is reproducible.

Up to DIRECT_MAX values a side, each resample is drawn value by value. Beyond that (a campaign
of thousands of runs) drawing n values per resample costs n_boot x n; the median of a resample is
drawn directly instead (see resampled_medians), which has the same distribution and costs
n_boot x log2(n), so big campaigns get the full n_boot resamples too.
"""
from __future__ import annotations

import numpy as np

N_BOOT = 2000
DIRECT_MAX = 2000   # N_BOOT x 2000 draws a side: a fraction of a second


def bootstrap_ratio(a: np.ndarray, b: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
    """Ratio of medians a/b with a 95% percentile-bootstrap interval."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    point = float(np.median(a) / np.median(b)) if np.median(b) != 0 else float("nan")
    rng = np.random.default_rng(seed)
    if max(a.size, b.size) <= DIRECT_MAX:
        ra = np.median(rng.choice(a, (n_boot, a.size)), axis=1)
        rb = np.median(rng.choice(b, (n_boot, b.size)), axis=1)
    else:
        ra = resampled_medians(a, n_boot, rng)
        rb = resampled_medians(b, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ra / rb
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return point, float("nan"), float("nan")
    return point, float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def resampled_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of n_boot resamples of x (n draws with replacement), without drawing the resamples.

    With x sorted, let C(j) be how many of a resample's n draws fall on the j smallest values. The
    median's k-th smallest draw sits at the first j with C(j) >= k. C(j) is Binomial(n, j/n), and
    given C at two positions, the count between them is binomial over the positions between: so
    bisecting on j finds that position with one binomial draw per step, log2(n) steps in all.
    """
    s = np.sort(np.asarray(x, float))
    n = s.size
    k = (n + 1) // 2
    j1, c1 = _kth_draw(k, np.zeros(n_boot, np.int64), np.zeros(n_boot, np.int64), n, rng)
    if n % 2:
        return s[j1 - 1]
    # even n: the mean of the k-th and (k+1)-th smallest draws; the (k+1)-th is at j1 too when more
    # than k draws fell there, else further right, and the counts right of j1 depend only on C(j1)
    j2, _ = _kth_draw(k + 1, j1, np.minimum(c1, k), n, rng)
    j2 = np.where(c1 > k, j1, j2)
    return (s[j1 - 1] + s[j2 - 1]) / 2


def _kth_draw(k: int, lo: np.ndarray, c_lo: np.ndarray, n: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per resample, the first position j > lo with C(j) >= k, and C(j); needs C(lo) = c_lo < k."""
    hi = np.full_like(lo, n)
    c_hi = np.full_like(lo, n)
    while True:
        open_ = hi - lo > 1
        if not open_.any():
            return hi, c_hi
        mid = (lo + hi) // 2
        p = np.where(open_, (mid - lo) / np.maximum(hi - lo, 1), 0.0)
        c_mid = c_lo + rng.binomial(c_hi - c_lo, p)
        left = open_ & (c_mid >= k)
        right = open_ & ~left
        hi, c_hi = np.where(left, mid, hi), np.where(left, c_mid, c_hi)
        lo, c_lo = np.where(right, mid, lo), np.where(right, c_mid, c_lo)
