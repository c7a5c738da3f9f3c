"""A GPU-shaped run through both real schedulers, as a restricted user, on the local clusters.

The clusters have fake GPUs (Slurm: gres gpu:4 per node backed by empty device files; Kubernetes:
nvidia.com/gpu 4 per node, the GPU pool taint and GPU feature labels), so each scheduler places,
counts and refuses GPUs as on a GPU cluster, while the workload is told its GPUs are simulated and
trains on CPUs with gloo. The user is an ordinary one: on Slurm the account ``poc`` (no admin
level), on Kubernetes a client certificate bound only to the namespaced Role the harness prints
(harness/clusters/k8s/tenant.py). An impossible GPU request must fail fast with ERROR/TIP.

Needs root (the native cluster) and Docker (the Slurm cluster); a few minutes on 2 cores.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

# each test carries its cluster's marker (scripts/test.sh's lanes): none uses both
pytestmark = [
    pytest.mark.integration,
    # harness.pipeline.host_facts() leaves /proc/cpuinfo open (see test_slurm_runs.py)
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness import config  # noqa: E402
from harness.backends.factory import make_backend  # noqa: E402
from harness.clusters import images, native_k8s, slurm_docker  # noqa: E402
from harness.clusters.k8s import gpu_shape, tenant  # noqa: E402
from harness.pipeline import campaign  # noqa: E402
from harness.store import Store, load_events, load_raw  # noqa: E402

FABRIC = {"NCCL_IB_HCA": "^mlx5_2", "NCCL_DEBUG": "INFO"}   # a value that once broke sbatch --export
GPUS = 2
SHAPE = {
    "workload": {"model": "mlp", "model_params": "1M", "steps": 12, "checkpoint_every": 4, "sweep": "1K:64K",
                 "sweep_iters": 2, "sweep_warmup": 1, "backend": "gloo", "simulated_gpus": True},
    "resources": {"nodes": 2, "procs_per_node": GPUS, "gpus_per_node": GPUS, "cpus_per_node": 1, "memory_mb": 1024},
    "fabric": {"env": FABRIC},
    "faults": [], "repetitions": 1,
    "timeouts": {"queue_s": 120, "run_s": 300},
}


@pytest.fixture(scope="module")
def k8s():
    info = native_k8s.up(nodes=3)   # cheap when running; (re)applies the fake GPUs and the restricted user
    native_k8s.import_image(images.ensure_worker_image())
    assert info.restricted, "up() made no restricted user"
    return info


@pytest.fixture(scope="module")
def slurm():
    # the release the other Slurm tests run (test_slurm_runs.py), so this one never rebuilds the cluster
    return slurm_docker.up(release=os.environ.get("POC_SLURM_RELEASE", "trixie"))


def _admin(info):
    from kubernetes import client
    from kubernetes import config as kconfig
    return client, kconfig.new_client_from_config(config_file=str(info.kubeconfig))


def _k8s_config(info, campaign_name: str, **over) -> config.Config:
    r = info.restricted
    data = json.loads(json.dumps(SHAPE)) | {"campaign": campaign_name, "platforms": ["k8s"]}
    data["kubernetes"] = {
        "kubeconfig": r["kubeconfig"], "namespace": r["namespace"], "local_queue": r["local_queue"],
        "image": images.worker_ref(), "image_pull_policy": "IfNotPresent",
        "checkpoint_host_path": str(Path(info.state_dir) / "checkpoints"),
        "pod": {"tolerations": [gpu_shape.GPU_TOLERATION], "node_selector": {"nvidia.com/gpu.present": "true"},
                "priority_class": r["priority_class"]},
    }
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v}
    return config.from_mapping(data)


def _slurm_config(campaign_name: str, **over) -> config.Config:
    data = json.loads(json.dumps(SHAPE)) | {"campaign": campaign_name, "platforms": ["slurm"]}
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v}
    return config.from_mapping(data)


def _run(cfg: config.Config, results: Path) -> tuple[list[dict], Store, float]:
    platform = cfg.platforms[0]
    store = Store(results, cfg.campaign)
    t0 = time.monotonic()
    recs = campaign(cfg, [platform], store, lambda p: make_backend(p, cfg), resume=False)
    took = time.monotonic() - t0
    for r in recs:
        print(f"\n{r['run_id']}: {r['status']} in {took:.1f}s {r.get('error') or ''}")
    return recs, store, took


def _events(store: Store, run_id: str) -> list[dict]:
    return load_events(store.run_dir(run_id)) or []


def _assert_simulated_gpu_workload(events: list[dict]) -> None:
    started = [e for e in events if e.get("kind") == "torch_imported"]
    assert {e["rank"] for e in started} == set(range(2 * GPUS)), "every rank (2 nodes x 2 GPUs) started"
    for e in started:
        assert e["backend"] == "gloo", e
        assert {k: e["comm"]["env"].get(k) for k in FABRIC} == FABRIC, e["comm"]
    # the workload says that its GPUs were allocated but simulated
    assert any(e.get("simulated_gpus") is True for e in events), "no event records simulated GPUs"


def _assert_fails_fast(recs: list[dict], took: float, *needles: str, within_s: float = 60) -> dict:
    assert len(recs) == 1 and recs[0]["status"] == "failed", recs
    err = recs[0]["error"]
    text = f"{err.get('message')} {err.get('tip')}"
    for n in needles:
        assert n.lower() in text.lower(), (n, err)
    assert err.get("tip"), err
    assert took < within_s, f"an impossible GPU request took {took:.0f}s to fail"
    return err


# ---------------------------------------------------------------- Kubernetes


@pytest.mark.k8s
def test_native_nodes_are_gpu_shaped(k8s):
    client, api = _admin(k8s)
    for n in client.CoreV1Api(api).list_node().items:
        assert n.status.capacity.get(gpu_shape.GPU_RESOURCE) == "4", n.metadata.name
        assert n.status.allocatable.get(gpu_shape.GPU_RESOURCE) == "4", n.metadata.name
        assert any(t.key == gpu_shape.GPU_RESOURCE and t.effect == "NoSchedule" for t in n.spec.taints or [])
        assert n.metadata.labels.get("nvidia.com/gpu.present") == "true"


@pytest.mark.k8s
def test_restricted_user_is_confined_to_its_namespace(k8s):
    from kubernetes import client
    from kubernetes import config as kconfig
    from kubernetes.client.rest import ApiException
    r = k8s.restricted
    api = kconfig.new_client_from_config(config_file=r["kubeconfig"])
    core = client.CoreV1Api(api)
    for what, call in [("list nodes", core.list_node), ("list namespaces", core.list_namespace),
                       ("list pods in poc", lambda: core.list_namespaced_pod("poc")),
                       ("list ClusterQueues", lambda: client.CustomObjectsApi(api).list_cluster_custom_object(
                           "kueue.x-k8s.io", "v1beta1", "clusterqueues"))]:
        with pytest.raises(ApiException) as err:
            call()
        assert err.value.status == 403, what
    core.list_namespaced_pod(r["namespace"])
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "can-i", "labels": {"kueue.x-k8s.io/queue-name": r["local_queue"]}},
          "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
              "restartPolicy": "Never", "tolerations": [gpu_shape.GPU_TOLERATION],
              "containers": [{"name": "w", "image": images.worker_ref(), "command": ["true"]}]}}}}}]}}
    # the API server authorizes (and the webhooks admit) a dry-run create exactly as a real one
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", r["namespace"], "jobsets", js, dry_run="All")


@pytest.mark.k8s
def test_gpu_shaped_run_on_kubernetes_as_restricted_user(k8s, tmp_path):
    cfg = _k8s_config(k8s, "gpu-k8s")
    recs, store, took = _run(cfg, tmp_path)
    assert len(recs) == 1 and recs[0]["status"] == "ok", recs
    rec = recs[0]
    assert all(s["ok"] for s in rec["stages"]), rec["stages"]     # preflight too, despite its 403s
    assert rec["scheduler"]["info"]["namespace"] == tenant.NAMESPACE
    pods = load_raw(store.run_dir(rec["run_id"]))["pods"]
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for p in pods:
        spec = p["spec"]
        c = spec["containers"][0]
        assert c["resources"]["limits"][gpu_shape.GPU_RESOURCE] == str(GPUS), c["resources"]
        assert c["resources"]["requests"][gpu_shape.GPU_RESOURCE] == str(GPUS), c["resources"]
        assert gpu_shape.GPU_TOLERATION in spec["tolerations"], spec["tolerations"]
        assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert spec["priorityClassName"] == tenant.PRIORITY_CLASS and spec["priority"] == 1000
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert {k: env.get(k) for k in FABRIC} == FABRIC, env
    assert len({p["spec"]["nodeName"] for p in pods}) == 2
    _assert_simulated_gpu_workload(_events(store, rec["run_id"]))
    print(f"k8s GPU-shaped run as {tenant.USER}: {took:.1f}s")


@pytest.mark.k8s
def test_impossible_gpu_request_fails_fast_on_kubernetes(k8s, tmp_path):
    # 8 GPUs on each of 2 pods: more than the tenant's ClusterQueue holds (8), so Kueue never admits it
    cfg = _k8s_config(k8s, "gpu-k8s-too-many", resources={"gpus_per_node": 8, "procs_per_node": 8})
    recs, _, took = _run(cfg, tmp_path / "quota")
    _assert_fails_fast(recs, took, "nvidia.com/gpu")
    # 8 GPUs on one pod: within the quota, so Kueue admits it, but no node has 8
    cfg = _k8s_config(k8s, "gpu-k8s-no-node", resources={"nodes": 1, "gpus_per_node": 8, "procs_per_node": 8})
    recs, _, took = _run(cfg, tmp_path / "node")
    _assert_fails_fast(recs, took, "nvidia.com/gpu")


# ---------------------------------------------------------------- Slurm


def _sacct_alloc_tres(job_id: str) -> str:
    argv = slurm_docker.login_exec_argv(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "AllocTRES"])
    return slurm_docker.run(argv).stdout.strip()


@pytest.mark.slurm
def test_slurm_user_is_ordinary_and_nodes_have_gpus(slurm):
    out = slurm_docker.run(slurm_docker.login_exec_argv(["sinfo", "-h", "-N", "-o", "%N %G"])).stdout
    assert {ln.split()[0]: ln.split()[1] for ln in out.splitlines() if ln.strip()} == \
        {n: "gpu:4" for n in slurm.compute_nodes}
    level = slurm_docker.run(slurm_docker.login_exec_argv(
        ["sacctmgr", "-n", "-P", "show", "user", slurm.ssh.user, "format=AdminLevel"])).stdout.strip()
    assert level in ("", "None"), level    # not in the accounts database, or there without an admin level
    res = slurm_docker.run(slurm_docker.login_exec_argv(
        ["scontrol", "update", f"nodename={slurm.compute_nodes[-1]}", "state=drain", "reason=must-be-refused"]),
        check=False)
    assert res.returncode != 0, "an ordinary user drained a node"


@pytest.mark.slurm
def test_gpu_shaped_run_on_slurm_as_ordinary_user(slurm, tmp_path):
    recs, store, took = _run(_slurm_config("gpu-slurm"), tmp_path)
    assert len(recs) == 1 and recs[0]["status"] == "ok", recs
    rec = recs[0]
    job_id = str(rec["scheduler"]["info"]["job_id"])
    tres = dict(kv.split("=", 1) for kv in _sacct_alloc_tres(job_id).split(",") if "=" in kv)
    assert tres.get("gres/gpu") == str(GPUS * 2) and tres.get("node") == "2", tres
    user = slurm_docker.run(slurm_docker.login_exec_argv(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "User"])).stdout.strip()
    assert user == slurm.ssh.user
    _assert_simulated_gpu_workload(_events(store, rec["run_id"]))
    print(f"Slurm GPU-shaped run as {user}: {took:.1f}s, AllocTRES {tres}")


@pytest.mark.slurm
def test_impossible_gpu_request_fails_fast_on_slurm(slurm, tmp_path):
    recs, _, took = _run(_slurm_config("gpu-slurm-too-many", resources={"gpus_per_node": 8, "procs_per_node": 8}),
                         tmp_path)
    err = _assert_fails_fast(recs, took, "gpu")
    assert err["stage"] == "submit", err
