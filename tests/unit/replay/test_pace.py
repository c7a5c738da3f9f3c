"""Submissions paced on the harness's clock: jobs due together come as one batch, at their offset."""
from __future__ import annotations

from support.fakes import SimClock

from harness.replay.pace import due_batches
from harness.scale.trace import Trace, TraceJob


def test_jobs_come_in_the_batches_that_fall_due_together_and_never_early():
    jobs = tuple(TraceJob(id=f"j{i}", submit_s=s, tenant="a", nodes=1, gpus_per_node=0, limit_s=9, runtime_s=1)
                 for i, s in enumerate([0, 0, 3, 3, 3, 10]))
    trace = Trace(name="t", source="test", duration_s=10, jobs=jobs)
    clock = SimClock(100.0)
    seen = [(clock() - 100.0, [j.id for j in batch]) for batch in due_batches(trace, 100.0, clock, clock.sleep)]
    assert seen == [(0.0, ["j0", "j1"]), (3.0, ["j2", "j3", "j4"]), (10.0, ["j5"])]
