"""Server-side dry-run (harness/backends/k8s/dryrun.py) against a recorded-shape API server.
The refusal texts are what the native cluster (v1.34, JobSet v0.10.1) answered: a misspelt field under
fieldValidation=Strict, and Pod Security admission's and RBAC's refusals of the dry-run Pod
(tests/fixtures/k8s/dry-run-pod/answers.json); the Pod built from a pod template is compared with a pod
the JobSet and Job controllers made there (tests/fixtures/k8s/recorded). tests/integration/test_k8s_dry_run.py
and test_k8s_dry_run_pod_security.py run it against the cluster."""
from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client import rest
from support.k8s_rest import ByMethod, Headers
from support.paths import FIXTURES

from harness import config, spec
from harness.backends.k8s import KubernetesBackend, dryrun
from harness.backends.k8s.api import K8sClient
from harness.scenarios import submitted_specs

STRICT_ERROR = ('JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: '
                'unknown field "spec.network.enableDnsHostnames"')


class _Resp(Headers):
    def __init__(self, status: int, body: dict):
        self.status, self.reason = status, "x"
        self.data, self.headers = json.dumps(body).encode(), {"content-type": "application/json"}


class Recorder(ByMethod):
    """Accepts every object, except a JobSet (jobset_status, message) or a Pod (pod_answer: a recorded
    Status) when given; keeps each request's method, URL and body."""

    def __init__(self, jobset_status: int = 201, message: str = "", pod_answer: dict | None = None):
        self.urls, self.jobset_status, self.message, self.pod_answer = [], jobset_status, message, pod_answer
        self.bodies: list = []

    def request(self, method, url, *a, body=None, **kw):
        self.urls.append((method, url))
        self.bodies.append(body)
        if "jobsets" in url and self.jobset_status >= 400:
            return rest.RESTResponse(_Resp(self.jobset_status, {"kind": "Status", "code": self.jobset_status,
                                                                "message": self.message}))
        if "/pods" in url and self.pod_answer is not None:
            return rest.RESTResponse(_Resp(self.pod_answer["code"], self.pod_answer))
        return rest.RESTResponse(_Resp(201, body or {}))

    def close(self):
        pass


def fake(rec: Recorder) -> K8sClient:
    conf = client.Configuration()
    conf.host = "https://shared.example.com:6443"
    api = client.ApiClient(conf)
    api.rest_client = rec
    return K8sClient("unused", api_client=api)


def cfg():
    return config.from_mapping({"platforms": ["k8s"], "faults": [],
                                "kubernetes": {"kubeconfig": "/nonexistent", "namespace": "team",
                                               "image": "registry.example.com/t/torch:2.4"}})


def validate(api: K8sClient) -> dict:
    c = cfg()
    return dryrun.validate_config(c, submitted_specs(c, "k8s"), api)


