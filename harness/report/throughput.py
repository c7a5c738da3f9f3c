"""Throughput against offered load: the chart, the sweep's table and the saturation lines.

A sweep is rows, one per replay: {"platform", "rate" (what the trace offered), "throughput" (outcome.
throughput of its records), and what it cost: "harness_cpu_s" and "control_plane_cpu_cores" (each
Kubernetes control-plane process, or the Slurm container, as benchmarks/replay_scale.py keeps them)}.
Offered and achieved are the schedulers' own records, in whole seconds, so each rate carries a few
percent of error; each point is one replay, and the lines say both.

Achieved is jobs placed per second from the first placement to the last (outcome.throughput's
placing_jobs_per_s): the arrivals' span shifted by the scheduler's latency. Counted from the first
submission instead, a constant latency reads as falling behind over a short burst: Slurm's scheduling
passes (sched_interval and bf_interval, 5 s each here) delay a start by up to 5 s, which over 30 s of
arrivals is 15 % of the span. The lag (last placement − last submission) beside it shows a backlog.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from ..scale.saturation import KEEPS_UP, Saturation
from . import files
from .charts import COLORS
from .stats import PLATFORM_LABEL


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def offered(row: dict) -> float | None:
    """The offered rate as the scheduler recorded the submissions; the trace's rate when it recorded none.
    Recorded, not intended: a harness that could not submit as fast offered less, and the point shows it."""
    t = row["throughput"]
    return t["offered_jobs_per_s"] if t["offered_jobs_per_s"] is not None else row.get("rate")


def achieved(row: dict) -> float | None:
    """Jobs placed per second from the first placement to the last (the module docstring says why)."""
    t = row["throughput"]
    return t.get("placing_jobs_per_s", t["jobs_per_s"])


def points(rows: list[dict]) -> dict[str, list[tuple[float | None, float | None]]]:
    """(offered, achieved jobs/s) per platform, in the rows' order."""
    out: dict[str, list[tuple[float | None, float | None]]] = {}
    for r in rows:
        out.setdefault(r["platform"], []).append((offered(r), achieved(r)))
    return out


def chart(pts: dict[str, list[tuple[float | None, float | None]]], path: Path,
          sat: dict[str, Saturation] | None = None) -> Path:
    """Achieved against offered jobs/s per platform, with the y = x line (kept up exactly) and the
    KEEPS_UP line under it; a platform's saturation point is ringed where the sweep went past it."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    drawn = [(o, a) for v in pts.values() for o, a in v if o is not None and a is not None]
    log = bool(drawn) and all(o > 0 and a > 0 for o, a in drawn)   # doubling rates read evenly on log axes
    for p, v in pts.items():
        xy = sorted((o, a) for o, a in v if o is not None and a is not None)
        if not xy:
            continue
        ax.plot([o for o, _ in xy], [a for _, a in xy], marker="o", color=COLORS.get(p),
                label=f"{_label(p)} ({len(xy)} replay{'s' if len(xy) != 1 else ''})")
        s = (sat or {}).get(p)
        if s is not None and s.reached and s.saturation_jobs_per_s is not None:
            at = [a for o, a in xy if o == s.saturation_jobs_per_s]
            ax.scatter([s.saturation_jobs_per_s], at[:1], s=180, facecolors="none", edgecolors=COLORS.get(p),
                       linewidths=1.5, zorder=3, label=f"{_label(p)} saturation point")
    if drawn:
        hi = max(max(o, a) for o, a in drawn)
        lo = min(min(o, a) for o, a in drawn) if log else 0.0
        ax.plot([lo, hi], [lo, hi], color="#444444", linestyle="--", linewidth=1, label="achieved = offered")
        ax.plot([lo, hi], [KEEPS_UP * lo, KEEPS_UP * hi], color="#999999", linestyle=":", linewidth=1,
                label=f"{KEEPS_UP:.0%} of offered (kept up)")
    if log:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        for axis in (ax.xaxis, ax.yaxis):   # 4 and 16, not 2^2 and 2^4
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("offered (jobs/s, scheduler's submit records)")
    ax.set_ylabel("achieved placement (jobs/s)")
    ax.set_title("Throughput against offered load (one replay per point; whole-second records)", fontsize=9)
    if drawn:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return files.save_figure(fig, path, levels=0)   # wherever the caller (a benchmark) chose


def saturation_lines(sat: dict[str, Saturation]) -> list[str]:
    """One markdown bullet per platform: its saturation point and plateau, on how many replays."""
    out = [f"Kept up: placed at least {KEEPS_UP:.0%} of the offered rate, from the first placement to the last "
           "(the scheduler's latency shifts the span, it does not shorten it). Each point is one replay, "
           "timed from the scheduler's whole-second records, so a single point can be off by a few percent "
           "and no run-to-run spread is known."]
    for p, s in sat.items():
        n = f"{s.points} point{'s' if s.points != 1 else ''} (one replay each)"
        if s.saturation_jobs_per_s is None:
            head = f"no saturation point from {n}: {s.reason}"
        elif s.reached:
            head = f"saturates at {s.saturation_jobs_per_s:g} jobs/s offered, from {n}; {s.reason}"
        else:
            head = f"no saturation within the sweep, from {n}: {s.reason}"
        plateau = ("" if s.plateau_jobs_per_s is None else
                   f"; most achieved {s.plateau_jobs_per_s:.3g} jobs/s (at {s.plateau_at_jobs_per_s:g} offered)")
        dropped = f"; {s.dropped} point(s) without a rate left out" if s.dropped else ""
        out.append(f"- **{_label(p)}**: {head}{plateau}{dropped}")
    return out


def num(x: float | None, fmt: str = ".3g") -> str:
    return "n/a" if x is None else format(x, fmt)


def table(rows: list[dict]) -> list[str]:
    """The sweep as a markdown table, one row per replay, costs beside the rates."""
    out = ["| platform | trace jobs/s | offered jobs/s | achieved jobs/s | from the first submission | nodes/s "
           "| lag (s) | never placed | harness CPU (s) | control-plane CPU (cores) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["throughput"]
        cores = r.get("control_plane_cpu_cores")
        sched = num(sum(cores.values()) if cores else None, ".2f")
        out.append(f"| {_label(r['platform'])} | {num(r.get('rate'), 'g')} | {num(t['offered_jobs_per_s'])} "
                   f"| {num(achieved(r))} | {num(t['jobs_per_s'])} | {num(t['nodes_per_s'])} | {num(t['lag_s'], 'g')} "
                   f"| {t['never_placed']} | {num(r.get('harness_cpu_s'), '.2f')} | {sched} |")
    return out
