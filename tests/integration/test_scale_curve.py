"""A scale curve through `poc run` on the project's own clusters: the built-in config with scale.nodes
[1, 2, 3] (both local clusters have 3 compute nodes) and no clean or fault runs, 4 steps a run: one run per
size on Slurm in Docker and on the native Kubernetes cluster, each ok at its size, and `poc report` shows
the scale-curve section. A size the cluster cannot hold is refused at preflight with ERROR/TIP and
nothing submitted: Slurm's partition has 3 nodes; on Kubernetes, seen as a user's cluster (the native
cluster's admin kubeconfig named by path, so the harness sets up nothing), the restricted tenant's queue
holds 4 CPUs and 8 GiB."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.paths import NATIVE_K8S_CLUSTER, cluster_state_dir
from harness.store import read_runs

pytestmark = pytest.mark.integration

from _poc import poc_argv, write_config  # noqa: E402

SIZES = [1, 2, 3]
SHORT = ["--set", "faults=[]", "--set", "repetitions=0", "--set", "workload.steps=4"]


def _poc(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    # cwd: an empty directory, so nothing but the built-in default (or the config named) is read
    return subprocess.run(poc_argv(*args), capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=str(cwd))


def _up(plat: str, cwd: Path) -> None:
    up = _poc("cluster", "up", f"--{plat}", "--provider", "native", "--quiet", cwd=cwd, timeout=3600)
    assert up.returncode == 0, up.stderr[-3000:]


def _records(results: Path) -> dict[str, dict]:
    (campaign,) = [p for p in results.iterdir() if (p / "runs.jsonl").exists()]
    return {r["run_id"]: r for r in read_runs(campaign / "runs.jsonl")}


@pytest.mark.parametrize("plat", [pytest.param("slurm", marks=pytest.mark.slurm),
                                  pytest.param("k8s", marks=pytest.mark.k8s)])
def test_a_scale_curve_of_1_2_3_nodes_runs_on_each_local_cluster_and_is_reported(plat, tmp_path):
    _up(plat, tmp_path)
    res = tmp_path / "results"
    run = _poc("run", "--platform", plat, "--results", str(res), "--set", f"scale.nodes={SIZES}", *SHORT,
               cwd=tmp_path)
    recs = _records(res)
    summary = {k: (r["status"], (r.get("error") or {}).get("message", "")[:300]) for k, r in recs.items()}
    assert run.returncode == 0, run.stderr[-3000:] + json.dumps(summary, indent=1)
    assert list(recs) == [f"{plat}-scale-{n}n-01" for n in SIZES], summary
    for n in SIZES:
        r = recs[f"{plat}-scale-{n}n-01"]
        assert r["status"] == "ok" and r["scenario"] == f"scale:{n}", summary
        assert r["derive_inputs"]["nodes"] == n and r["derive_inputs"]["world"] == n   # one rank a node
        m = r["metrics"]
        assert m["queue_s"]["value"] >= 0 and m["startup_s"]["value"] > 0 and m["step_time_s"]["value"] > 0
        if n > 1:   # an all-reduce over one rank moves nothing
            assert m["allreduce_busbw_gbps"]["value"] > 0, n
    hosts = {n: {e.get("host") for e in _events(res, f"{plat}-scale-{n}n-01") if e.get("kind") == "process_start"}
             for n in SIZES}
    assert [len(h) for h in hosts.values()] == SIZES, hosts   # each size on as many nodes
    rep = _poc("report", str(res), "--out", str(tmp_path / "report"), cwd=tmp_path, timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    md = (tmp_path / "report" / "report.md").read_text()
    sec = md[md.index("\n## Scale curve\n"):]
    sec = sec[:sec.find("\n## ", 1)]
    label = {"slurm": "Slurm", "k8s": "Kubernetes"}[plat]
    for n in SIZES:
        assert f"| {label} | {n} | 1 |" in sec, sec
    assert "One run per size and platform" in sec and (tmp_path / "report" / "charts" / "scale_curve.png").exists()
    print(sec)
    print({n: round(recs[f"{plat}-scale-{n}n-01"]["metrics"]["startup_s"]["value"], 2) for n in SIZES})


def _events(results: Path, run_id: str) -> list[dict]:
    (campaign,) = [p for p in results.iterdir() if (p / "runs.jsonl").exists()]
    path = campaign / "runs" / run_id / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _k8s_as_a_users_cluster(tmp_path: Path) -> Path:
    """The native cluster as a user's: its admin kubeconfig by path (no setup by the harness), the restricted
    tenant's namespace and queue (harness/clusters/k8s/tenant.py: quota 4 CPUs, 8Gi, 8 GPUs), the worker image."""
    from harness.clusters import images
    from harness.clusters.k8s import tenant
    return write_config(tmp_path / "users-cluster.yaml", {
        "platforms": ["k8s"],
        "kubernetes": {"kubeconfig": str(cluster_state_dir(NATIVE_K8S_CLUSTER) / "kubeconfig"),
                       "namespace": tenant.NAMESPACE, "local_queue": tenant.LOCAL_QUEUE, "image": images.worker_ref(),
                       "pod": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                "effect": "NoSchedule"}]}}})


@pytest.mark.parametrize("plat", [pytest.param("slurm", marks=pytest.mark.slurm),
                                  pytest.param("k8s", marks=pytest.mark.k8s)])
def test_a_size_the_cluster_cannot_hold_is_refused_at_preflight_with_nothing_submitted(plat, tmp_path):
    _up(plat, tmp_path)
    res = tmp_path / "results"
    conf = ["--config", str(_k8s_as_a_users_cluster(tmp_path))] if plat == "k8s" else []
    run = _poc("run", *conf, "--platform", plat, "--results", str(res), "--set", "scale.nodes=[1,4]", *SHORT,
               cwd=tmp_path, timeout=300)
    err = run.stderr
    assert run.returncode == 1, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith(("ERROR ", "TIP "))]
    print("\n".join(lines))
    if plat == "slurm":
        assert ("ERROR slurm preflight: the campaign's largest job asks for 4 nodes, but partition 'debug' has 3 "
                "(sinfo -N); sbatch would refuse it") in lines
        assert "TIP lower scale.nodes' largest size (or resources.nodes) to 3 or fewer" in err
    else:
        assert ("ERROR k8s preflight: the campaign's largest job (4 nodes) does not fit ClusterQueue "
                "poc-gpu-cluster-queue: memory: 12288Mi asked for in all, the nominal quota is 8Gi (flavor "
                "poc-default): Kueue would never admit it") in lines, lines
        assert "TIP lower scale.nodes' largest size" in err and "ClusterQueue poc-gpu-cluster-queue" in err
    (rec,) = _records(res).values()
    assert rec["scenario"] == "preflight" and rec["error"]["stage"] == "preflight"   # nothing ran
