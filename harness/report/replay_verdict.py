"""Across replays of one trace: each platform's per-replay figures side by side, and the verdicts they
support.

The unit of a test is the replay, never the job: a replay's hundreds of jobs share one queue, so one
slow moment delays many of them at once and they are not independent measurements. Per figure, each
platform's values (one a replay), their medians, the ratio Kubernetes / Slurm with a bootstrap interval,
and the exact rank-sum test, Holm-adjusted over the figures compared, as for every other criterion of
the report (inference.py). A verdict needs as many replays a side as let that test reach its threshold
over the figures compared (``replays_needed``: MIN_N = 5 for up to 6 figures, 6 for up to 23, as a
replay with every size class has 12); with fewer the values stand side by side, descriptive, with the
replays still needed. The same in every replay: the trace, its compression, the
cluster's shape and settings. What varies: the control planes' timing and this machine's other load,
which the spread of a platform's replays shows.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..replay import store as rs
from ..scale import trace as tr
from .bootstrap import bootstrap_ratio
from .inference import ALPHA, holm, min_n, rank_sum_p
from .stats import MIN_N, PLATFORM_LABEL

A, B = "k8s", "slurm"   # ratios are Kubernetes / Slurm, as in the decision summary
QUEUE_RES_S = 1.0       # a queue time is the difference of two whole-second stamps


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    get: Callable[[dict], float | None]
    lower_is_better: bool
    resolution: float   # of one replay's value


def _queue(cls: str, q: str) -> Callable[[dict], float | None]:
    return lambda f: f["queue_s"].get(cls, {}).get(q)


def figures_compared() -> list[Figure]:
    def who(cls: str) -> str:
        return "all jobs" if cls == "all" else cls + (" node" if cls == "1" else " nodes")
    out = [Figure(f"queue_{q}_s:{cls}", f"queue {q}, {who(cls)}", "s", _queue(cls, f"{q}_s"), True, QUEUE_RES_S)
           for cls in ("all", *(c for c, _, _ in tr.SIZE_CLASSES)) for q in ("p50", "p99")]
    # by the jobs' own work over the arrival window (scale/queueing.py), not work / makespan: the work is the
    # trace's, the same in every replay, so work / makespan restates the makespan, which the last job sets
    out.append(Figure("bounded_slowdown:all", "mean bounded slowdown (tau 10 s), all jobs", "",
                      lambda f: ((f.get("bounded_slowdown") or {}).get("classes") or {}).get("all", {}).get("mean"),
                      True, 0.0))
    out.append(Figure("arrival_window_utilisation", "GPU utilisation by work over the arrival window", "share",
                      lambda f: f.get("arrival_window_utilisation"), False, 0.0))
    return out


@dataclass
class Row:
    figure: Figure
    values: dict[str, list[float]]      # per platform, one value a replay, in the order they ran
    median: dict[str, float]
    ratio: float = math.nan             # median Kubernetes / median Slurm
    ci: tuple[float, float] = (math.nan, math.nan)
    p: float = math.nan
    p_holm: float = math.nan
    verdict: str = "few"                # few | resolution | ahead | none
    needed: int = MIN_N                 # replays a side a verdict needs over the figures compared

    @property
    def n(self) -> int:
        return min((len(v) for v in self.values.values()), default=0)

    def ahead(self) -> str | None:
        """The platform the figure favours, where the verdict is one."""
        if self.verdict != "ahead":
            return None
        k_higher = self.median[A] > self.median[B]
        return B if k_higher == self.figure.lower_is_better else A


def complete(stored: dict[str, dict], platform: str) -> list[dict]:
    """A platform's replays that ran to their last job: one stopped by its watch's time-out or an interrupt
    has percentiles of the jobs that started only, which would flatter it, so it is never a value here."""
    return [b for b in rs.runs_of(stored, platform) if b.get("ended", True) and not b.get("interrupted")]


def rows(stored: dict[str, dict], trace: tr.Trace) -> list[Row]:
    """The rows of a replay directory's complete replays (replay/store.py load), figures drawn from the raw."""
    return rows_of({p: [rs.figures(p, trace, body, body["total_gpus"]) for body in complete(stored, p)]
                    for p in (A, B)})


