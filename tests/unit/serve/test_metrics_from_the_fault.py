"""A fault's serving figures that no harness constant enters (harness/serve/metrics.py): the fault's instant to the
first success after the last failure, and availability over a fixed window from the fault, the same on every
platform. Availability over the phase was ≈ settle / (settle + degraded): the harness's settle time in disguise."""
from __future__ import annotations

import pytest
from support.serve_results import FAULT, T0, result

from harness.serve import metrics as sm


def test_time_to_success_counts_from_the_fault_to_the_first_success_after_the_last_failure():
    # the fault at 1.95 s; requests started in [2.0, 3.0) fail; the one started at 3.0 answers at 3.02
    t = sm.time_to_success(result(FAULT), T0 + 1.95)
    assert t["value"] == pytest.approx(3.02 - 1.95) and t["lo"] == pytest.approx(3.0 - 1.95)
    assert t["hi"] == pytest.approx(t["value"]) and t["failed"] == 10
    quiet = [(i / 10, 0.02, None) for i in range(10)]
    assert sm.time_to_success(result(quiet), T0 + 0.45)["value"] == pytest.approx(0.52 - 0.45)   # nothing failed
    never = [(i / 10, 0.02, "connect" if i >= 5 else None) for i in range(10)]
    assert sm.time_to_success(result(never), T0 + 0.45)["value"] is None


@pytest.mark.parametrize("settle", [2.0, 10.0, 30.0])
def test_availability_over_the_fixed_window_does_not_move_with_the_phases_length(settle):
    """The same outage, its phase's load stopped `settle` s after recovery: availability over the phase moves with
    the settle time; over the fixed window from the fault it does not."""
    n = int((3.0 + settle) * 10)
    rows = [r for r in FAULT if r[0] < 3.0] + [(i / 10, 0.02, None) for i in range(30, n)]
    res = result(rows, elapsed_s=n / 10)
    w = sm.window_availability(res, T0 + 1.95, 120.0)
    # degraded from the first failure (started 2.0, after the last success at 1.9) to the success answered 3.02
    assert w["degraded_s"] == pytest.approx(3.02 - 2.0, abs=1e-6)
    assert w["value"] == pytest.approx(1 - (3.02 - 2.0) / 120.0, abs=1e-6)
    assert w["lo"] <= w["value"] <= w["hi"] and w["window_s"] == 120.0
    by_requests = sm.availability(res, (T0 + 1.95, T0 + n / 10))["serve_availability"]["value"]
    assert by_requests < w["value"]   # the phase's own figure, lower and moving with its length


def test_a_service_never_healthy_again_is_down_to_the_windows_end():
    never = [(i / 10, 0.02, "connect" if i >= 5 else None) for i in range(60)]
    w = sm.window_availability(result(never, elapsed_s=6.0), T0 + 0.45, 60.0)
    assert w["value"] == pytest.approx(1 - (60.0 - 0.05) / 60.0, abs=1e-3)
    clean = [(i / 10, 0.02, None) for i in range(60)]
    assert sm.window_availability(result(clean, elapsed_s=6.0), T0 + 0.45, 60.0)["value"] == 1.0
