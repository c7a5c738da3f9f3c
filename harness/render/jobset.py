"""JobSpec + the kubernetes config section -> JobSet, ConfigMap and Kueue objects (pure).

Pure like the sbatch renderer: no cluster, no clock; the only file read is the workload
script, which travels to the pods in a ConfigMap (so any image with torch runs it and a
changed workload needs no image rebuild).

What the pods run: one ``torchrun`` per pod (``python3 -m torch.distributed.run``), c10d
rendezvous at the first pod's DNS name ``<jobset>-w-0-0.<jobset>:<port>`` (JobSet's headless
service, ``enableDNSHostnames`` and ``publishNotReadyAddresses``), the first pod told that it hosts
the store (POD_NETWORK_LAUNCH). torchrun does not restart
(spec.TORCHRUN_RESTARTS k8s = 0): a failed rank fails its pod, its Job (backoffLimit 0), and
JobSet's failurePolicy recreates every pod with the next restart attempt, which the pods read
through the downward API (annotation ``jobset.sigs.k8s.io/restart-attempt`` ->
``JOBSET_RESTART_ATTEMPT``, the workload's outermost attempt counter).

Object order in ``K8sJob.objects`` is apply order. Cluster setup (namespace, Kueue queues,
RBAC) is separate: ``setup_objects``; it is created once per cluster, not per run.
"""
from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

import yaml

from ..config import Kubernetes
from ..errors import ConfigError
from ..imageref import FORM, reference_problem
from ..spec import WORKLOAD_SCRIPT, JobSpec, campaign_dir
from .gloo_ifname import with_gloo_default
from .local import workload_script
from .owned_dir import OWNER_MARK
from .rbac import HARNESS_ROLE, rbac_note, rbac_objects  # noqa: F401 - part of this module's interface

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
GPU_RESOURCE = "nvidia.com/gpu"
POD_ENV = {
    # the pod network's one interface (the CNI's veth): gloo must not pick loopback. Not with
    # hostNetwork, where the host's interfaces are the pod's: there fabric.env names one, or gloo
    # picks the hostname's address
    "GLOO_SOCKET_IFNAME": "eth0",
}
TOPOLOGY_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TOPOLOGY_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
# label and annotation prefixes the harness, JobSet, Kueue and the Job controller set on the pods:
# a user's pod label or annotation may not replace them (the harness finds its pods by them)
RESERVED_PREFIXES = ("poc/", "jobset.sigs.k8s.io/", "kueue.x-k8s.io/", "batch.kubernetes.io/")
RESERVED_LABELS = ("job-name", "controller-uid")
AFFINITY_KINDS = ("nodeAffinity", "podAffinity", "podAntiAffinity")
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
    if not spec.entrypoint.strip():
        raise ConfigError("the entrypoint is empty", "name the script to run, e.g. ddp_train.py")


def check_placement(k: Kubernetes) -> None:
    """What kubernetes.pod may not say: labels the harness's own selectors use, resources the
    harness requests itself, affinity kinds Kubernetes does not know."""
    pod = k.pod
    for key in pod.labels:
        if key.startswith(RESERVED_PREFIXES) or key in RESERVED_LABELS:
            raise ConfigError(f"kubernetes.pod.labels: {key!r} is a label the harness, JobSet or Kueue sets "
                              "on the pods", "use a label key of your own prefix, e.g. team.example.com/project")
    topo = {TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED}
    for key in pod.annotations:
        if key in topo:
            raise ConfigError(f"kubernetes.pod.annotations: set {key!r} through kubernetes.topology_required / "
                              "topology_preferred", "e.g. topology_required: cloud.provider.com/topology-block")
        if key.startswith(("poc/", "jobset.sigs.k8s.io/")):
            raise ConfigError(f"kubernetes.pod.annotations: {key!r} is an annotation the harness or JobSet sets")
    for r in pod.extra_resources:
        if r in ("cpu", "memory", GPU_RESOURCE):
            raise ConfigError(f"kubernetes.pod.extra_resources: {r!r} is set from resources "
                              "(cpus_per_node, memory_mb, gpus_per_node)", f"remove {r} from extra_resources")
    unknown = set(pod.affinity or {}) - set(AFFINITY_KINDS)
    if unknown:
        raise ConfigError(f"kubernetes.pod.affinity: unknown keys {sorted(unknown)}",
                          f"a pod affinity has {', '.join(AFFINITY_KINDS)}")


