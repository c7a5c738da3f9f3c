"""Who failed: the platform, or the harness itself; and a fault's changes are on disk before it acts."""
from __future__ import annotations

import json

from support.fakes import ScriptedBackend, SimClock

from harness.backends.base import Observation
from harness.config import from_mapping
from harness.pipeline import campaign
from harness.states import JobState
from harness.store import Store


def _cfg(**kw):
    return from_mapping({"platforms": ["local"], "repetitions": 1, "faults": [], "workload": {"steps": 2}, **kw})


def _records(tmp_path, cfg):
    return [json.loads(x) for x in (tmp_path / cfg.campaign / "runs.jsonl").read_text().splitlines()]


def test_a_harness_exception_is_not_the_platforms_failure(tmp_path):
    class Buggy(ScriptedBackend):
        def observe(self, handles):
            return {h.run_id: {"not": "an Observation"} for h in handles}   # the harness's own bug

    cfg, clock = _cfg(), SimClock()
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: Buggy(clock=clock), resume=False,
                      poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["status"] == "harness_error"
    assert rec["error"]["origin"] == "harness" and rec["error"]["type"] == "AttributeError"
    assert "Traceback" in rec["error"]["traceback"]
    assert _records(tmp_path, cfg)[0]["status"] == "harness_error"


class Fails(ScriptedBackend):
    """The platform reports the job failed."""
    def observe(self, handles):
        out = super().observe(handles)
        for o in out.values():
            o.state = JobState.FAILED
        return out


def test_a_platform_failure_stays_one():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        cfg, clock = _cfg(), SimClock()
        (rec,) = campaign(cfg, ["local"], Store(d, cfg.campaign), lambda p: Fails(clock=clock), resume=False,
                          poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["status"] == "failed" and rec["error"]["origin"] == "platform"


def test_a_fault_journals_what_it_changes_before_acting(tmp_path):
    """A harness that dies mid-fault leaves the change in the in-flight record for --resume to undo."""
    seen_on_disk = []

    class LosesNode(ScriptedBackend):
        def supported_faults(self):
            return {"lose_node"}

        def observe(self, handles):
            out = super().observe(handles)
            for o in out.values():
                o.state = JobState.RUNNING
            return out

        def inject(self, handle, kind, target_event, journal=None):
            handle.data["lost_nodes"] = ["node-b"]
            journal(handle)
            seen_on_disk.append(json.loads((tmp_path / "smoke" / "inflight" / f"{handle.run_id}.json").read_text()))
            raise RuntimeError("the harness died while the node was down")

    cfg = _cfg(platforms=["slurm"], faults=[{"kind": "lose_node", "at_step": 1, "rank": 1}], repetitions=0,
               allow_destructive_faults=True)
    clock = SimClock()
    backend = LosesNode(clock=clock)
    (rec,) = campaign(cfg, ["slurm"], Store(tmp_path, cfg.campaign), lambda p: backend, resume=False, poll_s=0.01,
                      clock=clock, sleep=clock.sleep)
    assert seen_on_disk and seen_on_disk[0]["data"]["lost_nodes"] == ["node-b"]
    assert rec["error"]["stage"] == "fault:lose_node" and rec["status"] == "harness_error"
    assert backend.cancelled == [rec["run_id"]]       # and the run's cancel saw the same handle


def test_a_failed_cancel_keeps_the_in_flight_record_until_a_cancel_succeeds(tmp_path):
    from harness.errors import BackendError

    class CannotCancel(ScriptedBackend):
        def cancel(self, handle):
            raise BackendError("node c2 did not come back")

    cfg, clock = _cfg(), SimClock()
    store = Store(tmp_path, cfg.campaign)
    (rec,) = campaign(cfg, ["local"], store, lambda p: CannotCancel(clock=clock), resume=False, poll_s=0.01,
                      clock=clock, sleep=clock.sleep)
    assert rec["status"] == "ok" and "did not come back" in rec["cancel_error"]
    assert [h["run_id"] for h in store.inflight()] == ["local-clean-01"], "kept for --resume"
    # --resume with a cancel that fails again: the record stays, the platform stops with the error
    (pre,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: CannotCancel(clock=clock),
                      resume=True, poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert pre["scenario"] == "preflight" and "did not come back" in pre["error"]["message"]
    assert len(Store(tmp_path, cfg.campaign).inflight()) == 1
    backend = ScriptedBackend(clock=clock)
    campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: backend, resume=True, poll_s=0.01,
             clock=clock, sleep=clock.sleep)
    assert backend.cancelled == ["local-clean-01"] and Store(tmp_path, cfg.campaign).inflight() == []


def test_a_failed_run_is_stored_even_when_its_evidence_cannot_be_read(tmp_path):
    """The evidence reader is the harness's code too: if it raises on a failed run's records, the
    record still lands (with the error), and nothing is left in flight."""
    def broken_reader(platform, raw):
        raise KeyError("attempts")

    cfg, clock = _cfg(), SimClock()
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: Fails(clock=clock), resume=False,
                      poll_s=0.01, clock=clock, sleep=clock.sleep, stamps_fn=broken_reader)
    assert rec["status"] == "failed" and rec["stamps_error"] == "KeyError: 'attempts'"
    assert _records(tmp_path, cfg)[0]["run_id"] == rec["run_id"]
    assert (tmp_path / cfg.campaign / "runs" / rec["run_id"] / "raw.json.gz").exists()
    assert not list((tmp_path / cfg.campaign).glob("inflight/*"))


