"""The serving charts: the latency CDF per platform, read back from the HdrHistograms the load
generator stored, and a timeline of requests per second through each fault and the scale-out."""
from __future__ import annotations

import binascii
import zlib
from pathlib import Path

from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..serve.load import histogram
from . import files
from .charts import _color, plt
from .serving import FAULT_TEXT, Serve, num
from .stats import PLATFORM_LABEL, platform_sort_key

ERRORS = "#ff7f0e"   # not a platform's colour: red is Kubernetes here
PHASE_SHADE = {"ready": "#f7f7f7", "steady": "#eef3fb", "kill_server": "#fdeee4", "node_loss": "#fde4e4",
               "two_replicas": "#e9f6ec"}
PHASE_TEXT = {"ready": "ready probe", "steady": "steady", "kill_server": "kill server", "node_loss": "node loss",
              "two_replicas": "two replicas"}


def cdf_points(load: dict) -> tuple[list[float], list[float]] | None:
    """(latency s, fraction of ok requests at or below it) per recorded bucket; None without a readable one.
    A bucket's value is its highest equivalent value: the curve is never left of the true one by more than
    the histogram's 3 digits."""
    try:
        h = histogram(load)
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error, zlib.error, HdrCookieException,
            HdrLengthException, HdrHistogramSettingsException):   # a damaged stored histogram: no curve
        return None
    n = h.get_total_count()
    if not n:
        return None
    xs, ys = [], []
    for it in h.get_recorded_iterator():
        xs.append(h.get_highest_equivalent_value(it.value_iterated_to) / 1e6)
        ys.append(it.total_count_to_this_value / n)
    return xs, ys


def cdf(serves: list[Serve], out: Path) -> Path | None:
    """One axes: per platform the steady phase solid, the two-replica phase dashed; log x."""
    curves = []
    for s in sorted(serves, key=lambda x: platform_sort_key(x.platform)):
        for name, style in (("steady", "-"), ("two_replicas", "--")):
            p = s.phase(name)
            pts = cdf_points(p["load"]) if p else None
            if pts:
                curves.append((s, name, style, pts))
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    for s, name, style, (xs, ys) in curves:
        n = s.phase(name)["load"].get("ok")
        ax.step(xs, ys, where="post", ls=style, color=_color(s.platform), lw=1.6,
                label=f"{s.label}, {PHASE_TEXT[name]} ({n} ok requests)")
    for q in (0.5, 0.99):
        ax.axhline(q, color="#999", lw=0.7, ls=":")
        ax.annotate(f"p{q * 100:g}", (1.0, q), xycoords=("axes fraction", "data"), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7, color="#666")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("latency of a successful request (s, log scale)")
    ax.set_ylabel("fraction of requests ≤ latency")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Serving latency CDF (closed loop; from the stored HdrHistograms, 3 digits)", fontsize=10)
    fig.tight_layout()
    return files.save_figure(fig, out)


def marks(s: Serve) -> list[tuple[float, str, str]]:
    """(epoch s, label, line style) of each fault injected and of the scale-out's asked and second-ready stamps."""
    out = []
    for p in s.phases():
        f = p.get("fault")
        if isinstance(f, dict) and num(f.get("t")) is not None:
            out.append((num(f["t"]), f"{FAULT_TEXT.get(p['name'], p['name'])}" + (f" ({f['node']})" if f.get("node")
                                                                                   else ""), "-"))
    sc = s.evidence.get("scale") if isinstance(s.evidence.get("scale"), dict) else {}
    for k, label in (("asked", "second replica asked"), ("second_ready", "second replica answered")):
        t = num(sc.get(k))
        if t is not None:
            out.append((t, label, "--"))
    return sorted(out)


def drawn(s: Serve) -> list[dict]:
    """The phases the timeline shows: all but the readiness probe, whose refusals before the server first
    listened are the deploy's wait (serve_ready_s), not failures of a running service."""
    return [p for p in s.phases() if p.get("name") != "ready" and p["load"].get("timeline")]


def drawable(serves: list[Serve]) -> list[Serve]:
    return [s for s in serves if drawn(s)]


