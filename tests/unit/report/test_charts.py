"""The violin's density: matplotlib's own up to KDE_EXACT_MAX values, binned beyond, and the two agree."""
import numpy as np
from matplotlib import mlab

from harness.report import charts


def test_small_samples_get_matplotlibs_own_density():
    x = np.random.default_rng(3).lognormal(0, 0.3, charts.KDE_EXACT_MAX)
    coords = np.linspace(x.min(), x.max(), 100)
    assert np.array_equal(charts._kde(x, coords), mlab.GaussianKDE(x, None).evaluate(coords))


def test_binned_density_is_the_exact_one_to_well_below_a_pixel():
    rng = np.random.default_rng(4)
    # a long tail and a second mode, like step times with restarts
    x = np.concatenate([rng.lognormal(np.log(0.5), 0.2, 40_000), rng.normal(0.9, 0.05, 8_000)])
    coords = np.linspace(x.min(), x.max(), 100)
    exact = mlab.GaussianKDE(x, None).evaluate(coords)
    binned = charts._kde(x, coords)
    assert not np.array_equal(binned, exact)   # the binned path ran
    assert np.abs(binned - exact).max() < 1e-4 * exact.max()


def test_one_repeated_value_has_no_spread():
    x = np.full(50_000, 2.0)
    assert charts._kde(x, np.linspace(2.0, 2.0, 100)).tolist() == [1.0] * 100
