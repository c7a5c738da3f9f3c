"""A Slurm replay's records (recorded: tests/fixtures/replay/slurm_records.json, from
tests/integration/test_replay_slurm.py) reduce to the outcomes the run printed; the submission loop's
answers map to trace jobs; an interrupted replay cancels what it submitted."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.fakes import SimClock

from harness.errors import BackendError
from harness.render import replay_slurm as rs
from harness.replay import slurm_records
from harness.replay.slurm import SlurmReplay
from harness.scale.trace import loads

FIXTURE = Path(__file__).parents[2] / "fixtures" / "replay" / "slurm_records.json"


def recorded():
    d = json.loads(FIXTURE.read_text())
    return loads(d["trace"]), d["submitted"], d["raw"]


def test_outcomes_from_slurmctlds_completion_records():
    trace, submitted, raw = recorded()
    got = {o.id: o for o in slurm_records.outcomes(trace, submitted, raw)}
    assert {k: (o.queue_s, o.end - o.start, o.state) for k, o in got.items()} == {
        "whole": (2.0, 12.0, "completed"), "b-four": (12.0, 4.0, "completed"),
        "a-one": (11.0, 3.0, "completed"), "b-two": (10.0, 3.0, "completed")}
    assert got["b-four"].start >= got["whole"].end


def test_times_are_read_in_the_clusters_zone():
    assert slurm_records.parse_time("2026-12-06T19:14:11", "+0000") == 1796584451.0
    assert slurm_records.parse_time("2026-12-06T20:14:11", "+0100") == 1796584451.0
    assert slurm_records.parse_time("Unknown", "+0000") is None


def test_a_job_cancelled_before_it_started_has_no_start_and_one_without_a_record_no_outcome():
    trace, submitted, _ = recorded()
    cancelled = ("JobId=1 Name=x JobState=CANCELLED StartTime=2026-12-06T19:20:00 EndTime=2026-12-06T19:20:00 "
                 "NodeList=(null) NodeCnt=0 SubmitTime=2026-12-06T19:19:00")
    (o,) = slurm_records.outcomes(trace, submitted[:1], {"jobcomp": [cancelled], "utc_offset": "+0000"})
    assert (o.id, o.start, o.end, o.state) == ("whole", None, None, "cancelled")
    assert slurm_records.outcomes(trace, submitted, {"jobcomp": [], "utc_offset": "+0000"}) == []


class Shell:
    """Answers the replay's calls like the emulated cluster; `queue` is what squeue shows."""

    def __init__(self, queue=None, fail_squeue=False):
        self.calls, self.queue, self.fail_squeue, self.next_id = [], dict(queue or {}), fail_squeue, 10

    def __call__(self, argv, input=None, timeout=None):
        self.calls.append((argv[0], input))
        if argv[0] == "bash":
            out = []
            for script in input.split(b"\0")[:-1]:
                if b"--account=refused" in script:
                    out.append("err\tsbatch: error: Invalid account")
                else:
                    self.next_id += 1
                    out.append(f"ok\t{self.next_id}")
                    self.queue[str(self.next_id)] = "PENDING"
            return subprocess.CompletedProcess(argv, 0, "\n".join(out) + "\n", "")
        if argv[0] == "squeue":
            if self.fail_squeue:
                return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Unable to contact slurmctld")
            return subprocess.CompletedProcess(argv, 0, "".join(f"{k} {v}\n" for k, v in self.queue.items()), "")
        if argv[0] == "scancel":
            for k in argv[1:]:
                self.queue.pop(k, None)
        return subprocess.CompletedProcess(argv, 0, "+0000\n" if argv[0] == "date" else "", "")


