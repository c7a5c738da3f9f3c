"""checkpoint_save_s and checkpoint_load_s (harness/metrics/checkpoint.py): from a committed smoke run's events
(written before the workload recorded sizes and file systems), and from events shaped as today's workload
emits them, with bytes and fs."""
from __future__ import annotations

import pytest
from support.paths import RESULTS

from harness import metrics
from harness.metrics.checkpoint import checkpoint
from harness.store import load_events, load_results

CAMPAIGN = RESULTS / "smoke-2026-12-05"


def _run(run_id: str) -> tuple[list[dict], dict]:
    rec = next(r for r in load_results(CAMPAIGN) if r["run_id"] == run_id)
    return load_events(CAMPAIGN / "smoke-poc" / "runs" / run_id), rec


def test_a_committed_restart_saves_and_loads_and_the_load_lies_inside_recovery_checkpoint_load_s():
    events, rec = _run("k8s-kill-rank-01")
    m, _ = metrics.derive(events, rec["scheduler"]["stamps"], **rec["derive_inputs"], faults=rec["faults"])
    saved = [e for e in events if e["kind"] == "checkpoint_saved"]
    # rank 0 saved at steps 10 (attempt 0), 20 and 30 (attempt 1, after the restart)
    assert [(e["step"], e["attempt"][0]) for e in saved] == [(10, 0), (20, 1), (30, 1)]
    s = m["checkpoint_save_s"]
    assert s["value"] == pytest.approx(sorted(e["save_s"] for e in saved)[1], abs=1e-9)   # the median of 3
    assert s["detail"]["n"] == 3 and s["detail"]["max_s"] == max(e["save_s"] for e in saved)
    # events of 2026-12-05 carry no size nor file system: nothing invented
    assert s["detail"]["bytes"] is None and s["detail"]["fs"] is None and s["detail"]["gbps"] is None
    assert s["sources"] == {"first_save": saved[0]["ts_ns"] / 1e9, "last_save": saved[-1]["ts_ns"] / 1e9}
    # the restart: both ranks read ckpt-10.pt; the figure is the slower read
    read = [e for e in events if e["kind"] == "checkpoint_loaded" and e["path"]]
    assert {(e["rank"], e["step"], tuple(e["attempt"])) for e in read} == {(0, 10, (1, 0, 0)), (1, 10, (1, 0, 0))}
    ld = m["checkpoint_load_s"]
    slow = max(read, key=lambda e: e["load_s"])
    assert ld["value"] == pytest.approx(slow["load_s"], abs=1e-9) and ld["detail"]["slowest_rank"] == slow["rank"]
    assert ld["detail"]["n"] == 2 and ld["detail"]["attempts"] == [[1, 0, 0]]
    # the read is part of recovery_checkpoint_load_s (rendezvous -> every rank loaded), never added to it
    assert 0 < ld["value"] < m["recovery_checkpoint_load_s"]["value"]
    phases = [m[p]["value"] for p in m["recovery_s"]["detail"]["phases"] if m[p]["value"] is not None]
    assert sum(phases) == pytest.approx(m["recovery_s"]["value"], abs=1e-6)


def test_a_clean_run_saves_but_loads_nothing():
    events, _ = _run("slurm-clean-01")
    got = checkpoint(events)
    # its checkpoint_loaded events (one a rank) are the fresh start's: no path, load_s 0, not a read
    assert [e["path"] for e in events if e["kind"] == "checkpoint_loaded"] == [None, None]
    assert set(got) == {"checkpoint_save_s"} and got["checkpoint_save_s"]["detail"]["n"] == 3


def test_no_checkpoint_events_give_no_key():
    events, _ = _run("slurm-clean-01")
    assert checkpoint([e for e in events if not e["kind"].startswith("checkpoint")]) == {}


def _event(kind: str, t: float, rank: int = 0, attempt=(0, 0, 0), **data) -> dict:
    return {"v": 1, "kind": kind, "ts_ns": int(t * 1e9), "run_id": "r", "rank": rank, "local_rank": rank,
            "world_size": 2, "host": f"n{rank}", "pid": 10 + rank, "attempt": list(attempt), **data}


def test_sizes_file_systems_and_rates_as_the_workload_now_records_them():
    gb4 = 4_000_000_000
    events = [
        _event("checkpoint_saved", 10, step=10, path="/ckpt/ckpt-10.pt", save_s=2.0, why="interval", bytes=gb4,
               fs="lustre", removed=[]),
        _event("checkpoint_saved", 20, step=20, path="/ckpt/ckpt-20.pt", save_s=4.0, why="interval", bytes=gb4,
               fs="lustre", removed=["/ckpt/ckpt-10.pt"]),
        _event("checkpoint_saved", 30, step=30, path="/ckpt/ckpt-30.pt", save_s=1.0, why="signal", bytes=gb4,
               fs="lustre", removed=["/ckpt/ckpt-20.pt"]),
        # a restart: both ranks read step 30's; rank 1 is the slower
        _event("checkpoint_loaded", 40, 0, (1, 0, 0), step=30, path="/ckpt/ckpt-30.pt", load_s=1.0, bytes=gb4,
               fs="lustre"),
        _event("checkpoint_loaded", 41, 1, (1, 0, 0), step=30, path="/ckpt/ckpt-30.pt", load_s=2.5, bytes=gb4,
               fs="lustre"),
    ]
    got = checkpoint(events)
    s = got["checkpoint_save_s"]
    # saves of 2, 4 and 1 s: median 2 s, slowest 4 s; 4 GB at 2, 1 and 4 GB/s: median 2 GB/s
    assert s["value"] == 2.0 and s["detail"]["max_s"] == 4.0 and s["detail"]["n"] == 3
    assert s["detail"]["gbps"] == 2.0 and s["detail"]["bytes"] == gb4 and s["detail"]["fs"] == ["lustre"]
    assert [x["why"] for x in s["detail"]["saves"]] == ["interval", "interval", "signal"]
    ld = got["checkpoint_load_s"]
    # the slower rank's 2.5 s: 4 GB / 2.5 s = 1.6 GB/s; the median of the two reads 1.75 s
    assert ld["value"] == 2.5 and ld["detail"]["gbps"] == pytest.approx(1.6)
    assert ld["detail"]["slowest_rank"] == 1 and ld["detail"]["slowest_host"] == "n1"
    assert ld["detail"]["median_s"] == 1.75 and ld["unit"] == "s"
