"""Cleaning up a run's files on the cluster: the keep_run_files decisions, the paths that may be
removed (and no other), the Kubernetes cleanup pod, and what the pipeline records."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from support.fakes import ScriptedBackend, SimClock

from harness import config
from harness.backends.base import Handle, keep_reason
from harness.backends.k8s import cleanup as kc
from harness.backends.k8s.backend import KubernetesBackend
from harness.backends.slurm import SlurmBackend
from harness.backends.slurm.guard import run_dir_to_remove
from harness.context import RunContext
from harness.errors import BackendError
from harness.pipeline import execute
from harness.render import cleanup as rc
from harness.render import owned_dir
from harness.spec import build
from harness.store import Store
from harness.transports import Result


@pytest.mark.parametrize("ok, keep, kept", [
    (True, "on_failure", False), (False, "on_failure", True),
    (True, "always", True), (False, "always", True),
    (True, "never", False), (False, "never", False),
])
def test_keep_run_files_decides(ok, keep, kept):
    assert (keep_reason(ok, keep) is not None) is kept


# ---------------------------------------------------------------- Slurm

class Recording:
    name = "recording"

    def __init__(self):
        self.calls: list[list[str]] = []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        self.calls.append([str(a) for a in argv])
        return Result(tuple(argv), 0, "", "")

    def describe(self):
        return {}

    def close(self):
        pass


def slurm_handle(run_dir="/shared/poc/camp/slurm-clean-01", campaign="camp", run_id="slurm-clean-01", owner=""):
    return Handle("slurm", run_id, ["5"], 0.0, data={"job_id": "5", "run_dir": run_dir, "campaign": campaign,
                                                      "owner": owner, "events_dir": f"{run_dir}/events",
                                                      "lost_nodes": []})


def slurm_backend():
    return SlurmBackend(config.from_mapping({"platforms": ["slurm"]}).slurm, Recording())


def test_slurm_removes_the_run_directory_as_argv_after_a_clean_run():
    be = slurm_backend()
    out = be.cleanup(slurm_handle(), ok=True, keep="on_failure")
    assert be.t.calls == [owned_dir.owned_dir_argv("remove", "/shared/poc/camp/slurm-clean-01", "")]
    assert out == {"removed": ["/shared/poc/camp/slurm-clean-01"], "kept": []}


def test_a_campaigns_run_directory_is_keyed_by_its_token():
    be = slurm_backend()
    h = slurm_handle("/shared/poc/camp-1a2b3c4d/slurm-clean-01", owner="1a2b3c4d")
    assert be.cleanup(h, ok=True, keep="never")["removed"] == ["/shared/poc/camp-1a2b3c4d/slurm-clean-01"]
    assert be.t.calls[0][-2:] == ["/shared/poc/camp-1a2b3c4d/slurm-clean-01", "1a2b3c4d"]
    # the token is part of the only path that may be removed: the untokened directory is another campaign's
    with pytest.raises(BackendError, match="refusing to remove"):
        be.cleanup(slurm_handle(owner="1a2b3c4d"), ok=True, keep="never")


def test_slurm_keeps_a_failed_runs_directory_and_says_why():
    be = slurm_backend()
    out = be.cleanup(slurm_handle(), ok=False, keep="on_failure")
    assert be.t.calls == [] and out["kept"] == ["/shared/poc/camp/slurm-clean-01"] and "on_failure" in out["reason"]


@pytest.mark.parametrize("run_dir, campaign", [
    ("/shared/poc/camp/../../etc", "camp"),                 # climbs out
    ("/shared/poc/camp", "camp"),                           # the campaign, not the run
    ("/shared/poc", "camp"),
    ("/elsewhere/camp/slurm-clean-01", "camp"),             # another root
    ("/shared/poc/other/slurm-clean-01", "camp"),           # another campaign
    ("/shared/poc/camp/slurm-clean-01", ""),                # an in-flight handle from before campaign was kept
    ("/shared/poc/camp/slurm-clean-01", ".."),
])
def test_slurm_removes_nothing_outside_workdir_campaign_run_id(run_dir, campaign):
    be = slurm_backend()
    with pytest.raises(BackendError, match="refusing to remove"):
        be.cleanup(slurm_handle(run_dir, campaign), ok=True, keep="never")
    assert be.t.calls == []


def test_run_dir_check_accepts_a_home_relative_workdir():
    assert run_dir_to_remove("~/poc/c/r1", "~/poc/", "c", "r1") == "~/poc/c/r1"
    with pytest.raises(BackendError):
        run_dir_to_remove("~/poc/c/r1", "/", "c", "r1")


# ---------------------------------------------------------------- Kubernetes: native hostPath

def k8s_backend(tmp_path, pvc=None, local=True, **k8s):
    cfg = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": "img:1", **k8s}})
    return KubernetesBackend(cfg.kubernetes, client=SimpleNamespace(own_core=None), image="img:1",
                             checkpoint_root=str(tmp_path / "ckpt"), checkpoint_pvc=pvc, local_cluster=local)


def k8s_handle(path, pvc=None, campaign="camp", run_id="k8s-clean-01"):
    return Handle("k8s", run_id, [f"poc/{run_id}"], 0.0,
                  data={"namespace": "poc", "name": run_id, "campaign": campaign, "checkpoint_path": str(path),
                        "checkpoint_pvc": pvc, "lost_nodes": [], "cordoned": []})


def test_native_hostpath_sub_path_is_removed_after_a_clean_run_and_kept_after_a_failed_one(tmp_path):
    be = k8s_backend(tmp_path)
    runs = tmp_path / "ckpt" / "camp"
    for rid in ("k8s-clean-01", "k8s-clean-02"):
        (runs / rid / "events").mkdir(parents=True)
        (runs / rid / "events" / "rank0.jsonl").write_text("{}\n")
    out = be.cleanup(k8s_handle(runs / "k8s-clean-01"), ok=True, keep="on_failure")
    assert out == {"removed": [str(runs / "k8s-clean-01")], "kept": []} and not (runs / "k8s-clean-01").exists()
    out = be.cleanup(k8s_handle(runs / "k8s-clean-02", run_id="k8s-clean-02"), ok=False, keep="on_failure")
    assert out["kept"] == [str(runs / "k8s-clean-02")] and (runs / "k8s-clean-02" / "events").exists()
    be.cleanup(k8s_handle(runs / "k8s-clean-02", run_id="k8s-clean-02"), ok=False, keep="never")
    assert not runs.exists()   # the campaign's directory went with its last run


@pytest.mark.parametrize("path", ["{root}", "{root}/camp", "{root}/camp/../camp2/k8s-clean-01",
                                  "/tmp/camp/k8s-clean-01", "{root}/camp/k8s-clean-01/ckpt"])
def test_native_hostpath_removes_nothing_but_the_runs_directory(tmp_path, path):
    be = k8s_backend(tmp_path)
    root = tmp_path / "ckpt"
    (root / "camp" / "k8s-clean-01").mkdir(parents=True)
    with pytest.raises(BackendError, match="refusing to remove"):
        be.cleanup(k8s_handle(path.format(root=root)), ok=True, keep="never")
    assert (root / "camp" / "k8s-clean-01").exists()


@pytest.mark.parametrize("mark, removed", [("aa11", True), ("bb22", False), (None, False)])
def test_native_hostpath_goes_only_with_the_campaigns_owner_mark(tmp_path, mark, removed):
    be = k8s_backend(tmp_path)
    d = tmp_path / "ckpt" / "camp-aa11" / "k8s-clean-01"
    (d / "ckpt").mkdir(parents=True)
    if mark is not None:
        (d / owned_dir.OWNER_MARK).write_text(mark)
    h = k8s_handle(d)
    h.data["owner"] = "aa11"
    out = be.cleanup(h, ok=True, keep="never")
    assert (not d.exists()) is removed and bool(out["removed"]) is removed
    if not removed:
        assert out["kept"] == [str(d)] and "owner mark" in out["reason"] and (d / "ckpt").exists()


def test_hostpath_on_a_real_clusters_nodes_is_kept_with_the_reason(tmp_path):
    be = k8s_backend(tmp_path, local=False)
    out = be.cleanup(k8s_handle("/data/poc/camp/k8s-clean-01"), ok=True, keep="on_failure")
    assert out["removed"] == [] and "not reachable from here" in out["reason"]


# ---------------------------------------------------------------- Kubernetes: PVC cleanup pod

def test_cleanup_pod_is_placed_and_permitted_like_the_run():
    k = config.from_mapping({"platforms": ["k8s"], "kubernetes": {
        "image": "reg/pytorch:1", "namespace": "team-a", "pod": {
            "node_selector": {"nvidia.com/gpu.present": "true"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priority_class": "batch-low", "service_account": "trainer", "image_pull_secrets": ["regcred"],
            "labels": {"team": "a"}}}}).kubernetes
    pod = rc.cleanup_pod(k, "reg/pytorch:1", "shared-ckpt", "camp", "k8s-clean-01")
    spec = pod["spec"]
    assert pod["metadata"] == {"name": "k8s-clean-01-cleanup", "namespace": "team-a",
                               "labels": {"team": "a", "poc/campaign": "camp", "poc/run-id": "k8s-clean-01",
                                          "poc/role": "cleanup"}}
    (c,) = spec["containers"]
    assert c["command"] == owned_dir.owned_dir_argv("remove", "/poc-run/camp/k8s-clean-01", "")
    assert c["image"] == "reg/pytorch:1"
    assert c["volumeMounts"] == [{"name": "run", "mountPath": "/poc-run"}]          # the whole claim, no subPath
    assert spec["volumes"] == [{"name": "run", "persistentVolumeClaim": {"claimName": "shared-ckpt"}}]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert (spec["priorityClassName"], spec["serviceAccountName"], spec["imagePullSecrets"]) == (
        "batch-low", "trainer", [{"name": "regcred"}])
    assert spec["restartPolicy"] == "Never" and "kueue.x-k8s.io/queue-name" not in pod["metadata"]["labels"]
    with pytest.raises(ValueError):
        rc.cleanup_pod(k, "img", "pvc", "camp", "../x")
    assert len(rc.pod_name("r" * 70)) <= 63


class PodApi:
    """The few CoreV1Api calls the cleanup pod needs: one pod name, with uids and labels, and uid
    preconditions on delete as the API server has them; phases as the API would report them."""

    def __init__(self, phases):
        self.phases, self.log = list(phases), []
        self.pod: dict | None = None
        self.exit_code = 1
        self.conditions: list[dict] = []
        self.uids = (f"pod-uid-{n}" for n in range(1, 100))

    @property
    def exists(self) -> bool:
        return self.pod is not None

    def put(self, labels: dict) -> dict:
        """A pod of the cleanup pod's name made by someone (not through the harness's create)."""
        self.pod = {"metadata": {"name": "k8s-clean-01-cleanup", "uid": next(self.uids), "labels": dict(labels)}}
        return self.pod

    def create_namespaced_pod(self, ns, body, _request_timeout=None):
        from kubernetes.client.rest import ApiException
        if self.pod is not None:
            raise ApiException(status=409, reason="AlreadyExists")
        self.log.append(("create", body["metadata"]["name"]))
        self.put(body["metadata"]["labels"])
        return dict(self.pod)

    def read_namespaced_pod(self, name, ns, _request_timeout=None):
        if not self.exists:
            from kubernetes.client.rest import ApiException
            raise ApiException(status=404)
        phase = self.phases.pop(0) if len(self.phases) > 1 else self.phases[0]
        meta = dict(self.pod["metadata"])
        if phase in ("Succeeded", "Failed"):
            code = 0 if phase == "Succeeded" else self.exit_code
            return {"metadata": meta, "status": {"phase": phase, "containerStatuses": [
                {"state": {"terminated": {"exitCode": code}}}]}}
        return {"metadata": meta, "status": {"phase": phase, "conditions": self.conditions}}

    def read_namespaced_pod_log(self, name, ns, _request_timeout=None):
        return "rm: cannot remove '/poc-run/camp/k8s-clean-01': Permission denied\n"

    def delete_namespaced_pod(self, name, ns, body=None, _request_timeout=None):
        from kubernetes.client.rest import ApiException
        if self.pod is None:
            raise ApiException(status=404)
        pre = getattr(body, "preconditions", None)
        uid = self.pod["metadata"]["uid"]
        if pre is not None and pre.uid != uid:
            raise ApiException(status=409, reason="Conflict")
        self.log.append(("delete", name, pre.uid if pre is not None else None))
        self.pod = None


class Client:
    def __init__(self, api):
        self.api = api
        self.counted: list[str] = []

    def count(self, what, n=1):
        self.counted.append(what)

    def core(self):
        return self.api

    def to_dict(self, o):
        return o

    def call(self, what, fn, *a, missing_ok=False, conflict_ok=False, **kw):
        from kubernetes.client.rest import ApiException

        from harness.backends.k8s.api import CONFLICT
        try:
            return fn(*a, _request_timeout=1, **kw)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            if conflict_ok and exc.status == 409:
                return CONFLICT
            raise


def _pod_run(phases, timeout_s=30, api=None, owner=""):
    k = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": "img:1"}}).kubernetes
    api, clock = api or PodApi(phases), SimClock(0.0)
    return api, lambda: kc.run_cleanup_pod(Client(api), k, "img:1", "ckpt", "camp", "k8s-clean-01", owner=owner,
                                           timeout_s=timeout_s, clock=clock, sleep=clock.sleep)


@pytest.mark.parametrize("mark, removed", [("aa11", True), ("bb22", False), (None, False)])
def test_the_cleanup_pods_command_removes_only_a_directory_with_the_campaigns_mark(tmp_path, mark, removed):
    """The pod's own argv, run by a real sh on a real directory as the pod would on the claim."""
    import subprocess
    k = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": "img:1"}}).kubernetes
    argv = rc.cleanup_pod(k, "img:1", "ckpt", "camp-aa11", "k8s-clean-01", "aa11")["spec"]["containers"][0]["command"]
    d = tmp_path / "camp-aa11" / "k8s-clean-01"
    (d / "ckpt").mkdir(parents=True)
    if mark is not None:
        (d / owned_dir.OWNER_MARK).write_text(mark)
    argv = [str(d) if a == "/poc-run/camp-aa11/k8s-clean-01" else a for a in argv]
    rc_ = subprocess.run(argv, check=False).returncode
    assert (rc_ == 0, d.exists()) == ((True, False) if removed else (False, True))
    assert removed or rc_ == owned_dir.MARK_NOT_OURS


