"""The RBAC objects `poc render --platform k8s` writes (rbac.yaml), beside the JobSet (render/jobset.py).

The default is namespaced: a Role with exactly what the harness does in its namespace. A shared
cluster's user has a namespace and a LocalQueue, not cluster-admin; preflight does without the
cluster-scoped reads (a 403 is recorded, not fatal), so they are a ClusterRole only on request.
"""
from __future__ import annotations

from ..config import Kubernetes

HARNESS_ROLE = "poc-harness"

RBAC_API = "rbac.authorization.k8s.io/v1"


# the serving scenario (harness/serve/k8s.py): its Deployment, ReplicaSets (evidence), the Service in
# front and the EndpointSlices that say which replicas are ready
SERVING_RULES = [
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "get", "delete"]},
    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"]},
    {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "get", "delete"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
]


def role_rules(node_faults: bool = False, cleanup_pod: bool = False, serving: bool = False) -> list[dict]:
    """Exactly what the harness does in its namespace (submit, watch, logs, kill_rank's exec,
    delete_pod, cleanup). Nothing here reads the Namespace object: a Role cannot grant that.
    cleanup_pod: checkpoints on a PVC, which only a pod can reach, so removing a run's sub-path
    creates a short pod (backends/k8s/cleanup.py)."""
    pod_verbs = ["create", "get", "list", "watch", "delete"] if cleanup_pod else ["get", "list", "watch", "delete"]
    rules = [
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
         "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": pod_verbs},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get", "list"]},
    ]
    if node_faults:   # lose_node evicts the run's pods from the node it takes
        rules.insert(5, {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]})
    if serving:
        rules += [dict(r) for r in SERVING_RULES]
    return rules


def cluster_rules(reads: bool, node_faults: bool) -> list[dict]:
    """Cluster-scoped rights: preflight's reads (it works without them: a 403 is recorded as not
    visible), and the node rights lose_node needs (cordon, taint)."""
    rules = []
    if reads:
        rules += [
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get"]},
        ]
    if reads or node_faults:
        rules.append({"apiGroups": [""], "resources": ["nodes"],
                      "verbs": ["get", "list", "patch"] if node_faults else ["get", "list"]})
    return rules


def rbac_objects(k: Kubernetes, *, node_faults: bool = False, serving: bool = False) -> list[dict]:
    """A namespaced Role with exactly what the harness does in its namespace, bound to a ServiceAccount
    (rbac_note() says how to bind a user or group instead). A ClusterRole only when
    kubernetes.create_cluster_role is set, or a lose_node fault (allowed by allow_destructive_faults)
    needs the node rights. node_faults: the config has such a fault; serving: the serving scenario runs."""
    ns = k.namespace
    subject = [{"kind": "ServiceAccount", "name": HARNESS_ROLE, "namespace": ns}]
    out = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": HARNESS_ROLE, "namespace": ns}},
        {"apiVersion": RBAC_API, "kind": "Role",
         "metadata": {"name": HARNESS_ROLE, "namespace": ns},
         "rules": role_rules(node_faults, cleanup_pod=bool(k.checkpoint_pvc), serving=serving)},
        {"apiVersion": RBAC_API, "kind": "RoleBinding",
         "metadata": {"name": HARNESS_ROLE, "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": HARNESS_ROLE},
         "subjects": subject},
    ]
    rules = cluster_rules(k.create_cluster_role, node_faults)
    if rules:
        out += [
            {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": f"{HARNESS_ROLE}-{ns}"},
             "rules": rules},
            {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": {"name": f"{HARNESS_ROLE}-{ns}"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": f"{HARNESS_ROLE}-{ns}"},
             "subjects": subject},
        ]
    return out


def rbac_note(k: Kubernetes) -> str:
    """YAML comment lines for rbac.yaml: how to bind the Role to a person or a group instead."""
    ns, r = k.namespace, HARNESS_ROLE
    return (f"# The Role {r} holds exactly what the harness does in namespace {ns}; the RoleBinding below gives\n"
            f"# it to the ServiceAccount {r}. To give it to a user or a group instead (a cluster admin runs):\n"
            f"#   kubectl -n {ns} create rolebinding {r}-user --role={r} --user=NAME\n"
            f"#   kubectl -n {ns} create rolebinding {r}-group --role={r} --group=GROUP\n"
            f"# Check: kubectl auth can-i create jobsets.jobset.x-k8s.io -n {ns} --as=NAME\n"
            "# The harness needs no cluster-wide rights: without them preflight records nodes, CRDs and\n"
            "# ClusterQueues as not visible (kubernetes.create_cluster_role: true adds a ClusterRole for them).\n")
