"""Deleting only what the run made, in a namespace other campaigns share: run ids repeat across
campaigns and users, and two users' campaigns may share a name (the default one), so a JobSet,
ConfigMap or serving object of the run's name is deleted only when it carries the campaign's owner id
(poc/owner) and the run's id, and always with its uid as a precondition (the fake API server answers
409 to a precondition that does not hold, as the real one does). In-flight records that name no
cluster, or a file outside the checkpoint root, are refused before anything is touched."""
from __future__ import annotations

import copy
import itertools
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from harness import config
from harness.backends.base import Handle
from harness.backends.k8s.api import CONFLICT
from harness.backends.k8s.backend import KubernetesBackend
from harness.errors import BackendError, SubmitError
from harness.render.owned_dir import OWNER_MARK
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

    # CoreV1Api (ConfigMaps, Services, pods) and AppsV1Api (Deployments)
    def read_namespaced_config_map(self, name, ns, _request_timeout=None):
        return self._get("ConfigMap", name)

    def delete_namespaced_config_map(self, name, ns, body=None, _request_timeout=None):
        return self._delete("ConfigMap", name, body)

    def create_namespaced_config_map(self, ns, body, _request_timeout=None):
        self.log.append(("CREATE", "ConfigMap", body["metadata"]["name"]))
        return self.put("ConfigMap", body["metadata"]["name"], body["metadata"].get("labels") or {})

    def read_namespaced_service(self, name, ns, _request_timeout=None):
        return self._get("Service", name)

    def delete_namespaced_service(self, name, ns, body=None, _request_timeout=None):
        return self._delete("Service", name, body)

    def read_namespaced_deployment(self, name, ns, _request_timeout=None):
        return self._get("Deployment", name)

    def delete_namespaced_deployment(self, name, ns, body=None, _request_timeout=None):
        return self._delete("Deployment", name, body)

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

    def apps(self):
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


def backend(server: FakeApiServer, campaign="team-a", **kw) -> tuple[KubernetesBackend, object]:
    cfg = config.from_mapping({"campaign": campaign, "platforms": ["k8s"], "kubernetes": {"image": "img:1"}})
    be = KubernetesBackend(cfg.kubernetes, FakeClient(server), image="img:1",
                           **{"checkpoint_root": "/nonexistent", **kw})
    be._count = lambda what: None
    return be, cfg


def labels(campaign: str, run_id: str = "k8s-clean-01", owner: str | None = None) -> dict:
    return {"poc/campaign": campaign, "poc/run-id": run_id, **({"poc/owner": owner} if owner else {})}


ALICE, BOB = "a11ce0000000000a", "b0b0000000000000b"[:16]


def owned(cfg, run_id="k8s-clean-01", owner=ALICE):
    """The run's spec as a campaign makes it: with its owner id (the store's, harness/owner.py)."""
    return replace(build(cfg, "k8s", run_id, None), owner=owner)


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


# ---------------------------------------------------------------- two users, one campaign name, one namespace

def test_two_users_same_campaign_name_neither_deletes_nor_adopts_the_others_objects():
    """Alice's and Bob's campaigns are both called smoke-poc (the default), in one namespace, with the same
    run ids. The campaign name and run id labels match; only the owner id tells them apart."""
    server = FakeApiServer()
    alice_be, cfg = backend(server, campaign="smoke-poc")
    bob_be, _ = backend(server, campaign="smoke-poc")
    mine = alice_be.submit(owned(cfg, owner=ALICE), alice_be.render(owned(cfg, owner=ALICE)))
    theirs = {k: copy.deepcopy(v) for k, v in server.objects.items()}
    assert server.objects[("JobSet", "k8s-clean-01")]["metadata"]["labels"]["poc/owner"] == ALICE
    # Bob's resumed campaign re-submits the run: Alice's JobSet is refused, not deleted, not adopted
    bob = owned(cfg, owner=BOB)
    with pytest.raises(SubmitError, match=f"owner id {ALICE}, campaign 'smoke-poc'") as e:
        bob_be.submit(bob, bob_be.render(bob))
    assert "nothing was deleted" in e.value.tip
    # Bob's crashed submit (only the intent journalled) is cancelled by `poc cleanup`: Alice's objects stay
    bob_be.cancel(Handle.from_json(bob_be.intent(bob, bob_be.render(bob)).to_json()))
    # ... and so is a record of Bob's that names Alice's JobSet's uid (copied, or edited): not Bob's
    forged = Handle.from_json(mine.to_json())
    forged.data["owner"] = BOB
    with pytest.raises(BackendError, match="not this campaign's"):
        bob_be.cancel(forged)
    assert server.objects == theirs and [x for x in server.log if x[0] == "DELETE"] == []
    alice_be.cancel(mine)                                   # Alice's own cancel deletes hers
    assert server.objects == {}


