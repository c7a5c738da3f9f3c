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


# What lose_node changes on a node (backends/k8s/faults.py): its own NoSchedule taint (the harness's cordon,
# never spec.unschedulable, which stays the operator's), its own annotation naming the run, and the
# out-of-service taint that lets the pod GC release the lost pods.
CORDON_ANNOTATION = "poc/cordoned-by-run"
CORDON_TAINT_KEY = "poc/lost-node"
OUT_OF_SERVICE_KEY = "node.kubernetes.io/out-of-service"
ADMISSION_API = "admissionregistration.k8s.io/v1"


def cluster_role_name(k: Kubernetes) -> str:
    return f"{HARNESS_ROLE}-{k.namespace}"


def bound_expression(k: Kubernetes) -> str:
    """CEL: the request's user is bound to the harness's ClusterRole by the ClusterRoleBinding in `params`
    (a User, one of the user's Groups, or a ServiceAccount), or is the harness's ServiceAccount itself."""
    ns, role = k.namespace, cluster_role_name(k)
    sa = f"system:serviceaccount:{ns}:{HARNESS_ROLE}"
    return (f"request.userInfo.username == '{sa}' || ("
            f"params.roleRef.kind == 'ClusterRole' && params.roleRef.name == '{role}' && "
            "params.?subjects.orValue([]).exists(s, "
            "(s.kind == 'User' && s.name == request.userInfo.username) || "
            "(s.kind == 'Group' && s.name in request.userInfo.?groups.orValue([])) || "
            "(s.kind == 'ServiceAccount' && request.userInfo.username == "
            "'system:serviceaccount:' + s.?namespace.orValue('') + ':' + s.name)))")


def node_patch_policy(k: Kubernetes) -> list[dict]:
    """RBAC cannot narrow `patch` on nodes to some fields, and the node a lose_node fault takes is known only
    then: this ValidatingAdmissionPolicy (GA since Kubernetes 1.30) lets every identity that holds the
    harness's ClusterRole change only what the fault changes, and nothing else on any node (labels, other
    annotations, other taints, spec.unschedulable, the rest of the spec).

    Who holds it: the harness's ServiceAccount, and every User, Group or ServiceAccount that any
    ClusterRoleBinding binds to the ClusterRole (an admin's `kubectl create clusterrolebinding
    --clusterrole=poc-harness-NS --user=NAME` included). The policy's parameters are the cluster's
    ClusterRoleBindings (paramKind, every one selected): the API server evaluates the validations once per
    binding and ANDs them, and a binding that does not bind the requester to this ClusterRole passes them."""
    name = f"{HARNESS_ROLE}-{k.namespace}-node-fault"
    keep = f"k == '{CORDON_ANNOTATION}'"
    others = f"t.key != '{OUT_OF_SERVICE_KEY}' && t.key != '{CORDON_TAINT_KEY}'"
    same_spec = " && ".join(f"object.spec.?{f} == oldObject.spec.?{f}"
                            for f in ("unschedulable", "podCIDR", "podCIDRs", "providerID", "configSource",
                                      "externalID"))
    checks = [
        ("object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({})",
         "the harness may not change a node's labels"),
        (f"variables.newAnn.all(k, {keep} || (k in variables.oldAnn && variables.oldAnn[k] == variables.newAnn[k]))"
         f" && variables.oldAnn.all(k, {keep} || k in variables.newAnn)",
         f"the harness may change only the {CORDON_ANNOTATION} annotation of a node"),
        (f"object.spec.?taints.orValue([]).filter(t, {others}) == "
         f"oldObject.spec.?taints.orValue([]).filter(t, {others})",
         f"the harness may add or remove only the {CORDON_TAINT_KEY} and {OUT_OF_SERVICE_KEY} taints"),
        (same_spec + " && object.metadata.?finalizers == oldObject.metadata.?finalizers"
                     " && object.metadata.?ownerReferences == oldObject.metadata.?ownerReferences",
         "the harness may not change a node's spec (spec.unschedulable, the cordon, is the operator's) beyond its "
         "own taints"),
    ]
    return [
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
         "spec": {
             "failurePolicy": "Fail",
             "paramKind": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding"},
             "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["UPDATE"], "resources": ["nodes"]}]},
             "variables": [{"name": "bound", "expression": bound_expression(k)},
                           {"name": "newAnn", "expression": "object.metadata.?annotations.orValue({})"},
                           {"name": "oldAnn", "expression": "oldObject.metadata.?annotations.orValue({})"}],
             "validations": [{"expression": f"!variables.bound || ({expr})", "message": msg, "reason": "Forbidden"}
                             for expr, msg in checks]}},
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
         # every ClusterRoleBinding is a parameter: whichever binds the requester to the ClusterRole narrows it
         "spec": {"policyName": name, "validationActions": ["Deny"],
                  "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"}}},
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
            {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": cluster_role_name(k)},
             "rules": rules},
            {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": {"name": cluster_role_name(k)},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": cluster_role_name(k)},
             "subjects": subject},
        ]
    if node_faults:   # `patch` on nodes is every field of every node: the policy narrows it to the fault's own
        out += node_patch_policy(k)
    return out


def rbac_note(k: Kubernetes, node_faults: bool = False) -> str:
    """YAML comment lines for rbac.yaml: how to bind the Role (and, with node_faults, the ClusterRole and
    its admission policy) to a person or a group instead."""
    ns, r = k.namespace, HARNESS_ROLE
    return (f"# The Role {r} holds exactly what the harness does in namespace {ns}; the RoleBinding below gives\n"
            f"# it to the ServiceAccount {r}. To give it to a user or a group instead (a cluster admin runs):\n"
            f"#   kubectl -n {ns} create rolebinding {r}-user --role={r} --user=NAME\n"
            f"#   kubectl -n {ns} create rolebinding {r}-group --role={r} --group=GROUP\n"
            f"# Check: kubectl auth can-i create jobsets.jobset.x-k8s.io -n {ns} --as=NAME\n"
            "# The harness needs no cluster-wide rights: without them preflight records nodes, CRDs and\n"
            "# ClusterQueues as not visible (kubernetes.create_cluster_role: true adds a ClusterRole for them).\n"
            + (f"# The ClusterRole {cluster_role_name(k)} below (node rights of a lose_node fault) is given to a user\n"
               f"# or group the same way (kubectl create clusterrolebinding NAME --clusterrole={cluster_role_name(k)}\n"
               "# --user=NAME); its ValidatingAdmissionPolicy narrows every identity any ClusterRoleBinding binds\n"
               "# to it to the fault's own taints and annotation on nodes.\n" if node_faults else ""))
