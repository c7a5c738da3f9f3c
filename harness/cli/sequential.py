"""A campaign's design, from the command line: the check that its plan can decide its primary questions
(every `poc run` and `poc smoke`), and the sequential smoke that adds rounds for the open ones within a
budget (`poc smoke --design sequential --budget 45m`).

The statistics are report/design.py's: the exact test's floor per question before anything runs, and after
each stage the e-values of the anytime-valid rule, which stay valid however many rounds are added while
looking. This module only decides what to run next and when to stop: a stage is `rounds` more rounds
(Kubernetes and Slurm once each) of the one scenario whose question is nearest its threshold, as its own campaign
(<first campaign>-seqNN) beside the first; it stops when every question is decided or the next stage
would not fit the budget, and writes design.json (the rule, the family, the stages, why it stopped, where
each question ended) into the first campaign's directory, where the report reads it.
"""
from __future__ import annotations

import glob
import math
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError, StoreError
from ..report import design as designmod

DEFAULT_BUDGET = "45m"     # the whole sequential smoke, first stage included
FIRST_STAGE_REPETITIONS = 5   # clean and kill_rank runs of the first stage: MIN_N; later stages add where open
STAGE_ROUNDS = 2          # rounds a later stage adds at most: each stage pays the platforms' preflight once
STAGE_OVERHEAD_S = 40.0   # a stage's own cost beside its runs: preflight, the report of what is open
UNKNOWN_RUN_S = 120.0     # a run of a scenario the campaign has not timed yet
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(h|m|min|s)?\s*$")


def duration(text: str) -> float:
    """'45m', '1h', '90s', '2700' -> seconds; ConfigError for anything else."""
    m = _DURATION.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"--budget {text!r} is not a duration", tip="write it as 45m, 1h, 90s or a number of seconds")
    return float(m.group(1)) * {"h": 3600, "m": 60, "min": 60, "s": 1, None: 1}[m.group(2)]


def plan_questions(cfg) -> list[designmod.Question]:
    from ..scenarios import plan

    return designmod.questions({p: plan(cfg, p) for p in cfg.platforms}, [f.kind for f in cfg.faults])


def check_plan(cfg, strict: bool, sequential: bool = False, warn: Callable[[str], None] | None = None) -> list:
    """Before anything runs: every primary question the plan cannot decide, said loudly (WARNING lines), or
    refused (strict). A sequential design adds rounds for them, so it is told, not refused."""
    warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
    qs = plan_questions(cfg)
    lines = designmod.floor_check(qs)
    if not lines:
        return qs
    hard = designmod.undecidable(qs)
    if strict and hard and not sequential:
        said = [line for line in lines if line.startswith(tuple(f"`{q.metric}`" for q in hard))]
        raise ConfigError(f"the plan cannot decide {len(hard)} primary question(s): " + "; ".join(said),
                          tip="plan more rounds (--repetitions, more faults of a kind), or run "
                              "`poc smoke --design sequential --budget 45m`, which adds rounds where needed")
    for line in lines:
        warn(f"WARNING design: {line}")
    if hard:
        warn("TIP the sequential design adds rounds for such questions (poc smoke --design sequential --budget 45m)"
             if not sequential else "TIP the sequential design adds rounds for those in its family, within the budget")
    return qs


def refuse_other_campaigns(results: Path, first: str, resume: bool) -> None:
    """The sequential smoke's report covers every campaign under --results (its stages are campaigns of their
    own): another campaign there would be counted in its verdicts."""
    if not results.exists():
        return
    others = sorted(p.parent.name for p in results.glob("*/runs.jsonl")
                    if not re.fullmatch(re.escape(first) + r"(-seq\d\d)?", p.parent.name))
    if others:
        raise ConfigError(f"--results {results} holds other campaigns ({', '.join(others)}): the sequential design's "
                          "report covers every campaign there",
                          tip="give the sequential smoke a results directory of its own")
    if not resume and (results / first / "runs.jsonl").exists():
        return   # the first stage's own check says so (add --resume)


def _durations(results: Path) -> dict[tuple[str, str], float]:
    from ..store import read_runs, runs_files

    seen: dict[tuple[str, str], list[float]] = {}
    for f in runs_files(results):
        for r in read_runs(f):
            if isinstance(r.get("started_at"), int | float) and isinstance(r.get("finished_at"), int | float):
                seen.setdefault((r.get("platform"), str(r.get("scenario"))), []).append(
                    r["finished_at"] - r["started_at"])
    return {k: statistics.median(v) for k, v in seen.items()}


def round_seconds(results: Path, scenarios: list[str], platforms: list[str]) -> dict[str, float]:
    """What one round of each scenario on these platforms took so far (median run each), or a guess; the
    results are read once for all of them."""
    took = _durations(results)
    return {s: sum(took.get((p, s), UNKNOWN_RUN_S) for p in platforms) for s in scenarios}


def own_scenario(metric: str, faults: list[str]) -> str | None:
    """The scenario whose runs alone feed a question: a fault's for its recovery, clean for cost, contention for
    the hand-over; None for a first-attempt figure, which every run of Kubernetes and Slurm feeds."""
    base, _, scen = metric.partition(":")
    if base == "recovery_free_s" and scen in faults:
        return scen
    if metric == "cost_per_step_usd":
        return "clean"
    if base.startswith("handover_s") or scen == "contention":
        return "contention"
    return None


