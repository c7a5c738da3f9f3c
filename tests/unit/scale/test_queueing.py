"""Why jobs waited: bounded slowdown per size class, overtaking and the queue head's wait, utilisation over the
arrival window, per-tenant waits and the Kubernetes wait split, from hand-made outcomes whose answers are known."""
from __future__ import annotations

import itertools

import pytest

from harness.scale import queueing
from harness.scale.outcome import JobOutcome


def o(id, nodes, submit, start, end, tenant="a", gpus=8):
    return JobOutcome(id, tenant, nodes, gpus, submit, start, end, "completed" if end is not None else "pending")


def test_bounded_slowdown_weighs_a_wait_against_the_jobs_own_length():
    long_job = o("long", 1, 0, 60, 3660)        # 60 s on an hour: 1.017
    short = o("short", 1, 0, 60, 65)            # 60 s on 5 s of work: (60 + 5) / max(5, 10) = 6.5
    never = o("never", 4, 0, None, None)
    run = {"long": 3600, "short": 5, "never": 30}
    assert queueing.bounded_slowdown(long_job, 3600) == pytest.approx(3660 / 3600)
    assert queueing.bounded_slowdown(short, 5) == 6.5
    assert queueing.bounded_slowdown(o("x", 1, 0, 0, 20), 20) == 1.0      # no wait: 1, never below
    got = queueing.slowdown_by_size([long_job, short, never], run)
    assert got["tau_s"] == 10 and set(got["classes"]) == {"1", "all"}
    assert got["classes"]["1"]["jobs"] == 2 and got["classes"]["1"]["mean"] == pytest.approx((3660 / 3600 + 6.5) / 2)
    assert got["classes"]["1"]["p99"] == 6.5


def test_overtaking_counts_later_jobs_that_started_while_an_earlier_one_waited():
    # big (submitted at 0) waits until 50; small1 (1) and small2 (2) start at 5 and 6: two overtakes of big.
    # small3 (3) starts at 60, after big: no overtake. big was the head from 0 to 50
    outs = [o("big", 32, 0, 50, 100), o("small1", 1, 1, 5, 10), o("small2", 1, 2, 6, 9), o("small3", 1, 3, 60, 61)]
    got = queueing.overtaking(outs)
    assert got["jobs_overtaken"] == 1 and got["overtakes"] == 2 and got["most"] == 2   # big, by small1 and small2
    assert got["passed_head"] == 2
    # the head: big from 0 to 50, then small3 from 50 to 60
    assert got["head_jobs"] == 2 and got["head_wait_max_s"] == 50 and got["head_wait_p50_s"] == 10


def test_a_strict_fifo_never_overtakes():
    outs = [o("a", 4, 0, 0, 10), o("b", 8, 1, 10, 20), o("c", 1, 2, 20, 21)]
    got = queueing.overtaking(outs)
    assert got["jobs_overtaken"] == 0 and got["overtakes"] == 0 and got["passed_head"] == 0
    assert got["head_wait_max_s"] == 10        # b was the head from 1 to 10 (9 s), c from 10 to 20


def test_same_second_submissions_are_not_ordered():
    outs = [o("a", 1, 5, 9, 10), o("b", 1, 5, 6, 7)]
    assert queueing.overtaking(outs)["overtakes"] == 0


def test_utilisation_over_the_arrival_window_counts_work_inside_it_only():
    # 16 GPUs; window 0..100: job x works 50..150 on 8 GPUs -> 8 * 50 inside; y works 0..20 on 16 -> 16 * 20
    outs = [o("x", 1, 0, 50, 160), o("y", 2, 0, 0, 20)]
    got = queueing.arrival_window_utilisation(outs, {"x": 100, "y": 20}, 16, 100)
    assert got == pytest.approx((8 * 50 + 16 * 20) / (16 * 100))
    assert queueing.arrival_window_utilisation([], {}, 16, 100) is None


def test_per_tenant_waits_and_shares():
    outs = [o("a1", 1, 0, 0, 10, "a"), o("a2", 1, 0, 30, 40, "a"), o("b1", 2, 0, 5, 15, "b")]
    got = queueing.per_tenant(outs)
    assert got["a"]["jobs"] == 2 and got["a"]["p50_s"] == 0 and got["a"]["p99_s"] == 30
    assert got["b"]["gpu_share"] == pytest.approx(160 / 320)


def test_the_kubernetes_wait_splits_into_admission_and_the_pod_pipeline():
    outs = [o("a", 1, 0, 12, 20), o("b", 1, 0, 3, 10), o("c", 1, 0, None, None)]
    got = queueing.wait_split(outs, {"a": 10.0, "b": 1.0, "c": 2.0})
    assert got["jobs"] == 2
    assert got["admission"]["max_s"] == 10 and got["pod_pipeline"]["max_s"] == 2
    assert queueing.wait_split(outs, {}) is None


def _overtaking_by_definition(outs):
    """The figures straight from their definitions, job by job and moment by moment (n^2: small inputs only)."""
    order = {x.id: i for i, x in enumerate(outs)}
    started = [x for x in outs if x.start is not None]
    per = {x.id: n for x in started if (n := sum(1 for y in started if y.submit > x.submit and y.start < x.start))}
    events = sorted({x.submit for x in outs} | {x.start for x in started})
    head_time = {}
    for a, b in itertools.pairwise(events):
        waiting = [x for x in outs if x.submit <= a and (x.start is None or x.start > a)]
        if waiting:
            h = min(waiting, key=lambda x: (x.submit, order[x.id]))
            head_time[h.id] = head_time.get(h.id, 0) + (b - a)
    passed = sum(1 for x in started if any(
        y.id != x.id and y.submit < x.start and (y.start is None or y.start > x.start)
        and (y.submit, order[y.id]) < (x.submit, order[x.id]) for y in outs))
    return len(per), sum(per.values()), max(per.values(), default=0), passed, sorted(head_time.values())


@pytest.mark.parametrize("seed", range(40))
def test_the_sweeps_count_what_the_definitions_count(seed):
    import random
    rnd = random.Random(seed)
    outs = []
    for i in range(rnd.randint(1, 30)):
        submit = rnd.randint(0, 20)
        start = None if rnd.random() < 0.15 else submit + rnd.choice([0, 0, 1, 2, 5, 9, -1])
        outs.append(o(f"j{i}", 1, submit, start, None if start is None else start + 3))
    got = queueing.overtaking(outs)
    jobs, overtakes, most, passed, heads = _overtaking_by_definition(outs)
    assert (got["jobs_overtaken"], got["overtakes"], got["most"], got["passed_head"]) == (jobs, overtakes, most, passed)
    assert got["head_jobs"] == len(heads) and got["head_wait_max_s"] == max(heads, default=None)


def test_overtaking_of_a_real_historys_size_takes_no_time():
    import time
    outs = [o(f"j{i}", 1, i // 3, i // 3 + (i * 7919) % 50, i // 3 + 60) for i in range(8000)]
    t0 = time.process_time()
    queueing.overtaking(outs)
    assert time.process_time() - t0 < 1     # the n^2 scan took 6.4 s of CPU here
