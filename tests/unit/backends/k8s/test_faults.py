"""Shared-cluster safety of lose_node on Kubernetes (harness/backends/k8s/faults.py): only a node the
run holds, only with the opt-in, undone even after a crash, and an undo that is safe to repeat.

Pods recorded from the native cluster (tests/fixtures/k8s/recorded/k8s-clean-01.jsonl) served by a
small fake API that records each call. The Slurm side is tests/unit/backends/slurm/test_guard.py.
"""
from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException
from support.paths import FIXTURES

from harness import config
from harness.backends.base import Handle
from harness.backends.k8s import faults
from harness.backends.k8s.backend import KubernetesBackend
from harness.errors import BackendError

FIX = FIXTURES
GUARD = FIX / "slurm" / "trixie" / "guard"


def recorded_pods() -> list[dict]:
    """The Running pods of k8s-clean-01 as the native cluster served them (poc-n1 and poc-n2)."""
    looks = [json.loads(x) for x in (FIX / "k8s" / "recorded" / "k8s-clean-01.jsonl").read_text().splitlines()]
    return copy.deepcopy(looks[5]["pods"])


def _matches(obj: dict, label_selector: str | None, field_selector: str | None) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (label_selector or "").split(",")):
        if term.startswith("!"):
            if term[1:] in labels:
                return False
            continue
        k, v = term.split("=", 1)
        if labels.get(k) != v:
            return False
    if field_selector:
        k, v = field_selector.split("=", 1)
        assert k == "spec.nodeName"
        return obj["spec"].get("nodeName") == v
    return True


class FakeCore:
    def __init__(self, pods: list[dict], nodes: dict[str, dict], log: list):
        self.pods, self.nodes, self.log = pods, nodes, log

    def list_namespaced_pod(self, ns, label_selector=None, field_selector=None, _request_timeout=None):
        self.log.append(("LIST pods", field_selector, label_selector))
        return SimpleNamespace(items=[p for p in self.pods if p["metadata"]["namespace"] == ns
                                      and _matches(p, label_selector, field_selector)])

    def read_node(self, name, _request_timeout=None):
        self.log.append(("GET node", name))
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.nodes[name])

    def patch_node(self, name, body, _request_timeout=None):
        """A strategic merge patch of a node as the API server applies it: annotations merged (None
        removes), spec.taints replaced whole, a stale metadata.resourceVersion refused (409)."""
        body = copy.deepcopy(body)
        n = self.nodes[name]
        rv = body.get("metadata", {}).pop("resourceVersion", None)
        if rv is not None and rv != n["metadata"].get("resourceVersion"):
            raise ApiException(status=409, reason="Conflict")
        self.log.append(("PATCH node", name, body))
        for k, v in (body.get("metadata", {}).get("annotations") or {}).items():
            ann = n["metadata"].setdefault("annotations", {})
            ann.pop(k, None) if v is None else ann.__setitem__(k, v)
        for k, v in body.get("spec", {}).items():
            n["spec"].pop(k, None) if v is None else n["spec"].__setitem__(k, v)
        n["metadata"]["resourceVersion"] = str(int(n["metadata"].get("resourceVersion") or 0) + 1)

    def create_namespaced_pod_eviction(self, name, ns, body, _request_timeout=None):
        self.log.append(("EVICT", name, body.delete_options.preconditions.uid))


class FakeClient:
    def __init__(self, pods, nodes):
        self.log: list = []
        self._core = FakeCore(pods, nodes, self.log)

    def core(self):
        return self._core

    def count(self, what, n=1):
        self.log.append(("COUNT", what))

    own_core = core

    def to_dict(self, o):
        return o

    def call(self, what, fn, *args, missing_ok=False, conflict_ok=False, **kw):
        from harness.backends.k8s.api import CONFLICT
        try:
            return fn(*args, _request_timeout=1, **kw)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            if conflict_ok and exc.status == 409:
                return CONFLICT
            raise BackendError(f"{what}: HTTP {exc.status}") from None


