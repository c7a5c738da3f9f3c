"""The report's opening: what separates Kubernetes and Slurm in this campaign, what does not, and how many
runs a platform the next campaign needs to settle what is still open (power.py, from the spread observed).

Every verdict cited is one compare.py drew; this module adds none. A sentence is written only from
what the rows hold, so a campaign where nothing separates the platforms says so plainly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import conditions as condmod
from . import power
from .compare import Comparison, matched
from .decision import A, B, Row
from .equivalence import EQUIVALENCE_LEVEL, margin_of
from .sections import PLACEHOLDER_USD_PER_HOUR, fmt, is_placeholder
from .stats import MIN_N, PLATFORM_LABEL, Groups
from .table import RunTable
from .verdicts import floor_of, n_of, p_text, unit_of

TITLE = "Bottom line"
NEXT = "To settle what is open, run next"
BIG = 1000   # past this many runs, a number says less than "a difference that small"


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


@dataclass(frozen=True)
class Spread:
    """What the campaign saw of one comparison's log-ratio: its centre, spread and how many it rests on."""
    delta: float        # mean log(Kubernetes / Slurm), or mean Kubernetes - Slurm where a value is not positive
    sd: float           # its standard deviation (within rounds when paired, pooled over sides when not)
    n: int              # rounds (paired) or the smaller side's runs
    paired: bool
    logs: bool = True   # False: differences in the metric's unit (a 0 s queue has no ratio), as the test does


def spread(table: RunTable, gs: Groups, c: Comparison) -> Spread | None:
    """The observed log-ratio's spread (the difference's, where a value is not positive), paired by round
    where the campaign has 2 or more shared rounds; None where a side has fewer than 2 runs."""
    a, b = gs.get((c.numerator, c.metric)), gs.get((c.denominator, c.metric))
    if a is None or b is None:
        return None
    logs = bool((a.values > 0).all() and (b.values > 0).all())
    f = np.log if logs else np.asarray
    x, y = matched(table, a, b)
    if x.size >= 2:
        d = f(x) - f(y)
        return Spread(float(d.mean()), float(d.std(ddof=1)), int(x.size), True, logs)
    la, lb = f(a.values), f(b.values)
    if la.size < 2 or lb.size < 2:
        return None
    pooled = math.sqrt(((la.size - 1) * la.var(ddof=1) + (lb.size - 1) * lb.var(ddof=1)) / (la.size + lb.size - 2))
    return Spread(float(la.mean() - lb.mean()), pooled, int(min(la.size, lb.size)), False, logs)


def next_run(c: Comparison, s: Spread | None, alpha: float = power.ALPHA) -> str:
    """One comparison's runs needed, in a line: to resolve the observed difference, or to show equivalence.
    alpha: the level the difference must reach (Holm's strictest step, so the answer survives the family)."""
    head = f"`{c.metric}`"
    if s is None:
        have = min(c.n_num, c.n_den)
        return (f"{head}: {have} run{' a side shows' if have == 1 else 's a side show'} no spread to project "
                f"from; run at least {power.floor(True, alpha)} rounds (both platforms once each) to see one")
    unit = "rounds" if s.paired else "runs a platform"
    over = f"over {s.n} {'rounds' if s.paired else 'runs a side'}"
    seen = (f"mean ratio ×{math.exp(s.delta):.2f} {over}, sd of the log-ratio {s.sd:.2f}" if s.logs else
            f"mean difference {fmt(s.delta, c.unit)} {c.unit} {over}, sd {fmt(s.sd, c.unit)} {c.unit}")
    margin = margin_of(c.metric)
    diff = power.n_difference(s.delta, s.sd, s.paired, alpha=alpha)
    equiv = power.n_equivalence(s.delta, s.sd, margin, s.paired, alpha=alpha) if s.logs else None
    parts = []
    if diff is not None:
        parts.append(f"over {BIG:,} {unit}: a difference that small" if diff > BIG
                     else f"{diff} {unit} to resolve a difference that size")
    if equiv is not None:
        parts.append(f"{equiv} to show equivalence within ×{margin:g}")
    text = f"{head} ({seen}): " + (", or ".join(parts) or "no difference seen to resolve")
    if equiv is None:
        text += (f" (equivalence within ×{margin:g} out of reach at that ratio)" if s.logs
                 else " (no ratio margin: a value is not above its resolution)")
    return text


