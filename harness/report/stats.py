"""Run records -> tidy tables: one row per (run, metric), summaries, ratios with bootstrap intervals."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..metrics import UNITS

SUMMARY_COLUMNS = ["platform", "metric", "unit", "n", "median", "p05", "p95", "min", "max"]
PLATFORM_ORDER = ["local", "slurm", "k8s"]
PLATFORM_LABEL = {"local": "local (baseline)", "slurm": "Slurm", "k8s": "Kubernetes"}
# Metrics a fault changes are kept apart per fault kind: "recovery_s:kill_rank".
BY_SCENARIO = {"recovery_s", "lost_steps", "cost_per_step_usd"}
# Metrics of the first attempt, comparable across clean and fault runs alike.
ANY_SCENARIO = {"queue_s", "queue_admission_s", "handover_s", "startup_s", "launch_s", "rendezvous_s", "first_step_s", "sweep_s",
                "allreduce_busbw_gbps", "step_time_s", "cost_per_step_steady_usd"}
QUEUE = {"queue_s", "queue_admission_s"}
HIGHER_IS_BETTER = {"allreduce_busbw_gbps"}


def latest(runs: list[dict]) -> list[dict]:
    """The last record of each run (a resumed campaign may have retried a failed one)."""
    by_id: dict[tuple, dict] = {}
    for r in runs:
        by_id[(r.get("campaign"), r["run_id"])] = r
    return list(by_id.values())


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


TIDY_COLUMNS = ["run_id", "campaign", "platform", "scenario", "metric", "unit", "value"]


def tidy(runs: list[dict]) -> pd.DataFrame:
    cols: dict[str, list] = {c: [] for c in TIDY_COLUMNS}   # columns, not row dicts: a million rows stay small
    for r in latest(runs):
        if r.get("status") != "ok":
            continue
        scenario = r.get("scenario", "clean")
        for name, m in (r.get("metrics") or {}).items():
            key = metric_key(name, scenario)
            value = m.get("value") if isinstance(m, dict) else m   # a stored record or a slim one
            if key is None or value is None:
                continue
            for c, v in zip(TIDY_COLUMNS, (r["run_id"], r.get("campaign"), r["platform"], scenario, key,
                                           UNITS.get(name, ""), float(value))):
                cols[c].append(v)
    return pd.DataFrame(cols, columns=TIDY_COLUMNS)


def platform_sort_key(p: str) -> tuple:
    return (PLATFORM_ORDER.index(p) if p in PLATFORM_ORDER else len(PLATFORM_ORDER), p)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (plat, metric), g in df.groupby(["platform", "metric"], sort=False):
        v = g["value"].to_numpy()
        out.append({"platform": plat, "metric": metric, "unit": g["unit"].iloc[0], "n": int(v.size),
                    "median": float(np.median(v)), "p05": float(np.percentile(v, 5)),
                    "p95": float(np.percentile(v, 95)), "min": float(v.min()), "max": float(v.max())})
    res = pd.DataFrame(out, columns=SUMMARY_COLUMNS)
    if res.empty:
        return res
    res["_p"] = res["platform"].map(platform_sort_key)
    return res.sort_values(["metric", "_p"]).drop(columns="_p").reset_index(drop=True)


def bootstrap_ratio(a: np.ndarray, b: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Ratio of medians a/b with a 95% percentile-bootstrap interval."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    point = float(np.median(a) / np.median(b)) if np.median(b) != 0 else float("nan")
    rng = np.random.default_rng(seed)
    # Resampling costs n_boot x n; with tens of thousands of runs the interval is already
    # narrow, so fewer resamples keep a big campaign's report fast.
    n_boot = int(min(n_boot, max(200, 4e6 // max(a.size, b.size))))
    ra = np.median(rng.choice(a, (n_boot, a.size)), axis=1)
    rb = np.median(rng.choice(b, (n_boot, b.size)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ra / rb
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return point, float("nan"), float("nan")
    return point, float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def ratios(df: pd.DataFrame, pairs: list[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Per metric, the ratio of medians for each pair of platforms present (numerator, denominator)."""
    present = sorted(df["platform"].unique(), key=platform_sort_key) if not df.empty else []
    if pairs is None:
        pairs = [(a, b) for a, b in (("k8s", "slurm"), ("k8s", "local"), ("slurm", "local")) if a in present and b in present]
    out = []
    for metric, g in df.groupby("metric", sort=True):
        for num, den in pairs:
            a = g[g.platform == num]["value"].to_numpy()
            b = g[g.platform == den]["value"].to_numpy()
            if a.size == 0 or b.size == 0:
                continue
            point, lo, hi = bootstrap_ratio(a, b)
            out.append({"metric": metric, "numerator": num, "denominator": den, "ratio": point,
                        "ci_low": lo, "ci_high": hi, "n_num": int(a.size), "n_den": int(b.size)})
    return pd.DataFrame(out, columns=["metric", "numerator", "denominator", "ratio", "ci_low", "ci_high", "n_num", "n_den"])
