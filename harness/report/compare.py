"""Platform pairs compared per metric, and the verdict each comparison can bear.

A comparison is refused when the two platforms ran different torch builds (it would compare the
builds), or when the metric's edges are not the same instant on both (EDGE_REFUSED). Below MIN_N
runs a side it shows the ratio of medians only. Otherwise it gets a bootstrap interval and, for the
verdict metrics, a test: within rounds (the exact signed-rank test, paired.py) where both sides ran
in the same rounds of an interleaved campaign, else the exact rank-sum test. Each question is its own
Holm family: Kubernetes against Slurm (primary), and each platform against the no-scheduler baseline
(secondary), so adding baseline comparisons does not dilute the answer the POC exists for.

A difference of medians within the two sides' combined clock resolution is never a verdict: the
clocks cannot tell such values apart. That rule does not apply to bandwidth, whose ± is a spread
within one run (harness/metrics/bandwidth.py), not a bound on a clock; its verdict comes from the
spread between runs, like every other metric's test. "Equivalent" needs the 90% interval of the
ratio inside the stated margin (equivalence.py); otherwise it is "no clear difference".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import comm_facts as cf
from .bootstrap import bootstrap_ratio
from .equivalence import EQUIVALENCE_LEVEL, equivalent, ratio_interval
from .inference import ALPHA, holm, rank_sum_p, twice_midranks
from .paired import signed_rank_p, walsh_interval
from .stats import HIGHER_IS_BETTER, MIN_N, PLATFORM_LABEL, Group, Groups, base_metric
from .table import RunTable

PAIRS = (("k8s", "slurm"), ("k8s", "local"), ("slurm", "local"))
# The metrics the report draws verdicts on: the headline, per scenario. The rest (phases of
# startup and recovery, step time, lost steps) explain these and are shown without a verdict, so
# the family stays small enough for a smoke campaign's n to support one (see inference.min_n).
VERDICT_METRICS = {"queue_s", "startup_s", "submit_to_first_step_s", "allreduce_busbw_gbps",
                   "allreduce_avg_busbw_gbps", "recovery_s", "cost_per_step_usd", "handover_s", "first_log_s"}
# Figures that depend on the transport the collective ran over.
TRANSPORT_BOUND = {"allreduce_busbw_gbps", "allreduce_avg_busbw_gbps", "sweep_s", "step_time_s",
                   "samples_per_s", "tokens_per_s", "mfu"}     # the last three: per step_time_s
# Metrics whose per-run ± is the spread inside one run, not a clock's bound: no resolution rule.
SPREAD_UNCERTAINTY = {"allreduce_busbw_gbps", "allreduce_avg_busbw_gbps"}
# The families of the Holm adjustment: the question each pair answers.
PRIMARY = frozenset({"k8s", "slurm"})
FAMILIES = {"primary": "Kubernetes vs Slurm", "secondary": "against the no-scheduler baseline"}
# Pairs of platforms whose stamps for a metric mark different instants: no ratio, the reason instead.
EDGE_REFUSED = {
    ("queue_s", frozenset({"local", "k8s"})):
        "not comparable: the baseline's queue ends when its container started (dockerd StartedAt), Kubernetes' "
        "when the scheduler bound the pod, before any container exists; compare `submit_to_first_step_s`",
}


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
    family: str           # the Holm family: primary (Kubernetes vs Slurm) | secondary (vs the baseline)
    test: str             # paired | unpaired; empty when not tested
    n_pairs: int          # rounds both sides ran once each in (paired); 0 otherwise
    n_higher: int         # of those, rounds where the numerator's value was higher
    p: float              # exact two-sided p-value of the test; NaN when not tested
    p_holm: float
    effect: float         # the ratio the test and the 90% interval are about: within-round (paired) or of
    eq_low: float         # geometric means (unpaired); NaN where values are not all positive
    eq_high: float
    refused: str | None   # why no ratio is printed
    warning: str | None   # e.g. different transports
    verdict: str          # refused | few | descriptive | resolution | higher | lower | equivalent | none

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p)

    @property
    def difference(self) -> float:
        return self.median_num - self.median_den

    @property
    def better(self) -> str | None:
        if self.verdict not in ("higher", "lower"):
            return None
        higher_wins = base_metric(self.metric) in HIGHER_IS_BETTER
        return self.numerator if (self.verdict == "higher") == higher_wins else self.denominator


def family_of(num: str, den: str) -> str:
    return "primary" if frozenset({num, den}) == PRIMARY else "secondary"


def _set_of(items: list, rows: np.ndarray) -> set:
    return {items[i] for i in rows.tolist() if items[i] is not None}


def _refusal(table: RunTable, metric: str, num: str, den: str, a: Group, b: Group) -> str | None:
    ba, bb = _set_of(table.build, a.runs), _set_of(table.build, b.runs)
    if ba and bb and ba != bb:
        return f"not comparable: torch {', '.join(sorted(ba))} vs {', '.join(sorted(bb))}"
    return EDGE_REFUSED.get((base_metric(metric), frozenset({num, den})))


def matched(table: RunTable, a: Group, b: Group) -> tuple[np.ndarray, np.ndarray]:
    """The two sides' values in the rounds where each ran exactly once (same campaign, round and scenario),
    in round order; empty where the records carry no round. A round with two runs of a side is left out:
    which of them pairs with the other side's run would be a choice."""
    def by_round(g: Group) -> dict:
        seen: dict = {}
        for v, r in zip(g.values.tolist(), g.runs.tolist(), strict=True):
            if table.round.size and table.round[r] >= 0:
                key = (table.campaign[r] or "", int(table.round[r]), table.scenario[r])
                seen[key] = None if key in seen else v
        return {k: v for k, v in seen.items() if v is not None}
    if not table.round.size or (table.round[a.runs] < 0).all() or (table.round[b.runs] < 0).all():
        return np.empty(0), np.empty(0)   # records without rounds (older campaigns): nothing to pair
    ra, rb = by_round(a), by_round(b)
    keys = sorted(ra.keys() & rb.keys())
    return np.array([ra[k] for k in keys], float), np.array([rb[k] for k in keys], float)