def test_a_workload_that_refuses_to_run_is_the_error_the_user_reads(tmp_path):
    """No GPU where GPUs were asked for: the workload's own sentence (its workload_error event) becomes
    the run's error, not a log tail."""
    refusal = {"kind": "workload_error", "error": "gpus", "rank": 0, "ts_ns": 1,
               "message": "2 GPUs per node were requested (2 ranks on this node) but torch sees 0 CUDA devices"}

    class NoGpu(ScriptedBackend):
        def observe(self, handles):
            return {h.run_id: Observation(JobState.FAILED, [dict(refusal)], {"submitted": h.submitted_at})
                    for h in handles}

    cfg, clock = _cfg(), SimClock()
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: NoGpu(clock=clock), resume=False,
                      poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["status"] == "failed" and rec["error"]["stage"] == "run", rec
    assert "the workload refused to run: 2 GPUs per node were requested" in rec["error"]["message"]
    assert "gpus_per_node" in rec["error"]["tip"]


def test_a_refusing_workload_is_cancelled_at_once_and_its_own_tip_is_the_runs(tmp_path):
    """The calibration refused a node: the job, still RUNNING (a scheduler would restart it onto the same
    node), is cancelled at the first look that shows the refusal, once, and the workload's tip is kept."""
    refusal = {"kind": "workload_error", "error": "calibration", "rank": 0, "ts_ns": 1,
               "message": "calibration refused node c2: matmul 0.3 GFLOP/s is 0.21 of the nodes' median 1.6",
               "tip": "exclude the node (slurm.extra_sbatch: ['--exclude=NODE'])"}

    class Refused(ScriptedBackend):
        looks = 0

        def observe(self, handles):
            self.looks += 1
            state = JobState.CANCELLED if self.cancelled else JobState.RUNNING
            events = [dict(refusal)] if self.looks >= 3 else []
            return {h.run_id: Observation(state, events, {"submitted": h.submitted_at,
                                                          "allocated": h.submitted_at + 0.005}) for h in handles}

    cfg, clock = _cfg(), SimClock()
    backend = Refused(clock=clock)
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: backend, resume=False,
                      poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["status"] == "failed" and "the workload refused to run: calibration refused node c2" in \
        rec["error"]["message"], rec
    assert rec["error"]["tip"] == refusal["tip"]
    # once at the refusal, and once more by the run's own end (every run cancels what it submitted)
    assert backend.cancelled.count(rec["run_id"]) == 2 and backend.looks == 4


