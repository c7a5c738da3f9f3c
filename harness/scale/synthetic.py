"""A seeded synthetic trace with the shapes that published cluster studies report.

The shapes, and where they come from (qualitative findings only; every number in SyntheticParams is
chosen, not measured, and a site with its own history should replay that instead: harness/scale/sacct.py):

* Sizes: most jobs are small, and a few large gang jobs hold much of the GPU time. Jeon et al.,
  "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads" (USENIX ATC 2019,
  Microsoft's Philly) and Hu et al., "Characterization and Prediction of Deep Learning Workloads in
  Large-Scale GPU Datacenters" (SC 2021, SenseTime's Helios) both report a job count dominated by
  single-GPU / single-node jobs. Parallel job sizes cluster on powers of two: Lublin and Feitelson,
  "The workload on parallel supercomputers: modeling the characteristics of rigid jobs" (JPDC 2003).
  Here a job takes 2**k nodes with weight ``size_decay**k``.
* Run times: heavy-tailed; a log-normal is the common simple fit, clipped to [runtime_min_s, the
  largest limit].
* Arrivals: a daily cycle (Lublin and Feitelson model one). A non-homogeneous Poisson process with
  rate proportional to ``1 + day_amplitude * cos(2*pi*(hour - peak_hour)/24)``, drawn by thinning.
* Requested limits: users over-request, and pick from a few round values rather than a multiple of
  the run time (Tsafrir, Etsion and Feitelson, "Backfilling using system-generated predictions
  rather than user runtime estimates", IEEE TPDS 2007; Tsafrir, "Using inaccurate estimates
  accurately", JSSPP 2010, on their modality). Here: run time x a log-uniform factor in
  [1, overestimate_max], rounded up to the next value of ``limit_menu_s``.

Load: the number of jobs is set by the work, not drawn. Job bodies are drawn until their GPU-seconds
(node-seconds on a CPU-only shape) reach ``target_load`` x capacity x window; given that count, the
arrival times are exactly those of the Poisson process (independent draws from the rate profile,
sorted). A Poisson count with heavy-tailed work would miss the target by far more than one job.

Determinism: only ``random.Random(seed).random()`` is used (Python promises that sequence across
releases; not the other samplers), so the same seed and parameters give byte-identical JSONL.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
import random
from dataclasses import dataclass

from ..errors import ConfigError
from .trace import NodeShape, Trace, TraceJob

GENERATOR_VERSION = 1   # bump when the same seed and parameters would give another trace
_HOUR = 3600
_MAX_JOBS = 2_000_000   # a guard against a load target that would take minutes to draw


@dataclass(frozen=True)
class SyntheticParams:
    """All chosen, not measured: defaults meant to look like a shared GPU training cluster."""

    nodes: int = 64
    gpus_per_node: int = 8
    hours: float = 24.0
    target_load: float = 0.7               # offered GPU-seconds over capacity across the window
    size_decay: float = 0.5                # weight of a 2**k-node job: size_decay**k
    max_job_nodes: int | None = None       # None: the largest power of two <= nodes
    partial_node_share: float = 0.3        # of 1-node jobs, those asking for fewer GPUs than a node has
    runtime_median_s: float = 1800.0
    runtime_sigma: float = 1.5             # of the run time's natural log
    runtime_min_s: int = 60
    overestimate_max: float = 10.0
    limit_menu_s: tuple[int, ...] = (900, 1800, 3600, 2 * _HOUR, 4 * _HOUR, 8 * _HOUR, 12 * _HOUR,
                                     24 * _HOUR, 48 * _HOUR)
    day_amplitude: float = 0.5             # 0: flat; the rate swings by +/- this fraction of its mean
    peak_hour: float = 14.0
    start_hour: float = 0.0                # the time of day at the trace's zero
    tenants: tuple[tuple[str, float], ...] = (("team-a", 0.5), ("team-b", 0.3), ("team-c", 0.2))
    qos: tuple[tuple[str, float], ...] = (("normal", 1.0),)

    def __post_init__(self) -> None:
        problem = _params_problem(self)
        if problem:
            raise ConfigError(f"synthetic trace parameters: {problem}",
                              "see SyntheticParams in harness/scale/synthetic.py")

    @property
    def largest_job(self) -> int:
        return self.max_job_nodes or 2 ** int(math.log2(self.nodes))


def _params_problem(p: SyntheticParams) -> str | None:
    checks = [
        (p.nodes >= 1, f"nodes must be at least 1, got {p.nodes}"),
        (p.gpus_per_node >= 0, f"gpus_per_node must be 0 or more, got {p.gpus_per_node}"),
        (p.hours > 0, f"hours must be positive, got {p.hours}"),
        (0 < p.target_load <= 10, f"target_load must be in (0, 10], got {p.target_load}"),
        (p.size_decay > 0, f"size_decay must be positive, got {p.size_decay}"),
        (p.max_job_nodes is None or 1 <= p.max_job_nodes <= p.nodes,
         f"max_job_nodes must be between 1 and nodes ({p.nodes}), got {p.max_job_nodes}"),
        (0 <= p.partial_node_share <= 1, f"partial_node_share must be in [0, 1], got {p.partial_node_share}"),
        (p.runtime_median_s >= 1 and p.runtime_sigma >= 0, "runtime_median_s must be >= 1 and runtime_sigma >= 0"),
        (p.overestimate_max >= 1, f"overestimate_max must be at least 1, got {p.overestimate_max}"),
        (bool(p.limit_menu_s) and list(p.limit_menu_s) == sorted(set(p.limit_menu_s)) and p.limit_menu_s[0] >= 1,
         "limit_menu_s must be increasing whole seconds, at least 1"),
        (1 <= p.runtime_min_s <= p.limit_menu_s[-1] if p.limit_menu_s else False,
         "runtime_min_s must be between 1 and the largest limit"),
        (0 <= p.day_amplitude < 1, f"day_amplitude must be in [0, 1), got {p.day_amplitude}"),
        (_weights_ok(p.tenants), "tenants must be (name, weight) pairs with distinct names, weights >= 0, sum > 0"),
        (_weights_ok(p.qos), "qos must be (name, weight) pairs with distinct names, weights >= 0, sum > 0"),
    ]
    return next((msg for ok, msg in checks if not ok), None)


def _weights_ok(pairs: tuple[tuple[str, float], ...]) -> bool:
    names = [n for n, _ in pairs]
    return (bool(pairs) and all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)
            and all(w >= 0 for _, w in pairs) and sum(w for _, w in pairs) > 0)


class _Draw:
    """Every sample from ``random()`` alone, so the stream is the same on every Python release."""

    def __init__(self, seed: int):
        self._r = random.Random(seed)
        self.u = self._r.random

    def pick(self, cumulative: list[float]) -> int:
        return bisect.bisect_right(cumulative, self.u() * cumulative[-1])

    def normal(self) -> float:
        # Box-Muller; 1 - u keeps the log away from 0
        return math.sqrt(-2.0 * math.log(1.0 - self.u())) * math.cos(2.0 * math.pi * self.u())


def _cumulative(weights: list[float]) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


def _job_body(p: SyntheticParams, d: _Draw, sizes: list[int], size_cum: list[float], tenant_cum: list[float],
              qos_cum: list[float]) -> tuple[int, int, int, int, str, str]:
    nodes = sizes[d.pick(size_cum)]
    gpus = p.gpus_per_node
    partials = [2 ** k for k in range(int(math.log2(gpus)) + 1) if 2 ** k < gpus] if gpus > 1 else []
    if nodes == 1 and partials and d.u() < p.partial_node_share:
        gpus = partials[d.pick(_cumulative([1.0] * len(partials)))]
    runtime = p.runtime_median_s * math.exp(p.runtime_sigma * d.normal())
    runtime_s = min(p.limit_menu_s[-1], max(p.runtime_min_s, math.floor(runtime + 0.5)))
    wanted = runtime_s * math.exp(math.log(p.overestimate_max) * d.u())
    at = bisect.bisect_left(p.limit_menu_s, wanted)
    limit_s = p.limit_menu_s[at] if at < len(p.limit_menu_s) else p.limit_menu_s[-1]
    tenant = p.tenants[d.pick(tenant_cum)][0]
    qos = p.qos[d.pick(qos_cum)][0]
    return nodes, gpus, runtime_s, limit_s, tenant, qos


def _arrival(p: SyntheticParams, d: _Draw, window: float) -> float:
    # thinning: a uniform candidate kept with probability rate(t) / peak rate
    while True:
        t = d.u() * window
        hour = p.start_hour + t / _HOUR
        rate = 1.0 + p.day_amplitude * math.cos(2.0 * math.pi * (hour - p.peak_hour) / 24.0)
        if d.u() * (1.0 + p.day_amplitude) < rate:
            return t


def generate(params: SyntheticParams, seed: int) -> Trace:
    """A trace for ``params`` from ``seed``; same inputs, same trace, same bytes."""
    p, d = params, _Draw(seed)
    window = p.hours * _HOUR
    sizes = [2 ** k for k in range(int(math.log2(p.largest_job)) + 1)]
    size_cum = _cumulative([p.size_decay ** k for k in range(len(sizes))])
    tenant_cum = _cumulative([w for _, w in p.tenants])
    qos_cum = _cumulative([w for _, w in p.qos])
    per_node = p.gpus_per_node or 1        # CPU-only shapes: load in node-seconds
    goal = p.target_load * p.nodes * per_node * window
    bodies, work = [], 0.0
    while work < goal:
        body = _job_body(p, d, sizes, size_cum, tenant_cum, qos_cum)
        w = body[0] * (body[1] if p.gpus_per_node else 1) * body[2]
        if work + w - goal > goal - work:   # the last job overshoots more than leaving it out undershoots
            break
        bodies.append(body)
        work += w
        if len(bodies) > _MAX_JOBS:
            raise ConfigError(f"synthetic trace: over {_MAX_JOBS} jobs for this load and window",
                              "shorten hours or lower target_load")
    arrivals = sorted(_arrival(p, d, window) for _ in bodies)
    width = len(str(max(len(bodies) - 1, 0)))
    jobs = [TraceJob(id=f"j{i:0{width}d}", submit_s=math.floor(t), tenant=tenant, nodes=nodes, gpus_per_node=gpus,
                     limit_s=limit_s, runtime_s=runtime_s, qos=qos)
            for i, (t, (nodes, gpus, runtime_s, limit_s, tenant, qos)) in enumerate(zip(arrivals, bodies, strict=True))]
    return Trace(
        name=f"synthetic-{p.nodes}n-{p.hours:g}h-seed{seed}",
        source=(f"harness.scale.synthetic v{GENERATOR_VERSION}: power-of-two gang sizes, log-normal run times, "
                "diurnal Poisson arrivals, modal over-requested limits (chosen shapes, not a measured site)"),
        seed=seed, shape=NodeShape(nodes=p.nodes, gpus_per_node=p.gpus_per_node),
        duration_s=max(1, math.ceil(window)),
        params={"generator_version": GENERATOR_VERSION, **dataclasses.asdict(p)}, jobs=tuple(jobs))


def default_trace(nodes: int = 64, gpus_per_node: int = 8, hours: float = 24.0, seed: int = 0) -> Trace:
    """The default mix for a cluster of ``nodes`` x ``gpus_per_node`` over ``hours``."""
    return generate(SyntheticParams(nodes=nodes, gpus_per_node=gpus_per_node, hours=hours), seed)
