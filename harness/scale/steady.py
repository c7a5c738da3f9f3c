"""A steady trace: jobs offered at a constant rate, to measure how many a scheduler places per second.

Throughput against offered load is a sweep of such traces, one rate each (benchmarks/
replay_throughput.py). For the sweep to measure the scheduler, nothing else may hold jobs back:

* Arrivals are evenly spaced (job i at i / rate), not Poisson. Poisson clumps put bursts of several
  times the mean rate into single seconds, so a scheduler that keeps up with the rate on average
  would still read as falling behind; evenly spaced, every second offers the same load, and a
  shortfall is the scheduler's. Offsets are whole seconds (TraceJob's resolution), floored, so above
  1 job/s several jobs share a second: at 2.5 jobs/s the seconds hold 3, 2, 3, 2, ... jobs.
* The cluster never fills for capacity: jobs are small gangs of whole nodes with a short fixed run
  time, and the rate is refused when the nodes it keeps busy on average (rate x mean gang x run
  time) would pass HEADROOM of the cluster.
* The limit is the run time: no over-request, so backfill plans with exact estimates (the renderers
  add their own grace, and Slurm rounds to a whole minute; render/replay_slurm.py).

Seeded: gang sizes are drawn from ``random.Random(seed).random()`` alone (the one sampler Python keeps
the same across releases), so a seed and parameters give the same bytes; arrivals draw nothing.
"""
from __future__ import annotations

import bisect
import math
import random

from ..errors import ConfigError
from .trace import NodeShape, Trace, TraceJob

GENERATOR_VERSION = 1   # bump when the same seed and parameters would give another trace
# The share of the nodes the offered load may keep busy on average. Not 1: sizes are drawn, so the
# nodes held swing around the mean; a pod or step holds its nodes a second or so past its run time
# (KWOK marks a pod Succeeded about 1 s late, Slurm frees nodes after its epilog); and a job waiting
# for nodes would read as the scheduler saturating.
HEADROOM = 0.75
# (gang size in nodes, weight): mostly single nodes, some small gangs; mean 12/7 ≈ 1.71 nodes
DEFAULT_JOB_NODES: tuple[tuple[int, float], ...] = ((1, 4.0), (2, 2.0), (4, 1.0))


def mean_nodes(job_nodes: tuple[tuple[int, float], ...]) -> float:
    total = sum(w for _, w in job_nodes)
    return sum(n * w for n, w in job_nodes) / total


def max_rate(nodes: int, runtime_s: int, job_nodes: tuple[tuple[int, float], ...] = DEFAULT_JOB_NODES) -> float:
    """The highest offered rate (jobs/s) that keeps at most HEADROOM of ``nodes`` busy on average."""
    return HEADROOM * nodes / (mean_nodes(job_nodes) * runtime_s)


def _offset(i: int, rate: float) -> int:
    # the epsilon keeps an i / rate that should be whole (33 / 1.1 = 29.999...) from flooring a second short
    return math.floor(i / rate + 1e-9)


def _problem(rate: float, seconds: float, nodes: int, gpus_per_node: int, runtime_s: int,
             job_nodes: tuple[tuple[int, float], ...], tenants: tuple[str, ...]) -> str | None:
    checks = [
        (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0, f"rate must be positive, got {rate!r}"),
        (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 1,
         f"seconds must be at least 1, got {seconds!r}"),
        (nodes >= 1, f"nodes must be at least 1, got {nodes}"),
        (gpus_per_node >= 0, f"gpus_per_node must be 0 or more, got {gpus_per_node}"),
        (runtime_s >= 1, f"runtime_s must be at least 1, got {runtime_s}"),
        (bool(job_nodes) and all(n >= 1 for n, _ in job_nodes) and all(w >= 0 for _, w in job_nodes)
         and sum(w for _, w in job_nodes) > 0, "job_nodes must be (nodes >= 1, weight >= 0) pairs, weights sum > 0"),
        (all(n <= nodes for n, _ in job_nodes), f"a gang in job_nodes is larger than the cluster's {nodes} nodes"),
        (bool(tenants) and all(isinstance(t, str) and t for t in tenants), "tenants must be non-empty names"),
    ]
    return next((msg for ok, msg in checks if not ok), None)


def steady_trace(rate_jobs_per_s: float, seconds: float = 30, nodes: int = 256, gpus_per_node: int = 8,
                 runtime_s: int = 5, job_nodes: tuple[tuple[int, float], ...] = DEFAULT_JOB_NODES,
                 seed: int = 0, tenants: tuple[str, ...] = ("team-a",)) -> Trace:
    """``round(rate x seconds)`` jobs (at least one), evenly spaced over ``seconds``, each a gang of whole
    nodes drawn from ``job_nodes`` (node count, weight) running ``runtime_s``; tenants take turns."""
    problem = _problem(rate_jobs_per_s, seconds, nodes, gpus_per_node, runtime_s, job_nodes, tenants)
    if problem:
        raise ConfigError(f"steady trace: {problem}", tip="see steady_trace in harness/scale/steady.py")
    busy = rate_jobs_per_s * mean_nodes(job_nodes) * runtime_s
    if busy > HEADROOM * nodes:
        limit = max_rate(nodes, runtime_s, job_nodes)
        raise ConfigError(
            f"steady trace: {rate_jobs_per_s:g} jobs/s of {mean_nodes(job_nodes):.2f} nodes on average for "
            f"{runtime_s} s keeps {busy:.0f} nodes busy, over {HEADROOM:.0%} of the {nodes} nodes: jobs would "
            "wait for capacity, not for the scheduler",
            tip=f"at most {limit:.3g} jobs/s for {nodes} nodes and {runtime_s} s jobs; "
                "shorten the run time or give more nodes")
    r = random.Random(seed)
    sizes = [n for n, _ in job_nodes]
    cumulative = []
    for _, w in job_nodes:
        cumulative.append((cumulative[-1] if cumulative else 0.0) + w)
    count = max(1, round(rate_jobs_per_s * seconds))
    width = len(str(count - 1))
    jobs = tuple(
        TraceJob(id=f"s{i:0{width}d}", submit_s=_offset(i, rate_jobs_per_s), tenant=tenants[i % len(tenants)],
                 nodes=sizes[bisect.bisect_right(cumulative, r.random() * cumulative[-1])],
                 gpus_per_node=gpus_per_node, limit_s=runtime_s, runtime_s=runtime_s)
        for i in range(count))
    return Trace(
        name=f"steady-{rate_jobs_per_s:g}jps-{nodes}n",
        source=(f"harness.scale.steady v{GENERATOR_VERSION}: {rate_jobs_per_s:g} jobs/s evenly spaced over "
                f"{seconds:g} s, gangs of {'/'.join(str(n) for n in sizes)} nodes, {runtime_s} s each"),
        seed=seed, shape=NodeShape(nodes=nodes, gpus_per_node=gpus_per_node),
        duration_s=max(1, math.ceil(seconds)),
        params={"generator_version": GENERATOR_VERSION, "rate_jobs_per_s": rate_jobs_per_s, "seconds": seconds,
                "nodes": nodes, "gpus_per_node": gpus_per_node, "runtime_s": runtime_s,
                "job_nodes": [list(p) for p in job_nodes], "tenants": list(tenants), "headroom": HEADROOM,
                "offered_busy_nodes": busy},
        jobs=jobs)
