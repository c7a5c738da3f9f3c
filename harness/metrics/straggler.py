"""Straggler ratio: how much slower the slowest rank computes than the ranks' typical rank.

Per rank, the median of its steps' forward pass (fwd_s) in the run's first attempt, its first step dropped
(warm-up), as step_times does. straggler_ratio = the slowest rank's median / the median of the ranks'
medians; 1.0 means no rank was slower than the others. Detail: the slowest rank and its host, each rank's
median, and which time it used. Absent for a run with no rank past its first step.

Why the forward pass: under synchronous DDP every rank waits in each step's gradient all-reduce for the
slowest rank, inside its own dur_s, so the ranks' step times agree (1.000-1.008 in every committed smoke
run, at 0.4 to 3 s a step) and hide the straggler; the forward pass runs before any collective. Runs
recorded before the workload timed it fall back to dur_s, with a note that it cannot see a straggler.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from .. import events as ev
from .common import _metric, _t


def straggler(events: list[dict]) -> dict[str, dict]:
    """{"straggler_ratio": metric}, or {} without a rank past its first step in the first attempt."""
    steps = ev.of_kind(events, "step")
    if not steps:
        return {}
    first = min(ev.attempt_of(e) for e in steps)
    by: dict[int, list[dict]] = defaultdict(list)
    for e in steps:
        if ev.attempt_of(e) == first:
            by[e["rank"]].append(e)
    used = [e for mine in by.values() for e in mine]
    field = "fwd_s" if all(isinstance(e.get("fwd_s"), (int, float)) for e in used) else "dur_s"
    med: dict[int, float] = {}
    host: dict[int, str | None] = {}
    for rank in sorted(by):
        mine = sorted(by[rank], key=_t)
        if len(mine) > 1:
            med[rank] = statistics.median(float(e[field]) for e in mine[1:])
            host[rank] = mine[0].get("host")
    if not med:
        return {}
    mid = statistics.median(med.values())
    slowest = max(med, key=lambda r: (med[r], -r))   # a tie names the lowest rank
    return {"straggler_ratio": _metric(
        "straggler_ratio", med[slowest] / mid if mid > 0 else None,
        {"first_step": _t(min(used, key=_t)), "last_step": _t(max(used, key=_t))},
        attempt=list(first), slowest_rank=slowest, slowest_host=host[slowest], median_of_ranks_s=mid,
        ranks=len(med), per_rank_s={str(r): v for r, v in med.items()}, time=field,
        **({} if field == "fwd_s" else {"note": "step times (dur_s): every rank waits in the all-reduce for the "
                                                 "slowest, so this cannot show a straggler; runs recorded since "
                                                 "the workload times its forward pass use that"}))}
