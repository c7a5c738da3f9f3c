"""The drill runner's logic in the pipeline (pure: a scripted scheduler and a scripted drill).

The real drills run against the real clusters in tests/integration/test_drill_slurm.py,
test_drill_k8s.py and test_poc_drill_e2e.py.
"""
from __future__ import annotations

import threading
import time

import pytest
from support.fakes import ScriptedBackend, SimClock

from harness import evidence
from harness.backends.base import Observation
from harness.config import from_mapping
from harness.drills import platforms
from harness.drills.base import Step
from harness.drills.platforms import platform_drill
from harness.errors import BackendError
from harness.pipeline import campaign
from harness.rederive import check
from harness.scenarios import plan
from harness.states import JobState
from harness.store import Store


def LOCAL_STAMPS(platform, raw):
    return evidence.stamps("local", raw)


class FakeDrill:
    platform = "slurm"

    def __init__(self, clock, owned=True, kill_job=None):
        self.clock, self._owned, self.kill_job = clock, owned, kill_job
        self.down = threading.Event()
        self.calls: list[str] = []
        self.refusals: list[float] = []
        self.order: list[str] = []

    def owned(self):
        return (self._owned, "the harness's own cluster (test)" if self._owned else "no marker of ours")

    def prepare(self, kind):
        self.calls.append(f"prepare:{kind}")
        return {}

    def plan(self, kind):
        return ["ctl", "node@c1"]

    def versions(self):
        return {"ctl": "1", "node@c1": "1"}

    def step(self, kind, component):
        self.calls.append(f"{kind}:{component}")
        t = self.clock()
        if component == "ctl":
            self.down.set()   # refused before and after 2 s of simulated time pass
            self._wait(lambda: self.refusals)
            self.clock.sleep(2.0)
            self._wait(lambda: self.refusals[-1] >= t + 2.0)
            self.down.clear()
        if component == "node@c1" and self.kill_job:
            self.kill_job()
        return Step(component, "control plane", t, self.clock(), "1", "1", how="scripted", health="scripted")

    @staticmethod
    def _wait(cond):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not cond():
            time.sleep(0.002)

    def try_submit(self):
        if self.down.is_set():
            self.refusals.append(self.clock())
            return "Connection refused"
        return None

    def try_status(self):
        return None

    def snapshot(self, handles):
        return {"identity": {h.run_id: h.ids[0] for h in handles}}

    def leftovers(self, handles):
        return []

    def restore(self, kind):
        self.calls.append(f"restore:{kind}")
        self.order.append("restore")
        return {"did": "nothing"}


class DrilledScheduler(ScriptedBackend):
    """Room for one job: the drilled job trains through its replayed events; the queued job waits
    until it ends, then is allocated 0.4 s later and trains."""
    platform = "slurm"

    def __init__(self, owned=True, dies=False):
        super().__init__(clock=SimClock())
        self.fake = FakeDrill(self.clock, owned, kill_job=self._kill if dies else None)
        self.main_end: float | None = None
        self.killed = False
        self.submitted: list[str] = []

    def _kill(self):
        self.killed = True

    def make_drill(self, drills):
        return self.fake

    def audit_evidence(self, handle):
        self.fake.order.append(f"audit:{handle.run_id}")
        return {}

    def submit(self, spec_, rendered):
        h = super().submit(spec_, rendered)
        self.submitted.append(h.run_id)
        return h

    def _shifted(self, h):
        t0 = self.events[0]["ts_ns"]
        return [dict(e, ts_ns=int(h.submitted_at * 1e9) + 10_000_000 + e["ts_ns"] - t0) for e in self.events]

    def observe(self, handles):
        now, out = self.clock(), {}
        for h in handles:
            if h.run_id.endswith("-queued"):
                if self.main_end is None or now < self.main_end + 0.4:
                    out[h.run_id] = Observation(JobState.PENDING, [], {"submitted": h.submitted_at},
                                                native_state="PENDING")
                else:
                    ev = [dict(e, ts_ns=int((self.main_end + 1.0) * 1e9))
                          for e in self.events if e["kind"] == "step"][:1]
                    out[h.run_id] = Observation(JobState.RUNNING, ev, {"submitted": h.submitted_at,
                                                                        "allocated": self.main_end + 0.4})
                continue
            evs = self._shifted(h)
            last = evs[-1]["ts_ns"] / 1e9
            if self.killed:
                evs = [e for e in evs if e["ts_ns"] / 1e9 <= now and e["kind"] != "done"]
                self.main_end = self.main_end or now
                out[h.run_id] = Observation(JobState.FAILED, evs, {"submitted": h.submitted_at,
                                                                    "allocated": h.submitted_at + 0.005})
                continue
            seen = [e for e in evs if e["ts_ns"] / 1e9 <= now]
            state = JobState.SUCCEEDED if now > last else JobState.RUNNING
            if state == JobState.SUCCEEDED and self.main_end is None:
                self.main_end = last
            out[h.run_id] = Observation(state, seen, {"submitted": h.submitted_at, "allocated": h.submitted_at + 0.005})
        return out

    def collect(self, handle):
        c = super().collect(handle)
        if handle.run_id.endswith("-queued"):
            for p in c.raw["processes"]:
                p["spawn_before"] = p["spawn_after"] = self.main_end + 0.4
        return c


