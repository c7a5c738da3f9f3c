"""The harness as a shared Kubernetes cluster's user: the native cluster's restricted user (a client
certificate bound only to the namespaced Role `poc render` prints, in namespace poc-gpu with its
LocalQueue; harness/clusters/k8s/tenant.py) runs preflight, the server-side dry-run, and an
impossible GPU request that must fail fast. About a minute."""
from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import pytest
import yaml
from _native import native_cluster, restricted_tenant

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness import config  # noqa: E402
from harness.backends.k8s import KubernetesBackend, dryrun  # noqa: E402
from harness.clusters.images import worker_ref  # noqa: E402
from harness.clusters.k8s.gpu_shape import GPU_TOLERATION  # noqa: E402
from harness.errors import BackendError  # noqa: E402
from harness.pipeline import campaign  # noqa: E402
from harness.scenarios import submitted_specs  # noqa: E402
from harness.store import Store  # noqa: E402


@pytest.fixture(scope="module")
def tenant() -> dict:
    return restricted_tenant(native_cluster())


def cfg_of(t: dict, name: str, nodes: int = 2, gpus: int = 2, priority: bool = True, **kube) -> config.Config:
    return config.from_mapping({
        "campaign": name, "platforms": ["k8s"], "faults": [], "repetitions": 1,
        "resources": {"nodes": nodes, "procs_per_node": gpus, "gpus_per_node": gpus, "cpus_per_node": 1,
                      "memory_mb": 1024},
        "workload": {"simulated_gpus": True, "steps": 10},
        "timeouts": {"queue_s": 240, "run_s": 300},
        "kubernetes": {"kubeconfig": t["kubeconfig"], "namespace": t["namespace"], "local_queue": t["local_queue"],
                       "image": worker_ref(), "image_pull_policy": "Never",
                       "pod": {"tolerations": [GPU_TOLERATION],
                               "priority_class": t["priority_class"] if priority else None}, **kube}})


def test_preflight_needs_no_cluster_scoped_reads(tenant):
    b = KubernetesBackend.from_config(cfg_of(tenant, "restricted-pf"))
    try:
        info = b.preflight()
    finally:
        b.close()
    v = info["visibility"]
    for key in ("crds", "namespace", "cluster_queue", "nodes"):
        assert v[key].startswith("forbidden: not needed"), (key, v)
    assert info["local_queue"] == tenant["local_queue"] and info["cluster_queue"] == tenant["cluster_queue"]


def test_missing_local_queue_tip_asks_the_admins(tenant):
    b = KubernetesBackend.from_config(cfg_of(tenant, "restricted-lq", local_queue="no-such-queue"))
    try:
        with pytest.raises(BackendError, match="does not exist") as e:
            b.preflight()
    finally:
        b.close()
    assert f"kubectl get localqueues -n {tenant['namespace']}" in e.value.tip and "ClusterQueue" not in e.value.tip


def test_server_dry_run_as_the_user(tenant):
    ok = cfg_of(tenant, "restricted-dry")
    out = dryrun.validate_config(ok, submitted_specs(ok, "k8s"))
    assert out["ok"], out
    # another team's namespace: the Role does not reach it
    other = cfg_of(tenant, "restricted-dry2", namespace="poc")
    bad = dryrun.validate_config(other, submitted_specs(other, "k8s"))
    err = dryrun.failure(bad)
    assert err is not None and "HTTP 403" in err.message and "rbac.yaml" in err.tip


def _one_failed_run(cfg: config.Config, results: Path) -> tuple[dict, float]:
    t0 = time.monotonic()
    recs = campaign(cfg, ["k8s"], Store(results, cfg.campaign), lambda p: KubernetesBackend.from_config(cfg),
                    resume=False)
    took = time.monotonic() - t0
    assert len(recs) == 1 and recs[0]["status"] == "failed", recs
    return recs[0]["error"], took


