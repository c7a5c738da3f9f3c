"""Charts as PNG files. matplotlib with the Agg backend: no display needed."""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import cbook, mlab
from matplotlib.ticker import FuncFormatter

from . import files
from .extras import is_scale
from .records import PHASES, RECOVERY_PHASES
from .stats import PLATFORM_LABEL, Groups, base_metric, platform_sort_key
from .table import RunTable

COLORS = {"local": "#7f7f7f", "slurm": "#1f77b4", "k8s": "#d62728"}
PHASE_COLORS = {"blocker_released": "#e0e0e0", "admitted": "#c7c7c7", "allocated": "#9edae5", "launched": "#ffbb78",
                "rendezvous": "#98df8a", "sweep_done": "#f7b6d2", "first_step": "#aec7e8", "fault": "#c5b0d5",
                "resumed": "#ff9896", "done": "#dbdb8d"}
SIDE_BY_SIDE = [("queue_s", "queue (s)"), ("startup_s", "startup (s)"), ("allreduce_busbw_gbps", "busbw (GB/s)"),
                ("recovery_s", "recovery (s)"), ("cost_per_step_usd", "cost per step (USD)")]


def _color(p: str) -> str:
    return COLORS.get(p, "#8c564b")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    return files.save_figure(fig, path)


def _sorted_platforms(names) -> list[str]:
    return sorted(set(names), key=platform_sort_key)


def config_job(table: RunTable) -> np.ndarray:
    """Per run: a run of the config's own job; a scale-curve run is another size (its own section's chart)."""
    return ~np.isin(table.scenario.codes, [c for c, s in enumerate(table.scenario.names) if is_scale(s)])


def metrics_side_by_side(gs: Groups, out: Path) -> Path:
    panels = SIDE_BY_SIDE
    if any(base_metric(k) == "allreduce_avg_busbw_gbps" for _, k in gs):   # nccl-tests' figure over the whole sweep
        panels = [("allreduce_avg_busbw_gbps", "avg busbw (GB/s)") if m == "allreduce_busbw_gbps" else (m, t)
                  for m, t in SIDE_BY_SIDE]
    # a grid of at most 3 across: one row of 5 panels made a 2200 × 440 strip no page shows readably
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(4 * cols, 3.6 * rows + 0.5), squeeze=False)
    axes = grid.ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    for ax, (metric, title) in zip(axes, panels, strict=False):
        # recovery exists only per fault kind: show every fault kind's values together per platform;
        # a wait behind a blocking job is not a queue time of the clean job, so contention stays out
        sub = {pk: g for pk, g in gs.items() if base_metric(pk[1]) == metric and not pk[1].endswith(":contention")}
        plats = _sorted_platforms(p for p, _ in sub)
        ax.set_title(title)
        if not sub:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            continue
        data = []
        for p in plats:   # a run has one key per metric, so its runs' values merge back in report order
            parts = [g for (gp, _), g in sub.items() if gp == p]
            runs = np.concatenate([g.runs for g in parts])
            data.append(np.concatenate([g.values for g in parts])[np.argsort(runs, kind="stable")])
        bp = ax.boxplot(data, widths=0.5, showfliers=False, patch_artist=True)
        for patch, p in zip(bp["boxes"], plats, strict=True):
            patch.set_facecolor(_color(p))
            patch.set_alpha(0.35)
        rng = np.random.default_rng(0)
        for i, (vals, p) in enumerate(zip(data, plats, strict=True), start=1):
            ax.scatter(i + rng.uniform(-0.12, 0.12, len(vals)), vals, color=_color(p), s=18, zorder=3)
        ax.set_xticks(range(1, len(plats) + 1), [PLATFORM_LABEL.get(p, p) for p in plats], rotation=15)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Headline metrics per platform (box: spread over runs; dots: runs)")
    return _save(fig, out)


