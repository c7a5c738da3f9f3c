"""The contention scenario's logic: plan, blocker render, pipeline order, metrics and report keys.

A scheduler with room for one job is simulated here (pure logic); the real waits are measured by
tests/integration/test_slurm_runs.py and test_k8s_backend.py against the real clusters.
"""
from __future__ import annotations

import json
import time

import pytest
from fakes import ScriptedBackend

from harness import spec
from harness.backends.base import Observation
from harness.config import from_mapping
from harness.pipeline import campaign
from harness.render.sbatch import render_sbatch
from harness.report import stats
from harness.report.document import build as build_report
from harness.states import JobState
from harness.store import Store

CFG = {"platforms": ["slurm", "k8s", "local"], "repetitions": 1, "faults": [], "workload": {"steps": 2},
       "contention": {"runs": 2, "hold_s": 1}}


def test_plan_adds_contention_runs_where_a_scheduler_queues():
    cfg = from_mapping(CFG)
    for plat in ("slurm", "k8s"):
        plan = spec.run_plan(cfg, plat)
        assert [p.scenario for p in plan] == ["clean", "contention", "contention"]
        assert plan[1].run_id == f"{plat}-contention-01" and plan[1].fault is None
    assert [p.scenario for p in spec.run_plan(cfg, "local")] == ["clean"]
    assert spec.run_plan(from_mapping({"platforms": ["slurm"]}), "slurm")[-1].scenario != "contention"


def test_slurm_blocker_holds_whole_nodes_and_the_measured_job_does_not():
    cfg = from_mapping(CFG)
    measured = spec.build(cfg, "slurm", "slurm-contention-01", None, "contention")
    blocker = spec.blocker_spec(measured)
    assert blocker.run_id == "slurm-contention-01-blocker" and blocker.scenario == "blocker"
    assert ("poc/run-id", blocker.run_id) in blocker.labels
    b_text = render_sbatch(blocker, cfg.slurm).script
    m_text = render_sbatch(measured, cfg.slurm).script
    assert "#SBATCH --exclusive\n" in b_text and "--exclusive" not in m_text
    assert f"--steps {spec.BLOCKER_STEPS}" in b_text.replace("'", "")
    # the same job otherwise: only the name, steps and exclusivity differ
    strip = lambda t, rid, steps: t.replace(rid, "RID").replace(f"--steps {steps}", "STEPS")  # noqa: E731
    b_lines = set(strip(b_text, blocker.run_id, spec.BLOCKER_STEPS).splitlines())
    m_lines = set(strip(m_text, measured.run_id, measured.steps).splitlines())
    assert b_lines - m_lines == {"#SBATCH --exclusive"}


class OneJobScheduler(ScriptedBackend):
    """Room for one job: a job waits while another one holds the resources (or not, with room=True)."""

    platform = "slurm"

    def __init__(self, room: bool = False, blocker_dies: bool = False):
        super().__init__()
        self.room, self.blocker_dies = room, blocker_dies
        self.holder: str | None = None
        self.freed_at: float | None = None
        self.submitted: list[str] = []
        self.observed_together: list[list[str]] = []

    def submit(self, spec_, rendered):
        h = super().submit(spec_, rendered)
        self.submitted.append(h.run_id)
        if self.holder is None:
            self.holder = h.run_id
        return h

    def observe(self, handles):
        self.observed_together.append([h.run_id for h in handles])
        out = {}
        for h in handles:
            if h.run_id.endswith("-blocker"):
                state = JobState.FAILED if self.blocker_dies else JobState.RUNNING
                out[h.run_id] = Observation(state, [], {"submitted": h.submitted_at, "allocated": h.submitted_at})
            elif self.holder != h.run_id and not self.room:
                out[h.run_id] = Observation(JobState.PENDING, [], {"submitted": h.submitted_at}, native_state="PENDING")
            else:
                obs = super().observe([h])[h.run_id]
                obs.times["allocated"] = (self.freed_at or h.submitted_at) + 0.25
                out[h.run_id] = obs
        return out

    def cancel(self, handle):
        super().cancel(handle)
        if handle.run_id == self.holder:
            self.holder, self.freed_at = None, time.time()
            waiting = [r for r in self.submitted if r != handle.run_id and r not in self.cancelled]
            self.holder = waiting[0] if waiting else None