def test_jobs_due_together_go_in_one_call_and_each_answer_maps_to_its_job():
    trace, _, _ = recorded()
    trace = trace.model_copy(update={"jobs": tuple(j.model_copy(update={"submit_s": 0}) if j.id != "b-two"
                                                   else j.model_copy(update={"tenant": "refused"})
                                                   for j in trace.jobs)})
    shell, clock = Shell(), SimClock(0.0)
    rep = SlurmReplay(shell, rs.SlurmTarget(replay="r"), clock=clock, sleep=clock.sleep)
    rep.submit(trace)
    assert [c[0] for c in shell.calls] == ["bash", "bash"]       # three due at 0 s, then the fourth
    assert shell.calls[0][1].count(b"\0") == 3
    assert [(s.job, s.job_id, s.error) for s in rep.submitted] == [
        ("whole", "11", ""), ("b-four", "12", ""), ("a-one", "13", ""),
        ("b-two", "", "sbatch: error: Invalid account")]


def test_a_replay_that_stops_watching_cancels_what_is_still_queued():
    trace, _, _ = recorded()
    shell, clock = Shell(), SimClock(0.0)
    rep = SlurmReplay(shell, rs.SlurmTarget(replay="r"), clock=clock, sleep=clock.sleep)
    result = rep.run(trace, timeout_s=10)
    assert not result["ended"] and result["cancelled"] == ["11", "12", "13", "14"] and shell.queue == {}


def test_an_interrupted_replay_cancels_what_it_submitted_and_keeps_its_records():
    trace, _, _ = recorded()
    shell, clock = Shell(), SimClock(0.0)

    def interrupted(s):
        if clock.now > 2.5:
            raise KeyboardInterrupt
        clock.sleep(s)
    rep = SlurmReplay(shell, rs.SlurmTarget(replay="r"), clock=clock, sleep=interrupted)
    result = rep.run(trace, timeout_s=60)
    assert result["interrupted"] and not result["ended"] and result["cancelled"] == ["11", "12", "13"]
    assert shell.queue == {} and [c[0] for c in shell.calls[-4:]] == ["scancel", "cat", "date", "scontrol"]
    assert [s["job"] for s in result["submitted"]] == ["whole", "b-four", "a-one"]


def test_a_failure_other_than_an_interrupt_cancels_and_raises():
    trace, _, _ = recorded()
    shell, clock = Shell(), SimClock(0.0)

    def broken(s):
        if clock.now > 2.5:
            raise RuntimeError("the harness broke")
        clock.sleep(s)
    rep = SlurmReplay(shell, rs.SlurmTarget(replay="r"), clock=clock, sleep=broken)
    with pytest.raises(RuntimeError):
        rep.run(trace, timeout_s=60)
    assert shell.queue == {} and shell.calls[-1][0] == "scancel"


def test_a_cluster_that_cannot_answer_is_an_error_not_an_empty_queue():
    rep = SlurmReplay(Shell(fail_squeue=True), rs.SlurmTarget(replay="r"))
    with pytest.raises(BackendError, match=r"squeue on the Slurm cluster failed .*Unable to contact"):
        rep.wait_ended(10)


def test_host_lists_expand_as_slurm_prints_them():
    assert slurm_records.hostnames("e[0001-0003,0007]") == ["e0001", "e0002", "e0003", "e0007"]
    assert slurm_records.hostnames("e0001,e[0009-0010]") == ["e0001", "e0009", "e0010"]
    assert slurm_records.hostnames("c1") == ["c1"]


def test_blocks_are_the_switches_one_level_above_the_racks():
    topology = ["SwitchName=r1 Level=0 LinkSpeed=1 Nodes=e[0001-0002]",
                "SwitchName=r2 Level=0 LinkSpeed=1 Nodes=e[0003-0004]",
                "SwitchName=b1 Level=1 LinkSpeed=1 Nodes=e[0001-0004] Switches=r[1-2]",
                "SwitchName=b2 Level=1 LinkSpeed=1 Nodes=e[0005-0008] Switches=r[3-4]",
                "SwitchName=top Level=2 LinkSpeed=1 Nodes=e[0001-0008] Switches=b[1-2]"]
    got = slurm_records.block_of({"topology": topology})
    assert got == {**{f"e000{i}": "b1" for i in range(1, 5)}, **{f"e000{i}": "b2" for i in range(5, 9)}}
