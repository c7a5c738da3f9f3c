"""A campaign's design: whether its plan can decide its primary questions at all, and a sequential rule
that adds rounds only for the questions still open.

The primary questions are Kubernetes against Slurm on the verdict metrics (compare.VERDICT_METRICS), one per
metric key a plan's scenarios feed. Each is tested within rounds by the exact signed-rank test and
adjusted by Holm over the family, so no outcome can decide a question with fewer rounds than the test's
floor: its smallest two-sided p-value is 2 / 2^n (every round one way), and Holm's strictest step asks
for p < alpha / m over m questions. With 7 questions that is 9 rounds; 5 rounds can never pass
(2/32 = 0.0625 against 0.0071). `floor_check` says so before a campaign runs.

The sequential design (`poc smoke --design sequential --budget 45m`) runs the plan, then keeps adding
rounds (both schedulers once each) only of the scenarios that feed a question still open, until each is
decided or the next round would not fit the budget. Looking at the data between rounds and stopping
when it looks good makes a fixed-n p-value invalid; the design's verdicts come instead from an
anytime-valid test (Ramdas, Grünwald, Vovk & Shafer 2023, "Game-theoretic statistics and safe
anytime-valid inference", Statistical Science 38(4)): per question a test martingale (an e-process)

    E_n = prod_{i <= n} (1 + lambda_i x_i),   x_i = clip((d_i - c) / s, -1, 1)

over the rounds in the order they ran, d_i the round's log-ratio (its difference where a value is not
above its resolution), c the null's centre, s = ln(the metric's margin) its scale (0 for differences:
the sign alone). Under the null that d is symmetric about c given the past (the signed-rank test's own:
the two platforms' runs of a round are exchangeable), E[x_i | |d_i - c|] = 0, so E is a non-negative
martingale from 1 whatever the betting fraction lambda_i, chosen from the rounds before i alone
(Krichevsky-Trofimov's rule, lambda_i = sum x_j / (1 + sum x_j^2), j < i, clipped to +-0.95; for
signs it bets the running share). Ville's inequality gives P(E_n >= 1/a for some n) <= a under the
null, at every stopping time, however the rounds were added. Over m questions at level alpha the
threshold is m / alpha (e-values' Bonferroni: Vovk & Wang 2021, "E-values: calibration, combination
and applications", Annals of Statistics 49(3)). A difference is shown when E (c = 0, lambda either
sign) reaches it; equivalence within the margin m when both one-sided e-processes (c = +ln m with
lambda >= 0 on the lower side, c = -ln m with lambda >= 0 on the upper) reach it (two one-sided tests,
each at alpha / m). A question that reaches neither stays open, with the reason: the budget.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import StoreError
from ..store import bounded, runs_files
from . import power
from .compare import CLEAN_ONLY, VERDICT_METRICS, above_resolution, matched_u
from .equivalence import margin_of
from .inference import ALPHA
from .stats import MIN_N, Groups, metric_key
from .table import RunTable

A, B = "k8s", "slurm"
DESIGN_FILE = "design.json"
LAMBDA_MAX = 0.95
# the verdict metrics a training run of any scenario gives (its first attempt's); the others as named
ANY_RUN = ("queue_s", "startup_s", "submit_to_first_step_s", "allreduce_avg_busbw_gbps", "first_log_s")


# ------------------------------------------------------------------ the plan's floor

@dataclass(frozen=True)
class Question:
    metric: str                  # the metric key, "recovery_free_s:kill_rank"
    rounds: int                  # rounds the plan pairs Kubernetes with Slurm on it
    scenarios: tuple[str, ...]   # the scenarios whose runs feed it


def feeds(scenario: str, faults: Iterable[str]) -> list[str]:
    """The primary metric keys one training run of a scenario gives."""
    if scenario != "clean" and scenario not in faults and scenario != "contention":
        return []
    names = [*ANY_RUN] + (["cost_per_step_usd"] if scenario == "clean" else []) \
        + (["recovery_free_s"] if scenario in faults else []) + (["handover_s"] if scenario == "contention" else [])
    keys = []
    for n in names:
        k = "recovery_free_s:" + scenario if n == "recovery_free_s" else metric_key(n, scenario)
        if k is not None and (n not in CLEAN_ONLY or k == n) and n in VERDICT_METRICS:
            keys.append(k)
    return keys


def questions(plans: dict[str, list], faults: Iterable[str]) -> list[Question]:
    """Per primary metric key, the rounds in which both schedulers run a scenario that feeds it. plans:
    platform -> its planned runs in plan order (scenarios.plan), round k being each platform's k-th."""
    faults = set(faults)
    a, b = plans.get(A) or [], plans.get(B) or []
    rounds: dict[str, int] = {}
    scen: dict[str, list[str]] = {}
    for pa, pb in zip(a, b, strict=False):
        if pa.scenario != pb.scenario:
            continue
        for k in feeds(pa.scenario, faults):
            rounds[k] = rounds.get(k, 0) + 1
            scen.setdefault(k, [])
            if pa.scenario not in scen[k]:
                scen[k].append(pa.scenario)
    return [Question(k, n, tuple(scen[k])) for k, n in sorted(rounds.items())]


