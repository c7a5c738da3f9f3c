"""Goodput per run (ETTR, effective training time ratio): useful training time / wall time held.

useful: the time of the steps that count. A step counts in the latest attempt that completed it;
its completions in earlier attempts were rolled back by a restart from a checkpoint and redone.
A step's time is its slowest rank's dur_s (perf_counter, around forward/backward/optimizer step; the
ranks wait for each other in the all-reduce, so they agree to a few ms). Checkpoint saves, startup,
the all-reduce sweep (which the harness adds) and recovery are not useful time.
held: allocated (first attempt) -> released (last attempt); without a release record, the last
rank's `done` event (the teardown after it then counts as not held: noted). For a restart that goes
back to the queue (Slurm requeue) the gap between attempts is counted as held: the report compares
what a team would pay for a reserved allocation.
"""
from __future__ import annotations

from .. import events as ev
from ..timing import Span
from .common import _metric, _span_metric, held_until, span


def useful_steps(events: list[dict]) -> tuple[dict[int, float], float, int]:
    """step -> its counted time; the time of the completions that were redone, and their number."""
    by: dict[tuple, dict[int, float]] = {}          # (step, attempt) -> rank -> dur_s
    for e in ev.of_kind(events, "step"):
        by.setdefault((e["step"], ev.attempt_of(e)), {})[e["rank"]] = float(e.get("dur_s") or 0.0)
    latest: dict[int, tuple] = {}
    for step, att in by:
        if att > latest.get(step, ()):
            latest[step] = att
    counted = {s: max(by[(s, a)].values()) for s, a in latest.items()}
    redone = [max(r.values()) for (s, a), r in by.items() if a != latest[s]]
    return counted, sum(redone), len(redone)


def goodput(events: list[dict], st: dict) -> dict:
    counted, redone_s, n_redone = useful_steps(events)
    useful = sum(counted.values())
    end_name, end, until = held_until(events, st)
    stamps = {"allocated": st.get("allocated"), end_name: end}
    wall = span(stamps["allocated"], end)
    detail = {"useful_s": round(useful, 9), "steps_counted": len(counted), "steps_redone": n_redone,
              "redone_s": round(redone_s, 9), "held_until": until}
    if wall is None or wall.value <= 0 or not counted:
        return _metric("goodput", None, {k: s.t for k, s in stamps.items() if s is not None},
                       note="no held time or no step", **detail)
    detail["held_s"] = round(wall.value, 9)
    value = useful / wall.value
    # useful time lies inside the held time, so 1 bounds the ratio when the held interval is wide
    hi = max(value, min(useful / wall.lo, 1.0) if wall.lo > 0 else 1.0)
    return _span_metric("goodput", Span(value, min(useful / wall.hi, value), hi), stamps, **detail)
