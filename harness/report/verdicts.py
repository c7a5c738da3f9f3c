"""The comparisons in words: findings, the table of tested comparisons, and the method note."""
from __future__ import annotations

import math

from . import power
from .compare import CLEAN_ONLY, EDGE_REFUSED, FAMILIES, SPREAD_UNCERTAINTY, Comparison, verdict_metrics
from .equivalence import EQUIVALENCE_LEVEL, MARGINS
from .inference import ALPHA, min_p
from .sections import fmt, fmt_pm, metric_order
from .stats import MIN_N, PLATFORM_LABEL, base_metric


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def p_text(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def test_text(c: Comparison) -> str:
    """The test a row used, with the rounds it paired and which way they went; a sequential campaign's
    e-values, which decide there (report/design.py)."""
    if c.test == "paired":
        text = (f"exact signed-rank test over {c.n_pairs} rounds, {_label(c.numerator)} higher in {c.n_higher} "
                f"of {c.n_pairs}")
    else:
        text = "exact rank-sum test (unpaired)"
    if c.sequential:
        text += (f"; sequential rule: e-value {c.e_value:.3g} against no difference"
                 + (f", {c.e_equiv:.3g} against not equivalent" if math.isfinite(c.e_equiv) else "")
                 + f", {c.e_threshold:g} needed ({c.family_size} questions / α {ALPHA:g}); the p-values are "
                 "described, not deciding: rounds were added while looking")
    return text


def effect_text(c: Comparison) -> str:
    """The ratio the test is about and its 90% interval, both bounds always: a bound in one direction only
    would hide the side the observed ratio is on."""
    if not math.isfinite(c.effect):
        return ("no ratio interval (a value is not above its own resolution: tested on differences)"
                if c.tested else "no ratio interval (a value is not positive)")
    kind = "within-round ratio" if c.test == "paired" else "ratio of geometric means"
    if not (math.isfinite(c.eq_low) and math.isfinite(c.eq_high)):
        return f"{kind} ×{c.effect:.2f} (too few for a {EQUIVALENCE_LEVEL:.0%} interval)"
    return f"{kind} ×{c.effect:.2f} ({EQUIVALENCE_LEVEL:.0%} CI {c.eq_low:.2f}–{c.eq_high:.2f})"


def _tost(c: Comparison) -> str:
    if not math.isfinite(c.p_equiv):
        return ""
    return f"; two one-sided tests p {p_text(c.p_equiv)}, Holm p {p_text(c.p_equiv_holm)}"


def equivalence_text(c: Comparison) -> str:
    """Equivalence against the metric's own margin, multiplicity-controlled like a difference (compare.py)."""
    m = c.margin if math.isfinite(c.margin) else MARGINS.get("", (1.25, ""))[0]
    if c.verdict == "equivalent":
        return f"equivalent within ×{m:g}: {effect_text(c)} inside {1 / m:.2f}–{m:.2f}{_tost(c)}"
    return f"not shown equivalent within ×{m:g}: {effect_text(c)}{_tost(c)}"


def unit_of(c: Comparison) -> str:
    return "rounds" if c.test == "paired" else "runs a side"


def n_of(c: Comparison) -> int:
    return c.n_pairs if c.test == "paired" else min(c.n_num, c.n_den)


def floor_of(c: Comparison) -> int:
    """The fewest rounds (runs a side) at which the exact test can pass Holm's strictest step at all."""
    return power.floor(c.test == "paired", ALPHA / max(1, c.family_size))


def direction_text(c: Comparison) -> str:
    """A direction the intervals show that the test could not pass: never "no difference". Why it stays
    undecided: below the exact test's floor no outcome can pass Holm's threshold; above it, the spread."""
    a = _label(c.numerator)
    if c.test == "paired":
        way = "higher" if c.n_higher >= c.n_lower else "lower"
        seen = f"{a} {way} in {max(c.n_higher, c.n_lower)} of {c.n_pairs} rounds"
    else:
        seen = f"{a} {'higher' if c.ratio > 1 else 'lower'}"
    effect = effect_text(c) if math.isfinite(c.effect) else (
        f"ratio of medians ×{c.ratio:.2f} (95% CI {c.ci_low:.2f}–{c.ci_high:.2f})" if math.isfinite(c.ratio) else "")
    n, floor, k = n_of(c), floor_of(c), max(1, c.family_size)
    threshold = f"Holm's threshold {ALPHA / k:.2g} (= {ALPHA:g} / {k})" if k > 1 else f"α = {ALPHA:g}"
    if c.sequential:
        return (f"consistent direction ({seen}" + (f"; {effect}" if effect else "") + f"), undecided after {n} "
                f"{unit_of(c)}: its e-value {c.e_value:.3g} is below the {c.e_threshold:g} the sequential rule needs")
    if n < floor:
        smallest = (f"2/2^{n} = {2 / 2 ** n:.3g}" if c.test == "paired" else f"{min_p(n, n):.3g}")
        why = (f"the exact {'signed-rank' if c.test == 'paired' else 'rank-sum'} test cannot reach {threshold} "
               f"below {floor} {unit_of(c)} (its smallest p at {n} is {smallest})")
    else:
        why = f"at the spread seen the test needs more to pass {threshold}"
    needs = max(c.needs, floor)
    return (f"consistent direction ({seen}" + (f"; {effect}" if effect else "") + f"), undecided at n = {n}: "
            f"{why}; needs {needs} {unit_of(c)}")


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
        elif c.verdict == "direction":
            text = (f"{direction_text(c)}; {_medians(c, res)}; {test_text(c)}, Holm-adjusted p = "
                    f"{p_text(c.p_holm)} ({FAMILIES[c.family]}); {equivalence_text(c)}.")
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
              f"ratio the test is about ({EQUIVALENCE_LEVEL:.0%} CI)", "exact p", "Holm p", "margin",
              "equivalence: TOST p, Holm p", "resolution ±", "verdict"]
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
        undecided = (f"e-value {c.e_value:.3g} of {c.e_threshold:g}" if c.sequential
                     else f"needs {max(c.needs, floor_of(c))} {unit_of(c)}")
        verdict = {"resolution": "below resolution", "none": "no clear difference",
                   "equivalent": f"equivalent within ×{c.margin:g}",
                   "direction": f"consistent direction, undecided: {undecided}"}.get(
            c.verdict, f"{c.verdict}: advantage {_label(c.better)}" if c.better else c.verdict)
        tost = f"{p_text(c.p_equiv)}, {p_text(c.p_equiv_holm)}" if math.isfinite(c.p_equiv) else "– (no ratio)"
        rows.append([f"`{c.metric}`", f"{_label(c.numerator)} / {_label(c.denominator)}", c.family,
                     "signed-rank (paired)" if c.test == "paired" else "rank-sum (unpaired)", n, ratio, effect,
                     p_text(c.p), p_text(c.p_holm), f"×{c.margin:g}", tost, res, verdict])
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
        "Equivalence: \"equivalent within ×m\" only where two one-sided tests (TOST) against the metric's own "
        "margin m both reject, and only after the same Holm adjustment as the differences: each question's "
        "\"no difference\" and \"not equivalent\" are two hypotheses of one family, of which at most one per "
        "question can be true, so Holm's step divides α by min(the questions tested, the hypotheses left) "
        "(Shaffer 1986). Paired: the exact signed-rank test of the within-round log-ratios against ±ln m, each "
        "one-sided; unpaired: Welch's t on the logs, each one-sided. The margins and why: "
        + "; ".join(f"`{k}` ×{v[0]:g} ({v[1]})" for k, v in MARGINS.items()) + "; any other ×1.25. "
        f"The {EQUIVALENCE_LEVEL:.0%} interval printed beside each ratio is the unadjusted one (Hodges–Lehmann "
        "within rounds, Welch on the logs unpaired): the ratios the data still allow.",
        "Wording: a comparison the test did not decide reads \"consistent direction, undecided at n = N: needs M "
        "rounds\" where every round went one way or an interval excludes 1 (the data show a direction the design "
        "could not confirm), and \"no clear difference\" only where the intervals include 1. Below the exact "
        "test's floor (2/2^n paired, 2/C(2n, n) unpaired) no outcome at all can pass Holm's threshold; M is that "
        "floor or, above it, the normal-approximation n at the spread seen.",
        "Ratios of values above their own resolution only: where a run's value lies within its ± of 0 (a "
        "queue of 0.03 s known to 0.05 s), the comparison is tested on differences in the metric's unit and "
        "neither a ratio interval nor equivalence is drawn from it.",
        "Recovery is judged on `recovery_free_s`: `recovery_s` less the stretches a cluster setting sets "
        "(Slurm's requeue hold and the wait for a scheduling pass, a lost node's detection; Kubernetes' node "
        "grace period and pod toleration), as each run's own records measured them (report/defaults.py); "
        "`recovery_s` at the site's settings is shown beside it, not judged. "
        + ", ".join(f"`{m}`" for m in sorted(CLEAN_ONLY)) + " is judged on clean runs only: a fault run's "
        "would ask recovery's question a second time in the same family.",
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
