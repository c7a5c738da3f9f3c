"""Platform pairs compared per metric, and the verdict each comparison can bear.

A comparison is refused when the two platforms ran different torch builds (it would compare the
builds). Below MIN_N runs a side it shows the ratio of medians only. Otherwise it gets a
bootstrap interval, and, for the verdict metrics, the exact rank-sum test; the verdicts form one
family, Holm-adjusted. A difference of medians within the two sides' combined clock resolution is
never a verdict, whatever the test says: the clocks cannot tell such values apart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .bootstrap import bootstrap_ratio
from .inference import ALPHA, POWER, detectable_shift, holm, rank_sum_p, robust_sd, twice_midranks
from .stats import HIGHER_IS_BETTER, MIN_N, Group, Groups, base_metric
from .table import RunTable

PAIRS = (("k8s", "slurm"), ("k8s", "local"), ("slurm", "local"))
# The metrics the report draws verdicts on: the headline, per scenario. The rest (phases of
# startup and recovery, step time, lost steps) explain these and are shown without a verdict, so
# the family stays small enough for a smoke campaign's n to support one (see inference.min_n).
VERDICT_METRICS = {"queue_s", "startup_s", "allreduce_busbw_gbps", "allreduce_avg_busbw_gbps", "recovery_s",
                   "cost_per_step_usd", "handover_s", "first_log_s"}
# Figures that depend on the transport the collective ran over.
TRANSPORT_BOUND = {"allreduce_busbw_gbps", "allreduce_avg_busbw_gbps", "sweep_s", "step_time_s"}


@dataclass(frozen=True)
class Comparison:
    metric: str
    numerator: str
    denominator: str
    unit: str
    n_num: int
    n_den: int
    median_num: float
    median_den: float
    ratio: float          # of medians; NaN when a median is 0 or the comparison is refused
    ci_low: float         # 95% percentile bootstrap; NaN below MIN_N
    ci_high: float
    resolution: float     # the two sides' median per-run uncertainties, added; NaN if not recorded
    p: float              # exact two-sided rank-sum p-value; NaN when not tested
    p_holm: float
    detectable: float     # smallest difference of medians the test finds with 80% power; inf: none
    refused: str | None   # why no ratio is printed
    warning: str | None   # e.g. different transports
    verdict: str          # refused | few | descriptive | resolution | higher | lower | none

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p)

    @property
    def difference(self) -> float:
        return self.median_num - self.median_den

    @property
    def detectable_ratio(self) -> tuple[float, float]:
        """The ratios of medians nearest 1 the campaign could have told from 1: (above, below)."""
        if self.median_den == 0 or not math.isfinite(self.detectable):
            return math.inf, 0.0
        f = self.detectable / abs(self.median_den)
        return 1 + f, max(0.0, 1 - f)

    @property
    def better(self) -> str | None:
        if self.verdict not in ("higher", "lower"):
            return None
        higher_wins = base_metric(self.metric) in HIGHER_IS_BETTER
        return self.numerator if (self.verdict == "higher") == higher_wins else self.denominator


def _set_of(items: list, rows: np.ndarray) -> set:
    return {items[i] for i in rows.tolist() if items[i] is not None}


def _refusal(table: RunTable, a: Group, b: Group) -> str | None:
    ba, bb = _set_of(table.build, a.runs), _set_of(table.build, b.runs)
    if ba and bb and ba != bb:
        return f"not comparable: torch {', '.join(sorted(ba))} vs {', '.join(sorted(bb))}"
    return None


def _transport_warning(table: RunTable, metric: str, a: Group, b: Group) -> str | None:
    if base_metric(metric) not in TRANSPORT_BOUND:
        return None
    ta, tb = _set_of(table.transport, a.runs), _set_of(table.transport, b.runs)
    if ta and tb and ta != tb:
        return f"different all-reduce transports: {', '.join(map(str, sorted(ta, key=str)))} vs " \
               f"{', '.join(map(str, sorted(tb, key=str)))}"
    return None


def verdict_metrics(gs: Groups) -> set[str]:
    """Where the nccl-tests-style average bus bandwidth exists, the verdict is on it (the whole sweep),
    not on one size's figure (or, in older campaigns, the peak over sizes)."""
    if any(base_metric(k) == "allreduce_avg_busbw_gbps" for _, k in gs):
        return VERDICT_METRICS - {"allreduce_busbw_gbps"}
    return VERDICT_METRICS