def test_the_cleanup_pod_checks_the_runs_keyed_mark_and_carries_the_owner_label():
    k = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": "img:1"}}).kubernetes
    pod = rc.cleanup_pod(k, "img:1", "ckpt", "camp-aa11", "k8s-clean-01", "aa11", mark="f00d" * 8)
    assert pod["spec"]["containers"][0]["command"] == owned_dir.owned_dir_argv(
        "remove", "/poc-run/camp-aa11/k8s-clean-01", "f00d" * 8)
    assert pod["metadata"]["labels"]["poc/owner"] == "aa11"
    with pytest.raises(ValueError, match="not an owner id"):
        rc.cleanup_pod(k, "img:1", "ckpt", "camp", "k8s-clean-01", "x,poc/run-id=y")


def test_a_cleanup_pod_that_finds_another_owner_keeps_the_directory():
    api, go = _pod_run(["Failed"])
    api.exit_code = owned_dir.MARK_NOT_OURS
    out = go()
    assert out["removed"] == [] and out["kept"] == ["pvc ckpt:/poc-run/camp/k8s-clean-01"]
    assert "owner mark" in out["reason"] and not api.exists


def test_cleanup_pod_runs_to_success_and_is_deleted_by_its_uid():
    api, go = _pod_run(["Pending", "Running", "Succeeded"])
    out = go()
    assert out["removed"] == ["pvc ckpt:/poc-run/camp/k8s-clean-01"] and out["pod"] == "k8s-clean-01-cleanup"
    assert api.log == [("create", "k8s-clean-01-cleanup"), ("delete", "k8s-clean-01-cleanup", "pod-uid-1")]
    assert not api.exists


