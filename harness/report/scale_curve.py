"""The scale-curve section: per platform and node count, the medians of queue time, startup, all-reduce
bus bandwidth, step time (and throughput where the runs recorded it) over the scale runs, with n, and a
chart of each figure against the number of nodes, the platforms on one axis.

The runs are the scale scenario's (harness/scale_curve.py: scenario "scale:<nodes>"), read from the run
table the report already holds; stats.metric_key keeps them out of every other section's figures, since
each size is another job. Only medians are shown: at fewer than MIN_N runs a size, as a campaign of one
run per size has, the table describes those runs and the section draws no verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .charts import _color, _save, plt
from .extras import is_scale
from .records import TABLE_UNITS
from .sections import fmt
from .stats import MIN_N, PLATFORM_LABEL, platform_sort_key
from .table import RunTable

TITLE = "Scale curve"
CHART = "scale_curve"
# the figures, in the table's and the chart's order; throughput where the runs have it
FIGURES = ("queue_s", "startup_s", "allreduce_busbw_gbps", "step_time_s")
THROUGHPUT = ("samples_per_s", "tokens_per_s")
AXIS = {"queue_s": "queue (s)", "startup_s": "startup (s)", "allreduce_busbw_gbps": "busbw (GB/s)",
        "step_time_s": "step time (s)", "samples_per_s": "samples/s", "tokens_per_s": "tokens/s"}


def nodes_of(scenario: str) -> int | None:
    """The size of a "scale:<nodes>" scenario; None for any other (or a malformed one)."""
    arg = scenario.partition(":")[2] if is_scale(scenario) else ""
    return int(arg) if arg.isdigit() else None


@dataclass(frozen=True)
class Point:
    """One platform at one size: its scale runs, how many succeeded (n), and each figure's values in those."""
    platform: str
    nodes: int
    runs: int
    n: int
    values: dict[str, np.ndarray]   # figure -> the ok runs' values, NaN left out

    def median(self, figure: str) -> float:
        v = self.values.get(figure)
        return float(np.median(v)) if v is not None and v.size else math.nan


def points(table: RunTable) -> list[Point]:
    """Per (platform, size) with scale runs, in platform then size order."""
    sizes = {code: nodes_of(name) for code, name in enumerate(table.scenario.names)}
    scale_codes = [c for c, n in sizes.items() if n is not None]
    if not scale_codes:
        return []
    mine = np.isin(table.scenario.codes, scale_codes) & ~table.harness_error
    ok = table.ok & mine
    shown = figures(table)
    out = []
    keys = {(int(p), sizes[int(s)]) for p, s in zip(table.platform.codes[mine].tolist(),
                                                   table.scenario.codes[mine].tolist(), strict=True)}
    for p, n in sorted(keys, key=lambda k: (platform_sort_key(table.platform.names[k[0]]), k[1])):
        here = mine & (table.platform.codes == p) & np.isin(table.scenario.codes,
                                                            [c for c in scale_codes if sizes[c] == n])
        good = here & ok
        vals = {}
        for f in shown:
            col = table.values[f][good]
            vals[f] = col[~np.isnan(col)]
        out.append(Point(table.platform.names[p], n, int(here.sum()), int(good.sum()), vals))
    return out


def figures(table: RunTable) -> list[str]:
    """FIGURES, then each throughput figure some ok scale run recorded."""
    scale = np.isin(table.scenario.codes, [c for c, s in enumerate(table.scenario.names) if is_scale(s)]) & table.ok
    extra = [f for f in THROUGHPUT if f in table.values and (scale & ~np.isnan(table.values[f])).any()]
    return [*FIGURES, *extra]


def applies(table: RunTable) -> bool:
    """The campaign has scale runs (a harness error is no platform's run: it alone shows no section)."""
    return any(is_scale(s) for s in table.scenario.names) and bool(points(table))


def _header(figs: list[str]) -> list[str]:
    return ["platform", "nodes", "n", *(f"`{f}` ({TABLE_UNITS.get(f, '')})" for f in figs)]


def table_of(pts: list[Point], figs: list[str]) -> tuple[list[str], list[list[str]]]:
    rows = []
    for pt in pts:
        n = f"{pt.n}" if pt.n == pt.runs else f"{pt.n} of {pt.runs}"
        rows.append([PLATFORM_LABEL.get(pt.platform, pt.platform), str(pt.nodes), n,
                     *(fmt(pt.median(f), TABLE_UNITS.get(f, "")) for f in figs)])
    return _header(figs), rows


def reading(pts: list[Point]) -> str:
    """What the table can be read for, from how many runs each size has."""
    most = max((pt.n for pt in pts), default=0)
    least = min((pt.n for pt in pts if pt.n), default=0)
    if most <= 1:
        return ("One run per size and platform: the table describes those runs. A difference between sizes or "
                "between the platforms at one size may be run-to-run noise; this section draws no verdict.")
    if least < MIN_N:
        return (f"At most {most} runs per size and platform (as few as {least}): medians that describe these "
                f"runs; below {MIN_N} runs a side the report draws no verdict, and this section draws none.")
    return ("Medians per size; the section compares no sizes or platforms by a test: the headline's verdicts "
            "are for the config's own job.")


def section(table: RunTable, chart: Path | None) -> list:
    """The section's blocks; [] without scale runs."""
    pts = points(table)
    if not pts:
        return []
    figs = figures(table)
    blocks: list = [
        ("p", "The config's job again at each size of `scale.nodes`, on each scheduler: per-rank batch, ranks, "
              "GPUs, CPUs and memory per node unchanged, so the world size grows with the nodes (weak scaling). "
              "Medians over each size's successful runs; n: those runs (of all its runs where some failed). "
              "These runs are kept out of every other section's figures."),
        ("table", table_of(pts, figs)),
        ("p", reading(pts)),
    ]
    if chart is not None:
        blocks.append(("img", (CHART, chart)))
    return blocks


def chart(table: RunTable, out: Path) -> Path | None:
    """Each figure's median against nodes (log2), the platforms on one axis, each run a dot; None without
    scale runs that succeeded."""
    pts = [pt for pt in points(table) if pt.n]
    if not pts:
        return None
    figs = figures(table)
    cols = min(3, len(figs))
    rows = math.ceil(len(figs) / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows + 0.6), squeeze=False)
    axes = grid.ravel()
    for ax in axes[len(figs):]:
        ax.set_visible(False)
    sizes = sorted({pt.nodes for pt in pts})
    plats = sorted({pt.platform for pt in pts}, key=platform_sort_key)
    for ax, f in zip(axes, figs, strict=False):
        drawn = False
        for p in plats:
            mine = [pt for pt in pts if pt.platform == p and pt.values[f].size]
            if not mine:
                continue
            xs = [pt.nodes for pt in mine]
            ax.plot(xs, [pt.median(f) for pt in mine], marker="o", color=_color(p), label=PLATFORM_LABEL.get(p, p))
            for pt in mine:
                if pt.values[f].size > 1:
                    ax.scatter(np.full(pt.values[f].size, pt.nodes), pt.values[f], color=_color(p), s=12, alpha=0.5,
                               zorder=3)
            drawn = True
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("nodes")
        ax.set_title(AXIS.get(f, f))
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle("Scale curve: median per size (line), each run a dot where a size has several")
    return _save(fig, out)