def _transport_warning(table: RunTable, metric: str, num: str, den: str, a: Group, b: Group) -> str | None:
    """On a transport-bound figure: every way the two platforms' runs recorded a different collective path
    (transport, NCCL's facts, the communication variables; comm_facts.py), both values named; and where a
    platform's own runs differ among themselves, that too."""
    if base_metric(metric) not in TRANSPORT_BOUND:
        return None
    la, lb = PLATFORM_LABEL.get(num, num), PLATFORM_LABEL.get(den, den)
    comm = table.comm if len(table.comm) == len(table.transport) else [None] * len(table.transport)
    fa = [f for f in (comm[i] for i in a.runs.tolist()) if f is not None]
    fb = [f for f in (comm[i] for i in b.runs.tolist()) if f is not None]
    ta, tb = _transports(table, a.runs, fa), _transports(table, b.runs, fb)
    between = []
    if ta and tb and ta != tb:
        between.append(f"transport: {' / '.join(sorted(ta))} on {la} vs {' / '.join(sorted(tb))} on {lb}")
    between += cf.differences(fa, fb, la, lb)
    own = [(lab, ([f"transport {' / '.join(sorted(ts))}"] if len(ts) > 1 else []) + cf.within(fs))
           for lab, ts, fs in ((la, ta, fa), (lb, tb, fb))]
    parts = [f"the all-reduce ran differently on the two platforms (the figure may show that, not the "
             f"scheduler): {'; '.join(between)}"] if between else []
    parts += [f"{_possessive(lab)} own runs differ: {'; '.join(diff)}" for lab, diff in own if diff]
    return ". ".join(parts) or None


def _possessive(label: str) -> str:
    return label + ("'" if label.endswith("s") else "'s")


def _transports(table: RunTable, runs: np.ndarray, facts: list) -> set[str]:
    """The side's transports as the report names them ("gloo over TCP", "NCCL over NET/IB+P2P")."""
    backends = {f.backend for f in facts if f.backend}
    backend = next(iter(backends)) if len(backends) == 1 else None
    return {cf.transport_name(t, backend) for t in _set_of(table.transport, runs)}


