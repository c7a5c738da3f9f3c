"""A Slurm site's history read into a Trace: the recorded export from the local cluster, then
hand-made rows for what that small cluster never printed (arrays, het jobs, GPUs, odd limits).

The hand-made JSON records start from a recorded one and change only the fields under test, so the
rest of each record stays a shape Slurm really prints.
"""
from __future__ import annotations

import copy
import json

import pytest
from support.paths import FIXTURES

from harness.errors import ConfigError
from harness.scale import sacct
from harness.scale.trace import NodeShape, dumps, loads

REC = FIXTURES / "scale" / "sacct"
JSON_TEXT = (REC / "sacct.json").read_text()
PIPE_TEXT = (REC / "sacct-P.txt").read_text()          # local times (the containers run in UTC)
EPOCH_TEXT = (REC / "sacct-P-epoch.txt").read_text()   # the same jobs with SLURM_TIME_FORMAT=%s
HEADER = "|".join(sacct.PIPE_FIELDS)


def same(a, b) -> None:
    """Two traces of the same jobs: equal but for where each says it came from."""
    assert a.jobs == b.jobs and a.duration_s == b.duration_s and a.notes == b.notes
    assert a.params["zero_epoch"] == b.params["zero_epoch"]


def _rows(text: str) -> list[dict[str, str]]:
    head, *rows = text.strip().splitlines()
    return [dict(zip(head.split("|"), r.split("|"), strict=True)) for r in rows]


# ---- the recorded export ------------------------------------------------------------------------------

def test_the_recorded_exports_are_of_the_same_jobs():
    ids = [j["job_id"] for j in json.loads(JSON_TEXT)["jobs"]]
    assert [r["JobID"] for r in _rows(PIPE_TEXT)] == [str(i) for i in ids] == [r["JobID"] for r in _rows(EPOCH_TEXT)]
    assert len(ids) >= 3


def test_both_formats_give_the_same_trace():
    from_json = sacct.parse_json(JSON_TEXT, name="poc")
    same(from_json, sacct.parse_pipe(PIPE_TEXT, name="poc", tz="UTC"))
    same(from_json, sacct.parse_pipe(EPOCH_TEXT, name="poc"))
    assert from_json.source.startswith("sacct --json, cluster poc, Slurm 24.11")


def test_the_recorded_trace_keeps_exactly_the_jobs_that_started_and_ended():
    rows = _rows(EPOCH_TEXT)
    ran = [r for r in rows if r["Start"] not in ("Unknown", "None", "0") and r["End"] not in ("Unknown", "None")
           and r["State"] != "RUNNING"]
    t = sacct.parse_pipe(EPOCH_TEXT)
    assert [j.id for j in t.jobs] == [r["JobID"] for r in sorted(ran, key=lambda r: int(r["Submit"]))]
    for j in t.jobs:
        r = next(r for r in rows if r["JobID"] == j.id)
        assert j.runtime_s == max(1, int(r["End"]) - int(r["Start"])) and j.nodes == int(r["NNodes"])
        assert j.submit_s == int(r["Submit"]) - t.params["zero_epoch"] and j.tenant == r["Account"]
    dropped = len(rows) - len(ran)
    assert sum(int(n.split()[0]) for n in t.notes if "dropped" in n) == dropped


def test_the_recorded_trace_round_trips_through_jsonl():
    t = sacct.parse_json(JSON_TEXT, name="poc", shape=NodeShape(nodes=3, gpus_per_node=4))
    assert loads(dumps(t)) == t


def test_local_times_need_their_zone():
    with pytest.raises(ConfigError, match="local time with no zone") as e:
        sacct.parse_pipe(PIPE_TEXT)
    assert "SLURM_TIME_FORMAT=%s" in e.value.tip
    with pytest.raises(ConfigError, match="unknown time zone"):
        sacct.parse_pipe(PIPE_TEXT, tz="Mars/Olympus")


# ---- sacct -P, hand-made rows -------------------------------------------------------------------------