@pytest.fixture(autouse=True)
def scripted_drill_part(monkeypatch):
    """The scripted scheduler's drill part, registered for its platform as the real ones are."""
    monkeypatch.setitem(platforms.PARTS, DrilledScheduler.platform, lambda backend, drills: backend.make_drill(drills))


CFG = {"platforms": ["slurm"], "repetitions": 0, "faults": [], "workload": {"steps": 2},
       "drills": {"kinds": ["restart"], "probe_s": 0.01, "at_step": 5}}


def _run(tmp_path, backend):
    cfg = from_mapping(CFG)
    store = Store(tmp_path, cfg.campaign)
    return campaign(cfg, ["slurm"], store, lambda p: backend, resume=False, poll_s=0.05,
                    clock=backend.clock, sleep=backend.clock.sleep, stamps_fn=LOCAL_STAMPS)


def test_the_plan_puts_a_drill_last_and_only_on_schedulers():
    cfg = from_mapping({**CFG, "platforms": ["slurm", "k8s", "local"], "repetitions": 1,
                        "drills": {"kinds": ["restart", "upgrade"]}})
    assert [p.run_id for p in plan(cfg, "slurm")][-2:] == ["slurm-drill-restart", "slurm-drill-upgrade"]
    assert not [p for p in plan(cfg, "local") if p.scenario.startswith("drill:")]


def test_a_drill_runs_during_the_job_with_one_queued_and_every_figure_is_derived(tmp_path):
    backend = DrilledScheduler()
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "ok", rec.get("error")
    assert backend.submitted == ["slurm-drill-restart", "slurm-drill-restart-queued"]
    assert backend.fake.calls == ["prepare:restart", "restart:ctl", "restart:node@c1", "restore:restart"]
    # the platform's records are read before the cluster is put back (a restore may start it afresh)
    assert backend.fake.order == ["audit:slurm-drill-restart", "restore"]
    names = [s["name"] for s in rec["stages"]]
    assert names.index("drill:prepare") < names.index("submit") < names.index("drill:restart") \
        < names.index("drill:after")
    d = rec["drill"]
    assert [s["component"] for s in d["steps"]] == ["ctl", "node@c1"] and d["queued"]["waiting_before"] is True
    m = rec["metrics"]
    assert m["upgrade_job_survived"]["value"] == 1.0 and m["upgrade_steps_lost"]["value"] == 0
    sub = m["upgrade_submit_refused_s"]
    assert sub["value"] > 0 and sub["detail"]["outages"] == 1 and sub["lo"] <= sub["value"] <= sub["hi"]
    assert m["upgrade_status_refused_s"]["value"] == 0
    assert m["upgrade_queued_delay_s"]["value"] == pytest.approx(0.4, abs=1e-3)
    assert m["upgrade_records_intact"]["value"] == 1.0 and m["upgrade_leftovers"]["value"] == 0
    assert m["upgrade_drill_s"]["value"] == pytest.approx(2.0, abs=0.2)
    assert "step_time_s" in m   # the training figures too
    assert sorted(backend.cancelled) == ["slurm-drill-restart", "slurm-drill-restart-queued"]
    (c,) = check(tmp_path / "smoke", stamps_fn=LOCAL_STAMPS)
    assert c.findings == [] and c.checked == ["slurm-drill-restart"]


def test_a_drill_that_kills_the_job_is_its_result_not_a_failed_run(tmp_path):
    backend = DrilledScheduler(dies=True)
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "ok", rec.get("error")
    m = rec["metrics"]
    assert m["upgrade_job_survived"]["value"] == 0.0 and m["upgrade_job_survived"]["detail"]["job_state"] == "failed"
    assert "step_time_s" not in m
    (c,) = check(tmp_path / "smoke", stamps_fn=LOCAL_STAMPS)
    assert c.findings == []


def test_a_cluster_not_known_to_be_the_users_is_refused_before_anything_is_submitted(tmp_path):
    backend = DrilledScheduler(owned=False)
    (rec,) = _run(tmp_path, backend)
    assert rec["status"] == "failed" and rec["error"]["stage"] == "drill:prepare"
    assert "not known to be yours" in rec["error"]["message"] and "confirm_cluster" in rec["error"]["tip"]
    assert backend.submitted == [] and backend.fake.calls == []


def test_a_platform_without_a_drill_part_is_refused_with_a_tip():
    with pytest.raises(BackendError, match="no upgrade drill on local") as exc:
        platform_drill(ScriptedBackend(), None)
    assert exc.value.tip == "drills run on the k8s and slurm platforms"