def test_a_configmap_of_the_runs_name_that_is_not_the_campaigns_refuses_the_submit():
    server = FakeApiServer()
    be, cfg = backend(server)
    their_cm = server.put("ConfigMap", "k8s-clean-01-workload", labels("team-a", owner=BOB))
    with pytest.raises(SubmitError, match="a ConfigMap named 'k8s-clean-01-workload'"):
        be.submit(owned(cfg), be.render(owned(cfg)))
    assert server.objects == {("ConfigMap", "k8s-clean-01-workload"): their_cm}
    assert [x for x in server.log if x[0] in ("DELETE", "CREATE")] == []


def test_an_older_harnesss_object_is_never_deleted_by_a_campaign_with_an_owner_id():
    """Same campaign name and run id, no poc/owner label (made before the label existed): refused at
    submit; a cancel whose record names that very object (its uid) leaves it and says how to remove it."""
    server = FakeApiServer()
    be, cfg = backend(server)
    old = server.put("JobSet", "k8s-clean-01", labels("team-a"))
    with pytest.raises(SubmitError, match="no poc/owner label"):
        be.submit(owned(cfg), be.render(owned(cfg)))
    h = Handle("k8s", "k8s-clean-01", ["poc/k8s-clean-01"], 0.0,
               data={"namespace": "poc", "name": "k8s-clean-01", "uid": old["metadata"]["uid"],
                     "configmap": "k8s-clean-01-workload", "campaign": "team-a", "owner": ALICE,
                     "cluster": be.cluster_identity(), "lost_nodes": [], "cordoned": []})
    with pytest.raises(BackendError, match="not this campaign's") as e:
        be.cancel(h)
    assert "kubectl delete jobset -n poc k8s-clean-01" in e.value.tip
    assert server.objects[("JobSet", "k8s-clean-01")] == old and not [x for x in server.log if x[0] == "DELETE"]


def test_cancel_deletes_with_the_journals_uids_and_the_owner_label():
    server = FakeApiServer()
    be, cfg = backend(server)
    h = be.submit(owned(cfg), be.render(owned(cfg)))
    assert h.data["configmap_uid"] == server.objects[("ConfigMap", "k8s-clean-01-workload")]["metadata"]["uid"]
    be.cancel(Handle.from_json(h.to_json()))
    assert server.objects == {}
    assert ("DELETE", "JobSet", "k8s-clean-01", h.data["uid"]) in server.log
    assert ("DELETE", "ConfigMap", "k8s-clean-01-workload", h.data["configmap_uid"]) in server.log


@pytest.mark.parametrize("whose", ["another owner", "no owner label", "recorded uid differs"])
def test_serving_objects_are_deleted_only_with_the_owner_label_and_the_recorded_uid(whose):
    """The serving Deployment, Service and ConfigMap a training run's handle names (by name, with their
    uids): a `poc cleanup` deletes each only while it is this campaign's run's and that very object."""
    server = FakeApiServer()
    be, cfg = backend(server)
    h = be.submit(owned(cfg), be.render(owned(cfg)))
    lab = {**labels("team-a", owner=ALICE), "poc/role": "serve"}
    other = {"another owner": {**lab, "poc/owner": BOB}, "no owner label": {k: v for k, v in lab.items()
                                                                             if k != "poc/owner"},
             "recorded uid differs": lab}[whose]
    objs = {kind: server.put(kind, name, other) for kind, name in (
        ("Deployment", "k8s-clean-01-serve"), ("Service", "k8s-clean-01-serve"),
        ("ConfigMap", "k8s-clean-01-serve-scripts"))}
    uids = {k: ("recorded-" + k) if whose == "recorded uid differs" else o["metadata"]["uid"] for k, o in objs.items()}
    h.data["serving"] = {"namespace": "poc", "deployment": "k8s-clean-01-serve", "service": "k8s-clean-01-serve",
                         "configmap": "k8s-clean-01-serve-scripts", "uids": uids}
    be.cancel(Handle.from_json(h.to_json()))
    assert {k for k in server.objects} == {("Deployment", "k8s-clean-01-serve"), ("Service", "k8s-clean-01-serve"),
                                           ("ConfigMap", "k8s-clean-01-serve-scripts")}
    # the same objects, this campaign's and recorded: deleted, each by its uid
    for o in objs.values():
        o["metadata"]["labels"] = lab
    h.data["serving"]["uids"] = {k: o["metadata"]["uid"] for k, o in objs.items()}
    be.cancel(Handle.from_json(h.to_json()))
    assert server.objects == {}
    for kind, o in objs.items():
        assert ("DELETE", kind, o["metadata"]["name"], o["metadata"]["uid"]) in server.log


