"""The report's parts as data: the headline and metric tables, pricing, caveats, counts and the runs that failed."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..metrics import HEADLINE
from .compare import Comparison
from .stats import MIN_N, PLATFORM_LABEL, SummaryRow, platform_sort_key
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
    """A Markdown table; a | inside a cell (a platform's message) is escaped, even inside code."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    return "\n".join([line(header), "|" + "|".join("---" for _ in header) + "|"] + [line(r) for r in rows])


def fmt_pm(v: float | None, u: float | None, unit: str = "") -> str:
    """A value with its uncertainty, both to the uncertainty's first significant digit, or its first
    two where it starts with 1 and the second digit counts: "0.62 ± 0.01", "0.624 ± 0.012", "2 ± 1".
    Past 4 significant digits of the value the ± is only bounded ("12.27 ± <0.01"): a microsecond
    clock does not make a 12 s figure worth eight digits. An exact value (u = 0) or one with no
    recorded uncertainty prints alone."""
    if v is None or u is None or math.isnan(v) or math.isnan(u) or u <= 0 or not math.isfinite(u):
        return fmt(v, unit)
    e = math.floor(math.log10(u))
    decimals = -e
    if u / 10 ** e < 2 and abs(round(u, decimals) - u) > 1e-9 * u:
        decimals += 1
    most = 3 - math.floor(math.log10(abs(v))) if v else decimals
    if decimals > most:
        most = max(0, most)
        return f"{v:.{most}f} ± <{10.0 ** -most:.{most}f}"
    decimals = max(0, decimals)
    return f"{v:.{decimals}f} ± {u:.{decimals}f}"


def fmt_cell(v: float | None, u: float | None, unit: str = "") -> str:
    """fmt_pm for a table cell: a ± only bounded below the printed digits ("± <0.001") says nothing a reader
    can use there, so the value stands alone (fmt_pm keeps it where the text discusses resolution)."""
    text = fmt_pm(v, u, unit)
    return text.split(" ± <", 1)[0]


def headline_cell(s: SummaryRow) -> str:
    if s.n < MIN_N:   # no interval below MIN_N: the median (the value at n = 1) and its ± only
        return f"{fmt_cell(s.median, s.uncertainty, s.unit)} ({s.n})"
    return f"{fmt_cell(s.median, s.uncertainty, s.unit)} [{fmt(s.p05, s.unit)}–{fmt(s.p95, s.unit)}] ({s.n})"


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def ci_note(c: Comparison) -> str:
    """Why the 95% interval of the ratio of medians and the verdict seem to disagree, in the same cell: the
    interval describes the medians; the verdict is the test's, Holm-adjusted, within rounds where it can be."""
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)) or c.verdict in ("few", "refused", "descriptive"):
        return ""
    excludes = c.ci_low > 1 or c.ci_high < 1
    test = "the within-round test" if c.test == "paired" else "the rank-sum test"
    if excludes and c.verdict == "direction":
        return (f"; excludes 1: a consistent direction {test} could not decide at this n (Holm p {_p(c.p_holm)})"
                if not c.sequential else "; excludes 1: a consistent direction the sequential rule had not decided")
    if excludes and c.verdict == "none":
        p = (f"p {_p(c.p)} alone, {_p(c.p_holm)} after Holm's adjustment across the family's tests"
             if c.p < 0.05 <= c.p_holm else f"Holm p {_p(c.p_holm)}")
        return f"; excludes 1, yet no verdict: {test} gives {p}"
    if excludes and c.verdict == "equivalent":
        return (f"; excludes 1, yet equivalent: {test}'s 90% interval {c.eq_low:.2f}–{c.eq_high:.2f} lies inside "
                "the margin")
    if excludes and c.verdict == "resolution":
        return "; excludes 1, yet the medians differ by less than the clocks' resolution"
    if not excludes and c.verdict in ("higher", "lower"):
        return (f"; includes 1, yet a verdict: {test} (Holm p {_p(c.p_holm)}) pairs the runs by round, "
                "which this interval does not")
    return ""


