"""The serving replicas of a training run on Kubernetes (pure): ConfigMap, Deployment, Service.

What a Kubernetes user writes to serve a checkpoint: the server and the workload it imports travel
in a ConfigMap (as the workload does for training, so a changed script needs no image rebuild), a
Deployment keeps `replicas` copies running (the kubelet restarts a crashed container; the Deployment
replaces a pod whose node is lost), probes gate the Service's endpoints on /readyz and restart a
hung server on /healthz, and a ClusterIP Service spreads clients over the ready pods (kube-proxy).

The checkpoint is the training run's own volume (render/jobset.checkpoint_volume: a hostPath under
checkpoint_root/<campaign>-<token>/<run_id> on the local cluster, or the PVC sub-path), mounted read-only.

Kueue: not used for serving. The harness's Kueue manages Jobs and JobSets only (the native cluster
runs it with integrations batch/job and jobset.x-k8s.io/jobset, and installs no pod webhooks), so a
queue-name label on these pods would be ignored; a Deployment is a long-running service, not a
batch workload that waits for quota. `kueue_pods=True` (a cluster whose Kueue has the pod
integration) labels the pod template with the LocalQueue, which Kueue then gates and counts.

Tolerations: the user's (kubernetes.pod.tolerations, e.g. the GPU taint of GPU nodes; on the native
cluster its GPU taint too) and nothing of the harness's: the not-ready/unreachable NoExecute
tolerations are the API server's defaults (DefaultTolerationSeconds; 30 s on the native cluster,
300 s upstream), so a lost node's replica is replaced as the cluster's own settings say, not sooner.
"""
from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass

from .. import data
from ..config import Kubernetes
from ..errors import ConfigError
from ..spec import WORKLOAD_SCRIPT, JobSpec
from .jobset import CKPT_MOUNT, QUEUE_LABEL, check_placement, checkpoint_volume, labels, placement
from .local import workload_script

SERVER_SCRIPT = "serve_model.py"
SERVE_DIR = "/poc-serve"             # the ConfigMap's mount
PORT = 8000
CONTAINER = "serve"
ROLE_LABEL = "poc/role"
RUN_LABEL = "poc/run-id"
CAMPAIGN_LABEL = "poc/campaign"
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

# The server runs as a child of sh, not as pid 1: a SIGKILL of the python process is then a real
# crash (the container's main process exits with the child's status and the kubelet restarts the
# container), whereas the kernel ignores SIGKILL sent from inside the container to its pid 1. sh
# passes SIGTERM on (a Deployment scale-down or delete stops the server gracefully) and exits with
# the server's status. A constant script: the server's arguments arrive as "$@".
LAUNCH = ('python3 ' + SERVE_DIR + '/' + SERVER_SCRIPT + ' "$@" & pid=$!\n'
          "trap 'kill -TERM $pid 2>/dev/null' TERM INT\n"
          'wait $pid; st=$?\n'
          'while kill -0 $pid 2>/dev/null; do wait $pid; st=$?; done\n'
          'echo "poc-serve: serve_model.py (pid $pid) exited with status $st" >&2\n'
          'exit $st\n')

# What kill_server runs in the container (argv, no user input): the server's pid from /proc (the
# process whose command line starts with the launch line's), then SIGKILL. Prints "<pid> killed".
KILL_SERVER = ('for d in /proc/[0-9]*; do p=${d#/proc/}; '
               '[ "$p" = 1 ] || [ "$p" = $$ ] && continue; '
               "if tr '\\000' ' ' < $d/cmdline 2>/dev/null | grep -q '^python3 " + SERVE_DIR + "/" + SERVER_SCRIPT
               + "'; then kill -9 $p && echo \"$p killed\"; exit $?; fi; done; "
               'echo "no serve_model.py process in the container" >&2; exit 3')


@dataclass(frozen=True)
class K8sServing:
    """What deploy() creates, in order, and the names the rest of the serving needs."""
    name: str                      # Deployment, Service (and the ConfigMap's prefix)
    namespace: str
    objects: tuple[dict, ...]      # ConfigMap, Deployment, Service
    selector: dict[str, str]
    port: int                      # the container's and the Service's
    ckpt_dir: str                  # in the container
    checkpoint_path: str           # on the nodes (hostPath) or the PVC sub-path
    scripts_sha256: str

    def of(self, kind: str) -> dict:
        return next(o for o in self.objects if o["kind"] == kind)


def server_script_text() -> str:
    return data.path("serve", SERVER_SCRIPT).read_text(encoding="utf-8")


def serving_name(run_id: str) -> str:
    """<run id>-serve: a Service name is a DNS-1035 label (a letter first, at most 63 characters)."""
    name = f"{run_id}-serve"
    if len(name) > 63 or not _DNS1035.match(name):
        raise ConfigError(f"serving name {name!r} is not a Service name (a letter first, lower-case letters, "
                          "digits and '-', at most 63 characters)", "use a shorter run id that starts with a letter")
    return name


