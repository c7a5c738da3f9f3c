"""Queue figures from job outcomes: nearest-rank percentiles per size class, makespan, GPU utilisation,
tenant shares."""
from __future__ import annotations

import pytest

from harness.scale.outcome import (
    JobOutcome,
    figures,
    gpu_utilisation,
    held_beyond_run,
    largest_jobs,
    makespan_s,
    nearest_rank,
    placement,
    placement_rate,
    queue_by_size,
    tenant_shares,
    throughput,
    utilisation_series,
    work_utilisation,
)


def o(id, nodes, submit, start, end, tenant="a", gpus=8, state="completed"):
    return JobOutcome(id, tenant, nodes, gpus, submit, start, end, state)


def test_nearest_rank_names_a_wait_some_job_had():
    waits = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert nearest_rank(waits, 50) == 3.0
    assert nearest_rank(waits, 90) == 100.0      # ceil(4.5) = 5th
    assert nearest_rank(waits, 99) == 100.0
    assert nearest_rank([7.0], 50) == 7.0 and nearest_rank([], 50) is None


def test_queue_by_size_splits_by_node_count_and_counts_jobs_that_never_started():
    out = [o("a", 1, 0, 2, 10), o("b", 1, 0, 4, 10), o("c", 4, 0, 10, 20), o("d", 16, 0, None, None, state="pending")]
    q = queue_by_size(out)
    assert list(q) == ["1", "2-8", "9-64", "all"]
    assert q["1"] == {"jobs": 2, "started": 2, "p50_s": 2, "p90_s": 4, "p99_s": 4, "max_s": 4}
    assert q["9-64"] == {"jobs": 1, "started": 0, "p50_s": None, "p90_s": None, "p99_s": None, "max_s": None}
    assert q["all"]["jobs"] == 4 and q["all"]["started"] == 3 and q["all"]["max_s"] == 10


def test_makespan_waits_for_every_job_to_end():
    assert makespan_s([o("a", 1, 5, 6, 30), o("b", 2, 10, 30, 50)]) == 45
    assert makespan_s([o("a", 1, 5, 6, 30), o("b", 2, 10, 30, None, state="running")]) is None


def test_utilisation_counts_gpu_seconds_held_inside_the_window():
    # 2 nodes × 8 GPUs held 10..20 on a 32-GPU cluster, window 0..40: 160 of 1280 GPU-seconds
    out = [o("a", 2, 0, 10, 20), o("b", 1, 0, 30, 50)]
    assert gpu_utilisation(out, 32, 0, 40) == pytest.approx((16 * 10 + 8 * 10) / (32 * 40))
    series = utilisation_series(out, 32, 0, 40, 10)
    assert series == [(0, 0.0), (10, 0.5), (20, 0.0), (30, 0.25), (40, 0.25)]
    assert gpu_utilisation(out, 0, 0, 40) is None


def test_tenant_shares_are_of_allocated_gpu_seconds():
    out = [o("a", 1, 0, 0, 30, tenant="x"), o("b", 1, 0, 0, 10, tenant="y"), o("c", 4, 0, None, None, tenant="z")]
    assert tenant_shares(out) == {"x": 0.75, "y": 0.25}


def test_placement_rate_is_the_busiest_window_of_starts():
    # 5 jobs start within 10 s (t = 0..9), holding 1+2+1+4+1 nodes; a sixth 30 s later
    starts = [(0, 1), (2, 2), (5, 1), (9, 4), (9, 1), (40, 8)]
    out = [o(f"j{i}", n, 0, t, t + 5) for i, (t, n) in enumerate(starts)]
    rate = placement_rate(out, window_s=10)
    assert rate == {"window_s": 10, "jobs_per_s": 0.5, "nodes_per_s": 0.9}
    assert placement_rate([o("p", 1, 0, None, None, state="pending")])["jobs_per_s"] == 0


def test_largest_jobs_are_the_gangs_of_the_biggest_size():
    out = [o("a", 16, 0, 30, 40), o("b", 16, 0, 10, 20), o("c", 16, 0, None, None, state="pending"),
           o("d", 1, 0, 0, 1)]
    assert largest_jobs(out) == {"nodes": 16, "jobs": 3, "started": 2, "p50_s": 10, "max_s": 30}
    assert largest_jobs([]) is None


