"""A trace's jobs and tenants -> the Kubernetes objects a scale replay creates (pure).

Each trace job is one JobSet: a gang of ``nodes`` pods (one Job, parallelism = completions = nodes),
each asking for the job's GPUs on one node, kept on distinct nodes by a required pod anti-affinity on
the host name, as ``sbatch -N nodes --gpus-per-node G`` places one task per node. A pod "runs" for
the job's ``runtime_s`` (KWOK's pod-complete delay annotation); ``limit_s`` (plus ``limit_grace_s``)
is the Job's activeDeadlineSeconds, which the Job controller enforces as Slurm enforces a time limit.

Each tenant is a LocalQueue in the replay's namespace, feeding its own ClusterQueue (or, with
``Target.one_queue``, one ClusterQueue for all: render/replay_policy.py names the pairs); the ClusterQueues
share one cohort, so a tenant with idle quota lends it and one with a backlog borrows it. How much
each tenant owns is the quota mapping (``TenantQuota``): the same numbers become Slurm fair-share
shares on the other side, and that mapping is what the multi-tenancy comparison compares.

Topology (``Target.topology``): with Kueue's topology-aware scheduling (TAS) the flavor names a Topology
of the nodes' block and rack labels over their host names, and each gang asks to be *preferably* inside
one block (``podset-preferred-topology``), as Slurm's topology/tree prefers the fewest switches without
requiring it. Without it, blocks are labels only and kube-scheduler spreads a gang wherever it fits.
The anti-affinity stays either way: TAS counts resources, and a gang of pods that each ask for part
of a node could otherwise be packed onto fewer nodes than Slurm's one task per node.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

from ..scale.trace import Trace, TraceJob
from . import replay_priority as rp
from .jobset import GPU_RESOURCE as GPU
from .jobset import JOBSET_API, JOBSET_NAME_LABEL, KUEUE_API, QUEUE_LABEL

# labels that carry the trace's own words onto the objects, so the raw records name the trace job
TRACE_JOB_LABEL = "poc.scale/job"
TENANT_LABEL = "poc.scale/tenant"
QOS_LABEL = "poc.scale/qos"
REPLAY_LABEL = "poc.scale/replay"
# where an emulated node sits (harness/clusters/k8s/kwok.py labels them): what placement is judged by
BLOCK_LABEL, RACK_LABEL = "poc.scale/block", "poc.scale/rack"
HOST_LABEL = "kubernetes.io/hostname"
# Kueue TAS: the lowest level must be the host name, or TAS ignores the nodes' taints (Kueue's docs)
TOPOLOGY_LEVELS = (BLOCK_LABEL, RACK_LABEL, HOST_LABEL)
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
TOPOLOGY_MODES = ("off", "preferred", "required")
TOPOLOGY_ANNOTATION = {"preferred": PREFERRED_TOPOLOGY, "required": "kueue.x-k8s.io/podset-required-topology"}
# KWOK's pod-complete stage reads this (a Go duration): harness/clusters/k8s/kwok.py plays it
DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
# requests that count against no quota but keep pods honest: the replay measures GPU scheduling
POD_CPU, POD_MEMORY = "1", "1Gi"
_NAME = re.compile(r"[^a-z0-9-]+")
ONE_QUEUE = "all-tenants"     # the ClusterQueue's tenant part when every tenant shares one


@dataclass(frozen=True)
class TenantQuota:
    """A tenant's guaranteed GPUs (Kueue nominalQuota; on Slurm its fair-share weight) and how many more
    it may borrow from the cohort (None: as many as lie idle)."""

    tenant: str
    gpus: int
    borrow_gpus: int | None = None


@dataclass(frozen=True)
class Target:
    """Where the replay's objects go and which nodes they may use."""

    namespace: str
    replay: str                       # this replay's name: a label on everything it creates
    node_labels: dict[str, str]       # the emulated nodes' labels (the ResourceFlavor's nodeLabels)
    tolerations: tuple[dict, ...]     # what the emulated nodes' taint needs
    cohort: str = "poc-replay"
    # added to each job's limit: its pods start a second or two after its Job does, so a job whose run
    # time equals its limit (as a timed-out job's does in sacct's history) would be killed before it
    # ends; Slurm too kills only after KillWait, 30 s by default. Kept at 30 s here however compressed the
    # replay: Kueue admits by quota, not by limits, and the delay it covers (the pod pipeline, up to minutes at
    # 1,000 nodes) does not compress. Slurm's side scales it (grace_for), since backfill plans with the limits
    limit_grace_s: int = 30
    # Kueue TAS for every gang: "preferred" / "required" inside one block, or "off"
    topology: str = "off"
    # render/replay_priority.py: "priority" gives each QOS class a WorkloadPriorityClass and the
    # ClusterQueues preemption of lower priorities; "off", no priorities and no preemption
    preemption: str = "off"
    classes: tuple[rp.ClassPriority, ...] = ()
    # the queue policy (render/replay_policy.py): each ClusterQueue's queueingStrategy, and whether every
    # tenant's LocalQueue feeds one ClusterQueue (one order for all) instead of a ClusterQueue each
    queueing: str = "BestEffortFIFO"
    one_queue: bool = False

    def __post_init__(self) -> None:
        if self.queueing not in ("BestEffortFIFO", "StrictFIFO"):
            raise ValueError(f"queueingStrategy {self.queueing!r}: BestEffortFIFO or StrictFIFO")
        if self.topology not in TOPOLOGY_MODES:
            raise ValueError(f"topology {self.topology!r}: one of {', '.join(TOPOLOGY_MODES)}")
        if self.preemption not in rp.PREEMPTION_MODES:
            raise ValueError(f"preemption {self.preemption!r}: one of {', '.join(rp.PREEMPTION_MODES)}")
        names = [priority_class_name(self, c.qos) for c in self.classes]
        if len(set(names)) < len(names):
            raise ValueError(f"QOS classes {[c.qos for c in self.classes]} do not make distinct priority class names")