def verdict_metrics(gs: Groups) -> set[str]:
    """Where the nccl-tests-style average bus bandwidth exists, the verdict is on it (the whole sweep),
    not on one size's figure (or, in older campaigns, the peak over sizes)."""
    if any(base_metric(k) == "allreduce_avg_busbw_gbps" for _, k in gs):
        return VERDICT_METRICS - {"allreduce_busbw_gbps"}
    return VERDICT_METRICS


def comparisons(gs: Groups, table: RunTable, pairs=None) -> list[Comparison]:
    """Per metric key and platform pair present, sorted by metric; verdicts Holm-adjusted per family."""
    present = {p for p, _ in gs}
    pairs = [(a, b) for a, b in (pairs or PAIRS) if a in present and b in present]
    judged = verdict_metrics(gs)
    rows = []
    for metric in sorted({k for _, k in gs}):
        for num, den in pairs:
            a, b = gs.get((num, metric)), gs.get((den, metric))
            if a is not None and b is not None:
                rows.append(_first_pass(table, metric, num, den, a, b, base_metric(metric) in judged))
    for fam in FAMILIES:
        members = [i for i, r in enumerate(rows) if r["verdict"] == "test" and r["family"] == fam]
        for i, p_adj in zip(members, holm([rows[i]["p"] for i in members]), strict=True):
            _verdict(rows[i], p_adj)
    for r in rows:
        r.pop("groups", None)
        r.pop("sign", None)
    return [Comparison(**r) for r in rows]


def _verdict(r: dict, p_adj: float) -> None:
    r["p_holm"] = p_adj
    res = r["resolution"]
    diff = r["median_num"] - r["median_den"]
    if base_metric(r["metric"]) not in SPREAD_UNCERTAINTY and math.isfinite(res) and abs(diff) <= res:
        r["verdict"] = "resolution"
    elif p_adj < ALPHA:
        r["verdict"] = "higher" if r["sign"] > 0 else "lower"
    elif equivalent(r["eq_low"], r["eq_high"]):
        r["verdict"] = "equivalent"
    else:
        r["verdict"] = "none"


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
         "ci_low": math.nan, "ci_high": math.nan, "resolution": res, "family": family_of(num, den), "test": "",
         "n_pairs": 0, "n_higher": 0, "p": math.nan, "p_holm": math.nan, "effect": math.nan, "eq_low": math.nan,
         "eq_high": math.nan, "refused": _refusal(table, metric, num, den, a, b),
         "warning": _transport_warning(table, metric, num, den, a, b), "groups": (a, b)}
    if r["refused"]:
        r.update(ratio=math.nan, verdict="refused")
    elif min(a.values.size, b.values.size) < MIN_N:
        r["verdict"] = "few"
    else:
        if mb:
            _, r["ci_low"], r["ci_high"] = bootstrap_ratio(a.values, b.values)
        if judged:
            r.update(_test(table, a, b), verdict="test")
        else:
            r["verdict"] = "descriptive"
    return r


def _test(table: RunTable, a: Group, b: Group) -> dict:
    """The paired test where MIN_N rounds or more have one run of each side, else the unpaired one; with the
    effect and its 90% interval from the same design."""
    x, y = matched(table, a, b)
    if x.size >= MIN_N:
        logs = bool((x > 0).all() and (y > 0).all())
        d = np.log(x / y) if logs else x - y
        est, lo, hi = walsh_interval(d, EQUIVALENCE_LEVEL)
        effect, lo, hi = (math.exp(est), math.exp(lo), math.exp(hi)) if logs else (math.nan,) * 3
        higher = int((x > y).sum())
        sign = est or float(higher - int((x < y).sum()))
        return {"test": "paired", "n_pairs": int(x.size), "n_higher": higher, "p": signed_rank_p(d),
                "effect": effect, "eq_low": lo, "eq_high": hi, "sign": sign}
    effect, lo, hi = ratio_interval(a.values, b.values)
    diff = float(np.median(a.values) - np.median(b.values))
    return {"test": "unpaired", "p": rank_sum_p(a.values, b.values), "effect": effect, "eq_low": lo, "eq_high": hi,
            "sign": _direction(a.values, b.values, diff)}
