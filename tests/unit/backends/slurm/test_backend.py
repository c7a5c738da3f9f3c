"""SlurmBackend without a cluster: Slurm's answers are real recorded output, the poll script is real.

A ``Recording`` transport answers Slurm commands from a table and records every call. The poll
command (``sh -c <eventfiles.SCRIPT>``) really runs here, on event files under tmp_path, with
``squeue`` on its PATH being a stand-in that prints a recorded answer and logs its arguments.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.paths import FIXTURES

from harness import config, spec
from harness import slurm_parse as sp
from harness.backends.base import Handle
from harness.backends.slurm import SlurmBackend
from harness.backends.slurm import eventfiles as ef
from harness.errors import BackendError, CommandError, SubmitError, TransportError
from harness.states import JobState
from harness.transports import LocalTransport, Result

FIX = FIXTURES / "slurm"
STEP = '{"kind": "step", "ts_ns": %d, "rank": %d, "step": %d, "host": "c1", "pid": 5}\n'


class Recording:
    """Answers argv[0] from a table and records every call; the poll script runs for real (through
    ``local``) unless the table answers ``sh``."""
    name = "recording"

    def __init__(self, answers: dict, local: LocalTransport | None = None):
        self.answers = answers
        self.local = local
        self.calls: list[tuple[list[str], dict | None, str | None]] = []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        argv = [str(a) for a in argv]
        self.calls.append((argv, env, input))
        if argv[:3] == ["sh", "-c", ef.SCRIPT] and "sh" not in self.answers and self.local is not None:
            return self.local.run(argv, input=input, env=env, timeout=timeout, check=check)
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


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Squeue:
    """A `squeue` on the poll script's PATH: prints a recorded answer, logs its arguments."""

    def __init__(self, tmp: Path):
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.log = tmp / "squeue.log"
        self.answer(0, "")

    def answer(self, rc: int, stdout: str, stderr: str = "") -> None:
        (self.bin / "out").write_text(stdout)
        (self.bin / "err").write_text(stderr)
        exe = self.bin / "squeue"
        exe.write_text(f'#!/bin/sh\necho "$@" >> {self.log}\ncat {self.bin}/out; cat {self.bin}/err >&2; exit {rc}\n')
        exe.chmod(0o755)

    @property
    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def transport(self) -> LocalTransport:
        return LocalTransport(["env", f"PATH={self.bin}:{os.environ['PATH']}"])


def make(answers=None, local=None, **kw):
    cfg = config.from_mapping({"platforms": ["slurm"]})
    return SlurmBackend(cfg.slurm, Recording(answers or {}, local), **kw), cfg


def handle(job_id="2", run_id="r1", events_dir="/shared/poc/x/r1/events"):
    return Handle("slurm", run_id, [job_id], 0.0, data={"job_id": job_id, "run_dir": str(Path(events_dir).parent),
                                                       "events_dir": str(events_dir), "lost_nodes": []})


def polls(be) -> list[list[str]]:
    return [c[0] for c in be.t.calls if c[0][:3] == ["sh", "-c", ef.SCRIPT]]


@pytest.fixture
def squeue(tmp_path):
    return Squeue(tmp_path)


# ---------------------------------------------------------------- observe

@pytest.mark.parametrize("release", ["bookworm", "trixie"])
def test_one_poll_is_one_command_with_one_squeue_for_many_jobs(release, squeue, tmp_path):
    squeue.answer(0, (FIX / release / "squeue.json").read_text())
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "events-c1-5.jsonl").write_text(STEP % (1, 0, 1))
    be, _ = make({"sacct": (0, (FIX / release / "sacct_D_X_P.txt").read_text(), "")}, local=squeue.transport())
    obs = be.observe([handle("2", "a", tmp_path / "a"), handle("1", "b", tmp_path / "b")])
    assert len(polls(be)) == 1 and squeue.calls == ["--json --jobs=2,1"]
    # sacct only for what squeue did not list (22.05 still lists the finished job 1; 24.11 does not)
    listed = {j.job_id for j in sp.squeue_json((FIX / release / "squeue.json").read_text())}
    sacct = [c[0] for c in be.t.calls if c[0][0] == "sacct"]
    assert [a[a.index("-j") + 1] for a in sacct] == ([] if "1" in listed else ["1"])
    assert len(be.t.calls) == 1 + len(sacct)
    assert obs["a"].state == JobState.RUNNING and obs["b"].state == JobState.SUCCEEDED
    assert obs["a"].times["allocated"] >= obs["a"].times["submitted"] > 1_600_000_000
    assert [e["step"] for e in obs["a"].events] == [1] and obs["b"].events == []


