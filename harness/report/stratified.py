"""An exact stratified rank test: two platforms compared within each of several traces, the traces pooled.

Replays of one trace share its jobs, so a verdict from them says how the platforms differ on that trace;
a claim about queues in general needs several traces (strata), each replayed on both. Values of different
traces are not comparable (one trace's p99 is a 32-node job's, another's a single node's), so each value is
ranked only within its own trace, and the statistic is van Elteren's: the sum over traces of the first
platform's rank sum divided by (the trace's replays + 1), which weighs every trace alike whatever its
number of replays. Its p-value is counted exactly over every relabelling of the replays within each trace
(the permutation distribution), ties at their midranks, two-sided. The smallest it can be is
2 / prod_s C(n_s, k_s): 3 traces with 2 replays a side give 2 / 216 = 0.0093.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from .inference import twice_midranks

MAX_ARRANGEMENTS = 2_000_000   # beyond this the exact count is refused (a few seconds of work)


def _stratum(a: list[float], b: list[float]) -> dict[Fraction, int]:
    """The distribution of this stratum's weighted statistic: {value: arrangements giving it}."""
    pooled = np.asarray([*a, *b], float)
    r2 = twice_midranks(pooled).tolist()
    n, k = len(r2), len(a)
    weight = Fraction(1, 2 * (n + 1))          # twice-midranks, halved, over (n + 1)
    out: dict[Fraction, int] = {}
    for pick in itertools.combinations(range(n), k):
        v = sum(r2[i] for i in pick) * weight
        out[v] = out.get(v, 0) + 1
    return out


def arrangements(strata: list[tuple[list[float], list[float]]]) -> int:
    return math.prod(math.comb(len(a) + len(b), len(a)) for a, b in strata)


def van_elteren_p(strata: list[tuple[list[float], list[float]]]) -> float:
    """Two-sided exact p of the first sample against the second over strata [(a_s, b_s), ...]; nan when a
    stratum lacks either side or the count would be too large."""
    strata = [(list(a), list(b)) for a, b in strata]
    if not strata or any(not a or not b for a, b in strata) or arrangements(strata) > MAX_ARRANGEMENTS:
        return math.nan
    observed = Fraction(0)
    dist: dict[Fraction, int] = {Fraction(0): 1}
    expected = Fraction(0)
    for a, b in strata:
        pooled = np.asarray([*a, *b], float)
        r2 = twice_midranks(pooled).tolist()
        n = len(r2)
        observed += Fraction(sum(r2[: len(a)]), 2 * (n + 1))
        expected += Fraction(len(a), 2)
        this = _stratum(a, b)
        nxt: dict[Fraction, int] = {}
        for v, c in dist.items():
            for w, d in this.items():
                nxt[v + w] = nxt.get(v + w, 0) + c * d
        dist = nxt
    total = sum(dist.values())
    far = abs(observed - expected)
    hit = sum(c for v, c in dist.items() if abs(v - expected) >= far)
    return min(1.0, hit / total)


def min_p(strata_sizes: list[tuple[int, int]]) -> float:
    """The smallest two-sided p the test can give with these (k_s, m_s) replays a side per trace."""
    return 2 / math.prod(math.comb(k + m, k) for k, m in strata_sizes) if strata_sizes else math.nan
