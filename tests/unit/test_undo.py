"""`poc cleanup`: the in-flight handles of an interrupted campaign are cancelled (which undoes their
faults' changes) without resuming it; a cancel that fails keeps its handle for the next try."""
from __future__ import annotations

import pytest
from support.fakes import ScriptedBackend

from harness import config
from harness.backends.base import Handle
from harness.cli import main
from harness.errors import BackendError, StoreError
from harness.store import Store
from harness.undo import undo_inflight


def campaign_with_inflight(tmp_path, *handles: Handle) -> Store:
    cfg = config.from_mapping({"campaign": "camp"})
    store = Store(tmp_path, "camp")
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    for h in handles:
        store.mark_inflight(h.to_json())
    store.close()
    return store


class Cancelling(ScriptedBackend):
    def __init__(self, fail_on=()):
        super().__init__()
        self.fail_on, self.closed = set(fail_on), False

    def cancel(self, handle):
        if handle.run_id in self.fail_on:
            raise BackendError(f"node c2 of {handle.run_id} is not back")
        super().cancel(handle)
        assert handle.data.get("lost_nodes") == ["c2"]   # the handle as the fault journalled it

    def close(self):
        self.closed = True


def test_cleanup_cancels_every_inflight_run_and_keeps_those_that_fail(tmp_path):
    lost = {"lost_nodes": ["c2"]}
    store = campaign_with_inflight(tmp_path, Handle("slurm", "slurm-lose-node-01", ["7"], 1.0, dict(lost)),
                                   Handle("slurm", "slurm-clean-01", ["8"], 1.0, dict(lost)))
    be = Cancelling(fail_on={"slurm-clean-01"})
    done, failed = undo_inflight(store, lambda p: be)
    assert [h["run_id"] for h in done] == ["slurm-lose-node-01"] and be.cancelled == ["slurm-lose-node-01"]
    assert [(h["run_id"], h["error"]) for h in failed] == [("slurm-clean-01", "node c2 of slurm-clean-01 is not back")]
    assert [h["run_id"] for h in store.inflight()] == ["slurm-clean-01"] and be.closed
    assert store.runs() == []          # nothing was run: the campaign is not resumed


def test_cleanup_refuses_a_campaign_in_use_or_missing(tmp_path):
    store = campaign_with_inflight(tmp_path, Handle("k8s", "k8s-clean-01", ["poc/x"], 1.0, {}))
    cfg = config.from_mapping({"campaign": "camp"})
    store.open(cfg.config_hash(), cfg.redacted(), resume=True)   # a campaign still running holds the lock
    try:
        with pytest.raises(StoreError, match="in use by another poc process"):
            undo_inflight(Store(tmp_path, "camp"), lambda p: pytest.fail("no backend for a locked campaign"))
    finally:
        store.close()
    with pytest.raises(StoreError, match="no campaign at"):
        undo_inflight(Store(tmp_path, "other"), lambda p: pytest.fail("no backend"))


def test_poc_cleanup_with_nothing_in_flight(tmp_path, capsys):
    campaign_with_inflight(tmp_path)
    assert main(["cleanup", "--results", str(tmp_path), "--campaign", "camp"]) == 0
    cap = capsys.readouterr()
    assert "nothing in flight" in cap.err + cap.out
    assert main(["cleanup", "--results", str(tmp_path), "--campaign", "none"]) == 1