def _cite(c: Comparison) -> str:
    ratio = (f"×{c.effect:.2f} ({EQUIVALENCE_LEVEL:.0%} CI {c.eq_low:.2f}–{c.eq_high:.2f})"
             if math.isfinite(c.effect) and math.isfinite(c.eq_low) else f"×{c.ratio:.2f}")
    return (f"`{c.metric}` {_label(A)} {fmt(c.median_num, c.unit)} vs {_label(B)} {fmt(c.median_den, c.unit)} "
            f"{c.unit}".rstrip() + f", {_label(A)} / {_label(B)} {ratio}, Holm p {p_text(c.p_holm)}")


def _open_why(c: Comparison, named: bool) -> str:
    head = f"`{c.metric}` " if named else ""
    if c.verdict == "few":
        n = (f"{c.n_num} run{'s' if c.n_num != 1 else ''} a side" if c.n_num == c.n_den
             else f"{c.n_num} and {c.n_den} runs")
        return f"{head}{n}, below {MIN_N}"
    return head + _why(c)


def _why(c: Comparison) -> str:
    if c.verdict == "resolution":
        return "within the clocks' resolution"
    if c.verdict == "direction":
        ratio = f"×{c.effect:.2f}" if math.isfinite(c.effect) else f"×{c.ratio:.2f}" if math.isfinite(c.ratio) else ""
        if c.sequential:   # the rule that decides is the e-value's, not the fixed-n test's floor
            return (f"consistent direction {ratio}, undecided at n = {n_of(c)}: e-value {c.e_value:.3g} of the "
                    f"{c.e_threshold:g} the sequential rule needs").replace("  ", " ")
        return (f"consistent direction {ratio}, undecided at n = {n_of(c)}: needs "
                f"{max(c.needs, floor_of(c))} {unit_of(c)}").replace("  ", " ")
    if c.verdict == "none":
        return f"×{c.effect:.2f}, Holm p {p_text(c.p_holm)}" if math.isfinite(c.effect) else \
            f"Holm p {p_text(c.p_holm)}"
    return c.verdict


def placeholder_flag(table: RunTable) -> str:
    """What the opening adds to "cost" when its price is the placeholder: the opening is all some readers see,
    and "equivalent on cost" there is a ratio of billed time, not of anyone's prices. "" for real prices."""
    flagged = [p for p in (B, A) if p in table.pricing and is_placeholder(table.pricing[p])]
    if not flagged:
        return ""
    return (f"priced at the placeholder {PLACEHOLDER_USD_PER_HOUR:g} USD per unit-hour"
            + (" on both" if len(flagged) == 2 else f" on {_label(flagged[0])}"))


def family_size(comps: list[Comparison]) -> int:
    """The Kubernetes-vs-Slurm tests Holm adjusts together: a new verdict must pass alpha / this at worst."""
    return max(1, sum(c.tested and c.family == "primary" for c in comps))


