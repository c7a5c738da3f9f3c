"""What happened to each job of a replay, and the queue figures drawn from it (pure).

Both schedulers' records reduce to the same ``JobOutcome``: when the scheduler recorded the job's
submission, when its whole gang held its nodes, and when it ended, in the scheduler's own clock and
resolution (whole seconds on both: Kubernetes condition and creation timestamps, Slurm's accounting).
The figures are computed only from those, so a replay's raw records re-derive them exactly.

Percentiles are nearest-rank (the smallest value with at least p of the jobs at or below it): with a
few dozen jobs in a class an interpolated p99 would name a wait that no job had.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .trace import SIZE_CLASSES, size_class

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class JobOutcome:
    """One trace job as the scheduler recorded it; ``start``/``end`` None when it never got there."""

    id: str
    tenant: str
    nodes: int
    gpus_per_node: int
    submit: float               # epoch seconds, the scheduler's record of the submission
    start: float | None         # the whole gang placed (allocated)
    end: float | None
    state: str                  # "completed", "failed", "running", "pending"
    placed_on: tuple[str, ...] = ()   # the nodes it held, by the scheduler's names
    preemptions: int = 0        # times it was preempted and requeued before the run that ``start`` is

    @property
    def queue_s(self) -> float | None:
        return None if self.start is None else self.start - self.submit

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def as_dict(self) -> dict:
        return asdict(self)


def nearest_rank(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def queue_by_size(outcomes: list[JobOutcome]) -> dict[str, dict]:
    """Per size class (trace.SIZE_CLASSES, in order): jobs, how many started, queue-time percentiles (s)
    and the longest wait; a class with no job is left out."""
    out: dict[str, dict] = {}
    for name, _, _ in (*SIZE_CLASSES, ("all", 0, 0)):
        mine = [o for o in outcomes if name == "all" or size_class(o.nodes) == name]
        if not mine:
            continue
        waits = [o.queue_s for o in mine if o.queue_s is not None]
        row = {"jobs": len(mine), "started": len(waits)}
        row |= {f"p{p}_s": nearest_rank(waits, p) for p in PERCENTILES}
        row["max_s"] = max(waits) if waits else None
        out[name] = row
    return out


def makespan_s(outcomes: list[JobOutcome]) -> float | None:
    """From the first submission to the last end; None while a job has not ended."""
    if not outcomes or any(o.end is None for o in outcomes):
        return None
    return max(o.end for o in outcomes if o.end is not None) - min(o.submit for o in outcomes)


def gpu_utilisation(outcomes: list[JobOutcome], total_gpus: int, t0: float, t1: float) -> float | None:
    """Allocated GPU-seconds over [t0, t1] divided by what the cluster had: the share of GPUs held by jobs."""
    if total_gpus <= 0 or t1 <= t0:
        return None
    held = 0.0
    for o in outcomes:
        if o.start is None:
            continue
        a, b = max(o.start, t0), min(o.end if o.end is not None else t1, t1)
        if b > a:
            held += o.gpus * (b - a)
    return held / (total_gpus * (t1 - t0))


def work_utilisation(outcomes: list[JobOutcome], runtime_s: dict[str, float], total_gpus: int, t0: float,
                     t1: float) -> float | None:
    """The GPU-seconds of the jobs' own run times (the trace's ``runtime_s``, within each job's last run)
    over what the cluster had in [t0, t1]: the allocation without what a platform holds beyond a job's
    work. An emulated pod is Succeeded about a second after its run time (KWOK's completion step), a
    Slurm job when its sleep ends, so allocated utilisation counts that second on one side only."""
    if total_gpus <= 0 or t1 <= t0:
        return None
    work = sum(o.gpus * min(runtime_s.get(o.id, 0.0), o.end - o.start) for o in outcomes
               if o.start is not None and o.end is not None)
    return work / (total_gpus * (t1 - t0))


def held_beyond_run(outcomes: list[JobOutcome], runtime_s: dict[str, float]) -> dict | None:
    """How long the ended jobs held their GPUs beyond their run time: the median and the most per job (s),
    and those GPU-seconds' share of all the GPU-seconds held."""
    ended = [o for o in outcomes if o.start is not None and o.end is not None and o.id in runtime_s]
    if not ended:
        return None
    extra = [max(0.0, (o.end - o.start) - runtime_s[o.id]) for o in ended]
    held = sum(o.gpus * (o.end - o.start) for o in ended)
    return {"median_s": nearest_rank(extra, 50), "max_s": max(extra),
            "gpu_seconds_share": sum(o.gpus * e for o, e in zip(ended, extra, strict=True)) / held if held else 0.0}


def utilisation_series(outcomes: list[JobOutcome], total_gpus: int, t0: float, t1: float,
                       step_s: float) -> list[tuple[float, float]]:
    """(seconds from t0, share of GPUs allocated) at every step: the utilisation-over-time curve."""
    points = []
    t = t0
    while t <= t1:
        held = sum(o.gpus for o in outcomes if o.start is not None and o.start <= t
                   and (o.end is None or o.end > t))
        points.append((round(t - t0, 3), held / total_gpus if total_gpus else 0.0))
        t += step_s
    return points


def tenant_shares(outcomes: list[JobOutcome]) -> dict[str, float]:
    """Each tenant's share of all allocated GPU-seconds (ended jobs), to set beside its quota's share."""
    used: dict[str, float] = {}
    for o in outcomes:
        if o.start is not None and o.end is not None:
            used[o.tenant] = used.get(o.tenant, 0.0) + o.gpus * (o.end - o.start)
    total = sum(used.values())
    return {t: (v / total if total else 0.0) for t, v in sorted(used.items())}


def placement_rate(outcomes: list[JobOutcome], window_s: float = 10.0) -> dict:
    """The scheduler's throughput: the most jobs, and nodes (a pod or a task each), placed within any
    `window_s` seconds, per second. Under a burst of arrivals this is the rate it keeps up; with few
    jobs waiting it only shows how fast work arrived. Starts are whole seconds, hence a 10 s window."""
    starts = sorted((o.start, o.nodes) for o in outcomes if o.start is not None)
    best_jobs = best_nodes = 0
    j = 0
    nodes_in = 0
    for i, (t, n) in enumerate(starts):
        nodes_in += n
        while starts[j][0] <= t - window_s:
            nodes_in -= starts[j][1]
            j += 1
        best_jobs = max(best_jobs, i - j + 1)
        best_nodes = max(best_nodes, nodes_in)
    return {"window_s": window_s, "jobs_per_s": best_jobs / window_s, "nodes_per_s": best_nodes / window_s}


def throughput(outcomes: list[JobOutcome], trace_rate: float | None = None) -> dict:
    """One replay's offered and achieved rates, from the scheduler's own records (not the harness's clock).

    Offered: jobs submitted per second over the seconds the submissions are stamped in, first and
    last both counted (whole-second stamps put every submission inside those seconds). Achieved: jobs,
    and nodes (a pod or a task each), placed per second from the first submission to the last start,
    counted the same way, so a scheduler that keeps up shows about the offered rate and one that
    falls behind shows the rate it manages. That span includes the wait before the first start, which
    over a short burst lowers the rate a little; ``placing_jobs_per_s`` counts from the first start
    instead. ``lag_s``, last start minus last submission, is how far placement trails arrival at the
    end. ``trace_rate``, the rate the trace was made to offer, is kept beside the measured one.
    Unlike ``placement_rate`` (the busiest 10 s) this is over the whole burst, and not in ``figures``."""
    submits = [o.submit for o in outcomes]
    placed = [o for o in outcomes if o.start is not None]
    out: dict = {"resolution_s": 1, "jobs": len(outcomes), "offered_nominal_jobs_per_s": trace_rate,
                 "offered_jobs_per_s": None, "submit_span_s": None, "placed": len(placed),
                 "never_placed": len(outcomes) - len(placed), "jobs_per_s": None, "nodes_per_s": None,
                 "place_span_s": None, "placing_jobs_per_s": None, "lag_s": None}
    if not outcomes:
        return out
    first, last = min(submits), max(submits)
    out["submit_span_s"] = last - first + 1
    out["offered_jobs_per_s"] = len(outcomes) / out["submit_span_s"]
    if not placed:
        out["jobs_per_s"] = out["nodes_per_s"] = 0.0   # nothing placed in the time it was offered
        return out
    starts = [o.start for o in placed if o.start is not None]
    out["place_span_s"] = max(starts) - first + 1
    out["jobs_per_s"] = len(placed) / out["place_span_s"]
    out["nodes_per_s"] = sum(o.nodes for o in placed) / out["place_span_s"]
    out["placing_jobs_per_s"] = len(placed) / (max(starts) - min(starts) + 1)
    out["lag_s"] = max(starts) - last
    return out


def largest_jobs(outcomes: list[JobOutcome]) -> dict | None:
    """The gang admission of the biggest jobs: how long the jobs of the largest size waited."""
    if not outcomes:
        return None
    n = max(o.nodes for o in outcomes)
    waits = [o.queue_s for o in outcomes if o.nodes == n and o.queue_s is not None]
    return {"nodes": n, "jobs": sum(o.nodes == n for o in outcomes), "started": len(waits),
            "p50_s": nearest_rank(waits, 50), "max_s": max(waits) if waits else None}


def placement(outcomes: list[JobOutcome], block_of: dict[str, str]) -> dict | None:
    """Topology placement of the multi-node jobs: how many sat in the fewest blocks their size needs
    (a block holds the most nodes any block has), and the blocks spanned beyond that minimum, summed.
    None without a node -> block map or a placed multi-node job."""
    if not block_of:
        return None
    per_block: dict[str, int] = {}
    for b in block_of.values():
        per_block[b] = per_block.get(b, 0) + 1
    size = max(per_block.values())
    jobs = [o for o in outcomes if o.nodes > 1 and o.placed_on]
    if not jobs:
        return None
    extra = [len({block_of.get(n, "?") for n in o.placed_on}) - math.ceil(o.nodes / size) for o in jobs]
    return {"block_nodes": size, "multi_node_jobs": len(jobs), "in_fewest_blocks": sum(e <= 0 for e in extra),
            "extra_blocks": sum(max(0, e) for e in extra)}


def preemptions(outcomes: list[JobOutcome]) -> dict:
    """How often jobs were preempted (and requeued): events in all, jobs preempted at least once, and the
    most any one job was. A preempted run's GPU-seconds are not in the utilisation, which counts each
    job's last run: the work of a run that was preempted was lost (the emulated job restarts from its
    beginning)."""
    hit = [o.preemptions for o in outcomes if o.preemptions]
    return {"events": sum(hit), "jobs": len(hit), "most_per_job": max(hit, default=0)}


def figures(outcomes: list[JobOutcome], total_gpus: int, block_of: dict[str, str] | None = None,
            runtime_s: dict[str, float] | None = None) -> dict:
    """Every replay figure from the outcomes alone (so stored raw records re-derive them): queue times
    per size class, makespan, GPU utilisation from the first submission to the last end (allocated, and
    by the jobs' run times given ``runtime_s``), tenant shares, and how many jobs ended in each state."""
    ends = [o.end for o in outcomes if o.end is not None]
    t0 = min((o.submit for o in outcomes), default=0.0)
    t1 = max(ends, default=t0)
    states: dict[str, int] = {}
    for o in outcomes:
        states[o.state] = states.get(o.state, 0) + 1
    return {"jobs": len(outcomes), "states": dict(sorted(states.items())), "queue_s": queue_by_size(outcomes),
            "makespan_s": makespan_s(outcomes), "gpu_utilisation": gpu_utilisation(outcomes, total_gpus, t0, t1),
            "tenant_gpu_share": tenant_shares(outcomes), "placement_rate": placement_rate(outcomes),
            "largest_jobs": largest_jobs(outcomes), "placement": placement(outcomes, block_of or {}),
            "preemptions": preemptions(outcomes),
            "work_utilisation": work_utilisation(outcomes, runtime_s or {}, total_gpus, t0, t1),
            "held_beyond_run": held_beyond_run(outcomes, runtime_s or {})}