@pytest.mark.parametrize("labels", [
    {"poc/campaign": "camp", "poc/run-id": "k8s-clean-01", "poc/role": "cleanup", "poc/owner": "bb22"},  # another user
    {"poc/campaign": "camp", "poc/run-id": "k8s-clean-01", "poc/role": "cleanup"},      # an older harness's
    {"app": "theirs"},                                                                 # not the harness's at all
])
def test_a_pod_of_the_cleanup_pods_name_that_is_not_this_campaigns_is_left_and_refused(labels):
    """Two users, one namespace, the same run id: the other's cleanup pod is neither deleted nor adopted."""
    api = PodApi(["Pending"])
    theirs = api.put(labels)
    _, go = _pod_run(["Pending"], api=api, owner="aa11")
    with pytest.raises(BackendError, match="not this campaign's") as e:
        go()
    assert "kubectl delete pod -n poc k8s-clean-01-cleanup" in e.value.tip
    assert api.pod is theirs and api.log == []          # not deleted, nothing created


def test_this_campaigns_leftover_cleanup_pod_is_deleted_by_its_uid_first():
    api = PodApi(["Succeeded"])
    old = api.put({"poc/campaign": "camp", "poc/run-id": "k8s-clean-01", "poc/role": "cleanup", "poc/owner": "aa11"})
    _, go = _pod_run(["Succeeded"], api=api, owner="aa11")
    assert go()["removed"]
    assert api.log[0] == ("delete", "k8s-clean-01-cleanup", old["metadata"]["uid"])
    assert [x[0] for x in api.log] == ["delete", "create", "delete"] and api.log[2][2] != old["metadata"]["uid"]


