"""Server-side dry-run (harness/backends/k8s/dryrun.py) against a recorded-shape API server.
The refusal text is what the native cluster (v1.34, JobSet v0.10.1) answered for a misspelt field
under fieldValidation=Strict; tests/integration/test_k8s_dry_run.py runs it against the cluster."""
from __future__ import annotations

import json

from kubernetes import client
from kubernetes.client import rest

from harness import config, spec
from harness.backends.k8s import KubernetesBackend, dryrun
from harness.backends.k8s.api import K8sClient
from harness.scenarios import submitted_specs

STRICT_ERROR = ('JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: '
                'unknown field "spec.network.enableDnsHostnames"')


class _Resp:
    def __init__(self, status: int, body: dict):
        self.status, self.reason = status, "x"
        self.data, self.headers = json.dumps(body).encode(), {"content-type": "application/json"}


class Recorder:
    def __init__(self, jobset_status: int = 201, message: str = ""):
        self.urls, self.jobset_status, self.message = [], jobset_status, message

    def request(self, method, url, *a, body=None, **kw):
        self.urls.append((method, url))
        if "jobsets" in url and self.jobset_status >= 400:
            return rest.RESTResponse(_Resp(self.jobset_status, {"kind": "Status", "code": self.jobset_status,
                                                                "message": self.message}))
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
    assert out["ok"] and [v["kind"] for v in out["objects"]] == ["ConfigMap", "JobSet"]
    assert [m for m, _ in rec.urls] == ["POST", "POST"]
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