def ratio_cell(c: Comparison) -> str:
    if c.refused:
        return c.refused
    if math.isnan(c.ratio):
        return "– (a median is 0)"
    if c.verdict == "few":
        return f"{c.ratio:.2f} (n {c.n_num}/{c.n_den}: no interval)"
    return f"{c.ratio:.2f} ({c.ci_low:.2f}–{c.ci_high:.2f}){ci_note(c)}"


def transport_label(t) -> str:
    """The collective's backend and transport as the workload recorded them: gloo records "tcp", NCCL the
    paths its INFO lines named ("NET/IB+P2P", "SHM")."""
    if t is None:
        return ""
    return "gloo over TCP" if str(t).lower() == "tcp" else f"NCCL over {t}"


def transport_text(table: RunTable, plats, label) -> str:
    """One backend/transport for all `plats` ("gloo over TCP"), or each platform's; "" when none recorded."""
    per = {p: sorted({transport_label(t) for t in v} - {""}) for p, v in _per_platform(table, table.transport).items()
           if p in plats}
    every = {t for v in per.values() for t in v}
    if len(every) == 1:
        return next(iter(every))
    return "; ".join(f"{label(p)} {', '.join(per[p])}" for p in plats if per.get(p))


# submitted -> first step sits beside its two parts
_ORDER = {k: i for i, k in enumerate(h for k in HEADLINE for h in ((k, "submit_to_first_step_s")
                                                                  if k == "startup_s" else (k,)))}


def metric_order(m: str) -> tuple:
    return _ORDER.get(m.split(":")[0], 99), m


def metric_table(summ: list[SummaryRow], keep) -> tuple[list[str], list[list[str]]]:
    """Rows of the metric keys `keep(key)` accepts, a column per platform: median ± resolution (n)."""
    plats = sorted({s.platform for s in summ if keep(s.metric)}, key=platform_sort_key)
    cell = {(s.metric, s.platform): s for s in summ}
    keys = sorted({s.metric for s in summ if keep(s.metric)}, key=metric_order)
    rows = [[f"`{k}`", cell[next((k, p) for p in plats if (k, p) in cell)].unit]
            + [f"{fmt_cell(cell[(k, p)].median, cell[(k, p)].uncertainty)} ({cell[(k, p)].n})" if (k, p) in cell
               else "–" for p in plats] for k in keys]
    return ["metric", "unit"] + [PLATFORM_LABEL.get(p, p) for p in plats], rows


# Per-run fields of the cost metric's detail; the rest describes the pricing model.
_PER_RUN = {"wall_s", "steps", "steady", "median_step_s", "overhead_usd", "billed_until", "note",
            "queue_wait_s", "between_attempts_s", "attempts_billed", "rule_text"}


# The price a config gets when it sets none (config.Price): a stand-in, not anyone's price.
PLACEHOLDER_USD_PER_HOUR = 1.0


def is_placeholder(d: dict) -> bool:
    """A pricing detail that still carries the default price: no price set chosen, usd_per_unit_hour 1."""
    model = d.get("pricing") if isinstance(d.get("pricing"), dict) else d
    return model.get("price_set") is None and model.get("usd_per_unit_hour") == PLACEHOLDER_USD_PER_HOUR


def placeholder_note(plat: str) -> str:
    return (f"placeholder: the default {PLACEHOLDER_USD_PER_HOUR:g} USD per unit-hour, no one's price; set "
            f"`pricing.{plat}.usd_per_hour` (or `pricing.{plat}.sets` and `.price_set`) for a real figure")


def pricing_lines(table: RunTable) -> list[str]:
    out = []
    for plat in sorted(table.pricing, key=platform_sort_key):
        d = table.pricing[plat]
        model = d.get("pricing") if isinstance(d.get("pricing"), dict) else {
            k: v for k, v in d.items() if k not in _PER_RUN and v is not None}
        if model:
            line = f"{PLATFORM_LABEL.get(plat, plat)}: " + ", ".join(
                f"{k} = {v:.6g}" if isinstance(v, float) else f"{k} = {v}" for k, v in model.items())
            out.append(line + (f" ({placeholder_note(plat)})" if is_placeholder(d) else ""))
    return out


