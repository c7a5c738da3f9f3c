"""The contention scenario's logic: plan, blocker render, pipeline order, metrics and report keys.

A scheduler with room for one job is simulated here (pure logic); the real waits are measured by
tests/integration/test_slurm_runs.py and test_k8s_backend.py against the real clusters.
"""
from __future__ import annotations

import json

import pytest
from support.fakes import ScriptedBackend, SimClock
from support.tidy_rows import tidy

from harness import evidence, scenarios, spec
from harness.backends.base import Observation
from harness.cli import _record_line
from harness.config import from_mapping
from harness.pipeline import campaign
from harness.render.sbatch import render_sbatch
from harness.report.document import build as build_report
from harness.states import JobState
from harness.store import Store


# the scripted backend keeps its raw evidence the way the local host runtime does
def LOCAL_STAMPS(platform, raw):
    return evidence.stamps("local", raw)


CFG = {"platforms": ["slurm", "k8s", "local"], "repetitions": 1, "faults": [], "workload": {"steps": 2},
       "contention": {"runs": 2}}


def test_plan_adds_contention_runs_where_a_scheduler_queues():
    cfg = from_mapping(CFG)
    for plat in ("slurm", "k8s"):
        plan = scenarios.plan(cfg, plat)
        assert [p.scenario for p in plan] == ["clean", "contention", "contention"]
        assert plan[1].run_id == f"{plat}-contention-01" and plan[1].fault is None
    assert [p.scenario for p in scenarios.plan(cfg, "local")] == ["clean"]
    assert scenarios.plan(from_mapping({"platforms": ["slurm"]}), "slurm")[-1].scenario != "contention"


def test_slurm_blocker_holds_whole_nodes_and_the_measured_job_does_not():
    cfg = from_mapping(CFG)
    measured = spec.build(cfg, "slurm", "slurm-contention-01", None, "contention")
    blocker = spec.blocker_spec(measured)
    assert blocker.run_id == "slurm-contention-01-blocker" and blocker.scenario == "blocker"
    assert blocker.steps == measured.steps and spec.blocker_spec(measured, 500).steps == 500
    assert ("poc/run-id", blocker.run_id) in blocker.labels
    b_text = render_sbatch(blocker, cfg.slurm).script
    m_text = render_sbatch(measured, cfg.slurm).script
    assert "#SBATCH --exclusive\n" in b_text and "--exclusive" not in m_text
    # the same job otherwise: only the name and the exclusivity differ
    assert set(b_text.replace(blocker.run_id, "RID").splitlines()) - \
        set(m_text.replace(measured.run_id, "RID").splitlines()) == {"#SBATCH --exclusive"}


class OneJobScheduler(ScriptedBackend):
    """Room for one job: a job waits while the blocker holds the resources (or not, with room=True).
    The blocker trains for RUN_S and then ends by itself."""

    platform = "slurm"
    RUN_S = 0.6

    def __init__(self, room: bool = False, blocker_dies: bool = False, late_events: bool = False):
        super().__init__(clock=SimClock())
        self.room, self.blocker_dies, self.late_events = room, blocker_dies, late_events
        self.blocker_end: float | None = None
        self.submitted: list[str] = []
        self.observed_together: list[list[str]] = []

    def submit(self, spec_, rendered):
        h = super().submit(spec_, rendered)
        self.submitted.append(h.run_id)
        if h.run_id.endswith("-blocker"):
            self.blocker_end = h.submitted_at + self.RUN_S
        return h

    def _dones(self):
        return [{"kind": "done", "rank": r, "ts_ns": int(self.blocker_end * 1e9), "attempt": [0, 0, 0]} for r in (0, 1)]

    def observe(self, handles):
        self.observed_together.append([h.run_id for h in handles])
        now, out = self.clock(), {}
        for h in handles:
            times = {"submitted": h.submitted_at}
            if h.run_id.endswith("-blocker"):
                times["allocated"] = h.submitted_at
                if now < self.blocker_end:
                    out[h.run_id] = Observation(JobState.RUNNING, [], times)
                elif self.blocker_dies:
                    out[h.run_id] = Observation(JobState.FAILED, [], times)
                else:
                    out[h.run_id] = Observation(JobState.SUCCEEDED, [] if self.late_events else self._dones(), times)
            elif not self.room and self.blocker_end is not None and now < self.blocker_end + 0.25:
                out[h.run_id] = Observation(JobState.PENDING, [], times, native_state="PENDING")
            else:
                obs = super().observe([h])[h.run_id]
                behind = not self.room and self.blocker_end is not None
                obs.times["allocated"] = self.blocker_end + 0.25 if behind else h.submitted_at
                out[h.run_id] = obs
        return out

    def collect(self, handle):
        c = super().collect(handle)
        if handle.run_id.endswith("-blocker"):
            c.events = self._dones()
        elif not self.room and self.blocker_end is not None:   # allocated once the blocker let go
            for p in c.raw["processes"]:
                p["spawn_before"] = p["spawn_after"] = self.blocker_end + 0.25
        return c


