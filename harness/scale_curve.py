"""The scale-curve scenario: the config's job again at each size of ``scale.nodes``, on each scheduler
platform, so queue time, startup, all-reduce bus bandwidth, step time and throughput can be read against
the number of nodes (report/scale_curve.py).

A run's scenario is ``scale:<nodes>`` and its id ``<platform>-scale-<nodes>n-<rep>``; its job is the
config's with ``nodes`` replaced: ranks per node, GPUs, CPUs and memory per node, the per-rank batch and
the steps stay, so the world size grows with the nodes (weak scaling). No fault is injected and nothing
runs beside it: the pipeline executes it as a clean run. The Kubernetes queue the harness sets up on the
local native cluster is sized to admit the largest size; on a user's cluster, and on a Slurm partition,
preflight refuses a size that cannot fit (backends' preflight, from ``cfg.scale.most_nodes``).
"""
from __future__ import annotations

from dataclasses import replace

from .config import Config
from .context import Scenario
from .spec import JobSpec, Planned

KIND = "scale"


def scenario_of(nodes: int) -> str:
    return f"{KIND}:{nodes}"


def nodes_of(scenario: str) -> int:
    """The size a ``scale:<nodes>`` scenario names."""
    kind, _, arg = scenario.partition(":")
    if kind != KIND or not arg.isdigit() or int(arg) < 1:
        raise ValueError(f"not a scale run's scenario: {scenario!r} (scale:<nodes>)")
    return int(arg)


def run_id(platform: str, nodes: int, rep: int) -> str:
    """``slurm-scale-16n-01``: lower-case letters, digits and '-', as every platform's names allow."""
    return f"{platform}-{KIND}-{nodes}n-{rep:02d}"


class ScaleScenario(Scenario):
    """The config's job at one of scale.nodes' sizes; otherwise a clean run."""
    kind = KIND

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        return [Planned(run_id(platform, n, i + 1), None, scenario_of(n))
                for n in cfg.scale.sizes_for(platform) for i in range(cfg.scale.repetitions)]

    @staticmethod
    def shaped(cfg: Config, spec: JobSpec) -> JobSpec:
        # world_size (and so torchrun's --nnodes, the Slurm tasks, the JobSet's pods, the quota a job asks
        # of Kueue) follows from nodes; everything per node and per rank is the config's job's
        return replace(spec, nodes=nodes_of(spec.scenario), fault=None)