def test_job_states_are_asked_at_most_once_a_second(squeue, tmp_path):
    squeue.answer(0, (FIX / "trixie" / "squeue.json").read_text())
    clock = Clock()
    be, _ = make(local=squeue.transport(), clock=clock)
    h = handle("2", "a", tmp_path)
    assert be.observe([h])["a"].state == JobState.RUNNING
    clock.now += 0.9
    assert be.observe([h])["a"].state == JobState.RUNNING     # the state seen 0.9 s ago
    assert len(squeue.calls) == 1 and len(polls(be)) == 2    # the event files were still read
    clock.now += 0.1
    be.observe([h])
    assert len(squeue.calls) == 2
    be.observe([h, handle("9", "new", tmp_path)])           # a job not asked about yet is asked at once
    assert squeue.calls[-1] == "--json --jobs=2,9"


def test_observe_falls_back_to_sacct_for_finished_jobs(squeue, tmp_path):
    squeue.answer(1, "", "slurm_load_jobs error: Invalid job id specified")
    rows = (FIX / "trixie" / "sacct_D_X_P.txt").read_text()
    be, _ = make({"sacct": (0, rows, "")}, local=squeue.transport())
    obs = be.observe([handle("1", events_dir=tmp_path)])["r1"]
    assert obs.state == JobState.SUCCEEDED and "ended" in obs.times
    sacct = next(c for c in be.t.calls if c[0][0] == "sacct")
    assert sacct[1] == {"SLURM_TIME_FORMAT": "%s"} and sacct[0][sacct[0].index("-j") + 1] == "1"


def test_a_job_nobody_knows_any_more_is_unknown_not_its_last_state(squeue, tmp_path):
    squeue.answer(0, (FIX / "trixie" / "squeue.json").read_text())
    clock = Clock()
    be, _ = make({"sacct": (0, "JobID|State\n", "")}, local=squeue.transport(), clock=clock)
    assert be.observe([handle("2", events_dir=tmp_path)])["r1"].state == JobState.RUNNING
    squeue.answer(0, '{"jobs": []}')
    clock.now += 5
    obs = be.observe([handle("2", events_dir=tmp_path)])["r1"]
    assert obs.state == JobState.UNKNOWN and obs.native_state == "not found"


def test_pending_start_estimate_is_not_taken_as_allocation(squeue, tmp_path):
    squeue.answer(0, '{"jobs": [{"job_id": 9, "name": "x", "job_state": ["PENDING"], '
                     '"submit_time": {"set": true, "infinite": false, "number": 100}, '
                     '"start_time": {"set": true, "infinite": false, "number": 500}}]}')
    be, _ = make(local=squeue.transport())
    obs = be.observe([handle("9", events_dir=tmp_path)])["r1"]
    assert obs.state == JobState.PENDING and obs.times == {"submitted": 100.0}


@pytest.mark.parametrize("budget", [0, 1, 3])
def test_failed_queries_are_budgeted_then_raise(budget):
    be, _ = make({"sh": TransportError("ssh dropped"), "sacct": TransportError("ssh dropped")},
                 query_budget=budget)
    for _ in range(budget):   # each failed poll is one failed query: tolerated while within the budget
        assert be.observe([handle()])["r1"].state == JobState.UNKNOWN
    with pytest.raises(TransportError, match="ssh dropped"):
        be.observe([handle()])
    assert len(be.t.calls) == budget + 1


def test_a_query_that_succeeds_resets_the_budget():
    answers = {"sh": TransportError("ssh dropped")}
    be, _ = make(answers, query_budget=2)
    be.observe([handle()])
    be.observe([handle()])
    answers["sh"] = (0, "", "")
    be.observe([handle()])                                   # reachable again
    answers["sh"] = TransportError("ssh dropped")
    be.observe([handle()])
    be.observe([handle()])                                   # two in a row again: still within the budget
    with pytest.raises(TransportError):
        be.observe([handle()])


