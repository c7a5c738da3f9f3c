"""Where a scheduler stops keeping up: its saturation point and plateau from a sweep of offered rates.

Each point is one replay at one offered rate: (offered jobs/s, achieved jobs/s), as
outcome.throughput gives them. The saturation point is the highest offered rate the scheduler kept
up with, counted upwards from the lowest rate and stopping at the first it fell behind: a sweep that
falls behind at 8 jobs/s and keeps up at 16 says more about the noise of single replays than about a
second capacity, so the later point is named, not taken. The plateau is the most it achieved at any
rate: past saturation, what it manages however much more is offered.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# Kept up: achieved at least this share of offered. Whole-second stamps over a burst of tens of
# seconds put a few percent of error on each rate (one second in 30 is 3 %), and the wait before the
# first start lowers the achieved rate by as much again; 10 % clears both, and is well inside the
# fall-off past saturation, where the achieved rate stays flat while the offered one doubles.
KEEPS_UP = 0.9


@dataclass(frozen=True)
class Saturation:
    points: int                        # usable points (replays), each one replay at one offered rate
    saturation_jobs_per_s: float | None   # the highest offered rate kept up with; None: see reason
    reached: bool                      # whether the sweep went past it (some rate was not kept up with)
    plateau_jobs_per_s: float | None   # the most achieved at any rate
    plateau_at_jobs_per_s: float | None   # the offered rate where that was achieved
    reason: str | None = None          # why there is no saturation point, or what bounds it
    dropped: int = 0                   # points without a positive, finite offered and achieved rate


def kept_up(offered: float, achieved: float) -> bool:
    return achieved >= KEEPS_UP * offered


def saturation(points: list[tuple[float | None, float | None]]) -> Saturation:
    """The saturation point and plateau of one platform's sweep. Repeats at the same offered rate all
    have to keep up for the rate to count as kept up with."""
    usable = [(o, a) for o, a in points if o is not None and a is not None and math.isfinite(o)
              and math.isfinite(a) and o > 0 and a >= 0]
    dropped = len(points) - len(usable)
    top = max(usable, key=lambda p: (p[1], -p[0]), default=(None, None))   # the lowest rate on a tie
    if len(usable) < 2:
        return Saturation(len(usable), None, False, top[1], top[0], dropped=dropped,
                          reason=f"{len(usable)} usable point{'s' if len(usable) != 1 else ''}: "
                                 "a saturation point needs at least two offered rates")
    by_rate: dict[float, list[float]] = {}
    for o, a in sorted(usable):
        by_rate.setdefault(o, []).append(a)
    rates = list(by_rate)
    if len(rates) < 2:
        return Saturation(len(usable), None, False, top[1], top[0], dropped=dropped,
                          reason=f"every point was offered {rates[0]:g} jobs/s: a saturation point needs "
                                 "at least two offered rates")
    best, missed = None, None
    for o in rates:
        if all(kept_up(o, a) for a in by_rate[o]):
            best = o
        else:
            missed = o
            break
    if best is None:
        reason = f"fell behind already at the lowest rate offered ({rates[0]:g} jobs/s): offer less"
    elif missed is None:
        reason = f"kept up at every rate offered: saturation is above {best:g} jobs/s"
    else:
        later = [o for o in rates if o > missed and all(kept_up(o, a) for a in by_rate[o])]
        reason = f"fell behind at {missed:g} jobs/s" + (
            f" (kept up again at {', '.join(f'{o:g}' for o in later)} jobs/s: single replays are noisy)"
            if later else "")
    return Saturation(len(usable), best, missed is not None, top[1], top[0], reason, dropped)


def by_platform(points: dict[str, list[tuple[float | None, float | None]]]) -> dict[str, Saturation]:
    return {p: saturation(v) for p, v in points.items()}
