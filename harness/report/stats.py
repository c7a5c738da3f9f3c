"""The runs' values grouped per (platform, metric key), their summaries, and ratios with bootstrap intervals."""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .extras import is_probe, is_scale
from .records import RECOVERY_PHASES, TABLE_METRICS, TABLE_UNITS
from .table import RunTable

PLATFORM_ORDER = ["local", "slurm", "k8s"]
PLATFORM_LABEL = {"local": "local (baseline)", "slurm": "Slurm", "k8s": "Kubernetes"}
# Metrics a fault changes are kept apart per fault kind: "recovery_s:kill_rank".
BY_SCENARIO = {"recovery_s", "resume_s", "lost_steps", "cost_per_step_usd", "cost_run_usd", "goodput",
               "recovery_cost_usd", *RECOVERY_PHASES, "checkpoint_load_s", "recovery_free_s"}
# Metrics of the first attempt, comparable across clean and fault runs alike.
ANY_SCENARIO = {"queue_s", "queue_admission_s", "first_log_s", "submit_to_first_step_s", "handover_s", "startup_s",
                "launch_s", "image_pull_s", "rendezvous_s", "first_step_s",
                "sweep_s", "allreduce_busbw_gbps", "allreduce_avg_busbw_gbps", "step_time_s",
                "cost_per_step_steady_usd",
                # from the median step time, like step_time_s; the first attempt's ranks; every save of the run
                "samples_per_s", "tokens_per_s", "mfu", "straggler_ratio", "checkpoint_save_s"}
# Waits a contention run's blocker lengthens: its own figure there.
QUEUE = {"queue_s", "queue_admission_s", "first_log_s", "submit_to_first_step_s"}
# Families later issues add (upgrades: 13, inference: 14), kept apart per scenario like recovery.
PER_SCENARIO_PREFIXES = ("upgrade_", "serve_")
HIGHER_IS_BETTER = {"allreduce_busbw_gbps", "allreduce_avg_busbw_gbps", "goodput", "upgrade_job_survived",
                    "upgrade_records_intact", "serve_throughput_rps", "serve_availability", "samples_per_s",
                    "tokens_per_s", "mfu"}
# Below this many runs a side the report prints no interval and draws no verdict. A percentile
# bootstrap of a median from 3 runs can only return those 3 values (its "95%" interval is the
# range, and covers far less than 95%); the exact rank-sum test cannot reach p < 0.05 two-sided
# with 3 a side (its smallest p is 0.1), and with 4 a side only by complete separation before any
# correction for multiple comparisons (0.029). At 5 a side it can reach 0.008.
MIN_N = 5


def metric_key(name: str, scenario: str) -> str | None:
    if is_probe(scenario):   # a user-mistake probe is no training run: its figures are the UX section's
        return None
    if is_scale(scenario):   # the config's job at another size: its figures are the scale-curve section's
        return None
    if name in QUEUE and scenario == "contention":   # a wait behind another job is its own figure
        return f"{name}:contention"
    if name in BY_SCENARIO or name.startswith(PER_SCENARIO_PREFIXES):
        return name if scenario == "clean" else f"{name}:{scenario}"
    if name in ANY_SCENARIO:
        return name
    return None


def base_metric(key: str) -> str:
    return key.split(":", 1)[0]


def platform_sort_key(p: str) -> tuple:
    return (PLATFORM_ORDER.index(p) if p in PLATFORM_ORDER else len(PLATFORM_ORDER), p)


@dataclass(frozen=True)
class Group:
    """The values of one metric key on one platform, from the successful runs, in report order."""
    unit: str
    values: np.ndarray
    runs: np.ndarray   # the table row each value came from
    uncertainty: np.ndarray   # per value, NaN where the run recorded none

    @property
    def resolution(self) -> float:
        """The median per-run uncertainty, NaN when no run recorded one."""
        u = self.uncertainty[~np.isnan(self.uncertainty)]
        return float(np.median(u)) if u.size else math.nan


Groups = dict[tuple[str, str], Group]


def groups(table: RunTable) -> Groups:
    out: Groups = {}
    ok = table.ok
    plat, scen = table.platform, table.scenario
    for name in TABLE_METRICS:
        col, unc = table.values[name], table.uncertainty[name]
        rows = np.flatnonzero(ok & ~np.isnan(col))
        if rows.size == 0:
            continue
        keys: dict[str, int] = {}   # metric key -> its code; scenarios that share a key share its code
        of_scenario = [metric_key(name, s) for s in scen.names]
        code = np.array([-1 if k is None else keys.setdefault(k, len(keys)) for k in of_scenario])[scen.codes[rows]]
        rows, code = rows[code >= 0], code[code >= 0]
        if rows.size == 0:   # a metric no report key takes (one a newer harness added): not shown
            continue
        combo = plat.codes[rows].astype(np.int64) * max(1, len(keys)) + code
        order = np.argsort(combo, kind="stable")   # stable: each group keeps report order
        combos, starts = np.unique(combo[order], return_index=True)
        names = list(keys)
        for c, part in zip(combos.tolist(), np.split(order, starts[1:]), strict=True):
            r = rows[part]
            out[(plat.names[c // len(keys)], names[c % len(keys)])] = Group(TABLE_UNITS.get(name, ""), col[r], r,
                                                                                 unc[r])
    return out


class SummaryRow(NamedTuple):
    platform: str
    metric: str
    unit: str
    n: int
    median: float
    uncertainty: float   # the median per-run uncertainty; NaN where none was recorded
    p05: float
    p95: float
    min: float
    max: float


def summary(gs: Groups) -> list[SummaryRow]:
    """Per (platform, metric key), sorted by metric then platform."""
    out = []
    for (plat, metric), g in sorted(gs.items(), key=lambda kv: (kv[0][1], platform_sort_key(kv[0][0]))):
        v = g.values
        few = v.size < MIN_N   # no interval below MIN_N: p05/p95 would be the extreme runs
        out.append(SummaryRow(plat, metric, g.unit, int(v.size), float(np.median(v)), g.resolution,
                              math.nan if few else float(np.percentile(v, 5)),
                              math.nan if few else float(np.percentile(v, 95)), float(v.min()), float(v.max())))
    return out


def summary_csv(rows: list[SummaryRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SummaryRow._fields)
    # floats as repr (the shortest text that reads back as the same number); NaN as an empty cell
    w.writerows([["" if isinstance(x, float) and math.isnan(x) else x for x in r] for r in rows])
    return buf.getvalue()
