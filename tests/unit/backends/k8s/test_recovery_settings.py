"""What restarts a Kubernetes run, recorded beside it: from the run's own JobSet its failurePolicy
(maxRestarts, restartStrategy, rules) and its Jobs' backoffLimit (the JobSets recorded on the native
cluster); and, by preflight, Kueue's waitForPodsReady from its configuration: the native cluster's file in
its state dir, the ConfigMap of an ordinary install, or why it could not be read (a shared cluster's user
may not read kueue-system)."""
from __future__ import annotations

import copy
import json
import types

import pytest
import yaml
from kubernetes.client.rest import ApiException
from support.paths import FIXTURES

from harness.backends.k8s import preflight
from harness.clusters import native_k8s
from harness.clusters.k8s import components
from harness.clusters.k8s.layout import Layout
from harness.errors import BackendError

RECORDED = FIXTURES / "k8s" / "recorded"


def jobset(name: str = "k8s-kill-rank-01") -> dict:
    return json.loads((RECORDED / f"{name}.raw.json").read_text())["jobset"]


@pytest.mark.parametrize("name", ["k8s-clean-01", "k8s-kill-rank-01", "k8s-delete-pod-02"])
def test_the_failure_policy_comes_from_the_runs_own_jobset(name):
    fp = preflight.failure_policy_of(jobset(name))
    assert fp == {"source": "the run's JobSet spec.failurePolicy", "set": True, "maxRestarts": 3,
                  "restartStrategy": "Recreate", "rules": [], "job_backoff_limit": {"w": 0}}


def test_rules_and_a_jobset_without_a_policy_are_recorded_as_they_are():
    js = copy.deepcopy(jobset())
    rule = {"name": "no-restart-on-config-error", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    js["spec"]["failurePolicy"]["rules"] = [rule]
    assert preflight.failure_policy_of(js)["rules"] == [rule]
    del js["spec"]["failurePolicy"]
    fp = preflight.failure_policy_of(js)
    assert fp["set"] is False and fp["maxRestarts"] is None
    assert preflight.failure_policy_of(None) is None and preflight.failure_policy_of({}) is None


# --- Kueue's waitForPodsReady: what may evict and requeue a run whose pods are not ready in time

class Core:
    """read_namespaced_config_map as the API answers it: the ConfigMap, or an HTTP error with its body."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def read_namespaced_config_map(self, name, ns, **kw):
        self.asked.append((ns, name))
        if isinstance(self.answer, int):
            exc = ApiException(status=self.answer, reason="Forbidden")
            exc.body = json.dumps({"kind": "Status", "code": self.answer,
                                   "message": f'configmaps "{name}" is forbidden: User "poc-user" cannot get '
                                              f'resource "configmaps" in API group "" in the namespace "{ns}"'})
            raise exc
        return types.SimpleNamespace(data=self.answer)


class Client:
    def __init__(self, answer):
        self._core = Core(answer)

    def core(self):
        return self._core

    def call(self, what, fn, *args, **kw):
        return fn(*args, **kw)


def test_a_shared_clusters_user_records_that_kueues_configuration_is_unreadable():
    client = Client(403)
    out = preflight.kueue_settings(client, local=False)
    assert client.core().asked == [("kueue-system", "kueue-manager-config")]
    assert out["kueue_config"]["source"] == ("ConfigMap kueue-system/kueue-manager-config, key "
                                             "controller_manager_config.yaml")
    assert out["kueue_config"]["unreadable"].startswith('HTTP 403: configmaps "kueue-manager-config" is forbidden')
    assert "kueue_requeue_backoff" not in out     # the decision summary says "not recorded"


JOBSETS = {"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}}


def _configmap(conf: dict, integrations: dict = JOBSETS) -> dict:
    return {"controller_manager_config.yaml": yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta1",
                                                             "kind": "Configuration", **integrations, **conf})}


def test_waitforpodsready_from_the_configmap():
    wait = {"enable": True, "timeout": "10m", "recoveryTimeout": "3m", "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 30}}
    out = preflight.kueue_settings(Client(_configmap({"waitForPodsReady": wait, "manageJobsWithoutQueueName": True})),
                                   local=False)
    assert out["kueue_config"]["waitForPodsReady"] == wait          # only this block is kept
    assert out["kueue_requeue_backoff"] == ("after timeout 10m, recoveryTimeout 3m: backoffBaseSeconds 30 "
                                            "(the rest at Kueue's defaults)")
    out = preflight.kueue_settings(Client(_configmap({"waitForPodsReady": {"enable": True}})), local=False)
    assert out["kueue_requeue_backoff"] == ("after timeout 5m (default): Kueue's defaults (backoffBaseSeconds 60, "
                                            "backoffMaxSeconds 3600, no backoffLimitCount)")
    out = preflight.kueue_settings(Client(_configmap({})), local=False)
    assert out["kueue_config"]["waitForPodsReady"] is None
    assert out["kueue_requeue_backoff"].startswith("none: waitForPodsReady off")
    assert "unreadable" in preflight.kueue_settings(Client({}), local=False)["kueue_config"]   # no such key


def test_the_native_cluster_reads_the_config_it_started_kueue_with(tmp_path, monkeypatch):
    L = Layout(tmp_path)
    L.config.mkdir(parents=True)
    components.kueue_config(L)        # the file `poc cluster up --k8s` writes
    monkeypatch.setattr(native_k8s, "info", lambda *a, **k: types.SimpleNamespace(state_dir=tmp_path))
    out = preflight.kueue_settings(None, local=True)
    assert out["kueue_config"] == {"source": f"{L.config / 'kueue.yaml'} (the native cluster's kueue-manager --config)",
                                   "waitForPodsReady": None, "frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}
    (L.config / "kueue.yaml").unlink()
    assert "unreadable" in preflight.kueue_settings(None, local=True)["kueue_config"]


@pytest.mark.parametrize("integrations, said", [
    ({"integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob"]}}, "['batch/job', 'kubeflow.org/mpijob']"),
    ({}, "unset (Kueue default: batch/job only)"),
])
def test_a_kueue_that_does_not_manage_jobsets_is_refused_before_any_run_waits_on_it(integrations, said):
    """The JobSet is created suspended for Kueue to admit; without the jobset framework Kueue never does, and the
    run would wait out its queue timeout and be recorded as queued."""
    with pytest.raises(BackendError) as got:
        preflight.kueue_settings(Client(_configmap({}, integrations)), local=False)
    assert f"integrations.frameworks is {said}" in got.value.message
    assert "jobset.x-k8s.io/jobset" in got.value.tip
