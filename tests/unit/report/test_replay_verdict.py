"""Verdicts across replays of one trace: the replay is the unit, MIN_N a side before any verdict, Holm over
the figures, the records' whole-second resolution respected; and the decision summary's queue-at-scale row."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.replay import store as rs
from harness.report import decision, replay_verdict
from harness.report.stats import MIN_N, groups, summary
from harness.report.table import from_records
from harness.scale import trace as tr

FIXTURES = Path(__file__).parents[2] / "fixtures" / "replay"


def figs(p50: float, p99: float, util: float, makespan: float = 300.0) -> dict:
    return {"queue_s": {"all": {"p50_s": p50, "p99_s": p99}, "1": {"p50_s": p50, "p99_s": p99}},
            "gpu_utilisation": util + 0.02, "work_utilisation": util, "makespan_s": makespan}


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
    u = rows["work_utilisation"]
    assert u.verdict == "ahead" and u.ahead() == "slurm"   # higher utilisation is better
    assert "Slurm ahead (rank-sum, Holm p" in replay_verdict.verdict_text(q)
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


def stored_replay(where: Path, repeats: int = 1) -> Path:
    k8s = json.loads((FIXTURES / "k8s_records.json").read_text())
    slurm = json.loads((FIXTURES / "slurm_records.json").read_text())
    trace = tr.loads(k8s["trace"])
    for i in range(1, repeats + 1):
        rs.save(where, trace, "k8s", {"raw": k8s["raw"], "ended": True, "settings": {"nodes": 16}}, 128, index=i)
        rs.save(where, trace, "slurm", {"raw": slurm["raw"], "submitted": slurm["submitted"], "ended": True},
                128, index=i)
    return where


def _empty_table():
    return from_records([])


def test_the_decision_summary_has_a_queue_at_scale_row_from_the_campaigns_replays(tmp_path):
    where = stored_replay(tmp_path / "camp" / "scale" / "r1", repeats=2)
    assert rs.replay_dirs(tmp_path / "camp") == [where] == rs.replay_dirs(tmp_path)
    table = _empty_table()
    gs = groups(table)
    rows = {r.criterion: r for r in decision.rows(table, gs, summary(gs), [], replays=[where])}
    row = rows[decision.SCALE]
    assert row.measured and len(row.parts) == 3
    ev, ratio, ahead = row.parts[0]
    assert ev.startswith("`r1`: 4 jobs of ") and "on 16 emulated nodes" in ev and "replays Slurm 2, Kubernetes 2" in ev
    assert "queue p50, all jobs: Slurm " in ev and ratio.startswith("×")
    # 10 figures (all jobs and three size classes, p50 and p99; utilisation; makespan): 6 a side needed
    assert ahead == ["descriptive: 2 replays a side, a verdict needs 6"]
    assert "emulated nodes" in row.settings
    # a campaign without replays: the row says it was not measured
    none = {r.criterion: r for r in decision.rows(table, gs, summary(gs), [])}[decision.SCALE]
    assert not none.measured and none.cells()[0][2] == "not measured"


def test_a_replay_that_stopped_before_its_last_job_is_left_out_and_said_so(tmp_path):
    where = stored_replay(tmp_path / "camp" / "scale" / "r1", repeats=2)
    body = json.loads((where / "k8s-2.json").read_text())
    (where / "k8s-2.json").write_text(json.dumps({**body, "ended": False}))
    _, stored = rs.load(where)
    assert len(replay_verdict.complete(stored, "k8s")) == 1 and len(replay_verdict.complete(stored, "slurm")) == 2
    ev, _, ahead = replay_verdict.decision_parts([where])[0]
    assert "replays Slurm 2, Kubernetes 1 (1 stopped before their last job left out)" in ev
    assert ahead == "descriptive: 1 replay a side, a verdict needs 6"
    (where / "k8s.json").write_text(json.dumps({**json.loads((where / "k8s.json").read_text()), "interrupted": True}))
    assert replay_verdict.decision_parts([where]) == [
        ("`r1`: no complete replay on both platforms (2 stopped before their last job left out)", "–", "not measured")]


def every_class(p50: float, p99: float, util: float) -> dict:
    """A replay's figures with all four size classes, as a synthetic trace at scale gives: 12 figures."""
    q = {"p50_s": p50, "p99_s": p99}
    return {"queue_s": {c: q for c in ("all", "1", "2-8", "9-64", ">64")}, "gpu_utilisation": util,
            "work_utilisation": util, "makespan_s": 300.0}


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
