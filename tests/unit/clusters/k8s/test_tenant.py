"""The restricted user's objects on the native cluster (harness/clusters/k8s/tenant.py), without a cluster."""
from __future__ import annotations

from harness.clusters.k8s import gpu_shape, tenant
from harness.config import Kubernetes
from harness.render import jobset as rj


def _by_kind(objs: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objs}


def test_the_user_gets_exactly_the_role_the_harness_prints_and_nothing_cluster_wide():
    objs = tenant.objects()
    kinds = [o["kind"] for o in objs]
    assert "ClusterRoleBinding" not in kinds and "ClusterRole" not in kinds
    printed = [o for o in rj.rbac_objects(Kubernetes(namespace=tenant.NAMESPACE, local_queue=tenant.LOCAL_QUEUE))
               if o["kind"] == "Role"]
    by = _by_kind(objs)
    assert by["Role"] == printed[0]
    rb = by["RoleBinding"]
    assert rb["metadata"]["namespace"] == tenant.NAMESPACE
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": printed[0]["metadata"]["name"]}
    assert rb["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": tenant.USER}]
    assert kinds.index("Namespace") == 0 and kinds.index("Role") < kinds.index("RoleBinding")


def test_the_queue_admits_only_the_tenant_namespace_with_a_gpu_quota():
    by = _by_kind(tenant.objects())
    cq = by["ClusterQueue"]
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": tenant.NAMESPACE}}
    quota = {r["name"]: r["nominalQuota"] for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota[gpu_shape.GPU_RESOURCE] == "8"
    assert set(cq["spec"]["resourceGroups"][0]["coveredResources"]) == set(quota)
    assert by["LocalQueue"]["spec"]["clusterQueue"] == cq["metadata"]["name"]
    assert by["LocalQueue"]["metadata"] == {"name": tenant.LOCAL_QUEUE, "namespace": tenant.NAMESPACE}
    assert by["PriorityClass"]["metadata"]["name"] == tenant.PRIORITY_CLASS


def test_the_gpu_toleration_matches_the_taint():
    t, tol = gpu_shape.GPU_TAINT, gpu_shape.GPU_TOLERATION
    assert tol["key"] == t["key"] == gpu_shape.GPU_RESOURCE == rj.GPU_RESOURCE
    assert tol["operator"] == "Exists" and tol["effect"] == t["effect"] == "NoSchedule"