def caveats(table: RunTable) -> list[str]:
    out = []
    if not table.gpus_visible.any():
        over = transport_text(table, platforms(table), lambda p: PLATFORM_LABEL.get(p, p)) or "gloo"
        out.append(f"CPU only: the all-reduce figures are {over} on loopback/virtual networks (as the runs recorded), "
                   "not NCCL over a fabric; they compare the platforms' plumbing, not GPU interconnects.")
    hosts = {h for h in table.harness_host if h}
    if len(hosts) <= 1:
        out.append("All platforms ran on one host, sharing its CPUs: runs were sequential, but background "
                   "daemons (dockerd, kubelets, slurmd) compete for the same cores.")
    builds = _per_platform(table, table.build)
    if len({v for vs in builds.values() for v in vs}) > 1:
        listed = "; ".join(f"{PLATFORM_LABEL.get(p, p)}: {', '.join(sorted(v))}" for p, v in sorted(builds.items()))
        out.append(f"Different torch builds ran on different platforms ({listed}): the report prints no ratio "
                   "between platforms whose builds differ, since it would compare the builds, not the platforms.")
    transports = _per_platform(table, table.transport)
    if len({v for vs in transports.values() for v in vs}) > 1:
        listed = "; ".join(f"{PLATFORM_LABEL.get(p, p)}: {', '.join(map(str, sorted(v, key=str)))}"
                           for p, v in sorted(transports.items()))
        out.append(f"Warning: the platforms' all-reduce ran over different transports ({listed}): bandwidth, "
                   "sweep and step-time differences may come from the transport, not the scheduler.")
    ok = table.ok
    measured = any((ok & ~np.isnan(v)).any() for v in table.values.values())
    recorded = any((ok & ~np.isnan(u)).any() for u in table.uncertainty.values())
    if measured and not recorded:
        out.append("No measurement uncertainty was recorded in these runs (they predate it): values print without "
                   "±, and no verdict could be checked against the clocks' resolution. Slurm's Submit/Start and "
                   "Kubernetes' creationTimestamp are whole seconds, so differences under about 1 s in queue_s, "
                   "startup_s and cost may be resolution.")
    elif recorded:
        out.append("Clocks: every metric is the difference of two time-stamps, each known to an interval from its "
                   "source's resolution; ± is half the metric's interval (the median over runs). Workload time-stamps "
                   "come from each node's wall clock; on one host they are the same clock.")
    out.append("The all-reduce sweep is excluded from startup_s and reported as sweep_s.")
    return out


def _per_platform(table: RunTable, items: list) -> dict[str, set]:
    out: dict[str, set] = {}
    ok = table.ok
    for code, v, good in set(zip(table.platform.codes.tolist(), items, ok.tolist(), strict=True)):
        if v is not None and good:
            out.setdefault(table.platform.names[code], set()).add(v)
    return out


def platforms(table: RunTable) -> list[str]:
    return sorted({table.platform.names[c] for c in np.unique(table.platform.codes)}, key=platform_sort_key)


def counts(table: RunTable) -> dict[str, dict[str, int]]:
    """Per platform, its training runs by status. A harness error is no platform's failure, and a
    user-mistake probe no training run: neither is counted."""
    out = {p: {"ok": 0, "failed": 0, "interrupted": 0} for p in platforms(table)}
    mine = ~table.harness_error & ~table.probe
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
    return [NotOk.of(table, int(i)) for i in np.flatnonzero(~table.status_ok & ~table.harness_error)]


def harness_errors(table: RunTable) -> list[NotOk]:
    return [NotOk.of(table, int(i)) for i in np.flatnonzero(table.harness_error)]
