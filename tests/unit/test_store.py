import json

import pytest
from support.fakes import record

from harness.errors import StoreError
from harness.store import SCHEMA_VERSION, Store, load_results, read_runs


def test_append_and_read(tmp_path):
    s = Store(tmp_path, "c1")
    assert s.open("h1", {"a": 1}, resume=False) == []
    s.append(record("r1"))
    s.append(record("r2", "failed"))
    recs = s.runs()
    assert [r["run_id"] for r in recs] == ["r1", "r2"]
    assert all(r["schema"] == SCHEMA_VERSION for r in recs)
    s.close()


def test_torn_last_line_is_ignored(tmp_path):
    s = Store(tmp_path, "c1")
    s.open("h", {}, resume=False)
    s.append(record("r1"))
    with open(s.runs_path, "a") as fh:
        fh.write('{"schema": 1, "run_id": "r2", "sta')  # a crash mid-write
    assert [r["run_id"] for r in read_runs(s.runs_path)] == ["r1"]
    s.close()


def test_a_line_that_is_not_json_is_skipped_and_reported(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_text('{"schema":1,"run_id":"a"}\nnot json\n[1]\n{"schema":1,"run_id":"b"}\n')
    skipped = []
    assert [r["run_id"] for r in read_runs(p, skipped.append)] == ["a", "b"]
    assert [n.split(": ")[1] for n in skipped] == ["line 2 is not a JSON record (9 bytes, a torn write?)",
                                                  "line 3 is not a JSON record (4 bytes, a torn write?)"]


def test_a_record_of_another_schema_is_still_an_error(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_text('{"schema":1,"run_id":"a"}\n{"schema":99,"run_id":"b"}\n')
    with pytest.raises(StoreError, match="schema 99"):
        read_runs(p)


def test_resume_rules(tmp_path):
    s = Store(tmp_path, "c1")
    s.open("h1", {}, resume=False)
    s.append(record("r1"))
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
    s.append(record("r1"))
    assert [h["run_id"] for h in s.inflight()] == ["r1"], "a record does not clear its handle: a cancel does"
    s.clear_inflight("r1")
    assert s.inflight() == []
    s.close()


def test_load_results_finds_campaigns(tmp_path):
    for c in ("a", "b"):
        s = Store(tmp_path, c)
        s.open("h", {}, resume=False)
        s.append(record(f"{c}-1", campaign=c))
        s.close()
    assert sorted(r["run_id"] for r in load_results(tmp_path)) == ["a-1", "b-1"]
    assert [r["run_id"] for r in load_results(tmp_path / "a")] == ["a-1"]
    with pytest.raises(StoreError, match="does not exist"):
        load_results(tmp_path / "nope")


def test_interrupted_campaign_keeps_finished_runs_and_resumes(tmp_path):
    """A campaign killed between runs: the finished run is kept, resume runs only the rest."""
    from support.fakes import ScriptedBackend

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


# -- raw evidence (runs/<run_id>/raw.json.gz) ---------------------------------------------------------------------

def test_raw_evidence_is_redacted_deterministic_and_read_back(tmp_path):
    import gzip

    from harness.store import load_raw

    s = Store(tmp_path, "c1")
    raw = {"submit": {"before": 1.5, "after": 1.75}, "pods": [{"spec": {"containers": [
        {"env": [{"name": "HF_TOKEN", "value": "hf_planted"}]}]}}], "b": 1, "a": 2}
    summary = s.write_raw("r1", raw)
    path = s.run_dir("r1") / "raw.json.gz"
    blob = path.read_bytes()
    assert summary == {"removed": 1, "by_rule": {"env": 1}}
    assert b"hf_planted" not in gzip.decompress(blob)
    assert blob[4:8] == b"\0\0\0\0"  # gzip mtime 0: same evidence, same bytes
    assert gzip.decompress(blob).startswith(b'{"a":2,"b":1,')  # sorted keys
    back = load_raw(s.run_dir("r1"))
    assert back["submit"] == {"before": 1.5, "after": 1.75}
    assert back["pods"][0]["spec"]["containers"][0]["env"][0]["value"] == "<redacted>"
    s.write_raw("r1", raw)
    assert path.read_bytes() == blob
    assert load_raw(tmp_path / "nowhere") == {}


def test_raw_evidence_survives_the_run_dir_swap_in_either_order(tmp_path):
    from harness.store import load_raw

    s = Store(tmp_path, "c1")
    s.write_raw("before", {"x": 1})                 # raw first, then the run's other files
    s.write_artifacts("before", {"events.jsonl": "e\n"})
    s.write_artifacts("after", {"events.jsonl": "e\n"})
    s.write_raw("after", {"x": 2})                  # the other order
    assert load_raw(s.run_dir("before")) == {"x": 1} and load_raw(s.run_dir("after")) == {"x": 2}
    assert (s.run_dir("before") / "events.jsonl").read_text() == "e\n"
    # a run dir left by an earlier process (a failed run re-run by --resume) keeps no stale evidence
    s2 = Store(tmp_path, "c1")
    s2.write_artifacts("before", {"events.jsonl": "again\n"})
    assert load_raw(s2.run_dir("before")) == {}


def test_damaged_raw_evidence_is_a_store_error(tmp_path):
    from harness.store import load_raw

    d = tmp_path / "r"
    d.mkdir()
    (d / "raw.json.gz").write_bytes(b"not gzip")
    with pytest.raises(StoreError, match=r"raw\.json\.gz: not readable"):
        load_raw(d)


def test_events_are_read_plain_or_compressed(tmp_path):
    import gzip

    from harness.store import load_events

    line = '{"kind":"step","ts_ns":5,"rank":0,"step":1}\n'
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "events.jsonl").write_text(line)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "events.jsonl.gz").write_bytes(gzip.compress(line.encode()))
    assert load_events(tmp_path / "a") == load_events(tmp_path / "b") != []
    assert load_events(tmp_path / "c") is None


