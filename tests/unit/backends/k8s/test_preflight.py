"""Preflight as a shared cluster's user sees it: a namespace, a LocalQueue and the printed Role, no
cluster-scoped reads. The API answers are those the native cluster (v1.34, Kueue v0.14.5) gave its
restricted user (harness/clusters/k8s/tenant.py) and its admin; tests/integration/test_k8s_restricted.py
runs the same checks against the cluster itself."""
from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client import rest
from support.k8s_rest import ByMethod, Headers

from harness import config, spec
from harness.backends.k8s import preflight
from harness.backends.k8s.api import K8sClient
from harness.errors import BackendError

NS, LQ, CQ = "poc-gpu", "poc-gpu-queue", "poc-gpu-cluster-queue"
KUEUE, JOBSET = "/apis/kueue.x-k8s.io/v1beta1", "/apis/jobset.x-k8s.io/v1alpha2"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
PAGE_NOT_FOUND = b"404 page not found\n"     # a missing API group, as the API server says it


def forbidden(what: str) -> tuple[int, dict]:
    return 403, {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                 "message": f'{what} is forbidden: User "poc-user" cannot get resource'}


def lq(active: str = "True") -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": LQ, "namespace": NS}, "spec": {"clusterQueue": CQ},
            "status": {"conditions": [{"type": "Active", "status": active, "reason": "Ready" if active == "True"
                                       else "ClusterQueueDoesNotExist", "message": "Can submit new workloads"}],
                       "flavors": [{"name": "poc-default", "resources": ["cpu", "memory", "nvidia.com/gpu"]}]}}


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}   # the native nodes' taint
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def node(name: str, gpus: str, taints: list[dict] | None = None) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints} if taints else {},
            "status": {"allocatable": {"cpu": "2", "memory": "24581264Ki", "nvidia.com/gpu": gpus, "pods": "60"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


RESTRICTED = {
    "/version": (200, {"major": "1", "minor": "34", "gitVersion": "v1.34.4", "gitCommit": "", "gitTreeState": "",
                       "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc",
                       "platform": "linux/amd64"}),
    CRD + "jobsets.jobset.x-k8s.io": forbidden("customresourcedefinitions.apiextensions.k8s.io"),
    f"{JOBSET}/namespaces/{NS}/jobsets": (200, {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSetList",
                                                "items": [], "metadata": {}}),
    f"{KUEUE}/namespaces/{NS}/workloads": (200, {"kind": "WorkloadList", "items": [], "metadata": {}}),
    f"/api/v1/namespaces/{NS}": forbidden(f'namespaces "{NS}"'),
    f"{KUEUE}/namespaces/{NS}/localqueues/{LQ}": (200, lq()),
    f"{KUEUE}/clusterqueues/{CQ}": forbidden("clusterqueues.kueue.x-k8s.io"),
    "/api/v1/nodes": forbidden("nodes"),
}
ADMIN = {
    **RESTRICTED,
    **{CRD + c: (200, {"kind": "CustomResourceDefinition", "metadata": {"name": c}, "spec": {}})
       for c in (preflight.JOBSET_CRD, *preflight.KUEUE_CRDS)},
    f"/api/v1/namespaces/{NS}": (200, {"kind": "Namespace", "metadata": {"name": NS}}),
    f"{KUEUE}/clusterqueues/{CQ}": (200, {"kind": "ClusterQueue", "metadata": {"name": CQ}, "spec": {
        "resourceGroups": [{"flavors": [{"name": "poc-default", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}}),
    "/api/v1/nodes": (200, {"kind": "NodeList", "metadata": {}, "items": [node("n1", "4"), node("n2", "4")]}),
}


class _Resp(Headers):
    def __init__(self, status: int, body):
        self.status, self.reason = status, {200: "OK", 403: "Forbidden", 404: "Not Found"}[status]
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.headers = {"content-type": "application/json"}


class FakeRest(ByMethod):
    """The API server at the HTTP level: path -> (status, body); anything else 404 page not found."""

    def __init__(self, routes: dict):
        self.routes, self.seen = routes, []

    def request(self, method, url, *a, **kw):
        path = "/" + url.split("://", 1)[-1].split("/", 1)[-1].split("?")[0].rstrip("/")
        self.seen.append(path)
        status, body = self.routes.get(path, (404, PAGE_NOT_FOUND))
        return rest.RESTResponse(_Resp(status, body))

    def close(self):
        pass


def fake_client(routes: dict) -> K8sClient:
    conf = client.Configuration()
    conf.host = "https://shared.example.com:6443"
    api = client.ApiClient(conf)
    api.rest_client = FakeRest(routes)
    return K8sClient("unused", api_client=api)


def run(routes: dict, gpus: int = 2, **kube):
    cfg = config.from_mapping({
        "platforms": ["k8s"], "faults": [],
        "resources": {"nodes": 2, "procs_per_node": gpus, "gpus_per_node": gpus, "cpus_per_node": 1,
                      "memory_mb": 1024},
        "workload": {"simulated_gpus": True},
        "kubernetes": {"kubeconfig": "/home/me/.kube/shared", "namespace": NS, "local_queue": LQ,
                       "image": "registry.example.com/team/torch:2.4", **kube}})
    s = spec.build(cfg, "k8s", "k8s-setup", None)
    return preflight.check(fake_client(routes), cfg.kubernetes, image="registry.example.com/team/torch:2.4",
                           local=False, checkpoint={}, setup={}, spec=s)


def test_restricted_user_passes_and_the_record_says_what_was_not_visible():
    info = run(RESTRICTED)
    v = info["visibility"]
    assert v["version"] == "visible"
    for key in ("crds", "namespace", "cluster_queue", "nodes"):
        assert v[key].startswith("forbidden: not needed"), key
    assert info["nodes"] is None and info["cluster_queue_quota"] is None and info["cluster_queue"] == CQ
    assert info["kubernetes_version"] == "v1.34.4"


def test_admin_sees_everything():
    info = run(ADMIN)
    assert set(info["visibility"].values()) == {"visible"}
    assert info["cluster_queue_quota"] == {"poc-default/nvidia.com/gpu": "8"}
    assert [n["gpus"] for n in info["nodes"]] == ["4", "4"]


def test_jobset_missing_is_found_without_reading_crds():
    routes = {k: v for k, v in RESTRICTED.items() if "jobset.x-k8s.io/v1alpha2" not in k}
    with pytest.raises(BackendError, match="JobSet is not installed") as e:
        run(routes)
    assert "jobset" in e.value.tip


def test_kueue_missing_is_found_without_reading_crds():
    routes = {k: v for k, v in RESTRICTED.items() if "kueue" not in k}
    with pytest.raises(BackendError, match="Kueue is not installed"):
        run(routes)


def test_missing_local_queue_tip_asks_the_admins_not_for_an_open_cluster_queue():
    routes = {**RESTRICTED, f"{KUEUE}/namespaces/{NS}/localqueues/{LQ}":
              (404, {"kind": "Status", "code": 404, "message": f'localqueues.kueue.x-k8s.io "{LQ}" not found'})}
    with pytest.raises(BackendError, match="does not exist in namespace") as e:
        run(routes)
    assert "cluster admins" in e.value.tip and f"kubectl get localqueues -n {NS}" in e.value.tip
    assert "ClusterQueue" not in e.value.tip and "cluster up" not in e.value.tip


def test_native_cluster_tip_points_at_cluster_up():
    cfg = config.from_mapping({"platforms": ["k8s"]}).kubernetes
    assert "poc cluster up --k8s" in preflight.missing_queue_tip(cfg)


def test_no_rights_in_the_namespace_is_an_error_with_the_rbac_tip():
    routes = {**RESTRICTED, f"{JOBSET}/namespaces/{NS}/jobsets": forbidden("jobsets.jobset.x-k8s.io")}
    with pytest.raises(BackendError, match="may not list jobsets") as e:
        run(routes)
    assert "rbac.yaml" in e.value.tip


def test_inactive_local_queue_fails():
    routes = {**RESTRICTED, f"{KUEUE}/namespaces/{NS}/localqueues/{LQ}": (200, lq(active="False"))}
    with pytest.raises(BackendError, match="not active: ClusterQueueDoesNotExist"):
        run(routes)


def test_more_gpus_than_any_node_has_fails_fast_when_nodes_are_visible():
    with pytest.raises(BackendError, match=r"nvidia.com/gpu 8 \(the most any node has: 4, on n1\)") as e:
        run(ADMIN, gpus=8)
    assert "gpus_per_node" in e.value.tip


def test_extra_resources_no_node_has_fail_fast():
    with pytest.raises(BackendError, match=r"rdma/ib 1 \(the most any node has: 0"):
        run(ADMIN, pod={"extra_resources": {"rdma/ib": "1"}})


def test_node_selector_that_picks_no_node_fails():
    with pytest.raises(BackendError, match="node_selector"):
        run(ADMIN, pod={"node_selector": {"nvidia.com/gpu.product": "H100"}})


def _admin_with(nodes: list[dict]) -> dict:
    return {**ADMIN, "/api/v1/nodes": (200, {"kind": "NodeList", "metadata": {}, "items": nodes})}


def test_nodes_whose_taint_the_pods_do_not_tolerate_fail_before_submit_naming_the_taint_and_the_key():
    routes = _admin_with([node(f"n{i}", "4", [GPU_TAINT]) for i in range(1, 4)])
    with pytest.raises(BackendError) as e:
        run(routes)
    assert "nvidia.com/gpu=present:NoSchedule on 3 of 3 nodes (n1, n2, n3)" in e.value.message
    assert "do not tolerate" in e.value.message
    assert "kubernetes.pod.tolerations" in e.value.tip
    assert "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}" in e.value.tip
    # the same nodes, the taint tolerated: preflight passes
    assert run(routes, pod={"tolerations": [GPU_TOLERATION]})["nodes"][0]["node"] == "n1"


def test_one_node_the_pods_tolerate_is_enough_for_preflight():
    """Fewer usable nodes than the job's is no refusal: a scaling node pool adds nodes while the job waits."""
    routes = _admin_with([node("n1", "4"), node("n2", "4", [{"key": "team", "value": "infer", "effect": "NoExecute"}])])
    assert [n["node"] for n in run(routes)["nodes"]] == ["n1", "n2"]


def test_taints_from_node_conditions_and_prefer_no_schedule_never_fail_preflight():
    """A cordoned or not-ready node comes back by itself; PreferNoSchedule only steers the scheduler."""
    passing = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
               {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
               {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
    info = run(_admin_with([node("n1", "4", passing), node("n2", "4", passing)]))
    assert [n["node"] for n in info["nodes"]] == ["n1", "n2"]
