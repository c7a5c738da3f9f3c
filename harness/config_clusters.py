"""The cluster sections of the configuration: kubernetes (with kubernetes.pod) and slurm (with slurm.rest).

Split from config.py, which re-exports every name here; the rules are the same: unknown keys are
refused, every value that reaches a rendered object or a command line is validated here.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from . import config_sbatch, imageref


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_K8S_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$")
_K8S_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_K8S_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_CAPABILITY = re.compile(r"^[A-Z][A-Z0-9_]{1,40}$")
_SLURM_WORD = re.compile(r"^[A-Za-z0-9_.+:@%-]{1,128}$")
# a Slurm constraint expression: features joined by & | , with [ ] ( ) * and counts
_SLURM_CONSTRAINT = re.compile(r"^[A-Za-z0-9_.&|,\[\]()*!:-]{1,256}$")


def _image_reference(v: str | None) -> str | None:
    """An image field (local.image, kubernetes.image): None, or a valid OCI reference."""
    problem = None if v is None else imageref.reference_problem(v)
    if problem:
        raise PydanticCustomError("image_reference", "{value} {problem}", {"value": repr(v), "problem": problem})
    return v


class PodPlacement(_Model):
    """Where and how the pods run on a real GPU cluster (kubernetes.pod); everything is optional."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict] = Field(default_factory=list)         # pod-spec tolerations, as written in YAML
    affinity: dict | None = None          # merged with the harness's one-pod-per-node anti-affinity
    priority_class: str | None = None
    service_account: str | None = None
    image_pull_secrets: list[str] = Field(default_factory=list)   # Secret names in the namespace
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)     # e.g. k8s.v1.cni.cncf.io/networks
    shm_size: str = "1Gi"                 # /dev/shm (NCCL and dataloaders use it)
    host_network: bool = False            # the hosts' interfaces (InfiniBand/RoCE without a CNI)
    capabilities: list[str] = Field(default_factory=list)         # e.g. IPC_LOCK (RDMA memory registration)
    extra_resources: dict[str, str] = Field(default_factory=dict)  # per pod, requests = limits: {"rdma/ib": "1"}

    @field_validator("node_selector", "labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not _K8S_LABEL_KEY.match(k) or not _K8S_LABEL_VALUE.match(str(val)):
                raise ValueError(f"{k}={val!r} is not a Kubernetes label (key [prefix/]name, value up to 63 "
                                 "letters, digits, '-', '_', '.')")
        return {k: str(val) for k, val in v.items()}

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not _K8S_LABEL_KEY.match(k):
                raise ValueError(f"{k!r} is not an annotation key ([prefix/]name)")
        return {k: str(val) for k, val in v.items()}

    @field_validator("tolerations")
    @classmethod
    def _tolerations(cls, v: list[dict]) -> list[dict]:
        allowed = {"key", "operator", "value", "effect", "tolerationSeconds"}
        for t in v:
            extra = set(t) - allowed
            if extra:
                raise ValueError(f"toleration {t} has unknown keys {sorted(extra)} (allowed: {sorted(allowed)})")
            if t.get("operator", "Equal") not in ("Equal", "Exists"):
                raise ValueError(f"toleration operator must be Equal or Exists, not {t.get('operator')!r}")
            if t.get("effect") not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise ValueError(f"toleration effect {t.get('effect')!r} is not NoSchedule, PreferNoSchedule "
                                 "or NoExecute")
        return v

    @field_validator("priority_class", "service_account")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", v):
            raise ValueError("must be a Kubernetes object name: lower-case letters, digits, '-' and '.'")
        return v

    @field_validator("image_pull_secrets")
    @classmethod
    def _secrets(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name):
                raise ValueError(f"{name!r} is not a Secret name")
        return v

    @field_validator("shm_size")
    @classmethod
    def _shm(cls, v: str) -> str:
        if not _K8S_QUANTITY.match(v):
            raise ValueError("must be a Kubernetes quantity like 1Gi, 64Gi or 512Mi")
        return v

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, v: list[str]) -> list[str]:
        for c in v:
            if not _CAPABILITY.match(c):
                raise ValueError(f"{c!r} is not a Linux capability name like IPC_LOCK (no CAP_ prefix)")
        return v

    @field_validator("extra_resources")
    @classmethod
    def _extra(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not _K8S_LABEL_KEY.match(k) or not _K8S_QUANTITY.match(str(val)):
                raise ValueError(f"{k}: {val!r} is not a resource name and quantity like rdma/ib: 1")
        return {k: str(val) for k, val in v.items()}


NATIVE_KUBECONFIG = "native"
# The native cluster's nodes are GPU-shaped and carry the GPU node taint (harness/clusters/k8s/gpu_shape.py),
# as GKE's, AKS's and the GPU operator's pools do: a job aimed at that cluster tolerates it, as any pod
# that may land on a GPU node must, so the built-in config runs there with no file to write.
NATIVE_NODE_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)


