"""JobSpec + the kubernetes config section -> JobSet, ConfigMap and Kueue objects (pure).

Pure like the sbatch renderer: no cluster, no clock; the only file read is the workload
script, which travels to the pods in a ConfigMap (so any image with torch runs it and a
changed workload needs no image rebuild).

What the pods run: one ``torchrun`` per pod (``python3 -m torch.distributed.run``), c10d
rendezvous at the first pod's DNS name ``<jobset>-w-0-0.<jobset>:<port>`` (JobSet's headless
service, ``enableDNSHostnames`` and ``publishNotReadyAddresses``). torchrun does not restart
(spec.TORCHRUN_RESTARTS k8s = 0): a failed rank fails its pod, its Job (backoffLimit 0), and
JobSet's failurePolicy recreates every pod with the next restart attempt, which the pods read
through the downward API (annotation ``jobset.sigs.k8s.io/restart-attempt`` ->
``JOBSET_RESTART_ATTEMPT``, the workload's outermost attempt counter).

Object order in ``K8sJob.objects`` is apply order. Cluster setup (namespace, Kueue queues,
RBAC) is separate: ``setup_objects``; it is created once per cluster, not per run.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

import yaml

from ..config import Kubernetes
from ..errors import ConfigError
from ..imageref import FORM, reference_problem
from ..spec import WORKLOAD_SCRIPT, JobSpec
from .local import workload_script

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RESTART_ANNOTATION = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "w"                      # short: pod host names are <jobset>-w-0-<i>, at most 63 characters
CONTAINER = "torchrun"
WORKLOAD_DIR = "/opt/poc"                 # the ConfigMap's mount
CKPT_MOUNT = "/poc-run"                   # the run's checkpoint volume: ckpt/ and events/ under it
RESOURCE_FLAVOR = "poc-default"
CLUSTER_QUEUE = "poc-cluster-queue"
HARNESS_ROLE = "poc-harness"
GPU_RESOURCE = "nvidia.com/gpu"
POD_ENV = {
    # the pod's one interface (the CNI bridge plugin's veth): gloo must not pick loopback
    "GLOO_SOCKET_IFNAME": "eth0",
}
_RUN_ID = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_HOSTNAME_MAX = 63


@dataclass(frozen=True)
class K8sJob:
    """What submit() creates, in order, plus the names observe/inject/cancel need."""
    name: str                      # JobSet name (= run id), also its headless service / subdomain
    namespace: str
    objects: tuple[dict, ...]      # ConfigMap, JobSet
    rdzv_endpoint: str
    checkpoint_path: str           # hostPath on the nodes (local cluster) ...
    checkpoint_pvc: str | None     # ... or a PersistentVolumeClaim (real clusters)
    workload_sha256: str

    @property
    def jobset(self) -> dict:
        return self.objects[-1]

    @property
    def configmap(self) -> dict:
        return self.objects[0]


@lru_cache(maxsize=1)
def _workload_text() -> str:
    return workload_script().read_text(encoding="utf-8")


def check(spec: JobSpec, image: str | None) -> None:
    """What render_jobset refuses; `poc validate` runs it on every planned run (render/validate.py).
    image None: the harness's own worker image, whose ref it computes."""
    if not _RUN_ID.match(spec.run_id):
        raise ConfigError(f"run id {spec.run_id!r} is not a Kubernetes name",
                          "run ids are lower-case letters, digits and '-'")
    host = f"{spec.run_id}-{REPLICATED_JOB}-0-{spec.nodes - 1}"
    if len(host) > _HOSTNAME_MAX:
        raise ConfigError(f"pod host name {host!r} is longer than {_HOSTNAME_MAX} characters",
                          "use a shorter campaign or run id")
    problem = None if image is None else reference_problem(image)
    if problem:
        raise ConfigError(f"kubernetes.image {image!r} {problem}",
                          f"an image reference is {FORM}, e.g. registry.example.com/team/torch:2.4")
    if not 1 <= spec.rdzv_port <= 65535:
        raise ConfigError(f"rendezvous port {spec.rdzv_port} is out of range")