def _run(tmp_path, backend):
    cfg = from_mapping({**CFG, "platforms": ["slurm"], "repetitions": 0, "contention": {"runs": 1, "hold_s": 1}})
    store = Store(tmp_path, cfg.campaign)
    return campaign(cfg, ["slurm"], store, lambda p: backend, resume=False, poll_s=0.05)


def test_measured_job_waits_for_the_blocker_and_handover_is_measured(tmp_path):
    backend = OneJobScheduler()
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "ok", rec.get("error")
    assert backend.submitted == ["slurm-contention-01-blocker", "slurm-contention-01"]
    assert backend.cancelled[0] == "slurm-contention-01-blocker"
    assert ["slurm-contention-01", "slurm-contention-01-blocker"] in backend.observed_together  # one batched look
    c = rec["contention"]
    assert c["hold_s"] == 1 and c["released"] - rec["metrics"]["queue_s"]["sources"]["submitted"] >= 1
    m = rec["metrics"]
    assert m["handover_s"]["value"] == pytest.approx(0.25, abs=0.06)
    assert m["queue_s"]["value"] >= 1.0
    names = [s["name"] for s in rec["stages"]]
    assert names[:4] == ["render", "blocker", "submit", "queue"] and "release-blocker" in names
    assert rec["timeline"]["blocker_released"] == c["released"]
    assert (tmp_path / "smoke" / "runs" / "slurm-contention-01" / "rendered" / "blocker").is_dir()
    assert not list((tmp_path / "smoke").glob("inflight/*")), "blocker and job were both cleared"


def test_a_cluster_with_room_for_two_is_a_failed_run_not_a_number(tmp_path):
    backend = OneJobScheduler(room=True)
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "failed" and rec["error"]["stage"] == "queue"
    assert "room for two jobs" in rec["error"]["message"] and "fits one job" in rec["error"]["tip"]
    assert sorted(backend.cancelled) == ["slurm-contention-01", "slurm-contention-01-blocker"]


def test_a_blocker_that_ends_early_is_reported(tmp_path):
    backend = OneJobScheduler(blocker_dies=True)
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "failed" and rec["error"]["stage"] == "queue"
    assert "blocking job ended failed before the harness released it" in rec["error"]["message"]
    assert sorted(backend.cancelled) == ["slurm-contention-01", "slurm-contention-01-blocker"]


def test_report_keeps_contention_apart_and_charts_it(tmp_path):
    backend = OneJobScheduler()
    cfg = from_mapping({**CFG, "platforms": ["slurm"], "repetitions": 2, "contention": {"runs": 2, "hold_s": 1}})
    campaign(cfg, ["slurm"], Store(tmp_path, cfg.campaign), lambda p: backend, resume=False, poll_s=0.05)
    runs = [json.loads(x) for x in (tmp_path / "smoke" / "runs.jsonl").read_text().splitlines()]
    df = stats.tidy(runs)
    clean_q = df[(df.metric == "queue_s")]
    assert set(clean_q.run_id) == {"slurm-clean-01", "slurm-clean-02"}
    assert set(df[df.metric == "queue_s:contention"].run_id) == {"slurm-contention-01", "slurm-contention-02"}
    assert len(df[df.metric == "handover_s"]) == 2
    paths = build_report(str(tmp_path / "smoke"), str(tmp_path / "rep"))
    assert "charts/contention.png" in paths
    md = paths["report.md"].read_text()
    assert "`queue_s:contention`" in md and "`handover_s`" in md