class Kubernetes(_Model):
    # "native": this machine's native cluster (`poc cluster up --k8s`); a path; or null: $KUBECONFIG,
    # then ~/.kube/config (as kubectl)
    kubeconfig: str | None = NATIVE_KUBECONFIG
    context: str | None = None
    namespace: str = "poc"
    local_queue: str = "poc-queue"
    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    max_restarts: int = Field(3, ge=0)
    toleration_seconds: int = Field(30, ge=0)
    checkpoint_host_path: str | None = None
    checkpoint_pvc: str | None = None
    pod: PodPlacement = Field(default_factory=PodPlacement)
    # Kueue topology-aware scheduling: a node label naming the topology level the pods must (or should)
    # share, e.g. cloud.provider.com/topology-block
    topology_required: str | None = None
    topology_preferred: str | None = None
    # cluster-scoped reads (CRDs, ClusterQueues, Nodes) in the generated RBAC; preflight works without them
    create_cluster_role: bool = False
    # the API server's audit log, a file readable on this machine (docs/audit.md); null: the native
    # cluster's own log with kubeconfig native, else none (a namespace-scoped user cannot read it)
    audit_log: str | None = None

    @property
    def native(self) -> bool:
        return self.kubeconfig == NATIVE_KUBECONFIG

    @property
    def tolerations(self) -> list[dict]:
        """What the job's pods tolerate besides the harness's own: the user's, then what the native
        cluster's nodes need (a cluster elsewhere gets exactly what the config says)."""
        user = [dict(t) for t in self.pod.tolerations]
        lab = [dict(t) for t in NATIVE_NODE_TOLERATIONS if self.native and t not in user]
        return user + lab

    @field_validator("topology_required", "topology_preferred")
    @classmethod
    def _topology(cls, v: str | None) -> str | None:
        if v is not None and not _K8S_LABEL_KEY.match(v):
            raise ValueError("must be a node label key, e.g. cloud.provider.com/topology-block")
        return v

    @model_validator(mode="after")
    def _cross(self) -> Kubernetes:
        if self.topology_required and self.topology_preferred:
            raise ValueError("set topology_required or topology_preferred, not both")
        if self.image is None and not self.native:
            raise ValueError("must be set for a cluster other than this machine's native one "
                             "(the locally built worker image is CPU-only and not in any registry)")
        return self

    @field_validator("namespace", "local_queue", "checkpoint_pvc")
    @classmethod
    def _dns(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", v):
            raise ValueError("must be a DNS label: lower-case letters, digits and '-', at most 63")
        return v

    _image = field_validator("image")(_image_reference)


class SlurmRest(_Model):
    """slurm.transport rest: slurmrestd's OpenAPI with a JWT (`scontrol token`), no shell for the scheduler."""
    url: str | None = None               # e.g. https://slurmrestd.example.org:6820; null: the local Docker cluster's
    api_version: str | None = None       # e.g. v0.0.41; null: the newest the server and the harness both speak
    token_env: str = "SLURM_JWT"         # the environment variable that holds the token
    token_file: str | None = None        # or a file holding it (read at start, never stored)
    user: str | None = None              # X-SLURM-USER-NAME; null: slurm.user
    files: Literal["ssh", "mount"] = "ssh"   # how the run directory is reached: the ssh settings, or a mount here
    mount: str | None = None             # with files: mount, where slurm.workdir is mounted on this machine
    ca_file: str | None = None           # a PEM bundle that signs slurmrestd's certificate; null: the system's
    # the JWT travels in every request's headers: a plain http:// url is refused unless this says so
    allow_insecure_http: bool = False

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~/-]*)?", v):
            raise ValueError("must be an http(s) URL like https://slurmrestd.example.org:6820")
        return v

    @field_validator("api_version")
    @classmethod
    def _ver(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"v\d+\.\d+\.\d+", v):
            raise ValueError("must look like v0.0.41")
        return v

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, v: str) -> str:
        if not _ENV_NAME.match(v):
            raise ValueError("must be an environment variable name")
        return v

    @model_validator(mode="after")
    def _mount(self) -> SlurmRest:
        if self.files == "mount" and not self.mount:
            raise ValueError("files: mount needs slurm.rest.mount (where slurm.workdir is mounted here)")
        return self

    @model_validator(mode="after")
    def _tls(self) -> SlurmRest:
        if self.url and self.url.startswith("http://") and not self.allow_insecure_http:
            raise ValueError(f"url {self.url} is plain http: the JWT would cross the network readable by anyone "
                             "on the path; use https:// (with slurm.rest.ca_file for a private CA), or set "
                             "slurm.rest.allow_insecure_http: true for a slurmrestd only this machine reaches")
        if self.ca_file and self.url and self.url.startswith("http://"):
            raise ValueError("ca_file is for an https:// url; this url is plain http")
        return self