GRACE_S = 30     # Slurm's default KillWait, the grace at real time


def grace_for(compression: float) -> int:
    """The limit grace of a replay compressed ``compression``-fold: 30 s scaled like the limits, never under
    2 s (a pod starts a second or two after its Job; a Slurm step after its allocation)."""
    return max(2, math.ceil(GRACE_S / max(compression, 1e-9)))


def topology_text(target: Target) -> str:
    """The topology setting, as the replay's settings record it."""
    if target.topology == "off":
        return "no topology-aware scheduling configured (Kueue TAS off): blocks are labels only"
    return (f"Kueue TAS: each gang {target.topology} inside one {BLOCK_LABEL} "
            f"({TOPOLOGY_ANNOTATION[target.topology]}); levels {', '.join(TOPOLOGY_LEVELS)}")


def equal_quotas(trace: Trace, total_gpus: int) -> list[TenantQuota]:
    """Every tenant of the trace owns the same share of the cluster's GPUs (the remainder to the first
    ones, in name order), and may borrow the rest: the default mapping, written down rather than implied."""
    tenants = sorted({j.tenant for j in trace.jobs})
    if not tenants:
        return []
    base, extra = divmod(total_gpus, len(tenants))
    return [TenantQuota(t, base + (1 if i < extra else 0)) for i, t in enumerate(tenants)]


def k8s_name(text: str, limit: int = 63) -> str:
    """A DNS-1123 label from a trace's free text: lower case, other characters as '-', at most `limit`."""
    s = _NAME.sub("-", text.lower()).strip("-")[:limit].strip("-")
    return s or "x"


def queue_name(tenant: str) -> str:
    return k8s_name(f"t-{tenant}")


def cluster_queue_name(target: Target, tenant: str) -> str:
    return k8s_name(f"{target.replay}-{tenant}")


def priority_class_name(target: Target, qos: str) -> str:
    return k8s_name(f"{target.replay}-{qos}")


def jobset_name(job: TraceJob) -> str:
    """``r-<id>``; an id that is not a short DNS label already gets a digest of itself, so two ids that
    clean up alike ("J_1", "j-1") stay two JobSets. At most 40 characters: the pods' host names are
    <jobset>-w-0-<index>-<hash> and must stay within 63."""
    plain = k8s_name(job.id, 38)
    if plain == job.id:
        return f"r-{plain}"
    return f"r-{plain[:29].strip('-')}-{hashlib.sha256(job.id.encode()).hexdigest()[:8]}"


