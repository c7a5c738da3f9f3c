"""Runs needed to settle a comparison: the normal-approximation sample size × π/3 for the rank tests,
checked against values worked by hand (z quantiles from tables: z(0.975) = 1.959964, z(0.95) = 1.644854,
z(0.90) = 1.281552, z(0.80) = 0.841621, z(0.995) = 2.575829)."""
import math

import pytest

from harness.report import power


def test_difference_paired_by_hand():
    # ((1.959964 + 0.841621) * 1.0 / 0.5)^2 = 31.3955; × π/3 = 32.877 -> 33 rounds
    assert power.n_difference(0.5, 1.0) == 33
    assert power.n_difference(-0.5, 1.0) == 33    # the direction does not matter


def test_difference_unpaired_needs_twice_the_core_a_side():
    # 2 × 31.3955 × π/3 = 65.754 -> 66 runs a side
    assert power.n_difference(0.5, 1.0, paired=False) == 66


def test_a_stricter_alpha_asks_more():
    # ((2.575829 + 0.841621) / 0.5)^2 = 46.716; × π/3 = 48.92 -> 49
    assert power.n_difference(0.5, 1.0, alpha=0.01) == 49


def test_equivalence_by_hand():
    # ((1.644854 + 1.281552) * 0.2 / ln 1.25)^2 = (2.926406 * 0.2 / 0.223144)^2 = 6.8797; × π/3 = 7.204 -> 8
    assert power.n_equivalence(0.0, 0.2, 1.25) == 8
    # a true ratio of ×1.1 leaves ln 1.25 - ln 1.1 = 0.127833 of room: (2.926406 * 0.2 / 0.127833)^2 × π/3 = 21.95
    assert power.n_equivalence(math.log(1.1), 0.2, 1.25) == 22


def test_equivalence_is_out_of_reach_outside_the_margin():
    assert power.n_equivalence(math.log(1.3), 0.01, 1.25) is None
    assert power.n_equivalence(math.log(1.25), 0.01, 1.25) is None


@pytest.mark.parametrize("delta, sd", [(0.0, 1.0), (math.nan, 1.0), (0.5, math.nan), (0.5, -1.0)])
def test_no_answer_without_a_difference_or_a_spread(delta, sd):
    assert power.n_difference(delta, sd) is None


def test_never_below_the_fewest_runs_the_exact_test_can_decide_with():
    # a huge effect: the formula says 1, but 2 / 2^5 = 0.0625 > 0.05, so the signed-rank test needs 6 rounds
    assert power.n_difference(2.0, 0.1) == 6
    assert power.floor(True, 0.01) == 8          # 2 / 2^7 = 0.0156, 2 / 2^8 = 0.0078
    assert power.floor(False) == 5               # the report's MIN_N; 2 / C(10, 5) = 0.0079 already
    assert power.floor(False, 0.005) == 6        # 2 / C(12, 6) = 0.0022
    assert power.n_difference(2.0, 0.1, alpha=0.01) == 8


def test_the_assumption_line_names_alpha_power_and_the_family():
    line = power.assumption(0.05 / 6, 6)
    assert "α = 0.0083 (= 0.05 / 6, Holm's strictest step over the 6 Kubernetes-vs-Slurm questions)" in line
    assert "power 80%" in line and "× π/3" in line and "within each metric's margin" in line
    assert "never below the exact test's floor" in line and "Holm" not in power.assumption()
