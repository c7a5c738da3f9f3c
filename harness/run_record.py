"""The run record's envelope, the same for every writer (the pipeline's training runs and the runners
that make their own record, such as the user-experience probe): the fields every record starts
with, the error fields of a run that did not end ok, the cancel of what it submitted, and the
writing of its evidence, artifacts and line. The record is a store.RunRecord: its fields, and the
schema version the store writes with it, are in harness/store/record.py.

Who failed is part of the record: the platform (a PocError it reported), the user (Ctrl-C), or
the harness itself (any other exception: a bug here, never counted against the platform).
"""
from __future__ import annotations

import traceback

from . import footprint
from .backends.base import Backend, Handle
from .config import Config
from .errors import PocError
from .store import RunRecord, Store


def start(cfg: Config, platform: str, run_id: str, scenario: str, started_at: float,
          stages: list[dict] | None = None) -> RunRecord:
    """A new record: failed until the run says otherwise."""
    return RunRecord(run_id=run_id, campaign=cfg.campaign, platform=platform, scenario=scenario,
                     config_hash=cfg.config_hash(), started_at=started_at, status="failed",
                     stages=[] if stages is None else stages)


def fail(record: RunRecord, stage: str, err: BaseException) -> bool:
    """Fill the record's status and error for ``err`` raised in ``stage``; True when the user interrupted."""
    if isinstance(err, KeyboardInterrupt):
        record.status = "interrupted"
        record.error = {"stage": stage, "type": "KeyboardInterrupt", "origin": "user", "message": "interrupted"}
        return True
    record.error = {"stage": stage, "type": type(err).__name__, "origin": "platform",
                    "message": getattr(err, "message", str(err)), "tip": getattr(err, "tip", None)}
    if not isinstance(err, PocError):
        # not a failure the platform reported: the harness itself raised (a bug to fix here),
        # so the report must not count it against the platform
        record.status = "harness_error"
        record.error["origin"] = "harness"
        record.error["message"] = str(err)[:500]
        record.error["traceback"] = "".join(traceback.format_exception(err))[-4000:]
    return False


def cancel(backend: Backend, store: Store, handles: list[Handle | None], record: RunRecord) -> dict:
    """Cancel every handle; each cancelled one leaves the in-flight journal, one that failed stays in
    it for --resume and `poc cleanup`. Returns the calls the cancels made."""
    before = backend.call_counts()
    for h in handles:
        if h is None:
            continue
        try:
            backend.cancel(h)
            store.clear_inflight(h.run_id)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the inflight file stays for --resume
            record.cancel_error = str(exc)[:500]
    return footprint.diff(before, backend.call_counts())


def write(store: Store, record: RunRecord, raw: dict, files: dict[str, str]) -> dict:
    """The run's raw evidence, its artifacts, then its line in runs.jsonl (last: a line means a whole run).
    Returns the line's dict, as every reader of the store gets it."""
    record.raw_evidence = store.write_raw(record.run_id, raw)
    store.write_artifacts(record.run_id, files)
    store.append(record)
    return record.to_json()