def test_squeue_failing_on_the_login_node_counts_against_the_budget(squeue, tmp_path):
    squeue.answer(1, "", "slurm_load_jobs error: Unable to contact slurm controller")
    be, _ = make({"sacct": (0, "", "")}, local=squeue.transport(), query_budget=1)
    assert be.observe([handle("2", events_dir=tmp_path)])["r1"].state == JobState.UNKNOWN
    be, _ = make({"sacct": (0, "", "")}, local=squeue.transport(), query_budget=0)
    with pytest.raises(CommandError, match="Unable to contact slurm controller"):
        be.observe([handle("2", events_dir=tmp_path)])


# ---------------------------------------------------------------- event files

def test_event_files_are_read_from_where_the_last_poll_stopped(squeue, tmp_path):
    be, _ = make(local=squeue.transport())
    h = handle(events_dir=tmp_path / "events")
    assert be.observe([h])["r1"].events == []              # no directory yet
    (tmp_path / "events").mkdir()
    f = tmp_path / "events" / "events-c1-5.jsonl"
    f.write_text(STEP % (1, 0, 1) + (STEP % (2, 0, 2))[:20])  # a line not finished yet
    assert [e["step"] for e in be.observe([h])["r1"].events] == [1]
    consumed = len(STEP % (1, 0, 1))
    assert polls(be)[-1][-1] == str(tmp_path / "events")   # no offsets yet: a new file is read from 0
    be.observe([h])
    assert polls(be)[-1][-2:] == [str(f), str(consumed)]  # the unfinished line is not consumed
    with f.open("a") as fh:
        fh.write((STEP % (2, 0, 2))[20:] + STEP % (3, 0, 3))
    assert [e["step"] for e in be.observe([h])["r1"].events] == [2, 3]
    assert be.observe([h])["r1"].events == []
    assert polls(be)[-1][-1] == str(f.stat().st_size)


def test_files_that_appear_later_and_a_requeued_rank_appending_are_read(squeue, tmp_path):
    be, _ = make(local=squeue.transport())
    h = handle(events_dir=tmp_path)
    (tmp_path / "events-c1-5.jsonl").write_text(STEP % (1, 0, 1))
    assert len(be.observe([h])["r1"].events) == 1
    (tmp_path / "events-c2-9.jsonl").write_text(STEP % (2, 1, 1))      # a restarted rank: a new pid, a new file
    with (tmp_path / "events-c1-5.jsonl").open("a") as fh:              # and one that appends after a requeue
        fh.write(STEP % (3, 0, 1))
    assert sorted(e["ts_ns"] for e in be.observe([h])["r1"].events) == [2, 3]


def test_a_file_that_shrank_is_read_again_and_nothing_is_handed_over_twice(squeue, tmp_path):
    be, _ = make(local=squeue.transport())
    h = handle(events_dir=tmp_path)
    f = tmp_path / "events-c1-5.jsonl"
    f.write_text(STEP % (1, 0, 1) + STEP % (2, 0, 2))
    assert len(be.observe([h])["r1"].events) == 2
    f.write_text(STEP % (1, 0, 1))
    assert be.observe([h])["r1"].events == []
    assert be.observe([h])["r1"].events == []
    assert polls(be)[-1][-1] == str(f.stat().st_size)


def test_a_new_submission_of_the_run_starts_reading_from_the_start(squeue, tmp_path):
    be, cfg = make({"sbatch": (0, "42\n", "")}, local=squeue.transport())
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    h = be.submit(s, be.render(s))
    ev = Path(tmp_path) / "ev"
    ev.mkdir()
    (ev / "events-c1-5.jsonl").write_text(STEP % (1, 0, 1))
    h.data["events_dir"] = str(ev)
    assert len(be.observe([h])[h.run_id].events) == 1
    h2 = be.submit(s, be.render(s))           # --resume re-runs from scratch: the same events are new again
    h2.data["events_dir"] = str(ev)
    assert len(be.observe([h2])[h2.run_id].events) == 1


