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

import json
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


# ---- the saturation sweep over sizes and rate limits (benchmarks/replay_throughput.py) -------------------

def _series_key(r: dict) -> str:
    lim = r.get("limits", "-")
    return _label(r["platform"]) + ("" if lim in ("-", None) else f" ({lim})")


def sweep_chart(rows: list[dict], found: list, path: Path) -> Path:
    """One column per cluster size: achieved against offered jobs/s per platform and rate-limit setting (a
    point per replay, repeats side by side), the y = x line and each ceiling ringed; under it the host's busy
    cores (mean, and peak as the bar's top) at each rate."""
    sizes = sorted({int(r["nodes"]) for r in rows})
    fig, axes = plt.subplots(2, len(sizes), figsize=(5.5 * len(sizes), 7.5), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    styles = ["-", "--", ":", "-."]
    for col, n in enumerate(sizes):
        ax, cpu = axes[0][col], axes[1][col]
        mine = [r for r in rows if int(r["nodes"]) == n]
        keys = list(dict.fromkeys(_series_key(r) for r in sorted(mine, key=lambda r: (r["platform"], r.get("limits")))))
        hi = max([max(r["offered"] or 0, r["achieved"] or 0) for r in mine] + [1])
        for i, key in enumerate(keys):
            pts = [r for r in mine if _series_key(r) == key]
            p = pts[0]["platform"]
            for rep in sorted({r.get("repeat", 1) for r in pts}):
                xy = sorted((r["offered"], r["achieved"]) for r in pts if r.get("repeat", 1) == rep
                            and r["offered"] is not None and r["achieved"] is not None)
                ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", color=COLORS.get(p),
                        linestyle=styles[i % len(styles)], alpha=0.9 if rep == 1 else 0.55,
                        label=key if rep == 1 else None)
            c = next((c for c in found if c.platform == p and c.nodes == n and _series_key(
                {"platform": p, "limits": c.limits}) == key), None)
            if c is not None and c.jobs_per_s is not None:
                ax.scatter([c.jobs_per_s], [c.jobs_per_s], s=200, facecolors="none", edgecolors=COLORS.get(p),
                           linewidths=1.5, zorder=3)
            by_rate: dict[float, list[dict]] = {}
            for r in pts:
                by_rate.setdefault(r["rate"], []).append(r)
            xs = sorted(by_rate)
            mean = [max((r.get("host_cpu") or {}).get("host", {}).get("mean_cores", 0) or 0 for r in by_rate[x])
                    for x in xs]
            peak = [max((r.get("host_cpu") or {}).get("host", {}).get("peak_cores", 0) or 0 for r in by_rate[x])
                    for x in xs]
            cpu.plot(xs, mean, marker="o", color=COLORS.get(p), linestyle=styles[i % len(styles)], label=f"{key} mean")
            cpu.plot(xs, peak, marker="^", color=COLORS.get(p), linestyle=styles[i % len(styles)], alpha=0.5,
                     label=f"{key} peak")
        ax.plot([0, hi], [0, hi], color="#444444", linestyle="--", linewidth=1, label="achieved = offered")
        ax.plot([0, hi], [0, KEEPS_UP * hi], color="#999999", linestyle=":", linewidth=1, label=f"{KEEPS_UP:.0%}")
        ax.set_title(f"{n} emulated nodes (rings: ceilings)", fontsize=9)
        ax.set_xlabel("offered (jobs/s, scheduler's submit records)")
        ax.set_ylabel("placed (jobs/s)")
        ax.legend(fontsize=6)
        cpus = next(((r.get("host_cpu") or {}).get("host_cpus") for r in mine if r.get("host_cpu")), None)
        if cpus:
            cpu.axhline(cpus, color="#999999", linestyle=":", linewidth=1)
        cpu.set_xlabel("trace's offered rate (jobs/s)")
        cpu.set_ylabel("host busy cores (mean, peak)")
        cpu.legend(fontsize=5)
    fig.tight_layout()
    return files.save_figure(fig, path, levels=0)


def _runtimes(by_size) -> str:
    """The sweep's run time per cluster size ({"16": 3, "256": 5}) as words."""
    if not isinstance(by_size, dict):
        return f"{by_size} s"
    return ", ".join(f"{v} s at {k} nodes" for k, v in sorted(by_size.items(), key=lambda kv: int(kv[0])))


def sweep_markdown(rows: list[dict], found: list, settings: dict) -> str:
    """The sweep's report: the ceilings first (what replays are judged against), then every replay with its
    host CPU beside it."""
    lines = ["# Placement ceilings on this host: saturation sweeps", "",
             "Steady traces (harness/scale/steady.py): each rate offered for "
             f"{settings.get('seconds', '?'):g} s, jobs of "
             f"{_runtimes(settings.get('runtime_s'))}, gangs of 1, 2 and 4 nodes; "
             f"{settings.get('repeat', 1)} sweep(s); a platform's rates stop rising after the first it placed under "
             f"{settings.get('stop_below', 0.75):.0%} of. Times are the schedulers' own whole-second records; the "
             "host's CPU is sampled every second over each replay (whole host and each component).", "",
             "## Ceilings", "",
             "A ceiling is the highest offered rate every repeat kept up with (placed at least "
             f"{KEEPS_UP:.0%} of it, from the first placement to the last); `+` marks a lower bound (no rate was "
             "missed). "
             "A replay whose busiest 10 s offer more than a platform's ceiling at its size and rate limits is "
             "throughput-bound there and feeds no queue-policy verdict.", "",
             "| platform | nodes | client rate limits | ceiling (jobs/s) | most placed (jobs/s) | replays | repeats "
             "| why |",
             "|---|---:|---|---:|---:|---:|---:|---|"]
    for c in found:
        ceil = "–" if c.jobs_per_s is None else f"{c.jobs_per_s:g}{'' if c.reached else '+'}"
        lines.append(f"| {_label(c.platform)} | {c.nodes} | {c.limits} | {ceil} | {num(c.plateau_jobs_per_s)} | "
                     f"{c.points} | {c.repeats} | {c.reason or ''} |")
    lines += ["", "![placed against offered, and the host's CPU](throughput.png)", "", "## Every replay", "",
              "| platform | nodes | limits | repeat | trace jobs/s | offered | placed | lag (s) | never placed "
              "| host cores "
              "mean / peak | busiest component (mean / peak cores) | harness CPU (s) |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for r in rows:
        h = (r.get("host_cpu") or {})
        host = h.get("host") or {}
        comps = sorted((h.get("components") or {}).items(), key=lambda kv: -kv[1]["mean_cores"])
        top = next(((n, c) for n, c in comps if n != "other"), None)
        lines.append(f"| {_label(r['platform'])} | {r['nodes']} | {r.get('limits', '-')} | {r.get('repeat', 1)} | "
                     f"{num(r['rate'], 'g')} | {num(r['offered'])} | {num(r['achieved'])} | "
                     f"{num(r['throughput']['lag_s'], 'g')} | {r['throughput']['never_placed']} | "
                     f"{num(host.get('mean_cores'), '.2f')} / {num(host.get('peak_cores'), '.2f')} | "
                     + (f"{top[0]} {top[1]['mean_cores']:.2f} / {top[1]['peak_cores']:.2f}" if top else "–")
                     + f" | {num(r.get('harness_cpu_s'), '.2f')} |")
    lines += ["", f"Settings: `{json.dumps(settings, sort_keys=True)}`. Each replay's records are in its own "
              "directory; `poc scale rederive DIR` re-derives it.", ""]
    return "\n".join(lines)
