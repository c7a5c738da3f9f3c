"""What the report may claim from a handful of runs: an exact two-sample test and Holm's step-down
over a family of comparisons (the paired test is paired.py's, the equivalence rule equivalence.py's).

The test is the Wilcoxon-Mann-Whitney rank-sum test, two-sided, with its p-value counted exactly
over every way of splitting the pooled runs into the two groups (the permutation distribution),
ties included (midranks). It assumes nothing about the distribution, which matters for times with
long tails and for a few runs where no normality check is possible, and its p-value is exact at
n = 5 where a t-test's or a bootstrap's is not. Its smallest possible two-sided p-value is
2 / C(n1 + n2, n1): that is what sets the minimum n a verdict needs (min_n).

scipy is not a dependency of the harness; the counting below is ~30 lines of numpy and is
checked against enumeration of every split in the tests.
"""
from __future__ import annotations

import math

import numpy as np

ALPHA = 0.05
# Pooled runs up to which the permutation distribution is counted exactly (a few ms each). Beyond
# that the normal approximation with tie correction is accurate to far better than the decision needs.
EXACT_MAX = 80


def twice_midranks(pooled: np.ndarray) -> np.ndarray:
    """2 x the midrank of each value (ranks from 1): integers, so the counting stays exact."""
    order = np.argsort(pooled, kind="stable")
    s = pooled[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    ends = np.r_[starts[1:], s.size]          # one past each tie block
    block = np.repeat(starts + ends + 1, ends - starts)   # (first rank + last rank) of the block
    out = np.empty(s.size, np.int64)
    out[order] = block
    return out


def _subset_sum_counts(weights: np.ndarray, k: int) -> np.ndarray:
    """counts[s]: how many k-element subsets of `weights` (non-negative integers) sum to s."""
    total = int(weights.sum())
    c = np.zeros((k + 1, total + 1))
    c[0, 0] = 1.0
    for w in weights.tolist():
        # numpy buffers overlapping operands, so each weight is used at most once per subset
        c[1:, w:] += c[:-1, :total + 1 - w]
    return c[k]


def rank_sum_p(a, b) -> float:
    """Two-sided p-value of the rank-sum test of a against b (exact up to EXACT_MAX pooled runs)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n1, n2 = a.size, b.size
    if n1 == 0 or n2 == 0:
        return math.nan
    if n1 > n2:
        a, b, n1, n2 = b, a, n2, n1   # the statistic of the smaller group; two-sided, so symmetric
    n = n1 + n2
    r2 = twice_midranks(np.concatenate([a, b]))
    w = int(r2[:n1].sum())
    mean2 = n1 * (n + 1)                      # E[sum of twice-midranks], an integer
    if n <= EXACT_MAX:
        counts = _subset_sum_counts(r2, n1)
        dev = np.abs(np.arange(counts.size) - mean2)
        return float(min(1.0, counts[dev >= abs(w - mean2)].sum() / counts.sum()))
    ties = np.unique(r2, return_counts=True)[1].astype(float)
    var = n1 * n2 / 12 * ((n + 1) - float((ties ** 3 - ties).sum()) / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = max(0.0, abs(w - mean2) / 2 - 0.5) / math.sqrt(var)   # /2: back to ranks; 0.5: continuity
    return float(min(1.0, math.erfc(z / math.sqrt(2))))


def holm(p: list[float], max_true: int | None = None) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input's order: reject where adjusted < alpha.
    Controls the chance of any false verdict in the family at alpha, whatever the dependence.

    max_true: at most this many of the hypotheses can be true together (a question's "no difference" and
    its "not equivalent" cannot both be: the family of k questions tested both ways holds 2k hypotheses
    and at most k true ones). Each step then divides alpha by min(max_true, hypotheses left) instead of
    the hypotheses left: Shaffer's modified sequentially rejective procedure (Shaffer 1986, JASA 81:826),
    with a bound on its t_j, so no less strict than Shaffer's own."""
    m = len(p)
    cap = m if max_true is None else max_true
    order = sorted(range(m), key=lambda i: p[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, min(cap, m - rank) * p[i]))
        out[i] = running
    return out


def min_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the exact rank-sum test can give (complete separation, no ties)."""
    return min(1.0, 2 / math.comb(n1 + n2, n1)) if n1 and n2 else 1.0


def min_n(m: int, alpha: float = ALPHA) -> int:
    """The smallest equal n per side at which even complete separation passes Holm's strictest
    step (alpha / m): below it, no comparison of the family can ever be called."""
    n = 1
    while min_p(n, n) >= alpha / m:
        n += 1
    return n