def test_collect_reads_every_event_and_attempts_from_sacct_D(squeue, tmp_path):
    rows = (FIX / "trixie" / "sacct_D_requeue.txt").read_text()
    be, _ = make({"sacct": (0, rows, "")}, local=squeue.transport())
    h = handle("7", events_dir=tmp_path)
    (tmp_path / "events-c1-5.jsonl").write_text(STEP % (2, 0, 2) + STEP % (1, 0, 1) + (STEP % (3, 0, 3)).strip())
    assert len(be.observe([h])["r1"].events) == 2
    col = be.collect(h)
    assert [e["ts_ns"] for e in col.events] == [1, 2, 3]    # all of them, in time order, the last unterminated one too
    assert [a["state"] for a in col.attempts] == ["REQUEUED", "RUNNING"]
    argv = [c[0] for c in be.t.calls if c[0][0] == "sacct" and "-P" in c[0]][-1]   # collect's, after observe's
    assert "-D" in argv and "-X" in argv and "-P" in argv
    assert squeue.calls == ["--json --jobs=7"]              # collect asks squeue nothing
    # what watching the run cost is kept with it: one poll, two commands (squeue has forgotten job 7: sacct)
    assert col.info["polls"]["count"] == 1 and col.info["polls"]["commands"] == 2


# ---------------------------------------------------------------- submit, preflight

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


def test_a_crash_inside_sbatch_is_undone_from_the_journalled_intent():
    """The intent names the job by its name and run directory; its cancel scancels this user's job of
    that name in that directory only (another campaign's run of the same id works elsewhere)."""
    mine, theirs = "/shared/poc/smoke/slurm-clean-01", "/shared/poc/other/slurm-clean-01"
    be, cfg = make({"squeue": (0, f"77|{mine}\n78|{theirs}\n79|{mine}/\n", "")})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    intent = Handle.from_json(be.intent(s, be.render(s)).to_json())   # as the journal keeps it
    assert intent.ids == [] and intent.data["job_name"] == "poc-slurm-clean-01" and intent.data["run_dir"] == mine
    be.cancel(intent)
    argvs = [c[0] for c in be.t.calls]
    assert ["squeue", "--me", "-h", "--name=poc-slurm-clean-01", "-o", "%i|%Z"] in argvs
    assert argvs[-1] == ["scancel", "77", "79"]


def test_an_intent_whose_job_never_came_cancels_nothing():
    be, cfg = make({"squeue": (0, "", "")})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    be.cancel(be.intent(s, be.render(s)))
    assert not any(c[0][0] == "scancel" for c in be.t.calls)


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
    assert facts["nodes"] == [{"node": "c1", "state": "idle", "cpus": "2", "memory_mb": "8192"}]


def test_handles_record_the_cluster_preflight_read_and_submit_asks_nothing_more():
    """The identity `poc cleanup` and --resume compare comes from preflight's scontrol show config;
    submit adds no command to what a submit costs (the user-experience probes count them)."""
    conf = (FIX / "trixie" / "scontrol_show_config.txt").read_text()
    answers = {"sinfo": lambda a: (0, "slurm-wlm 24.11.5\n" if "--version" in a else "c1|idle|2|8192\n", ""),
               "scontrol": (0, conf, ""), "sbatch": (0, "42\n", "")}
    be, cfg = make(answers)
    be.preflight()
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    rendered = be.render(s)
    before = len(be.t.calls)
    assert be.intent(s, rendered).data["cluster"] == be.submit(s, rendered).data["cluster"] == {
        "platform": "slurm", "cluster_name": "poc", "controllers": ["slurmctld"]}
    assert not any(c[0][0] == "scontrol" for c in be.t.calls[before:])
    fresh, _ = make(answers)             # no preflight (a probe's backend): nothing recorded, nothing asked
    assert fresh.submit(s, fresh.render(s)).data["cluster"] is None
    assert not any(c[0][0] == "scontrol" for c in fresh.t.calls)
    assert fresh.cluster_identity()["cluster_name"] == "poc"   # what cleanup asks, when it needs it


# ---------------------------------------------------------------- faults and cancel

class Docker:
    """Records docker commands; `sinfo` answers come from the Recording transport."""

    def __init__(self):
        self.ran: list[list[str]] = []

    def __call__(self, argv, **_kw):
        self.ran.append(argv)
        return Result(tuple(argv), 0, "", "")


