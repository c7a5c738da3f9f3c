"""Is this Kubernetes cluster usable for the job? JobSet and Kueue installed, the namespace and its
LocalQueue there; and the facts stored with every run (versions, queue quota, nodes, settings)."""
from __future__ import annotations

from ...config import Kubernetes
from ...errors import BackendError
from .api import CLUSTERQUEUES, LOCALQUEUES, K8sClient
from .state import get, items, quota_of

JOBSET_CRD = "jobsets.jobset.x-k8s.io"
KUEUE_CRDS = ("workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
              "resourceflavors.kueue.x-k8s.io")
JOBSET_INSTALL = ("install JobSet: kubectl apply --server-side -f "
                  "https://github.com/kubernetes-sigs/jobset/releases/download/v0.10.1/manifests.yaml "
                  "(or `poc cluster up --k8s` for the local cluster)")
KUEUE_INSTALL = ("install Kueue: kubectl apply --server-side -f "
                 "https://github.com/kubernetes-sigs/kueue/releases/download/v0.14.5/manifests.yaml "
                 "(or `poc cluster up --k8s` for the local cluster)")


def require_crds(client: K8sClient) -> None:
    from kubernetes import client as k
    ext = k.ApiextensionsV1Api(client.api)
    if client.call(f"GET CRD {JOBSET_CRD}", ext.read_custom_resource_definition, JOBSET_CRD, missing_ok=True) is None:
        raise BackendError(f"JobSet is not installed on {client.host}: CRD {JOBSET_CRD} is missing", tip=JOBSET_INSTALL)
    for crd in KUEUE_CRDS:
        if client.call(f"GET CRD {crd}", ext.read_custom_resource_definition, crd, missing_ok=True) is None:
            raise BackendError(f"Kueue is not installed on {client.host}: CRD {crd} is missing", tip=KUEUE_INSTALL)


def check(client: K8sClient, cfg: Kubernetes, *, image: str, local: bool, checkpoint: dict, setup: dict) -> dict:
    from kubernetes import client as k
    ver = client.call("GET /version", k.VersionApi(client.api).get_code)
    require_crds(client)
    core, ns = client.core(), cfg.namespace
    if client.call(f"GET namespace {ns}", core.read_namespace, ns, missing_ok=True) is None:
        raise BackendError(f"namespace {ns!r} does not exist",
                           tip=f"kubectl create namespace {ns}, or set kubernetes.namespace")
    lq = client.get(f"GET LocalQueue {ns}/{cfg.local_queue}", LOCALQUEUES, cfg.local_queue, ns, missing_ok=True)
    if lq is None:
        raise BackendError(f"Kueue LocalQueue {cfg.local_queue!r} does not exist in namespace {ns!r}",
                           tip="create it: `poc render --platform k8s --out DIR` writes kueue.yaml; "
                               "kubectl apply -f DIR/kueue.yaml (or set kubernetes.local_queue)")
    cq_name = get(lq, "spec", "clusterQueue")
    cq = client.get(f"GET ClusterQueue {cq_name}", CLUSTERQUEUES, cq_name, missing_ok=True)
    if cq is None:
        raise BackendError(f"LocalQueue {cfg.local_queue!r} points at ClusterQueue {cq_name!r}, which does not exist",
                           tip="kubectl apply -f the kueue.yaml that `poc render` writes")
    if not image:
        raise BackendError("no container image set", tip="set kubernetes.image to an image with python3 and torch")
    nodes = [client.to_dict(n) for n in client.call("LIST nodes", core.list_node).items]
    info = {
        "scheduler": "kubernetes",
        "scheduler_version": ver.git_version,
        "kubernetes_version": ver.git_version,
        "api_server": client.host,
        "jobset_version": None, "kueue_version": None,
        "failure_policy": {"maxRestarts": cfg.max_restarts, "restartStrategy": "Recreate",
                           "torchrun_max_restarts": 0, "job_backoff_limit": 0},
        "toleration_seconds": cfg.toleration_seconds,
        "node_monitor_grace_period": None,
        "local_queue": cfg.local_queue, "cluster_queue": cq_name,
        "cluster_queue_quota": quota_of(cq),
        "image": image, "image_pull_policy": cfg.image_pull_policy,
        "checkpoint": checkpoint,
        "nodes": [{"node": get(n, "metadata", "name"), "cpu": get(n, "status", "allocatable", "cpu"),
                   "memory": get(n, "status", "allocatable", "memory"),
                   "ready": any(c.get("type") == "Ready" and c.get("status") == "True"
                                for c in items(n, "status", "conditions"))}
                  for n in nodes],
        "time_resolution_s": 1.0,
        "setup": setup,
    }
    info.update(component_versions(client, local))
    return info


def component_versions(client: K8sClient, local: bool) -> dict:
    """JobSet/Kueue versions from their controller Deployments' images; the local native cluster
    records what it built, and its node-monitor grace period (not visible through the API)."""
    from kubernetes import client as k
    out: dict = {}
    apps = k.AppsV1Api(client.api)
    for key, ns, name in (("jobset_version", "jobset-system", "jobset-controller-manager"),
                          ("kueue_version", "kueue-system", "kueue-controller-manager")):
        try:
            d = client.call(f"GET deployment {ns}/{name}", apps.read_namespaced_deployment, name, ns, missing_ok=True)
        except BackendError:   # an ordinary user may not read another namespace: the version stays unknown
            continue
        if d is not None:
            img = d.spec.template.spec.containers[0].image
            out[key] = img.rsplit(":", 1)[-1] if ":" in img else img
    if local:
        try:
            from ...clusters import native_k8s
            ci = native_k8s.info()
            out.setdefault("jobset_version", ci.versions.get("jobset"))
            out.setdefault("kueue_version", ci.versions.get("kueue"))
            out["node_monitor_grace_period"] = ci.settings.get("node_monitor_grace_period")
            out["cluster_settings"] = ci.settings
            out["cluster_provider"] = "native"
        except Exception as exc:  # noqa: BLE001 - a broken state file: recorded, not fatal to the run
            out["cluster_settings_error"] = str(exc)[:200]
    return {key: v for key, v in out.items() if v is not None}
