"""A campaign's design, from the command line: the check that its plan can decide its primary questions
(every `poc run` and `poc smoke`), and the sequential smoke that adds rounds for the open ones within a
budget (`poc smoke --design sequential --budget 45m`).

The statistics are report/design.py's: the exact test's floor per question before anything runs, and after
each stage the e-values of the anytime-valid rule, which stay valid however many rounds are added while
looking. This module only decides what to run next and when to stop: a stage is `rounds` more rounds
(Kubernetes and Slurm once each) of the scenarios that feed a question still open, as its own campaign
(<first campaign>-seqNN) beside the first; it stops when every question is decided or the next stage
would not fit the budget, and writes design.json (the rule, the family, the stages, why it stopped, where
each question ended) into the first campaign's directory, where the report reads it.
"""
from __future__ import annotations

import glob
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError, StoreError
from ..report import design as designmod

DEFAULT_BUDGET = "45m"     # the whole sequential smoke, first stage included
FIRST_STAGE_REPETITIONS = 5   # clean runs of the first stage: MIN_N; later stages add rounds where still open
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


def round_seconds(results: Path, scenarios: list[str], platforms: list[str]) -> float:
    """What one round of these scenarios on these platforms took so far (median run each), or a guess."""
    took = _durations(results)
    return sum(took.get((p, s), UNKNOWN_RUN_S) for s in scenarios for p in platforms)


def scenarios_for(open_metrics: list[str], faults: list[str]) -> list[str]:
    """The scenarios whose runs feed the open questions, the most useful first: a fault's for its recovery (its
    runs give every first-attempt figure too), clean for cost, contention for the hand-over; clean for the
    first-attempt figures where nothing else runs."""
    out: list[str] = []
    for m in open_metrics:
        base, _, scen = m.partition(":")
        if base == "recovery_free_s" and scen in faults and scen not in out:
            out.append(scen)
    if any(m == "cost_per_step_usd" for m in open_metrics):
        out.append("clean")
    if any(m.startswith("handover_s") or m.endswith(":contention") for m in open_metrics):
        out.append("contention")
    if not out and open_metrics:
        out.append("clean")
    return out


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
        wanted = scenarios_for(open_, faults)
        plats = [p for p in STAGE_PLATFORMS if p in cfg.platforms]
        left = budget_s - (clock() - started) - STAGE_OVERHEAD_S
        # every scenario an open question needs, or, where that does not fit, the most useful ones that do
        for n in range(len(wanted), 0, -1):
            scen = wanted[:n]
            one = round_seconds(results, scen, plats)
            rounds = min(STAGE_ROUNDS, int(left // one)) if one > 0 else 0
            if rounds > 0:
                break
        if rounds <= 0:
            whole = f"; {des.budget_s / 60:g} min with the earlier command's" if des.budget_s != budget_s else ""
            des.stopped = (f"the budget ({budget_s / 60:g} min{whole}): {max(left, 0) / 60:.1f} min left, a round of "
                           f"{', '.join(scen)} takes about {one / 60:.1f} min")
            break
        k += 1
        name = f"{cfg.campaign}-seq{k:02d}"
        out.info(f"design: {len(open_)} question(s) open ({', '.join(open_)}): stage {k}, {rounds} round(s) of "
                 f"{', '.join(scen)} as campaign {name}")
        stage = stage_config(cfg, name, rounds, scen)
        t = time.time()
        rc = max(rc, run_stage(args, stage, out))
        des.stages.append({"campaign": name, "rounds": rounds, "scenarios": scen, "started": t, "ended": time.time()})
        designmod.write(first, des)
    designmod.write(first, des)
    still = [m for m, v in des.final.items() if v.get("verdict") == "open"]
    out.info(f"design: stopped ({des.stopped}); open: {', '.join(still) or 'none'}")
    return rc
