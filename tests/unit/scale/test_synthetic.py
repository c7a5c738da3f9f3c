"""The synthetic generator: deterministic for a seed, and its distributions where the parameters put them.

Tolerances are set at about four standard deviations of the sampled statistic at the sizes used
(10,000-12,000 jobs), so a correct generator passes on any seed, not only on the ones pinned here.
"""
from __future__ import annotations

import math
import statistics

import pytest
from support.paths import FIXTURES

from harness.errors import ConfigError
from harness.scale.synthetic import SyntheticParams, default_trace, generate
from harness.scale.trace import dumps, loads, summary

GOLDEN = FIXTURES / "scale" / "synthetic-8n-12h-seed7.jsonl"
BIG = SyntheticParams(hours=60 * 24)      # whole days, so the day profile integrates to its mean
SEEDS = (2026, 3, 11)


@pytest.fixture(scope="module", params=SEEDS)
def big(request):
    return generate(BIG, request.param)


def test_same_seed_same_bytes_other_seed_other_trace():
    a, b = dumps(default_trace(16, 8, 24, seed=5)), dumps(default_trace(16, 8, 24, seed=5))
    assert a == b
    assert dumps(default_trace(16, 8, 24, seed=6)) != a


def test_the_committed_trace_is_made_again_byte_for_byte():
    # a change here means old seeds now give other traces: bump GENERATOR_VERSION and regenerate
    assert dumps(default_trace(nodes=8, gpus_per_node=4, hours=12, seed=7)) == GOLDEN.read_text()


def test_a_generated_trace_records_how_it_was_made_and_round_trips():
    t = default_trace(32, 4, 6, seed=1)
    assert t.seed == 1 and t.shape.nodes == 32 and t.shape.gpus_per_node == 4 and t.duration_s == 6 * 3600
    assert t.params["generator_version"] == 1 and t.params["nodes"] == 32
    assert loads(dumps(t)) == t


def test_at_least_ten_thousand_jobs(big):
    assert len(big.jobs) >= 10_000


def test_offered_gpu_load_is_the_target(big):
    assert summary(big).gpu_load == pytest.approx(BIG.target_load, rel=0.05)


def test_offered_node_load_is_the_target_on_a_cpu_only_shape():
    t = generate(SyntheticParams(nodes=100, gpus_per_node=0, hours=24 * 20, target_load=0.5), seed=1)
    assert all(j.gpus_per_node == 0 for j in t.jobs)
    assert summary(t).node_load == pytest.approx(0.5, rel=0.05) and summary(t).gpu_load is None


def test_sizes_are_powers_of_two_and_mostly_one_node(big):
    sizes = [j.nodes for j in big.jobs]
    assert set(sizes) <= {1, 2, 4, 8, 16, 32, 64}
    expected = 1 / sum(0.5 ** k for k in range(7))          # weight of 1 node over all weights
    assert sizes.count(1) / len(sizes) == pytest.approx(expected, abs=0.02)
    assert sizes.count(64) > 0                               # the long tail is there
    assert sizes.count(2) / len(sizes) == pytest.approx(expected / 2, abs=0.02)


def test_only_one_node_jobs_use_part_of_a_node(big):
    one = [j for j in big.jobs if j.nodes == 1]
    assert all(j.gpus_per_node == 8 for j in big.jobs if j.nodes > 1)
    assert {j.gpus_per_node for j in one} == {1, 2, 4, 8}
    assert sum(j.gpus_per_node < 8 for j in one) / len(one) == pytest.approx(BIG.partial_node_share, abs=0.03)


def test_run_times_are_log_normal_within_their_clip(big):
    runs = [j.runtime_s for j in big.jobs]
    assert min(runs) >= BIG.runtime_min_s and max(runs) <= BIG.limit_menu_s[-1]
    assert statistics.median(runs) == pytest.approx(BIG.runtime_median_s, rel=0.1)
    assert statistics.pstdev(math.log(r) for r in runs) == pytest.approx(BIG.runtime_sigma, rel=0.1)


def test_limits_are_round_values_at_or_over_the_run_time(big):
    assert all(j.limit_s in BIG.limit_menu_s and j.limit_s >= j.runtime_s for j in big.jobs)
    assert statistics.median(j.limit_s / j.runtime_s for j in big.jobs) > 1.5


def test_arrivals_follow_the_day(big):
    # the share of arrivals in the 12 h centred on the peak: (12 + A * 24 / pi) / 24 for a cosine profile
    hours = [(j.submit_s / 3600 + BIG.start_hour) % 24 for j in big.jobs]
    peak_half = sum(abs(h - BIG.peak_hour) < 6 for h in hours) / len(hours)
    assert peak_half == pytest.approx((12 + BIG.day_amplitude * 24 / math.pi) / 24, abs=0.03)
    flat = generate(SyntheticParams(hours=24 * 20, day_amplitude=0.0), seed=1)
    flat_hours = [(j.submit_s / 3600) % 24 for j in flat.jobs]
    assert sum(abs(h - 14) < 6 for h in flat_hours) / len(flat_hours) == pytest.approx(0.5, abs=0.05)


def test_tenants_get_their_weights_of_the_jobs(big):
    n = len(big.jobs)
    for name, weight in BIG.tenants:
        assert sum(j.tenant == name for j in big.jobs) / n == pytest.approx(weight, abs=0.03)


def test_a_thousand_node_cluster_gets_jobs_bigger_than_64_nodes():
    t = default_trace(1000, 8, 24, seed=1)
    assert max(j.nodes for j in t.jobs) == 512 and summary(t).sizes[">64"] > 0


@pytest.mark.parametrize(("change", "says"), [
    ({"nodes": 0}, "nodes must be at least 1"),
    ({"target_load": 0}, "target_load"),
    ({"day_amplitude": 1.0}, "day_amplitude"),
    ({"max_job_nodes": 65}, "max_job_nodes"),
    ({"limit_menu_s": (3600, 900)}, "limit_menu_s"),
    ({"tenants": (("a", 1.0), ("a", 2.0))}, "tenants"),
    ({"qos": (("normal", 0.0),)}, "qos"),
    ({"overestimate_max": 0.5}, "overestimate_max"),
])
def test_bad_parameters_are_refused_with_what_is_wrong(change, says):
    with pytest.raises(ConfigError, match=says):
        SyntheticParams(**change)