@pytest.mark.parametrize("phases, match", [(["Failed"], "failed after .*Permission denied"),
                                           (["Pending"], "pending after 30 s")])
def test_cleanup_pod_that_fails_or_hangs_is_an_error_and_is_deleted(phases, match):
    api, go = _pod_run(phases)
    with pytest.raises(BackendError, match=match):
        go()
    assert api.log[-1][0] == "delete" and not api.exists


# the kube-scheduler's words for a claim that does not exist (tests/fixtures/k8s/mistakes)
NO_CLAIM = '0/3 nodes are available: persistentvolumeclaim "ckpt" not found. not found'


@pytest.mark.parametrize("mode", ["prepare", "remove"])
def test_a_cleanup_pod_on_a_claim_that_does_not_exist_fails_at_once_in_the_schedulers_words(mode):
    k = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": "img:1"}}).kubernetes
    api, clock = PodApi(["Pending"]), SimClock(0.0)
    api.conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": NO_CLAIM}]
    with pytest.raises(BackendError) as e:
        kc.run_cleanup_pod(Client(api), k, "img:1", "ckpt", "camp", "k8s-clean-01", timeout_s=180,
                           clock=clock, sleep=clock.sleep, mode=mode)
    assert NO_CLAIM in str(e.value) and "pending after 0 s" in str(e.value)
    assert "kubernetes.checkpoint_pvc" in e.value.tip
    assert api.log[-1][0] == "delete" and not api.exists