def replays_needed(m: int, alpha: float = ALPHA) -> int:
    """The fewest replays a side (never under MIN_N) with which the exact rank-sum test, Holm-adjusted over
    `m` figures, can reach `alpha` at all. With n a side its smallest two-sided p is 2 / C(2n, n), every
    value of one side beyond every value of the other, and Holm multiplies the smallest p by m: 5 a side
    give 0.0079, enough for up to 6 figures; a replay with every size class has 12, which needs 6."""
    return max(MIN_N, min_n(max(1, m), alpha))


def rows_of(per: dict[str, list[dict]]) -> list[Row]:
    """One row per figure both platforms have in every replay (per: platform -> each replay's figures),
    tested where enough replays a side (replays_needed, over the figures compared) allow."""
    out = []
    for fig in figures_compared():
        vals = {p: [fig.get(f) for f in per[p]] for p in (A, B)}
        if not all(vals[p] and all(v is not None for v in vals[p]) for p in (A, B)):
            continue
        vals = {p: [float(v) for v in vs] for p, vs in vals.items()}
        r = Row(fig, vals, {p: float(np.median(v)) for p, v in vals.items()})
        if r.median[B]:
            r.ratio = r.median[A] / r.median[B]
        out.append(r)
    need = replays_needed(len(out))
    for r in out:
        r.needed = need
        if r.n >= need:
            if r.median[B]:
                _, lo, hi = bootstrap_ratio(np.array(r.values[A]), np.array(r.values[B]))
                r.ci = (lo, hi)
            r.p = rank_sum_p(r.values[A], r.values[B])
    tested = [r for r in out if math.isfinite(r.p)]
    for r, p_adj in zip(tested, holm([r.p for r in tested]), strict=True):
        r.p_holm = p_adj
        res = 2 * r.figure.resolution   # each side's value is that coarse; bounds add
        if abs(r.median[A] - r.median[B]) <= res and res > 0:
            r.verdict = "resolution"
        else:
            r.verdict = "ahead" if p_adj < ALPHA else "none"
    return out


def _v(x: float, unit: str) -> str:
    return f"{x:.1%}" if unit == "share" else f"{x:.3g}" if unit == "" else f"{x:g}"


def _ratio(r: Row) -> str:
    if not math.isfinite(r.ratio):
        return "–"
    if all(math.isfinite(c) for c in r.ci):
        return f"×{r.ratio:.2f} ({r.ci[0]:.2f}–{r.ci[1]:.2f})"
    return f"×{r.ratio:.2f}"


def verdict_text(r: Row) -> str:
    if r.verdict == "few":
        return f"descriptive: {r.n} replay{'s' if r.n != 1 else ''} a side, a verdict needs {r.needed}"
    if r.verdict == "resolution":
        return f"no difference beyond the records' resolution (±{2 * r.figure.resolution:g} {r.figure.unit})"
    if r.verdict == "ahead":
        # across repeats of one trace: a verdict on this trace, which replay_sets.py needs several of
        return f"{PLATFORM_LABEL.get(r.ahead(), r.ahead())} ahead on this trace (rank-sum, Holm p {r.p_holm:.2g})"
    return f"no difference shown (rank-sum, Holm p {r.p_holm:.2g})"


def table(rs_: list[Row]) -> tuple[list[str], list[list[str]]]:
    header = ["figure", "Slurm, each replay", "Kubernetes, each replay", "Kubernetes / Slurm (95% CI)", "verdict"]
    body = [[r.figure.label + (f" ({r.figure.unit})" if r.figure.unit not in ("share", "") else ""),
             ", ".join(_v(v, r.figure.unit) for v in r.values[B]),
             ", ".join(_v(v, r.figure.unit) for v in r.values[A]), _ratio(r), verdict_text(r)] for r in rs_]
    return header, body


def markdown(rs_: list[Row]) -> list[str]:
    header, body = table(rs_)
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in body)]
