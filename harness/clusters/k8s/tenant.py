"""A restricted user on the native cluster, shaped like a team's place on a shared GPU cluster.

What a cluster admin gives a team, made by the admin on every ``up`` (idempotent):

* an identity: a client certificate (CN ``poc-user``, group ``poc-users``) signed by the cluster's CA,
  in a kubeconfig of its own (``<state>/restricted-kubeconfig``, mode 0600);
* a namespace (``poc-gpu``) with a Kueue LocalQueue whose ClusterQueue admits only that namespace
  and holds a GPU quota (2 nodes x 4 fake GPUs);
* the namespaced Role the harness prints for that namespace (``render.jobset.rbac_objects``, the
  same function as ``poc render``), bound to the user, and nothing cluster-wide: the user cannot
  read nodes, CRDs, ClusterQueues or other namespaces;
* a PriorityClass the user's pods may name.
"""
from __future__ import annotations

import json
import time

from harness.clusters.k8s import pki
from harness.clusters.k8s.gpu_shape import GPU_RESOURCE
from harness.clusters.k8s.layout import APISERVER_PORT, Layout
from harness.clusters.k8s.procs import kubectl
from harness.errors import ClusterError

USER = "poc-user"
GROUP = "poc-users"
NAMESPACE = "poc-gpu"
LOCAL_QUEUE = "poc-gpu-queue"
CLUSTER_QUEUE = "poc-gpu-cluster-queue"
PRIORITY_CLASS = "poc-gpu-normal"
# 2 nodes x 4 GPUs; cpu and memory leave room for one 2-pod job on the 2-core nodes
QUOTA = {"cpu": "4", "memory": "8Gi", GPU_RESOURCE: "8"}
RBAC_API = "rbac.authorization.k8s.io/v1"


def kubeconfig_path(L: Layout):
    return L.root / "restricted-kubeconfig"


def describe(L: Layout) -> dict:
    """What a config needs to run as the restricted user; {} before the first ``up`` made it."""
    path = kubeconfig_path(L)
    if not path.exists():
        return {}
    return {"user": USER, "groups": [GROUP], "kubeconfig": str(path), "namespace": NAMESPACE,
            "local_queue": LOCAL_QUEUE, "cluster_queue": CLUSTER_QUEUE, "priority_class": PRIORITY_CLASS,
            "quota": dict(QUOTA)}


def harness_role() -> dict:
    """The namespaced Role that `poc render --platform k8s` prints for the tenant's namespace."""
    from harness.config import Kubernetes
    from harness.render import jobset as rj

    roles = [o for o in rj.rbac_objects(Kubernetes(namespace=NAMESPACE, local_queue=LOCAL_QUEUE))
             if o["kind"] == "Role"]
    if len(roles) != 1:
        raise RuntimeError(f"render.jobset.rbac_objects printed {len(roles)} Roles, expected one")
    return roles[0]


def priority_class() -> dict:
    # Kubernetes' default preemption policy: with Never the scheduler's answer for a pod no node can
    # ever hold reads "not eligible due to preemptionPolicy=Never" instead of "Preemption is not
    # helpful", and an impossible request looks like a busy cluster
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": PRIORITY_CLASS},
            "value": 1000, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority",
            "description": "the restricted user's GPU jobs (k8s-slurm-poc)"}


def _replace_changed_priority_class(L: Layout) -> None:
    """A PriorityClass's value and preemption policy are immutable: one made differently before goes."""
    want = priority_class()
    got = kubectl(L, "get", "priorityclass", PRIORITY_CLASS, "-o", "json", check=False)
    if got.returncode != 0:
        return
    cur = json.loads(got.stdout)
    if (cur.get("value"), cur.get("preemptionPolicy")) != (want["value"], want["preemptionPolicy"]):
        kubectl(L, "delete", "priorityclass", PRIORITY_CLASS, "--wait=true")


def objects() -> list[dict]:
    """Everything the admin creates for the tenant, in apply order."""
    from harness.render import jobset as rj

    role = harness_role()
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        priority_class(),
        {"apiVersion": rj.KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": rj.RESOURCE_FLAVOR}, "spec": {}},
        {"apiVersion": rj.KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
                  "queueingStrategy": "BestEffortFIFO",
                  "resourceGroups": [{"coveredResources": list(QUOTA), "flavors": [{
                      "name": rj.RESOURCE_FLAVOR,
                      "resources": [{"name": r, "nominalQuota": q} for r, q in QUOTA.items()]}]}]}},
        {"apiVersion": rj.KUEUE_API, "kind": "LocalQueue", "metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE},
         "spec": {"clusterQueue": CLUSTER_QUEUE}},
        role,
        {"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": {"name": f"{USER}-harness", "namespace": NAMESPACE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]},
    ]


def ensure(L: Layout) -> dict:
    """The user's certificate and kubeconfig, then (as admin) its namespace, queues, Role binding and
    PriorityClass. Returns describe()."""
    ca = pki.ensure_ca(L.pki)
    pair = pki.ensure_cert(L.pki, "restricted-user", ca, USER, orgs=(GROUP,))
    pki.write_kubeconfig(kubeconfig_path(L), f"https://127.0.0.1:{APISERVER_PORT}", ca, pair, USER)
    _replace_changed_priority_class(L)
    doc = {"apiVersion": "v1", "kind": "List", "items": objects()}
    # Kueue's webhooks answer 500 for a moment after Kueue (re)starts: retry a few times
    last = None
    for _ in range(10):
        last = kubectl(L, "apply", "--server-side", "--force-conflicts", "--field-manager=poc-tenant",
                       "-f", "-", input=json.dumps(doc), check=False, timeout=60)
        if last.returncode == 0:
            return describe(L)
        time.sleep(2)
    raise ClusterError(f"creating the restricted user's namespace, queues and Role failed: "
                       f"{(last.stderr or last.stdout).strip()[-2000:]}",
                       "is Kueue running? `poc cluster status --k8s`")