def rdzv_endpoint(spec: JobSpec) -> str:
    """The first pod's DNS name (JobSet: <jobset>-<rjob>-<job index>-<pod index>.<subdomain>)."""
    return f"{spec.run_id}-{REPLICATED_JOB}-0-0.{spec.run_id}:{spec.rdzv_port}"


def labels(spec: JobSpec) -> dict[str, str]:
    out = {k: v for k, v in spec.labels}
    out["poc/platform"] = spec.platform
    out["poc/scenario"] = spec.scenario.replace("_", "-")
    return out


def resources(spec: JobSpec) -> dict:
    req = {"cpu": str(spec.cpus_per_node), "memory": f"{spec.memory_mb}Mi"}
    if spec.gpus_per_node:
        req[GPU_RESOURCE] = str(spec.gpus_per_node)
    # limits = requests: the pod gets what Kueue counted, no more (Guaranteed QoS)
    return {"requests": dict(req), "limits": dict(req)}


def container_command(spec: JobSpec) -> list[str]:
    script = f"{WORKLOAD_DIR}/{WORKLOAD_SCRIPT}"
    return ["python3", "-m", "torch.distributed.run", *spec.torchrun_args(rdzv_endpoint(spec)),
            script, *spec.workload_args(f"{CKPT_MOUNT}/ckpt", f"{CKPT_MOUNT}/events")]


def checkpoint_volume(spec: JobSpec, k: Kubernetes, host_root: str, pvc: str | None) -> tuple[dict, dict, str]:
    """(volume, volumeMount, path): a PVC sub-path per run on real clusters, a hostPath per run locally."""
    sub = f"{spec.campaign}/{spec.run_id}"
    if pvc:
        return ({"name": "run", "persistentVolumeClaim": {"claimName": pvc}},
                {"name": "run", "mountPath": CKPT_MOUNT, "subPath": sub}, sub)
    path = f"{host_root.rstrip('/')}/{sub}"
    return ({"name": "run", "hostPath": {"path": path, "type": "DirectoryOrCreate"}},
            {"name": "run", "mountPath": CKPT_MOUNT}, path)


def render_jobset(spec: JobSpec, k: Kubernetes, image: str, checkpoint_root: str,
                  checkpoint_pvc: str | None = None, workload_text: str | None = None) -> K8sJob:
    """The run's ConfigMap and JobSet. checkpoint_root: hostPath root (ignored with a PVC)."""
    if not image:
        raise ConfigError("no container image for the pods", "set kubernetes.image")
    check(spec, image)
    text = _workload_text() if workload_text is None else workload_text
    sha = hashlib.sha256(text.encode()).hexdigest()
    name, ns = spec.run_id, k.namespace
    lab = labels(spec)
    cm_name = f"{name}-workload"
    configmap = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": cm_name, "namespace": ns, "labels": dict(lab),
                     "annotations": {"poc/workload-sha256": sha}},
        "data": {WORKLOAD_SCRIPT: text},
    }
    vol, mount, ckpt_path = checkpoint_volume(spec, k, checkpoint_root, checkpoint_pvc)
    env = [{"name": k_, "value": v} for k_, v in {**spec.launch_env(), **POD_ENV}.items()]
    env += [
        {"name": "POC_RUN_ID", "value": spec.run_id},
        {"name": "JOBSET_RESTART_ATTEMPT",
         "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{RESTART_ANNOTATION}']"}}},
    ]
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": int(k.toleration_seconds)}
                   for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
    pod_spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "enableServiceLinks": False,
        # one pod per node, as one torchrun agent per Slurm node: a lost node takes one rank
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}},
             "topologyKey": "kubernetes.io/hostname"}]}},
        "tolerations": tolerations,
        "containers": [{
            "name": CONTAINER,
            "image": image,
            "imagePullPolicy": k.image_pull_policy,
            "command": container_command(spec),
            "env": env,
            "ports": [{"name": "rdzv", "containerPort": int(spec.rdzv_port), "protocol": "TCP"}],
            "resources": resources(spec),
            "volumeMounts": [{"name": "workload", "mountPath": WORKLOAD_DIR, "readOnly": True}, mount,
                             {"name": "dshm", "mountPath": "/dev/shm"}],
        }],
        "volumes": [{"name": "workload", "configMap": {"name": cm_name}}, vol,
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
    }
    jobset = {
        "apiVersion": JOBSET_API, "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: k.local_queue, **lab},
                     "annotations": {"poc/workload-sha256": sha}},
        "spec": {
            "suspend": True,                 # Kueue admits it (unsuspends) when the quota fits
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": name},
            "failurePolicy": {"maxRestarts": int(spec.max_restarts), "restartStrategy": "Recreate"},
            "successPolicy": {"operator": "All"},
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {
                    "metadata": {"labels": dict(lab)},
                    "spec": {
                        "parallelism": spec.nodes,
                        "completions": spec.nodes,
                        "completionMode": "Indexed",
                        "backoffLimit": 0,       # a failed rank fails the Job; JobSet restarts the set
                        "template": {"metadata": {"labels": dict(lab)}, "spec": pod_spec},
                    },
                },
            }],
        },
    }
    return K8sJob(name=name, namespace=ns, objects=(configmap, jobset), rdzv_endpoint=rdzv_endpoint(spec),
                  checkpoint_path=ckpt_path, checkpoint_pvc=checkpoint_pvc, workload_sha256=sha)


