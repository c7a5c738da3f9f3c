"""Straggler ratio: how much slower the slowest rank's steps were than the ranks' typical step.

Per rank, the median dur_s of its steps in the run's first attempt, its first step dropped (warm-up), as
step_times does. straggler_ratio = the slowest rank's median / the median of the ranks' medians; 1.0
means no rank was slower than the others. Detail: the slowest rank and its host, each rank's median.
Absent for a run with no rank past its first step.

What it can see: under synchronous DDP every rank waits in each step's gradient all-reduce for the slowest
rank, inside its own dur_s, so the ranks' step times agree (to a few ms: goodput.py) and the ratio stays
near 1.0 even when one rank computes slower (1.000-1.008 in every committed smoke run, at 0.4 to 3 s a
step). A slow rank shows as a longer step_time_s on every rank instead; the calibration phase's per-node
matmul rate (metrics/calibration.py) is the figure that names a slow node before training.
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
    med: dict[int, float] = {}
    host: dict[int, str | None] = {}
    for rank in sorted(by):
        mine = sorted(by[rank], key=_t)
        if len(mine) > 1:
            med[rank] = statistics.median(float(e["dur_s"]) for e in mine[1:])
            host[rank] = mine[0].get("host")
    if not med:
        return {}
    mid = statistics.median(med.values())
    slowest = max(med, key=lambda r: (med[r], -r))   # a tie names the lowest rank
    return {"straggler_ratio": _metric(
        "straggler_ratio", med[slowest] / mid if mid > 0 else None,
        {"first_step": _t(min(used, key=_t)), "last_step": _t(max(used, key=_t))},
        attempt=list(first), slowest_rank=slowest, slowest_host=host[slowest], median_of_ranks_s=mid,
        ranks=len(med), per_rank_s={str(r): v for r, v in med.items()})}
