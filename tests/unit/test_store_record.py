"""The typed run record (harness/store/record.py): every committed line reads into it and is written back
byte for byte, a malformed record is refused naming the field, the store writes the schema version
first, and the user-experience probe stores the scenario its plan gives it ("mistake:<kind>")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import rederive, run_record
from harness.backends.base import Backend, Collected, Handle, Observation, Rendered
from harness.config import from_mapping
from harness.errors import BackendError, StoreError
from harness.states import JobState
from harness.store import SCHEMA_VERSION, RunRecord, Store, load_results, read_runs
from harness.store.record import REQUIRED
from harness.ux import probe

RESULTS = Path(__file__).resolve().parents[2] / "results"
COMMITTED = sorted(RESULTS.glob("**/runs.jsonl"))
CFG = from_mapping({"platforms": ["local"], "repetitions": 1, "faults": []})


def _start(**over) -> dict:
    return {**run_record.start(CFG, "local", "local-clean-01", "clean", 5.0).to_json(), **over}


def test_there_are_committed_records_to_read():
    assert len(COMMITTED) >= 5
    assert sum(1 for f in COMMITTED for line in f.read_bytes().splitlines() if line.strip()) >= 100


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(RESULTS).parent))
def test_every_committed_line_reads_and_writes_back_byte_for_byte(path):
    lines = [line for line in path.read_bytes().splitlines(keepends=True) if line.strip()]
    assert lines
    for line in lines:
        rec = RunRecord.from_json(json.loads(line))
        assert rec.to_line() == line, rec.run_id
        assert rec.extra == {}, f"{rec.run_id}: fields RunRecord does not name: {sorted(rec.extra)}"


def test_the_record_names_every_key_the_writers_put_in_it():
    # every committed key is a field (not left to extra); the typed fields each say what they hold
    keys = {k for f in COMMITTED for line in f.read_text().splitlines() if line.strip() for k in json.loads(line)}
    assert keys - {"schema"} <= set(RunRecord.__dataclass_fields__) - {"extra", "schema"}
    assert REQUIRED == ("run_id", "campaign", "platform", "scenario", "config_hash", "started_at", "status",
                        "stages")


def test_a_new_record_is_todays_dict_in_the_order_it_was_filled():
    rec = run_record.start(CFG, "local", "local-clean-01", "clean", 5.0)
    rec.job_ids = ["42"]
    rec.metrics = {}
    rec.ux = {"calls": {}}
    rec.finished_at = 9
    assert list(rec.to_json()) == ["schema", "run_id", "campaign", "platform", "scenario", "config_hash",
                                   "started_at", "status", "stages", "job_ids", "metrics", "ux", "finished_at"]
    assert rec.to_json()["finished_at"] == 9        # an int stays an int: the bytes are the writer's
    rec.ux = None                                    # an optional field set back to None is absent again
    assert "ux" not in rec.to_json() and "error" not in rec.to_json()


@pytest.mark.parametrize("field", REQUIRED)
def test_a_record_missing_a_required_field_is_refused_naming_it(field):
    data = _start()
    del data[field]
    with pytest.raises(StoreError, match=f"lacks {field}"):
        RunRecord.from_json(data)


@pytest.mark.parametrize("field,value,said", [
    ("started_at", "yesterday", "'started_at' must be a number, not str"),
    ("started_at", True, "'started_at' must be a number, not bool"),
    ("stages", {}, "'stages' must be a list, not dict"),
    ("run_id", None, "'run_id' must be a string, not NoneType"),
    ("metrics", [1, 2], "'metrics' must be an object, not list"),
    ("finished_at", "late", "'finished_at' must be a number, not str"),
    ("status", "done", "'status' must be one of ok, failed, interrupted, harness_error, not 'done'"),
])
def test_a_field_of_the_wrong_type_is_refused_naming_it(field, value, said):
    with pytest.raises(StoreError) as refused:
        RunRecord.from_json(_start(**{field: value}))
    assert said in refused.value.message and refused.value.tip
    rec = run_record.start(CFG, "local", "local-clean-01", "clean", 5.0)
    with pytest.raises(TypeError) as wrong:   # a writer's mistake fails where it is made
        setattr(rec, field, value)
    assert said in str(wrong.value)


def test_a_line_from_before_the_schema_version_reads_as_version_1_and_unknown_keys_are_kept():
    data = _start(later_field={"x": 1}, status="ok")
    del data["schema"]
    data["finished_at"] = 6.0
    rec = RunRecord.from_json(data)
    assert rec.schema == 1 and rec.extra == {"later_field": {"x": 1}}
    assert rec.to_json() == {"schema": 1, **data} and list(rec.to_json())[1:] == list(data)


def test_a_line_of_another_schema_or_no_object_is_refused():
    with pytest.raises(StoreError, match="schema 2; this harness reads 1"):
        RunRecord.from_json(_start(schema=2))
    with pytest.raises(StoreError, match="JSON object, not list"):
        RunRecord.from_json([1])


def test_the_store_writes_the_schema_version_first(tmp_path):
    store = Store(tmp_path, CFG.campaign)
    store.open(CFG.config_hash(), CFG.redacted(), resume=False)
    try:
        rec = run_record.start(CFG, "local", "local-clean-01", "clean", 5.0)
        rec.finished_at = 6.0
        run_record.fail(rec, "submit", BackendError("quota", tip="ask for less"))
        store.append(rec)
        line = store.runs_path.read_bytes()
        assert line == rec.to_line() and line.startswith(b'{"schema":%d,"run_id":"local-clean-01"' % SCHEMA_VERSION)
        assert read_runs(store.runs_path)[0]["error"]["tip"] == "ask for less"
        assert SCHEMA_VERSION == 1
    finally:
        store.close()


def test_the_store_refuses_a_malformed_dict_before_writing_anything(tmp_path):
    store = Store(tmp_path, CFG.campaign)
    store.open(CFG.config_hash(), CFG.redacted(), resume=False)
    try:
        with pytest.raises(StoreError, match="lacks campaign"):
            store.append({"run_id": "r1", "status": "ok"})
        assert not store.runs_path.exists() or store.runs_path.read_bytes() == b""
        store.append(_start(status="ok"))   # a whole record as a dict (read back from elsewhere) is written
        assert [r["run_id"] for r in store.runs()] == ["local-clean-01"]
    finally:
        store.close()


class _Refusing(Backend):
    """A platform that refuses the probe's job at submit: the probe's record, with no cluster."""
    platform = "k8s"

    def render(self, spec):
        return Rendered("k8s", {"jobset.yaml": "kind: JobSet\n"})

    def preflight(self):
        return {}

    def submit(self, spec, rendered):
        raise BackendError("LocalQueue poc-queue-typo doesn't exist")

    def observe(self, handles):
        return {h.run_id: Observation(JobState.PENDING) for h in handles}

    def user_view(self, handle: Handle):
        return []

    def call_counts(self):
        return {}

    def inject(self, *a, **k):
        raise AssertionError("no faults in a probe")

    def collect(self, handle):
        return Collected([], {}, [], logs={}, raw={})

    def cancel(self, handle):
        pass


def test_the_probe_stores_the_scenario_its_plan_gives_and_rederive_reads_it(tmp_path):
    cfg = from_mapping({"campaign": "ux", "platforms": ["slurm", "k8s"], "faults": [],
                        "ux": {"mistakes": ["wrong_queue"]}})
    store = Store(tmp_path, cfg.campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    try:
        rec = probe.run(cfg, "k8s", "k8s-mistake-wrong-queue", "wrong_queue", store, lambda p, c: _Refusing(),
                        clock=lambda: 1000.0, sleep=lambda s: None)
    finally:
        store.close()
    [stored] = load_results(tmp_path)
    assert rec["scenario"] == stored["scenario"] == "mistake:wrong_queue"
    assert stored["status"] == "ok" and stored["mistake"]["clear"] and stored["mistake"]["at_submit"]
    [c] = rederive.check(tmp_path)     # checked as a probe (its messages), not as a training run
    assert c.checked == ["k8s-mistake-wrong-queue"] and c.findings == []
