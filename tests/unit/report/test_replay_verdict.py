"""Verdicts across replays of one trace: the replay is the unit, MIN_N a side before any verdict, Holm over
the figures, the records' whole-second resolution respected (the decision row across traces: test_replay_sets)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.report import replay_verdict
from harness.report.stats import MIN_N

FIXTURES = Path(__file__).parents[2] / "fixtures" / "replay"


def figs(p50: float, p99: float, util: float, makespan: float = 300.0) -> dict:
    return {"queue_s": {"all": {"p50_s": p50, "p99_s": p99}, "1": {"p50_s": p50, "p99_s": p99}},
            "gpu_utilisation": util + 0.02, "work_utilisation": util, "makespan_s": makespan,
            "arrival_window_utilisation": util}


def by_key(rows):
    return {r.figure.key: r for r in rows}


def test_one_replay_a_side_is_descriptive_and_names_the_replays_a_verdict_needs():
    rows = by_key(replay_verdict.rows_of({"k8s": [figs(140, 290, 0.23)], "slurm": [figs(1, 3, 0.30)]}))
    r = rows["queue_p50_s:all"]
    assert r.verdict == "few" and r.values == {"k8s": [140.0], "slurm": [1.0]} and r.ratio == 140.0
    assert replay_verdict.verdict_text(r) == f"descriptive: 1 replay a side, a verdict needs {MIN_N}"
    assert "queue_p50_s:9-64" not in rows      # a size class neither replay had gives no row


def test_separated_replays_give_a_verdict_for_the_side_that_is_ahead():
    k8s = [figs(140 + i, 290 + i, 0.23 + i / 1000) for i in range(MIN_N)]
    slurm = [figs(1 + i % 2, 3, 0.30 + i / 1000) for i in range(MIN_N)]
    rows = by_key(replay_verdict.rows_of({"k8s": k8s, "slurm": slurm}))
    q = rows["queue_p50_s:all"]
    assert q.verdict == "ahead" and q.ahead() == "slurm" and q.p_holm < 0.05
    assert q.ci[0] > 1                          # the interval of Kubernetes / Slurm is above 1 throughout
    u = rows["arrival_window_utilisation"]
    assert u.verdict == "ahead" and u.ahead() == "slurm"   # higher utilisation is better
    # work / makespan restates the makespan (the work is the trace's): no longer a figure compared
    assert "work_utilisation" not in rows and "makespan_s" not in rows
    # repeats of one trace: a verdict on that trace only (replay_sets.py needs several)
    assert "Slurm ahead on this trace (rank-sum, Holm p" in replay_verdict.verdict_text(q)
    # the family: Holm's adjustment is never below the raw p
    assert all(r.p_holm >= r.p for r in rows.values())


def test_a_difference_within_the_records_resolution_is_no_verdict_however_consistent():
    k8s = [figs(3, 5, 0.3) for _ in range(MIN_N)]
    slurm = [figs(2, 5, 0.3) for _ in range(MIN_N)]
    q = by_key(replay_verdict.rows_of({"k8s": k8s, "slurm": slurm}))["queue_p50_s:all"]
    assert q.verdict == "resolution" and "resolution (±2 s)" in replay_verdict.verdict_text(q)


def test_overlapping_replays_show_no_difference():
    rng = np.random.default_rng(1)
    k8s = [figs(float(v), 50, 0.3) for v in rng.integers(10, 40, MIN_N)]
    slurm = [figs(float(v), 50, 0.3) for v in rng.integers(10, 40, MIN_N)]
    q = by_key(replay_verdict.rows_of({"k8s": k8s, "slurm": slurm}))["queue_p50_s:all"]
    assert q.verdict in ("none", "resolution") and q.ahead() is None


def every_class(p50: float, p99: float, util: float) -> dict:
    """A replay's figures with all four size classes, as a synthetic trace at scale gives: 12 figures."""
    q = {"p50_s": p50, "p99_s": p99}
    return {"queue_s": {c: q for c in ("all", "1", "2-8", "9-64", ">64")}, "gpu_utilisation": util,
            "work_utilisation": util, "makespan_s": 300.0, "arrival_window_utilisation": util,
            "bounded_slowdown": {"classes": {"all": {"mean": p50 / 10 + 1}}}}


def test_with_twelve_figures_five_replays_cannot_reach_a_verdict_so_six_are_asked_for():
    """5 a side: the smallest rank-sum p is 2/252, times 12 figures (Holm) is 0.095, never below 0.05;
    calling that "no difference shown" would withhold a verdict as plain as this one."""
    assert replay_verdict.replays_needed(6) == MIN_N == 5 and replay_verdict.replays_needed(12) == 6
    assert replay_verdict.replays_needed(23) == 6 and replay_verdict.replays_needed(24) == 7
    k8s = [every_class(140 + i, 290 + i, 0.23 + i / 1000) for i in range(6)]
    slurm = [every_class(1 + i % 2, 3, 0.30 + i / 1000) for i in range(6)]
    five = by_key(replay_verdict.rows_of({"k8s": k8s[:5], "slurm": slurm[:5]}))
    assert len(five) == 12 and {r.verdict for r in five.values()} == {"few"}
    assert replay_verdict.verdict_text(five["queue_p50_s:all"]) == "descriptive: 5 replays a side, a verdict needs 6"
    six = by_key(replay_verdict.rows_of({"k8s": k8s, "slurm": slurm}))
    q = six["queue_p50_s:all"]
    assert q.verdict == "ahead" and q.ahead() == "slurm" and q.p_holm < 0.05