def test_a_serving_record_of_an_older_harness_without_uids_deletes_only_the_campaigns_labelled_objects():
    server = FakeApiServer()
    be, cfg = backend(server)
    h = be.submit(owned(cfg), be.render(owned(cfg)))
    mine = server.put("Service", "k8s-clean-01-serve", {**labels("team-a", owner=ALICE), "poc/role": "serve"})
    theirs = server.put("Deployment", "k8s-clean-01-serve", {**labels("team-a", owner=BOB), "poc/role": "serve"})
    h.data["serving"] = {"namespace": "poc", "deployment": "k8s-clean-01-serve", "service": "k8s-clean-01-serve",
                         "configmap": "k8s-clean-01-serve-scripts"}
    be.cancel(h)
    assert server.objects == {("Deployment", "k8s-clean-01-serve"): theirs}
    assert ("DELETE", "Service", "k8s-clean-01-serve", mine["metadata"]["uid"]) in server.log


# ---------------------------------------------------------------- records that name no cluster, or paths elsewhere

def _native_handle(be, cfg, root: Path, path: Path | None = None, **data):
    spec = owned(cfg)
    h = be.intent(spec, be.render(spec))
    h.data.update({"checkpoint_path": str(path or root / f"team-a-{ALICE}" / "k8s-clean-01"), **data})
    return Handle.from_json(h.to_json())


def _run_dir(d: Path, mark: str | None) -> Path:
    (d / "ckpt").mkdir(parents=True)
    (d / "ckpt" / "ckpt-10.pt").write_bytes(b"x")
    if mark is not None:
        (d / OWNER_MARK).write_text(mark)
    return d


def test_a_record_naming_a_checkpoint_path_outside_the_root_is_refused_and_nothing_is_removed(tmp_path):
    root = tmp_path / "ckpt"
    server = FakeApiServer()
    be, cfg = backend(server, checkpoint_root=str(root), local_cluster=True)
    victim = _run_dir(tmp_path / "home" / "someone" / "project", ALICE)
    theirs = server.put("JobSet", "k8s-clean-01", labels("team-a", owner=ALICE))
    for path in (victim, root / "elsewhere" / "k8s-clean-01", root / f"team-a-{ALICE}" / "k8s-clean-01" / ".." / "..",
                 root / f"team-a-{BOB}" / "k8s-clean-01"):
        with pytest.raises(BackendError, match="refusing to remove") as e:
            be.cancel(_native_handle(be, cfg, root, path))
        assert "nothing was cancelled or removed" in e.value.tip
    assert (victim / "ckpt" / "ckpt-10.pt").exists()
    assert server.objects[("JobSet", "k8s-clean-01")] == theirs and not [x for x in server.log if x[0] == "DELETE"]


def test_a_record_naming_the_runs_own_directory_removes_its_checkpoints_only_with_the_runs_mark(tmp_path):
    root = tmp_path / "ckpt"
    be, cfg = backend(FakeApiServer(), checkpoint_root=str(root), local_cluster=True)
    d = root / f"team-a-{ALICE}" / "k8s-clean-01"
    _run_dir(d, BOB)                                        # another mark: kept
    be.cancel(_native_handle(be, cfg, root))
    assert (d / "ckpt" / "ckpt-10.pt").exists()
    (d / OWNER_MARK).write_text(owned(cfg).owner_mark)      # the run's own: its checkpoints go, events stay
    be.cancel(_native_handle(be, cfg, root))
    assert not (d / "ckpt").exists() and d.is_dir()


def test_a_record_with_no_cluster_identity_is_refused_touching_nothing(tmp_path):
    root = tmp_path / "ckpt"
    server = FakeApiServer()
    be, cfg = backend(server, checkpoint_root=str(root), local_cluster=True)
    d = _run_dir(root / f"team-a-{ALICE}" / "k8s-clean-01", ALICE)
    mine = server.put("JobSet", "k8s-clean-01", labels("team-a", owner=ALICE))
    h = _native_handle(be, cfg, root)
    h.data.pop("cluster")
    with pytest.raises(BackendError, match="names no cluster") as e:
        be.cancel(h)
    assert "inflight/k8s-clean-01.json" in e.value.tip
    assert server.objects[("JobSet", "k8s-clean-01")] == mine and not [x for x in server.log if x[0] == "DELETE"]
    assert (d / "ckpt" / "ckpt-10.pt").exists()


@pytest.mark.parametrize("change, match", [
    ({"ledger": "/etc/cron.d/poc"}, "lost-node ledger"),
    ({"owner": "x,poc/run-id!=y"}, "not an owner id"),
    ({"cluster": {"platform": "k8s", "server": "https://prod.example.com:6443", "ca_sha256": None}},
     "another Kubernetes cluster"),
])
def test_a_record_naming_another_ledger_owner_or_cluster_is_refused(tmp_path, change, match):
    server = FakeApiServer()
    be, cfg = backend(server, checkpoint_root=str(tmp_path))
    mine = server.put("JobSet", "k8s-clean-01", labels("team-a", owner=ALICE))
    h = _native_handle(be, cfg, tmp_path, **change)
    with pytest.raises(BackendError, match=match):
        be.cancel(h)
    assert server.objects[("JobSet", "k8s-clean-01")] == mine and not [x for x in server.log if x[0] == "DELETE"]