def family(qs: list[Question]) -> list[Question]:
    """The questions the report will test: MIN_N rounds or more."""
    return [q for q in qs if q.rounds >= MIN_N]


def undecidable(qs: list[Question], alpha: float = ALPHA) -> list[Question]:
    """The questions the report will test (MIN_N rounds or more) whose rounds stay below the exact test's floor."""
    floor = power.floor(True, alpha / max(1, len(family(qs))))
    return [q for q in family(qs) if q.rounds < floor]


def floor_check(qs: list[Question], alpha: float = ALPHA) -> list[str]:
    """One line per primary question its plan cannot decide whatever the runs show; [] when every one can."""
    fam = family(qs)
    m = max(1, len(fam))
    floor = power.floor(True, alpha / m)
    out = []
    few = [q for q in qs if q.rounds < MIN_N]
    if few:
        out.append(f"{len(few)} question(s) get fewer than {MIN_N} rounds, so the report draws no verdict on them "
                   "(one-off scenarios, descriptive by design): "
                   + ", ".join(f"`{q.metric}` ({q.rounds})" for q in few))
    for q in undecidable(qs, alpha):
        out.append(f"`{q.metric}` gets {q.rounds} rounds: the exact signed-rank test's smallest p at {q.rounds} "
                   f"rounds is 2/2^{q.rounds} = {2 / 2 ** q.rounds:.3g}, above Holm's strictest step "
                   f"{alpha:g}/{m} = {alpha / m:.2g}, so no outcome can decide it; it needs {floor} rounds")
    return out


# ------------------------------------------------------------------ the sequential rule

def e_process(d: Iterable[float], centre: float = 0.0, scale: float = 0.0, side: int = 0) -> list[float]:
    """E after each round: prod (1 + lambda_i x_i), x_i = clip((d_i - centre) / scale, -1, 1) (the sign where scale
    is 0), lambda_i from the earlier rounds (Krichevsky-Trofimov), any sign (side 0) or only side's (+1: bets that d
    lies above centre, -1: below). A round with d exactly at the centre bets nothing."""
    out, e, sx, sxx = [], 1.0, 0.0, 0.0
    for v in d:
        if not math.isfinite(v):
            out.append(e)
            continue
        z = v - centre
        x = float(np.sign(z)) if scale <= 0 else max(-1.0, min(1.0, z / scale))
        lam = sx / (1.0 + sxx)
        lam = max(-LAMBDA_MAX, min(LAMBDA_MAX, lam))
        if side:
            lam = max(0.0, side * lam) * side
        e *= 1.0 + lam * x
        sx, sxx = sx + x, sxx + x * x
        out.append(e)
    return out


@dataclass
class Status:
    """Where one question stands under the sequential rule."""
    metric: str
    rounds: int
    logs: bool
    e_difference: float
    e_equivalence: float           # the smaller of the two one-sided e-values (both must pass)
    threshold: float
    verdict: str                   # difference | equivalent | open
    direction: str = ""            # "higher" | "lower": the numerator's, where a difference is shown

    @property
    def open(self) -> bool:
        return self.verdict == "open"


