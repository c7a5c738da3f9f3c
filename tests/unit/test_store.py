import pytest

from harness.errors import StoreError
from harness.store import SCHEMA_VERSION, Store, load_results, read_runs


def test_append_and_read(tmp_path):
    s = Store(tmp_path, "c1")
    assert s.open("h1", {"a": 1}, resume=False) == []
    s.append({"run_id": "r1", "status": "ok"})
    s.append({"run_id": "r2", "status": "failed"})
    recs = s.runs()
    assert [r["run_id"] for r in recs] == ["r1", "r2"]
    assert all(r["schema"] == SCHEMA_VERSION for r in recs)
    s.close()


def test_torn_last_line_is_ignored(tmp_path):
    s = Store(tmp_path, "c1")
    s.open("h", {}, resume=False)
    s.append({"run_id": "r1", "status": "ok"})
    with open(s.runs_path, "a") as fh:
        fh.write('{"schema": 1, "run_id": "r2", "sta')  # a crash mid-write
    assert [r["run_id"] for r in read_runs(s.runs_path)] == ["r1"]
    s.close()


def test_corrupt_middle_line_is_an_error(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_text('{"schema":1,"run_id":"a"}\nnot json\n{"schema":1,"run_id":"b"}\n')
    with pytest.raises(StoreError):
        read_runs(p)


def test_resume_rules(tmp_path):
    s = Store(tmp_path, "c1")
    s.open("h1", {}, resume=False)
    s.append({"run_id": "r1", "status": "ok"})
    s.close()
    with pytest.raises(StoreError, match="already holds 1 runs") as ei:
        Store(tmp_path, "c1").open("h1", {}, resume=False)
    assert "--resume" in ei.value.tip
    with pytest.raises(StoreError, match="another config"):
        Store(tmp_path, "c1").open("h2", {}, resume=True)
    s2 = Store(tmp_path, "c1")
    assert [r["run_id"] for r in s2.open("h1", {}, resume=True)] == ["r1"]
    s2.close()


def test_one_writer_at_a_time(tmp_path):
    a = Store(tmp_path, "c1")
    a.open("h", {}, resume=False)
    with pytest.raises(StoreError, match="in use"):
        Store(tmp_path, "c1").open("h", {}, resume=True)
    a.close()


def test_artifacts_swap_in_whole(tmp_path):
    s = Store(tmp_path, "c1")
    d = s.write_artifacts("r1", {"events.jsonl": "x\n", "rendered/job.sh": "#!/bin/sh\n"})
    assert (d / "rendered" / "job.sh").read_text() == "#!/bin/sh\n"
    s.write_artifacts("r1", {"events.jsonl": "y\n"})
    assert not (d / "rendered").exists() and (d / "events.jsonl").read_text() == "y\n"
    assert not [p for p in d.parent.iterdir() if p.name.startswith(".")]


def test_inflight_handles(tmp_path):
    s = Store(tmp_path, "c1")
    s.open("h", {}, resume=False)
    s.mark_inflight({"run_id": "r1", "platform": "slurm", "ids": ["42"], "submitted_at": 1.0})
    assert s.inflight()[0]["ids"] == ["42"]
    s.append({"run_id": "r1", "status": "ok"})
    assert [h["run_id"] for h in s.inflight()] == ["r1"], "a record does not clear its handle: a cancel does"
    s.clear_inflight("r1")
    assert s.inflight() == []
    s.close()


def test_load_results_finds_campaigns(tmp_path):
    for c in ("a", "b"):
        s = Store(tmp_path, c)
        s.open("h", {}, resume=False)
        s.append({"run_id": f"{c}-1", "status": "ok", "campaign": c})
        s.close()
    assert sorted(r["run_id"] for r in load_results(tmp_path)) == ["a-1", "b-1"]
    assert [r["run_id"] for r in load_results(tmp_path / "a")] == ["a-1"]
    with pytest.raises(StoreError, match="does not exist"):
        load_results(tmp_path / "nope")


def test_interrupted_campaign_keeps_finished_runs_and_resumes(tmp_path):
    """A campaign killed between runs: the finished run is kept, resume runs only the rest."""
    from fakes import ScriptedBackend

    from harness.config import from_mapping
    from harness.pipeline import campaign

    cfg = from_mapping({"repetitions": 2, "faults": [], "workload": {"steps": 2}})
    backend = ScriptedBackend(interrupt_on="local-clean-02")
    with pytest.raises(KeyboardInterrupt):
        campaign(cfg, ["local"], Store(tmp_path, "smoke"), lambda p: backend, resume=False, poll_s=0.01)
    recs = read_runs(tmp_path / "smoke" / "runs.jsonl")
    assert [(r["run_id"], r["status"]) for r in recs] == [("local-clean-01", "ok"), ("local-clean-02", "interrupted")]
    assert backend.cancelled == ["local-clean-01", "local-clean-02"]  # cancel runs in every case
    backend2 = ScriptedBackend()
    out = campaign(cfg, ["local"], Store(tmp_path, "smoke"), lambda p: backend2, resume=True, poll_s=0.01)
    assert [r["run_id"] for r in out] == ["local-clean-02"]