def held_squeue(argv):
    """squeue as recorded while job 10 ran on c[1-2], with job 11 beside it on c1 (guard.py's checks)."""
    guard_fix = FIX / "trixie" / "guard"
    if "--json" in argv:
        return 0, (guard_fix / "squeue_job.json").read_text(), ""
    node = next(a.split("=", 1)[1] for a in argv if a.startswith("--nodelist="))
    return 0, (guard_fix / f"squeue_{node}.txt").read_text(), ""


REASONS = FIX / "trixie" / "node_reasons"   # sinfo's answers for one node, recorded (README.md there)


def recorded(name: str) -> str:
    return (REASONS / f"{name}.txt").read_text()


def asks_reason(argv) -> bool:
    return "%u|%E" in argv or "%E" in argv


def reason_answer(argv, text: str) -> str:
    """A recorded `%u|%E` answer, as `%E` alone prints it when that is what is asked (the harness asked
    for %E alone before it read who set the reason)."""
    return text if "%u|%E" in argv else "".join(ln.split("|", 1)[-1] + "\n" for ln in text.splitlines())


def show_config(argv):
    """scontrol as recorded: `show config` (SlurmUser = slurm) and nothing for an update."""
    if argv[1:3] == ["show", "config"]:
        return 0, (FIX / "trixie" / "scontrol_show_config.txt").read_text(), ""
    return 0, "", ""


def docker_backend(sinfo=(0, "idle\n", ""), **kw):
    cfg = config.from_mapping({"platforms": ["slurm"]})
    docker = Docker()
    be = SlurmBackend(cfg.slurm, Recording({"sinfo": sinfo, "squeue": held_squeue, "scontrol": show_config}),
                      docker={"login": "l", "controller": "ctl", "nodes": {"c2": "poc-slurm-c2"}},
                      docker_runner=docker, sleep=lambda _s: None, allow_destructive_faults=True, **kw)
    return be, docker