def rdzv_endpoint(spec: JobSpec) -> str:
    """The first pod's DNS name (JobSet: <jobset>-<rjob>-<job index>-<pod index>.<subdomain>)."""
    return f"{spec.run_id}-{REPLICATED_JOB}-0-0.{spec.run_id}:{spec.rdzv_port}"


OWNER_LABEL = "poc/owner"
# what an owner id looks like (harness/owner.py: 16 hex; 8 in campaigns of an older harness): it goes into
# labels and label selectors, so nothing else is ever pasted into one
OWNER_ID = re.compile(r"^[0-9a-f]{1,63}$")


def labels(spec: JobSpec) -> dict[str, str]:
    """Every object the run makes carries these; poc/owner (the campaign's public owner id, harness/owner.py)
    is what the harness's deletes, selectors and cleanups require (backends/k8s/ownership.py)."""
    out = {k: v for k, v in spec.labels}
    out["poc/platform"] = spec.platform
    if spec.owner:
        if not OWNER_ID.match(spec.owner):
            raise ConfigError(f"owner id {spec.owner[:80]!r} is not an owner id (hex digits)",
                              "the campaign's owner id comes from its .owner-key (harness/owner.py)")
        out[OWNER_LABEL] = spec.owner
    # a label value allows no ':' ("drill:restart" -> "drill-restart")
    out["poc/scenario"] = re.sub(r"[^A-Za-z0-9.-]+", "-", spec.scenario.replace("_", "-"))
    return out


def resources(spec: JobSpec, extra: dict[str, str] | None = None) -> dict:
    req = {"cpu": str(spec.cpus_per_node), "memory": f"{spec.memory_mb}Mi"}
    if spec.gpus_per_node:
        req[GPU_RESOURCE] = str(spec.gpus_per_node)
    req.update(extra or {})     # device plugins' resources (rdma/ib, ...): integers, requests = limits
    if spec.caps == "requests":   # reserved, not confined, as on a Slurm cluster that confines no task
        return {"requests": dict(req), "limits": {k: v for k, v in req.items() if k not in ("cpu", "memory")}}
    # limits = requests: the pod gets what Kueue counted, no more (Guaranteed QoS)
    return {"requests": dict(req), "limits": dict(req)}


# torchrun decides by itself whether it hosts the c10d store: it resolves the rendezvous endpoint's name
# and compares the addresses with its own. Until the headless service's DNS record of the first pod exists
# that lookup fails, the first pod decides it is not the host, and every agent waits for a store nobody
# serves (measured on the native cluster: both pods timed out connecting to <jobset>-w-0-0.<jobset>:29500
# and the JobSet restarted, 2 of ~20 runs right after another run). With hostNetwork a pod's host name is
# its node's, so the first pod never matches. The first pod (Indexed Job completion index 0) is therefore
# told it hosts the store (rdzv_conf is_host), and with hostNetwork every agent advertises its pod IP (=
# its node's address) instead of a host name other nodes may not resolve. Constant scripts: the arguments
# arrive as "$@".
_IS_HOST = 'if [ "${JOB_COMPLETION_INDEX:-0}" = 0 ]; then host=1; else host=0; fi; '
POD_NETWORK_LAUNCH = _IS_HOST + 'exec python3 -m torch.distributed.run --rdzv_conf="is_host=$host" "$@"'
HOST_NETWORK_LAUNCH = (_IS_HOST + 'exec python3 -m torch.distributed.run --rdzv_conf="is_host=$host" '
                       '--local_addr="$POC_POD_IP" "$@"')


def entrypoint_path(spec: JobSpec) -> str:
    """The script the launch line names: spec.entrypoint, relative to the ConfigMap's mount (where
    the workload is shipped as WORKLOAD_SCRIPT) unless absolute. A typo stays a typo: python says so."""
    return spec.entrypoint if spec.entrypoint.startswith("/") else f"{WORKLOAD_DIR}/{spec.entrypoint}"


