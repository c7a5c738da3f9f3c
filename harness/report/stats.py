"""The runs' values grouped per (platform, metric key), their summaries, and ratios with bootstrap intervals."""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..metrics import UNITS
from .bootstrap import bootstrap_ratio
from .records import METRICS
from .table import RunTable, from_records

PLATFORM_ORDER = ["local", "slurm", "k8s"]
PLATFORM_LABEL = {"local": "local (baseline)", "slurm": "Slurm", "k8s": "Kubernetes"}
# Metrics a fault changes are kept apart per fault kind: "recovery_s:kill_rank".
BY_SCENARIO = {"recovery_s", "lost_steps", "cost_per_step_usd"}
# Metrics of the first attempt, comparable across clean and fault runs alike.
ANY_SCENARIO = {"queue_s", "queue_admission_s", "handover_s", "startup_s", "launch_s", "rendezvous_s", "first_step_s",
                "sweep_s", "allreduce_busbw_gbps", "step_time_s", "cost_per_step_steady_usd"}
QUEUE = {"queue_s", "queue_admission_s"}
HIGHER_IS_BETTER = {"allreduce_busbw_gbps"}


def metric_key(name: str, scenario: str) -> str | None:
    if name in QUEUE and scenario == "contention":   # a wait behind another job is its own figure
        return f"{name}:contention"
    if name in BY_SCENARIO:
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


Groups = dict[tuple[str, str], Group]


def groups(table: RunTable) -> Groups:
    out: Groups = {}
    ok = table.ok
    plat, scen = table.platform, table.scenario
    for name in METRICS:
        col = table.values[name]
        rows = np.flatnonzero(ok & ~np.isnan(col))
        if rows.size == 0:
            continue
        keys: dict[str, int] = {}   # metric key -> its code; scenarios that share a key share its code
        of_scenario = [metric_key(name, s) for s in scen.names]
        code = np.array([-1 if k is None else keys.setdefault(k, len(keys)) for k in of_scenario])[scen.codes[rows]]
        rows, code = rows[code >= 0], code[code >= 0]
        combo = plat.codes[rows].astype(np.int64) * max(1, len(keys)) + code
        order = np.argsort(combo, kind="stable")   # stable: each group keeps report order
        combos, starts = np.unique(combo[order], return_index=True)
        names = list(keys)
        for c, part in zip(combos.tolist(), np.split(order, starts[1:]), strict=True):
            r = rows[part]
            out[(plat.names[c // len(keys)], names[c % len(keys)])] = Group(UNITS.get(name, ""), col[r], r)
    return out


class SummaryRow(NamedTuple):
    platform: str
    metric: str
    unit: str
    n: int
    median: float
    p05: float
    p95: float
    min: float
    max: float


class Ratio(NamedTuple):
    metric: str
    numerator: str
    denominator: str
    ratio: float
    ci_low: float
    ci_high: float
    n_num: int
    n_den: int


def summary(gs: Groups) -> list[SummaryRow]:
    """Per (platform, metric key), sorted by metric then platform."""
    out = []
    for (plat, metric), g in sorted(gs.items(), key=lambda kv: (kv[0][1], platform_sort_key(kv[0][0]))):
        v = g.values
        out.append(SummaryRow(plat, metric, g.unit, int(v.size), float(np.median(v)), float(np.percentile(v, 5)),
                              float(np.percentile(v, 95)), float(v.min()), float(v.max())))
    return out


def summary_csv(rows: list[SummaryRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SummaryRow._fields)
    w.writerows(rows)   # floats as repr: the shortest text that reads back as the same number
    return buf.getvalue()


def ratios(gs: Groups, pairs: list[tuple[str, str]] | None = None) -> list[Ratio]:
    """Per metric, the ratio of medians for each pair of platforms present (numerator, denominator)."""
    present = {p for p, _ in gs}
    if pairs is None:
        pairs = [(a, b) for a, b in (("k8s", "slurm"), ("k8s", "local"), ("slurm", "local"))
                 if a in present and b in present]
    out = []
    for metric in sorted({k for _, k in gs}):
        for num, den in pairs:
            a, b = gs.get((num, metric)), gs.get((den, metric))
            if a is None or b is None:
                continue
            point, lo, hi = bootstrap_ratio(a.values, b.values)
            out.append(Ratio(metric, num, den, point, lo, hi, int(a.values.size), int(b.values.size)))
    return out


TIDY_COLUMNS = ["run_id", "campaign", "platform", "scenario", "metric", "unit", "value"]


def tidy(runs: list[dict]):
    """Stored records -> a pandas DataFrame, one row per (run, metric key) of the successful runs, for inspection
    and tests (the report itself does without pandas: importing it costs more than the report's statistics)."""
    import pandas as pd

    table = from_records(runs)
    parts = [(g.runs, p, k, g.unit, g.values) for (p, k), g in groups(table).items()]
    if not parts:
        return pd.DataFrame(columns=TIDY_COLUMNS)
    rows = np.concatenate([r for r, *_ in parts])
    df = pd.DataFrame({
        "run_id": [table.run_id[i] for i in rows], "campaign": [table.campaign[i] for i in rows],
        "platform": np.concatenate([[p] * r.size for r, p, *_ in parts]),
        "scenario": [table.scenario[i] for i in rows],
        "metric": np.concatenate([[k] * r.size for r, _, k, *_ in parts]),
        "unit": np.concatenate([[u] * r.size for r, _, _, u, _ in parts]),
        "value": np.concatenate([v for *_, v in parts])}, columns=TIDY_COLUMNS)
    df["_row"] = rows
    return df.sort_values("_row", kind="stable").drop(columns="_row").reset_index(drop=True)
