"""Deleting only what the run made, in a namespace other campaigns share: run ids repeat across
campaigns and users, so a JobSet or ConfigMap of the run's name is deleted only when its labels name
this campaign and run, and always with its uid as a precondition (the fake API server answers 409 to a
precondition that does not hold, as the real one does)."""
from __future__ import annotations

import copy
import itertools
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from harness import config
from harness.backends.base import Handle
from harness.backends.k8s.api import CONFLICT
from harness.backends.k8s.backend import KubernetesBackend
from harness.errors import SubmitError
from harness.spec import build

_uids = (f"uid-{n}" for n in itertools.count(1))


class FakeApiServer:
    """One namespace's JobSets and ConfigMaps, with uid preconditions on delete; logs each request."""

    def __init__(self):
        self.objects: dict[tuple[str, str], dict] = {}
        self.log: list[tuple] = []

    def put(self, kind: str, name: str, labels: dict) -> dict:
        obj = {"metadata": {"name": name, "namespace": "poc", "uid": next(_uids), "labels": dict(labels),
                            "creationTimestamp": "2026-12-04T10:00:00Z"}}
        self.objects[(kind, name)] = obj
        return obj

    def _get(self, kind, name):
        if (kind, name) not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.objects[(kind, name)])

    def _delete(self, kind, name, body):
        obj = self._get(kind, name)
        pre = getattr(body, "preconditions", None)
        if pre is not None and pre.uid != obj["metadata"]["uid"]:
            raise ApiException(status=409, reason="Conflict")
        self.log.append(("DELETE", kind, name, obj["metadata"]["uid"]))
        del self.objects[(kind, name)]
        return {}

    # CustomObjectsApi (JobSets)
    def get_namespaced_custom_object(self, group, version, ns, plural, name, _request_timeout=None):
        return self._get("JobSet", name)

    def delete_namespaced_custom_object(self, group, version, ns, plural, name, body=None, _request_timeout=None):
        return self._delete("JobSet", name, body)

    def create_namespaced_custom_object(self, group, version, ns, plural, obj, _request_timeout=None):
        if ("JobSet", obj["metadata"]["name"]) in self.objects:
            raise ApiException(status=409, reason="AlreadyExists")
        self.log.append(("CREATE", "JobSet", obj["metadata"]["name"]))
        return self.put("JobSet", obj["metadata"]["name"], obj["metadata"].get("labels") or {})

    # CoreV1Api (ConfigMaps, pods)
    def read_namespaced_config_map(self, name, ns, _request_timeout=None):
        return self._get("ConfigMap", name)

    def delete_namespaced_config_map(self, name, ns, body=None, _request_timeout=None):
        return self._delete("ConfigMap", name, body)

    def create_namespaced_config_map(self, ns, body, _request_timeout=None):
        self.log.append(("CREATE", "ConfigMap", body["metadata"]["name"]))
        return self.put("ConfigMap", body["metadata"]["name"], body["metadata"].get("labels") or {})

    def list_namespaced_pod(self, ns, label_selector=None, _request_timeout=None):
        return SimpleNamespace(items=[])


class FakeClient:
    """K8sClient's surface the backend's submit and cancel use, over FakeApiServer."""

    timeout = 5
    own_core = None
    context = None
    # what k8s_identity reads: the API server's URL (no CA file on a fake)
    api = SimpleNamespace(configuration=SimpleNamespace(host="https://127.0.0.1:6443", ssl_ca_cert=None))

    def __init__(self, server: FakeApiServer):
        self.server = server

    def core(self):
        return self.server

    def custom(self):
        return self.server

    def to_dict(self, obj):
        return obj

    def get(self, what, res, name, ns=None, missing_ok=False):
        return self.call(what, self.server.get_namespaced_custom_object, res.group, res.version, ns, res.plural, name,
                         missing_ok=missing_ok)

    def call(self, what, fn, *args, missing_ok=False, conflict_ok=False, **kw):
        try:
            return fn(*args, _request_timeout=self.timeout, **kw)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            if conflict_ok and exc.status == 409:
                return CONFLICT
            raise


def backend(server: FakeApiServer, campaign="team-a") -> tuple[KubernetesBackend, object]:
    cfg = config.from_mapping({"campaign": campaign, "platforms": ["k8s"], "kubernetes": {"image": "img:1"}})
    be = KubernetesBackend(cfg.kubernetes, FakeClient(server), image="img:1", checkpoint_root="/nonexistent")
    be._count = lambda what: None
    return be, cfg


def labels(campaign: str, run_id: str = "k8s-clean-01") -> dict:
    return {"poc/campaign": campaign, "poc/run-id": run_id}