def pipe(*rows: str) -> str:
    return "\n".join((HEADER, *rows)) + "\n"


def row(job_id: str, submit: int = 1000, start: int | str = 1010, end: int | str = 1110, limit: str = "00:15:00",
        nodes: int = 2, tres: str = "billing=2,cpu=2,node=2", qos: str = "normal", state: str = "COMPLETED",
        user: str = "ann", account: str = "physics") -> str:
    return f"{job_id}|{user}|{account}|{submit}|{start}|{end}|{limit}|{nodes}|{tres}|{qos}|{state}"


def test_arrays_het_jobs_and_steps():
    t = sacct.parse_pipe(pipe(row("20_3"), row("20_[4-6]", start="Unknown", end="Unknown", state="PENDING"),
                              row("30+0", nodes=1), row("30+1", nodes=4), row("30+1.0"), row("31.batch")))
    assert [j.id for j in t.jobs] == ["20_3", "30+0", "30+1"]
    assert set(t.notes) == {"2 steps skipped", "1 never started, dropped",
                            "2 heterogeneous components kept as separate jobs"}


def test_gpus_per_node_come_from_the_allocated_gres():
    t = sacct.parse_pipe(pipe(row("1", tres="cpu=8,gres/gpu=16,gres/gpu:a100=16,node=2"),
                              row("2", tres="cpu=8,gres/gpu:a100=4,gres/gpu:h100=4,node=2", submit=1001),
                              row("3", tres="cpu=8,gres/gpu=3,node=2", submit=1002),
                              row("4", submit=1003)))
    assert [j.gpus_per_node for j in t.jobs] == [8, 4, 2, 0]
    assert "1 GPUs uneven across nodes, rounded up per node" in t.notes


@pytest.mark.parametrize(("text", "seconds"), [
    ("00:15:00", 900), ("2-00:00:00", 172800), ("1-12", 129600), ("1-00:30", 88200), ("45:30", 2730),
    ("90", 5400), ("UNLIMITED", None), ("Partition_Limit", None), ("INVALID", None), ("", None),
])
def test_time_limits_in_every_form_slurm_prints(text, seconds):
    assert sacct._limit(text) == seconds


def test_run_times_are_clamped_to_the_limit_and_kept_at_least_one_second():
    t = sacct.parse_pipe(pipe(row("1", start=1010, end=2000, limit="00:10:00"),
                              row("2", start=1010, end=1010, submit=1001),
                              row("3", limit="UNLIMITED", submit=1002),
                              row("4", start=1200, end=1100, submit=1003)))
    assert [(j.id, j.runtime_s, j.limit_s) for j in t.jobs] == [("1", 600, 600), ("2", 1, 900), ("3", 100, 100)]
    assert set(t.notes) == {"1 ran past the limit, clamped to it", "1 ran under 1 s, kept as 1 s",
                            "1 no limit recorded, run time used as limit", "1 ended before it started, dropped"}


def test_running_and_pending_jobs_are_dropped():
    t = sacct.parse_pipe(pipe(row("1"), row("2", end="Unknown", state="RUNNING"),
                              row("3", start="Unknown", end="Unknown", state="PENDING"),
                              row("4", start="None", end=1005, state="CANCELLED by 1000")))
    assert [j.id for j in t.jobs] == ["1"]
    assert set(t.notes) == {"1 not ended at export, dropped", "2 never started, dropped"}


def test_tenant_is_the_account_or_the_user():
    text = pipe(row("1"), row("2", account="", user="bob"))
    assert [j.tenant for j in sacct.parse_pipe(text).jobs] == ["physics", "bob"]
    assert [j.tenant for j in sacct.parse_pipe(text, tenant="user").jobs] == ["ann", "bob"]
    with pytest.raises(ConfigError, match="tenant must be"):
        sacct.parse_pipe(text, tenant="group")