def container_command(spec: JobSpec, host_network: bool = False) -> list[str]:
    script = entrypoint_path(spec)
    args = [*spec.torchrun_args(rdzv_endpoint(spec)), script,
            # the run's pods write the owner mark: only a pod reaches a claim, and the cleanup pod checks it
            *spec.workload_args(f"{CKPT_MOUNT}/ckpt", f"{CKPT_MOUNT}/events", f"{CKPT_MOUNT}/{OWNER_MARK}")]
    return ["sh", "-c", HOST_NETWORK_LAUNCH if host_network else POD_NETWORK_LAUNCH, "torchrun", *args]


def checkpoint_volume(spec: JobSpec, k: Kubernetes, host_root: str, pvc: str | None) -> tuple[dict, dict, str]:
    """(volume, volumeMount, path): a PVC sub-path per run on real clusters, a hostPath per run locally,
    both <campaign>-<token>/<run_id> in a campaign (spec.campaign_dir)."""
    sub = f"{campaign_dir(spec.campaign, spec.owner)}/{spec.run_id}"
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
    check_placement(k)
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
    pod = k.pod
    # fabric.env (in launch_env) wins over the harness's pod-network default; with hostNetwork, where the
    # pod inherits the host's /etc/hosts (its name perhaps at 127.0.1.1), gloo takes NCCL's interface
    # (render/gloo_ifname.py)
    launch = with_gloo_default(spec.launch_env()) if pod.host_network else {**POD_ENV, **spec.launch_env()}
    env = [{"name": k_, "value": v} for k_, v in launch.items()]
    env += [
        {"name": "POC_RUN_ID", "value": spec.run_id},
        {"name": "JOBSET_RESTART_ATTEMPT",
         "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{RESTART_ANNOTATION}']"}}},
        # the node as Kubernetes names it (a pod's host name is its own): what a calibration refusal names
        {"name": "POC_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    if pod.host_network:
        env.append({"name": "POC_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    container = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": k.image_pull_policy,
        "command": container_command(spec, pod.host_network),
        "env": env,
        # with hostNetwork the rendezvous port is a host port: the scheduler keeps two such pods off a node
        "ports": [{"name": "rdzv", "containerPort": int(spec.rdzv_port), "protocol": "TCP"}],
        "resources": resources(spec, pod.extra_resources),
        "volumeMounts": [{"name": "workload", "mountPath": WORKLOAD_DIR, "readOnly": True}, mount,
                         {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if pod.capabilities:
        container["securityContext"] = {"capabilities": {"add": list(pod.capabilities)}}
    pod_spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "enableServiceLinks": False,
        "affinity": affinity(name, pod.affinity, spec.exclusive),
        "tolerations": tolerations(k),
        "containers": [container],
        "volumes": [{"name": "workload", "configMap": {"name": cm_name}}, vol,
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": pod.shm_size}}],
    }
    pod_spec.update(placement(pod))
    if pod.host_network:
        # the pod's DNS stays the cluster's (rank 0 is found by its JobSet host name, whose record
        # the headless service still publishes, at the node's address)
        pod_spec["hostNetwork"] = True
        pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    pod_meta: dict = {"labels": {**pod.labels, **lab}}
    annotations = dict(pod.annotations)
    if k.topology_required:
        annotations[TOPOLOGY_REQUIRED] = k.topology_required
    if k.topology_preferred:
        annotations[TOPOLOGY_PREFERRED] = k.topology_preferred
    if annotations:
        pod_meta["annotations"] = annotations
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
                        "template": {"metadata": pod_meta, "spec": pod_spec},
                    },
                },
            }],
        },
    }
    return K8sJob(name=name, namespace=ns, objects=(configmap, jobset), rdzv_endpoint=rdzv_endpoint(spec),
                  checkpoint_path=ckpt_path, checkpoint_pvc=checkpoint_pvc, workload_sha256=sha)