def nearness(st: designmod.Status) -> float:
    """How far a question's e-process has come towards its threshold, in log terms (1: there), by the test nearer
    to deciding (difference, or equivalence where the figure is above its resolution)."""
    best = max(st.e_difference, st.e_equivalence if math.isfinite(st.e_equivalence) else 0.0)
    return math.log(max(best, 1e-12)) / math.log(st.threshold)


def scenarios_for(open_: dict[str, designmod.Status], faults: list[str]) -> list[str]:
    """What a stage may run, best first: one scenario a stage, the one whose own question is nearest its threshold
    (its runs feed every open first-attempt figure too, so nothing open is starved of pairs); clean where only
    first-attempt figures are open. Choosing by the e-values so far keeps each e-process valid: which rounds
    come next depends only on rounds already seen (optional continuation)."""
    own = [(nearness(st), own_scenario(m, faults)) for m, st in open_.items()]
    ranked = [scen for _, scen in sorted((o for o in own if o[1]), key=lambda o: -o[0])]
    out = list(dict.fromkeys(ranked))
    return out or (["clean"] if open_ else [])


def resumed(results: Path, first: str, fresh: designmod.Design) -> tuple[designmod.Design, int]:
    """A resumed sequential smoke: the stages the earlier command ran, and the number of the last stage's
    campaign under results (a stage it was interrupted in counts: its runs are data, its name is taken).
    The budget is this command's, added to the earlier ones'. The family must be the one fixed before the
    first run; another is a new design, not a continuation."""
    prior = designmod.read(str(results))
    names = [p.parent.name for p in results.glob(f"{glob.escape(first)}-seq[0-9][0-9]/runs.jsonl")]
    k = max((int(n[-2:]) for n in names), default=0)   # the glob already matched <first>-seqNN exactly
    if prior is None:
        return fresh, k
    if prior.family != fresh.family:
        raise ConfigError(f"--resume: the design under {results} decides {', '.join(prior.family) or 'nothing'}; "
                          f"this config's family is {', '.join(fresh.family) or 'empty'}",
                          tip="resume with the config that started it, or give a new design its own --results")
    prior.budget_s += fresh.budget_s
    prior.stopped = ""
    return prior, k


def extend(args, cfg, out, family: list[str], budget_s: float, started: float,
           run_stage: Callable, clock: Callable[[], float] = time.monotonic) -> int:
    """After the first stage: evaluate, add a stage for what is open, again, until decided or out of budget.
    run_stage(args, cfg, out) runs one campaign (cli/run.py run_campaign); returns the worst exit code."""
    from ..report import stats
    from ..report import table as tablemod
    from ..smoke import STAGE_PLATFORMS, stage_config

    results = Path(args.results)
    first = results / cfg.campaign
    des = designmod.Design(family=list(family), budget_s=budget_s,
                           stages=[{"campaign": cfg.campaign, "rounds": cfg.repetitions, "scenarios": "the plan"}])
    k = 0
    if getattr(args, "resume", False):   # go on where it stopped: the e-processes are valid at any stopping time
        des, k = resumed(results, cfg.campaign, des)
    faults = [f.kind for f in cfg.faults]
    rc = 0
    while True:
        try:
            table = tablemod.read(str(results))
        except StoreError as exc:   # the first stage recorded nothing (every platform refused, an interrupt)
            des.stopped = f"no runs to weigh: {exc.message}"
            break
        said = designmod.evaluate(table, stats.groups(table), family, des.alpha)
        des.final = {m: vars(st) for m, st in said.items()}
        open_ = [m for m, st in said.items() if st.open]
        if not open_:
            des.stopped = "every question of the family decided"
            break
        wanted = scenarios_for({m: said[m] for m in open_}, faults)
        plats = [p for p in STAGE_PLATFORMS if p in cfg.platforms]
        left = budget_s - (clock() - started) - STAGE_OVERHEAD_S
        # the best scenario whose rounds fit what is left, or, where none does, the reason named by the cheapest
        took = round_seconds(results, wanted, plats)
        fits = [scen for scen in wanted if took[scen] > 0 and left // took[scen] >= 1]
        scen = fits[0] if fits else min(wanted, key=took.get)
        rounds = min(STAGE_ROUNDS, int(left // took[scen])) if fits else 0
        if rounds <= 0:
            whole = f"; {des.budget_s / 60:g} min with the earlier command's" if des.budget_s != budget_s else ""
            des.stopped = (f"the budget ({budget_s / 60:g} min{whole}): {max(left, 0) / 60:.1f} min left, a round of "
                           f"{scen} takes about {took[scen] / 60:.1f} min")
            break
        k += 1
        name = f"{cfg.campaign}-seq{k:02d}"
        out.info(f"design: {len(open_)} question(s) open ({', '.join(open_)}): stage {k}, {rounds} round(s) of "
                 f"{scen} as campaign {name}")
        stage = stage_config(cfg, name, rounds, [scen])
        t = time.time()
        rc = max(rc, run_stage(args, stage, out))
        des.stages.append({"campaign": name, "rounds": rounds, "scenarios": [scen], "started": t, "ended": time.time()})
        designmod.write(first, des)
    designmod.write(first, des)
    still = [m for m, v in des.final.items() if v.get("verdict") == "open"]
    out.info(f"design: stopped ({des.stopped}); open: {', '.join(still) or 'none'}")
    return rc
