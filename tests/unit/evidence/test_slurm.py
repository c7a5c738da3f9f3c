"""harness.evidence.slurm on raw evidence recorded from real jobs on the local Slurm 24.11.5 cluster.

tests/fixtures/slurm/trixie/raw/*.json are ``Collected.raw`` of four real runs (recorded by
tests/integration/test_slurm_runs.py with POC_RECORD_SLURM_RAW=DIR): a clean run, a killed rank
(the batch script requeues itself), a lost node (NODE_FAIL) and an outside ``scontrol requeue``.
Slurm 22.05's JSON (openapi v0.0.38) is read from the real bookworm sacct fixture.
"""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s
from support.paths import FIXTURES

from harness import evidence
from harness.evidence import slurm as ev
from harness.timing import Span, Stamp

FIX = FIXTURES / "slurm"
RUNS = ("clean", "kill-rank", "lose-node", "requeue", "clean-pass")
# Started by slurmctld's periodic pass, not at submit: the pass read its `now` (Start) just before a
# second boundary and allocated just after it (slurmctld.log, ms: JobId=3 "sched: Allocate" at
# 08:59:03.000 for Start 08:59:02, batch 08:59:03.022; clean-pass, JobId=5: 09:03:33.001 for Start
# 09:03:32, batch 09:03:33.253). [Start, Start + 1) would exclude the real instant.
PASS_LATE = ("lose-node", "clean-pass")
NARROWED = ("clean", "kill-rank", "requeue")


def raw(name: str) -> dict:
    return json.loads((FIX / "trixie" / "raw" / f"slurm-raw-{name}.json").read_text())


def sacct_rows(r: dict) -> list[dict]:
    return json.loads(r["sacct_json"]["text"])["jobs"]


def failed(st: dict) -> list[dict]:
    return [c for c in st["checks"] if not c["ok"]]


@pytest.mark.parametrize("name", NARROWED)
def test_allocation_is_narrowed_below_a_second_by_the_batch_clock(name):
    r = raw(name)
    st = ev.stamps(r)
    assert not failed(st), failed(st)
    rows = sacct_rows(r)
    assert len(st["attempts"]) == len(rows)            # one per sacct -D record
    for a, row in zip(st["attempts"], rows, strict=True):
        start = row["time"]["start"]
        al = a["allocated"]
        assert start <= al.lo <= al.t <= al.hi < start + 1 and al.width < 1.0, (name, a["attempt"], al)
        assert "batch script start" in al.source and "slurmctld Start" in al.source
        assert a["released"].lo >= row["time"]["end"] and a["released"].hi <= row["time"]["end"] + 1
        assert a["nodes"] and all(n in ("c1", "c2", "c3") for n in a["nodes"])
    assert st["allocated"] == st["attempts"][0]["allocated"]
    assert st["ended"] == st["attempts"][-1]["ended"] and st["released"].hi == st["ended"].hi
    assert st["admitted"] is None


# slurmctld.log's "sched: Allocate" (ms) of the pass-started attempts: the real instant, to the ms
ALLOCATE_LOG = {"lose-node": [1796288343.000, 1796288418.002], "clean-pass": [1796288613.001]}


@pytest.mark.parametrize("name", PASS_LATE)
def test_a_pass_that_crossed_a_second_is_bounded_by_the_batch_script_not_start_plus_one(name):
    r = raw(name)
    st = ev.stamps(r)
    assert not failed(st), failed(st)
    lines = [ln for ln in ev.clock_lines(r["alloc_evidence"]["text"]) if ln["kind"] == "batch_start"]
    for a, log_t, ln in zip(st["attempts"], ALLOCATE_LOG[name], lines, strict=True):
        al = a["allocated"]
        assert al.lo <= log_t <= al.hi == ln["t"], (al, log_t)    # Start + 1 would have excluded log_t
        assert "batch script start" in al.source
    assert sum("more than 1 s later" in c["detail"] for c in st["checks"]) == len(ALLOCATE_LOG[name])


@pytest.mark.parametrize("name", RUNS)
def test_submitted_is_the_harness_bracket_inside_slurmctlds_submit_second(name):
    r = raw(name)
    st = ev.stamps(r)
    sub, b = st["submitted"], r["submit"]
    first_submit = sacct_rows(r)[0]["time"]["submission"]
    assert b["before"] <= sub.lo <= sub.hi <= b["after"]
    assert first_submit <= sub.lo and sub.hi <= first_submit + 1
    assert sub.width < 0.5                              # one sbatch round trip, not a whole second
    assert any(c["what"].startswith("submitted:") and c["ok"] for c in st["checks"])
    if name in NARROWED:   # the queue time is known to well under a second now
        assert Span.between(sub, st["allocated"]).uncertainty < 0.5