def test_offsets_cross_a_daylight_saving_change_in_the_sites_zone():
    # Berlin skipped 02:00-03:00 on 2026-03-29: 01:30 to 03:30 local is one hour
    text = pipe(row("1", submit="2026-03-29T01:00:00", start="2026-03-29T01:30:00", end="2026-03-29T03:30:00",
                    limit="03:00:00"))
    assert sacct.parse_pipe(text, tz="Europe/Berlin").jobs[0].runtime_s == 3600
    assert sacct.parse_pipe(text, tz="UTC").jobs[0].runtime_s == 7200


def test_a_job_bigger_than_the_given_cluster_is_refused():
    with pytest.raises(ConfigError, match="could never start"):
        sacct.parse_pipe(pipe(row("1", nodes=4, tres="node=4")), shape=NodeShape(nodes=3, gpus_per_node=4))


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty"),
    ("JobID|User\n1|ann\n", "header lacks Account"),
    (f"{HEADER}\n1|ann|physics\n", "line 2: 3 fields, the header has 11"),
    (pipe(row("1"), row("2", nodes="two")), "line 3:"),
    (pipe(row("1", tres="gres/gpu=lots")), "line 2:"),
    (pipe(row("1", submit="yesterday")), "line 2:"),
])
def test_broken_pipe_output_names_its_line(text, says):
    with pytest.raises(ConfigError, match=says):
        sacct.parse_pipe(text, tz="UTC")


# ---- sacct --json, a recorded record changed field by field -------------------------------------------

def recorded_job() -> dict:
    doc = json.loads(JSON_TEXT)
    return copy.deepcopy(next(j for j in doc["jobs"] if j["time"]["start"] and j["time"]["end"]))


def doc(*jobs: dict) -> str:
    return json.dumps({"meta": json.loads(JSON_TEXT)["meta"], "jobs": list(jobs)})


def test_json_array_task_het_component_and_gpus():
    a, h = recorded_job(), recorded_job()
    a["array"].update({"job_id": 20, "task_id": {"set": True, "infinite": False, "number": 3}})
    a["tres"]["allocated"].append({"type": "gres", "name": "gpu", "id": 1001, "count": 8})
    h["het"].update({"job_id": 30, "job_offset": {"set": True, "infinite": False, "number": 1}})
    h["tres"]["allocated"].append({"type": "gres", "name": "gpu:h100", "id": 1002, "count": 4})
    t = sacct.parse_json(doc(a, h))
    assert [(j.id, j.gpus_per_node) for j in t.jobs] == [("20_3", 8 // a["allocation_nodes"]),
                                                          ("30+1", 4 // h["allocation_nodes"])]


def test_json_limits_as_22_05_and_23_02_print_them():
    new, old, unset = recorded_job(), recorded_job(), recorded_job()
    new["time"]["limit"] = {"set": True, "infinite": False, "number": 30}
    old["time"]["limit"], old["job_id"] = 30, 901
    unset["time"]["limit"], unset["job_id"] = {"set": False, "infinite": True, "number": 0}, 902
    t = sacct.parse_json(doc(new, old, unset))
    assert [j.limit_s for j in t.jobs[:2]] == [1800, 1800] and t.jobs[2].limit_s == t.jobs[2].runtime_s
    assert "1 no limit recorded, run time used as limit" in t.notes


def test_json_from_slurm_22_05_is_read_too():
    t = sacct.parse_json((FIXTURES / "slurm" / "bookworm" / "sacct.json").read_text())
    assert len(t.jobs) == 1 and t.jobs[0].tenant == "unknown" and "Slurm 22.05.8" in t.source


@pytest.mark.parametrize(("text", "says"), [
    ("not json", "not JSON"),
    ('{"meta": {}}', 'no "jobs" list'),
    ('{"jobs": [7]}', r"jobs\[0\]"),
    ('{"jobs": [{"job_id": 5, "time": {"start": "soon"}}]}', r"jobs\[0\] \(job 5\)"),
])
def test_broken_json_says_which_record(text, says):
    with pytest.raises(ConfigError, match=says):
        sacct.parse_json(text)
