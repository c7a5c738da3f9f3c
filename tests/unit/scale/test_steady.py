"""The steady trace: jobs offered at a constant rate, in whole seconds, never more than the nodes hold."""
from __future__ import annotations

import collections

import pytest

from harness.errors import ConfigError
from harness.scale import steady
from harness.scale.trace import dumps, loads, summary


def busiest_nodes(trace, hold_extra_s: int = 1) -> int:
    """The most nodes held at once if every job started at its submission and held its nodes
    its run time plus a second (KWOK's late Succeeded)."""
    events = sorted([(j.submit_s, j.nodes) for j in trace.jobs]
                    + [(j.submit_s + j.runtime_s + hold_extra_s, -j.nodes) for j in trace.jobs],
                    key=lambda e: (e[0], e[1]))   # a release before an arrival in the same second
    held = best = 0
    for _, n in events:
        held += n
        best = max(best, held)
    return best


def test_arrivals_are_evenly_spaced_and_several_share_a_second_above_one_per_second():
    t = steady.steady_trace(2.5, seconds=10, nodes=64, runtime_s=5)
    assert len(t.jobs) == 25
    per_second = collections.Counter(j.submit_s for j in t.jobs)
    assert [per_second[s] for s in range(10)] == [3, 2] * 5
    assert max(j.submit_s for j in t.jobs) < t.duration_s == 10


def test_below_one_per_second_jobs_are_spaced_whole_seconds_apart():
    t = steady.steady_trace(0.5, seconds=10, nodes=8, runtime_s=5)
    assert [j.submit_s for j in t.jobs] == [0, 2, 4, 6, 8]


def test_a_float_rate_does_not_floor_an_offset_a_second_short():
    # 33 / 1.1 is 29.999... in floating point
    t = steady.steady_trace(1.1, seconds=40, nodes=64, runtime_s=5)
    assert t.jobs[33].submit_s == 30


def test_jobs_are_whole_node_gangs_from_the_sizes_given_with_limit_equal_to_run_time():
    t = steady.steady_trace(4, seconds=60, nodes=128, gpus_per_node=4, runtime_s=7, seed=3)
    assert {j.nodes for j in t.jobs} == {1, 2, 4}
    assert all(j.gpus_per_node == 4 and j.runtime_s == j.limit_s == 7 for j in t.jobs)
    counts = collections.Counter(j.nodes for j in t.jobs)
    # weights 4:2:1 over 240 jobs: 1-node jobs the most, 4-node the fewest (means 137, 69, 34)
    assert counts[1] > counts[2] > counts[4]


def test_a_zero_weight_size_is_never_drawn():
    t = steady.steady_trace(4, seconds=30, nodes=64, runtime_s=2, job_nodes=((1, 1.0), (8, 0.0), (2, 1.0)))
    assert {j.nodes for j in t.jobs} == {1, 2}


def test_same_seed_same_bytes_other_seed_other_sizes_same_arrivals():
    a = steady.steady_trace(3, seconds=20, nodes=64, runtime_s=4, seed=1)
    assert dumps(a) == dumps(steady.steady_trace(3, seconds=20, nodes=64, runtime_s=4, seed=1))
    b = steady.steady_trace(3, seconds=20, nodes=64, runtime_s=4, seed=2)
    assert [j.nodes for j in a.jobs] != [j.nodes for j in b.jobs]
    assert [j.submit_s for j in a.jobs] == [j.submit_s for j in b.jobs]


def test_it_is_named_for_rate_and_nodes_records_its_parameters_and_round_trips():
    t = steady.steady_trace(16, seconds=30, nodes=256, gpus_per_node=8, runtime_s=5, tenants=("x", "y"))
    assert t.name == "steady-16jps-256n"
    assert "16 jobs/s evenly spaced" in t.source
    assert t.params["rate_jobs_per_s"] == 16 and t.params["runtime_s"] == 5 and t.params["job_nodes"][0] == [1, 4.0]
    assert [j.tenant for j in t.jobs[:4]] == ["x", "y", "x", "y"]
    assert loads(dumps(t)) == t
    assert t.shape is not None and (t.shape.nodes, t.shape.gpus_per_node) == (256, 8)


@pytest.mark.parametrize("rate", [1, 2, 4, 8, 16])
def test_the_default_sweep_never_fills_the_cluster(rate):
    t = steady.steady_trace(rate)
    assert busiest_nodes(t) < t.shape.nodes
    assert summary(t).jobs == rate * 30


def test_a_rate_the_nodes_cannot_hold_is_refused_with_the_highest_that_fits():
    limit = steady.max_rate(256, 20)       # 0.75 × 256 / (12/7 × 20) = 5.6 jobs/s
    assert limit == pytest.approx(0.75 * 256 / (12 / 7 * 20))
    steady.steady_trace(5.5, nodes=256, runtime_s=20)
    with pytest.raises(ConfigError) as e:
        steady.steady_trace(6, nodes=256, runtime_s=20)
    assert "over 75% of the 256 nodes" in e.value.message
    assert "at most 5.6 jobs/s" in e.value.tip


@pytest.mark.parametrize("kwargs, words", [
    ({"rate_jobs_per_s": 0}, "rate must be positive"),
    ({"rate_jobs_per_s": float("nan")}, "rate must be positive"),
    ({"rate_jobs_per_s": 1, "seconds": 0.5}, "seconds must be at least 1"),
    ({"rate_jobs_per_s": 1, "runtime_s": 0}, "runtime_s must be at least 1"),
    ({"rate_jobs_per_s": 1, "nodes": 2}, "larger than the cluster's 2 nodes"),
    ({"rate_jobs_per_s": 1, "job_nodes": ((1, 0.0),)}, "weights sum > 0"),
    ({"rate_jobs_per_s": 1, "tenants": ()}, "tenants"),
])
def test_bad_parameters_are_config_errors_that_say_which(kwargs, words):
    with pytest.raises(ConfigError) as e:
        steady.steady_trace(**kwargs)
    assert words in e.value.message and e.value.tip
