"""The upgrade drills' timeline: per drill run, the components restarting and the probes' answers on
top, the drilled job's rank-0 steps underneath on the same seconds, so a stall or a lost step lines
up with the component that caused it."""
from __future__ import annotations

from pathlib import Path

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from . import files
from .charts import _color, plt
from .drills import Drill
from .stats import PLATFORM_LABEL, platform_sort_key

REFUSED, ACCEPTED = "#d62728", "#c7e9c0"
COMPONENT = "#7b7fb8"   # one colour for every platform: red means refused here, not Kubernetes
SLOW_S = 1.0   # an accepted try that took this long is labelled: a Slurm client waiting for slurmctld
MIN_TRY_S = 0.15   # a try that answered at once is drawn this wide, or it would not show


def drawable(drills: list[Drill]) -> list[Drill]:
    """The runs with a drill to draw: started (a window) and at least one component restarted."""
    return [d for d in drills if (d.evidence.get("window") or {}).get("start") is not None and d.components()]


def queued_marks(d: Drill) -> list[tuple[float, str]]:
    """When the queued job was seen allocated (harness clock, late by at most a poll) and its first step
    (workload clock), where the drill kept them."""
    q = d.evidence.get("queued") or d.summary.get("queued") or {}
    return [(float(q[k]), style) for k, style in (("allocated_seen", "--"), ("first_step", ":"))
            if isinstance(q.get(k), int | float)]


def timeline(drills: list[Drill], out: Path) -> Path | None:
    """A row per drill kind, a column per platform (Slurm left, as in the section's tables); a drill that
    did not run says so in its cell instead of leaving a gap."""
    runs = drawable(drills)
    if not runs:
        return None
    kinds = list(dict.fromkeys(d.kind for d in drills))
    plats = sorted({d.platform for d in drills}, key=platform_sort_key)
    heights = [max(len(d.components()) + 2 for d in runs) * 0.27 + 0.5, 1.5]
    # two columns wide at least: the legend and title are one line each (one platform alone was cut off)
    fig = plt.figure(figsize=(7.0 * max(2, len(plats)), len(kinds) * (sum(heights) + 1.0) + 0.8))
    outer = fig.add_gridspec(len(kinds), len(plats), hspace=0.28, wspace=0.42)
    for i, kind in enumerate(kinds):
        for j, plat in enumerate(plats):
            d = next((x for x in drills if x.kind == kind and x.platform == plat), None)
            if d is not None and d in runs:
                inner = outer[i, j].subgridspec(2, 1, height_ratios=heights, hspace=0.06)
                top = fig.add_subplot(inner[0])
                _panel(d, top, fig.add_subplot(inner[1], sharex=top))
                continue
            ax = fig.add_subplot(outer[i, j])
            ax.axis("off")
            why = "not run" if d is None else f"did not run ({d.status}" + (
                f" at {(d.error or {}).get('stage')})" if (d.error or {}).get("stage") else ")")
            ax.set_title(f"{PLATFORM_LABEL.get(plat, plat)} · {kind}", fontsize=10, color=_color(plat))
            ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=9, color="#555", transform=ax.transAxes)
    fig.legend(handles=[Patch(color=COMPONENT, label="component: restart asked → healthy"),
                        Patch(facecolor="white", edgecolor=REFUSED, hatch="//", label="component not back"),
                        Patch(color=REFUSED, label="probe refused"), Patch(color=ACCEPTED, label="probe answered"),
                        Line2D([], [], color="#444", label="drilled job: rank-0 step"),
                        Line2D([], [], color="black", ls="--", label="queued job seen allocated"),
                        Line2D([], [], color="black", ls=":", label="queued job's first step")],
               loc="lower center", ncol=7, fontsize=8, frameon=False)
    fig.suptitle("Upgrade drills: components restarted in order, probes, and the running job's steps "
                 "(x: seconds since the drill started; shaded: while the drill watched)", fontsize=11)
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.55 / fig.get_figheight() + 0.02,
                        top=1 - 0.6 / fig.get_figheight())
    return files.save_figure(fig, out)


def _panel(d: Drill, top, bottom) -> None:
    w0 = float(d.evidence["window"]["start"])
    w1 = float(d.evidence["window"].get("end") or w0)
    comps = d.components()
    labels = [str(s.get("component")) for s in comps] + ["submit", "status"]
    for y, s in enumerate(comps):
        start = float(s.get("started") or w0) - w0
        if s.get("back") is not None:
            top.barh(y, max(float(s["back"]) - w0 - start, 0.05), left=start, color=COMPONENT, height=0.6)
        else:   # never healthy while the drill watched: drawn to the drill's end, hatched
            top.barh(y, max(w1 - w0 - start, 0.05), left=start, color="white", edgecolor=REFUSED, hatch="//",
                     height=0.6)
            top.annotate("not back", (start, y), xytext=(4, 0), textcoords="offset points", va="center",
                         fontsize=7, color=REFUSED, bbox={"fc": "white", "ec": "none", "pad": 1})
    for p in d.evidence.get("probes") or []:
        if p.get("what") not in ("submit", "status"):
            continue
        y = len(comps) + (0 if p["what"] == "submit" else 1)
        t0, t1 = float(p["t0"]) - w0, float(p["t1"]) - w0
        top.barh(y, max(t1 - t0, MIN_TRY_S), left=t0, height=0.6, linewidth=0,
                 color=REFUSED if p.get("error") else ACCEPTED)
        if not p.get("error") and t1 - t0 >= SLOW_S:
            top.annotate(f"waited {t1 - t0:.1f} s", ((t0 + t1) / 2, y), ha="center", va="center", fontsize=6)
    top.set_yticks(range(len(labels)), labels, fontsize=7)
    top.set_ylim(len(labels) - 0.5, -0.5)
    top.axvspan(0, w1 - w0, color="#f2f2f2", zorder=0)
    top.set_title(f"{d.label} · {d.kind}", fontsize=10, color=_color(d.platform))
    top.grid(axis="x", alpha=0.3)
    top.tick_params(labelbottom=False)

    if d.steps:
        bottom.plot([t - w0 for t, _ in d.steps], [s for _, s in d.steps], color="#444", lw=1.2,
                    drawstyle="steps-post")
        state = d.summary.get("job_state")
        if state not in (None, "succeeded"):   # where the job's steps stop is where it was lost
            t, step = d.steps[-1]
            bottom.plot([t - w0], [step], "x", color=REFUSED, ms=8)
            bottom.annotate(f"job {state}", (t - w0, step), xytext=(5, -2), textcoords="offset points",
                            fontsize=7, color=REFUSED, va="top")
    else:
        bottom.text(0.5, 0.5, "no step events kept", ha="center", va="center", transform=bottom.transAxes,
                    fontsize=8)
    marks = queued_marks(d)
    for t, style in marks:
        for ax in (top, bottom):
            ax.axvline(t - w0, color="black", ls=style, lw=0.9)
    bottom.axvspan(0, w1 - w0, color="#f2f2f2", zorder=0)
    bottom.set_ylabel("step", fontsize=8)
    bottom.set_xlabel("seconds since the drill started", fontsize=8)
    bottom.grid(alpha=0.3)
    xs = [0.0, w1 - w0] + ([d.steps[0][0] - w0, d.steps[-1][0] - w0] if d.steps else []) \
        + [t - w0 for t, _ in marks]
    lo, hi = min(xs), max(xs)
    pad = 0.03 * (hi - lo or 1.0)
    bottom.set_xlim(lo - pad, hi + pad)