def test_placement_counts_multi_node_jobs_in_the_fewest_blocks_and_the_blocks_beyond():
    block_of = {f"n{i}": f"b{(i - 1) // 4}" for i in range(1, 17)}        # 4 blocks of 4 nodes
    out = [JobOutcome("fits", "a", 4, 8, 0, 1, 2, "completed", ("n1", "n2", "n3", "n4")),
           JobOutcome("split", "a", 4, 8, 0, 1, 2, "completed", ("n3", "n4", "n5", "n6")),
           JobOutcome("big", "a", 6, 8, 0, 1, 2, "completed", ("n1", "n2", "n3", "n5", "n9", "n13")),
           JobOutcome("one", "a", 1, 8, 0, 1, 2, "completed", ("n7",)),
           JobOutcome("waiting", "a", 2, 8, 0, None, None, "pending")]
    assert placement(out, block_of) == {"block_nodes": 4, "multi_node_jobs": 3, "in_fewest_blocks": 1,
                                        "extra_blocks": 1 + 2}
    assert placement(out, {}) is None and placement(out[3:], block_of) is None


def test_throughput_of_a_scheduler_that_keeps_up_is_the_offered_rate():
    # 2 jobs a second for 10 s, each started in the second it arrived: 20 jobs over 10 whole seconds
    t0 = 1_700_000_000
    out = [o(f"j{i}", 1 + i % 2, t0 + i // 2, t0 + i // 2, t0 + i // 2 + 5) for i in range(20)]
    t = throughput(out, trace_rate=2)
    assert t["resolution_s"] == 1 and t["offered_nominal_jobs_per_s"] == 2
    assert t["submit_span_s"] == 10 and t["offered_jobs_per_s"] == 2.0
    assert t["place_span_s"] == 10 and t["jobs_per_s"] == 2.0 and t["nodes_per_s"] == 3.0   # 30 nodes
    assert t["placing_jobs_per_s"] == 2.0 and t["lag_s"] == 0 and t["never_placed"] == 0


def test_throughput_of_a_scheduler_that_falls_behind_is_the_rate_it_manages():
    # 40 jobs offered over 10 s (4/s), placed one a second from the first submission
    out = [o(f"j{i}", 1, i // 4, i, i + 5) for i in range(40)]
    t = throughput(out)
    assert t["offered_jobs_per_s"] == 4.0 and t["offered_nominal_jobs_per_s"] is None
    assert t["jobs_per_s"] == 1.0 and t["lag_s"] == 39 - 9


def test_throughput_counts_jobs_never_placed_and_the_wait_before_the_first_start():
    # 10 jobs in 0..4; 8 start 3 s after submission; 2 never start
    out = [o(f"j{i}", 2, i // 2, i // 2 + 3, None, state="running") for i in range(8)]
    out += [o("p1", 4, 4, None, None, state="pending"), o("p2", 4, 4, None, None, state="pending")]
    t = throughput(out)
    assert t["jobs"] == 10 and t["placed"] == 8 and t["never_placed"] == 2
    assert t["place_span_s"] == 7 and t["jobs_per_s"] == pytest.approx(8 / 7)   # from 0 to the last start, 6
    assert t["nodes_per_s"] == pytest.approx(16 / 7)
    assert t["placing_jobs_per_s"] == pytest.approx(8 / 4)                      # from the first start, 3, to 6
    assert t["lag_s"] == 6 - 4


def test_throughput_with_nothing_placed_or_nothing_at_all():
    t = throughput([o("a", 1, 0, None, None, state="pending")], trace_rate=1)
    assert t["offered_jobs_per_s"] == 1.0 and t["jobs_per_s"] == 0.0 and t["lag_s"] is None
    assert t["never_placed"] == 1
    empty = throughput([])
    assert empty["jobs"] == 0 and empty["offered_jobs_per_s"] is None and empty["jobs_per_s"] is None


def test_throughput_is_not_among_the_stored_figures():
    figs = figures([o("a", 1, 0, 1, 5)], total_gpus=8)
    assert "placement_rate" in figs and "throughput" not in figs and "offered_jobs_per_s" not in str(figs)


def test_utilisation_by_run_time_leaves_out_what_a_job_held_past_its_run():
    """Two 8-GPU jobs of 10 s on 16 GPUs over 20 s: one ended on time, one held its GPUs 2 s longer (an
    emulated pod's completion lag). Allocated counts those 2 s; by run time does not."""
    outs = [JobOutcome("a", "t", 1, 8, 0.0, 0.0, 10.0, "completed"),
            JobOutcome("b", "t", 1, 8, 0.0, 8.0, 20.0, "completed"),
            JobOutcome("c", "t", 1, 8, 0.0, None, None, "pending")]
    runtime = {"a": 10.0, "b": 10.0, "c": 10.0}
    assert gpu_utilisation(outs, 16, 0.0, 20.0) == (8 * 10 + 8 * 12) / (16 * 20)
    assert work_utilisation(outs, runtime, 16, 0.0, 20.0) == (8 * 10 + 8 * 10) / (16 * 20)
    assert held_beyond_run(outs, runtime) == {"median_s": 0.0, "max_s": 2.0, "gpu_seconds_share": 16 / 176}
    assert work_utilisation(outs, runtime, 0, 0.0, 20.0) is None and held_beyond_run(outs[2:], runtime) is None