# pyslurm links against libslurm and must match the cluster's Slurm release exactly; PyPI has 25.11 only and
# this project's Slurm is 24.11, so a pyslurm transport could not be tested here and is refused by name.
PYSLURM_REFUSED = ("pyslurm is not supported: it must match the cluster's Slurm release exactly, and PyPI has "
                   "pyslurm 25.11 only while this project is tested against Slurm 24.11")


class Slurm(_Model):
    transport: Literal["local", "ssh", "rest"] = "ssh"
    connection_file: str | None = None
    host: str | None = None
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    key_file: str | None = None
    known_hosts: str | None = None
    accept_unknown_host: bool = False
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: str = "00:15:00"
    workdir: str = "/shared/poc"
    python: str = "python3"
    container: Literal["none", "pyxis", "apptainer"] = "none"
    container_image: str | None = None
    max_restarts: int = Field(3, ge=0)
    extra_sbatch: list[str] = Field(default_factory=list)
    reservation: str | None = None
    constraint: str | None = None        # --constraint, a feature expression like "a100&ib"
    gpu_type: str | None = None          # --gpus-per-node=TYPE:N, as in the cluster's gres.conf
    gres: list[str] = Field(default_factory=list)       # more generic resources, e.g. nvme:1
    switches: str | None = None          # --switches=N[@max-wait], e.g. "1@00:10:00"
    modules: list[str] = Field(default_factory=list)    # `module load`, in order, before torchrun
    venv: str | None = None              # a virtualenv on the cluster, activated before torchrun
    setup_script: str | None = None      # a bash file on the cluster, sourced before torchrun
    # where checkpoints go (a parallel file system, say); null: the run directory's ckpt/
    checkpoint_dir: str | None = None
    # slurmctld's log, read through the transport when this user may (docs/audit.md); null: the local
    # Slurm-in-Docker's own log on the project's cluster, else none
    controller_log: str | None = None
    # read when it exists: Host alias, HostName, User, Port, IdentityFile, ProxyJump
    ssh_config: str | None = "~/.ssh/config"
    proxy_jump: str | None = None        # [user@]host[:port][,...], as ssh -J
    rest: SlurmRest = Field(default_factory=SlurmRest)

    @field_validator("transport", mode="before")
    @classmethod
    def _no_pyslurm(cls, v: object) -> object:
        if isinstance(v, str) and v.strip().lower() == "pyslurm":
            raise PydanticCustomError("pyslurm_transport", PYSLURM_REFUSED)
        return v

    @field_validator("reservation", "gpu_type")
    @classmethod
    def _word(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_.+-]{1,128}", v):
            raise ValueError("may hold letters, digits and _ . + - only")
        return v

    @field_validator("constraint")
    @classmethod
    def _constraint(cls, v: str | None) -> str | None:
        if v is not None and not _SLURM_CONSTRAINT.match(v):
            raise ValueError("must be a Slurm feature expression (letters, digits, _ . & | , [ ] ( ) * ! : -)")
        return v

    @field_validator("gres")
    @classmethod
    def _words(cls, v: list[str]) -> list[str]:
        for item in v:
            if not _SLURM_WORD.match(item):
                raise ValueError(f"{item!r} may hold letters, digits and _ . + : @ % - only")
        return v

    @field_validator("modules")
    @classmethod
    def _modules(cls, v: list[str]) -> list[str]:
        for item in v:   # module names are NAME/VERSION; a leading '-' would be an option of `module load`
            if not re.fullmatch(r"[A-Za-z0-9_.+:@%][A-Za-z0-9_.+:@%/-]{0,127}", item):
                raise ValueError(f"{item!r} must be a module name like cuda/12.4 (letters, digits, _ . + : @ % / -, "
                                 "not starting with -)")
        return v

    @field_validator("switches")
    @classmethod
    def _switches(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"\d+(@(\d+-)?\d{1,2}(:\d{2}){0,2})?", str(v)):
            raise ValueError("must be a count, optionally with a maximum wait: 1 or 1@00:10:00")
        return None if v is None else str(v)

    @field_validator("venv", "setup_script", "checkpoint_dir", "controller_log")
    @classmethod
    def _cluster_path(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_./~+-]+", v):
            raise ValueError("must be a plain path (letters, digits, _ . / ~ + -)")
        return v

    @field_validator("proxy_jump")
    @classmethod
    def _jump(cls, v: str | None) -> str | None:
        hop = r"([A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*(:\d{1,5})?"
        if v is not None and not re.fullmatch(rf"{hop}(,{hop})*", v):
            raise ValueError("must be [user@]host[:port], or several joined by ',' (jumped in order), as ssh -J")
        return v

    @field_validator("partition", "account", "qos")
    @classmethod
    def _ident(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_.+-]{1,64}", v):
            raise ValueError("may hold letters, digits and _ . + - only")
        return v

    @field_validator("time_limit")
    @classmethod
    def _time(cls, v: str) -> str:
        if not re.fullmatch(r"(\d+-)?\d{1,2}(:\d{2}){0,2}|\d+", v):
            raise ValueError("must be a Slurm time like 00:15:00, 90 or 1-00:00:00")
        return v

    @field_validator("workdir", "python")
    @classmethod
    def _path(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_./~+-]+", v):
            raise ValueError("must be a plain path (letters, digits, _ . / ~ + -)")
        return v

    @field_validator("extra_sbatch")
    @classmethod
    def _extra(cls, v: list[str]) -> list[str]:
        for item in v:
            why = config_sbatch.problem(item)
            if why:
                raise ValueError(why)
        return v

    @field_validator("container_image")
    @classmethod
    def _container_image(cls, v: str | None, info: ValidationInfo) -> str | None:
        problem = imageref.slurm_image_problem(info.data.get("container", "none"), v)
        if problem:
            raise PydanticCustomError("slurm_image", "{value} {problem}", {"value": repr(v), "problem": problem})
        return v

    @model_validator(mode="after")
    def _container(self) -> Slurm:
        if self.container != "none" and not self.container_image:
            raise ValueError(f"container {self.container!r} needs slurm.container_image")
        return self