def _run(tmp_path, backend):
    cfg = from_mapping({**CFG, "platforms": ["slurm"], "repetitions": 0, "contention": {"runs": 1}})
    store = Store(tmp_path, cfg.campaign)
    return campaign(cfg, ["slurm"], store, lambda p: backend, resume=False, poll_s=0.05,
                    clock=backend.clock, sleep=backend.clock.sleep, stamps_fn=LOCAL_STAMPS)


@pytest.mark.parametrize("late_events", [False, True])
def test_measured_job_waits_for_the_blocker_and_handover_is_measured(tmp_path, late_events):
    backend = OneJobScheduler(late_events=late_events)
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "ok", rec.get("error")
    assert backend.submitted == ["slurm-contention-01-blocker", "slurm-contention-01"]
    assert sorted(backend.cancelled) == ["slurm-contention-01", "slurm-contention-01-blocker"]  # objects removed
    assert ["slurm-contention-01", "slurm-contention-01-blocker"] in backend.observed_together  # one batched look
    c = rec["contention"]
    assert c["released"] == pytest.approx(backend.blocker_end) and c["blocker_state"] == "succeeded"
    m = rec["metrics"]
    assert m["handover_s"]["value"] == pytest.approx(0.25, abs=1e-6)
    assert m["handover_s"]["sources"] == {"released": c["released"], "allocated": backend.blocker_end + 0.25}
    assert m["queue_s"]["value"] > 0.25
    names = [s["name"] for s in rec["stages"]]
    assert names[:4] == ["render", "blocker", "submit", "queue"]
    assert rec["timeline"]["blocker_released"] == c["released"]
    assert (tmp_path / "smoke" / "runs" / "slurm-contention-01" / "rendered" / "blocker").is_dir()
    assert "handover 0.25s (behind the blocker)" in _record_line(rec)
    assert not list((tmp_path / "smoke").glob("inflight/*")), "blocker and job were both cleared"


def test_a_cluster_with_room_for_two_is_a_failed_run_not_a_number(tmp_path):
    backend = OneJobScheduler(room=True)
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "failed" and rec["error"]["stage"] == "queue"
    assert "room for two jobs" in rec["error"]["message"] and "fits one job" in rec["error"]["tip"]
    assert "metrics" not in rec
    assert sorted(backend.cancelled) == ["slurm-contention-01", "slurm-contention-01-blocker"]


def test_a_blocker_that_fails_is_reported(tmp_path):
    backend = OneJobScheduler(blocker_dies=True)
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "failed" and rec["error"]["stage"] == "queue"
    assert "blocking job ended failed instead of finishing its steps" in rec["error"]["message"]
    assert sorted(backend.cancelled) == ["slurm-contention-01", "slurm-contention-01-blocker"]


def test_report_keeps_contention_apart_and_charts_it(tmp_path):
    backend = OneJobScheduler()
    cfg = from_mapping({**CFG, "platforms": ["slurm"], "repetitions": 2, "contention": {"runs": 2}})
    campaign(cfg, ["slurm"], Store(tmp_path, cfg.campaign), lambda p: backend, resume=False, poll_s=0.05,
             clock=backend.clock, sleep=backend.clock.sleep, stamps_fn=LOCAL_STAMPS)
    runs = [json.loads(x) for x in (tmp_path / "smoke" / "runs.jsonl").read_text().splitlines()]
    rows = tidy(runs)

    def of(metric: str) -> list[str]:
        return [r["run_id"] for r in rows if r["metric"] == metric]
    assert set(of("queue_s")) == {"slurm-clean-01", "slurm-clean-02"}
    assert set(of("queue_s:contention")) == {"slurm-contention-01", "slurm-contention-02"}
    assert len(of("handover_s")) == 2
    paths = build_report(str(tmp_path / "smoke"), str(tmp_path / "rep"))
    assert "charts/contention.png" in paths
    md = paths["report.md"].read_text()
    assert "`queue_s:contention`" in md and "`handover_s`" in md


def test_interrupt_while_the_blocker_starts_cancels_it(tmp_path):
    class Interrupted(OneJobScheduler):
        def observe(self, handles):
            if any(h.run_id.endswith("-blocker") for h in handles):
                raise KeyboardInterrupt
            return super().observe(handles)

    backend = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, backend)
    assert backend.cancelled == ["slurm-contention-01-blocker"]
    assert not list((tmp_path / "smoke").glob("inflight/*"))
    rec = json.loads((tmp_path / "smoke" / "runs.jsonl").read_text().splitlines()[-1])
    assert rec["status"] == "interrupted" and rec["error"]["stage"] == "blocker"