def queue_objects(target: Target, quotas: list[TenantQuota]) -> list[dict]:
    """Namespace, the Topology (with TAS), a WorkloadPriorityClass per QOS class (with preemption),
    ResourceFlavor, then a ClusterQueue and a LocalQueue per tenant, in apply order."""
    label = {REPLAY_LABEL: target.replay}
    flavor = k8s_name(f"{target.replay}-nodes")
    spec: dict = {"nodeLabels": dict(target.node_labels), "tolerations": [dict(t) for t in target.tolerations]}
    objs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target.namespace, "labels": label}}]
    if target.topology != "off":
        spec["topologyName"] = flavor
        objs.append({"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": flavor, "labels": label},
                     "spec": {"levels": [{"nodeLabel": lv} for lv in TOPOLOGY_LEVELS]}})
    if target.preemption != "off":
        objs += [{"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
                  "metadata": {"name": priority_class_name(target, c.qos), "labels": label},
                  "value": c.priority, "description": f"QOS class {c.qos} of replay {target.replay}"}
                 for c in target.classes]
    objs.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": flavor, "labels": label},
                 "spec": spec})
    preemption = rp.cluster_queue_preemption(target.preemption)
    # one ClusterQueue holding every tenant's quota, or one per tenant: the queue order is per ClusterQueue
    queues = ([TenantQuota(ONE_QUEUE, sum(q.gpus for q in quotas),
                           None if any(q.borrow_gpus is None for q in quotas) else sum(q.borrow_gpus for q in quotas))]
              if target.one_queue and quotas else quotas)
    for q in queues:
        gpu = {"name": GPU, "nominalQuota": str(q.gpus)}
        if q.borrow_gpus is not None:
            gpu["borrowingLimit"] = str(q.borrow_gpus)
        # cpu and memory are covered (a pod asks for them) with quotas no replay reaches: GPUs are the measure
        resources = [{"name": "cpu", "nominalQuota": "100000"}, {"name": "memory", "nominalQuota": "1000Ti"}, gpu]
        cq = cluster_queue_name(target, q.tenant)
        cq_spec: dict = {"preemption": preemption} if preemption else {}
        objs.append({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cq, "labels": label},
                     "spec": {**cq_spec, "cohort": target.cohort,
                              "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": target.namespace}},
                              # BestEffortFIFO (Kueue's default) lets a newer workload that fits pass an older one
                              # that does not, and reserves nothing for the older one; StrictFIFO lets nothing pass
                              # the head. Slurm's backfill is neither: it passes the top job only where that does
                              # not delay the nodes it reserves for it (render/replay_policy.py)
                              "queueingStrategy": target.queueing,
                              "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU],
                                                  "flavors": [{"name": flavor, "resources": resources}]}]}})
    for q in quotas:
        cq = cluster_queue_name(target, ONE_QUEUE if target.one_queue else q.tenant)
        objs.append({"apiVersion": KUEUE_API, "kind": "LocalQueue",
                     "metadata": {"name": queue_name(q.tenant), "namespace": target.namespace, "labels": label},
                     "spec": {"clusterQueue": cq}})
    return objs


def jobset(job: TraceJob, target: Target) -> dict:
    """The trace job as a JobSet in its tenant's LocalQueue (created suspended by Kueue until admitted)."""
    name = jobset_name(job)
    labels = {REPLAY_LABEL: target.replay, TRACE_JOB_LABEL: k8s_name(job.id), TENANT_LABEL: k8s_name(job.tenant),
              QOS_LABEL: k8s_name(job.qos)}
    requests = {"cpu": POD_CPU, "memory": POD_MEMORY}
    if job.gpus_per_node:
        requests[GPU] = str(job.gpus_per_node)
    annotations = {DELAY_ANNOTATION: f"{job.runtime_s}s"}
    js_labels = {**labels, QUEUE_LABEL: queue_name(job.tenant)}
    if target.preemption != "off":
        js_labels[rp.PRIORITY_CLASS_LABEL] = priority_class_name(target, job.qos)
    if target.topology != "off":
        annotations[TOPOLOGY_ANNOTATION[target.topology]] = BLOCK_LABEL
    pod = {
        "metadata": {"labels": dict(labels), "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}},
                 "topologyKey": HOST_LABEL}]}},
            # the image is never pulled: the emulated nodes only play the pod's lifecycle
            "containers": [{"name": "job", "image": "emulated.invalid/replay:1",
                            "resources": {"requests": requests, "limits": {k: v for k, v in requests.items()
                                                                           if k == GPU}}}],
        },
    }
    spec = {"parallelism": job.nodes, "completions": job.nodes, "backoffLimit": 0,
            "activeDeadlineSeconds": job.limit_s + target.limit_grace_s, "template": pod}
    return {"apiVersion": JOBSET_API, "kind": "JobSet",
            "metadata": {"name": name, "namespace": target.namespace,
                         "labels": js_labels},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": spec}}]}}