def node(name, unschedulable=False, annotations=None, taints=None):
    n = {"metadata": {"name": name, "annotations": dict(annotations or {}), "resourceVersion": "100"},
         "spec": {"unschedulable": unschedulable},
         "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    if taints:
        n["spec"]["taints"] = list(taints)
    return n


def operator_cordons(n: dict) -> None:
    """`kubectl cordon` (or drain) by an operator: spec.unschedulable, and the node controller's taint."""
    n["spec"]["unschedulable"] = True
    n["spec"]["taints"] = [*(n["spec"].get("taints") or []), {"key": faults.UNSCHEDULABLE_TAINT,
                                                               "effect": "NoSchedule"}]
    n["metadata"]["resourceVersion"] = str(int(n["metadata"]["resourceVersion"]) + 1)


def k8s_handle():
    return Handle("k8s", "k8s-clean-01", ["poc/k8s-clean-01"], 0.0,
                  data={"namespace": "poc", "name": "k8s-clean-01", "uid": "6503b7f8-00fd-46a0-b586-d1fc99d90778",
                        "lost_nodes": [], "cordoned": []})


RANK1 = {"rank": 1, "host": "k8s-clean-01-w-0-1", "pid": 7, "attempt": [0], "step": 10}


def other_pod(pods):
    """A pod of another JobSet in the same namespace, on the same node as rank 1."""
    p = copy.deepcopy(pods[1])
    p["metadata"]["name"] = "someone-else-w-0-0-abcde"
    p["metadata"]["labels"] = {"jobset.sigs.k8s.io/jobset-name": "someone-else"}
    return p


def test_k8s_lose_node_is_journalled_before_the_cordon_and_evicts_only_this_runs_pods():
    pods = recorded_pods()
    pods.append(other_pod(pods))
    c = FakeClient(pods, {"poc-n1": node("poc-n1"), "poc-n2": node("poc-n2")})
    h = k8s_handle()
    journalled = []
    rec = faults.inject(c, h, "lose_node", RANK1,
                        lambda hh: journalled.append((json.loads(json.dumps(hh.to_json())), len(c.log))))
    (saved, calls_before), = journalled
    assert saved["data"]["cordoned"] == ["poc-n2"]
    assert not any(x[0] == "PATCH node" for x in c.log[:calls_before])      # nothing changed before the journal
    patch = next(x for x in c.log if x[0] == "PATCH node")
    mark = "k8s-clean-01/6503b7f8-00fd-46a0-b586-d1fc99d90778"     # run id and JobSet uid
    # the harness's cordon is its own taint and mark: spec.unschedulable stays the operator's
    assert patch[1:] == ("poc-n2", {"metadata": {"annotations": {faults.CORDONED_BY: mark}},
                                    "spec": {"taints": [faults.CORDON_TAINT]}})
    assert rec.detail["evicted"] == ["k8s-clean-01-w-0-1-zq284"]            # not someone-else's pod
    rank1 = next(p for p in pods if p["metadata"]["name"] == "k8s-clean-01-w-0-1-zq284")
    assert [x[1:] for x in c.log if x[0] == "EVICT"] == [("k8s-clean-01-w-0-1-zq284", rank1["metadata"]["uid"])]


def test_k8s_lose_node_refuses_a_pod_that_is_not_running_or_not_of_this_jobset():
    pods = recorded_pods()
    pods[1]["status"]["phase"] = "Succeeded"
    c = FakeClient(pods, {"poc-n2": node("poc-n2")})
    with pytest.raises(BackendError, match="pod k8s-clean-01-w-0-1-zq284 is Succeeded on node poc-n2"):
        faults.inject(c, k8s_handle(), "lose_node", RANK1, lambda hh: pytest.fail("journalled"))
    pods = recorded_pods()
    h = k8s_handle()
    h.data["uid"] = "another-uid"   # an older JobSet of the same name: its pods are never the target
    with pytest.raises(BackendError, match="no pod of k8s-clean-01 has host name"):
        faults.inject(FakeClient(pods, {"poc-n2": node("poc-n2")}), h, "lose_node", RANK1, lambda hh: None)


@pytest.mark.parametrize("state, why", [
    (node("poc-n2", unschedulable=True), r"already cordoned \(spec.unschedulable\)"),
    (node("poc-n2", annotations={faults.CORDONED_BY: "other/uid"}, taints=[faults.CORDON_TAINT]),
     "already cordoned by run other/uid"),
])
def test_k8s_lose_node_refuses_a_node_someone_else_cordoned(state, why):
    c = FakeClient(recorded_pods(), {"poc-n2": state})
    with pytest.raises(BackendError, match=f"node poc-n2 is {why}"):
        faults.inject(c, k8s_handle(), "lose_node", RANK1, lambda hh: pytest.fail("journalled"))
    assert not any(x[0] == "PATCH node" for x in c.log)


def test_k8s_lose_node_reaches_only_pods_with_the_campaigns_owner_label():
    """Two users' campaigns of one name: a pod of the run's JobSet name that carries another owner id (a
    leftover of the other user's run of the same id) is never the fault's target."""
    pods = recorded_pods()
    for p in pods:
        p["metadata"]["labels"]["poc/owner"] = "bb22"
    h = k8s_handle()
    h.data["owner"] = "aa11"
    with pytest.raises(BackendError, match="no pod of k8s-clean-01 has host name"):
        faults.inject(FakeClient(pods, {"poc-n2": node("poc-n2")}), h, "delete_pod", RANK1, lambda hh: None)
    lst = FakeClient(pods, {})
    with pytest.raises(BackendError):
        faults.pod_of(lst, h, RANK1)
    assert "poc/owner=aa11" in lst.log[0][2]


def test_k8s_backend_refuses_lose_node_without_the_opt_in():
    be = KubernetesBackend(config.from_mapping({"platforms": ["k8s"]}).kubernetes, FakeClient([], {}),
                           image="img", checkpoint_root="/tmp/x")
    with pytest.raises(BackendError, match="allow_destructive_faults is false"):
        be.inject(k8s_handle(), "lose_node", RANK1)


@pytest.mark.parametrize("fault_took_effect", [True, False])
def test_k8s_restore_after_a_crash_uncordons_only_its_own_cordon_and_is_idempotent(fault_took_effect):
    nodes = {"poc-n2": node("poc-n2")}
    c = FakeClient(recorded_pods(), nodes)
    saved = []
    if fault_took_effect:
        faults.inject(c, k8s_handle(), "lose_node", RANK1, lambda hh: saved.append(hh.to_json()))
    else:   # the journal was written, the harness died before the cordon
        h = k8s_handle()
        h.data["cordoned"] = ["poc-n2"]
        saved.append(h.to_json())
    again = Handle.from_json(json.loads(json.dumps(saved[-1])))   # what --resume reads back
    fresh = FakeClient([], nodes)
    faults.restore(fresh, again)
    faults.restore(fresh, again)
    assert nodes["poc-n2"]["spec"]["unschedulable"] is False and not nodes["poc-n2"]["spec"].get("taints")
    assert faults.CORDONED_BY not in nodes["poc-n2"]["metadata"]["annotations"]
    assert again.data["cordoned"] == [] and sum(x[0] == "PATCH node" for x in fresh.log) == int(fault_took_effect)
    assert "nodes_left" not in again.data


def test_k8s_an_operators_cordon_after_the_fault_survives_the_restore_and_is_said(caplog):
    """The fault cordoned poc-n2, the harness died; an operator then cordoned (or drained) the node for
    maintenance. `poc cleanup` lifts the harness's own cordon (its taint and mark) and leaves the
    operator's: spec.unschedulable stays set, the warning and the handle say so."""
    nodes = {"poc-n2": node("poc-n2", taints=[{"key": "team.example.com/gpu", "effect": "NoSchedule"}])}
    saved = []
    faults.inject(FakeClient(recorded_pods(), nodes), k8s_handle(), "lose_node", RANK1,
                  lambda hh: saved.append(hh.to_json()))
    operator_cordons(nodes["poc-n2"])
    again = Handle.from_json(json.loads(json.dumps(saved[-1])))
    with caplog.at_level("WARNING"):
        faults.restore(FakeClient([], nodes), again)
    n = nodes["poc-n2"]
    assert n["spec"]["unschedulable"] is True                                   # the operator's cordon
    assert [t["key"] for t in n["spec"]["taints"]] == ["team.example.com/gpu", faults.UNSCHEDULABLE_TAINT]
    assert faults.CORDONED_BY not in n["metadata"]["annotations"]               # the harness's mark is gone
    assert "left cordoned" in again.data["nodes_left"]["poc-n2"]
    assert "node poc-n2 left as it is" in caplog.text and "left cordoned" in caplog.text


@pytest.mark.parametrize("state, expected", [
    # an admin's cordon of a node the run's handle names (the journal, then a crash before the cordon)
    (node("n", unschedulable=True), "cordoned (spec.unschedulable) by an operator, or by an older harness's run: "
                                    "left cordoned"),
    (node("n", unschedulable=True, annotations={faults.CORDONED_BY: "other-run"}), "cordoned by run other-run: left"),
    # the same run id, another campaign's JobSet (another uid): not this run's cordon
    (node("n", unschedulable=True, annotations={faults.CORDONED_BY: "k8s-clean-01/another-uid"}),
     "cordoned by run k8s-clean-01/another-uid: left"),
    (node("n", unschedulable=True, annotations={faults.CORDONED_BY: "k8s-clean-01"}),
     "cordoned by run k8s-clean-01: left"),
    (node("n"), "already schedulable"),
    (None, "node gone"),
])
def test_k8s_uncordon_leaves_what_is_not_this_runs(state, expected):
    c = FakeClient([], {"n": state} if state else {})
    h = k8s_handle()
    assert faults.uncordon(c, h, "n") == expected
    assert not any(x[0] == "PATCH node" for x in c.log)


def test_k8s_with_host_network_a_rank_is_found_by_its_nodes_name():
    """hostNetwork pods have their node's host name: the rank's event names the node, not the pod."""
    pods = recorded_pods()
    for p in pods:
        p["spec"]["hostNetwork"] = True
    rank1_pod = faults.pod_of(FakeClient(pods, {}), k8s_handle(), dict(RANK1, host="poc-n2"))
    assert rank1_pod["spec"]["nodeName"] == "poc-n2"
    with pytest.raises(BackendError, match="no pod of k8s-clean-01 has host name 'poc-n9'"):
        faults.pod_of(FakeClient(pods, {}), k8s_handle(), dict(RANK1, host="poc-n9"))
    for p in pods:   # the pod network: a node's name is never taken for a pod's host name
        p["spec"]["hostNetwork"] = False
    with pytest.raises(BackendError):
        faults.pod_of(FakeClient(pods, {}), k8s_handle(), dict(RANK1, host="poc-n2"))


def serving_pod(node_name: str) -> dict:
    return {"metadata": {"name": "k8s-serve-7d9f-abcde", "namespace": "poc", "labels": {"app": "k8s-serve"},
                         "creationTimestamp": "2026-12-04T10:00:00Z"},
            "spec": {"nodeName": node_name},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def test_k8s_serving_node_loss_is_journalled_on_the_training_handle_and_undone_after_a_crash():
    """Without power control the serving node loss cordons the replica's node: the training run's handle
    names that cordon and its mark and is journalled before the PATCH, so a crash's `poc cleanup`
    (cancel of that handle) uncordons it, and a later cordon of someone else's is left."""
    from harness.serve.k8s import K8sServe

    nodes = {"poc-n2": node("poc-n2")}
    c = FakeClient([serving_pod("poc-n2")], nodes)
    c._core.delete_namespaced_pod = lambda name, ns, body=None, _request_timeout=None: \
        c.log.append(("DELETE pod", name))
    s = K8sServe(c, config.Kubernetes(), image="img", checkpoint_root="/tmp/x")
    s.serving = SimpleNamespace(namespace="poc", name="k8s-serve", selector={"app": "k8s-serve"})
    train = k8s_handle()
    s.train = train
    journalled = []
    rec = s.lose_node(journal=lambda: journalled.append((len(c.log), train.to_json())))
    at, saved = journalled[0]
    patches = [i for i, x in enumerate(c.log) if x[0] == "PATCH node"]
    assert patches and at <= patches[0], c.log               # the journal before the cordon
    mark = nodes["poc-n2"]["metadata"]["annotations"][faults.CORDONED_BY]
    assert saved["data"]["cordoned"] == ["poc-n2"] and saved["data"]["cordon_marks"] == {"poc-n2": mark}
    assert rec["node"] == "poc-n2" and ("DELETE pod", "k8s-serve-7d9f-abcde") in c.log
    # the harness dies here; `poc cleanup` reads the journal and cancels the training handle
    again = Handle.from_json(json.loads(json.dumps(saved)))
    faults.restore(FakeClient([], nodes), again)
    assert nodes["poc-n2"]["spec"]["unschedulable"] is False and not nodes["poc-n2"]["spec"].get("taints")
    assert faults.CORDONED_BY not in nodes["poc-n2"]["metadata"]["annotations"]
    assert again.data["cordoned"] == [] and "cordon_marks" not in again.data
    # replayed after an operator cordoned the node again with a mark of theirs: left as it is
    nodes["poc-n2"] = node("poc-n2", unschedulable=True, annotations={faults.CORDONED_BY: "maintenance"})
    replay = Handle.from_json(json.loads(json.dumps(saved)))
    assert faults.uncordon(FakeClient([], nodes), replay, "poc-n2") == "cordoned by run maintenance: left"


def test_k8s_serving_restore_stops_naming_the_cordon_on_the_training_handle():
    from harness.serve.k8s import K8sServe

    nodes = {"poc-n2": node("poc-n2")}
    c = FakeClient([serving_pod("poc-n2")], nodes)
    c._core.delete_namespaced_pod = lambda *a, **kw: None
    s = K8sServe(c, config.Kubernetes(), image="img", checkpoint_root="/tmp/x", sleep=lambda s: None)
    s.serving = SimpleNamespace(namespace="poc", name="k8s-serve", selector={"app": "k8s-serve"})
    s.train = train = k8s_handle()
    s.lose_node(journal=lambda: None)
    assert s.restore()["restored"] == ["poc-n2"]
    assert nodes["poc-n2"]["spec"]["unschedulable"] is False and not nodes["poc-n2"]["spec"].get("taints")
    assert train.data["cordoned"] == [] and train.data["cordon_marks"] == {}


def test_k8s_the_cordon_mark_is_the_campaigns_owner_id_not_its_name():
    """Two users' campaigns of one name, the same run id: their marks differ by the owner id, so neither's
    restore lifts the other's cordon."""
    a, b = k8s_handle(), k8s_handle()
    for h, owner in ((a, "aa11"), (b, "bb22")):
        h.data.update(campaign="smoke-poc", owner=owner, uid=None)
    assert faults.cordon_mark(a) == "aa11/k8s-clean-01" and faults.cordon_mark(a) != faults.cordon_mark(b)
    nodes = {"n": node("n", annotations={faults.CORDONED_BY: faults.cordon_mark(a)}, taints=[faults.CORDON_TAINT])}
    assert faults.uncordon(FakeClient([], nodes), b, "n") == "cordoned by run aa11/k8s-clean-01: left"
    assert nodes["n"]["spec"]["taints"] == [faults.CORDON_TAINT]
