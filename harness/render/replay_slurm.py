"""A trace's jobs -> the batch scripts a Slurm scale replay submits (pure).

Each trace job is one batch script: ``nodes`` nodes with one task each, the job's GPUs per node, one
CPU and 1 GiB per node (as each pod asks on Kubernetes: without ``--mem`` Slurm would give a job every
node's whole memory and a 2-GPU job would hold a whole node), the tenant as the account, the limit
as ``--time``, and a body that sleeps for the run time. Slurm keeps limits in whole minutes, so the
limit is rounded up to one: a compressed trace's limits of seconds become a minute each, which makes
backfill plan with coarser estimates than the trace's (Kueue does not plan with limits at all).

User text (tenant, QOS) goes only into ``#SBATCH`` lines, after it is reduced to the characters
Slurm allows in names; nothing from the trace reaches a line the shell runs but a whole number.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..scale.trace import TraceJob

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class SlurmTarget:
    replay: str                      # this replay's name: every job's name, so squeue can select them
    partition: str | None = None     # None: the cluster's default partition
    with_qos: bool = False           # QOS needs slurmdbd's QOS table; without it sbatch refuses the option
    limit_grace_s: int = 30          # the same grace as on Kubernetes (render/replay_k8s.py says why)


def slurm_name(text: str, limit: int = 64) -> str:
    """An account, QOS or job name Slurm accepts, from a trace's free text."""
    s = _UNSAFE.sub("_", text)[:limit]
    return s or "_"


def time_minutes(limit_s: int, grace_s: int) -> int:
    """``--time`` in whole minutes, never under one: Slurm's limits have a minute's resolution."""
    return max(1, math.ceil((limit_s + grace_s) / 60))


def batch_script(job: TraceJob, target: SlurmTarget) -> str:
    lines = ["#!/bin/sh",
             f"#SBATCH --job-name={slurm_name(target.replay)}",
             f"#SBATCH --account={slurm_name(job.tenant)}",
             f"#SBATCH --nodes={job.nodes}",
             "#SBATCH --ntasks-per-node=1",
             "#SBATCH --cpus-per-task=1",
             "#SBATCH --mem=1G",
             f"#SBATCH --time={time_minutes(job.limit_s, target.limit_grace_s)}",
             "#SBATCH --output=/dev/null"]
    if job.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    if target.partition:
        lines.append(f"#SBATCH --partition={slurm_name(target.partition)}")
    if target.with_qos:
        lines.append(f"#SBATCH --qos={slurm_name(job.qos)}")
    lines.append(f"exec sleep {int(job.runtime_s)}")
    return "\n".join(lines) + "\n"
