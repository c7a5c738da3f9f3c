"""The parts of a replay's report that say why jobs waited and what the host could give (report/replay.py
writes the rest): the offered rate against each platform's placement ceiling, the queue policy pair, the
queue figures of scale/queueing.py, the host's CPU over each replay, and, where the history recorded its
own waits, those beside the emulated ones."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ..scale import ceiling as cl
from ..scale import load
from ..scale.outcome import JobOutcome, nearest_rank
from ..scale.trace import Trace
from . import files, replay_sets
from .charts import COLORS
from .stats import PLATFORM_LABEL


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def _n(v, fmt: str = "g") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return format(v, fmt)


def offered_lines(where: Path, trace: Trace, stored: dict[str, dict]) -> list[str]:
    """The busiest 10 s and the mean offered, each platform's ceiling at this size and rate limits, and
    whether the replay is throughput-bound there (scale/ceiling.py)."""
    found = replay_sets.load_ceilings(where.parent)
    busiest = load.busiest_rate(trace)
    out = ["## Offered load against the placement ceilings", "",
           f"Busiest {load.WINDOW_S} s of the trace as replayed: {busiest:g} jobs/s; mean over its "
           f"{trace.duration_s} s "
           f"window: {load.mean_rate(trace):.3g} jobs/s ({len(trace.jobs)} jobs, compressed {trace.compression:g}×)."]
    for p, body in stored.items():
        settings = body.get("settings", {})
        lim = cl.limits_label(p, settings.get("client_rate_limits_qps_burst"))
        nodes = settings.get("nodes")
        c = cl.find(found, p, int(nodes), lim) if isinstance(nodes, int) else None
        st = cl.standing(p, busiest, c)
        at = f"at {nodes} nodes" + (f", {lim}" if lim != cl.SLURM_LIMITS else "")
        out.append(f"- {_label(p)} ({at}): {st.text()}" + ("" if c is None else f" (ceiling: {c.text()})"))
    if not found:
        out.append(f"- no ceilings measured beside this replay (`{where.parent.name}/{replay_sets.CEILINGS_FILE}`, "
                   "written by benchmarks/replay_throughput.py): whether it measured the queue or the throughput "
                   "is unknown, and it feeds no queue-policy verdict")
    out.append("")
    return out


def policy_lines(stored: dict[str, dict]) -> list[str]:
    out = ["## Queue policy", ""]
    for p, body in stored.items():
        s = body.get("settings", {})
        text = s.get("queue_policy_text") or "not recorded (replayed before the policy pairs: the site pair)"
        extra = []
        if p == "k8s":
            extra = [f"queueingStrategy {s.get('queueing_strategy', 'BestEffortFIFO (not recorded)')}",
                     s.get("cluster_queues", "a ClusterQueue per tenant"),
                     "Kueue fairSharing " + str((s.get("client_rate_limits_qps_burst") or {}).get(
                         "kueue fairSharing", "off (not recorded)"))]
        else:
            extra = [f"{k} {s[k]}" for k in ("SchedulerType", "SchedulerParameters", "PriorityWeightFairShare",
                                             "PriorityWeightAge", "PriorityWeightJobSize", "PriorityDecayHalfLife",
                                             "PriorityCalcPeriod") if k in s]
        out.append(f"- {_label(p)}: {text}; as recorded: {'; '.join(extra)}; "
                   f"limit grace {s.get('limit_grace_s', '–')} s")
    return [*out, ""]


def queue_lines(figs: dict[str, dict]) -> list[str]:
    """Bounded slowdown per size class, overtaking and the queue head, utilisation over the arrival window, the
    Kubernetes wait split, per tenant: one table, each platform's first replay."""
    plats = list(figs)
    rows: list[tuple[str, list[str]]] = []
    classes = sorted({c for f in figs.values() for c in ((f.get("bounded_slowdown") or {}).get("classes") or {})},
                     key=lambda c: (c == "all", c))
    for c in classes:
        vals = []
        for p in plats:
            r = ((figs[p].get("bounded_slowdown") or {}).get("classes") or {}).get(c)
            vals.append("–" if r is None else f"{r['mean']:.3g} / {r['p99']:.3g} ({r['jobs']})")
        rows.append((f"bounded slowdown, {c} node{'s' if c != '1' else ''}: mean / p99 (jobs)", vals))
    ov = [figs[p].get("overtaking") or {} for p in plats]
    rows += [("jobs started while an earlier-submitted job waited: jobs overtaken / overtakes / most for one job",
              [f"{o.get('jobs_overtaken', '–')} / {o.get('overtakes', '–')} / {o.get('most', '–')}" for o in ov]),
             ("starts that passed the queue head (the oldest job waiting)", [_n(o.get("passed_head")) for o in ov]),
             ("queue head's wait as the head: p50 / p99 / max (s)",
              [f"{_n(o.get('head_wait_p50_s'))} / {_n(o.get('head_wait_p99_s'))} / {_n(o.get('head_wait_max_s'))}"
               for o in ov]),
             ("GPU utilisation by work over the arrival window",
              [_n(figs[p].get("arrival_window_utilisation"), ".1%") for p in plats])]
    split = [figs[p].get("wait_split") for p in plats]
    if any(split):
        for part, what in (("admission", "admission (created → Admitted)"),
                           ("pod_pipeline", "pod pipeline (Admitted → last pod bound)")):
            rows.append((f"Kubernetes wait: {what}: p50 / p99 / max (s)",
                         ["Slurm: the allocation is the start" if s is None else
                          f"{_n(s[part]['p50_s'])} / {_n(s[part]['p99_s'])} / {_n(s[part]['max_s'])}" for s in split]))
    tenants = sorted({t for p in plats for t in (figs[p].get("per_tenant") or {})})
    for t in tenants:
        rows.append((f"tenant {t}: queue p50 / p99 (s), share of GPU-seconds",
                     [("–" if (r := (figs[p].get("per_tenant") or {}).get(t)) is None else
                       f"{_n(r['p50_s'])} / {_n(r['p99_s'])}, {r['gpu_share']:.1%}") for p in plats]))
    out = ["## Why jobs waited (each platform's first replay)", "",
           "| | " + " | ".join(_label(p) for p in plats) + " |", "|---|" + "---|" * len(plats)]
    out += [f"| {name} | " + " | ".join(v) + " |" for name, v in rows]
    return [*out, ""]