# ------------------------------------------------------------------ cluster setup (once per cluster)

def quota(spec: JobSpec, jobs: int = 1) -> dict[str, str]:
    """ClusterQueue nominal quota that fits `jobs` copies of the job (1: a second submission waits)."""
    q = {"cpu": str(spec.cpus_per_node * spec.nodes * jobs),
         "memory": f"{spec.memory_mb * spec.nodes * jobs}Mi",
         GPU_RESOURCE: str(spec.gpus_per_node * spec.nodes * jobs)}
    return q


def kueue_objects(spec: JobSpec, k: Kubernetes, jobs: int = 1, cluster_queue: str = CLUSTER_QUEUE) -> list[dict]:
    q = quota(spec, jobs)
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": RESOURCE_FLAVOR}, "spec": {}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
         "spec": {"namespaceSelector": {},
                  "queueingStrategy": "BestEffortFIFO",
                  "resourceGroups": [{
                      "coveredResources": list(q),
                      "flavors": [{"name": RESOURCE_FLAVOR,
                                   "resources": [{"name": r, "nominalQuota": v} for r, v in q.items()]}]}]}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": k.local_queue, "namespace": k.namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ]


def rbac_objects(k: Kubernetes) -> list[dict]:
    """Exactly what the harness does in its namespace, and the cluster-wide reads/writes of preflight
    and the node faults. Bind the Role to the identity the harness runs as."""
    ns = k.namespace
    role_rules = [
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
         "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get", "list"]},
    ]
    cluster_rules = [
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},  # lose_node: cordon, taint
    ]
    subject = [{"kind": "ServiceAccount", "name": HARNESS_ROLE, "namespace": ns}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": HARNESS_ROLE, "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": HARNESS_ROLE, "namespace": ns}, "rules": role_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": HARNESS_ROLE, "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": HARNESS_ROLE},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": HARNESS_ROLE},
         "rules": cluster_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{HARNESS_ROLE}-{ns}"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": HARNESS_ROLE},
         "subjects": subject},
    ]


def setup_objects(spec: JobSpec, k: Kubernetes, jobs: int = 1) -> list[dict]:
    """Namespace, Kueue queues and RBAC, in apply order."""
    return ([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": k.namespace}}]
            + kueue_objects(spec, k, jobs) + rbac_objects(k))


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the workload script) as literal blocks, so the YAML reads like the file."""


def _str(dumper: yaml.SafeDumper, s: str):
    if "\n" in s and not any(line != line.rstrip() for line in s.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", s)


_Dumper.add_representer(str, _str)


def to_yaml(objs) -> str:
    return yaml.dump_all(list(objs), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
