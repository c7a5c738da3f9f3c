"""A scale replay's report: the same trace on each scheduler, side by side, from its stored records.

report.md with three charts: queue-time CDFs per job-size class, allocated GPUs over time, and each
tenant's share of the GPU-seconds. Every figure is drawn from the raw records again (harness/replay/
store.py), carries the records' resolution (whole seconds) and sits beside the settings that shape it.
The verdict is as strong as the replays behind it: one replay per platform shows what happened once;
it does not separate the scheduler from the run-to-run spread, so it draws no "faster" conclusion.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ..replay import store as rs
from ..scale import outcome
from ..scale.trace import SIZE_CLASSES, size_class, summary
from . import files, replay_sections, replay_verdict
from .charts import COLORS
from .stats import PLATFORM_LABEL

UTIL_POINTS = 400        # samples on the utilisation curve, whatever the replay's length


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    return files.save_figure(fig, path, levels=1)   # <replay>/report/*.png


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def queue_cdf_chart(outs: dict[str, list[outcome.JobOutcome]], path: Path) -> Path:
    classes = [c for c, _, _ in SIZE_CLASSES if any(size_class(o.nodes) == c for v in outs.values() for o in v)]
    fig, axes = plt.subplots(1, max(1, len(classes)), figsize=(4 * max(1, len(classes)), 3.2), squeeze=False)
    for ax, cls in zip(axes[0], classes, strict=False):
        for p, v in outs.items():
            waits = sorted(o.queue_s for o in v if size_class(o.nodes) == cls and o.queue_s is not None)
            if waits:   # from (0, 0): a class of one job is still a visible step
                ax.step([0.0, *waits], [0.0, *((i + 1) / len(waits) for i in range(len(waits)))], where="post",
                        color=COLORS.get(p), label=f"{_label(p)} ({len(waits)} job{'s' if len(waits) > 1 else ''})")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_title(f"{cls} node{'s' if cls != '1' else ''}")
        ax.set_xlabel("queue time (s, whole seconds)")
        ax.set_ylabel("share of jobs")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7)
    return _save(fig, path)


def utilisation_chart(outs: dict[str, list[outcome.JobOutcome]], gpus: dict[str, int], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for p, v in outs.items():
        if not v:
            continue
        t0 = min(o.submit for o in v)
        t1 = max((o.end for o in v if o.end is not None), default=t0)
        step = max(1.0, (t1 - t0) / UTIL_POINTS)
        pts = outcome.utilisation_series(v, gpus[p], t0, t1, step)
        ax.step([t for t, _ in pts], [u for _, u in pts], where="post", color=COLORS.get(p), label=_label(p))
    ax.set_xlabel("seconds from the first submission")
    ax.set_ylabel("GPUs allocated (share)")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return _save(fig, path)


def tenants_chart(figs: dict[str, dict], path: Path) -> Path:
    tenants = sorted({t for f in figs.values() for t in f["tenant_gpu_share"]})
    fig, ax = plt.subplots(figsize=(max(4, 1.5 * len(tenants) + 2), 3.2))
    width = 0.8 / max(1, len(figs))
    for i, (p, f) in enumerate(figs.items()):
        ax.bar([k + i * width for k in range(len(tenants))], [f["tenant_gpu_share"].get(t, 0) for t in tenants],
               width, color=COLORS.get(p), label=_label(p))
    ax.set_xticks([k + width * (len(figs) - 1) / 2 for k in range(len(tenants))], tenants)
    ax.set_ylabel("share of GPU-seconds")
    ax.legend(fontsize=8)
    return _save(fig, path)


def paired_lines(outs: dict[str, list[outcome.JobOutcome]]) -> list[str]:
    """The same jobs on both: how many waited longer on each, and the median difference (descriptive)."""
    if set(outs) != {"k8s", "slurm"}:
        return []
    k = {o.id: o.queue_s for o in outs["k8s"] if o.queue_s is not None}
    s = {o.id: o.queue_s for o in outs["slurm"] if o.queue_s is not None}
    both = sorted(set(k) & set(s))
    if not both:
        return []
    diffs = sorted(k[j] - s[j] for j in both)
    longer_k, longer_s = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return [f"Of the {len(both)} jobs that started on both, {longer_k} waited longer on Kubernetes, {longer_s} "
            f"longer on Slurm and {len(both) - longer_k - longer_s} the same to the second; the median "
            f"difference (Kubernetes − Slurm) is {outcome.nearest_rank(diffs, 50):+g} s."]


def _setting(v) -> str:
    """A recorded setting as text: a mapping as `key value` pairs, a list of lines (sshare's table) or of
    mappings in a code span, so a reader sees what the cluster printed."""
    if isinstance(v, dict):
        return "(" + ", ".join(f"{k} {_setting(x)}" for k, x in v.items()) + ")"
    if isinstance(v, list):
        return "`" + " / ".join(_setting(x).strip() for x in v) + "`" if v else "none"
    return str(v)


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _verdict_lines(stored: dict[str, dict], trace, n_runs: dict[str, int]) -> list[str]:
    """One replay a side shows what happened once; repeats give each figure's spread, and from
    replay_verdict.MIN_N a side, a tested verdict."""
    if set(n_runs) != {"k8s", "slurm"}:
        return ["Only one platform was replayed: nothing to compare.", ""]
    runs = ", ".join(f"{_label(p)} {n}" for p, n in sorted(n_runs.items(), key=lambda kv: kv[0] != "slurm"))
    if max(n_runs.values()) == 1:
        return ["One replay per platform: what happened once. It does not separate the scheduler from the spread "
                "between replays, so no platform is called faster here; replay again (`poc scale replay "
                "--repeat N`, the same trace) to see what varies.", ""]
    cut = sum(n - len(replay_verdict.complete(stored, p)) for p, n in n_runs.items())
    rows = replay_verdict.rows(stored, trace)
    need = rows[0].needed if rows else replay_verdict.MIN_N
    left_out = (f" {cut} of them stopped before their last job (a watch's time-out or an interrupt) and are left "
                "out of the table: their percentiles cover only the jobs that started." if cut else "")
    return [f"Replays of this same trace: {runs}.{left_out} What stays the same in every replay: the trace, its "
            "compression, the cluster's shape and settings; what varies is the control planes' timing and this "
            "machine's other load, which the spread of each platform's values shows. Each replay is one value (its "
            "jobs share one queue, so they are not independent); a verdict needs "
            f"{need} replays a side (exact rank-sum test, Holm-adjusted over the {len(rows)} figures below: "
            "with fewer, even replays that all differ cannot reach its threshold).", "",
            *replay_verdict.markdown(rows), ""]


def write(where: Path, out: Path | None = None) -> Path:
    """report.md and its charts for the replay stored under `where` (into `out`, default where/report)."""
    trace, stored = rs.load(where)
    every = stored
    n_runs = {p: len(rs.runs_of(every, p)) for p in rs.PLATFORMS if rs.runs_of(every, p)}
    stored = {p: rs.runs_of(every, p)[0] for p in n_runs}   # the charts and the figures: each one's first replay
    out = out or where / "report"
    files.real_dir(out)
    outs = {p: rs.outcomes_of(p, trace, body) for p, body in stored.items()}
    figs = {p: rs.figures(p, trace, body, body["total_gpus"]) for p, body in stored.items()}
    gpus = {p: body["total_gpus"] for p, body in stored.items()}
    queue_cdf_chart(outs, out / "queue_cdf.png")
    utilisation_chart(outs, gpus, out / "utilisation.png")
    tenants_chart(figs, out / "tenants.png")
    replay_sections.host_cpu_chart(stored, out / "host_cpu.png")
    s = summary(trace)
    plats = list(stored)
    lines = [f"# Scale replay: {trace.name}", "",
             f"The trace: {trace.source}. {s.jobs} jobs; sizes " + ", ".join(f"{k}: {v}" for k, v in s.sizes.items())
             + f"; offered GPU load {_cell(round(s.gpu_load, 3) if s.gpu_load is not None else None)}; "
             f"replayed {trace.compression:g}× faster than its source ({'; '.join(trace.notes) or 'no notes'}).", "",
             *replay_sections.offered_lines(where, trace, stored), *replay_sections.policy_lines(stored),
             "## Verdict", "", *_verdict_lines(every, trace, n_runs), *paired_lines(outs), "",
             "## Figures (whole seconds: the records' resolution)" + (", each platform's first replay" if
                                                                        max(n_runs.values()) > 1 else ""), "",
             "| | " + " | ".join(_label(p) for p in plats) + " |", "|---|" + "---|" * len(plats)]
    rows = [("jobs", lambda f: f["jobs"]), ("states", lambda f: ", ".join(f"{k} {v}" for k, v in f["states"].items())),
            ("jobs without a record", lambda f: f["jobs_without_record"]),
            ("makespan (s)", lambda f: f["makespan_s"]),
            ("GPU utilisation, first submit to last end", lambda f: None if f["gpu_utilisation"] is None
             else f"{f['gpu_utilisation']:.1%}"),
            ("GPU utilisation by work ÷ makespan (the work is the trace's: it restates the makespan)",
             lambda f: None if f.get("work_utilisation") is None
             else f"{f['work_utilisation']:.1%}"),
            ("GPUs held beyond a job's run time: median / most (s); share of GPU-seconds", lambda f: None
             if not f.get("held_beyond_run") else "{m:g} / {x:g}; {s:.1%}".format(
                 m=f["held_beyond_run"]["median_s"], x=f["held_beyond_run"]["max_s"],
                 s=f["held_beyond_run"]["gpu_seconds_share"])),
            ("busiest 10 s: jobs placed per s", lambda f: f.get("placement_rate", {}).get("jobs_per_s")),
            ("busiest 10 s: nodes placed per s", lambda f: f.get("placement_rate", {}).get("nodes_per_s")),
            ("multi-node jobs in the fewest blocks they fit", lambda f: None if not f.get("placement") else
             "{a} of {n} ({x} blocks more than needed; {b} nodes a block)".format(
                 a=f["placement"]["in_fewest_blocks"], n=f["placement"]["multi_node_jobs"],
                 x=f["placement"]["extra_blocks"], b=f["placement"]["block_nodes"])),
            ("preemptions: events / jobs preempted (queue time runs to the last run)", lambda f: None
             if "preemptions" not in f else f"{f['preemptions']['events']} / {f['preemptions']['jobs']}"),
            ("largest jobs (nodes × jobs): queue p50 / max (s)", lambda f: None if not f.get("largest_jobs") else
             "{nodes} × {jobs}: {p50} / {mx}".format(nodes=f["largest_jobs"]["nodes"], jobs=f["largest_jobs"]["jobs"],
                                                     p50=_cell(f["largest_jobs"]["p50_s"]),
                                                     mx=_cell(f["largest_jobs"]["max_s"])))]
    for cls in [*[c for c, _, _ in SIZE_CLASSES], "all"]:
        for q in ("p50_s", "p90_s", "p99_s", "max_s"):
            nodes = "node" if cls == "1" else "nodes"
            rows.append((f"queue {cls} {nodes}, {q[:-2]} (s)", lambda f, c=cls, q=q: f["queue_s"].get(c, {}).get(q)))
    for name, get in rows:
        vals = [get(figs[p]) for p in plats]
        if name.startswith("queue") and all(v is None for v in vals):
            continue
        lines.append(f"| {name} | " + " | ".join(_cell(v) for v in vals) + " |")
    lines += ["", "![queue-time CDFs per size class](queue_cdf.png)", "",
              "![GPUs allocated over time](utilisation.png)", "", "![tenants' GPU-second shares](tenants.png)", "",
              *replay_sections.queue_lines(figs), *replay_sections.recorded_lines(trace, outs),
              *replay_sections.host_cpu_lines(stored),
              "## Settings that shape these figures", ""]
    for p, body in stored.items():
        settings = {k: v for k, v in body.get("settings", {}).items() if k != "queue_policy_text"}
        cost = [f"harness CPU {body['harness_cpu_s']} s"] if "harness_cpu_s" in body else []
        cost += [f"{body['looks']} looks at the queue"] if "looks" in body else []
        cost += [f"replay wall {body['replay_wall_s']} s"] if "replay_wall_s" in body else []
        if body.get("control_plane_cpu_cores"):   # measured by benchmarks/replay_scale.py from /proc and cgroups
            cost.append("control plane CPU over the replay (cores): " + ", ".join(
                f"{k} {v:g}" for k, v in sorted(body["control_plane_cpu_cores"].items(), key=lambda kv: -kv[1])))
        lines.append(f"- {_label(p)}: " + "; ".join([*(f"{k} {_setting(v)}" for k, v in settings.items()), *cost]))
    lines += ["", f"Re-derive every figure from the raw records: `poc scale rederive {where}`.", ""]
    files.write(out / "report.md", "\n".join(lines))
    return out / "report.md"