def host_cpu_lines(stored: dict[str, dict]) -> list[str]:
    out = ["## The host's CPU over each replay", ""]
    have = {p: b.get("host_cpu") for p, b in stored.items() if b.get("host_cpu")}
    if not have:
        return [*out, "Not recorded (the replay predates the host CPU record): what the host could give is unknown.",
                ""]
    for p, h in have.items():
        host = h.get("host") or {}
        comps = sorted((h.get("components") or {}).items(), key=lambda kv: -kv[1]["mean_cores"])
        out.append(f"- {_label(p)} replay: the host {_n(host.get('mean_cores'), '.2f')} cores busy on average, "
                   f"{_n(host.get('peak_cores'), '.2f')} at the busiest {h.get('interval_s', 1):g} s of "
                   f"{h.get('host_cpus')} ({h.get('samples')} samples); mean / peak cores: "
                   + ", ".join(f"{n} {c['mean_cores']:.2f} / {c['peak_cores']:.2f}" for n, c in comps
                               if c["peak_cores"] >= 0.01))
    return [*out, "", "![the host's busy cores over each replay](host_cpu.png)", ""]


def host_cpu_chart(stored: dict[str, dict], path: Path) -> Path | None:
    have = {p: b["host_cpu"] for p, b in stored.items() if (b.get("host_cpu") or {}).get("series")}
    if not have:
        return None
    fig, axes = plt.subplots(1, len(have), figsize=(6 * len(have), 3.2), squeeze=False)
    for ax, (p, h) in zip(axes[0], have.items(), strict=True):
        series = h["series"]
        t = [s[0] for s in series]
        ax.plot(t, [s[1] for s in series], color="#222222", label="whole host")
        top = sorted((h.get("components") or {}).items(), key=lambda kv: -kv[1]["mean_cores"])[:5]
        for name, _ in top:
            ax.plot(t, [s[2].get(name, 0.0) for s in series], label=name, linewidth=1)
        if h.get("host_cpus"):
            ax.axhline(h["host_cpus"], color="#999999", linestyle=":", linewidth=1)
        ax.set_title(f"{_label(p)} replay", color=COLORS.get(p, "#000000"))
        ax.set_xlabel("seconds from the replay's start")
        ax.set_ylabel("busy cores")
        ax.legend(fontsize=6)
    fig.tight_layout()
    return files.save_figure(fig, path, levels=1)


def recorded_lines(trace: Trace, outs: dict[str, list[JobOutcome]]) -> list[str]:
    """Where the history recorded its own waits: those (compressed like the trace) beside each platform's, over
    the jobs that have both; and how many waited longer in the replay."""
    rec = {j.id: j.recorded_wait_s for j in trace.jobs if j.recorded_wait_s is not None}
    if not rec:
        return []
    out = ["## The history's own waits beside the replay's", "",
           f"{len(rec)} of the trace's {len(trace.jobs)} jobs carry the wait their site recorded (compressed "
           f"{trace.compression:g}× like the trace). A replay reproduces them only as far as the trace holds what made "
           "them: load the trace does not contain (a sample of a cluster's tasks), placement constraints it does "
           "not model (GPU types, sharing) and the site's scheduler itself are not replayed.", "",
           "| | jobs | p50 (s) | p90 (s) | p99 (s) | max (s) | waited longer in the replay / shorter |",
           "|---|---|---|---|---|---|---|"]
    vals = sorted(rec.values())
    out.append(f"| recorded by the site | {len(vals)} | {_n(nearest_rank(vals, 50))} | {_n(nearest_rank(vals, 90))} | "
               f"{_n(nearest_rank(vals, 99))} | {_n(vals[-1])} | – |")
    for p, v in outs.items():
        got = {o.id: o.queue_s for o in v if o.queue_s is not None and o.id in rec}
        w = sorted(got.values())
        if not w:
            continue
        longer = sum(got[i] > rec[i] for i in got)
        shorter = sum(got[i] < rec[i] for i in got)
        out.append(f"| {_label(p)} replay | {len(w)} | {_n(nearest_rank(w, 50))} | {_n(nearest_rank(w, 90))} | "
                   f"{_n(nearest_rank(w, 99))} | {_n(w[-1])} | {longer} / {shorter} |")
    return [*out, ""]
