"""A scale replay's report from stored records (the recorded Kubernetes and Slurm replays of the same
trace, tests/fixtures/replay): the figures side by side, the charts, the paired jobs, no verdict
beyond one replay, and the settings beside the figures."""
from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main
from harness.replay import store as rs
from harness.report import replay
from harness.scale import trace as tr

FIXTURES = Path(__file__).parents[2] / "fixtures" / "replay"


def stored_replay(where: Path) -> Path:
    k8s = json.loads((FIXTURES / "k8s_records.json").read_text())
    slurm = json.loads((FIXTURES / "slurm_records.json").read_text())
    trace = tr.loads(k8s["trace"])
    assert trace == tr.loads(slurm["trace"])
    rs.save(where, trace, "k8s", {"raw": k8s["raw"], "ended": True, "harness_cpu_s": 0.03, "looks": 9,
                                  "settings": {"poll_s": 2.0, "limit_grace_s": 30}}, total_gpus=128)
    rs.save(where, trace, "slurm", {"raw": slurm["raw"], "submitted": slurm["submitted"], "ended": True,
                                    "settings": {"SchedulerParameters": "bf_interval=5,sched_interval=5"}},
            total_gpus=128)
    return where


def test_the_report_sets_the_platforms_side_by_side_and_calls_no_winner_from_one_replay(tmp_path):
    path = replay.write(stored_replay(tmp_path / "r"))
    text = path.read_text()
    for png in ("queue_cdf.png", "utilisation.png", "tenants.png"):
        assert (path.parent / png).stat().st_size > 1000 and f"({png})" in text
    assert "| | Kubernetes | Slurm |" in text
    assert "| queue 2-8 nodes, p50 (s) | 11 | 10 |" in text
    assert "| queue 9-64 nodes, p50 (s) | 2 | 2 |" in text
    assert "| states | completed 4 | completed 4 |" in text
    assert "| jobs without a record | 0 | 0 |" in text
    assert "queue >64" not in text                  # no job of that size: no row
    assert "| largest jobs (nodes × jobs): queue p50 / max (s) | 16 × 1: 2 / 2 | 16 × 1: 2 / 2 |" in text
    assert "| busiest 10 s: nodes placed per s | 1.6 | 1.6 |" in text       # the whole-cluster job's 16 nodes
    assert ("Of the 4 jobs that started on both, 3 waited longer on Kubernetes, 0 longer on Slurm and 1 the same "
            "to the second; the median difference (Kubernetes − Slurm) is +1 s.") in text
    assert "no platform is called faster" in text and "faster than" not in text.split("## Verdict")[1].split("##")[0]
    assert "bf_interval=5,sched_interval=5" in text and "limit_grace_s 30" in text


def test_poc_scale_report_writes_it_and_a_missing_replay_is_an_error(tmp_path, capsys):
    where = stored_replay(tmp_path / "r")
    assert main(["scale", "report", str(where), "--out", str(tmp_path / "rep")], env={}) == 0
    assert (tmp_path / "rep" / "report.md").is_file()
    assert main(["scale", "report", str(tmp_path / "nothing")], env={}) == 2
    assert "not a replay's results directory" in capsys.readouterr().err


def test_repeated_replays_get_a_table_of_each_replays_values_and_the_verdict_they_allow(tmp_path):
    where = stored_replay(tmp_path / "r")
    trace, stored = rs.load(where)
    for p in ("k8s", "slurm"):
        rs.save(where, trace, p, stored[p], 128, index=2)
    text = replay.write(where).read_text()
    assert "Replays of this same trace: Slurm 2, Kubernetes 2." in text
    assert "| figure | Slurm, each replay | Kubernetes, each replay |" in text
    assert "| queue p50, 2-8 nodes (s) | 10, 10 | 11, 11 |" in text
    assert "descriptive: 2 replays a side, a verdict needs 6" in text   # 10 figures compared
    assert "each platform's first replay" in text


def test_a_repeat_that_stopped_early_is_named_and_left_out_of_the_table(tmp_path):
    where = stored_replay(tmp_path / "r")
    trace, stored = rs.load(where)
    rs.save(where, trace, "k8s", {**stored["k8s"], "ended": False}, 128, index=2)
    rs.save(where, trace, "slurm", stored["slurm"], 128, index=2)
    text = replay.write(where).read_text()
    assert "1 of them stopped before their last job" in text
    assert "| queue p50, 2-8 nodes (s) | 10, 10 | 11 |" in text      # Kubernetes' stopped replay is not a value
