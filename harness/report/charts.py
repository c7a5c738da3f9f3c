"""Charts as PNG files. matplotlib with the Agg backend: no display needed."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .records import curve_of, samples_of, value_of  # noqa: E402
from .stats import PLATFORM_LABEL, latest, platform_sort_key  # noqa: E402

COLORS = {"local": "#7f7f7f", "slurm": "#1f77b4", "k8s": "#d62728"}
PHASES = ["submitted", "blocker_released", "admitted", "allocated", "launched", "rendezvous", "sweep_done", "first_step", "fault",
          "resumed", "done"]
PHASE_COLORS = {"blocker_released": "#e0e0e0", "admitted": "#c7c7c7", "allocated": "#9edae5", "launched": "#ffbb78", "rendezvous": "#98df8a",
                "sweep_done": "#f7b6d2", "first_step": "#aec7e8", "fault": "#c5b0d5", "resumed": "#ff9896", "done": "#dbdb8d"}
SIDE_BY_SIDE = [("queue_s", "queue (s)"), ("startup_s", "startup (s)"), ("allreduce_busbw_gbps", "peak busbw (GB/s)"),
                ("recovery_s", "recovery (s)"), ("cost_per_step_usd", "cost per step (USD)")]


def _color(p: str) -> str:
    return COLORS.get(p, "#8c564b")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def metrics_side_by_side(df: pd.DataFrame, out: Path) -> Path:
    fig, axes = plt.subplots(1, len(SIDE_BY_SIDE), figsize=(4 * len(SIDE_BY_SIDE), 4))
    for ax, (metric, title) in zip(axes, SIDE_BY_SIDE):
        # recovery exists only per fault kind: show every fault kind's values together per platform;
        # a wait behind a blocking job is not a queue time of the clean job, so contention stays out
        sub = df[(df.metric.str.split(":").str[0] == metric) & ~df.metric.str.endswith(":contention")]
        plats = sorted(sub.platform.unique(), key=platform_sort_key)
        ax.set_title(title)
        if sub.empty:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            continue
        data = [sub[sub.platform == p]["value"].to_numpy() for p in plats]
        bp = ax.boxplot(data, widths=0.5, showfliers=False, patch_artist=True)
        for patch, p in zip(bp["boxes"], plats):
            patch.set_facecolor(_color(p))
            patch.set_alpha(0.35)
        rng = np.random.default_rng(0)
        for i, (vals, p) in enumerate(zip(data, plats), start=1):
            ax.scatter(i + rng.uniform(-0.12, 0.12, len(vals)), vals, color=_color(p), s=18, zorder=3)
        ax.set_xticks(range(1, len(plats) + 1), [PLATFORM_LABEL.get(p, p) for p in plats], rotation=15)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Headline metrics per platform (box: spread over runs; dots: runs)")
    return _save(fig, out)


def _representative(runs: list[dict]) -> list[dict]:
    """Per (platform, scenario), the ok run with the median startup (a typical run, not the best)."""
    groups: dict[tuple, list[dict]] = {}
    for r in latest(runs):
        if r.get("status") == "ok" and r.get("timeline"):
            groups.setdefault((r["platform"], r.get("scenario", "clean")), []).append(r)
    out = []
    for key in sorted(groups, key=lambda k: (platform_sort_key(k[0]), k[1] != "clean", k[1])):
        g = sorted(groups[key], key=lambda r: (value_of(r, "startup_s") or 0))
        out.append(g[len(g) // 2])
    return out


def timeline(runs: list[dict], out: Path) -> Path:
    reps = _representative(runs)
    fig, ax = plt.subplots(figsize=(11, 0.7 * max(2, len(reps)) + 2.2))
    seen = set()
    for y, r in enumerate(reps):
        tl = r["timeline"]
        t0 = tl.get("submitted")
        pts = [(p, tl[p] - t0) for p in PHASES if p in tl and t0 is not None]
        pts.sort(key=lambda x: x[1])
        for (p0, a), (p1, b) in zip(pts, pts[1:]):
            ax.barh(y, b - a, left=a, color=PHASE_COLORS.get(p1, "#ddd"), edgecolor="white",
                    label=None if p1 in seen else f"→ {p1}")
            seen.add(p1)
        for p, x in pts:
            if p in ("fault", "resumed"):
                ax.plot([x, x], [y - 0.45, y + 0.45], color="black", lw=1.2)
                ax.annotate(p, (x, y - 0.45), fontsize=7, ha="center", va="bottom")
    ax.set_yticks(range(len(reps)), [f"{PLATFORM_LABEL.get(r['platform'], r['platform'])} · {r.get('scenario')}" for r in reps])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since submit")
    ax.set_title("Phase timeline of a typical run (segment = time until the named phase)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8, ncol=5, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out)


def busbw_curve(runs: list[dict], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    any_data = False
    by_plat: dict[str, dict[int, list[float]]] = {}
    for r in latest(runs):
        if r.get("status") != "ok":
            continue
        for size, bw in curve_of(r):
            by_plat.setdefault(r["platform"], {}).setdefault(size, []).append(bw)
    for plat in sorted(by_plat, key=platform_sort_key):
        sizes = sorted(by_plat[plat])
        med = [np.median(by_plat[plat][s]) for s in sizes]
        lo = [np.min(by_plat[plat][s]) for s in sizes]
        hi = [np.max(by_plat[plat][s]) for s in sizes]
        ax.plot(sizes, med, marker="o", color=_color(plat), label=PLATFORM_LABEL.get(plat, plat))
        ax.fill_between(sizes, lo, hi, color=_color(plat), alpha=0.15)
        any_data = True
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s, 1e9 B)")
    ax.set_title("All-reduce bus bandwidth vs message size (median, band = min..max)")
    if any_data:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no sweep data", ha="center", transform=ax.transAxes)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, out)


def step_times(runs: list[dict], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    data, labels, colors = [], [], []
    by_plat: dict[str, list[float]] = {}
    for r in latest(runs):
        if r.get("status") == "ok":
            by_plat.setdefault(r["platform"], []).extend(samples_of(r))
    for plat in sorted(by_plat, key=platform_sort_key):
        if by_plat[plat]:
            data.append(np.array(by_plat[plat]) * 1000)
            labels.append(PLATFORM_LABEL.get(plat, plat))
            colors.append(_color(plat))
    if data:
        parts = ax.violinplot(data, showmedians=True)
        for body, c in zip(parts["bodies"], colors):
            body.set_facecolor(c)
            body.set_alpha(0.4)
        ax.set_xticks(range(1, len(labels) + 1), labels)
    else:
        ax.text(0.5, 0.5, "no steps", ha="center", transform=ax.transAxes)
    ax.set_ylabel("step time (ms)")
    ax.set_title("Training step time distribution (first step of each process excluded)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)


def cost(df: pd.DataFrame, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    sub = df[df.metric.str.startswith("cost_per_step")]
    keys = sorted(sub.metric.unique())
    plats = sorted(sub.platform.unique(), key=platform_sort_key)
    width = 0.8 / max(1, len(plats))
    for i, plat in enumerate(plats):
        meds = [sub[(sub.platform == plat) & (sub.metric == k)]["value"].median() for k in keys]
        ax.bar(np.arange(len(keys)) + i * width, [0 if np.isnan(m) else m for m in meds], width,
               color=_color(plat), label=PLATFORM_LABEL.get(plat, plat))
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


def contention(df: pd.DataFrame, out: Path) -> Path:
    panels = [(m, t) for m, t in CONTENTION_PANELS if (df.metric == m).any()]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, (metric, title) in zip(axes[0], panels):
        sub = df[df.metric == metric]
        plats = sorted(sub.platform.unique(), key=platform_sort_key)
        for i, p in enumerate(plats):
            vals = sub[sub.platform == p]["value"].to_numpy()
            ax.bar(i, np.median(vals), 0.6, color=_color(p), alpha=0.35)
            ax.scatter(np.full(len(vals), i), vals, color=_color(p), s=18, zorder=3)
        ax.set_xticks(range(len(plats)), [PLATFORM_LABEL.get(p, p) for p in plats])
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Contention: the job waits behind a same-shape job that holds the resources until it "
                 "finishes (bar: median; dots: runs)", fontsize=10)
    return _save(fig, out)


def all_charts(runs: list[dict], df: pd.DataFrame, outdir: Path) -> dict[str, Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    charts = {
        "metrics": metrics_side_by_side(df, outdir / "metrics.png"),
        "timeline": timeline(runs, outdir / "timeline.png"),
        "busbw": busbw_curve(runs, outdir / "busbw.png"),
        "step_times": step_times(runs, outdir / "step_times.png"),
        "cost": cost(df, outdir / "cost.png"),
    }
    if (df.metric == "handover_s").any():
        charts["contention"] = contention(df, outdir / "contention.png")
    return charts
