"""The node rights a lose_node fault needs, as `poc render` prints them, applied to the native cluster:
the ClusterRole grants `patch` on nodes, and the ValidatingAdmissionPolicy beside it lets the harness's
ServiceAccount, and every user or group an admin binds to that ClusterRole, change only what the fault
changes (its own taint and mark, the out-of-service taint; never spec.unschedulable, the operator's
cordon). Each request is a server-side dry run made as that identity (impersonated by the admin), so
admission runs and no node changes."""
from __future__ import annotations

import time

import pytest
from _native import native_cluster

from harness import config
from harness.paths import NATIVE_K8S_CLUSTER, cluster_state_dir
from harness.render import jobset as rj
from harness.render.rbac import CORDON_ANNOTATION, CORDON_TAINT_KEY, HARNESS_ROLE, OUT_OF_SERVICE_KEY

pytestmark = [pytest.mark.integration, pytest.mark.k8s]
NS = "poc-policy-test"


def _clients(impersonate: str | None = None, group: str | None = None):
    from kubernetes import client
    from kubernetes import config as kconfig
    api = kconfig.new_client_from_config(str(cluster_state_dir(NATIVE_K8S_CLUSTER) / "kubeconfig"))
    if impersonate:
        api.set_default_header("Impersonate-User", impersonate)
    if group:
        api.set_default_header("Impersonate-Group", group)
    return client.CoreV1Api(api), client.RbacAuthorizationV1Api(api), client.AdmissionregistrationV1Api(api)


@pytest.fixture(scope="module")
def harness_identity():
    from kubernetes.client.rest import ApiException
    native_cluster()
    core, rbac, adm = _clients()
    k = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"namespace": NS}}).kubernetes
    objs = [o for o in rj.rbac_objects(k, node_faults=True) if o["kind"] != "Role" and o["kind"] != "RoleBinding"]
    core.create_namespace({"metadata": {"name": NS}})
    made = []
    try:
        for o in objs:
            kind = o["kind"]
            if kind == "ServiceAccount":
                core.create_namespaced_service_account(NS, o)
            elif kind == "ClusterRole":
                rbac.create_cluster_role(o)
            elif kind == "ClusterRoleBinding":
                rbac.create_cluster_role_binding(o)
            elif kind == "ValidatingAdmissionPolicy":
                adm.create_validating_admission_policy(o)
            elif kind == "ValidatingAdmissionPolicyBinding":
                adm.create_validating_admission_policy_binding(o)
            made.append(o)
        time.sleep(2)   # the API server's policy and RBAC caches catch up
        yield _clients(f"system:serviceaccount:{NS}:{HARNESS_ROLE}")[0]
    finally:
        for o in reversed(made):
            name, kind = o["metadata"]["name"], o["kind"]
            try:
                {"ClusterRole": rbac.delete_cluster_role, "ClusterRoleBinding": rbac.delete_cluster_role_binding,
                 "ValidatingAdmissionPolicy": adm.delete_validating_admission_policy,
                 "ValidatingAdmissionPolicyBinding": adm.delete_validating_admission_policy_binding,
                 }.get(kind, lambda n: None)(name)
            except ApiException:
                pass
        core.delete_namespace(NS)


def _node(core) -> dict:
    from kubernetes import client
    # a node nobody cordoned: the denied cordon request must be a change
    n = next(x for x in core.list_node().items if not x.spec.unschedulable)
    return client.ApiClient().sanitize_for_serialization(n)


def _try(core, name: str, body: dict) -> str | None:
    """None when admitted; else the API server's message."""
    from kubernetes.client.rest import ApiException
    try:
        core.patch_node(name, body, dry_run="All")
        return None
    except ApiException as exc:
        return f"{exc.status} {exc.body}"


