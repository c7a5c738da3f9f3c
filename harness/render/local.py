"""JobSpec -> the torchrun commands of the local baseline (pure).

One torchrun agent per "node", all on this machine, meeting through c10d
rendezvous on loopback: the same launcher and rendezvous as on the clusters,
with no scheduler in between.
"""
from __future__ import annotations

import shlex
from pathlib import Path

from .. import data
from ..spec import WORKLOAD_SCRIPT, JobSpec

# The modules shipped beside the workload, in the same directory wherever it goes (the Slurm run directory, the
# pods' ConfigMap, the local baseline's package folder): ddp_train.py imports poc_calibration.py with
# --calibrate, and the allocation check (poc_check.py, with poc_health.py) runs before training.
CHECK_SCRIPT = "poc_check.py"
WORKLOAD_SIBLINGS = ("poc_calibration.py", "poc_health.py", CHECK_SCRIPT)
WORKLOAD_FILES = (WORKLOAD_SCRIPT, *WORKLOAD_SIBLINGS)


def workload_script() -> Path:
    """The training job as shipped with the harness (a real file: the local baseline runs it)."""
    return data.path("workloads", WORKLOAD_SCRIPT)


def workload_texts() -> dict[str, str]:
    """Every file the workload ships as, by name, the training job first."""
    return {name: data.text("workloads", name) for name in WORKLOAD_FILES}


def render_local(spec: JobSpec, work_dir: str, python: str, script: str | None = None) -> list[list[str]]:
    script = script or str(workload_script())
    endpoint = f"127.0.0.1:{spec.rdzv_port}"
    ckpt, events = f"{work_dir}/ckpt", f"{work_dir}/events"
    return [
        [python, "-m", "torch.distributed.run", *spec.torchrun_args(endpoint), "--local_addr=127.0.0.1",
         script, *spec.workload_args(ckpt, events)]
        for _ in range(spec.nodes)
    ]


def as_script(argvs: list[list[str]], env: dict[str, str]) -> str:
    lines = ["#!/usr/bin/env bash", "# Local baseline: one torchrun agent per node, on this machine.",
             "set -euo pipefail"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    lines += [shlex.join(a) + " &" for a in argvs]
    lines.append("wait")
    return "\n".join(lines) + "\n"