def test_more_gpus_than_a_node_has_fails_fast(tenant, tmp_path):
    """8 GPUs on 4-GPU nodes: Kueue admits it (the queue holds 8), the scheduler can place it nowhere;
    the user cannot list nodes, so the scheduler's own message decides. Not the 240 s queue timeout.
    Without the tenant's priority class: its preemptionPolicy Never makes the scheduler skip the
    preemption pass, whose per-node verdict ("Preemption is not helpful") is what tells "never" from
    "busy" (tests/unit/backends/k8s/test_state_impossible.py: such a pod waits for the queue timeout)."""
    err, took = _one_failed_run(cfg_of(tenant, "restricted-8gpu", nodes=1, gpus=8, priority=False), tmp_path)
    assert "no node can ever hold pod" in err["message"] and "Insufficient nvidia.com/gpu" in err["message"], err
    assert took < 90, f"took {took:.0f} s"


def test_more_gpus_than_the_queue_holds_fails_fast(tenant, tmp_path):
    err, took = _one_failed_run(cfg_of(tenant, "restricted-12gpu", nodes=3, gpus=4), tmp_path)
    assert "maximum capacity" in err["message"], err
    assert took < 90, f"took {took:.0f} s"


def _credentials(kubeconfig: str, into: Path) -> tuple[tuple[str, str], str]:
    """((cert, key), CA file) of a kubeconfig with embedded data, written to files for requests."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    user, cluster = doc["users"][0]["user"], doc["clusters"][0]["cluster"]
    out = []
    for name, key in (("cert", "client-certificate-data"), ("key", "client-key-data"),
                      ("ca", "certificate-authority-data")):
        p = into / f"{Path(kubeconfig).name}.{name}"
        p.write_bytes(base64.b64decode(cluster[key] if name == "ca" else user[key]))
        p.chmod(0o600)
        out.append(str(p))
    return (out[0], out[1]), out[2]


def test_the_restricted_user_cannot_run_commands_through_a_kubelet(tenant, tmp_path):
    """The kubelets authorise each call with the API server (Webhook). The restricted user's certificate,
    which a kubelet authenticates (the cluster CA signed it), may not run a command in a pod of another
    namespace nor list a node's pods; the admin's certificate may (the kubelet answers)."""
    import requests
    from kubernetes import client
    from kubernetes import config as kconfig

    admin = str(native_cluster().kubeconfig)
    core = client.CoreV1Api(kconfig.new_client_from_config(config_file=admin))
    ns, name = "default", f"kubelet-authz-{os.getpid()}"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "tolerations": [GPU_TOLERATION],
                    "containers": [{"name": "c", "image": worker_ref(), "imagePullPolicy": "Never",
                                    "command": ["sleep", "300"]}]}}
    core.create_namespaced_pod(ns, pod)
    try:
        deadline = time.monotonic() + 120
        while (p := core.read_namespaced_pod(name, ns)).status.phase != "Running":
            assert time.monotonic() < deadline, p.status
            time.sleep(1)
        node = core.read_node(p.spec.node_name)
        ip = next(a.address for a in node.status.addresses if a.type == "InternalIP")
        base = f"https://{ip}:{node.status.daemon_endpoints.kubelet_endpoint.port}"
        user, ca = _credentials(tenant["kubeconfig"], tmp_path)
        adm, _ = _credentials(admin, tmp_path)
        run = requests.post(f"{base}/run/{ns}/{name}/c", params={"cmd": "id"}, cert=user, verify=ca, timeout=30)
        pods = requests.get(f"{base}/pods", cert=user, verify=ca, timeout=30)
        assert (run.status_code, pods.status_code) == (403, 403), (run.status_code, run.text[:300], pods.text[:300])
        assert "Forbidden" in run.text and tenant["user"] in run.text, run.text[:300]
        ok = requests.get(f"{base}/pods", cert=adm, verify=ca, timeout=30)
        assert ok.status_code == 200 and name in ok.text, ok.text[:300]
        print(f"\nkubelet {base}: restricted user run -> {run.status_code} ({run.text.strip()[:120]}); "
              f"pods -> {pods.status_code}; admin pods -> {ok.status_code}")
    finally:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