def test_kill_rank_detection_is_when_the_batch_script_saw_srun_fail():
    st = ev.stamps(raw("kill-rank"))
    first, second = st["attempts"]
    det = first["detected"]
    assert "batch script saw srun fail" in det.source and det.width < 1e-5
    assert first["allocated"].hi < det.t <= first["ended"].lo + 1e-3 <= first["ended"].hi
    assert second["detected"] is None                   # the last attempt completed
    assert second["allocated"].lo >= first["released"].lo


def test_lost_node_is_detected_at_slurmctlds_end_of_the_failed_attempt():
    r = raw("lose-node")
    st = ev.stamps(r)
    rows = sacct_rows(r)
    assert rows[0]["state"]["current"] == ["NODE_FAIL"]
    det = st["attempts"][0]["detected"]
    assert det.lo == rows[0]["time"]["end"] and det.width == 1.0 and "NODE_FAIL" in det.source
    whens = [n["when"] for n in r["nodes"]]
    assert whens[:2] == ["inject", "collect"] and all(n["text"] for n in r["nodes"][:2])


def test_a_lost_nodes_attempt_ends_at_slurmctlds_end_whatever_the_batch_script_writes_after():
    """slurmctld ends a NODE_FAIL attempt; srun on the surviving head node may end only when the job is
    killed, and the batch script's srun_exit line comes after End (seen once in CI: End 1796456595,
    srun_exit 1796456596.008). That line is a consequence of End, not a bound on it: no failed check,
    and the attempt's end is slurmctld's End second."""
    r = copy.deepcopy(raw("lose-node"))
    end = sacct_rows(r)[0]["time"]["end"]
    r["alloc_evidence"]["text"] += f"srun_exit {end + 1.008:.9f} 0 c1 3 143\n"
    st = ev.stamps(r)
    assert failed(st) == []
    ended = st["attempts"][0]["ended"]
    assert (ended.lo, ended.hi) == (end, end + 1.0)


def test_outside_requeue_is_detected_at_slurmctlds_end():
    st = ev.stamps(raw("requeue"))
    det = st["attempts"][0]["detected"]
    assert det is not None and "slurmctld" in det.source


def test_a_batch_clock_before_start_is_a_failed_check_and_start_alone():
    r = raw("clean")
    start = sacct_rows(r)[0]["time"]["start"]
    r["alloc_evidence"]["text"] = f"batch_start {start - 1}.75 0 c1 {r['job_id']}\n"
    st = ev.stamps(r)
    al = st["allocated"]
    assert al.hi == start + 1 and "batch script" not in al.source
    assert any("batch script started" in c["what"] for c in failed(st))


def test_a_submit_outside_the_bracket_keeps_the_bracket_and_says_so():
    r = raw("clean")
    r["submit"]["before"] -= 10
    r["submit"]["after"] = r["submit"]["before"] + 0.05
    st = ev.stamps(r)
    assert st["submitted"].lo == r["submit"]["before"] and st["submitted"].source == ev.BRACKET_SRC
    assert any(c["what"].startswith("submitted:") for c in failed(st))


def test_without_json_the_parsable_rows_are_used_and_flagged():
    r = raw("kill-rank")
    r["sacct_json"]["text"] = "sacct: error: something"
    st = ev.stamps(r)
    assert len(st["attempts"]) == 2 and st["allocated"].width < 1
    assert any("json" in c["what"] for c in failed(st))


def test_json_and_parsable_disagreeing_is_flagged():
    r = raw("clean")
    r["sacct_parsable"]["text"] = r["sacct_parsable"]["text"].replace(
        str(sacct_rows(r)[0]["time"]["start"]), str(sacct_rows(r)[0]["time"]["start"] - 1), 1)
    assert any("agree" in c["what"] for c in failed(ev.stamps(r)))


def test_without_clock_lines_allocation_is_the_whole_second():
    r = raw("clean")
    r.pop("alloc_evidence")
    st = ev.stamps(r)
    assert st["allocated"].width <= 1.0 and st["allocated"].hi == sacct_rows(r)[0]["time"]["start"] + 1
    assert any("start line" in c["what"] for c in failed(st))


def test_slurm_22_05_json_is_read_too():
    """Real 22.05.8 sacct --json (openapi v0.0.38: plain integers, states as strings); the clock
    line and bracket are made up around its times."""
    text = (FIX / "bookworm" / "sacct.json").read_text()
    job = json.loads(text)["jobs"][0]
    t = job["time"]
    r = {"job_id": str(job["job_id"]), "sacct_json": {"text": text},
         "sacct_parsable": {"text": (FIX / "bookworm" / "sacct_D_X_P.txt").read_text()},
         "alloc_evidence": {"text": f"batch_start {t['start']}.300000000 0 c1 {job['job_id']}\n"},
         "submit": {"before": t["submission"] + 0.2, "after": t["submission"] + 0.25}}
    st = ev.stamps(r)
    assert not failed(st), failed(st)
    assert st["allocated"].lo == t["submission"] + 0.2 and st["allocated"].hi == pytest.approx(t["start"] + 0.3)
    assert st["ended"].lo == t["end"] and st["attempts"][0]["nodes"] == ["c1", "c2"]


