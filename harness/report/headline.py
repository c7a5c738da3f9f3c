"""The headline table, grouped by the criterion each metric informs, with the rows too thin for an interval
(fewer than MIN_N runs on every platform: one contention run, a fault run or two) folded apart."""
from __future__ import annotations

from .compare import Comparison
from .sections import headline_cell, metric_order, ratio_cell
from .stats import MIN_N, PLATFORM_LABEL, SummaryRow, platform_sort_key

ORDER = ["queue", "startup", "all-reduce and steps", "recovery", "contention", "cost", "user experience",
         "upgrades", "inference", "other"]
_BY_BASE = {"queue_s": "queue", "queue_admission_s": "queue", "startup_s": "startup", "launch_s": "startup",
            "rendezvous_s": "startup", "first_step_s": "startup", "submit_to_first_step_s": "startup",
            "image_pull_s": "startup",   # Kubernetes, inside launch_s
            "allreduce_busbw_gbps": "all-reduce and steps", "allreduce_avg_busbw_gbps": "all-reduce and steps",
            "sweep_s": "all-reduce and steps", "step_time_s": "all-reduce and steps", "handover_s": "contention",
            "first_log_s": "user experience", "goodput": "cost",
            "samples_per_s": "all-reduce and steps", "tokens_per_s": "all-reduce and steps",
            "mfu": "all-reduce and steps", "straggler_ratio": "all-reduce and steps",
            # beside recovery: a restart's read is part of recovery_checkpoint_load_s
            "checkpoint_save_s": "recovery", "checkpoint_load_s": "recovery"}


def criterion_of(key: str) -> str:
    """queue_s:contention belongs to contention, cost_per_step_usd:kill_rank to recovery: a scenario other
    than the clean one names what the run was about."""
    base, _, scenario = key.partition(":")
    if scenario == "contention" or base == "handover_s":
        return "contention"
    if scenario or base.startswith(("recovery", "resume")) or base == "lost_steps":
        return "recovery"
    if base.startswith("cost") or base == "recovery_cost_usd":
        return "cost"
    if base.startswith("upgrade_"):
        return "upgrades"
    if base.startswith("serve_"):
        return "inference"
    return _BY_BASE.get(base, "other")


def table(summ: list[SummaryRow], comps: list[Comparison]) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """(header, rows with MIN_N runs or more on some platform, rows with fewer everywhere); the criterion is
    named on the first row of its group."""
    plats = sorted({s.platform for s in summ}, key=platform_sort_key)
    header = ["criterion", "metric (unit)"] + [f"{PLATFORM_LABEL.get(p, p)} median ± resolution [p05–p95] (n)"
                                               for p in plats]
    pairs = sorted({(c.numerator, c.denominator) for c in comps}, key=lambda p: (p != ("k8s", "slurm"), p))
    header += [f"{PLATFORM_LABEL.get(a, a)} / {PLATFORM_LABEL.get(b, b)} (95% CI)" for a, b in pairs]
    cell = {(s.metric, s.platform): s for s in summ}
    comp = {(c.metric, c.numerator, c.denominator): c for c in comps}
    units: dict[str, str] = {}
    for s in summ:
        units.setdefault(s.metric, s.unit)
    main: list[list[str]] = []
    rare: list[list[str]] = []
    last = {id(main): None, id(rare): None}
    for m in sorted(units, key=lambda k: (ORDER.index(criterion_of(k)), metric_order(k))):
        crit = criterion_of(m)
        into = main if max(cell[(m, p)].n for p in plats if (m, p) in cell) >= MIN_N else rare
        row = [crit if last[id(into)] != crit else "", f"`{m}` ({units[m]})"]
        row += ["–" if (m, p) not in cell else headline_cell(cell[(m, p)]) for p in plats]
        row += ["–" if (m, a, b) not in comp else ratio_cell(comp[(m, a, b)]) for a, b in pairs]
        last[id(into)] = crit
        into.append(row)
    return header, main, rare


def rare_summary(rare: list[list[str]]) -> str:
    return (f"{len(rare)} more metric(s) with fewer than {MIN_N} runs on every platform (one-off scenarios: "
            "no interval, no verdict)")