# -- every write cleaned (harness/redact.py) -------------------------------------------------------------------------

def test_every_write_takes_secrets_and_this_machine_out(tmp_path):
    """campaign.json, a record (its error's message, tip and traceback too), every artifact and the raw evidence:
    secrets replaced, this machine's paths and host name as placeholders; the results directory is $RESULTS
    everywhere but in the raw evidence, which is cleaned exactly as the pipeline cleaned it before deriving."""
    import gzip

    from harness.redact_machine import Machine
    from harness.store import load_raw

    m = Machine((("/home/alice", "$HOME"), ("/home/alice/.local/state/k8s-slurm-poc", "$STATE_DIR")), ("alice-ws",))
    s = Store(tmp_path, "c1", machine=m)
    token = "ghp_" + "Ab1" * 12
    s.open("h", {"fabric": {"env": {"NCCL_SOCKET_IFNAME": "eth0", "WANDB_API_KEY": "0123abcd" * 5}},
                 "kubernetes": {"checkpoint_host_path": "/home/alice/.local/state/k8s-slurm-poc/k8s-native/ckpt"}},
           resume=False)
    meta = json.loads((s.root / "campaign.json").read_text())
    assert meta["config"] == {"fabric": {"env": {"NCCL_SOCKET_IFNAME": "eth0", "WANDB_API_KEY": "<redacted>"}},
                              "kubernetes": {"checkpoint_host_path": "$STATE_DIR/k8s-native/ckpt"}}
    s.append(record("r1", "failed", error={"stage": "submit", "message": f"push with {token} refused",
                                           "tip": f"see {tmp_path}/c1/runs/r1/logs", "traceback": f"x {token}"},
                    environment={"harness_host": "alice-ws", "hostname": "alice-ws"},
                    raw_evidence={"removed": 2, "by_rule": {"secret_key": 2}}))
    line = s.runs_path.read_text()
    rec = json.loads(line)
    assert token not in line and rec["error"]["message"] == "push with <redacted> refused"
    assert rec["error"]["tip"] == "see $RESULTS/c1/runs/r1/logs" and rec["environment"]["harness_host"] == "$HOST"
    assert rec["raw_evidence"] == {"removed": 2, "by_rule": {"secret_key": 2}}   # the harness's own counts, kept
    s.write_artifacts("r1", {"logs/w-0.log": f"login as alice-ws with {token}\n",
                             "events.jsonl": json.dumps({"kind": "note", "host": "alice-ws", "tokens_per_step": 512,
                                                         "text": f"Bearer {token}"}) + "\n",
                             "rendered/job.sbatch": b"#SBATCH --chdir=/home/alice/poc\nexport HF_TOKEN=hf_x\n"})
    run = s.run_dir("r1")
    assert (run / "logs" / "w-0.log").read_text() == "login as $HOST with <redacted>\n"
    assert json.loads((run / "events.jsonl").read_text()) == {"kind": "note", "host": "$HOST",
                                                             "tokens_per_step": 512, "text": "Bearer <redacted>"}
    assert (run / "rendered" / "job.sbatch").read_bytes() == b"#SBATCH --chdir=$HOME/poc\nexport HF_TOKEN=<redacted>\n"
    summary = s.write_raw("r1", {"pod": {"hostPath": "/home/alice/x", "node": "alice-ws", "token": token},
                                 "results": f"{tmp_path}/c1"})
    assert summary == {"removed": 1, "by_rule": {"secret_key": 1},
                       "placeholders": {"host_name": 1, "machine_path": 1}}
    assert load_raw(run) == {"pod": {"hostPath": "$HOME/x", "node": "$HOST", "token": "<redacted>"},
                             "results": f"{tmp_path}/c1"}
    assert token.encode() not in gzip.decompress((run / "raw.json.gz").read_bytes())
    s.close()