def placement(pod) -> dict:
    """The pod-spec fields of kubernetes.pod that every pod the harness makes carries (the run's pods,
    the PVC cleanup pod): where it may run, at what priority, as whom, pulling with which secrets."""
    out: dict = {}
    if pod.node_selector:
        out["nodeSelector"] = dict(pod.node_selector)
    if pod.priority_class:
        out["priorityClassName"] = pod.priority_class
    if pod.service_account:
        out["serviceAccountName"] = pod.service_account
    if pod.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": n} for n in pod.image_pull_secrets]
    return out


def tolerations(k: Kubernetes) -> list[dict]:
    """The harness's own (a lost node's pods are evicted after toleration_seconds), then the user's
    (with the native cluster's GPU taint when the job targets it)."""
    own = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int(k.toleration_seconds)}
           for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
    return own + k.tolerations


def affinity(name: str, user: dict | None, exclusive: bool = False) -> dict:
    """One pod per node (one torchrun agent per node, as on Slurm: a lost node takes one rank), merged
    with the user's affinity: their nodeAffinity and podAffinity as written, their podAntiAffinity
    terms after the harness's. exclusive: no other JobSet's pod on the run's nodes either (required
    anti-affinity holds both ways: the scheduler keeps theirs off ours too), as Slurm's --exclusive;
    a pod outside any JobSet can still land where the node has room."""
    terms = [{"labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}}, "topologyKey": "kubernetes.io/hostname"}]
    if exclusive:
        terms.append({"labelSelector": {"matchExpressions": [
            {"key": JOBSET_NAME_LABEL, "operator": "Exists"},
            {"key": JOBSET_NAME_LABEL, "operator": "NotIn", "values": [name]}]},
            "topologyKey": "kubernetes.io/hostname"})
    own = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    out = {key: copy.deepcopy(v) for key, v in (user or {}).items() if key != "podAntiAffinity"}
    anti = copy.deepcopy((user or {}).get("podAntiAffinity") or {})
    for key, terms in own.items():
        anti[key] = terms + list(anti.get(key) or [])
    out["podAntiAffinity"] = anti
    return out


# ------------------------------------------------------------------ cluster setup (once per cluster)

def _times(v: str, n: int) -> str:
    """A quantity times n (extra resources are counts: "1", "2", or a number with a suffix)."""
    num = v.rstrip("kKMGTPEimu")
    suffix = v[len(num):]
    try:
        x = float(num) * n
    except ValueError:
        raise ConfigError(f"resource quantity {v!r} cannot be multiplied for the queue's quota") from None
    return f"{int(x) if x == int(x) else x}{suffix}"


def quota(spec: JobSpec, jobs: int = 1, extra: dict[str, str] | None = None) -> dict[str, str]:
    """ClusterQueue nominal quota that fits `jobs` copies of the job (1: a second submission waits).
    Every resource a pod requests must be covered, or Kueue never admits the job."""
    q = {"cpu": str(spec.cpus_per_node * spec.nodes * jobs),
         "memory": f"{spec.memory_mb * spec.nodes * jobs}Mi",
         GPU_RESOURCE: str(spec.gpus_per_node * spec.nodes * jobs)}
    for r, v in (extra or {}).items():
        q[r] = _times(v, spec.nodes * jobs)
    return q


def kueue_objects(spec: JobSpec, k: Kubernetes, jobs: int = 1, cluster_queue: str = CLUSTER_QUEUE) -> list[dict]:
    q = quota(spec, jobs, k.pod.extra_resources)
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


def setup_objects(spec: JobSpec, k: Kubernetes, jobs: int = 1, *, node_faults: bool = False,
                  serving: bool = False) -> list[dict]:
    """Namespace, Kueue queues and RBAC, in apply order."""
    return ([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": k.namespace}}]
            + kueue_objects(spec, k, jobs) + rbac_objects(k, node_faults=node_faults, serving=serving))


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the workload script) as literal blocks, so the YAML reads like the file."""


def _str(dumper: yaml.SafeDumper, s: str):
    if "\n" in s and not any(line != line.rstrip() for line in s.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", s)


_Dumper.add_representer(str, _str)


def to_yaml(objs) -> str:
    return yaml.dump_all(list(objs), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