def test_kill_rank_goes_through_srun_overlap_on_the_ranks_node():
    be, _ = make({})
    rec = be.inject(handle("7"), "kill_rank", {"rank": 1, "host": "c2", "pid": 91, "step": 12})
    argv = be.t.calls[-1][0]
    assert argv == ["srun", "--jobid=7", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=c2", "kill", "-9", "91"]
    assert rec.kind == "kill_rank" and rec.target["host"] == "c2"    # an event from before `node`: its host


def test_kill_rank_aims_at_the_slurm_node_name_not_the_host_name():
    """A rank's host name (an FQDN here) need not be its NodeName; srun --nodelist takes the NodeName, which the
    workload's events carry as `node` (SLURMD_NODENAME)."""
    be, _ = make({})
    rec = be.inject(handle("7"), "kill_rank", {"rank": 1, "host": "gpu17.cluster.example.org", "node": "c2",
                                               "pid": 91, "step": 12})
    assert "--nodelist=c2" in be.t.calls[-1][0]
    assert rec.target["node"] == "c2" and rec.target["host"] == "gpu17.cluster.example.org"
    assert rec.detail["node"] == "c2"


def test_lose_node_aims_at_the_slurm_node_name_not_the_host_name():
    be, docker = docker_backend()
    h = handle("10")
    rec = be.inject(h, "lose_node", {"rank": 1, "host": "gpu17.cluster.example.org", "node": "c2", "pid": 1})
    assert docker.ran == [["docker", "kill", "poc-slurm-c2"]] and h.data["lost_nodes"] == ["c2"]
    assert rec.detail["node"] == "c2"


def test_lose_node_is_journalled_before_the_container_is_killed():
    be, docker = docker_backend()
    h = handle("10")
    journalled = []

    def journal(hh):   # what a crash right now would leave on disk
        journalled.append((json.loads(json.dumps(hh.to_json())), list(docker.ran)))

    rec = be.inject(h, "lose_node", {"rank": 1, "host": "c2", "pid": 1}, journal=journal)
    (saved, ran_before), = journalled
    assert ran_before == [] and docker.ran == [["docker", "kill", "poc-slurm-c2"]]
    assert saved["data"]["lost_nodes"] == ["c2"] and saved["data"]["stopped_containers"] == {"c2": "poc-slurm-c2"}
    assert rec.detail["container"] == "poc-slurm-c2"


def test_lose_node_without_docker_is_journalled_before_scontrol():
    be, _ = make({"squeue": held_squeue}, allow_destructive_faults=True)
    h = handle("10")
    seen = []
    be.inject(h, "lose_node", {"rank": 1, "host": "c2", "pid": 1},
              journal=lambda hh: seen.append((list(hh.data["lost_nodes"]), len(be.t.calls))))
    # before the journal only reads: which nodes the job holds and who else runs there (guard.py), and
    # the node's record as slurmctld has it (raw evidence)
    assert seen == [(["c2"], 4)] and [c[0][0] for c in be.t.calls[:3]] == ["squeue", "squeue", "sinfo"]
    assert be.t.calls[3][0] == ["scontrol", "show", "node", "-o", "c2"]
    assert be.t.calls[-1][0][:3] == ["scontrol", "update", "nodename=c2"]
    assert [r["when"] for r in h.data["node_records"]] == ["inject"]


@pytest.mark.parametrize("fault_took_effect", [True, False])
def test_cancel_after_a_crash_brings_the_node_back_whether_or_not_it_went(fault_took_effect):
    """--resume: a fresh backend cancels the handle as the in-flight record kept it."""
    be, _ = docker_backend()
    h = handle("10")
    saved = []
    if fault_took_effect:
        be.inject(h, "lose_node", {"rank": 1, "host": "c2", "pid": 1}, journal=lambda hh: saved.append(hh.to_json()))
    else:   # the record was written, the harness died before `docker kill`
        h.data.update(lost_nodes=["c2"], stopped_containers={"c2": "poc-slurm-c2"})
        saved.append(h.to_json())
    fresh, docker2 = docker_backend()
    again = Handle.from_json(json.loads(json.dumps(saved[-1])))
    fresh.cancel(again)
    assert [c[0] for c in fresh.t.calls] == [["scancel", "10"], ["sinfo", "-h", "-n", "c2", "-o", "%T"],
                                             ["scontrol", "show", "node", "-o", "c2"]]   # once back: evidence
    assert again.data["node_records"][-1]["when"] == "restore"
    assert docker2.ran == [["docker", "start", "poc-slurm-c2"]]
    assert again.data["lost_nodes"] == [] and "stopped_containers" not in again.data


def test_cancel_is_idempotent():
    be, docker = docker_backend()
    be.t.answers["scancel"] = (1, "", "scancel: error: Invalid job id specified")
    h = handle()
    h.data["lost_nodes"] = ["c2"]
    be.cancel(h)
    be.cancel(h)   # the job is gone and the node is back: nothing is started twice, nothing raises
    assert [c[0][0] for c in be.t.calls].count("scancel") == 2
    assert docker.ran == [["docker", "start", "poc-slurm-c2"]]
    assert h.data["lost_nodes"] == []


def test_cancel_waits_for_the_node_and_resumes_it_through_the_controller():
    answers = iter(["down*\n"] * 3 + ["idle*\n"] * 20 + ["idle\n"])
    clock = Clock()

    def sinfo(argv):
        if asks_reason(argv):   # slurmctld's own, for a node that went away
            return 0, reason_answer(argv, recorded("slurmctld_not_responding_uE")), ""
        clock.now += 2   # each look and its sleep
        return 0, next(answers), ""

    be, docker = docker_backend(sinfo=sinfo, clock=clock)
    h = handle()
    h.data["lost_nodes"] = ["c2"]
    be.cancel(h)
    assert docker.ran[0] == ["docker", "start", "poc-slurm-c2"]
    assert docker.ran[1] == ["docker", "exec", "ctl", "scontrol", "update", "nodename=c2", "state=resume"]
    assert h.data["lost_nodes"] == []


def test_a_node_that_does_not_come_back_fails_cancel_and_stays_recorded():
    clock = Clock()

    def sinfo(argv):
        if asks_reason(argv):
            return 0, reason_answer(argv, recorded("slurmctld_not_responding_uE")), ""
        clock.now += 2
        return 0, "down*\n", ""

    be, _ = docker_backend(sinfo=sinfo, clock=clock)
    h = handle()
    h.data.update(lost_nodes=["c2"], stopped_containers={"c2": "poc-slurm-c2"})
    with pytest.raises(BackendError, match="node c2 is not back"):
        be.cancel(h)
    assert h.data["lost_nodes"] == ["c2"] and h.data["stopped_containers"] == {"c2": "poc-slurm-c2"}


def _node_answers(clock, states, reason):
    """sinfo for one node: %T answers from `states` (the last one repeats), %u|%E always `reason`
    ("user|text"; a bare text is set by root)."""
    states = list(states)
    reason = reason if "|" in reason else f"root|{reason}"

    def sinfo(argv):
        if asks_reason(argv):
            return 0, reason_answer(argv, reason + "\n"), ""
        clock.now += 2
        return 0, (states.pop(0) if len(states) > 1 else states[0]) + "\n", ""
    return sinfo


def test_an_operators_drain_on_the_restarted_node_is_left_as_it_is_and_said(caplog):
    clock = Clock()
    be, docker = docker_backend(sinfo=_node_answers(clock, ["down*", "drained"], "maint window"), clock=clock)
    h = handle()
    h.data.update(lost_nodes=["c2"], stopped_containers={"c2": "poc-slurm-c2"})
    with caplog.at_level("WARNING"):
        be.cancel(h)
    assert docker.ran == [["docker", "start", "poc-slurm-c2"]]           # started, never resumed
    assert h.data["nodes_left"] == {"c2": "drained, reason 'maint window' set by root"}
    assert h.data["lost_nodes"] == [] and clock.now - 1000.0 < 30          # said at once, not after the wait
    assert "node c2 left as it is" in caplog.text
    be.cancel(h)                                                           # a second cleanup does nothing more
    assert docker.ran == [["docker", "start", "poc-slurm-c2"]]


def _operator_backend(sinfo):
    """A cluster where the run itself sets node states (no containers): scontrol through the transport."""
    cfg = config.from_mapping({"platforms": ["slurm"]})
    return SlurmBackend(cfg.slurm, Recording({"sinfo": sinfo, "squeue": held_squeue, "scontrol": show_config}),
                        docker=None, sleep=lambda _s: None, allow_destructive_faults=True)


@pytest.mark.parametrize(("reason", "resumed"), [
    ("poc-lose-node job 10", True),                    # the run's own mark
    ("poc-lose-node job 10 ", True),                   # sinfo's trailing blank is no other reason
    ("poc-lose-node job 11", False),                   # another run's mark
    ("poc-lose-node job 100", False),                  # one that begins like the run's
    ("maint window", False),                           # an operator's
    # the harness set the reason itself: even slurmctld's words, exactly and by SlurmUser, are not its mark
    ("slurm|Not responding", False),
    ("root|Not responding", False),                    # an operator's, in slurmctld's words
    ("root|Not responding, PSU swapped", False),       # an operator's that begins like slurmctld's
])
def test_a_node_set_down_is_resumed_only_while_the_reason_on_it_is_the_faults(reason, resumed):
    be = _operator_backend(_node_answers(Clock(), ["down"], reason))
    h = handle("10")
    h.data["lost_nodes"] = ["c2"]
    be.cancel(h)
    updates = [c[0] for c in be.t.calls if c[0][:2] == ["scontrol", "update"]]
    assert updates == ([["scontrol", "update", "nodename=c2", "state=resume"]] if resumed else [])
    assert ("nodes_left" in h.data) is not resumed and h.data["lost_nodes"] == []


@pytest.mark.parametrize("recorded_reason", ["operator_drain_uE", "operator_down_exact_uE"])
def test_an_operators_reason_worded_like_slurmctlds_is_left_on_the_restarted_node(recorded_reason):
    """The killed container's node: slurmctld's own reasons are the fault's there, but only whole and set
    by SlurmUser. An operator's "Not responding, PSU swapped" (it begins like slurmctld's) and an operator's
    exact "Not responding" (set by root) were resumed; both as recorded on the cluster."""
    clock = Clock()
    state = recorded(recorded_reason.replace("_uE", "_T")).strip()

    def sinfo(argv):
        if asks_reason(argv):
            return 0, reason_answer(argv, recorded(recorded_reason)), ""
        clock.now += 2
        return 0, state + "\n", ""

    be, docker = docker_backend(sinfo=sinfo, clock=clock)
    h = handle()
    h.data.update(lost_nodes=["c2"], stopped_containers={"c2": "poc-slurm-c2"})
    be.cancel(h)
    assert docker.ran == [["docker", "start", "poc-slurm-c2"]]            # started, never resumed
    why = recorded(recorded_reason).strip().split("|", 1)[1]
    assert h.data["nodes_left"] == {"c2": f"{state}, reason {why!r} set by root"}


def test_slurmctlds_own_reason_on_the_restarted_node_is_resumed_as_recorded():
    clock = Clock()
    states = iter([recorded("slurmctld_not_responding_T")] * 20 + [recorded("after_unpause_T")])

    def sinfo(argv):
        if asks_reason(argv):
            return 0, reason_answer(argv, recorded("slurmctld_not_responding_uE")), ""
        clock.now += 2
        return 0, next(states), ""

    be, docker = docker_backend(sinfo=sinfo, clock=clock)
    h = handle()
    h.data.update(lost_nodes=["c2"], stopped_containers={"c2": "poc-slurm-c2"})
    be.cancel(h)
    assert docker.ran[1] == ["docker", "exec", "ctl", "scontrol", "update", "nodename=c2", "state=resume"]
    assert "nodes_left" not in h.data and h.data["lost_nodes"] == []


def per_partition(text: str, partitions: int = 2) -> str:
    """sinfo's answer for one node when it prints a line per partition the node is in (the shape of
    `sinfo -n c3 -o "%P %T"`, two_partitions_P_T.txt, without the partition's own column)."""
    return "".join(ln + "\n" for ln in text.splitlines() for _ in range(partitions))


def test_a_node_in_two_partitions_set_down_with_the_runs_mark_is_resumed():
    """The harness's mark on a node of two partitions, answered a line per partition: the node was read as
    unusable by two states and its reason as two lines, which is no one's mark, so it stayed DOWN."""
    def sinfo(argv):
        if asks_reason(argv):
            return 0, per_partition(reason_answer(argv, recorded("two_partitions_mark_uE").replace("4242", "10"))), ""
        return 0, per_partition(recorded("two_partitions_mark_T")), ""

    be = _operator_backend(sinfo)
    h = handle("10")
    h.data["lost_nodes"] = ["c2"]
    be.cancel(h)
    assert [c[0] for c in be.t.calls if c[0][:2] == ["scontrol", "update"]] == \
        [["scontrol", "update", "nodename=c2", "state=resume"]]
    assert "nodes_left" not in h.data and h.data["lost_nodes"] == []


def test_a_restarted_node_in_two_partitions_is_seen_back_at_once():
    clock = Clock()

    def sinfo(argv):
        clock.now += 2
        if asks_reason(argv):
            return 0, per_partition(reason_answer(argv, recorded("two_partitions_idle_uE"))), ""
        return 0, per_partition(recorded("two_partitions_idle_T")), ""

    be, docker = docker_backend(sinfo=sinfo, clock=clock)
    h = handle()
    h.data.update(lost_nodes=["c2"], stopped_containers={"c2": "poc-slurm-c2"})
    be.cancel(h)                          # it waited 90 s and failed: "node c2 is not back"
    assert docker.ran == [["docker", "start", "poc-slurm-c2"]] and clock.now - 1000.0 <= 2
    assert h.data["lost_nodes"] == []


def test_sinfos_lines_for_one_node_are_read_once_and_different_ones_are_not_merged():
    from harness.backends.slurm.scheduler import one_per_node
    assert one_per_node("down\ndown\n") == "down\n" and one_per_node("") == ""
    assert not sp.node_usable(one_per_node(recorded("two_partitions_P_T")))   # two different lines stay two


def test_lose_node_without_containers_marks_the_node_with_the_job_it_was_for():
    be = _operator_backend((0, "idle\n", ""))
    be.sched.node_record = lambda host, when: {"node": host, "when": when}
    h = handle("10")
    rec = be.inject(h, "lose_node", {"rank": 1, "host": "c2", "pid": 1})
    assert be.t.calls[-1][0] == ["scontrol", "update", "nodename=c2", "state=down", "reason=poc-lose-node job 10"]
    assert rec.detail["how"].startswith("scontrol update state=down")


def test_render_needs_no_cluster_and_preflight_says_why(tmp_path):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"connection_file": str(tmp_path / "none.json")}})
    be = SlurmBackend.from_config(cfg)
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    assert be.render(s).files["job.sbatch"].startswith("#!/bin/bash")
    with pytest.raises(TransportError, match="no Slurm login node configured"):
        be.preflight()
