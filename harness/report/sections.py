"""The report's parts as data: the headline table, findings, caveats, counts and the runs that failed."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..metrics import HEADLINE
from .stats import PLATFORM_LABEL, Ratio, SummaryRow, platform_sort_key
from .table import RunTable


def fmt(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    a = abs(v)
    if unit == "USD":
        s = f"{v:.3g}" if a < 0.01 else f"{v:.4f}"
    elif a >= 100:
        s = f"{v:.0f}"
    elif a >= 1:
        s = f"{v:.2f}"
    else:
        s = f"{v:.3g}"
    return s


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def headline_table(summ: list[SummaryRow], rat: list[Ratio]) -> tuple[list[str], list[list[str]]]:
    plats = sorted({s.platform for s in summ}, key=platform_sort_key)
    header = ["metric", "unit"] + [f"{PLATFORM_LABEL.get(p, p)} median [p05–p95] (n)" for p in plats]
    pairs = sorted({(r.numerator, r.denominator) for r in rat}, key=lambda p: (p != ("k8s", "slurm"), p))
    header += [f"{PLATFORM_LABEL.get(a, a)} / {PLATFORM_LABEL.get(b, b)} (95% CI)" for a, b in pairs]
    cell = {(s.metric, s.platform): s for s in summ}
    ratio = {(r.metric, r.numerator, r.denominator): r for r in rat}
    units: dict[str, str] = {}
    for s in summ:
        units.setdefault(s.metric, s.unit)
    rows = []
    order = {m: i for i, m in enumerate(HEADLINE)}
    for m in sorted(units, key=lambda m: (order.get(m.split(":")[0], 99), m)):
        unit = units[m]
        row = [f"`{m}`", unit]
        for p in plats:
            s = cell.get((m, p))
            row.append("–" if s is None else f"{fmt(s.median, unit)} [{fmt(s.p05, unit)}–{fmt(s.p95, unit)}] ({s.n})")
        for a, b in pairs:
            r = ratio.get((m, a, b))
            row.append("–" if r is None else f"{r.ratio:.2f} ({r.ci_low:.2f}–{r.ci_high:.2f})")
        rows.append(row)
    return header, rows


def findings(rat: list[Ratio]) -> list[str]:
    """Plain statements the data supports: a difference only where the whole interval is on one side of 1."""
    out = []
    if not rat:
        return ["Only one platform has results, so there is nothing to compare yet."]
    for r in rat:
        base = r.metric.split(":")[0]
        if base not in HEADLINE and base not in ("lost_steps", "handover_s"):
            continue
        a, b = PLATFORM_LABEL.get(r.numerator, r.numerator), PLATFORM_LABEL.get(r.denominator, r.denominator)
        higher_better = base == "allreduce_busbw_gbps"
        if min(r.n_num, r.n_den) < 2:
            out.append(f"`{r.metric}`: too few runs to compare {a} and {b} (n={r.n_num} and n={r.n_den}; "
                       f"an interval needs at least 2 on each side).")
            continue
        if not (math.isfinite(r.ratio) and math.isfinite(r.ci_low) and math.isfinite(r.ci_high)):
            out.append(f"`{r.metric}`: no ratio of {a} to {b}: a median is 0 (Slurm records whole seconds, "
                       f"so sub-second waits read as 0).")
            continue
        small = min(r.n_num, r.n_den) < 3
        caveat = " (fewer than 3 runs on a side: treat as indicative)" if small else ""
        if r.ci_low > 1 or r.ci_high < 1:
            more = r.ratio > 1
            better = more == higher_better
            word = "higher" if more else "lower"
            winner = a if better else b
            out.append(f"`{r.metric}`: {a} is {word} than {b} by ×{r.ratio:.2f} "
                       f"(95% CI {r.ci_low:.2f}–{r.ci_high:.2f}); advantage {winner}{caveat}.")
        else:
            out.append(f"`{r.metric}`: no clear difference between {a} and {b} (ratio {r.ratio:.2f}, "
                       f"95% CI {r.ci_low:.2f}–{r.ci_high:.2f} includes 1){caveat}.")
    return out


def caveats(table: RunTable) -> list[str]:
    out = []
    if not table.gpus_visible.any():
        out.append("CPU only: the all-reduce figures are gloo over loopback/virtual networks, not NCCL over a fabric; "
                   "they compare the platforms' plumbing, not GPU interconnects.")
    hosts = {h for h in table.harness_host if h}
    if len(hosts) <= 1:
        out.append("All platforms ran on one host, sharing its CPUs: runs were sequential, but background "
                   "daemons (dockerd, kubelets, slurmd) compete for the same cores.")
    torch_by_plat: dict[str, set] = {}
    for code, t in set(zip(table.platform.codes.tolist(), table.torch, strict=True)):
        if t:
            torch_by_plat.setdefault(table.platform.names[code], set()).add(t)
    if len({v for vs in torch_by_plat.values() for v in vs}) > 1:
        builds = "; ".join(f"{PLATFORM_LABEL.get(p, p)}: {', '.join(sorted(v))}"
                           for p, v in sorted(torch_by_plat.items()))
        out.append(f"Different torch builds ran on different platforms ({builds}): step time and bandwidth differences "
                   "may come from the build, not the platform.")
    out.append("Clocks: scheduler timestamps come from the scheduler (Slurm records whole seconds), workload "
               "timestamps from each node's wall clock; on one host they are the same clock.")
    out.append("The all-reduce sweep is excluded from startup_s and reported as sweep_s.")
    return out


def platforms(table: RunTable) -> list[str]:
    return sorted({table.platform.names[c] for c in np.unique(table.platform.codes)}, key=platform_sort_key)


def counts(table: RunTable) -> dict[str, dict[str, int]]:
    """Per platform, its runs by status. A harness error is no platform's failure: it is not counted."""
    out = {p: {"ok": 0, "failed": 0, "interrupted": 0} for p in platforms(table)}
    mine = ~table.harness_error
    n_status = len(table.status.names)
    combos, n = np.unique(table.platform.codes[mine].astype(np.int64) * n_status + table.status.codes[mine],
                          return_counts=True)
    for combo, k in zip(combos.tolist(), n.tolist(), strict=True):
        c = out[table.platform.names[combo // n_status]]
        status = table.status.names[combo % n_status] or "failed"
        c[status] = c.get(status, 0) + k
    return out


@dataclass(frozen=True)
class NotOk:
    run_id: str
    platform: str
    status: str | None
    stage: object
    type: object    # of the exception
    message: str    # the first line

    @classmethod
    def of(cls, table: RunTable, i: int) -> NotOk:
        err = table.errors.get(i) or {}
        msg = err.get("message")
        return cls(table.run_id[i], table.platform[i], table.status[i], err.get("stage"), err.get("type"),
                   msg.splitlines()[0] if msg else "")


def failed(table: RunTable) -> list[NotOk]:
    """The runs that did not succeed through the platform or the job (harness errors are listed apart)."""
    return [NotOk.of(table, int(i)) for i in np.flatnonzero(~table.ok & ~table.harness_error)]


def harness_errors(table: RunTable) -> list[NotOk]:
    return [NotOk.of(table, int(i)) for i in np.flatnonzero(table.harness_error)]
