"""The comparisons in words: findings, the table of tested comparisons, and the method note."""
from __future__ import annotations

import math

from .compare import Comparison, verdict_metrics
from .inference import ALPHA, POWER, min_n, min_p
from .sections import fmt, fmt_pm, metric_order
from .stats import MIN_N, PLATFORM_LABEL, base_metric


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def detectable_text(c: Comparison) -> str:
    up, down = c.detectable_ratio
    if not math.isfinite(up):
        if math.isfinite(c.detectable):   # a median of 0: no ratio, a difference
            return f"|difference| ≥ {fmt(c.detectable, c.unit)} {c.unit}"
        return "none at this n"
    return f"≥ ×{up:.2f} or ≤ ×{down:.2f}" if down > 0 else f"≥ ×{up:.2f}"


def _medians(c: Comparison, res: dict) -> str:
    ua, ub = res.get((c.numerator, c.metric), math.nan), res.get((c.denominator, c.metric), math.nan)
    return f"medians {fmt_pm(c.median_num, ua, c.unit)} vs {fmt_pm(c.median_den, ub, c.unit)} {c.unit}".rstrip()


def findings(comps: list[Comparison], res: dict) -> list[str]:
    """One statement per comparison of a verdict metric. `res`: (platform, metric key) -> resolution."""
    if not comps:
        return ["Only one platform has results, so there is nothing to compare yet."]
    out = []
    refused: dict[tuple, None] = {}   # one line per refused pair, not one per metric
    judged = verdict_metrics(_keys(comps))
    for c in sorted(comps, key=lambda c: metric_order(c.metric)):
        if base_metric(c.metric) not in judged:
            continue
        a, b = _label(c.numerator), _label(c.denominator)
        head = f"`{c.metric}`: "
        if c.verdict == "refused":
            refused.setdefault((a, b, c.refused))
            continue
        if c.verdict == "few":
            text = (f"too few runs for a verdict between {a} and {b} (n = {c.n_num} and {c.n_den}; the report "
                    f"draws none below {MIN_N} a side); {_medians(c, res)}.")
        elif c.verdict == "resolution":
            text = (f"no clear difference between {a} and {b} (below resolution ±{fmt(c.resolution, c.unit)} "
                    f"{c.unit}; {_medians(c, res)}).")
        elif c.verdict in ("higher", "lower"):
            ratio = f"×{c.ratio:.2f} (95% CI {c.ci_low:.2f}–{c.ci_high:.2f})" if math.isfinite(c.ratio) else \
                f"{fmt(abs(c.difference), c.unit)} {c.unit}"
            text = (f"{a} is {c.verdict} than {b} by {ratio}; {_medians(c, res)}; exact rank-sum p = {_p(c.p)}, "
                    f"Holm-adjusted {_p(c.p_holm)}; advantage {_label(c.better)}.")
        else:
            ratio = f"ratio {c.ratio:.2f}, " if math.isfinite(c.ratio) else ""
            text = (f"no clear difference between {a} and {b} ({ratio}Holm-adjusted p = {_p(c.p_holm)}; "
                    f"detectable at this n: {detectable_text(c)}).")
        if c.warning:
            text += f" Warning: {c.warning}."
        out.append(head + text)
    return [f"{a} vs {b}: {why}; no ratio and no verdict on any metric (it would compare the builds, not the "
            "platforms)." for a, b, why in refused] + out


def tested_table(comps: list[Comparison]) -> tuple[list[str], list[list[str]]]:
    header = ["metric", "comparison", "n", "ratio (95% CI)", "exact p", "Holm p", "smallest detectable ratio",
              "resolution ±", "verdict"]
    rows = []
    for c in comps:
        if not c.tested:
            continue
        ratio = f"{c.ratio:.2f} ({c.ci_low:.2f}–{c.ci_high:.2f})" if math.isfinite(c.ratio) else "– (a median is 0)"
        res = "not recorded" if math.isnan(c.resolution) else f"{fmt(c.resolution, c.unit)} {c.unit}"
        verdict = {"resolution": "below resolution", "none": "no clear difference"}.get(
            c.verdict, f"{c.verdict}: advantage {_label(c.better)}" if c.better else c.verdict)
        rows.append([f"`{c.metric}`", f"{_label(c.numerator)} / {_label(c.denominator)}", f"{c.n_num}/{c.n_den}",
                     ratio, _p(c.p), _p(c.p_holm), detectable_text(c), res, verdict])
    return header, rows


def method_note(comps: list[Comparison]) -> list[str]:
    m = sum(c.tested for c in comps)
    need = min_n(max(m, 1))
    return [
        f"Verdicts are drawn only for the headline metrics ({', '.join(_judged_present(comps))}, "
        "per scenario), between platforms that ran the same torch build, with at least "
        f"{MIN_N} successful runs a side; the other metrics are shown without a verdict.",
        f"Why {MIN_N}: below it the report prints no interval and no verdict. A bootstrap interval of a median "
        "from 3 runs can only be built from those 3 values (it is the range, and covers far less than 95%), and the "
        f"exact test cannot reach p < {ALPHA} with 3 a side (smallest p {min_p(3, 3):.2g}), nor with 4 a side after "
        f"any correction (smallest p {min_p(4, 4):.2g}); with 5 a side it can ({min_p(5, 5):.2g}).",
        "Test: the Wilcoxon–Mann–Whitney rank-sum test, two-sided, its p-value counted exactly over every split "
        "of the pooled runs (ties by midranks): no assumption about the distribution, exact at small n.",
        f"Multiple comparisons: the {m} tested comparison(s) form one family, Holm-adjusted at α = {ALPHA} "
        "(the chance of any false verdict in the family stays below α).",
        f"With {m} comparison(s), even runs that do not overlap at all need n ≥ {need} a side to pass Holm's "
        f"strictest step (α/{max(m, 1)}).",
        "Resolution: a difference of medians within the two sides' combined measurement uncertainty (the sum "
        "of each side's median per-run ±, since each ± bounds an error rather than estimating a spread) is "
        "reported as \"no clear difference (below resolution)\", whatever the test says.",
        f"Smallest detectable ratio: the ratio of medians the test would find with {POWER:.0%} power at α/m, at the "
        "comparison's n and its runs' pooled spread (1.4826 × MAD; normal noise, simulated with the exact test's "
        "critical value), and never below the resolution. A \"no clear difference\" means no difference at least "
        "that large, not no difference.",
        "Intervals: 95% percentile bootstrap of the ratio of medians (2000 resamples, seeded); they are per "
        "comparison, not adjusted for multiplicity.",
    ]


def _judged_present(comps: list[Comparison]) -> list[str]:
    present = {base_metric(c.metric) for c in comps}
    return sorted(verdict_metrics(_keys(comps)) & present) or sorted(verdict_metrics(_keys(comps)))


def _keys(comps: list[Comparison]) -> dict:
    return {(c.numerator, c.metric): None for c in comps}
