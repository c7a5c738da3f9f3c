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
spread between runs, like every other metric's test. "Equivalent" needs two one-sided tests against the
metric's own margin (equivalence.py), adjusted in the same Holm family as the differences; a direction
the intervals show but the test cannot pass at this n is "consistent direction, undecided", with the
rounds it needs; only the rest is "no clear difference".

Ratios are of values above their own resolution: where a run's value is within its ± of 0 (a queue of
0.03 ± 0.05 s), its logarithm says nothing, so that comparison is tested on differences in the metric's
unit, and no ratio interval or equivalence is drawn from it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import comm_facts as cf
from . import power
from .bootstrap import bootstrap_ratio
from .equivalence import EQUIVALENCE_LEVEL, margin_of, ratio_interval, welch_tost_p
from .inference import ALPHA, holm, rank_sum_p, twice_midranks
from .paired import signed_rank_p, tost_p, walsh_interval
from .stats import HIGHER_IS_BETTER, MIN_N, PLATFORM_LABEL, Group, Groups, base_metric
from .table import RunTable

PAIRS = (("k8s", "slurm"), ("k8s", "local"), ("slurm", "local"))
# The metrics the report draws verdicts on: the headline, per scenario. The rest (phases of
# startup and recovery, step time, lost steps) explain these and are shown without a verdict, so
# the family stays small enough for a smoke campaign's n to support one (see inference.min_n).
# Recovery is judged on its setting-free part (recovery_free_s: recovery_s less the stretches a cluster setting
# sets, report/defaults.py); recovery_s at the site's settings is shown beside it, attributed, not judged.
VERDICT_METRICS = {"queue_s", "startup_s", "submit_to_first_step_s", "allreduce_busbw_gbps",
                   "allreduce_avg_busbw_gbps", "recovery_free_s", "cost_per_step_usd", "handover_s", "first_log_s"}
# Judged for the clean runs only: a fault run's cost per step is its recovery's time at the same price, and
# recovery is judged already (the same question twice in one family would count it twice).
CLEAN_ONLY = {"cost_per_step_usd"}
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
    verdict: str          # refused | few | descriptive | resolution | higher | lower | equivalent | direction | none
    margin: float = math.nan        # the metric's equivalence margin (equivalence.MARGINS)
    p_equiv: float = math.nan       # the TOST p-value against it; NaN where no ratio is tested
    p_equiv_holm: float = math.nan  # adjusted in the same family as the differences
    family_size: int = 0            # the questions its Holm family tested
    needs: int = 0                  # rounds (paired) or runs a side the test needs to pass Holm's strictest step
                                    # at the spread seen (at least the exact test's floor); 0: decided or unknown
    n_lower: int = 0                # of the rounds, where the numerator's value was lower
    # a sequential campaign's rule (report/design.py): the e-values and the threshold the verdict came from
    e_value: float = math.nan       # against "no difference"
    e_equiv: float = math.nan       # the smaller of the two one-sided e-values against "not equivalent"
    e_threshold: float = math.nan   # family size / alpha

    @property
    def sequential(self) -> bool:
        return math.isfinite(self.e_threshold)

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


def judged(metric: str, judged_bases: set[str]) -> bool:
    """Whether a metric key gets a test: its base is a verdict metric, and a clean-only one has no scenario."""
    base = base_metric(metric)
    return base in judged_bases and not (base in CLEAN_ONLY and metric != base)


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
    x, y, _, _ = matched_u(table, a, b)
    return x, y


def matched_u(table: RunTable, a: Group, b: Group) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """matched(), with each value's own uncertainty (NaN where the run recorded none)."""
    def by_round(g: Group) -> dict:
        seen: dict = {}
        for v, u, r in zip(g.values.tolist(), g.uncertainty.tolist(), g.runs.tolist(), strict=True):
            if table.round.size and table.round[r] >= 0:
                key = (table.campaign[r] or "", int(table.round[r]), table.scenario[r])
                seen[key] = None if key in seen else (v, u)
        return {k: v for k, v in seen.items() if v is not None}
    empty = np.empty(0)
    if not table.round.size or (table.round[a.runs] < 0).all() or (table.round[b.runs] < 0).all():
        return empty, empty, empty, empty   # records without rounds (older campaigns): nothing to pair
    ra, rb = by_round(a), by_round(b)
    keys = sorted(ra.keys() & rb.keys())
    return (np.array([ra[k][0] for k in keys], float), np.array([rb[k][0] for k in keys], float),
            np.array([ra[k][1] for k in keys], float), np.array([rb[k][1] for k in keys], float))


def above_resolution(values: np.ndarray, uncertainty: np.ndarray) -> bool:
    """Every value positive and above its own ± (none recorded: 0): only then is its logarithm a measurement."""
    u = np.nan_to_num(np.asarray(uncertainty, float), nan=0.0)
    return bool(values.size and (values > 0).all() and (values > u).all())


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
    judged_bases = verdict_metrics(gs)
    rows = []
    for metric in sorted({k for _, k in gs}):
        for num, den in pairs:
            a, b = gs.get((num, metric)), gs.get((den, metric))
            if a is not None and b is not None:
                rows.append(_first_pass(table, metric, num, den, a, b, judged(metric, judged_bases)))
    for fam in FAMILIES:
        members = [i for i, r in enumerate(rows) if r["verdict"] == "test" and r["family"] == fam]
        # one family for both claims: each question's "no difference" and, where a ratio is tested, its "not
        # equivalent" (at most one of the two true: Shaffer's bound, inference.holm)
        equiv = [i for i in members if math.isfinite(rows[i]["p_equiv"])]
        adjusted = holm([rows[i]["p"] for i in members] + [rows[i]["p_equiv"] for i in equiv],
                        max_true=len(members))
        for i, p_adj in zip(members, adjusted[:len(members)], strict=True):
            rows[i]["p_holm"] = p_adj
        for i, p_adj in zip(equiv, adjusted[len(members):], strict=True):
            rows[i]["p_equiv_holm"] = p_adj
        for i in members:
            _verdict(rows[i], len(members))
    for r in rows:
        for internal in ("groups", "sign", "spread"):
            r.pop(internal, None)
    return [Comparison(**r) for r in rows]