def test_stamps_survive_the_json_round_trip_and_the_dispatcher():
    st = evidence.stamps("slurm", raw("kill-rank"))
    back = evidence.from_json(json.loads(json.dumps(evidence.to_json(st))))
    assert back == st
    assert isinstance(back["attempts"][0]["detected"], Stamp)


@pytest.mark.parametrize("text,want", [
    ("c[1-3,5],gpu-[01-02]", ["c1", "c2", "c3", "c5", "gpu-01", "gpu-02"]),
    ("c1", ["c1"]), ("", []), ("None assigned", ["None assigned"]), ("c[x]", ["c[x]"]),
])
def test_expand_hostlist(text, want):
    assert ev.expand_hostlist(text) == want


def test_clock_lines_skip_what_they_cannot_read():
    text = "batch_start 12.5 0 c1 7\nbatch_start nan 0 c1 7\nsrun_exit 13 x c1 7 0\njunk\nrequeue 14 0 c1 7 -9\n"
    assert [(ln["kind"], ln["t"], ln["rc"]) for ln in ev.clock_lines(text)] == [
        ("batch_start", 12.5, None), ("requeue", 14.0, -9)]


# ---------------------------------------------------------------- never raises

fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
json_values = s.recursive(s.none() | s.booleans() | s.integers() | s.floats() | s.text(max_size=30),
                          lambda kids: s.lists(kids, max_size=4) | s.dictionaries(s.text(max_size=12), kids,
                                                                                   max_size=5), max_leaves=25)


def well_formed(st: dict) -> None:
    assert set(st) == {"submitted", "admitted", "allocated", "ended", "released", "attempts", "checks"}
    for k in ("submitted", "allocated", "ended", "released"):
        assert st[k] is None or isinstance(st[k], Stamp)
    for a in st["attempts"]:
        assert set(a) == {"attempt", "allocated", "detected", "ended", "released", "nodes"}


@fast
@given(json_values)
def test_arbitrary_raw_never_raises(v):
    well_formed(ev.stamps(v))
    if isinstance(v, dict):
        well_formed(ev.stamps({"sacct_json": v, "sacct_parsable": v, "submit": v, "alloc_evidence": v}))


@fast
@given(s.sampled_from(RUNS), s.sampled_from(["sacct_json", "sacct_parsable", "alloc_evidence", "submit", "squeue",
                                             "job_id"]), json_values)
def test_a_real_raw_with_one_field_replaced_never_raises(name, key, value):
    r = copy.deepcopy(raw(name))
    r[key] = value
    well_formed(ev.stamps(r))


@fast
@given(s.sampled_from(RUNS), s.integers(0, 10_000), s.text(max_size=40))
def test_a_real_clock_file_spliced_with_junk_never_raises(name, at, junk):
    r = copy.deepcopy(raw(name))
    t = r["alloc_evidence"]["text"]
    r["alloc_evidence"]["text"] = t[:at % (len(t) + 1)] + junk + t[at % (len(t) + 1):]
    well_formed(ev.stamps(r))


def test_the_step_request_is_stamped_where_the_batch_script_wrote_it_and_launch_measures_from_it():
    """srun_start: the batch script's instant before srun; the step's launch (a container runtime's image
    import inside it) runs from there to every rank's first event. A clock file from before has none."""
    from harness.metrics.timing import startup
    r = raw("clean")
    assert "step_requested" not in ev.stamps(r)["attempts"][0]           # recorded before it was written
    b = next(ln for ln in ev.clock_lines(r["alloc_evidence"]["text"]) if ln["kind"] == "batch_start")
    r["alloc_evidence"]["text"] += f"srun_start {b['t'] + 0.5:.9f} 0 {b['host']} {b['job']}\n"
    st = ev.stamps(r)
    step = st["attempts"][0]["step_requested"]
    assert step.t == pytest.approx(b["t"] + 0.5) and step.width < 1e-5 and "before srun" in step.source
    events = [{"kind": "process_start", "ts_ns": int((b["t"] + 2.0) * 1e9), "rank": k, "attempt": [0, 0, 0]}
              for k in range(2)]
    m, _ = startup(events, st, 2)
    assert m["step_launch_s"]["value"] == pytest.approx(1.5, abs=1e-3)
    assert "step_launch_s" not in startup(events, ev.stamps(raw("clean")), 2)[0]
