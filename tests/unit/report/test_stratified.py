"""The exact stratified rank test (van Elteren), checked against brute-force enumeration of every within-stratum
relabelling."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from harness.report import stratified
from harness.report.inference import twice_midranks


def brute(strata):
    def stat(labels):
        t = Fraction(0)
        for (a, b), pick in zip(strata, labels, strict=True):
            pooled = np.asarray([*a, *b], float)
            r2 = twice_midranks(pooled).tolist()
            t += Fraction(sum(r2[i] for i in pick), 2 * (len(pooled) + 1))
        return t
    obs = stat([tuple(range(len(a))) for a, _ in strata])
    exp = sum(Fraction(len(a), 2) for a, _ in strata)
    choices = [list(itertools.combinations(range(len(a) + len(b)), len(a))) for a, b in strata]
    every = [stat(c) for c in itertools.product(*choices)]
    return sum(abs(v - exp) >= abs(obs - exp) for v in every) / len(every)


@pytest.mark.parametrize("strata", [
    [([5, 6], [1, 2]), ([50, 60], [10, 20]), ([7, 9], [3, 3])],           # separated in every trace
    [([5, 1], [6, 2]), ([10, 60], [50, 20]), ([3, 9], [7, 3])],           # mixed
    [([1.0], [2.0]), ([3.0, 3.0], [3.0]), ([4, 8, 9], [5, 6])],            # ties and unequal sizes
])
def test_the_exact_count_matches_every_relabelling(strata):
    assert stratified.van_elteren_p(strata) == pytest.approx(brute(strata))


def test_three_traces_two_replays_a_side_reach_2_over_216_when_separated_everywhere():
    strata = [([5, 6], [1, 2]), ([50, 60], [10, 20]), ([7, 9], [3, 4])]
    assert stratified.van_elteren_p(strata) == pytest.approx(2 / 216)
    assert stratified.min_p([(2, 2)] * 3) == pytest.approx(2 / 216)
    # one replay a side per trace can never go below 2 / 8
    assert stratified.min_p([(1, 1)] * 3) == 0.25


def test_a_missing_side_gives_no_p():
    assert math.isnan(stratified.van_elteren_p([([1], [])]))
    assert math.isnan(stratified.van_elteren_p([]))
