"""slurm_parse against real output recorded from Slurm 22.05.8 (bookworm) and 24.11.5 (trixie)."""
from __future__ import annotations

import pytest
from support.paths import FIXTURES

from harness import slurm_parse as sp
from harness.states import JobState

FIX = FIXTURES / "slurm"
RELEASES = {"bookworm": (22, 5, 8), "trixie": (24, 11, 5)}


def read(release: str, name: str) -> str:
    return (FIX / release / name).read_text()


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_sacct_json_completed_two_node_job(release):
    jobs = sp.sacct_json(read(release, "sacct.json"))
    j = next(j for j in jobs if j.name == "poc-itest-allreduce")
    assert j.state == JobState.SUCCEEDED and j.native_state == "COMPLETED"
    assert j.nodes == "c[1-2]"
    assert j.submit and j.start and j.end and j.submit <= j.start <= j.end
    assert j.exit_code == "0:0"


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_squeue_json_running_job(release):
    jobs = {j.name: j for j in sp.squeue_json(read(release, "squeue.json"))}
    j = jobs["poc-itest-sleep"]
    assert j.state == JobState.RUNNING and j.nodes == "c3"
    assert j.submit and j.start and j.start >= j.submit


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_squeue_json_after_requeue_is_running_again(release):
    jobs = {j.name: j for j in sp.squeue_json(read(release, "squeue_requeued.json"))}
    j = jobs["poc-itest-requeue"]
    assert j.state == JobState.RUNNING
    # the main record's Submit is rewritten by a requeue: eligible comes cred_expire (10 s) later
    assert j.eligible - j.submit >= 5


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_sacct_parsable_gives_one_row_per_attempt(release):
    rows = sp.sacct_attempts(read(release, "sacct_D_requeue.txt"))
    assert [r.native_state for r in rows] == ["REQUEUED", "RUNNING"]
    assert [r.state for r in rows] == [JobState.RESTARTING, JobState.RUNNING]
    assert rows[0].end is not None and rows[1].end is None      # "Unknown" while it runs
    assert rows[1].submit >= rows[0].end - 1


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_sacct_parsable_epoch_times(release):
    (row,) = sp.sacct_attempts(read(release, "sacct_D_X_P.txt"))
    assert row.state == JobState.SUCCEEDED and row.nodes == "c[1-2]"
    assert isinstance(row.submit, int) and row.submit > 1_600_000_000


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_show_config_timing_settings(release):
    conf = sp.show_config(read(release, "scontrol_show_config.txt"))
    s = sp.timing_settings(conf)
    assert sp.parse_version(s["SLURM_VERSION"]) == RELEASES[release]
    assert s["SchedulerParameters"] == "bf_interval=5,sched_interval=5"
    assert s["AuthInfo"] == "cred_expire=10"
    assert s["SlurmctldTimeout"] == "30 sec"


@pytest.mark.parametrize("native,flags,expected", [
    ("PENDING", [], JobState.PENDING),
    (["PENDING", "REQUEUED"], [], JobState.RESTARTING),
    ("CANCELLED by 1000", [], JobState.CANCELLED),
    ("OUT_OF_ME+", [], JobState.FAILED),
    ("NODE_FAIL", [], JobState.FAILED),
    ("COMPLETING", [], JobState.RUNNING),
    ("CONFIGURING", [], JobState.STARTING),
    ("DEADLINE", [], JobState.TIMEOUT),
    ("SOMETHING_NEW", [], JobState.UNKNOWN),
    ("", [], JobState.UNKNOWN),
])
def test_state_map(native, flags, expected):
    assert sp.map_state(native, flags) == expected


def test_numbers_of_both_schemas():
    assert sp._num(5) == 5
    assert sp._num({"set": True, "infinite": False, "number": 7}) == 7
    assert sp._num({"set": False, "infinite": False, "number": 0}) is None
    assert sp._num({"set": True, "infinite": True, "number": 0}) is None
    assert sp._num(0) is None


def test_parse_version():
    assert sp.parse_version("slurm-wlm 24.11.5") == (24, 11, 5)
    assert sp.parse_version("slurm 22.05.8") == (22, 5, 8)
    assert sp.parse_version("no version") == ()


def test_sinfo_nodes_and_node_usable_on_real_output():
    nodes = sp.sinfo_nodes(read("trixie", "sinfo_nodes.txt"))
    assert [n["node"] for n in nodes] == ["c1", "c2", "c3"] and nodes[0]["cpus"] == "2"
    assert sp.node_usable("idle\n") and not sp.node_usable("down*\n") and not sp.node_usable("idle*\n")
    assert not sp.node_usable("")
