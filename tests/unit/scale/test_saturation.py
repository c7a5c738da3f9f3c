"""The saturation point: the highest offered rate kept up with, counted up from the lowest; the plateau."""
from __future__ import annotations

import pytest

from harness.scale.saturation import KEEPS_UP, by_platform, kept_up, saturation


def test_kept_up_means_at_least_nine_tenths_of_offered():
    assert KEEPS_UP == 0.9
    assert kept_up(10, 9.0) and not kept_up(10, 8.99)


def test_a_sweep_that_flattens_saturates_at_the_last_rate_it_kept_up_with():
    s = saturation([(1, 1.0), (2, 1.95), (4, 3.7), (8, 5.1), (16, 5.3)])
    assert s.saturation_jobs_per_s == 4 and s.reached
    assert s.plateau_jobs_per_s == 5.3 and s.plateau_at_jobs_per_s == 16
    assert s.points == 5 and s.dropped == 0
    assert s.reason == "fell behind at 8 jobs/s"


def test_points_in_any_order_give_the_same_answer():
    pts = [(16, 5.3), (1, 1.0), (8, 5.1), (4, 3.7), (2, 1.95)]
    assert saturation(pts) == saturation(sorted(pts))


def test_keeping_up_again_past_the_first_miss_is_named_not_taken():
    s = saturation([(1, 1.0), (2, 1.5), (4, 4.0)])
    assert s.saturation_jobs_per_s == 1 and s.reached
    assert "fell behind at 2 jobs/s" in s.reason and "kept up again at 4" in s.reason


def test_a_sweep_that_always_kept_up_gives_a_lower_bound_not_a_saturation():
    s = saturation([(1, 1.0), (2, 2.0), (4, 3.9)])
    assert s.saturation_jobs_per_s == 4 and not s.reached
    assert "saturation is above 4 jobs/s" in s.reason


def test_falling_behind_at_the_lowest_rate_has_no_saturation_point():
    s = saturation([(1, 0.5), (2, 0.6)])
    assert s.saturation_jobs_per_s is None and s.reached
    assert s.plateau_jobs_per_s == 0.6
    assert "lowest rate offered (1 jobs/s)" in s.reason


def test_one_repeat_that_fell_behind_makes_its_rate_not_kept_up():
    s = saturation([(1, 1.0), (2, 2.0), (2, 1.2), (4, 4.0)])
    assert s.saturation_jobs_per_s == 1 and s.points == 4


@pytest.mark.parametrize("pts, usable", [([], 0), ([(2, 2.0)], 1), ([(2, 2.0), (None, 1.0), (0, 0.0)], 1)])
def test_fewer_than_two_points_give_none_and_say_why(pts, usable):
    s = saturation(pts)
    assert s.saturation_jobs_per_s is None and not s.reached and s.points == usable
    assert f"{usable} usable point" in s.reason and "at least two offered rates" in s.reason
    assert s.dropped == len(pts) - usable
    assert s.plateau_jobs_per_s == (2.0 if usable else None)   # one point still says what it achieved


def test_repeats_of_one_rate_are_not_a_sweep():
    s = saturation([(4, 4.0), (4, 3.9)])
    assert s.saturation_jobs_per_s is None and s.plateau_jobs_per_s == 4.0
    assert "every point was offered 4 jobs/s" in s.reason


def test_by_platform_keeps_each_platform_apart():
    out = by_platform({"k8s": [(1, 1.0), (2, 1.0)], "slurm": [(1, 1.0), (2, 2.0)]})
    assert out["k8s"].saturation_jobs_per_s == 1 and out["k8s"].reached
    assert out["slurm"].saturation_jobs_per_s == 2 and not out["slurm"].reached
