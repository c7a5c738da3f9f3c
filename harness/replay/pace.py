"""Pacing a trace's submissions on the harness's wall clock, the same for every scheduler."""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..scale.trace import Trace, TraceJob


def due_batches(trace: Trace, t0: float, clock: Callable[[], float],
                sleep: Callable[[float], None]) -> Iterator[list[TraceJob]]:
    """The trace's jobs in the batches that fall due together, each when its offset from t0 has come;
    between batches it sleeps at most a second at a time, so a late clock is caught up at once."""
    jobs, i = list(trace.jobs), 0
    while i < len(jobs):
        now = clock() - t0
        due = []
        while i < len(jobs) and jobs[i].submit_s <= now:
            due.append(jobs[i])
            i += 1
        if due:
            yield due
        elif i < len(jobs):
            sleep(max(0.0, min(jobs[i].submit_s - now, 1.0)))
