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


def printed_role_rules(node_faults: bool = False, cleanup_pod: bool = False, serving: bool = False) -> list[dict]:
    """The Role rbac.yaml prints: role_rules plus `create` on pods for `poc validate --server-dry-run`,
    which sends each pod template as a Pod (dryRun=All) so that Pod Security admission judges it
    (backends/k8s/dryrun.py). A run does not need it (the Jobs create the pods), so `poc check` does not
    ask for it (check/k8s.py needed uses role_rules), and an identity without it gets dry-run verdicts
    that say the pods were not judged. Security-wise it adds little to `create` on jobsets, whose Jobs
    create whatever pods the template says, but a bare pod is outside Kueue's quota: admins may refuse it."""
    rules = role_rules(node_faults, cleanup_pod, serving)
    pods = next(r for r in rules if r["apiGroups"] == [""] and r["resources"] == ["pods"])
    if "create" not in pods["verbs"]:
        pods["verbs"] = ["create", *pods["verbs"]]
    return rules


def cluster_rules(reads: bool, node_faults: bool) -> list[dict]:
    """Cluster-scoped rights: preflight's reads (it works without them: a 403 is recorded as not
    visible), and the node rights lose_node needs: get (the node's taints and cordon mark before a
    change), list (which nodes the run's pods are on, for preflight), patch (the cordon, its mark and the
    out-of-service taint; node_patch_policy() narrows patch to exactly those)."""
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


# What lose_node changes on a node (backends/k8s/faults.py): the cordon (spec.unschedulable), its own
# annotation naming the run, and the out-of-service taint that lets the pod GC release the lost pods.
CORDON_ANNOTATION = "poc/cordoned-by-run"
OUT_OF_SERVICE_KEY = "node.kubernetes.io/out-of-service"
ADMISSION_API = "admissionregistration.k8s.io/v1"


def node_patch_policy(k: Kubernetes) -> list[dict]:
    """RBAC cannot narrow `patch` on nodes to some fields, and the node a lose_node fault takes is known only
    then: this ValidatingAdmissionPolicy (GA since Kubernetes 1.30) lets the harness's ServiceAccount change
    only what the fault changes, and nothing else on any node (labels, other annotations, other taints,
    the rest of the spec). It applies to that ServiceAccount's requests alone."""
    ns, name = k.namespace, f"{HARNESS_ROLE}-{k.namespace}-node-fault"
    keep = f"k == '{CORDON_ANNOTATION}'"
    others = f"t.key != '{OUT_OF_SERVICE_KEY}'"
    same_spec = " && ".join(f"object.spec.?{f} == oldObject.spec.?{f}"
                            for f in ("podCIDR", "podCIDRs", "providerID", "configSource", "externalID"))
    return [
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["UPDATE"], "resources": ["nodes"]}]},
             "matchConditions": [{"name": "the-harness",
                                  "expression": f"request.userInfo.username == "
                                                f"'system:serviceaccount:{ns}:{HARNESS_ROLE}'"}],
             "variables": [{"name": "newAnn", "expression": "object.metadata.?annotations.orValue({})"},
                           {"name": "oldAnn", "expression": "oldObject.metadata.?annotations.orValue({})"}],
             "validations": [
                 {"expression": "object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({})",
                  "message": "the harness may not change a node's labels", "reason": "Forbidden"},
                 {"expression": f"variables.newAnn.all(k, {keep} || (k in variables.oldAnn && "
                                f"variables.oldAnn[k] == variables.newAnn[k])) && "
                                f"variables.oldAnn.all(k, {keep} || k in variables.newAnn)",
                  "message": f"the harness may change only the {CORDON_ANNOTATION} annotation of a node",
                  "reason": "Forbidden"},
                 {"expression": f"object.spec.?taints.orValue([]).filter(t, {others}) == "
                                f"oldObject.spec.?taints.orValue([]).filter(t, {others})",
                  "message": f"the harness may add or remove only the {OUT_OF_SERVICE_KEY} taint",
                  "reason": "Forbidden"},
                 {"expression": same_spec + " && object.metadata.?finalizers == oldObject.metadata.?finalizers"
                                " && object.metadata.?ownerReferences == oldObject.metadata.?ownerReferences",
                  "message": "the harness may change only spec.unschedulable (the cordon) of a node's spec",
                  "reason": "Forbidden"},
             ]}},
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def rbac_objects(k: Kubernetes, *, node_faults: bool = False, serving: bool = False) -> list[dict]:
    """A namespaced Role with exactly what the harness does in its namespace (printed_role_rules), bound
    to a ServiceAccount (rbac_note() says how to bind a user or group instead). A ClusterRole only when
    kubernetes.create_cluster_role is set, or a lose_node fault (allowed by allow_destructive_faults)
    needs the node rights. node_faults: the config has such a fault; serving: the serving scenario runs."""
    ns = k.namespace
    subject = [{"kind": "ServiceAccount", "name": HARNESS_ROLE, "namespace": ns}]
    out = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": HARNESS_ROLE, "namespace": ns}},
        {"apiVersion": RBAC_API, "kind": "Role",
         "metadata": {"name": HARNESS_ROLE, "namespace": ns},
         "rules": printed_role_rules(node_faults, cleanup_pod=bool(k.checkpoint_pvc), serving=serving)},
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
    if node_faults:   # `patch` on nodes is every field of every node: the policy narrows it to the fault's own
        out += node_patch_policy(k)
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
