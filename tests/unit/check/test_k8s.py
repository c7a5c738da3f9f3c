"""`poc check`'s Kubernetes checks against answers recorded from the native cluster, as its admin
and as its restricted user (tests/fixtures/check/k8s-*.json, re-recorded by tests/fixtures/check/record.py):
discovery, SelfSubjectAccessReviews for every right any config may need, the LocalQueue and ClusterQueue."""
from __future__ import annotations

import json

import pytest
from support.paths import FIXTURES

from harness import config
from harness.check import k8s as chk
from harness.check.report import Failed, Note, Runner

FIX = FIXTURES / "check"
ADMIN = config.Kubernetes()
TENANT = config.Kubernetes(kubeconfig="/x/restricted-kubeconfig", namespace="poc-gpu", local_queue="poc-gpu-queue",
                           image="example.org/worker:1")


class Recorded:
    """A Cluster answering with what the native cluster answered this identity."""

    def __init__(self, who: str):
        self.doc = json.loads((FIX / f"k8s-{who}.json").read_text())
        self.reviewed: list[dict] = []

    def host(self):
        return self.doc["host"]

    def version(self):
        return self.doc["version"]

    def groups(self):
        return self.doc["groups"]

    def resources(self, group, version):
        return self.doc["resources"].get(f"{group}/{version}")

    def review(self, attributes):
        self.reviewed.append(attributes)
        for r in self.doc["reviews"]:
            if r["attributes"] == attributes:
                return r["status"]
        raise KeyError(attributes)

    def read(self, kind, name, ns=None):
        for r in self.doc["read"]:
            if (r["kind"], r["name"], r["ns"]) == (kind, name, ns):
                return tuple(r["answer"])
        raise KeyError(kind, name, ns)

    def list(self, kind, ns):
        return tuple(next(r["answer"] for r in self.doc["list"] if (r["kind"], r["ns"]) == (kind, ns)))


def run(c, k, *, node_faults=False, serving=False, apis=chk.RENDERED_APIS, requests=None, pods=2) -> dict:
    req, opt = chk.needed(k, node_faults=node_faults, serving=serving)
    r = Runner("k8s")
    chk.run_all(c, k, r, apis=apis, required=req, optional=opt,
                requests=requests or {"cpu": "1", "memory": "3072Mi"}, pods=pods)
    return {c.name: c for c in r.checks}


def test_needed_rights_follow_the_rendered_role():
    req, opt = chk.needed(ADMIN, node_faults=False, serving=False)
    texts = {a.text() for a in req}
    assert {"create jobsets.jobset.x-k8s.io in namespace poc", "get pods/log in namespace poc",
            "list events in namespace poc", "create pods/exec in namespace poc",
            "delete configmaps in namespace poc", "list localqueues.kueue.x-k8s.io in namespace poc"} <= texts
    assert "create pods in namespace poc" not in texts   # only a PVC's cleanup pod needs it
    assert {a.text() for a in opt} == {"get customresourcedefinitions.apiextensions.k8s.io cluster-wide",
                                       "get clusterqueues.kueue.x-k8s.io cluster-wide",
                                       "get nodes cluster-wide", "list nodes cluster-wide"}
    more, _ = chk.needed(ADMIN.model_copy(update={"checkpoint_pvc": "ckpt"}), node_faults=True, serving=True)
    added = {a.text() for a in more} - texts
    assert {"create pods in namespace poc", "patch nodes cluster-wide", "create pods/eviction in namespace poc",
            "create deployments.apps in namespace poc", "patch deployments/scale.apps in namespace poc",
            "list endpointslices.discovery.k8s.io in namespace poc"} <= added


def test_admin_all_ok_and_the_job_fits_the_quota():
    c = Recorded("admin")
    got = run(c, ADMIN)
    assert {n: x.status for n, x in got.items()} == {n: "ok" for n in
                                                     ("api server", "apis served", "rbac", "local queue", "quota")}
    assert got["api server"].message == "https://127.0.0.1:16443 answers: Kubernetes v1.34.4"
    assert got["local queue"].message == "LocalQueue poc-queue -> ClusterQueue poc-cluster-queue, active"
    assert got["quota"].message == "the job fits ClusterQueue poc-cluster-queue: cpu 2 of 2, memory 6Gi of 6Gi"
    assert len(c.reviewed) == 21 + 4   # one review per right, and the optional cluster-wide reads


def test_restricted_user_is_ok_and_cannot_read_its_quota():
    got = run(Recorded("restricted"), TENANT)
    assert got["rbac"].status == "ok" and "get nodes cluster-wide" in got["rbac"].message
    assert got["quota"].status == "note" and "not readable with these rights" in got["quota"].message


def test_missing_verb_names_it_and_the_rule_to_add():
    got = run(Recorded("restricted"), TENANT.model_copy(update={"checkpoint_pvc": "ckpt"}))
    r = got["rbac"]
    assert r.status == "error"
    assert r.message == "1 of 22 rights the harness uses are not allowed: create pods in namespace poc-gpu"
    assert r.tip.startswith('ask the cluster admins to add to the Role poc-harness in namespace poc-gpu: '
                            '{apiGroups: [""], resources: ["pods"], verbs: [create]}')


