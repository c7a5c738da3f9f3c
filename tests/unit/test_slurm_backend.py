"""SlurmBackend with a recording transport that answers from real recorded output (no cluster)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import config, spec
from harness.backends.base import Handle
from harness.backends.slurm import SlurmBackend
from harness.errors import CommandError, SubmitError, TransportError
from harness.states import JobState
from harness.transports import Result

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


class Recording:
    """Answers argv[0] from a table; records every call."""
    name = "recording"

    def __init__(self, answers: dict):
        self.answers = answers
        self.calls: list[tuple[list[str], dict | None, str | None]] = []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        argv = [str(a) for a in argv]
        self.calls.append((argv, env, input))
        ans = self.answers.get(argv[0], (0, "", ""))
        if callable(ans):
            ans = ans(argv)
        if isinstance(ans, Exception):
            raise ans
        rc, out, err = ans
        res = Result(tuple(argv), rc, out, err)
        if check and rc != 0:
            raise CommandError(argv, rc, out, err)
        return res

    def describe(self):
        return {"transport": "recording"}

    def close(self):
        pass


def make(answers, release="trixie"):
    cfg = config.from_mapping({"platforms": ["slurm"]})
    return SlurmBackend(cfg.slurm, Recording(answers)), cfg


def handle(job_id="2", run_id="r1"):
    return Handle("slurm", run_id, [job_id], 0.0, data={"job_id": job_id, "run_dir": "/shared/poc/x/r1",
                                                       "events_dir": "/shared/poc/x/r1/events", "lost_nodes": []})


@pytest.mark.parametrize("release", ["bookworm", "trixie"])
def test_observe_uses_one_squeue_json_for_many_jobs(release):
    squeue = (FIX / release / "squeue.json").read_text()
    be, _ = make({"squeue": (0, squeue, ""), "sh": (0, "", "")})
    obs = be.observe([handle("2", "a"), handle("1", "b")])
    squeue_calls = [c for c in be.t.calls if c[0][0] == "squeue"]
    assert len(squeue_calls) == 1 and squeue_calls[0][0][-1] == "--jobs=2,1"
    assert obs["a"].state == JobState.RUNNING
    assert obs["a"].times["allocated"] >= obs["a"].times["submitted"]


def test_observe_falls_back_to_sacct_for_finished_jobs():
    rows = (FIX / "trixie" / "sacct_D_X_P.txt").read_text()
    be, _ = make({"squeue": (1, "", "slurm_load_jobs error: Invalid job id specified"), "sacct": (0, rows, ""),
                  "sh": (0, "", "")})
    obs = be.observe([handle("1")])["r1"]
    assert obs.state == JobState.SUCCEEDED and "ended" in obs.times
    sacct = [c for c in be.t.calls if c[0][0] == "sacct"][0]
    assert sacct[1] == {"SLURM_TIME_FORMAT": "%s"}


def test_pending_start_estimate_is_not_taken_as_allocation():
    pending = '{"jobs": [{"job_id": 9, "name": "x", "job_state": ["PENDING"], "submit_time": {"set": true, "infinite": false, "number": 100}, "start_time": {"set": true, "infinite": false, "number": 500}}]}'
    be, _ = make({"squeue": (0, pending, ""), "sh": (0, "", "")})
    obs = be.observe([handle("9")])["r1"]
    assert obs.state == JobState.PENDING and "allocated" not in obs.times


def test_failed_queries_are_budgeted_then_raise():
    be, _ = make({"squeue": TransportError("ssh dropped"), "sacct": TransportError("ssh dropped"),
                  "sh": TransportError("ssh dropped")})
    be.query_budget = 3
    with pytest.raises(TransportError):
        for _ in range(10):
            assert be.observe([handle()])["r1"].state == JobState.UNKNOWN


def test_events_are_returned_once():
    line = 'POC_EVENT {"kind": "step", "ts_ns": 1, "rank": 0, "step": 1, "host": "c1", "pid": 5}\n'
    be, _ = make({"squeue": (0, '{"jobs": []}', ""), "sacct": (0, "", ""), "sh": (0, line, "")})
    assert len(be.observe([handle()])["r1"].events) == 1
    assert be.observe([handle()])["r1"].events == []


def test_submit_uploads_then_sbatch_parsable():
    be, cfg = make({"sbatch": (0, "42\n", "")})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    h = be.submit(s, be.render(s))
    assert h.ids == ["42"] and h.data["run_dir"] == "/shared/poc/smoke/slurm-clean-01"
    argvs = [c[0] for c in be.t.calls]
    assert argvs[-1] == ["sbatch", "--parsable", "/shared/poc/smoke/slurm-clean-01/job.sbatch"]
    uploads = [c for c in be.t.calls if c[0][0] == "sh" and c[2]]
    assert any("def main" in c[2] for c in uploads)               # the workload script
    assert any(c[2].startswith("#!/bin/bash") for c in uploads)   # the batch script


def test_submit_refused_is_a_submit_error_with_slurms_words():
    be, cfg = make({"sbatch": (1, "", "sbatch: error: invalid partition specified: nope")})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    with pytest.raises(SubmitError, match="invalid partition"):
        be.submit(s, be.render(s))


def test_preflight_rejects_unknown_partition():
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"partition": "nope"}})
    conf = (FIX / "trixie" / "scontrol_show_config.txt").read_text()
    t = Recording({"sinfo": lambda a: (0, "slurm-wlm 24.11.5\n" if "--version" in a else "debug\n", ""),
                   "scontrol": (0, conf, "")})
    from harness.errors import BackendError
    with pytest.raises(BackendError, match="partition 'nope' does not exist"):
        SlurmBackend(cfg.slurm, t).preflight()


def test_preflight_records_the_settings_that_shape_recovery():
    conf = (FIX / "bookworm" / "scontrol_show_config.txt").read_text()
    be, _ = make({"sinfo": lambda a: (0, "slurm-wlm 22.05.8\n" if "--version" in a else "c1|idle|2|8192\n", ""),
                  "scontrol": (0, conf, "")})
    facts = be.preflight()
    assert facts["scheduler_version"] == "22.5.8"
    assert facts["slurm_settings"]["AuthInfo"] == "cred_expire=10"
    assert facts["slurm_settings"]["SchedulerParameters"] == "bf_interval=5,sched_interval=5"


def test_kill_rank_goes_through_srun_overlap_on_the_ranks_node():
    be, _ = make({})
    rec = be.inject(handle("7"), "kill_rank", {"rank": 1, "host": "c2", "pid": 91, "step": 12})
    argv = be.t.calls[-1][0]
    assert argv == ["srun", "--jobid=7", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=c2", "kill", "-9", "91"]
    assert rec.kind == "kill_rank" and rec.target["host"] == "c2"


def test_lose_node_in_the_docker_cluster_kills_the_container():
    ran = []

    class P:
        returncode, stdout, stderr = 0, "", ""

    cfg = config.from_mapping({"platforms": ["slurm"]})
    be = SlurmBackend(cfg.slurm, Recording({}), docker={"login": "l", "controller": "ctl",
                                                        "nodes": {"c2": "poc-slurm-c2"}},
                      docker_runner=lambda argv, **kw: ran.append(argv) or P())
    h = handle()
    be.inject(h, "lose_node", {"rank": 1, "host": "c2", "pid": 1})
    assert ran == [["docker", "kill", "poc-slurm-c2"]] and h.data["lost_nodes"] == ["c2"]


def test_collect_reads_attempts_from_sacct_D():
    rows = (FIX / "trixie" / "sacct_D_requeue.txt").read_text()
    be, _ = make({"sacct": (0, rows, ""), "sh": (0, "", "")})
    col = be.collect(handle("7"))
    assert [a["state"] for a in col.attempts] == ["REQUEUED", "RUNNING"]
    argv = [c for c in be.t.calls if c[0][0] == "sacct"][0][0]
    assert "-D" in argv and "-X" in argv and "-P" in argv


def test_cancel_is_idempotent():
    be, _ = make({"scancel": (1, "", "scancel: error: Invalid job id specified")})
    be.cancel(handle())
    be.cancel(handle())


def test_render_needs_no_cluster_and_preflight_says_why(tmp_path):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"connection_file": str(tmp_path / "none.json")}})
    be = SlurmBackend.from_config(cfg)
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    assert be.render(s).files["job.sbatch"].startswith("#!/bin/bash")
    with pytest.raises(TransportError, match="no Slurm login node configured"):
        be.preflight()