def comparisons(gs: Groups, table: RunTable, pairs=None) -> list[Comparison]:
    """Per metric key and platform pair present, sorted by metric; verdicts Holm-adjusted together."""
    present = {p for p, _ in gs}
    pairs = [(a, b) for a, b in (pairs or PAIRS) if a in present and b in present]
    judged = verdict_metrics(gs)
    rows = []
    for metric in sorted({k for _, k in gs}):
        for num, den in pairs:
            a, b = gs.get((num, metric)), gs.get((den, metric))
            if a is not None and b is not None:
                rows.append(_first_pass(table, metric, num, den, a, b, base_metric(metric) in judged))
    family = [i for i, r in enumerate(rows) if r["verdict"] == "test"]
    adjusted = holm([rows[i]["p"] for i in family])
    level = ALPHA / max(1, len(family))   # Holm's strictest step: what every comparison must be able to pass
    for i, p_adj in zip(family, adjusted, strict=True):
        r = rows[i]
        a, b = r.pop("groups")
        shift = detectable_shift(a.values.size, b.values.size, level, POWER) * robust_sd(a.values, b.values)
        res = r["resolution"]
        r["detectable"] = max(shift, res) if math.isfinite(res) else shift
        r["p_holm"] = p_adj
        diff = r["median_num"] - r["median_den"]
        if math.isfinite(res) and abs(diff) <= res:
            r["verdict"] = "resolution"
        elif p_adj < ALPHA:
            r["verdict"] = "higher" if _direction(a.values, b.values, diff) > 0 else "lower"
        else:
            r["verdict"] = "none"
    for r in rows:
        r.pop("groups", None)
    return [Comparison(**r) for r in rows]


def _direction(a: np.ndarray, b: np.ndarray, diff: float) -> float:
    """Which side tends higher: the medians' order, or where they tie, the side with the higher mean
    rank (what the rank-sum test measures; ranks, not all pairs, so a big campaign costs n log n)."""
    if diff:
        return diff
    r2 = twice_midranks(np.concatenate([a, b]))
    return float(r2[:a.size].mean() - r2[a.size:].mean())


def _first_pass(table: RunTable, metric: str, num: str, den: str, a: Group, b: Group, judged: bool) -> dict:
    ma, mb = float(np.median(a.values)), float(np.median(b.values))
    res = a.resolution + b.resolution   # bounds, not standard errors: they add
    r = {"metric": metric, "numerator": num, "denominator": den, "unit": a.unit, "n_num": int(a.values.size),
         "n_den": int(b.values.size), "median_num": ma, "median_den": mb, "ratio": ma / mb if mb else math.nan,
         "ci_low": math.nan, "ci_high": math.nan, "resolution": res, "p": math.nan, "p_holm": math.nan,
         "detectable": math.nan, "refused": _refusal(table, a, b),
         "warning": _transport_warning(table, metric, a, b), "groups": (a, b)}
    if r["refused"]:
        r.update(ratio=math.nan, verdict="refused")
    elif min(a.values.size, b.values.size) < MIN_N:
        r["verdict"] = "few"
    else:
        if mb:
            _, r["ci_low"], r["ci_high"] = bootstrap_ratio(a.values, b.values)
        if judged:
            r.update(p=rank_sum_p(a.values, b.values), verdict="test")
        else:
            r["verdict"] = "descriptive"
    return r
