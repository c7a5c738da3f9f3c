"""The decision summary's charts: Kubernetes / Slurm per criterion with its interval, and the time each
platform took to tell a user what was wrong, per mistake."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from .charts import _color, _save, plt
from .compare import Comparison
from .equivalence import MARGIN
from .stats import HIGHER_IS_BETTER, PLATFORM_LABEL, base_metric, platform_sort_key
from .ux import Probe


def _drawn(c: Comparison) -> tuple[float, float, float]:
    """What a line shows: the tested ratio and its 90% interval (what the verdict rests on), else the ratio
    of medians and its 95% bootstrap interval."""
    if c.tested and math.isfinite(c.effect) and math.isfinite(c.eq_low) and math.isfinite(c.eq_high):
        return c.effect, c.eq_low, c.eq_high
    return c.ratio, c.ci_low, c.ci_high


def ratios(points: list[tuple[str, Comparison]], out: Path) -> Path:
    """One line per comparison: its ratio with an interval where n allows one (a hollow dot where it does
    not), on a log scale around 1, and the margin inside which an interval means equivalence."""
    fig, ax = plt.subplots(figsize=(10, 0.45 * max(4, len(points)) + 1.8))
    ax.axvspan(1 / MARGIN, MARGIN, color="#e8f0fb", zorder=0)
    for y, (_, c) in enumerate(points):
        color = "#2ca02c" if c.better else "#555555"
        ratio, lo, hi = _drawn(c)
        if math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=color, lw=2.2)
            ax.plot(ratio, y, "o", color=color)
        else:
            ax.plot(ratio, y, "o", mfc="white", color=color)
        better = "higher is better" if base_metric(c.metric) in HIGHER_IS_BETTER else "lower is better"
        verdict = f"{PLATFORM_LABEL.get(c.better, c.better)} ahead" if c.better else {
            "few": f"n {c.n_num}/{c.n_den}: no interval", "none": "no clear difference",
            "resolution": "below resolution", "descriptive": "not tested",
            "equivalent": f"equivalent within ×{MARGIN:g}"}.get(c.verdict, c.verdict)
        ax.annotate(f"{verdict} ({better})", (1, y), xycoords=("axes fraction", "data"), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.axvline(1, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator([0.125, 0.25, 0.5, 1, 2, 4, 8]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(range(len(points)), [p[0] for p in points], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"Kubernetes / Slurm (log scale). Tested: the test's ratio and 90% interval; shaded: the ×{MARGIN:g} "
                  "margin.\nNot tested: the ratio of medians and its 95% bootstrap interval.")
    ax.set_title("Per criterion: left of 1 Kubernetes is lower, right of 1 higher")
    if not points:
        ax.text(0.5, 0.5, "no comparison between Kubernetes and Slurm", ha="center", transform=ax.transAxes)
    ax.grid(axis="x", alpha=0.3, which="both")
    fig.subplots_adjust(right=0.75)
    return _save(fig, out)


def time_to_error(probes: list[Probe], out: Path) -> Path:
    """Bars per mistake and platform: seconds to a clear message; a hatched bar to the deadline where none came."""
    kinds = list(dict.fromkeys(p.kind for p in probes))
    plats = sorted({p.platform for p in probes}, key=platform_sort_key)
    width = 0.8 / max(1, len(plats))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.6 * len(kinds) + 2), 4.5))
    at = {(p.kind, p.platform): p for p in probes}
    for j, plat in enumerate(plats):
        for i, kind in enumerate(kinds):
            p = at.get((kind, plat))
            if p is None:
                continue
            x = i + j * width
            if p.clear:
                ax.bar(x, p.seconds, width, color=_color(plat))
                ax.annotate(f"{p.seconds:.1f} s" + (" at submit" if p.at_submit else ""), (x, p.seconds),
                            ha="center", va="bottom", fontsize=7)
            else:
                h = p.deadline or 0.0
                ax.bar(x, h, width, color="white", edgecolor=_color(plat), hatch="//")
                ax.annotate(f"not clear in {h:g} s", (x, h), ha="center", va="bottom", fontsize=7)
    if plats:   # patches, not the bars: a platform whose every probe was unclear still gets its colour named
        ax.legend(handles=[Patch(color=_color(p), label=PLATFORM_LABEL.get(p, p)) for p in plats])
    ax.set_xticks(np.arange(len(kinds)) + width * (len(plats) - 1) / 2, kinds, rotation=10)
    ax.set_ylabel("seconds from submit to a clear message")
    ax.set_title("Time to a clear error, one probe per mistake (hatched: none before the deadline)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)
