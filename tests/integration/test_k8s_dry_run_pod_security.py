"""`poc validate --server-dry-run` asks Pod Security admission about the pods, on the real native cluster.

Pod Security admission judges Pods, not JobSets: in a namespace labelled
pod-security.kubernetes.io/enforce=baseline, a JobSet whose pods add IPC_LOCK is accepted, and its Jobs
then fail to create pods. harness/backends/k8s/dryrun.py therefore also sends each pod template as a Pod
(dryRun=All). The test makes a namespace of its own at level baseline (deleted after) and shows that the
command refuses a config whose pods add IPC_LOCK there, with Pod Security's words, and passes it without;
and that an identity whose Role lacks `create` on pods (a ServiceAccount of the test's namespace, bound
to the rights a run needs, check/k8s.py's list) gets a verdict saying the pods were not judged, not a
refusal. The checkpoints are on a PVC (`checkpoint_pvc`): baseline refuses the hostPath the native
cluster uses otherwise, and a dry-run does not need the claim to exist.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from _poc import poc_argv

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness import config, scenarios  # noqa: E402
from harness.backends.k8s import dryrun  # noqa: E402
from harness.errors import ClusterError  # noqa: E402
from harness.render import rbac  # noqa: E402

SA = "poc-no-pods"
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="module")
def cluster():
    from harness.clusters import native_k8s as nk
    last = None
    for _attempt in range(3):   # the cluster's owner may be restarting it: be patient
        try:
            return nk.up(nodes=3) if not nk.is_up() else nk.info()
        except ClusterError as exc:
            last = exc
            time.sleep(10)
    pytest.fail(f"the native cluster did not come up: {last}")


@pytest.fixture(scope="module")
def baseline_ns(cluster):
    """A namespace at Pod Security level baseline, with its default ServiceAccount in place (the
    ServiceAccount admission refuses a pod in a namespace whose `default` the controller has not made yet)."""
    from kubernetes import client
    from kubernetes import config as kconfig
    api = kconfig.new_client_from_config(config_file=str(cluster.kubeconfig))
    core = client.CoreV1Api(api)
    ns = f"poc-psa-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns, "labels": {"poc/test": "pod-security",
                                                                PSA_ENFORCE: "baseline"}}})
    try:
        deadline = time.monotonic() + 60
        while not [s for s in core.list_namespaced_service_account(ns).items if s.metadata.name == "default"]:
            assert time.monotonic() < deadline, f"no default ServiceAccount in {ns} after 60 s"
            time.sleep(0.5)
        yield ns, api
    finally:
        core.delete_namespace(ns)
        api.close()


def poc_config(tmp_path: Path, ns: str, kubeconfig: Path, capabilities: list[str]) -> Path:
    data = {"campaign": "psa", "platforms": ["k8s"], "faults": [],
            "kubernetes": {"kubeconfig": str(kubeconfig), "namespace": ns, "image": "registry.example.com/t:1",
                           "checkpoint_pvc": "poc-ckpt", "pod": {"capabilities": capabilities}}}
    path = tmp_path / f"psa-{'-'.join(capabilities) or 'none'}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(poc_argv("validate", "--server-dry-run", "--json", "--config", str(path)),
                          capture_output=True, text=True, timeout=300, check=False)


def test_pods_that_add_ipc_lock_are_refused_under_baseline(cluster, baseline_ns, tmp_path):
    ns, _ = baseline_ns
    t0 = time.monotonic()
    proc = validate(poc_config(tmp_path, ns, cluster.kubeconfig, ["IPC_LOCK"]))
    print(f"poc validate --server-dry-run (IPC_LOCK, baseline): {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    err = next(ln for ln in lines if ln.startswith("ERROR "))
    assert f"refused Pod {ns}/k8s-clean-01-w-0-0 (the pod template of replicated job w" in err, err
    assert 'HTTP 403:' in err and 'violates PodSecurity "baseline:latest": non-default capabilities' in err, err
    assert '"IPC_LOCK"' in err, err
    tip = lines[lines.index(err) + 1]
    assert tip.startswith(f"TIP namespace {ns} enforces Pod Security level 'baseline' (its label "
                          f"{PSA_ENFORCE})"), tip
    assert "drop kubernetes.pod.capabilities (IPC_LOCK)" in tip and "level 'privileged'" in tip, tip
    assert "Traceback" not in proc.stderr


def test_the_same_pods_without_ipc_lock_pass_under_baseline(cluster, baseline_ns, tmp_path):
    ns, _ = baseline_ns
    proc = validate(poc_config(tmp_path, ns, cluster.kubeconfig, []))
    assert proc.returncode == 0, proc.stderr[-3000:]
    dry = json.loads(proc.stdout)["server_dry_run"]
    assert dry["ok"] and [v["kind"] for v in dry["objects"]] == ["ConfigMap", "JobSet", "Pod"], dry
    pod = dry["objects"][2]
    assert pod["ok"] and "status" not in pod and "judged" not in pod, pod


def _token_kubeconfig(api, ns: str, cluster, path: Path) -> Path:
    """A kubeconfig for ServiceAccount SA of ns, bound to a Role with the rights a run needs (no pod
    create), through a short-lived token from the TokenRequest API."""
    from kubernetes import client
    core, rb = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": SA}})
    rules = rbac.role_rules()
    assert "create" not in next(r for r in rules if r["resources"] == ["pods"])["verbs"]
    rb.create_namespaced_role(ns, {"metadata": {"name": SA}, "rules": rules})
    rb.create_namespaced_role_binding(ns, {"metadata": {"name": SA},
                                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                      "name": SA},
                                          "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": ns}]})
    token = core.create_namespaced_service_account_token(
        SA, ns, {"spec": {"expirationSeconds": 600}}).status.token
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = admin["clusters"][0]["cluster"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "native", "cluster": server}],
        "users": [{"name": SA, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "native", "user": SA, "namespace": ns}}]}))
    path.chmod(0o600)
    return path


def test_an_identity_that_may_not_create_pods_gets_a_note(cluster, baseline_ns, tmp_path):
    """The JobSet verdicts stand; the pod's says it was not judged (RBAC's 403, not admission's)."""
    ns, api = baseline_ns
    kubeconfig = _token_kubeconfig(api, ns, cluster, tmp_path / "sa-kubeconfig")
    cfg = config.load(poc_config(tmp_path, ns, kubeconfig, ["IPC_LOCK"]))
    deadline = time.monotonic() + 30
    while True:   # the RoleBinding reaches the authorizer's cache within moments
        result = dryrun.validate_config(cfg, scenarios.submitted_specs(cfg, "k8s"))
        if result["objects"][1]["ok"] or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert dryrun.failure(result) is None, dryrun.failure(result)
    cm, js, pod = result["objects"]
    assert cm["ok"] and js["ok"] and "status" not in js, result
    assert pod["kind"] == "Pod" and pod["ok"] and pod["judged"] is False and pod["status"] == 403, pod
    assert f'User "system:serviceaccount:{ns}:{SA}" cannot create resource "pods"' in pod["message"], pod
    assert pod["note"] == dryrun.NOT_JUDGED
