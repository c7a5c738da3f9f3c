"""The node rights a lose_node fault needs, as `poc render` prints them, applied to the native cluster:
the ClusterRole grants `patch` on nodes, and the ValidatingAdmissionPolicy beside it lets the harness's
ServiceAccount change only what the fault changes. Each request is a server-side dry run made as that
ServiceAccount (impersonated by the admin), so admission runs and no node changes."""
from __future__ import annotations

import time

import pytest
from _native import native_cluster

from harness import config
from harness.paths import NATIVE_K8S_CLUSTER, cluster_state_dir
from harness.render import jobset as rj
from harness.render.rbac import CORDON_ANNOTATION, HARNESS_ROLE, OUT_OF_SERVICE_KEY

pytestmark = [pytest.mark.integration, pytest.mark.k8s]
NS = "poc-policy-test"


def _clients(impersonate: str | None = None):
    from kubernetes import client
    from kubernetes import config as kconfig
    api = kconfig.new_client_from_config(str(cluster_state_dir(NATIVE_K8S_CLUSTER) / "kubeconfig"))
    if impersonate:
        api.set_default_header("Impersonate-User", impersonate)
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
    n = core.list_node().items[0]
    return client.ApiClient().sanitize_for_serialization(n)


def _try(core, name: str, body: dict) -> str | None:
    """None when admitted; else the API server's message."""
    from kubernetes.client.rest import ApiException
    try:
        core.patch_node(name, body, dry_run="All")
        return None
    except ApiException as exc:
        return f"{exc.status} {exc.body}"


def test_the_fault_may_cordon_mark_and_taint_a_node_and_nothing_else(harness_identity):
    sa = harness_identity
    n = _node(_clients()[0])
    name = n["metadata"]["name"]
    taints = n["spec"].get("taints") or []
    oos = {"key": OUT_OF_SERVICE_KEY, "value": "nodeshutdown", "effect": "NoExecute"}
    allowed = {
        "cordon and mark": {"metadata": {"annotations": {CORDON_ANNOTATION: "k8s-lose-node-01"}},
                            "spec": {"unschedulable": True}},
        "out-of-service taint": {"spec": {"taints": [*taints, oos]}},
        "uncordon": {"metadata": {"annotations": {CORDON_ANNOTATION: None}}, "spec": {"unschedulable": False}},
        "taint removed": {"spec": {"taints": [t for t in taints if t["key"] != OUT_OF_SERVICE_KEY] or None}},
    }
    denied = {
        "a label": ({"metadata": {"labels": {"poc.test/x": "y"}}}, "labels"),
        "another annotation": ({"metadata": {"annotations": {"poc.test/x": "y"}}}, "annotation"),
        "another taint": ({"spec": {"taints": [*taints, {"key": "poc.test/x", "effect": "NoSchedule"}]}},
                          "taint"),
        "the provider id": ({"spec": {"providerID": "poc://other"}}, "spec"),
    }
    for what, body in allowed.items():
        assert _try(sa, name, body) is None, what
    for what, (body, word) in denied.items():
        err = _try(sa, name, body)
        assert err is not None and err.startswith("403") and "ValidatingAdmissionPolicy" in err and word in err, \
            (what, err)
    # the same requests by the admin: the policy is the ServiceAccount's alone
    assert _try(_clients()[0], name, denied["a label"][0]) is None
    print(f"\nnode {name}: {', '.join(allowed)} admitted; "
          f"{', '.join(denied)} denied for the harness's ServiceAccount")
