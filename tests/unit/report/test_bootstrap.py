"""The bootstrap's medians: drawn directly for big samples, they follow the resampling distribution exactly."""
import itertools
from collections import Counter

import numpy as np
import pytest

from harness.report.bootstrap import DIRECT_MAX, bootstrap_ratio, resampled_medians


def _exact_median_distribution(x: np.ndarray) -> dict[float, float]:
    """Every one of the n**n equally likely resamples of x, and the median of each."""
    n = x.size
    c = Counter(float(np.median(x[list(idx)])) for idx in itertools.product(range(n), repeat=n))
    return {m: k / n**n for m, k in c.items()}


@pytest.mark.parametrize("x", [[3.0], [1.0, 5.0], [2.0, 7.0, 11.0], [1.0, 2.0, 4.0, 8.0], [5.0, 1.0, 9.0, 3.0, 7.0],
                               [1.0, 1.0, 2.0, 6.0, 6.0, 6.5]])   # odd, even, unsorted, ties
def test_direct_medians_follow_the_resampling_distribution(x):
    x = np.array(x)
    exact = _exact_median_distribution(x)
    draws = resampled_medians(x, 200_000, np.random.default_rng(1))
    seen = Counter(draws.tolist())
    assert set(seen) <= set(exact)
    for m, p in exact.items():   # 200,000 draws: a frequency's standard error is at most 0.0012
        assert seen[m] / draws.size == pytest.approx(p, abs=0.006), (m, p)


def test_small_samples_keep_the_value_by_value_resampling():
    # a campaign of up to DIRECT_MAX runs a side gets the interval it always got
    a, b = np.linspace(1, 2, 40), np.linspace(2, 5, 31)
    rng = np.random.default_rng(0)
    ra = np.median(rng.choice(a, (2000, a.size)), axis=1)
    rb = np.median(rng.choice(b, (2000, b.size)), axis=1)
    want = (np.percentile(ra / rb, 2.5), np.percentile(ra / rb, 97.5))
    assert bootstrap_ratio(a, b)[1:] == want


def test_big_samples_get_a_seeded_interval_around_the_truth():
    rng = np.random.default_rng(7)
    a = rng.lognormal(np.log(3.0), 0.2, DIRECT_MAX * 5)
    b = rng.lognormal(np.log(2.0), 0.2, DIRECT_MAX * 5 + 1)
    point, lo, hi = bootstrap_ratio(a, b)
    assert lo < point < hi and lo < 1.5 < hi and hi - lo < 0.05
    assert bootstrap_ratio(a, b) == (point, lo, hi)
