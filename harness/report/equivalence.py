"""When the report may say two platforms are the same: a 90% interval of the ratio inside a stated margin.

Failing to find a difference is not evidence of none. The report calls two platforms equivalent on a
metric only when the whole 90% interval of their ratio lies inside [1/MARGIN, MARGIN]: that is
Schuirmann's two one-sided tests, each at 5%. Anything else is "no clear difference", printed with
the interval in both directions, so a reader sees how far from 1 the data still allow.

The interval follows the comparison's design. Paired (interleaved rounds): the Hodges-Lehmann
interval of the within-round log-ratios (paired.walsh_interval, the signed-rank test's own). Unpaired: Welch's
interval of the difference of mean logs, with Welch-Satterthwaite degrees of freedom, so two sides
whose spreads differ many times over are not pooled into one spread.
"""
from __future__ import annotations

import math

import numpy as np

MARGIN = 1.25            # the ratio a difference must stay within to count as none: 0.80-1.25
EQUIVALENCE_LEVEL = 0.90  # two one-sided 5% tests


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


def equivalent(low: float, high: float, margin: float = MARGIN) -> bool:
    """The whole interval inside [1/margin, margin]; never from a missing bound."""
    return math.isfinite(low) and math.isfinite(high) and 1 / margin <= low and high <= margin
