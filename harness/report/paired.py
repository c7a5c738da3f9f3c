"""Within-round comparisons: the exact Wilcoxon signed-rank test and the interval that goes with it.

An interleaved campaign runs every platform once per round (harness/order.py), so the machine's
drift over the campaign (other load, caches, thermal state) hits both runs of a round alike. The
difference within each round removes it; the rank-sum test, which pools all runs of a side,
counts it as noise and loses the rounds' agreement.

The test works on d = ln(a / b) per round where every value is positive (so "×1.14" means the same
at 1 s and at 10 s), else on d = a - b. Zero differences are dropped (Wilcoxon's rule: a tied
round says nothing about the direction) and the test runs on the rounds left; ties among |d| get
midranks. Its p-value is counted exactly over every assignment of signs to the ranks up to
EXACT_MAX rounds, by the normal approximation with tie correction beyond.

The effect is the Hodges-Lehmann estimate (the median of the Walsh averages (d_i + d_j) / 2, i <= j)
and its interval the distribution-free one of the same test (Walsh averages at the critical ranks of
the signed-rank distribution): exact coverage at least as stated, whatever the shape of d.
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from .inference import twice_midranks

EXACT_MAX = 100     # rounds up to which the signed-rank distribution is counted (sums up to n (n + 1))
WALSH_MAX = 2000    # rounds up to which the Walsh averages are formed; beyond, their quantiles are searched


def _sign_counts(weights: np.ndarray) -> np.ndarray:
    """counts[s]: how many subsets of `weights` (non-negative integers) sum to s: the sign assignments."""
    c = np.zeros(int(weights.sum()) + 1)
    c[0] = 1.0
    for w in weights.tolist():
        c[w:] += c[:c.size - w].copy()
    return c


def signed_rank_p(d) -> float:
    """Two-sided p-value of the signed-rank test that d is centred on 0; 1.0 when every d is 0."""
    d = np.asarray(d, float)
    d = d[d != 0]
    n = d.size
    if n == 0:
        return 1.0
    r2 = twice_midranks(np.abs(d))
    total, w = int(r2.sum()), int(r2[d > 0].sum())
    if n <= EXACT_MAX:
        counts = _sign_counts(r2)
        dev = np.abs(2 * np.arange(counts.size) - total)
        return float(min(1.0, counts[dev >= abs(2 * w - total)].sum() / counts.sum()))
    var = float((r2.astype(float) ** 2).sum()) / 16   # of W+ in ranks: sum(rank^2) / 4
    z = max(0.0, abs(w - total / 2) / 2 - 0.5) / math.sqrt(var)
    return float(min(1.0, math.erfc(z / math.sqrt(2))))


def signed_rank_one_sided_p(d, alternative: str) -> float:
    """One-sided p-value of the signed-rank test: "less" (d centred below 0) is P(W+ <= w), "greater"
    P(W+ >= w), W+ the sum of the positive differences' ranks; 1.0 when every d is 0. Exact up to EXACT_MAX."""
    d = np.asarray(d, float)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    r2 = twice_midranks(np.abs(d))
    total, w = int(r2.sum()), int(r2[d > 0].sum())
    if d.size <= EXACT_MAX:
        counts = _sign_counts(r2)
        tail = counts[:w + 1] if alternative == "less" else counts[w:]
        return float(min(1.0, tail.sum() / counts.sum()))
    var = float((r2.astype(float) ** 2).sum()) / 16
    z = (w - total / 2) / 2 / math.sqrt(var)
    z = z + 0.5 / math.sqrt(var) if alternative == "less" else z - 0.5 / math.sqrt(var)   # continuity
    return float(NormalDist().cdf(z) if alternative == "less" else 1 - NormalDist().cdf(z))


def tost_p(d, margin: float) -> float:
    """Two one-sided signed-rank tests of the within-round log-ratios d against ±ln(margin): the larger p.
    Small when d sits inside the margin on both sides (equivalence), whatever its spread's shape."""
    d = np.asarray(d, float)
    bound = math.log(margin)
    return max(signed_rank_one_sided_p(d - bound, "less"), signed_rank_one_sided_p(d + bound, "greater"))


def _critical_count(n: int, level: float) -> int:
    """k: the largest count with P(T+ <= k - 1) <= (1 - level) / 2 under the null (no ties); 0 if none."""
    tail = (1 - level) / 2
    if n <= EXACT_MAX:
        counts = _sign_counts(np.arange(1, n + 1))
        cdf = np.cumsum(counts) / counts.sum()
        return int((cdf <= tail).sum())
    mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return max(0, math.floor(mean + NormalDist().inv_cdf(tail) * sd + 0.5))


def _walsh_kth(s: np.ndarray, k: int) -> float:
    """The k-th smallest (1-based) of the Walsh averages of the sorted values s."""
    if s.size <= WALSH_MAX:
        i, j = np.triu_indices(s.size)
        return float(np.partition((s[i] + s[j]) / 2, k - 1)[k - 1])
    lo, hi = float(s[0]), float(s[-1])
    idx = np.arange(s.size)
    for _ in range(200):   # bisect on the value: how many averages are <= v, in n log n
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        le = int(np.maximum(np.searchsorted(s, 2 * mid - s, side="right") - idx, 0).sum())
        lo, hi = (lo, mid) if le >= k else (mid, hi)
    return hi


def walsh_interval(d, level: float) -> tuple[float, float, float]:
    """(Hodges-Lehmann estimate, low, high) of the centre of d; NaN bounds where n is too small for `level`."""
    s = np.sort(np.asarray(d, float))
    n = s.size
    if n == 0:
        return math.nan, math.nan, math.nan
    m = n * (n + 1) // 2
    est = (_walsh_kth(s, (m + 1) // 2) + _walsh_kth(s, m // 2 + 1)) / 2
    k = _critical_count(n, level)
    if k == 0:
        return est, math.nan, math.nan
    return est, _walsh_kth(s, k), _walsh_kth(s, m + 1 - k)