def status(metric: str, x: np.ndarray, y: np.ndarray, ux: np.ndarray, uy: np.ndarray, threshold: float) -> Status:
    """The sequential rule on one question's within-round pairs (numerator x, denominator y), in run order."""
    logs = above_resolution(x, ux) and above_resolution(y, uy)
    d = np.log(x / y) if logs else x - y
    scale = math.log(margin_of(metric)) if logs else 0.0
    diff = e_process(d, 0.0, scale)[-1] if d.size else 1.0
    if logs:
        lower = e_process(d, -scale, scale, side=+1)[-1] if d.size else 1.0   # against "ratio <= 1/m"
        upper = e_process(d, scale, scale, side=-1)[-1] if d.size else 1.0    # against "ratio >= m"
        equiv = min(lower, upper)
    else:
        equiv = math.nan
    if diff >= threshold:
        verdict = "difference"
    elif logs and equiv >= threshold:
        verdict = "equivalent"
    else:
        verdict = "open"
    way = ("higher" if float(np.median(d)) > 0 else "lower") if verdict == "difference" else ""
    return Status(metric, int(d.size), logs, diff, equiv, threshold, verdict, way)


def evaluate(table: RunTable, gs: Groups, metrics: list[str], alpha: float = ALPHA) -> dict[str, Status]:
    """Every design question's status from the campaign's runs so far (pairs in campaign, then round, order)."""
    threshold = max(1, len(metrics)) / alpha
    out = {}
    for k in metrics:
        a, b = gs.get((A, k)), gs.get((B, k))
        if a is None or b is None:
            out[k] = Status(k, 0, False, 1.0, math.nan, threshold, "open")
            continue
        out[k] = status(k, *matched_u(table, a, b), threshold)
    return out


def apply(comps: list, table: RunTable, gs: Groups, design: Design | None) -> list:
    """A sequential campaign's comparisons: the design's questions take their verdict from the e-values (the
    fixed-n p-values stay, described, not deciding: rounds were added while looking). Others are as drawn."""
    if design is None or not design.family:
        return comps
    from dataclasses import replace

    from .compare import consistent

    said = evaluate(table, gs, design.family, design.alpha)
    out = []
    for c in comps:
        st = said.get(c.metric)
        if st is None or (c.numerator, c.denominator) != (A, B) or not c.tested:
            out.append(c)
            continue
        fields = {"e_value": st.e_difference, "e_equiv": st.e_equivalence, "e_threshold": st.threshold,
                  "family_size": len(design.family), "needs": 0}
        if st.verdict == "equivalent":   # within the margin, decided: a difference below the clocks' resolution too
            verdict = "equivalent"
        elif c.verdict == "resolution":   # a difference the clocks cannot tell apart is not shown
            verdict = "resolution"
        elif st.verdict == "difference":
            verdict = st.direction
        else:
            verdict = "direction" if consistent(asdict(c)) else "none"
        out.append(replace(c, verdict=verdict, **fields))
    return out


# ------------------------------------------------------------------ the design's record

@dataclass
class Design:
    """What a sequential campaign did, stored as design.json in its first campaign's directory."""
    rule: str = "sequential e-values (test martingales), e-Bonferroni over the family"
    alpha: float = ALPHA
    family: list[str] = field(default_factory=list)      # the questions' metric keys, fixed before any run
    budget_s: float = 0.0
    stages: list[dict] = field(default_factory=list)     # {campaign, rounds, scenarios, started, ended}
    stopped: str = ""                                    # why no more rounds were added
    final: dict[str, dict] = field(default_factory=dict)  # metric -> Status as a dict

    @property
    def threshold(self) -> float:
        return max(1, len(self.family)) / self.alpha

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Design:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def write(campaign_dir: Path, design: Design) -> Path:
    from ..store import atomic_write

    path = Path(campaign_dir) / DESIGN_FILE
    atomic_write(path, json.dumps(design.to_json(), indent=2) + "\n")
    return path


def read(results_dir: str) -> Design | None:
    """The sequential design that made the campaigns under a results dir, if one did."""
    try:
        files = runs_files(results_dir)
    except StoreError:
        return None
    for f in files:
        path = f.parent / DESIGN_FILE
        if path.exists():
            try:   # within the reading limits: a results dir is anyone's to write
                return Design.from_json(bounded.load_json(path, bounded.MAX_META_BYTES))
            except (StoreError, ValueError, TypeError, AttributeError, KeyError):
                return None
    return None
