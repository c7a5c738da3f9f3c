"""YAML -> validated configuration.

The built-in default lives in default_config.yaml (with its comments, so
`poc config show` prints something a user can edit); the models below carry
the same defaults, and a test keeps the two equal.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from . import capabilities as cap
from . import config_yaml, imageref
from .config_clusters import (  # noqa: F401
    _ENV_NAME,
    NATIVE_KUBECONFIG,
    Kubernetes,
    PodPlacement,
    Slurm,
    SlurmRest,
    _image_reference,
    _Model,
)
from .config_drills import Drills
from .config_serve import Serve
from .config_ux import Ux
from .errors import ConfigError

PLATFORMS = cap.PLATFORMS
PLATFORM_ALIASES = {"kubernetes": "k8s", "kube": "k8s", "k8s": "k8s", "slurm": "slurm", "local": "local"}
# faults that change the cluster, not only the run's own processes
DESTRUCTIVE_FAULTS = frozenset({"lose_node"})
_SIZE = re.compile(r"^\s*\d+\s*[KMGkmg]?(i?B)?\s*$")
# Conservative: what Slurm, Kubernetes labels and file names all accept.
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)(i?B)?\s*", str(text))
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]


# The largest all-reduce sweep size: 8 GiB on GPUs (two buffers of it must fit in device memory),
# 1 GiB on CPUs (host memory, and a gloo all-reduce of 1 GiB already takes seconds).
SWEEP_MAX_BYTES = {"gpu": 8 * 1024**3, "cpu": 1024**3}


MAX_MODEL_PARAMS = 2 * 1024**3
class Fabric(_Model):
    """What the ranks talk over. The same variables reach every rank on every platform (the sbatch
    export line and the pods' env), so bandwidth compares schedulers on one fabric setting."""
    env: dict[str, str] = Field(default_factory=dict)    # NCCL_*, UCX_*, FI_*, GLOO_*, ...

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not _ENV_NAME.match(k):
                raise ValueError(f"{k!r} is not an environment variable name")
            if any(c in str(val) for c in "\n\r\0"):
                raise ValueError(f"{k}: a value must be one line")
        return {k: str(val) for k, val in v.items()}


class Workload(_Model):
    model_params: str = "4M"
    layers: int = Field(4, ge=1, le=64)
    steps: int = Field(40, ge=1)
    batch: int = Field(64, ge=1)
    checkpoint_every: int = Field(10, ge=0)
    sweep: str = "1K:64M"
    # nccl-tests all_reduce_perf's defaults: -n 20 timed iterations, -w 1 warm-up (src/common.cu)
    sweep_iters: int = Field(20, ge=1)
    sweep_warmup: int = Field(1, ge=0)
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


class Resources(_Model):
    nodes: int = Field(2, ge=1, le=4096)
    procs_per_node: int = Field(1, ge=1, le=64)
    gpus_per_node: int = Field(0, ge=0, le=64)
    cpus_per_node: int = Field(1, ge=1)
    memory_mb: int = Field(3072, ge=64)

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


class Local(_Model):
    """The baseline without a scheduler. container: one container per node of the image the clusters
    run (same torch build, a bridge network between them); host: torchrun processes of this Python."""
    runtime: Literal["container", "host"] = "container"
    image: str | None = None          # None: the locally built worker image (the one the clusters run)

    _image = field_validator("image")(_image_reference)


class Price(_Model):
    """What holding a platform's resources costs (harness/metrics/cost.py has the formulas)."""
    usd_per_hour: float = Field(1.0, ge=0)        # per unit-hour, when no price set is chosen
    unit: Literal["node", "gpu"] = "node"
    sets: dict[str, float] = Field(default_factory=dict)   # named USD per unit-hour: on_demand, reserved, spot...
    price_set: str | None = None                  # which of `sets` applies; null: usd_per_hour
    # the platform's fixed cost per hour that a job of this size carries (control plane, login
    # nodes, slurmctld/slurmdbd hosts), amortised over the fraction of time the platform is busy
    overhead_usd_per_hour: float = Field(0.0, ge=0)
    utilisation: float = Field(1.0, gt=0, le=1)

    @model_validator(mode="after")
    def _set(self) -> Price:
        bad = {k: v for k, v in self.sets.items() if v < 0}
        if bad:
            raise ValueError(f"price sets must not be negative: {bad}")
        if self.price_set is not None and self.price_set not in self.sets:
            known = ", ".join(self.sets) or "none defined"
            raise ValueError(f"price_set {self.price_set!r} is not one of sets ({known})")
        return self


class Fault(_Model):
    kind: Literal["kill_rank", "delete_pod", "lose_node", "requeue"]
    at_step: int = Field(ge=1)
    rank: int = Field(1, ge=0)


class Contention(_Model):
    """A same-shape blocking job holds what the measured job needs until it finishes by itself."""
    runs: int = Field(1, ge=1, le=100)
    blocker_steps: int | None = Field(None, ge=1)   # None: the workload's steps


class Timeouts(_Model):
    queue_s: float = Field(300, gt=0)
    run_s: float = Field(900, gt=0)


def _default_pricing() -> dict[str, Price]:
    return {p: Price() for p in PLATFORMS}


class Config(_Model):
    campaign: str = "smoke"
    platforms: list[str] = Field(default_factory=lambda: ["local"])
    workload: Workload = Field(default_factory=Workload)
    resources: Resources = Field(default_factory=Resources)
    kubernetes: Kubernetes = Field(default_factory=Kubernetes)
    slurm: Slurm = Field(default_factory=Slurm)
    local: Local = Field(default_factory=Local)
    pricing: dict[str, Price] = Field(default_factory=_default_pricing)
    faults: list[Fault] = Field(default_factory=lambda: [Fault(kind="kill_rank", at_step=15, rank=1)])
    repetitions: int = Field(1, ge=0, le=1000)
    contention: Contention | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    # interleaved: round k runs the k-th planned run of every platform, platforms shuffled per round
    # with `seed` (harness/order.py), so drift on a noisy machine is not mistaken for a platform
    order: Literal["interleaved", "blocked"] = "interleaved"
    seed: int = Field(1, ge=0)
    fabric: Fabric = Field(default_factory=Fabric)
    # lose_node takes a node away (Slurm: DOWN; Kubernetes: cordon and evict): on a shared cluster only
    # with this set, and only nodes the run holds
    allow_destructive_faults: bool = False
    # the run's files on the cluster (Slurm run directory, the Kubernetes checkpoint sub-path)
    keep_run_files: Literal["on_failure", "always", "never"] = "on_failure"
    ux: Ux = Field(default_factory=Ux)
    drills: Drills = Field(default_factory=Drills)
    serve: Serve = Field(default_factory=Serve)

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
        return [f for f in self.faults if f.kind in can]

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


def default_yaml() -> str:
    return resources.files("harness").joinpath("default_config.yaml").read_text(encoding="utf-8")


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<top level>"


_TIPS = {
    "extra_forbidden": "remove the key or fix its spelling; `poc config show` lists every valid key",
    "missing": "add the key; `poc config show` shows it with its default",
    "literal_error": "use one of the values listed in the message",
    "image_reference": f"an image reference is {imageref.FORM}, e.g. registry.example.com/team/torch:2.4",
    "slurm_image": f"{imageref.SLURM_FORMS}; an image reference is {imageref.FORM}",
    "pyslurm_transport": "use slurm.transport: ssh (a login node over ssh), rest (slurmrestd with a JWT) or local "
                         "(Slurm's commands on this machine): none needs a library built for the cluster's release",
}


def from_mapping(data: object, source: str = "<config>") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {type(data).__name__}",
                          tip="start from `poc config show > poc.yaml`")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        lines, tips = [], []
        for err in exc.errors():
            loc = _loc(tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))))
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{loc}: {msg}")
            tip = _TIPS.get(err["type"])
            if tip and tip not in tips:
                tips.append(tip)
        first, rest = lines[0], lines[1:]
        message = f"{source}: {first}" + "".join(f"\nERROR {source}: {line}" for line in rest)
        raise ConfigError(message,
                          tip="; ".join(tips) or "fix the value; `poc config show` documents each field") from None


def load(path: str | os.PathLike | None) -> Config:
    """Load a config file, or the built-in default when path is None."""
    data, source = read_mapping(path)
    return from_mapping(data, source)


def read_mapping(path: str | os.PathLike | None) -> tuple[object, str]:
    """A config file's (or the built-in default's) plain data, not yet validated, and its name for
    messages: the CLI applies its --set and POC_* overrides to it before from_mapping validates."""
    if path is None:
        text, source = default_yaml(), "<built-in default>"
    else:
        p = Path(path).expanduser()
        if not p.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist",
                              tip="write one with `poc config show > poc.yaml`, or omit --config for the default")
        text, source = p.read_text(encoding="utf-8"), str(path)
    return config_yaml.load(text, source), source   # with alias and nesting limits: ERROR/TIP, never a hang


def expand(path: str | None) -> str | None:
    return None if path is None else os.path.expandvars(os.path.expanduser(path))