def test_a_cleanup_pod_unschedulable_for_now_waits_and_names_why_at_the_timeout():
    api, go = _pod_run(["Pending"])
    api.conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                       "message": "0/3 nodes are available: 3 Insufficient cpu."}]
    with pytest.raises(BackendError, match=r"pending after 30 s \(0/3 nodes are available: 3 Insufficient cpu"):
        go()


# ---------------------------------------------------------------- the pipeline

class CleaningBackend(ScriptedBackend):
    def __init__(self, outcome, **kw):
        super().__init__(**kw)
        self.outcome, self.asked = outcome, []

    def cleanup(self, handle, ok, keep):
        self.asked.append((handle.run_id, ok, keep, list(self.cancelled)))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def _execute(tmp_path: Path, backend, **cfg_over):
    cfg = config.from_mapping({"platforms": ["local"], "faults": [], **cfg_over})
    store = Store(tmp_path, cfg.campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    clock = SimClock()
    ctx = RunContext(backend, store, cfg, {}, clock=clock, sleep=clock.sleep)
    try:
        return execute(ctx, build(cfg, "local", "local-clean-01", None))
    finally:
        store.close()


def test_pipeline_cleans_up_after_collect_and_cancel_and_records_it(tmp_path):
    be = CleaningBackend({"removed": ["/x"], "kept": []})
    rec = _execute(tmp_path, be, keep_run_files="never")
    assert rec["status"] == "ok" and rec["cleanup"] == {"removed": ["/x"], "kept": []}
    assert be.asked == [("local-clean-01", True, "never", ["local-clean-01"])]   # after cancel


def test_a_cleanup_failure_is_a_warning_not_a_failed_run(tmp_path):
    rec = _execute(tmp_path, CleaningBackend(BackendError("cleanup pod poc/x failed")))
    assert rec["status"] == "ok" and rec["cleanup"]["warning"] == "BackendError: cleanup pod poc/x failed"