def test_missing_cluster_right_asks_for_a_cluster_role_rule():
    got = run(Recorded("restricted"), TENANT, node_faults=True)
    r = got["rbac"]
    assert "patch nodes cluster-wide" in r.message and "create pods/eviction in namespace poc-gpu" in r.message
    assert ('ClusterRole poc-harness-poc-gpu: {apiGroups: [""], resources: ["nodes"], verbs: [get, list, patch]}'
            in r.tip)


def test_missing_local_queue_lists_the_queues_there():
    got = run(Recorded("restricted"), TENANT.model_copy(update={"local_queue": "no-such-queue"}))
    lq = got["local queue"]
    assert lq.status == "error"
    assert lq.message == "LocalQueue 'no-such-queue' does not exist in namespace 'poc-gpu'; the LocalQueues there: " \
                         "poc-gpu-queue"
    assert "kubectl get localqueues -n poc-gpu" in lq.tip
    assert got["quota"].status == "note"


def test_missing_local_queue_on_the_native_cluster_is_a_note():
    """Right after `poc cluster up` the native cluster has no namespace or queues yet: the campaign's
    setup creates them before the first run, so `poc check` notes it rather than failing."""
    with pytest.raises(Note, match=r"'no-such-queue' does not exist in namespace 'poc-gpu' yet; the campaign's setup"):
        chk.local_queue(Recorded("restricted"), TENANT.model_copy(update={"local_queue": "no-such-queue"}),
                        managed=True)


def test_api_version_not_served_says_which_are():
    apis = [*chk.RENDERED_APIS, chk.parse_api("kueue.x-k8s.io/v1beta2/workloads"),
            chk.parse_api("trainer.kubeflow.org/v1alpha1")]
    with pytest.raises(Failed) as e:
        chk.apis_served(Recorded("restricted"), apis)
    assert "kueue.x-k8s.io/v1beta2 is not served (it serves kueue.x-k8s.io/v1beta1)" in e.value.message
    assert "no trainer.kubeflow.org API group" in e.value.message and "install Kueue" in e.value.tip


def test_resource_missing_from_a_served_version():
    with pytest.raises(Failed, match=r"jobset\.x-k8s\.io/v1alpha2 serves no jobtemplates"):
        chk.apis_served(Recorded("admin"), [chk.Api("jobset.x-k8s.io", "v1alpha2", ("jobsets", "jobtemplates"))])


@pytest.mark.parametrize("bad", ["kueue.x-k8s.io", "a/b/c/d", "/v1"])
def test_parse_api_refuses(bad):
    with pytest.raises(ValueError):
        chk.parse_api(bad)


def test_quota_short_names_each_resource():
    c = Recorded("admin")
    lq = c.read("localqueue", "poc-queue", "poc")[0]
    with pytest.raises(Failed) as e:
        chk.quota_fit(c, lq, chk.job_request({"cpu": "1", "memory": "3072Mi", "nvidia.com/gpu": "1"}, 3))
    assert e.value.message == ("the job does not fit ClusterQueue poc-cluster-queue: cpu: the job asks for 3 in all, "
                               "the nominal quota is 2 (flavor poc-default); memory: the job asks for 9Gi in all, "
                               "the nominal quota is 6Gi (flavor poc-default); nvidia.com/gpu: the job asks for 3 in "
                               "all, the nominal quota is 0 (flavor poc-default)")


def test_quota_short_on_the_native_cluster_is_a_note():
    """The campaign's setup resizes this machine's native cluster's ClusterQueue to the config's job."""
    c = Recorded("admin")
    lq = c.read("localqueue", "poc-queue", "poc")[0]
    with pytest.raises(Note, match=r"cpu: the job asks for 3 in all.*resizes it to fit the job"):
        chk.quota_fit(c, lq, chk.job_request({"cpu": "1"}, 3), managed=True)


def test_quota_short_in_a_cohort_is_a_note():
    c = Recorded("admin")
    lq = c.read("localqueue", "poc-queue", "poc")[0]
    cq = c.read("clusterqueue", "poc-cluster-queue")[0]
    cq = {**cq, "spec": {**cq["spec"], "cohort": "team"}}
    c.doc["read"] = [{"kind": "clusterqueue", "name": "poc-cluster-queue", "ns": None, "answer": [cq, 200, ""]}]
    with pytest.raises(Note, match="cohort team: the job fits only by borrowing"):
        chk.quota_fit(c, lq, chk.job_request({"cpu": "2"}, 2))


def test_api_server_down_skips_the_rest():
    class Down(Recorded):
        def version(self):
            from harness.errors import BackendError
            raise BackendError("GET /version: the Kubernetes API server at https://10.0.0.1:6443 is unreachable "
                               "(MaxRetryError)", tip="start the cluster")
    got = run(Down("admin"), ADMIN)
    assert got["api server"].status == "error" and got["api server"].tip == "start the cluster"
    assert [x.status for n, x in got.items() if n != "api server"] == ["skipped"] * 4