def _requests(n: dict) -> tuple[dict, dict]:
    """What the fault sends to a node (allowed), and what it never may (denied, with a word of the reason)."""
    taints = n["spec"].get("taints") or []
    oos = {"key": OUT_OF_SERVICE_KEY, "value": "nodeshutdown", "effect": "NoExecute"}
    cordon = {"key": CORDON_TAINT_KEY, "value": "lost", "effect": "NoSchedule"}
    allowed = {
        "cordon (its taint) and mark": {"metadata": {"annotations": {CORDON_ANNOTATION: "k8s-lose-node-01"}},
                                        "spec": {"taints": [*taints, cordon]}},
        "out-of-service taint": {"spec": {"taints": [*taints, oos]}},
        "mark removed": {"metadata": {"annotations": {CORDON_ANNOTATION: None}}},
        "taints removed": {"spec": {"taints": [t for t in taints if t["key"] not in (OUT_OF_SERVICE_KEY,
                                                                                    CORDON_TAINT_KEY)] or None}},
    }
    denied = {
        "a label": ({"metadata": {"labels": {"poc.test/x": "y"}}}, "labels"),
        "another annotation": ({"metadata": {"annotations": {"poc.test/x": "y"}}}, "annotation"),
        "another taint": ({"spec": {"taints": [*taints, {"key": "poc.test/x", "effect": "NoSchedule"}]}},
                          "taint"),
        "the provider id": ({"spec": {"providerID": "poc://other"}}, "spec"),
        "the cordon (spec.unschedulable, the operator's)": ({"spec": {"unschedulable": True}}, "unschedulable"),
    }
    return allowed, denied


def test_the_fault_may_cordon_mark_and_taint_a_node_and_nothing_else(harness_identity):
    sa = harness_identity
    n = _node(_clients()[0])
    name = n["metadata"]["name"]
    allowed, denied = _requests(n)
    for what, body in allowed.items():
        assert _try(sa, name, body) is None, what
    for what, (body, word) in denied.items():
        err = _try(sa, name, body)
        assert err is not None and err.startswith("403") and "ValidatingAdmissionPolicy" in err and word in err, \
            (what, err)
    # the same requests by the admin (bound to other roles): not narrowed
    assert _try(_clients()[0], name, denied["a label"][0]) is None
    print(f"\nnode {name}: {', '.join(allowed)} admitted; "
          f"{', '.join(denied)} denied for the harness's ServiceAccount")


def test_users_and_groups_an_admin_binds_to_the_clusterrole_are_narrowed_too(harness_identity):
    """An admin gives the harness's ClusterRole to a person and to a team's group (their own
    ClusterRoleBinding, as `kubectl create clusterrolebinding` makes it): both may patch nodes through
    it, and the policy narrows both as it narrows the ServiceAccount. Someone outside those bindings (the
    admin) is not narrowed."""
    from kubernetes.client.rest import ApiException
    rbac = _clients()[1]
    role = f"{HARNESS_ROLE}-{NS}"
    binding = {"metadata": {"name": f"{role}-ops"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "poc-ops-alice"},
                            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "poc-ops"}]}
    rbac.create_cluster_role_binding(binding)
    try:
        time.sleep(2)   # the API server's RBAC cache and the policy's parameter informer catch up
        n = _node(_clients()[0])
        name = n["metadata"]["name"]
        allowed, denied = _requests(n)
        for who, core in (("user poc-ops-alice", _clients("poc-ops-alice")[0]),
                          ("group poc-ops", _clients("poc-ops-bob", group="poc-ops")[0])):
            for what, body in allowed.items():
                assert _try(core, name, body) is None, (who, what)
            for what, (body, word) in denied.items():
                err = _try(core, name, body)
                assert err is not None and err.startswith("403") and "ValidatingAdmissionPolicy" in err \
                    and word in err, (who, what, err)
        # a user of the group outside it has no node rights at all (RBAC, not the policy)
        err = _try(_clients("poc-someone-else")[0], name, allowed["mark removed"])
        assert err is not None and err.startswith("403") and "ValidatingAdmissionPolicy" not in err, err
        assert _try(_clients()[0], name, denied["a label"][0]) is None     # the admin: not narrowed
        print(f"\nnode {name}: the ClusterRole's user and group may change only the fault's taints and mark")
    finally:
        try:
            rbac.delete_cluster_role_binding(binding["metadata"]["name"])
        except ApiException:
            pass