def representative(table: RunTable) -> list[int]:
    """Per (platform, scenario), the ok run with the median startup (a typical run, not the best)."""
    rows = np.flatnonzero(table.ok & table.has_timeline & config_job(table))
    startup = np.nan_to_num(table.values["startup_s"][rows], nan=0.0)
    plat, scen = table.platform.codes[rows], table.scenario.codes[rows]
    out = []
    keys = {(table.platform.names[p], table.scenario.names[s])
            for p, s in zip(plat.tolist(), scen.tolist(), strict=True)}
    for p, s in sorted(keys, key=lambda k: (platform_sort_key(k[0]), k[1] != "clean", k[1])):
        in_group = (plat == table.platform.names.index(p)) & (scen == table.scenario.names.index(s))
        g = np.flatnonzero(in_group)
        g = g[np.argsort(startup[g], kind="stable")]
        out.append(int(rows[g[len(g) // 2]]))
    return out


def timeline(table: RunTable, out: Path) -> Path:
    reps = representative(table)
    fig, ax = plt.subplots(figsize=(11, 0.7 * max(2, len(reps)) + 2.2))
    seen = set()
    for y, r in enumerate(reps):
        tl = {p: float(t) for p, t in zip(PHASES, table.timeline[r], strict=True) if not np.isnan(t)}
        t0 = tl.get("submitted")
        pts = [(p, tl[p] - t0) for p in PHASES if p in tl and t0 is not None]
        pts.sort(key=lambda x: x[1])
        for (_, a), (p1, b) in itertools.pairwise(pts):
            ax.barh(y, b - a, left=a, color=PHASE_COLORS.get(p1, "#ddd"), edgecolor="white",
                    label=None if p1 in seen else f"→ {p1}")
            seen.add(p1)
        for p, x in pts:
            if p in ("fault", "resumed"):
                ax.plot([x, x], [y - 0.45, y + 0.45], color="black", lw=1.2)
                ax.annotate(p, (x, y - 0.45), fontsize=7, ha="center", va="bottom")
    ax.set_yticks(range(len(reps)), [f"{PLATFORM_LABEL.get(table.platform[r], table.platform[r])} · {table.scenario[r]}"
                                     for r in reps])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since submit")
    ax.set_title("Phase timeline of a typical run (segment = time until the named phase)")
    if seen:   # a campaign without timelines has nothing to name
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8, ncol=5, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out)


def size_label(n: float) -> str:
    """Bytes as a reader names them: 512 B, 4 KiB, 16 MiB, 1 GiB (fractions where a tick falls between)."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


def busbw_curve(table: RunTable, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    run = table.curve_bytes.row_of_each()
    keep = (table.ok & config_job(table))[run]
    plat = table.platform.codes[run[keep]]
    sizes, bws = table.curve_bytes.values[keep], table.curve_busbw.values[keep]
    any_data = False
    for name in _sorted_platforms(table.platform.names[c] for c in np.unique(plat)):
        mine = plat == table.platform.names.index(name)
        s, bw = sizes[mine], bws[mine]
        order = np.argsort(s, kind="stable")
        xs, starts = np.unique(s[order], return_index=True)
        per_size = np.split(bw[order], starts[1:])
        ax.plot(xs.tolist(), [np.median(v) for v in per_size], marker="o", color=_color(name),
                label=PLATFORM_LABEL.get(name, name))
        ax.fill_between(xs.tolist(), [np.min(v) for v in per_size], [np.max(v) for v in per_size],
                        color=_color(name), alpha=0.15)
        any_data = True
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(v)))
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw (GB/s, 1e9 B)")
    ax.set_title("All-reduce bus bandwidth vs message size (median, band = min..max)")
    if any_data:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no sweep data", ha="center", transform=ax.transAxes)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, out)


# Up to this many values a violin's density is matplotlib's own Gaussian KDE, value by value.
KDE_EXACT_MAX = 20_000
KDE_BINS_PER_BANDWIDTH = 100


def _kde(x: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """The density Axes.violinplot draws (Gaussian kernel, Scott's bandwidth), at `coords`.

    It costs values x coords kernel evaluations: over a second for the 800,000 step samples of
    100,000 runs. Beyond KDE_EXACT_MAX values they are first spread linearly onto bins a hundredth
    of a bandwidth apart (at most a quarter as many bins as values, else the exact sum); that moves
    the density by under 2e-5 of the kernel's peak: far below a pixel.
    """
    if np.all(x[0] == x):   # as matplotlib: one repeated value has no spread to estimate
        return (x[0] == coords).astype(float)
    kde = mlab.GaussianKDE(x, None)
    h = float(np.sqrt(kde.covariance[0, 0]))
    lo, hi = float(coords[0]), float(coords[-1])
    n_bins = int(np.ceil((hi - lo) * KDE_BINS_PER_BANDWIDTH / h)) + 1
    if x.size <= KDE_EXACT_MAX or n_bins > x.size // 4:
        return kde.evaluate(coords)
    grid, step = np.linspace(lo, hi, n_bins, retstep=True)
    pos = (x - lo) / step
    left = np.minimum(pos.astype(np.int64), n_bins - 2)
    right_share = pos - left
    weights = (np.bincount(left, 1 - right_share, n_bins) + np.bincount(left + 1, right_share, n_bins))
    return np.array([weights @ np.exp(-0.5 * ((c - grid) / h) ** 2) for c in coords]) / kde.norm_factor


def step_times(table: RunTable, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    data, labels, colors = [], [], []
    run = table.samples.row_of_each()
    ok_plat = np.where(table.ok & config_job(table), table.platform.codes, -1)[run]
    for name in _sorted_platforms(table.platform.names[c] for c in np.unique(ok_plat) if c >= 0):
        vals = table.samples.values[ok_plat == table.platform.names.index(name)]
        data.append(vals * 1000)
        labels.append(PLATFORM_LABEL.get(name, name))
        colors.append(_color(name))
    if data:
        parts = ax.violin(cbook.violin_stats(data, _kde), showmedians=True)   # = ax.violinplot(data, showmedians=True)
        for body, c in zip(parts["bodies"], colors, strict=True):
            body.set_facecolor(c)
            body.set_alpha(0.4)
        ax.set_xticks(range(1, len(labels) + 1), labels)
    else:
        ax.text(0.5, 0.5, "no steps", ha="center", transform=ax.transAxes)
    ax.set_ylabel("step time (ms)")
    ax.set_title("Training step time distribution (first step of each process excluded)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)


def cost(gs: Groups, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    sub = {pk: g for pk, g in gs.items() if pk[1].startswith("cost_per_step")}
    keys = sorted({k for _, k in sub})
    plats = _sorted_platforms(p for p, _ in sub)
    width = 0.8 / max(1, len(plats))
    for i, plat in enumerate(plats):
        meds = [np.median(sub[(plat, k)].values) if (plat, k) in sub else 0 for k in keys]
        ax.bar(np.arange(len(keys)) + i * width, meds, width, color=_color(plat), label=PLATFORM_LABEL.get(plat, plat))
    label = {"cost_per_step_usd": "effective (clean)", "cost_per_step_steady_usd": "steady state"}
    ax.set_xticks(np.arange(len(keys)) + width * (len(plats) - 1) / 2,
                  [label.get(k, "effective · " + k.split(":", 1)[-1]) for k in keys], rotation=10)
    ax.set_ylabel("USD per step (median)")
    ax.set_title("Cost per step: steady state vs. effective (queue, startup, recovery included)")
    if plats:
        ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)


CONTENTION_PANELS = [("queue_s:contention", "queue behind the blocker (s)"),
                     ("queue_admission_s:contention", "Kueue admission behind the blocker (s)"),
                     ("handover_s", "handover: blocker released → allocated (s)")]


def contention(gs: Groups, out: Path) -> Path:
    panels = [(m, t) for m, t in CONTENTION_PANELS if any(k == m for _, k in gs)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, (metric, title) in zip(axes[0], panels, strict=True):
        plats = _sorted_platforms(p for p, k in gs if k == metric)
        for i, p in enumerate(plats):
            vals = gs[(p, metric)].values
            ax.bar(i, np.median(vals), 0.6, color=_color(p), alpha=0.35)
            ax.scatter(np.full(len(vals), i), vals, color=_color(p), s=18, zorder=3)
        ax.set_xticks(range(len(plats)), [PLATFORM_LABEL.get(p, p) for p in plats])
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Contention: the job waits behind a same-shape job that holds the resources until it "
                 "finishes (bar: median; dots: runs)", fontsize=10)
    return _save(fig, out)


PHASE_STACK_COLORS = ["#c5b0d5", "#ff9896", "#9edae5", "#ffbb78", "#98df8a", "#aec7e8"]


def recovery_phases(gs: Groups, out: Path) -> Path:
    """Per platform and fault kind, the median of each recovery phase, stacked in the order they happen
    (medians of parts need not add up to the median recovery_s, shown as a black tick)."""
    bars = sorted({(p, k.split(":", 1)[1]) for p, k in gs if base_metric(k) in RECOVERY_PHASES and ":" in k},
                  key=lambda pk: (pk[1], platform_sort_key(pk[0])))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(bars) + 3), 4.5))
    bottom = np.zeros(len(bars))
    for phase, color in zip(RECOVERY_PHASES, PHASE_STACK_COLORS, strict=True):
        h = np.array([np.median(gs[(p, f"{phase}:{f}")].values) if (p, f"{phase}:{f}") in gs else 0.0
                      for p, f in bars])
        label = phase.removeprefix("recovery_").removesuffix("_s")
        ax.bar(range(len(bars)), h, 0.6, bottom=bottom, color=color, label=label)
        bottom += h
    for i, (p, f) in enumerate(bars):
        if (p, f"recovery_s:{f}") in gs:
            total = np.median(gs[(p, f"recovery_s:{f}")].values)
            ax.plot([i - 0.35, i + 0.35], [total, total], color="black", lw=1.5,
                    label="recovery_s (median)" if i == 0 else None)
    ax.set_xticks(range(len(bars)), [f"{PLATFORM_LABEL.get(p, p)} · {f}" for p, f in bars], rotation=10)
    ax.set_ylabel("seconds (median over runs)")
    ax.set_title("Recovery broken down: detection → teardown → rescheduling → restart → checkpoint load → recompute")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)


def all_charts(table: RunTable, gs: Groups, outdir: Path) -> dict[str, Path]:
    files.real_dir(outdir)
    charts = {
        "metrics": metrics_side_by_side(gs, outdir / "metrics.png"),
        "timeline": timeline(table, outdir / "timeline.png"),
        "busbw": busbw_curve(table, outdir / "busbw.png"),
        "step_times": step_times(table, outdir / "step_times.png"),
        "cost": cost(gs, outdir / "cost.png"),
    }
    if any(k == "handover_s" for _, k in gs):
        charts["contention"] = contention(gs, outdir / "contention.png")
    if any(base_metric(k) in RECOVERY_PHASES and ":" in k for _, k in gs):
        charts["recovery"] = recovery_phases(gs, outdir / "recovery.png")
    return charts
