"""The run record's envelope (harness/run_record.py) that the pipeline and the probes both write through."""
from __future__ import annotations

from support.fakes import ScriptedBackend

from harness import run_record
from harness.backends.base import Handle
from harness.config import from_mapping
from harness.errors import BackendError
from harness.store import SCHEMA_VERSION, Store

CFG = from_mapping({"platforms": ["local"], "repetitions": 1, "faults": []})


def test_a_record_starts_failed_with_the_runs_identity():
    rec = run_record.start(CFG, "local", "local-clean-01", "clean", 5.0)
    assert rec.to_json() == {"schema": SCHEMA_VERSION, "run_id": "local-clean-01", "campaign": CFG.campaign,
                             "platform": "local", "scenario": "clean", "config_hash": CFG.config_hash(),
                             "started_at": 5.0, "status": "failed", "stages": []}


def test_who_failed_is_in_the_record():
    rec = run_record.start(CFG, "local", "r", "clean", 0.0)
    assert run_record.fail(rec, "submit", BackendError("quota", tip="ask for less")) is False
    assert rec.status == "failed" and rec.error == {"stage": "submit", "type": "BackendError",
                                                    "origin": "platform", "message": "quota",
                                                    "tip": "ask for less"}
    rec = run_record.start(CFG, "local", "r", "clean", 0.0)
    assert run_record.fail(rec, "queue", KeyError("state")) is False
    assert rec.status == "harness_error" and rec.error["origin"] == "harness"
    assert "KeyError" in rec.error["traceback"]
    rec = run_record.start(CFG, "local", "r", "clean", 0.0)
    assert run_record.fail(rec, "run", KeyboardInterrupt()) is True
    assert rec.status == "interrupted" and rec.error["origin"] == "user"


def test_a_cancel_that_fails_keeps_the_run_in_the_journal(tmp_path):
    class CannotCancel(ScriptedBackend):
        def cancel(self, handle):
            if handle.run_id == "b":
                raise BackendError("API server unreachable")
            super().cancel(handle)
    store = Store(tmp_path, CFG.campaign)
    store.open(CFG.config_hash(), CFG.redacted(), resume=False)
    try:
        a, b = Handle("local", "a", ["1"], 0.0), Handle("local", "b", ["2"], 0.0)
        for h in (a, b):
            store.mark_inflight(h.to_json())
        rec, be = run_record.start(CFG, "local", "a", "clean", 0.0), CannotCancel()
        run_record.cancel(be, store, [a, None, b], rec)
        assert be.cancelled == ["a"] and [h["run_id"] for h in store.inflight()] == ["b"]
        assert rec.cancel_error == "API server unreachable"
    finally:
        store.close()
