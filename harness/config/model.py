"""The whole configuration: the sections together, the checks that span sections, and what a run
records of it (config_hash, the redacted copy stored with results)."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from .. import capabilities as cap
from .base import Model
from .calibration import Calibration
from .contention import Contention
from .drills import Drills
from .faults import DESTRUCTIVE_FAULTS, Fault
from .kubernetes import NATIVE_KUBECONFIG, Kubernetes
from .local import Local
from .pricing import Price
from .scale import Scale
from .serve import Serve
from .slurm import Slurm
from .ux import Ux
from .workload import SWEEP_MAX_BYTES, Fabric, Resources, Workload

PLATFORMS = cap.PLATFORMS
PLATFORM_ALIASES = {"kubernetes": "k8s", "kube": "k8s", "k8s": "k8s", "slurm": "slurm", "local": "local"}
# Conservative: what Slurm, Kubernetes labels and file names all accept.
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")
# the smallest largest-size of the all-reduce sweep whose busbw may be a GPU campaign's headline
HEADLINE_MIN_BYTES = {"gpu": 1024**3}
GPU_SWEEP = "1K:4G"      # workload.sweep's default when the job has real GPUs


# the longest a campaign waits for one run to be admitted, or to run: a week's queue on a busy GPU
# cluster is plausible, a month is the most a benchmark should wait on anything
MAX_TIMEOUT_S = 30 * 86400


class Timeouts(Model):
    queue_s: float = Field(300, gt=0, le=MAX_TIMEOUT_S)
    run_s: float = Field(900, gt=0, le=MAX_TIMEOUT_S)


def _default_pricing() -> dict[str, Price]:
    return {p: Price() for p in PLATFORMS}


class Config(Model):
    campaign: str = "smoke"
    platforms: list[str] = Field(default_factory=lambda: ["local"])
    workload: Workload = Field(default_factory=Workload)
    resources: Resources = Field(default_factory=Resources)
    kubernetes: Kubernetes = Field(default_factory=Kubernetes)
    slurm: Slurm = Field(default_factory=Slurm)
    local: Local = Field(default_factory=Local)
    pricing: dict[str, Price] = Field(default_factory=_default_pricing)
    # each fault is a run per platform and repetition: a hundred are far more than any campaign plans
    faults: list[Fault] = Field(default_factory=lambda: [Fault(kind="kill_rank", at_step=15, rank=1)],
                                max_length=100)
    repetitions: int = Field(1, ge=0, le=1000)
    contention: Contention | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    # interleaved: round k runs the k-th planned run of every platform, platforms shuffled per round
    # with `seed` (harness/order.py), so drift on a noisy machine is not mistaken for a platform
    order: Literal["interleaved", "blocked"] = "interleaved"
    seed: int = Field(1, ge=0, le=2**32 - 1)   # numpy's and torch's seeds take 32 bits everywhere
    fabric: Fabric = Field(default_factory=Fabric)
    # lose_node takes a node away (Slurm: DOWN; Kubernetes: cordon and evict): on a shared cluster only
    # with this set, and only nodes the run holds
    allow_destructive_faults: bool = False
    # the run's files on the cluster (Slurm run directory, the Kubernetes checkpoint sub-path)
    keep_run_files: Literal["on_failure", "always", "never"] = "on_failure"
    ux: Ux = Field(default_factory=Ux)
    drills: Drills = Field(default_factory=Drills)
    serve: Serve = Field(default_factory=Serve)
    calibration: Calibration = Field(default_factory=Calibration)
    scale: Scale = Field(default_factory=Scale)

    @field_validator("campaign")
    @classmethod
    def _campaign(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be 1-42 lower-case letters, digits or '-', starting and ending alphanumeric")
        return v

    @field_validator("platforms")
    @classmethod
    def _platforms(cls, v: list[str]) -> list[str]:
        return [normalize_platform(p) for p in v]

    @field_validator("ux")
    @classmethod
    def _probe_kubernetes(cls, v: Ux, info: ValidationInfo) -> Ux:
        """ux.kubernetes, checked now as the probes will use it: over the campaign's kubernetes section
        (harness/ux/mistakes.py probe_config), so a bad value is this command's error, not a probe's."""
        base = info.data.get("kubernetes")
        if not v.kubernetes or base is None:
            return v
        try:
            Kubernetes.model_validate({**base.model_dump(mode="json"), **v.kubernetes})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"] if not str(x).startswith("function-"))
            raise ValueError(f"kubernetes{'.' + where if where else ''}: "
                             f"{err['msg'].removeprefix('Value error, ')}") from None
        return v

    @field_validator("pricing")
    @classmethod
    def _pricing(cls, v: dict[str, Price]) -> dict[str, Price]:
        out = {normalize_platform(k): p for k, p in v.items()}
        for p in PLATFORMS:
            out.setdefault(p, Price())
        return out

    @model_validator(mode="after")
    def _cross(self) -> Config:
        r = self.resources
        if self.workload.backend == "nccl" and r.gpus_per_node == 0:
            raise ValueError("workload.backend nccl needs resources.gpus_per_node > 0")
        if r.gpus_per_node and r.procs_per_node != r.gpus_per_node:
            raise ValueError("with GPUs, resources.procs_per_node must equal gpus_per_node (one rank per GPU)")
        if r.gpus_per_node == 0 and self.workload.sweep_max_bytes > SWEEP_MAX_BYTES["cpu"]:
            raise ValueError("workload.sweep above 1G needs GPUs (resources.gpus_per_node > 0)")
        w = self.workload
        if r.gpus_per_node and not w.simulated_gpus:
            # the headline busbw is the largest swept size's: below ~1 GiB it measures latency, not the fabric
            if "sweep" not in w.model_fields_set:
                w.sweep = GPU_SWEEP
            elif w.sweep and w.sweep_max_bytes < HEADLINE_MIN_BYTES["gpu"]:
                raise ValueError("on GPUs workload.sweep must reach at least 1G (the headline busbw is taken at "
                                 "its largest size, and NVLink/InfiniBand bandwidth is not reached below ~1 GiB): "
                                 f"e.g. {GPU_SWEEP}, the default with GPUs")
        if w.simulated_gpus and r.gpus_per_node == 0:
            raise ValueError("workload.simulated_gpus needs resources.gpus_per_node > 0 (the GPUs it simulates)")
        if w.simulated_gpus and w.backend == "nccl":
            raise ValueError("workload.simulated_gpus trains on CPUs: backend must be auto or gloo, not nccl")
        if r.gpus_per_node and not w.simulated_gpus and w.backend == "gloo":
            raise ValueError("GPUs were asked for (resources.gpus_per_node > 0) but workload.backend is gloo; "
                             "use auto or nccl, or set workload.simulated_gpus: true on clusters without GPUs")
        destructive = [f.kind for f in self.faults if f.kind in DESTRUCTIVE_FAULTS
                       and cap.fault_platforms(f.kind) & set(self.platforms)]
        if destructive and not self.allow_destructive_faults:
            raise ValueError(f"fault {destructive[0]} takes a node away from the cluster; set "
                             "allow_destructive_faults: true to allow it (it only touches nodes the run holds)")
        if self.serve.enabled and "node_loss" in self.serve.faults and cap.SCENARIOS["serve"] & set(self.platforms) \
                and not self.allow_destructive_faults:
            raise ValueError("the serving scenario's node_loss fault takes a node away from the cluster; set "
                             "allow_destructive_faults: true to allow it (it only touches nodes the run holds), "
                             "or leave node_loss out of serve.faults")
        for f in self.faults:
            if f.rank >= r.world_size:
                raise ValueError(f"fault rank {f.rank} does not exist: the job has {r.world_size} ranks")
            if f.at_step > self.workload.steps:
                raise ValueError(f"fault at_step {f.at_step} is after the last step ({self.workload.steps})")
        for plat, price in self.pricing.items():
            if price.unit == "gpu" and r.gpus_per_node == 0 and plat in self.platforms:
                raise ValueError(f"pricing.{plat} is per GPU but resources.gpus_per_node is 0")
        return self

    def contention_runs(self, platform: str) -> int:
        return self.contention.runs if self.contention and cap.runs("contention", platform) else 0

    def mistakes_for(self, platform: str) -> list[str]:
        return list(self.ux.mistakes) if cap.runs("ux", platform) else []

    def drills_for(self, platform: str) -> list[str]:
        return list(self.drills.kinds) if cap.runs("drills", platform) else []

    def serve_for(self, platform: str) -> bool:
        return self.serve.enabled and cap.runs("serve", platform)

    def slurm_shell(self) -> bool:
        """Whether Slurm's commands reach a login node's shell: not through slurmrestd with a mounted run directory."""
        return not (self.slurm.transport == "rest" and self.slurm.rest.files == "mount")

    def faults_for(self, platform: str) -> list[Fault]:
        """The configured faults ``platform``'s backend injects, in config order."""
        can = cap.faults(platform, shell=self.slurm_shell())
        most = self.rounds_cap(platform)
        out, seen = [], {}
        for f in self.faults:
            seen[f.kind] = seen.get(f.kind, 0) + 1
            if f.kind in can and (most is None or seen[f.kind] <= most):
                out.append(f)
        return out

    def clean_runs(self, platform: str) -> int:
        most = self.rounds_cap(platform)
        return self.repetitions if most is None else min(self.repetitions, most)

    def rounds_cap(self, platform: str) -> int | None:
        """The most runs of one scenario ``platform`` takes (the baseline's local.rounds), None: no cap."""
        return self.local.rounds if platform == "local" else None

    def faults_left_out(self, platform: str) -> list[str]:
        """Why each configured fault that ``platform`` injects elsewhere is not planned here: a
        transport that lacks what the fault needs (a platform that never injects a kind is not listed)."""
        if platform != "slurm" or self.slurm_shell():
            return []
        kinds = sorted({f.kind for f in self.faults} & cap.SLURM_SHELL_FAULTS)
        return [f"{k}: slurm.transport rest with rest.files mount gives no login-node shell for srun/scontrol"
                for k in kinds]

    def config_hash(self) -> str:
        """Identity of what was measured: excludes connection details, which do not change the job."""
        data = self.model_dump(mode="json")
        for key in ("host", "port", "user", "key_file", "known_hosts", "connection_file", "accept_unknown_host",
                    "ssh_config", "proxy_jump", "rest"):
            data["slurm"].pop(key, None)
        for key in ("kubeconfig", "context", "audit_log"):
            data["kubernetes"].pop(key, None)
            data["ux"]["kubernetes"].pop(key, None)
        data["slurm"].pop("controller_log", None)
        if data["resources"].get("caps") is None:   # added later: unset, a campaign keeps the hash it had
            data["resources"].pop("caps", None)
        if data["local"].get("rounds") is None:     # likewise
            data["local"].pop("rounds", None)
        blob = json.dumps(data, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def redacted(self) -> dict:
        """The config as stored with results: paths to secrets are reduced to their file name."""
        data = self.model_dump(mode="json")
        for sec, key in (("slurm", "key_file"), ("kubernetes", "kubeconfig"), ("slurm", "ssh_config")):
            if data[sec].get(key) and data[sec][key] != NATIVE_KUBECONFIG:
                data[sec][key] = "<redacted>/" + Path(data[sec][key]).name
        probe_kc = data["ux"]["kubernetes"].get("kubeconfig")
        if probe_kc and probe_kc != NATIVE_KUBECONFIG:
            data["ux"]["kubernetes"]["kubeconfig"] = "<redacted>/" + Path(str(probe_kc)).name
        if data["slurm"]["rest"].get("token_file"):
            data["slurm"]["rest"]["token_file"] = "<redacted>/" + Path(data["slurm"]["rest"]["token_file"]).name
        return data


def normalize_platform(name: str) -> str:
    key = str(name).strip().lower()
    if key not in PLATFORM_ALIASES:
        raise ValueError(f"unknown platform {name!r}; choose from local, slurm, k8s")
    return PLATFORM_ALIASES[key]