def test_another_campaigns_jobset_of_the_same_name_is_refused_not_deleted():
    server = FakeApiServer()
    theirs = server.put("JobSet", "k8s-clean-01", labels("team-b"))
    their_cm = server.put("ConfigMap", "k8s-clean-01-workload", labels("team-b"))
    be, cfg = backend(server)
    spec = build(cfg, "k8s", "k8s-clean-01", None)
    with pytest.raises(SubmitError, match="not this campaign's") as e:
        be.submit(spec, be.render(spec))
    assert "campaign 'team-b'" in str(e.value) and "kubectl delete jobset -n poc k8s-clean-01" in e.value.tip
    assert server.objects[("JobSet", "k8s-clean-01")] == theirs          # untouched
    assert server.objects[("ConfigMap", "k8s-clean-01-workload")] == their_cm
    assert [x for x in server.log if x[0] == "DELETE"] == []


def test_this_campaigns_leftover_is_deleted_by_its_uid_then_the_run_is_submitted():
    server = FakeApiServer()
    old = server.put("JobSet", "k8s-clean-01", labels("team-a"))
    old_cm = server.put("ConfigMap", "k8s-clean-01-workload", labels("team-a"))
    be, cfg = backend(server)
    spec = build(cfg, "k8s", "k8s-clean-01", None)
    h = be.submit(spec, be.render(spec))
    assert ("DELETE", "JobSet", "k8s-clean-01", old["metadata"]["uid"]) in server.log
    assert ("DELETE", "ConfigMap", "k8s-clean-01-workload", old_cm["metadata"]["uid"]) in server.log
    assert h.data["uid"] == server.objects[("JobSet", "k8s-clean-01")]["metadata"]["uid"] != old["metadata"]["uid"]


def test_cancel_leaves_an_object_that_took_the_runs_name_since():
    server = FakeApiServer()
    be, cfg = backend(server)
    spec = build(cfg, "k8s", "k8s-clean-01", None)
    h = be.submit(spec, be.render(spec))
    # the run's objects are gone (deleted by hand, or a crash and a colleague's cleanup), and another
    # campaign's run of the same id made new ones
    server.objects.clear()
    theirs = server.put("JobSet", "k8s-clean-01", labels("team-b"))
    their_cm = server.put("ConfigMap", "k8s-clean-01-workload", labels("team-b"))
    again = Handle.from_json(h.to_json())
    be.cancel(again)
    assert server.objects[("JobSet", "k8s-clean-01")] == theirs
    assert server.objects[("ConfigMap", "k8s-clean-01-workload")] == their_cm


def test_cancel_deletes_the_runs_own_objects():
    server = FakeApiServer()
    be, cfg = backend(server)
    spec = build(cfg, "k8s", "k8s-clean-01", None)
    h = be.submit(spec, be.render(spec))
    be.cancel(h)
    assert server.objects == {}


def test_a_crash_inside_the_submit_call_is_undone_from_the_journalled_intent():
    """The intent (no uid yet) is journalled before the submit; the harness dies after the JobSet was
    created and before its handle reached the journal. cancel() of the intent finds the JobSet by name,
    deletes it only because its labels are this campaign's run, and with its uid as the precondition."""
    server = FakeApiServer()
    be, cfg = backend(server)
    spec = build(cfg, "k8s", "k8s-clean-01", None)
    rendered = be.render(spec)
    intent = Handle.from_json(be.intent(spec, rendered).to_json())    # as the journal keeps it
    assert intent.data["intent"] and intent.data["uid"] is None and intent.data["name"] == "k8s-clean-01"
    made = be.submit(spec, rendered)                                  # the handle that never reached the journal
    be.cancel(intent)
    assert ("DELETE", "JobSet", "k8s-clean-01", made.data["uid"]) in server.log and server.objects == {}


def test_an_intent_leaves_another_campaigns_jobset_of_the_runs_name():
    """The submit never happened (refused, or the crash came first) and another campaign's run of the
    same id has a JobSet of that name: the intent's cancel leaves it and its ConfigMap."""
    server = FakeApiServer()
    be, cfg = backend(server)
    spec = build(cfg, "k8s", "k8s-clean-01", None)
    intent = be.intent(spec, be.render(spec))
    theirs = server.put("JobSet", "k8s-clean-01", labels("team-b"))
    their_cm = server.put("ConfigMap", "k8s-clean-01-workload", labels("team-b"))
    be.cancel(intent)
    assert server.objects[("JobSet", "k8s-clean-01")] == theirs
    assert server.objects[("ConfigMap", "k8s-clean-01-workload")] == their_cm
    assert [x for x in server.log if x[0] == "DELETE"] == []