def test_every_object_is_sent_with_dry_run_all_and_strict_fields(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    rec = Recorder()
    out = validate(fake(rec))
    assert out["ok"] and [v["kind"] for v in out["objects"]] == ["ConfigMap", "JobSet", "Pod"]
    assert [m for m, _ in rec.urls] == ["POST", "POST", "POST"]
    assert rec.urls[2][1].split("?")[0].endswith("/api/v1/namespaces/team/pods")
    for _, url in rec.urls:
        assert "dryRun=All" in url and "fieldValidation=Strict" in url and "/namespaces/team/" in url
    assert dryrun.failure(out) is None


def test_a_refusal_is_an_error_with_the_api_servers_words(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    out = validate(fake(Recorder(400, STRICT_ERROR)))
    assert not out["ok"]
    err = dryrun.failure(out)
    assert "refused JobSet team/k8s-clean-01" in err.message and "enableDnsHostnames" in err.message
    assert "poc render" in err.tip


def test_forbidden_tip_names_the_rbac_file(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    err = dryrun.failure(validate(fake(Recorder(403, "jobsets is forbidden"))))
    assert "HTTP 403" in err.message and "rbac.yaml" in err.tip


def test_a_leftover_of_the_same_name_is_not_a_refusal():
    rec = Recorder(409, 'jobsets.jobset.x-k8s.io "k8s-clean-01" already exists')
    b = KubernetesBackend.from_config(cfg())
    job = b.render(spec.build(cfg(), "k8s", "k8s-clean-01", None)).payload
    assert all(v["ok"] for v in dryrun.dry_run(fake(rec), job))


# ------------------------------------------------------------------ the pod templates, as Pods

ANSWERS = json.loads((FIXTURES / "k8s" / "dry-run-pod" / "answers.json").read_text())
RECORDED_POD = json.loads((FIXTURES / "k8s" / "recorded" / "k8s-kill-rank-01.raw.json").read_text())["pods"][0]


def rendered_jobset(run_id="k8s-clean-01", namespace="team", scenario=None) -> dict:
    c = config.from_mapping({"platforms": ["k8s"], "campaign": "k8s-record", "faults": [],
                             "kubernetes": {"kubeconfig": "/nonexistent", "namespace": namespace,
                                            "image": "registry.example.com/t/torch:2.4"}})
    return KubernetesBackend.from_config(c).render(spec.build(c, "k8s", run_id, None, scenario)).payload.jobset


def test_the_pod_from_a_template_is_labelled_as_the_controllers_label_a_real_pod():
    """The recorded pod is the first pod of run k8s-kill-rank-01 in namespace poc: its Job's and JobSet's
    labels and annotations, host name and subdomain are what the dry-run Pod carries (the uids, unknown
    before anything is created, stand in; Kueue's workload annotation comes at admission, not here)."""
    js = rendered_jobset("k8s-kill-rank-01", "poc", "kill_rank")
    uid = "00000000-0000-4000-8000-000000000000"
    pod = dryrun.pod_from_template(js, js["spec"]["replicatedJobs"][0], uid)
    real = RECORDED_POD["metadata"]
    uids = {k for k, v in real["labels"].items() if v in (real["labels"]["controller-uid"],
                                                            real["labels"]["jobset.sigs.k8s.io/jobset-uid"])}
    assert uids == {"controller-uid", "batch.kubernetes.io/controller-uid", "jobset.sigs.k8s.io/jobset-uid"}
    assert {k: v for k, v in pod["metadata"]["labels"].items() if k not in uids} == \
        {k: v for k, v in real["labels"].items() if k not in uids and not k.startswith(("jobset.sigs.k8s.io/group",
                                                                                        "jobset.sigs.k8s.io/global",
                                                                                        "jobset.sigs.k8s.io/job-group"))}
    assert all(pod["metadata"]["labels"][k] == uid for k in uids)
    got_ann = pod["metadata"]["annotations"]
    assert set(got_ann) <= set(real["annotations"])
    assert {k: v for k, v in got_ann.items() if k not in uids} == \
        {k: v for k, v in real["annotations"].items() if k in got_ann and k not in uids}
    assert got_ann["jobset.sigs.k8s.io/job-key"] == real["annotations"]["jobset.sigs.k8s.io/job-key"]
    assert pod["metadata"]["generateName"] == real["generateName"]
    assert "name" not in pod["metadata"] and pod["metadata"]["namespace"] == "poc"
    for key in ("hostname", "subdomain", "restartPolicy", "affinity", "enableServiceLinks"):
        assert pod["spec"][key] == RECORDED_POD["spec"][key], key
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["containers"] == template["spec"]["containers"]
    assert pod["spec"]["volumes"] == template["spec"]["volumes"]
    assert "hostname" not in template["spec"]   # built on a copy: the JobSet sent is untouched


def test_the_pod_from_a_template_drops_what_a_created_pod_may_not_have():
    js = rendered_jobset()
    rjob = js["spec"]["replicatedJobs"][0]
    tmpl = rjob["template"]["spec"]["template"]
    tmpl["metadata"].update(name="x", uid="u", resourceVersion="1", ownerReferences=[{"kind": "Job"}])
    tmpl["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox:1"}]
    pod = dryrun.pod_from_template(js, rjob, "u1")
    assert set(pod["metadata"]) == {"generateName", "namespace", "labels", "annotations"}
    assert "ephemeralContainers" not in pod["spec"]


def test_a_pod_security_refusal_names_the_level_and_what_to_drop(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    out = validate(fake(Recorder(pod_answer=ANSWERS["baseline-ipc-lock-pvc"])))
    assert not out["ok"] and [v["ok"] for v in out["objects"]] == [True, True, False]
    err = dryrun.failure(out)
    assert err.message.startswith("the API server at https://shared.example.com:6443 refused Pod "
                                  "team/k8s-clean-01-w-0-0 (the pod template of replicated job w, sent as a bare Pod)")
    assert 'HTTP 403: pods "k8s-clean-01-w-0-0-5htx5" is forbidden: violates PodSecurity "baseline:latest"' \
        in err.message
    assert "namespace team enforces Pod Security level 'baseline' (its label pod-security.kubernetes.io/enforce)" \
        in err.tip
    assert "drop kubernetes.pod.capabilities (IPC_LOCK)" in err.tip and "level 'privileged'" in err.tip
    assert "rbac.yaml" not in err.tip   # a 403 from admission is not a missing right


@pytest.mark.parametrize("case, changes, level", [
    ("baseline-ipc-lock-hostpath", ["drop kubernetes.pod.capabilities (IPC_LOCK)", "set kubernetes.checkpoint_pvc"],
     "privileged"),
    ("baseline-hostpath", ["set kubernetes.checkpoint_pvc"], "privileged"),
    ("restricted-ipc-lock-pvc", ["drop kubernetes.pod.capabilities (IPC_LOCK)"], "privileged"),
    ("restricted-hostpath", ["set kubernetes.checkpoint_pvc"], "privileged"),
    # restricted's own demands (runAsNonRoot, seccompProfile, ...) are nothing the config sets
    ("restricted-pvc", ["the harness's pods do not set what this level demands"], "baseline"),
])
def test_each_recorded_pod_security_refusal_gets_its_own_tip(case, changes, level):
    tip = dryrun.pod_security_tip(ANSWERS[case]["message"], "team")
    assert all(c in tip for c in changes), tip
    assert f"level {level!r} there" in tip and f"level {case.split('-')[0]!r}" in tip
    if "IPC_LOCK" not in ANSWERS[case]["message"]:
        assert "capabilities" not in tip.split("):")[1].split(", or ask")[0]


def test_an_identity_that_may_not_create_pods_gets_a_note_not_a_refusal(tmp_path, monkeypatch):
    """A real submit needs no `create` on pods (the Jobs make them): without it the pods are not judged,
    and the ConfigMap and JobSet verdicts still stand."""
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    out = validate(fake(Recorder(pod_answer=ANSWERS["rbac-no-create-pods"])))
    assert out["ok"] and dryrun.failure(out) is None
    cm, js, pod = out["objects"]
    assert (cm["kind"], cm["ok"], js["kind"], js["ok"]) == ("ConfigMap", True, "JobSet", True)
    assert pod["ok"] and pod["judged"] is False and pod["status"] == 403
    assert "may not create pods" in pod["note"] and 'cannot create resource "pods"' in pod["message"]
    # a JobSet refusal is still one, whatever the pod's verdict
    out = validate(fake(Recorder(403, "jobsets is forbidden", pod_answer=ANSWERS["rbac-no-create-pods"])))
    assert not out["ok"] and "refused JobSet" in dryrun.failure(out).message


def test_any_other_pod_admission_refusal_is_one_too(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    sa = dict(ANSWERS["rbac-no-create-pods"], message='pods "k8s-clean-01-w-0-0-abcde" is forbidden: error looking '
                                                      'up service account team/trainer: serviceaccount "trainer" '
                                                      'not found')
    err = dryrun.failure(validate(fake(Recorder(pod_answer=sa))))
    assert "refused Pod team/k8s-clean-01-w-0-0" in err.message and "service account" in err.message
    assert "FailedCreate" in err.tip and "rbac.yaml" not in err.tip