def _label_value(v: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", v)[:63].strip("-_.")


POD_IP_ENV = "POC_POD_IP"


def command(ckpt_dir: str, run_id: str, threads: int, port: int = PORT) -> list[str]:
    """The server bound to the pod's own address (the kubelet expands $(POC_POD_IP) from the downward API):
    what the Service and the kubelet's probes reach, and no other interface of the pod."""
    return ["sh", "-c", LAUNCH, "poc-serve",
            "--ckpt-dir", ckpt_dir, "--host", f"$({POD_IP_ENV})", "--port", str(port),
            "--workload", f"{SERVE_DIR}/{WORKLOAD_SCRIPT}", "--run-id", run_id, "--threads", str(threads)]


def resources(spec: JobSpec) -> dict:
    """A worker's small request: one core (or less, if a worker has less), the worker's memory; no
    GPU (the served models are small and the native cluster's GPUs are simulated)."""
    cpu = "1" if spec.cpus_per_node >= 1 else "500m"
    mem = f"{spec.memory_mb}Mi"
    return {"requests": {"cpu": cpu, "memory": mem}, "limits": {"memory": mem}}


def render_serving(spec: JobSpec, k: Kubernetes, image: str, checkpoint_root: str,
                   checkpoint_pvc: str | None = None, *, replicas: int = 1, port: int = PORT,
                   kueue_pods: bool = False, server_text: str | None = None,
                   workload_text: str | None = None) -> K8sServing:
    """spec: the training run's spec (its run id, campaign and checkpoint volume are reused); port: the
    server's port in the pod, which the Service also exposes (config serve.port)."""
    if not image:
        raise ConfigError("no container image for the serving pods", "set kubernetes.image")
    if replicas < 0:
        raise ConfigError(f"replicas must be >= 0, not {replicas}")
    check_placement(k)
    name, ns = serving_name(spec.run_id), k.namespace
    server = server_script_text() if server_text is None else server_text
    workload = workload_script().read_text(encoding="utf-8") if workload_text is None else workload_text
    sha = hashlib.sha256((server + "\0" + workload).encode()).hexdigest()
    selector = {RUN_LABEL: spec.run_id, ROLE_LABEL: "serve"}
    lab = {**labels(spec), **selector, CAMPAIGN_LABEL: _label_value(spec.campaign)}
    cm_name = f"{name}-scripts"
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": cm_name, "namespace": ns, "labels": dict(lab),
                              "annotations": {"poc/scripts-sha256": sha}},
                 "data": {SERVER_SCRIPT: server, WORKLOAD_SCRIPT: workload}}
    vol, mount, ckpt_path = checkpoint_volume(spec, k, checkpoint_root, checkpoint_pvc)
    vol = copy.deepcopy(vol)
    if "hostPath" in vol:
        vol["hostPath"]["type"] = "Directory"   # the training run's directory must be there: never an empty one
    mount = {**mount, "readOnly": True}
    ckpt_dir = f"{CKPT_MOUNT}/ckpt"
    threads = 1
    container = {
        "name": CONTAINER, "image": image, "imagePullPolicy": k.image_pull_policy,
        "command": command(ckpt_dir, spec.run_id, threads, port),
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "OMP_NUM_THREADS", "value": str(threads)},
                {"name": "POC_RUN_ID", "value": spec.run_id},
                {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": int(port), "protocol": "TCP"}],
        "resources": resources(spec),
        # readiness: in the Service's endpoints only once the model is loaded and warmed up, out
        # again within ~2 s of /readyz failing; liveness: a server that stops answering HTTP for
        # ~15 s is restarted (/healthz answers during a long model load too)
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 1,
                           "timeoutSeconds": 1, "failureThreshold": 2, "successThreshold": 1},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5,
                          "timeoutSeconds": 2, "failureThreshold": 3},
        "volumeMounts": [{"name": "scripts", "mountPath": SERVE_DIR, "readOnly": True}, mount],
    }
    pod = k.pod
    pod_spec = {
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 5,
        "enableServiceLinks": False,
        "affinity": _affinity(selector, pod.affinity),
        "containers": [container],
        "volumes": [{"name": "scripts", "configMap": {"name": cm_name}}, vol],
    }
    if k.tolerations:
        pod_spec["tolerations"] = k.tolerations
    pod_spec.update(placement(pod))
    pod_labels = {**pod.labels, **lab}
    if kueue_pods:
        pod_labels[QUEUE_LABEL] = k.local_queue
    pod_meta: dict = {"labels": pod_labels, "annotations": {**pod.annotations, "poc/scripts-sha256": sha}}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": dict(lab), "annotations": {"poc/scripts-sha256": sha}},
        "spec": {"replicas": int(replicas), "revisionHistoryLimit": 2,
                 "selector": {"matchLabels": dict(selector)},
                 "template": {"metadata": pod_meta, "spec": pod_spec}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": dict(lab)},
        "spec": {"type": "ClusterIP", "selector": dict(selector),
                 "ports": [{"name": "http", "port": int(port), "targetPort": "http", "protocol": "TCP"}]},
    }
    return K8sServing(name=name, namespace=ns, objects=(configmap, deployment, service), selector=selector,
                      port=int(port), ckpt_dir=ckpt_dir, checkpoint_path=ckpt_path, scripts_sha256=sha)


def _affinity(selector: dict, user: dict | None) -> dict:
    """Replicas preferably on different nodes (a lost node then takes one of them), merged with the
    user's affinity; preferred, not required, so two replicas still fit a one-node cluster."""
    out = {key: copy.deepcopy(v) for key, v in (user or {}).items() if key != "podAntiAffinity"}
    anti = copy.deepcopy((user or {}).get("podAntiAffinity") or {})
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    anti[key] = [{"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": dict(selector)},
                                                     "topologyKey": "kubernetes.io/hostname"}},
                 *(anti.get(key) or [])]
    out["podAntiAffinity"] = anti
    return out
