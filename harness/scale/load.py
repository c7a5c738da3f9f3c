"""What a trace offers a scheduler per second, against what the scheduler can place (pure).

A replay measures queue policy only while both schedulers place jobs as fast as they arrive. Above a
platform's placement ceiling (harness/scale/ceiling.py, measured by a saturation sweep on this host) its
queue is the backlog of a server fed faster than it serves, whatever its policy. So every replay keeps
its offered rate beside the ceilings, and a trace is compressed only as far as its busiest moment stays
under a share of the lower ceiling.

The busiest moment is the most submissions within any ``window_s`` seconds (10 s by default, the
window the replay figures' placement rate uses too), per second: the mean over the whole arrival
window hides the bursts, and a burst is where a scheduler falls behind.
"""
from __future__ import annotations

import math

from ..errors import ConfigError
from .trace import Trace, compress

WINDOW_S = 10          # seconds: the burst a scheduler has to keep up with
SHARE = 0.7            # of the lower ceiling the busiest window may offer: room for bursts within the 10 s


def busiest_rate(trace: Trace, window_s: int = WINDOW_S) -> float:
    """The most jobs submitted within any ``window_s`` consecutive seconds, per second. Submissions are
    whole seconds, so a window [t, t + window_s) holds the seconds t .. t + window_s - 1."""
    if window_s < 1:
        raise ConfigError(f"window_s must be at least 1 s, got {window_s}", tip="10 s is the replays' window")
    subs = sorted(j.submit_s for j in trace.jobs)
    best, lo = 0, 0
    for hi, t in enumerate(subs):
        while subs[lo] <= t - window_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return best / window_s


def mean_rate(trace: Trace) -> float:
    """Jobs per second over the trace's arrival window."""
    return len(trace.jobs) / trace.duration_s if trace.jobs else 0.0


def offered(trace: Trace, window_s: int = WINDOW_S) -> dict:
    """The offered rates a replay records: busiest window and mean, jobs per second."""
    return {"window_s": window_s, "busiest_jobs_per_s": busiest_rate(trace, window_s),
            "mean_jobs_per_s": round(mean_rate(trace), 6), "jobs": len(trace.jobs), "duration_s": trace.duration_s,
            "compression": trace.compression}


def compression_for(trace: Trace, ceiling_jobs_per_s: float, share: float = SHARE, window_s: int = WINDOW_S,
                    most: float = 10_000.0) -> float:
    """The highest compression (a whole number, at least 1) at which the busiest ``window_s`` of the
    compressed trace offers at most ``share`` of ``ceiling_jobs_per_s``. Rounding to whole seconds makes
    the busiest rate rise with the factor only roughly, so the search checks each candidate it keeps.
    A trace whose busiest window is above the bound already uncompressed is refused: it can only be
    replayed throughput-bound."""
    if not (math.isfinite(ceiling_jobs_per_s) and ceiling_jobs_per_s > 0 and 0 < share <= 1):
        raise ConfigError(f"a ceiling ({ceiling_jobs_per_s!r} jobs/s) must be positive and the share "
                          f"({share!r}) in (0, 1]", tip="measure the ceilings first: benchmarks/replay_throughput.py")
    bound = share * ceiling_jobs_per_s

    def ok(c: float) -> bool:
        return busiest_rate(compress(trace, c) if c != 1 else trace, window_s) <= bound + 1e-9

    if not ok(1):
        raise ConfigError(f"{trace.name}: its busiest {window_s} s offer {busiest_rate(trace, window_s):g} jobs/s "
                          f"uncompressed, over {share:.0%} of the ceiling {ceiling_jobs_per_s:g} jobs/s",
                          tip="a replay of it would measure throughput, not queue policy: replay a slice, "
                              "or on a faster host")
    lo, hi = 1, int(most)
    if ok(hi):
        return float(hi)
    while hi - lo > 1:          # lo passes, hi does not
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return float(lo)