def timeline(serves: list[Serve], out: Path) -> Path | None:
    """One panel per platform, on the seconds since its first load phase began; phases shaded and named,
    ok requests per second as a line, failed ones as bars, faults and scale-out stamps as vertical lines."""
    runs = sorted(drawable(serves), key=lambda s: platform_sort_key(s.platform))
    if not runs:
        return None
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 3.2 * len(runs) + 0.9), squeeze=False)
    for ax, s in zip(axes[:, 0], runs, strict=True):
        _panel(ax, s)
    fig.legend(handles=[Line2D([], [], color="#333", marker=".", label="successful requests/s (platform colour)"),
                        Patch(color=ERRORS, label="failed requests/s"),
                        Line2D([], [], color="black", lw=1, label="fault injected"),
                        Line2D([], [], color="black", lw=1, ls="--",
                               label="scale-out: asked / second replica answered")],
               loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle("Serving timeline: requests per second through each fault and the scale-out "
                 "(by when each request ended)", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    return files.save_figure(fig, out)


def rates(tl: list[dict], elapsed: float) -> tuple[list[float], list[float], list[float], list[float]]:
    """(middle of each bin, its width, ok/s, failed/s) from a load's per-second counts. The last second of a
    phase is cut short: its count over the part that ran is the rate, and a sliver under half a second joins
    the second before it (a few requests in 5 ms are no rate), or every phase would seem to end in a collapse."""
    bins: list[list[float]] = []   # [start, width, ok, failed]
    for row in tl:
        w = min(1.0, elapsed - row["t"])
        if w < 0.5 and bins:
            bins[-1][1] += max(w, 0.0)
            bins[-1][2] += row.get("ok", 0)
            bins[-1][3] += row.get("failed", 0)
        else:
            bins.append([float(row["t"]), max(w, 0.05), row.get("ok", 0), row.get("failed", 0)])
    return ([b[0] + b[1] / 2 for b in bins], [b[1] for b in bins], [b[2] / b[1] for b in bins],
            [b[3] / b[1] for b in bins])


def _panel(ax, s: Serve) -> None:
    phases = drawn(s)
    t0 = min(float(p["load"]["started"]) for p in phases)
    top = 1.0
    for p in phases:
        load = p["load"]
        start = float(load["started"]) - t0
        elapsed = float(load.get("elapsed_s") or len(load["timeline"]))
        xs, width, ok, bad = rates(load["timeline"], elapsed)
        xs = [start + x for x in xs]
        top = max(top, *ok, *bad)
        ax.axvspan(start, start + elapsed, color=PHASE_SHADE.get(p["name"], "#f2f2f2"), zorder=0)
        ax.plot(xs, ok, color=_color(s.platform), lw=1.4, marker=".", ms=3)
        if any(bad):
            ax.bar(xs, bad, width=[0.9 * w for w in width], color=ERRORS, zorder=3)
        ax.annotate(PHASE_TEXT.get(p["name"], p["name"]), (start, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", va="top", fontsize=7, color="#555")
    for t, label, style in marks(s):
        ax.axvline(t - t0, color="black", ls=style, lw=1)
        ax.annotate(label, (t - t0, 0.86), xycoords=("data", "axes fraction"), xytext=(3, 0),
                    textcoords="offset points", rotation=90, va="top", fontsize=7)
    ax.set_ylim(0, top * 1.15)
    ax.set_xlim(left=0)
    ax.set_ylabel("requests/s", fontsize=8)
    ax.set_xlabel(f"seconds since the first load phase began ({PLATFORM_LABEL.get(s.platform, s.platform)})",
                  fontsize=8)
    ax.set_title(s.label, fontsize=10, color=_color(s.platform), loc="left")
    ax.grid(alpha=0.3)


def all_charts(serves: list[Serve], out_dir: Path) -> dict[str, Path]:
    """Both charts where there is something to draw. Evidence of a shape this reader does not expect (a
    damaged or hand-edited raw file) costs that chart, not the report: the section's table still stands."""
    out: dict[str, Path] = {}
    for key, draw in (("serve_cdf", cdf), ("serve_timeline", timeline)):
        try:
            path = draw(serves, out_dir / f"{key}.png")
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            plt.close("all")
            continue
        if path is not None:
            out[key] = path
    return out
