"""Preemptions read from a recorded replay's raw records (tests/fixtures/scale/preempt): Kueue's
eviction count on the Workload, slurmctld's PREEMPTED completion line; the preempted job's queue time
runs from its first submission to its last run's start on both."""
from __future__ import annotations

import json
from pathlib import Path

from harness.replay import k8s_records, slurm_records
from harness.replay import store as rs
from harness.scale import outcome
from harness.scale import trace as tr

HERE = Path(__file__).parents[2] / "fixtures" / "scale" / "preempt"
TRACE = tr.load(HERE / "trace.jsonl")


def _result(platform: str) -> dict:
    return json.loads((HERE / f"{platform}.json").read_text())


def test_kueue_counts_the_eviction_of_the_preempted_workload():
    raw = _result("k8s")["raw"]
    assert k8s_records.preempted(raw["workloads"]) == {"r-a-low": 1}
    got = {o.id: o for o in k8s_records.outcomes(TRACE, raw["jobsets"], raw["pods"], raw["workloads"])}
    assert got["a-low"].preemptions == 1 and got["b-high"].preemptions == 0
    # its start is the second run's, after b-high ended; its submission the JobSet's creation
    assert got["a-low"].start >= got["b-high"].end and got["a-low"].state == "completed"


def test_slurm_reads_the_preempted_attempt_and_keeps_the_first_submission():
    body = _result("slurm")
    lines = [slurm_records.fields(ln) for ln in body["raw"]["jobcomp"]]
    first, last = next(f for f in lines if f["JobState"] == "PREEMPTED"), lines[-1]
    assert first["JobId"] == last["JobId"] and first["SubmitTime"] < last["SubmitTime"]   # rewritten at requeue
    got = {o.id: o for o in slurm_records.outcomes(TRACE, body["submitted"], body["raw"])}
    low = got["a-low"]
    assert low.preemptions == 1 and low.state == "completed" and got["b-high"].preemptions == 0
    assert low.submit == slurm_records.parse_time(first["SubmitTime"], body["raw"]["utc_offset"])
    assert low.start == slurm_records.parse_time(last["StartTime"], body["raw"]["utc_offset"])
    assert low.start >= got["b-high"].end


def test_the_figure_counts_events_and_jobs_and_the_stored_figures_rederive():
    outs = [outcome.JobOutcome("x", "a", 1, 8, 0.0, 1.0, 2.0, "completed", preemptions=2),
            outcome.JobOutcome("y", "a", 1, 8, 0.0, 1.0, 2.0, "completed", preemptions=1),
            outcome.JobOutcome("z", "a", 1, 8, 0.0, 1.0, 2.0, "completed")]
    assert outcome.preemptions(outs) == {"events": 3, "jobs": 2, "most_per_job": 2}
    assert outcome.preemptions(outs[2:]) == {"events": 0, "jobs": 0, "most_per_job": 0}
    assert rs.mismatches(HERE) == []
    for p in ("k8s", "slurm"):
        assert _result(p)["figures"]["preemptions"] == {"events": 1, "jobs": 1, "most_per_job": 1}
