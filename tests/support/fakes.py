"""A backend that replays events recorded from a real local run: for pipeline logic only; a simulated
clock; a whole run record for tests of what stores or reads records.

The real backends are exercised by the integration tests against real clusters.
"""
from __future__ import annotations

import time
from pathlib import Path

from harness import events as ev
from harness.backends.base import Backend, Collected, FaultRecord, Handle, Observation, Rendered
from harness.states import JobState
from harness.store import RunRecord

FIX = Path(__file__).parents[1] / "fixtures" / "local"


class ScriptedBackend(Backend):
    platform = "local"

    def __init__(self, interrupt_on: str | None = None, clock=time.time):
        self.interrupt_on = interrupt_on
        self.clock = clock
        self.cancelled: list[str] = []
        self.events = ev.parse_lines((FIX / "clean_events.jsonl").read_text().splitlines())

    def render(self, spec):
        return Rendered("local", {"job.txt": spec.run_id})

    def preflight(self):
        return {"scheduler": "scripted"}

    def submit(self, spec, rendered):
        return Handle("local", spec.run_id, ["1"], self.clock(), data={})

    def observe(self, handles):
        out = {}
        for h in handles:
            if h.run_id == self.interrupt_on:
                raise KeyboardInterrupt
            t0 = self.events[0]["ts_ns"]
            shifted = [dict(e, ts_ns=int(h.submitted_at * 1e9) + 10_000_000 + e["ts_ns"] - t0) for e in self.events]
            out[h.run_id] = Observation(JobState.SUCCEEDED, shifted,
                                        {"submitted": h.submitted_at, "allocated": h.submitted_at + 0.005})
        return out

    def inject(self, handle, kind, target_event, journal=None):
        return FaultRecord(kind, self.clock(), {})

    def collect(self, handle):
        # raw evidence as the host runtime keeps it (harness/evidence/local.py): the launch bracket and
        # two agents spawned 5 ms after submit, exited when the replayed events end
        t0 = handle.submitted_at
        end = t0 + 0.01 + (self.events[-1]["ts_ns"] - self.events[0]["ts_ns"]) / 1e9 + 0.001
        procs = [{"pid": 100 + i, "spawn_before": t0 + 0.001 * i, "spawn_after": t0 + 0.005,
                  "exited_at": end, "exit_code": 0} for i in range(2)]
        raw = {"runtime": "host", "submit": {"before": t0, "after": t0 + 0.005}, "processes": procs}
        return Collected(events=[], times={}, attempts=[], raw=raw)

    def cancel(self, handle):
        self.cancelled.append(handle.run_id)


class SimClock:
    """Simulated time for the pipeline: sleep() advances it, so waits cost nothing and margins are exact."""

    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        self.now += dt


def record(run_id: str, status: str = "ok", **fields) -> RunRecord:
    """A run record with the fields every record has (a local clean run started at 0), ``fields`` over them:
    the store refuses anything less."""
    return RunRecord.from_json({"run_id": run_id, "campaign": "c", "platform": "local", "scenario": "clean",
                                "config_hash": "h", "started_at": 0.0, "status": status, "stages": [], **fields})
