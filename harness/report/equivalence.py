"""When the report may say two platforms are the same: two one-sided tests against a stated margin per metric.

Failing to find a difference is not evidence of none. The report calls two platforms equivalent on a
metric only when Schuirmann's two one-sided tests (TOST) reject both "the ratio is at most 1/m" and "the
ratio is at least m", m the metric's margin (MARGINS, each with its reason), and only after the same
multiplicity control as a difference: the TOST p-value (the larger of the two one-sided p-values) joins
its question's Holm family (compare.py: one family for differences and equivalences together, Shaffer's
bound on how many of them can be true). Unadjusted, that is the whole 90% interval inside [1/m, m];
adjusted over a family of k questions it asks about as much as a 1 − 2·0.05/k interval. Anything else
is "no clear difference" or "consistent direction, undecided", printed with the interval in both
directions, so a reader sees how far from 1 the data still allow.

The interval follows the comparison's design. Paired (interleaved rounds): the Hodges-Lehmann
interval of the within-round log-ratios (paired.walsh_interval, the signed-rank test's own). Unpaired: Welch's
interval of the difference of mean logs, with Welch-Satterthwaite degrees of freedom, so two sides
whose spreads differ many times over are not pooled into one spread.
"""
from __future__ import annotations

import math

import numpy as np

MARGIN = 1.25            # the default ratio a difference must stay within to count as none: 0.80-1.25
EQUIVALENCE_LEVEL = 0.90  # the interval printed beside each ratio: two one-sided 5% tests, unadjusted
# Per metric: the ratio inside which the two platforms are the same for the choice this report informs,
# and why that ratio. A metric not named here takes MARGIN.
MARGINS: dict[str, tuple[float, str]] = {
    "queue_s": (1.5, "a queue wait varies several-fold between runs of one platform (p05-p95 here) and is "
                     "seconds on an idle cluster: half again is the smallest ratio a user would notice"),
    "handover_s": (1.5, "as queue_s: a wait of seconds, between jobs"),
    "startup_s": (1.25, "a quarter of a job's start-up (seconds here, minutes with a large image) is the "
                        "smallest difference worth a platform choice for jobs that run for hours"),
    "submit_to_first_step_s": (1.25, "as startup_s: submit to the first step, the wait a user sees"),
    "allreduce_busbw_gbps": (1.10, "bandwidth bounds a communication-bound step: a tenth of it is a tenth of "
                                   "such a job's run time and bill"),
    "allreduce_avg_busbw_gbps": (1.10, "as allreduce_busbw_gbps: a tenth of the bandwidth is a tenth of a "
                                       "communication-bound job's run time"),
    "recovery_free_s": (1.5, "a restart takes seconds to a minute beside the recompute since the last "
                             "checkpoint (minutes at a site's interval): half again of it changes a failure's cost "
                             "by little"),
    "cost_per_step_usd": (1.10, "a tenth of the bill is what a buyer weighs"),
    "first_log_s": (1.5, "a user tailing a job waits seconds for its first line: half again is the smallest "
                         "difference noticed at that scale"),
}


def margin_of(metric: str) -> float:
    """The margin of a metric key ("startup_s", "recovery_free_s:kill_rank")."""
    return MARGINS.get(metric.split(":", 1)[0], (MARGIN, ""))[0]


def margin_reason(metric: str) -> str:
    return MARGINS.get(metric.split(":", 1)[0], (MARGIN, "the report's default margin"))[1]


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def t_quantile(q: float, df: float) -> float:
    """The q-quantile (q > 0.5) of Student's t with df (not necessarily whole) degrees of freedom."""
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
    return hi


def welch_interval(x, y, level: float) -> tuple[float, float, float]:
    """(mean(x) - mean(y), low, high): Welch's interval; NaN bounds below 2 values a side."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    diff = float(x.mean() - y.mean()) if x.size and y.size else math.nan
    if x.size < 2 or y.size < 2:
        return diff, math.nan, math.nan
    vx, vy = float(x.var(ddof=1)) / x.size, float(y.var(ddof=1)) / y.size
    se = math.sqrt(vx + vy)
    if se == 0:
        return diff, diff, diff
    df = (vx + vy) ** 2 / (vx ** 2 / (x.size - 1) + vy ** 2 / (y.size - 1))
    half = t_quantile(1 - (1 - level) / 2, df) * se
    return diff, diff - half, diff + half


def ratio_interval(a, b, level: float = EQUIVALENCE_LEVEL) -> tuple[float, float, float]:
    """(ratio of geometric means, low, high) of a over b, unpaired: Welch on the logs of both sides. NaN where
    a value is not positive (no ratio of such values). The paired interval is paired.walsh_interval's."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if (a <= 0).any() or (b <= 0).any():
        return math.nan, math.nan, math.nan
    est, lo, hi = welch_interval(np.log(a), np.log(b), level)
    return math.exp(est), math.exp(lo), math.exp(hi)


def welch_tost_p(x, y, margin: float) -> float:
    """TOST p-value of mean(x) - mean(y) (logs) against ±ln(margin), Welch's t one-sided each way: the larger
    of the two. NaN below 2 values a side."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2 or y.size < 2:
        return math.nan
    vx, vy = float(x.var(ddof=1)) / x.size, float(y.var(ddof=1)) / y.size
    diff, se, bound = float(x.mean() - y.mean()), math.sqrt(vx + vy), math.log(margin)
    if se == 0:
        return 0.0 if abs(diff) < bound else 1.0
    df = (vx + vy) ** 2 / (vx ** 2 / (x.size - 1) + vy ** 2 / (y.size - 1))
    p_low = 1 - t_cdf((diff + bound) / se, df)     # H0: diff <= -ln m
    p_high = t_cdf((diff - bound) / se, df)        # H0: diff >= +ln m
    return float(max(p_low, p_high))


def equivalent(low: float, high: float, margin: float = MARGIN) -> bool:
    """The whole interval inside [1/margin, margin]; never from a missing bound."""
    return math.isfinite(low) and math.isfinite(high) and 1 / margin <= low and high <= margin
