"""What the job is and what it asks for: the workload (model, steps, the all-reduce sweep), the resources
it holds, and the fabric settings every rank gets."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import ENV_NAME, MAX_STEPS, Model

_SIZE = re.compile(r"^\s*\d+\s*[KMGkmg]?(i?B)?\s*$")


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)(i?B)?\s*", str(text))
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]


# Keys added after campaigns were stored, with their defaults: config_hash leaves them out at the default.
LATER_DEFAULTS = {"rdzv_join_timeout_s": None, "stop_grace_s": 60}

# The largest all-reduce sweep size: 8 GiB on GPUs (two buffers of it must fit in device memory),
# 1 GiB on CPUs (host memory, and a gloo all-reduce of 1 GiB already takes seconds).
SWEEP_MAX_BYTES = {"gpu": 8 * 1024**3, "cpu": 1024**3}
MAX_MODEL_PARAMS = 2 * 1024**3


class Workload(Model):
    model_params: str = "4M"
    layers: int = Field(4, ge=1, le=64)
    steps: int = Field(40, ge=1, le=MAX_STEPS)
    batch: int = Field(64, ge=1, le=1024**2)   # per rank: a million samples is past any device's memory
    checkpoint_every: int = Field(10, ge=0, le=MAX_STEPS)
    # the newest N checkpoints stay (0: all): a resume needs only the newest, and a shared file system's
    # quota is not the benchmark's to fill
    checkpoint_keep: int = Field(2, ge=0, le=10_000)
    sweep: str = "1K:64M"
    # nccl-tests all_reduce_perf's defaults: -n 20 timed iterations, -w 1 warm-up per size (src/common.cu
    # since v2.16.8, checked at v2.19.6; up to v2.16.7 it was -w 5, at the smallest and largest sizes only)
    sweep_iters: int = Field(20, ge=1, le=10_000)   # per size; nccl-tests runs 20
    sweep_warmup: int = Field(1, ge=0, le=10_000)
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    # mlp: the tiny smoke model; transformer: decoder blocks sized to model_params, so step time,
    # memory and all-reduce sizes look like real training
    model: Literal["mlp", "transformer"] = "mlp"
    seq_len: int = Field(512, ge=8, le=32768)
    vocab_size: int = Field(32000, ge=16, le=1_000_000)
    precision: Literal["auto", "fp32", "bf16"] = "auto"   # auto: bf16 autocast on GPUs, fp32 on CPUs
    # the scheduler allocates GPUs, but there are none: train on CPUs with gloo and say so in the
    # results (the local GPU-shaped clusters); without it a missing GPU is an error
    simulated_gpus: bool = False
    # torchrun's rendezvous join timeout (--rdzv_conf join_timeout; torch's default 600 s): how long the first
    # agents wait for the last. Unset: 600 s, plus 60 s a node above 4 nodes (16 nodes pulling a large image at
    # once start minutes apart); the same on every platform
    rdzv_join_timeout_s: int | None = Field(None, ge=60, le=86_400)
    # the time the workload gets to save a checkpoint before it is stopped, the same on every platform: Slurm's
    # --signal=B:USR1@N before the time limit, Kubernetes' terminationGracePeriodSeconds (SIGTERM, then SIGKILL);
    # the workload saves at the end of its step on either signal
    stop_grace_s: int = Field(60, ge=5, le=3600)

    @field_validator("model_params")
    @classmethod
    def _params(cls, v: str) -> str:
        if not _SIZE.match(str(v)) or parse_size(v) < 64:
            raise ValueError("must be a count like 4M, 500K or 1G (at least 64)")
        if parse_size(v) > MAX_MODEL_PARAMS:
            raise ValueError("must be at most 2G (a transformer of about 1B parameters is the intended top)")
        return str(v)

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, v: str) -> str:
        if not v:
            return v
        parts = v.split(":") if ":" in v else v.split(",")
        if ":" in v and len(parts) != 2:
            raise ValueError("a range is LO:HI, e.g. 1K:256M")
        for p in parts:
            if not _SIZE.match(p):
                raise ValueError(f"{p!r} is not a size like 1K, 4M or 1048576")
        if ":" in v and parse_size(parts[0]) > parse_size(parts[1]):
            raise ValueError("LO must not exceed HI")
        if max(parse_size(p) for p in parts) > SWEEP_MAX_BYTES["gpu"]:
            raise ValueError("the sweep stops at 8G (a GPU holds two buffers of the largest size)")
        return v

    @property
    def sweep_max_bytes(self) -> int:
        return max((parse_size(p) for p in self.sweep.replace(":", ",").split(",") if p.strip()), default=0)

    @model_validator(mode="after")
    def _sweep_on_cpu(self) -> Workload:
        # a CPU rank holds two buffers of the largest size in host memory (send, receive)
        if self.backend == "gloo" and self.sweep_max_bytes > SWEEP_MAX_BYTES["cpu"]:
            raise ValueError("with backend gloo (CPU) the sweep stops at 1G; up to 8G needs GPUs")
        return self


class Resources(Model):
    nodes: int = Field(2, ge=1, le=4096)
    procs_per_node: int = Field(1, ge=1, le=64)
    gpus_per_node: int = Field(0, ge=0, le=64)
    cpus_per_node: int = Field(1, ge=1, le=4096)          # the largest nodes have a few hundred cores
    memory_mb: int = Field(3072, ge=64, le=32 * 1024**2)  # 32 TiB: the largest nodes have a few
    # whole nodes, no other job on them (Slurm --exclusive; Kubernetes: no other JobSet's pod beside the
    # run's): unset, it is on for real GPUs (a neighbour's traffic on the NICs and PCIe would be measured
    # as the scheduler's) and off otherwise
    exclusive: bool | None = None
    # whether cpus_per_node and memory_mb confine the job or only reserve for it, the same on every
    # platform: "enforced" (Kubernetes limits = requests, the baseline's docker --cpus/--memory, Slurm's
    # --cpus-per-task/--mem under a TaskPlugin that confines tasks), "requests" (reserved, nothing
    # confines: no limits, no docker caps). Unset: enforced, unless a Slurm cluster of the campaign cannot
    # confine (TaskPlugin without cgroup): then requests everywhere, since a cap on one side only would be
    # measured as a scheduler difference (spec.resolve_caps; every run records which and why)
    caps: Literal["enforced", "requests"] | None = None

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


class Fabric(Model):
    """What the ranks talk over. The same variables reach every rank on every platform (the sbatch
    export line and the pods' env), so bandwidth compares schedulers on one fabric setting."""
    env: dict[str, str] = Field(default_factory=dict)    # NCCL_*, UCX_*, FI_*, GLOO_*, ...

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not ENV_NAME.match(k):
                raise ValueError(f"{k!r} is not an environment variable name")
            if any(c in str(val) for c in "\n\r\0"):
                raise ValueError(f"{k}: a value must be one line")
        hca = str(v.get("NCCL_IB_HCA", ""))
        if hca and not hca.startswith(("=", "^")):
            # NCCL reads a bare list as prefixes: mlx5_1 also selects mlx5_10 and mlx5_11, mlx5 every adapter
            raise ValueError(f"NCCL_IB_HCA {hca!r} is a list of prefixes to NCCL (mlx5_1 also takes mlx5_10, "
                             f"mlx5_11): write the exact form, '={hca}' (or '^=...' to exclude exact names)")
        return {k: str(val) for k, val in v.items()}
