"""The report's statistics: the exact rank-sum test, Holm's adjustment and minimum n."""
import itertools

import numpy as np
import pytest

from harness.report import inference as inf


def _enumerated_p(a, b) -> float:
    """The two-sided permutation p-value of the rank sum, by listing every split of the pooled runs."""
    pooled = np.concatenate([a, b]).astype(float)
    r2 = inf.twice_midranks(pooled)
    n1, n = len(a), len(pooled)
    mean2 = n1 * (n + 1)
    seen = abs(int(r2[:n1].sum()) - mean2)
    splits = list(itertools.combinations(range(n), n1))
    return sum(abs(int(r2[list(c)].sum()) - mean2) >= seen for c in splits) / len(splits)


def test_known_exact_p_values():
    assert inf.rank_sum_p([1, 2, 3], [4, 5, 6]) == pytest.approx(2 / 20)   # 2 of C(6, 3) splits as extreme
    assert inf.rank_sum_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert inf.rank_sum_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(2 / 252)   # two-sided
    assert inf.rank_sum_p([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    # one swap at the boundary: 4 splits of 252 are at least as extreme
    assert inf.rank_sum_p([1, 2, 3, 4, 6], [5, 7, 8, 9, 10]) == pytest.approx(4 / 252)


def test_exact_p_is_the_enumerated_permutation_p_with_and_without_ties():
    rng = np.random.default_rng(7)
    for trial in range(40):
        n1, n2 = rng.integers(1, 7, 2)
        if trial % 2:   # whole seconds: many ties, as Slurm's queue times had
            a, b = rng.integers(0, 4, n1).astype(float), rng.integers(1, 5, n2).astype(float)
        else:
            a, b = rng.normal(0, 1, n1), rng.normal(0.8, 1, n2)
        assert inf.rank_sum_p(a, b) == pytest.approx(_enumerated_p(a, b), abs=1e-12), (a, b)


def test_large_samples_use_the_normal_approximation_which_agrees():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1, 41), rng.normal(0.5, 1, 41)
    assert a.size + b.size > inf.EXACT_MAX
    approx = inf.rank_sum_p(a, b)
    exact_limit = inf.EXACT_MAX
    try:
        inf.EXACT_MAX = 10_000
        exact = inf.rank_sum_p(a, b)
    finally:
        inf.EXACT_MAX = exact_limit
    assert approx == pytest.approx(exact, rel=0.05)


def test_holm_on_known_p_values():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> kept monotone at 0.06
    assert inf.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert inf.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])   # capped at 1
    assert inf.holm([]) == []
    assert [p < 0.05 for p in inf.holm([0.012, 0.03, 0.2])] == [True, False, False]
    # Holm rejects what Bonferroni rejects and more: 0.04 fails 0.05 / 2 but passes Holm's second step
    assert [p < 0.05 for p in inf.holm([0.01, 0.04])] == [True, True]


def test_smallest_p_and_minimum_n():
    assert inf.min_p(3, 3) == pytest.approx(0.1)
    assert inf.min_p(5, 5) == pytest.approx(2 / 252)
    assert inf.min_p(6, 6) == pytest.approx(2 / 924)
    # 2 / C(2n, n) must fall below 0.05 / m
    assert [inf.min_n(m) for m in (1, 3, 6, 7, 15, 21, 30)] == [4, 5, 5, 6, 6, 6, 7]