def consistent(r: dict) -> bool:
    """The direction the data show without the test: every round one way, or an interval that excludes 1."""
    one_way = r["test"] == "paired" and r["n_pairs"] > 0 and r["n_pairs"] in (r["n_higher"], r["n_lower"])
    excludes = [(lo, hi) for lo, hi in ((r["eq_low"], r["eq_high"]), (r["ci_low"], r["ci_high"]))
                if math.isfinite(lo) and math.isfinite(hi)]
    return one_way or any(hi < 1 or lo > 1 for lo, hi in excludes)


def needed(r: dict, family_size: int) -> int:
    """Rounds (runs a side unpaired) at which the test can pass Holm's strictest step (alpha / the family): at
    least the exact test's floor (2 / 2^n paired), and the normal-approximation n at the spread seen."""
    alpha = ALPHA / max(1, family_size)
    paired = r["test"] == "paired"
    delta, sd = r.get("spread") or (math.nan, math.nan)
    return power.n_difference(delta, sd, paired, alpha=alpha) or power.floor(paired, alpha)


def _verdict(r: dict, family_size: int) -> None:
    r["family_size"] = family_size
    res = r["resolution"]
    diff = r["median_num"] - r["median_den"]
    if base_metric(r["metric"]) not in SPREAD_UNCERTAINTY and math.isfinite(res) and abs(diff) <= res:
        r["verdict"] = "resolution"
    elif r["p_holm"] < ALPHA:
        r["verdict"] = "higher" if r["sign"] > 0 else "lower"
    elif r["p_equiv_holm"] < ALPHA:
        r["verdict"] = "equivalent"
    else:
        r["verdict"] = "direction" if consistent(r) else "none"
        r["needs"] = needed(r, family_size)


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
         "warning": _transport_warning(table, metric, num, den, a, b), "margin": margin_of(metric),
         "p_equiv": math.nan, "p_equiv_holm": math.nan, "family_size": 0, "needs": 0, "n_lower": 0,
         "groups": (a, b)}
    if r["refused"]:
        r.update(ratio=math.nan, verdict="refused")
    elif min(a.values.size, b.values.size) < MIN_N:
        r["verdict"] = "few"
    else:
        if mb:
            _, r["ci_low"], r["ci_high"] = bootstrap_ratio(a.values, b.values)
        if judged:
            r.update(_test(table, a, b, r["margin"]), verdict="test")
        else:
            r["verdict"] = "descriptive"
    return r


def _spread(d: np.ndarray) -> tuple[float, float]:
    return (float(d.mean()), float(d.std(ddof=1))) if d.size >= 2 else (math.nan, math.nan)


def _test(table: RunTable, a: Group, b: Group, margin: float) -> dict:
    """The paired test where MIN_N rounds or more have one run of each side, else the unpaired one; with the
    effect, its 90% interval and the equivalence test from the same design (on ratios only where every value
    lies above its own resolution)."""
    x, y, ux, uy = matched_u(table, a, b)
    if x.size >= MIN_N:
        logs = above_resolution(x, ux) and above_resolution(y, uy)
        d = np.log(x / y) if logs else x - y
        est, lo, hi = walsh_interval(d, EQUIVALENCE_LEVEL)
        effect, lo, hi = (math.exp(est), math.exp(lo), math.exp(hi)) if logs else (math.nan,) * 3
        higher, lower = int((x > y).sum()), int((x < y).sum())
        sign = est or float(higher - lower)
        return {"test": "paired", "n_pairs": int(x.size), "n_higher": higher, "n_lower": lower,
                "p": signed_rank_p(d), "effect": effect, "eq_low": lo, "eq_high": hi, "sign": sign,
                "p_equiv": tost_p(d, margin) if logs else math.nan, "spread": _spread(d)}
    logs = above_resolution(a.values, a.uncertainty) and above_resolution(b.values, b.uncertainty)
    effect, lo, hi = ratio_interval(a.values, b.values) if logs else (math.nan,) * 3
    diff = float(np.median(a.values) - np.median(b.values))
    la, lb = (np.log(a.values), np.log(b.values)) if logs else (a.values, b.values)
    pooled = math.sqrt((la.var(ddof=1) + lb.var(ddof=1)) / 2) if min(la.size, lb.size) >= 2 else math.nan
    return {"test": "unpaired", "p": rank_sum_p(a.values, b.values), "effect": effect, "eq_low": lo, "eq_high": hi,
            "sign": _direction(a.values, b.values, diff),
            "p_equiv": welch_tost_p(la, lb, margin) if logs else math.nan,
            "spread": (float(la.mean() - lb.mean()), pooled)}