def paragraphs(rs: list[Row], table: RunTable, gs: Groups, comps: list[Comparison],
               host=None) -> tuple[list[str], list[str], str]:
    """(sentences, next-run lines, the power assumption line) for the opening section. host: the campaign's
    host load (conditions.HostState over every run), said first when it was busy or not recorded."""
    wins = [(r, c) for r in rs for c in r.comps if c.better in (A, B)]
    same = [r.criterion for r in rs if r.comps and all(c.verdict == "equivalent" for c in r.comps if c.tested)
            and any(c.tested for c in r.comps)]
    open_: list[tuple[Row, Comparison]] = [(r, c) for r in rs for c in r.comps
                                           if c.verdict in ("none", "few", "resolution", "direction")]
    directions = [(r, c) for r, c in open_ if c.verdict == "direction"]
    won = {r.criterion for r, _ in wins}
    flag = placeholder_flag(table)

    def name(criterion: str, why: tuple[str, ...] | list[str] = ()) -> str:   # cost's placeholder price flagged
        said = [*why, flag] if criterion == "cost" and flag else list(why)
        return f"{criterion} ({'; '.join(said)})" if said else criterion
    described = [r.criterion for r in rs if r.measured and not r.comps and not r.tested_apart]
    apart = [(r.criterion, p, text) for r in rs for p, text in r.wins_apart]
    missing = [r.criterion for r in rs if not r.measured]
    tested = any(c.tested for r in rs for c in r.comps)
    out = []
    if host is not None and host.state in ("busy", "noted", "unknown"):
        out.append(("**Busy host**: " if host.flagged else "**Host load**: ") + host.text()
                   + ("; every verdict below carries the flag, and its spreads and ratios may show the host rather "
                      "than the platforms." if host.flagged else "."))
    def unequal(r: Row) -> str:
        """A verdict on a row whose platforms ran under unequal conditions says so where it is cited."""
        names = [c.name for c in condmod.unequal(r.conditions)]
        return f" (under unequal conditions: {', '.join(names)}; see its row)" if names else ""
    if wins:
        for p in (B, A):
            mine = [(r, c) for r, c in wins if c.better == p]
            if mine:
                out.append(f"{_label(p)} is ahead on "
                           + "; on ".join(f"{name(r.criterion)}: {_cite(c)}{unequal(r)}" for r, c in mine) + ".")
    elif directions:
        out.append("No criterion reached a verdict on the campaign's runs; "
                   + "; ".join(f"{r.criterion} shows a consistent direction that {n_of(c)} {unit_of(c)} could not "
                               f"decide (`{c.metric}` {_why(c)})" for r, c in directions) + ".")
    elif not tested:
        out.append(f"Nothing separates Kubernetes and Slurm in this campaign, and it could not: no criterion has the "
                   f"{MIN_N} runs a side a test needs.")
    else:
        out.append("Nothing separates Kubernetes and Slurm in this campaign: no criterion it tested shows a "
                   "difference, and every interval includes 1.")
    for p in (B, A):
        mine = [(crit, text) for crit, q, text in apart if q == p]
        for crit in dict.fromkeys(c for c, _ in mine):
            out.append(f"{_label(p)} is ahead on {crit}, tested across several job traces replayed below both "
                       "platforms' measured placement ceilings (apart from the runs): "
                       + "; ".join(t for c, t in mine if c == crit) + ".")
    for r in rs:      # a criterion tested apart (queue at scale) whose sets could not all be tested says why
        if r.notes_apart:
            out.append(f"{r.criterion[0].upper()}{r.criterion[1:]} has no verdict from "
                       + ("the other replay sets" if r.wins_apart else "the campaign's replays") + ": "
                       + "; ".join(r.notes_apart) + ".")
    rest = []
    if same:
        rest.append("equivalent on " + ", ".join(
            name(k, [f"within ×{c.margin:g}" for c in r.comps if c.verdict == "equivalent"][:1])
            for r in rs for k in [r.criterion] if k in same))
    undecided: dict[str, list[str]] = {}
    for r, c in open_:
        if r.criterion not in won:
            undecided.setdefault(r.criterion, []).append(_open_why(c, sum(x in r.comps for _, x in open_) > 1))
    if undecided:
        rest.append("undecided on " + ", ".join(name(k, v) for k, v in undecided.items()))
    if rest:
        out.append(("They are " if wins else "The platforms are ") + "; ".join(rest) + ".")
    tail = []
    if described:
        tail.append(f"described without a test: {', '.join(described)}")
    if missing:
        tail.append(f"not measured: {', '.join(missing)}")
    if tail:
        line = "; ".join(tail) + "."
        out.append(line[0].upper() + line[1:])
    k = family_size(comps)
    alpha = power.ALPHA / k
    nxt = [f"{r.criterion}: {next_run(c, spread(table, gs, c), alpha)}" for r, c in open_
           if c.verdict != "resolution"]
    return out, nxt, power.assumption(alpha, k)


def design_text(design) -> str:
    """What a sequential campaign did: its rule, its stages, why it stopped, and what stayed open."""
    rounds = sum(st.get("rounds", 0) for st in design.stages[1:])
    open_ = [(k, v) for k, v in design.final.items() if v.get("verdict") == "open"]
    text = (f"Design: sequential (anytime-valid e-values, e-Bonferroni over {len(design.family)} questions at "
            f"α {design.alpha:g}: an e-value of {design.threshold:g} decides); {len(design.stages)} stage(s), "
            f"{rounds} round(s) added after the first; stopped: {design.stopped or 'not recorded'}.")
    def said(k: str, v: dict) -> str:
        eq = v.get("e_equivalence")
        return (f"`{k}` (e-value {v.get('e_difference', math.nan):.3g} against no difference"
                + (f", {eq:.3g} against not equivalent" if isinstance(eq, float) and math.isfinite(eq) else "")
                + f" after {v.get('rounds')} rounds)")
    if open_:
        text += " Still open: " + "; ".join(said(k, v) for k, v in open_) + "."
    return text


def section(rs: list[Row], table: RunTable, gs: Groups, comps: list[Comparison], host=None,
            design=None) -> tuple[str, list]:
    """The opening section's blocks: the sentences, the next runs as a list, the assumption in one line."""
    says, nxt, assumed = paragraphs(rs, table, gs, comps, host)
    if design is not None and design.family:
        says.insert(1 if host is not None and host.state in ("busy", "noted", "unknown") else 0, design_text(design))
    blocks: list = [("p", s) for s in says]
    if nxt:
        blocks += [("p", f"{NEXT} (per platform):"), ("ul", nxt), ("small", assumed)]
    else:
        blocks.append(("p", f"{NEXT}: nothing is open that more runs of this kind would settle."))
    return TITLE, blocks