def test_a_job_that_never_ran_ends_with_the_schedulers_reason(tmp_path):
    """Kubernetes' Unrunnable (a request no node can ever hold) ends FAILED before any event: the
    scheduler's sentence is in the run's error, and the tip points at the request."""
    why = "no node can ever hold pod x-w-0-0: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."

    class Unrunnable(ScriptedBackend):
        def observe(self, handles):
            return {h.run_id: Observation(JobState.FAILED, [], {"submitted": h.submitted_at}, reason=why)
                    for h in handles}

    cfg, clock = _cfg(), SimClock()
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: Unrunnable(clock=clock),
                      resume=False, poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["status"] == "failed" and rec["error"]["message"].startswith(f"job ended failed: {why}"), rec["error"]
    assert "the job never started" in rec["error"]["tip"]


UNRUNNABLE = ("no node can ever hold pod k8s-kill-rank-01-w-0-0-x: 0/3 nodes are available: 3 node(s) had "
              "untolerated taint(s)")


class NeverScheduled(ScriptedBackend):
    """The scheduler gave up on the job before any pod ran: no workload event ever arrives."""
    def supported_faults(self):
        return {"kill_rank"}

    def observe(self, handles):
        return {h.run_id: Observation(JobState.FAILED, [], {"submitted": h.submitted_at},
                                      native_state="Unrunnable", reason=UNRUNNABLE) for h in handles}


def test_a_fault_run_whose_job_never_started_reports_the_schedulers_reason_not_the_fault(tmp_path):
    cfg = _cfg(faults=[{"kind": "kill_rank", "at_step": 1, "rank": 1}], repetitions=0)
    clock = SimClock()
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: NeverScheduled(clock=clock),
                      resume=False, poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["scenario"] == "kill_rank" and rec["status"] == "failed", rec
    assert rec["error"]["origin"] == "platform" and rec["error"]["stage"] == "run"
    assert rec["error"]["message"].startswith(f"job ended failed: {UNRUNNABLE}")
    assert "not injected" not in rec["error"]["message"]
    assert "the job never started" in rec["error"]["tip"]


def test_a_fault_run_whose_job_succeeded_before_the_fault_step_says_the_fault_was_not_injected(tmp_path):
    cfg = _cfg(faults=[{"kind": "kill_rank", "at_step": 30, "rank": 1}], repetitions=0, workload={"steps": 40})

    class Kills(ScriptedBackend):
        """A job that ends well after step 20 (fewer steps than the config says: the fault never comes)."""
        def __init__(self, **kw):
            super().__init__(**kw)
            self.events = [e for e in self.events if e.get("step", 0) <= 20]

        def supported_faults(self):
            return {"kill_rank"}

    clock = SimClock()
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: Kills(clock=clock),
                      resume=False, poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["status"] == "failed" and "fault kill_rank was not injected" in rec["error"]["message"], rec
    assert "at_step" in rec["error"]["tip"]


def test_the_intent_is_journalled_before_the_submit_and_cancelled_when_the_submit_fails(tmp_path):
    """A crash inside the submit call must leave a record that finds the job: the backend's intent is
    on disk when submit() runs; a submit that raises (here the transport dropping mid-call, after the
    job may exist) cancels the intent, and the journal is empty after."""
    from harness.backends.base import Handle
    from harness.errors import TransportError

    cfg = _cfg()
    store = Store(tmp_path, cfg.campaign)
    seen: dict = {}

    class DropsMidSubmit(ScriptedBackend):
        def intent(self, spec, rendered):
            return Handle("local", spec.run_id, [], 0.0, data={"intent": True, "job_name": f"poc-{spec.run_id}"})

        def submit(self, spec, rendered):
            seen["journal"] = [h["data"] for h in store.inflight()]
            raise TransportError("ssh connection dropped")

        def cancel(self, handle):
            seen["cancelled"] = handle.data
            super().cancel(handle)

    (rec,) = campaign(cfg, ["local"], store, lambda p: DropsMidSubmit(), resume=False, poll_s=0.01)
    assert seen["journal"] == [{"intent": True, "job_name": "poc-local-clean-01"}]
    assert seen["cancelled"] == {"intent": True, "job_name": "poc-local-clean-01"}
    assert rec["status"] != "ok" and store.inflight() == []
