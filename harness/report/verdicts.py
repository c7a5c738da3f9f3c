"""The comparisons in words: findings, the table of tested comparisons, and the method note."""
from __future__ import annotations

import math

from .compare import EDGE_REFUSED, FAMILIES, SPREAD_UNCERTAINTY, Comparison, verdict_metrics
from .equivalence import EQUIVALENCE_LEVEL, MARGIN
from .inference import ALPHA, min_p
from .sections import fmt, fmt_pm, metric_order
from .stats import MIN_N, PLATFORM_LABEL, base_metric


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def p_text(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def test_text(c: Comparison) -> str:
    """The test a row used, with the rounds it paired and which way they went."""
    if c.test == "paired":
        return (f"exact signed-rank test over {c.n_pairs} rounds, {_label(c.numerator)} higher in {c.n_higher} "
                f"of {c.n_pairs}")
    return "exact rank-sum test (unpaired)"


def effect_text(c: Comparison) -> str:
    """The ratio the test is about and its 90% interval, both bounds always: a bound in one direction only
    would hide the side the observed ratio is on."""
    if not math.isfinite(c.effect):
        return "no ratio interval (a value is not positive)"
    kind = "within-round ratio" if c.test == "paired" else "ratio of geometric means"
    if not (math.isfinite(c.eq_low) and math.isfinite(c.eq_high)):
        return f"{kind} ×{c.effect:.2f} (too few for a {EQUIVALENCE_LEVEL:.0%} interval)"
    return f"{kind} ×{c.effect:.2f} ({EQUIVALENCE_LEVEL:.0%} CI {c.eq_low:.2f}–{c.eq_high:.2f})"


def equivalence_text(c: Comparison) -> str:
    if c.verdict == "equivalent":
        return f"equivalent within ×{MARGIN:g}: {effect_text(c)} inside {1 / MARGIN:.2f}–{MARGIN:.2f}"
    return f"not shown equivalent within ×{MARGIN:g}: {effect_text(c)}"


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
        if c.verdict == "refused" and _edge_refusal(c):
            text = f"no ratio and no verdict between {a} and {b}: {c.refused}."
            out.append(head + text)
            continue
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
            text = (f"{a} is {c.verdict} than {b} by {ratio} (ratio of medians); {effect_text(c)}; "
                    f"{_medians(c, res)}; {test_text(c)}, p = {p_text(c.p)}, Holm-adjusted {p_text(c.p_holm)} "
                    f"({FAMILIES[c.family]}); advantage {_label(c.better)}.")
        elif c.verdict == "equivalent":
            text = (f"{a} and {b} are {equivalence_text(c)}; {_medians(c, res)}; {test_text(c)}, "
                    f"Holm-adjusted p = {p_text(c.p_holm)} ({FAMILIES[c.family]}).")
        else:
            text = (f"no clear difference between {a} and {b} ({test_text(c)}, Holm-adjusted p = {p_text(c.p_holm)}, "
                    f"{FAMILIES[c.family]}); {equivalence_text(c)}.")
        if c.warning:
            text += f" Warning: {c.warning}."
        out.append(head + text)
    return [f"{a} vs {b}: {why}; no ratio and no verdict on any metric (it would compare the builds, not the "
            "platforms)." for a, b, why in refused] + out


def tested_table(comps: list[Comparison]) -> tuple[list[str], list[list[str]]]:
    header = ["metric", "comparison", "family", "test", "n", "ratio of medians (95% CI)",
              f"ratio the test is about ({EQUIVALENCE_LEVEL:.0%} CI)", "exact p", "Holm p", "resolution ±", "verdict"]
    rows = []
    for c in sorted(comps, key=lambda c: (c.family != "primary", c.metric)):
        if not c.tested:
            continue
        ratio = f"{c.ratio:.2f} ({c.ci_low:.2f}–{c.ci_high:.2f})" if math.isfinite(c.ratio) else "– (a median is 0)"
        effect = (f"{c.effect:.2f} ({c.eq_low:.2f}–{c.eq_high:.2f})" if math.isfinite(c.eq_low)
                  else f"{c.effect:.2f}" if math.isfinite(c.effect) else "–")
        res = ("not applied (a within-run spread)" if base_metric(c.metric) in SPREAD_UNCERTAINTY
               else "not recorded" if math.isnan(c.resolution) else f"{fmt(c.resolution, c.unit)} {c.unit}")
        n = f"{c.n_pairs} rounds ({_label(c.numerator)} higher in {c.n_higher})" if c.test == "paired" else \
            f"{c.n_num}/{c.n_den} runs"
        verdict = {"resolution": "below resolution", "none": "no clear difference",
                   "equivalent": f"equivalent within ×{MARGIN:g}"}.get(
            c.verdict, f"{c.verdict}: advantage {_label(c.better)}" if c.better else c.verdict)
        rows.append([f"`{c.metric}`", f"{_label(c.numerator)} / {_label(c.denominator)}", c.family,
                     "signed-rank (paired)" if c.test == "paired" else "rank-sum (unpaired)", n, ratio, effect,
                     p_text(c.p), p_text(c.p_holm), res, verdict])
    return header, rows


def method_note(comps: list[Comparison]) -> list[str]:
    sizes = {f: sum(c.tested and c.family == f for c in comps) for f in FAMILIES}
    fams = "; ".join(f"{f} ({FAMILIES[f]}): {m} comparison(s)" for f, m in sizes.items() if m)
    refused = sorted({f"`{m}` between {' and '.join(_label(p) for p in sorted(pair))}: {why}"
                      for (m, pair), why in EDGE_REFUSED.items()})
    return [
        f"Verdicts are drawn only for the headline metrics ({', '.join(_judged_present(comps))}, "
        "per scenario), between platforms that ran the same torch build, with at least "
        f"{MIN_N} successful runs a side; the other metrics are shown without a verdict.",
        f"Why {MIN_N}: below it the report prints no interval and no verdict. A bootstrap interval of a median "
        "from 3 runs can only be built from those 3 values (it is the range, and covers far less than 95%), and the "
        f"exact rank-sum test cannot reach p < {ALPHA} with 3 a side (smallest p {min_p(3, 3):.2g}), nor with 4 a "
        f"side after any correction (smallest p {min_p(4, 4):.2g}); with 5 a side it can ({min_p(5, 5):.2g}).",
        "Test, paired: where both platforms ran once in each of at least "
        f"{MIN_N} rounds of an interleaved campaign (the record's `order.round`, same scenario), the runs are "
        "compared within each round, so the machine's drift over the campaign cancels: the Wilcoxon signed-rank "
        "test, two-sided, on the within-round log-ratios (on differences where a value is not positive), its "
        "p-value counted exactly over every assignment of signs. A round whose two values are equal is dropped "
        "(it says nothing about the direction); ties among the others get midranks; a round a platform ran twice "
        f"in is left out. Its smallest p-value is 2 / 2^rounds: {_rounds_for(ALPHA)} rounds are needed for p < "
        f"{ALPHA}, {_rounds_for(ALPHA / max(1, sizes['primary']))} to pass Holm's strictest step in the primary "
        "family.",
        "Test, unpaired (no rounds, or too few shared): the Wilcoxon–Mann–Whitney rank-sum test, two-sided, its "
        "p-value counted exactly over every split of the pooled runs (ties by midranks). The table's `test` "
        "column and comparisons.csv's `test` say which each comparison used.",
        f"Multiple comparisons: one Holm family per question, at α = {ALPHA} each: {fams or 'none tested'}. "
        "The chance of any false verdict stays below α within each family.",
        f"Equivalence: \"equivalent within ×{MARGIN:g}\" only where the whole {EQUIVALENCE_LEVEL:.0%} interval of "
        f"the ratio lies inside {1 / MARGIN:.2f}–{MARGIN:.2f} (two one-sided tests at 5%; the margin is "
        "`equivalence.MARGIN`), and the test found no difference (one it finds is reported as such, inside the "
        "margin or not). The interval follows the design: paired, the Hodges–Lehmann interval of the within-round "
        "log-ratios (the signed-rank test's own, distribution-free); unpaired, Welch's interval of the difference "
        "of mean logs (each side's own spread, Welch–Satterthwaite degrees of freedom). "
        "Anything else that is not a verdict is \"no clear difference\", printed with that interval in both "
        "directions: the ratios the data still allow. The intervals are per comparison, not adjusted for "
        "multiplicity.",
        "Resolution: a difference of medians within the two sides' combined measurement uncertainty (the sum "
        "of each side's median per-run ±, since each ± bounds a clock's error rather than estimating a spread) is "
        "reported as \"no clear difference (below resolution)\", whatever the test says. Not for bandwidth: its ± "
        "is the spread of the timed loop within one run, not a clock's bound; its verdict comes from the spread "
        "between runs, like the test's.",
        "`submit_to_first_step_s`: submitted → first step done by every rank, per run the sum of `queue_s` and "
        "`startup_s` (they share the allocated stamp, so the sum spans the two outer edges); its lo and hi are the "
        "sums of theirs. Its edges are the same instants on every platform, where the allocated edge between "
        "queue and startup is not.",
        *[f"Refused: {r}." for r in refused],
        "Intervals in the ratio-of-medians column: 95% percentile bootstrap (2000 resamples, seeded), each side "
        "resampled on its own; they describe, they decide nothing.",
    ]


def _rounds_for(level: float) -> int:
    """The fewest rounds at which the signed-rank test's smallest p (every round one way) is below level."""
    n = 1
    while 2 / 2 ** n >= level:
        n += 1
    return n


def _edge_refusal(c: Comparison) -> bool:
    return EDGE_REFUSED.get((base_metric(c.metric), frozenset({c.numerator, c.denominator}))) == c.refused


def _judged_present(comps: list[Comparison]) -> list[str]:
    present = {base_metric(c.metric) for c in comps}
    return sorted(verdict_metrics(_keys(comps)) & present) or sorted(verdict_metrics(_keys(comps)))


def _keys(comps: list[Comparison]) -> dict:
    return {(c.numerator, c.metric): None for c in comps}
