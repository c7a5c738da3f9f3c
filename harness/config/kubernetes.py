"""The kubernetes section (with kubernetes.pod): where the job's pods run and how they are placed.

Every value that reaches a rendered object is validated here, so a bad one is a config error with its
field path, not an API server's refusal halfway through a campaign.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import MAX_RESTARTS, Model, image_reference

_K8S_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$")
_K8S_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_K8S_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_CAPABILITY = re.compile(r"^[A-Z][A-Z0-9_]{1,40}$")
# a toleration's (and kubernetes.toleration_seconds') time on a node gone NotReady: Kubernetes' own
# default is 300 s; a day is the most a job should sit on a lost node
MAX_TOLERATION_S = 86400
_QUANTITY_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# /dev/shm: the largest GPU nodes hold a few TiB of memory
MAX_SHM_BYTES = 16 * 2**40
# keys the harness, JobSet, Kueue and the Job controller set on the pods, or read from them: a user's label
# or annotation there would change how the run is found, admitted or placed (render/jobset.py keeps the same
# list for what it renders)
RESERVED_PREFIXES = ("poc/", "jobset.sigs.k8s.io/", "kueue.x-k8s.io/", "batch.kubernetes.io/")
RESERVED_LABELS = ("job-name", "controller-uid")
TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology")


def quantity_value(text: str) -> float:
    """A Kubernetes quantity (1Gi, 500m, 4) as a number of units."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)", text)
    if not m or m.group(2) not in _QUANTITY_SUFFIX:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    return float(m.group(1)) * _QUANTITY_SUFFIX[m.group(2)]


class PodPlacement(Model):
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

    @field_validator("labels")
    @classmethod
    def _own_labels(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if k.startswith(RESERVED_PREFIXES) or k in RESERVED_LABELS:
                raise ValueError(f"{k!r} is a label the harness, JobSet or Kueue sets on the pods; use a key of "
                                 "your own prefix, e.g. team.example.com/project")
        return v

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not _K8S_LABEL_KEY.match(k):
                raise ValueError(f"{k!r} is not an annotation key ([prefix/]name)")
            if k in TOPOLOGY_ANNOTATIONS:
                raise ValueError(f"set {k!r} through kubernetes.topology_required / topology_preferred, e.g. "
                                 "topology_required: cloud.provider.com/topology-block")
            if k.startswith(RESERVED_PREFIXES):
                raise ValueError(f"{k!r} is an annotation the harness, JobSet or Kueue sets or reads on the pods "
                                 f"(keys under {', '.join(RESERVED_PREFIXES)} are theirs)")
            if not isinstance(val, str | int | float | bool) or "\0" in str(val):
                raise ValueError(f"{k}: an annotation's value is text without NUL")
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
            if t.get("key") not in (None, "") and not (isinstance(t["key"], str) and _K8S_LABEL_KEY.match(t["key"])):
                raise ValueError(f"toleration key {t.get('key')!r} is not a taint key ([prefix/]name)")
            if t.get("value") not in (None, "") and not (isinstance(t["value"], str)
                                                         and _K8S_LABEL_VALUE.match(t["value"])):
                raise ValueError(f"toleration value {t.get('value')!r} is not a taint value (up to 63 letters, "
                                 "digits, '-', '_', '.')")
            secs = t.get("tolerationSeconds")
            if secs is not None and (not isinstance(secs, int) or isinstance(secs, bool)
                                     or not 0 <= secs <= MAX_TOLERATION_S):
                raise ValueError(f"toleration tolerationSeconds {secs!r} is not a whole number of seconds from 0 "
                                 f"to {MAX_TOLERATION_S}")
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
        if not _K8S_QUANTITY.match(v) or quantity_value(v) > MAX_SHM_BYTES:
            raise ValueError("must be a Kubernetes quantity like 1Gi, 64Gi or 512Mi, at most 16Ti")
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
            if not _K8S_LABEL_KEY.match(k) or not _K8S_QUANTITY.match(str(val)) or quantity_value(str(val)) > 2**63:
                raise ValueError(f"{k}: {val!r} is not a resource name and quantity like rdma/ib: 1 (at most "
                                 "Kubernetes' 64-bit bound)")
        return {k: str(val) for k, val in v.items()}


NATIVE_KUBECONFIG = "native"
# The native cluster's nodes are GPU-shaped and carry the GPU node taint (harness/clusters/k8s/gpu_shape.py),
# as GKE's, AKS's and the GPU operator's pools do: a job aimed at that cluster tolerates it, as any pod
# that may land on a GPU node must, so the built-in config runs there with no file to write.
NATIVE_NODE_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)


class Kubernetes(Model):
    # "native": this machine's native cluster (`poc cluster up --k8s`); a path; or null: $KUBECONFIG,
    # then ~/.kube/config (as kubectl)
    kubeconfig: str | None = NATIVE_KUBECONFIG
    context: str | None = None
    namespace: str = "poc"
    local_queue: str = "poc-queue"
    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    max_restarts: int = Field(3, ge=0, le=MAX_RESTARTS)
    toleration_seconds: int = Field(30, ge=0, le=MAX_TOLERATION_S)
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

    @field_validator("checkpoint_host_path")
    @classmethod
    def _host_path(cls, v: str | None) -> str | None:
        # expanded on this machine (~, $VARS) for the native cluster, else a path on every node
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_./~${}+-]{1,1024}", v):
            raise ValueError("must be a plain path (letters, digits, _ . / ~ $ { } + -)")
        return v

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

    _image = field_validator("image")(image_reference)
