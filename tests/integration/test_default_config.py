"""`poc run` with no config file, on the project's own clusters, as a new user runs it after
`poc cluster up`: the built-in config's clean and kill_rank runs are ok on Slurm in Docker and on
the native Kubernetes cluster, each run on its own (whose GPU-shaped nodes carry the GPU taint); a taint the pods do not
tolerate is refused at preflight with ERROR/TIP, before anything is submitted."""
from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from harness.paths import NATIVE_K8S_CLUSTER, cluster_state_dir
from harness.store import read_runs

pytestmark = pytest.mark.integration

from _poc import poc_argv  # noqa: E402
from _slurm_checks import assert_fault_recovered, assert_run_dir_removed, check_raw_evidence  # noqa: E402

REFUSED_TAINT = {"key": "poc.test/reserved", "value": "other-team", "effect": "NoSchedule"}


def _poc(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    # cwd: an empty directory, so nothing but the built-in default is read
    return subprocess.run(poc_argv(*args), capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=str(cwd))


def _up(plat: str, cwd: Path) -> None:
    up = _poc("cluster", "up", f"--{plat}", "--provider", "native", "--quiet", cwd=cwd, timeout=3600)
    assert up.returncode == 0, up.stderr[-3000:]


def _records(results: Path) -> dict[str, dict]:
    (campaign,) = [p for p in results.iterdir() if (p / "runs.jsonl").exists()]
    return {r["run_id"]: r for r in read_runs(campaign / "runs.jsonl")}


# each platform in its own integration lane (scripts/test.sh), side by side
@pytest.mark.parametrize("plat", [pytest.param("slurm", marks=pytest.mark.slurm),
                                  pytest.param("k8s", marks=pytest.mark.k8s)])
def test_the_built_in_config_runs_ok_on_each_local_cluster(plat, tmp_path):
    _up(plat, tmp_path)
    res = tmp_path / "results"
    run = _poc("run", "--platform", plat, "--results", str(res), cwd=tmp_path)
    recs = _records(res)
    summary = {k: (r["status"], (r.get("error") or {}).get("message", "")[:300]) for k, r in recs.items()}
    assert run.returncode == 0, run.stderr[-3000:] + json.dumps(summary, indent=1)
    assert sorted(recs) == [f"{plat}-clean-01", f"{plat}-kill-rank-01"]
    assert all(r["status"] == "ok" for r in recs.values()), summary
    clean, fault = recs[f"{plat}-clean-01"]["metrics"], recs[f"{plat}-kill-rank-01"]["metrics"]
    assert clean["startup_s"]["value"] > 0 and clean["step_time_s"]["value"] > 0, plat
    assert fault["recovery_s"]["value"] > 0, plat           # the fault was injected and recovered from
    if plat == "slurm":   # Slurm's kill_rank end to end: checked here as every Slurm fault run is
        check_raw_evidence(res, recs["slurm-clean-01"])
        assert_run_dir_removed(recs["slurm-clean-01"])
        assert_fault_recovered(res, recs["slurm-kill-rank-01"], "kill_rank")
    print({k: (r["metrics"].get("recovery_s") or r["metrics"]["startup_s"])["value"] for k, r in recs.items()})


def _native_core():
    from kubernetes import client
    from kubernetes import config as kconfig
    kubeconfig = cluster_state_dir(NATIVE_K8S_CLUSTER) / "kubeconfig"
    return client.CoreV1Api(kconfig.new_client_from_config(str(kubeconfig))), \
        client.CustomObjectsApi(kconfig.new_client_from_config(str(kubeconfig)))


def _set_taints(core, node: str, change) -> None:
    """Replace the node's taints with change(taints), only if nobody changed them since they were read."""
    obj = core.read_node(node)
    old = [t.to_dict() for t in (obj.spec.taints or [])]
    old = [{k: v for k, v in t.items() if v is not None} for t in old]
    ops = [{"op": "test", "path": "/spec/taints", "value": old}] if obj.spec.taints is not None else []
    ops.append({"op": "add", "path": "/spec/taints", "value": change(old)})
    core.patch_node(node, ops)


@pytest.mark.k8s
def test_a_taint_the_pods_do_not_tolerate_is_refused_at_preflight_with_nothing_submitted(tmp_path):
    _up("k8s", tmp_path)
    core, custom = _native_core()
    nodes = [n.metadata.name for n in core.list_node().items]
    started = time.time()
    try:
        for n in nodes:
            _set_taints(core, n, lambda ts: [*ts, REFUSED_TAINT])
        t0 = time.monotonic()
        res = tmp_path / "results"
        run = _poc("run", "--platform", "k8s", "--results", str(res), cwd=tmp_path, timeout=600)
        took = time.monotonic() - t0
    finally:
        for n in nodes:
            _set_taints(core, n, lambda ts: [t for t in ts if t.get("key") != REFUSED_TAINT["key"]])
    err = run.stderr
    assert run.returncode == 1, err[-3000:]
    assert "ERROR k8s preflight: no node can hold a pod of this job" in err, err[-3000:]
    assert f"poc.test/reserved=other-team:NoSchedule on {len(nodes)} of {len(nodes)} nodes" in err
    tip = next(line for line in err.splitlines() if line.startswith("TIP "))
    assert "kubernetes.pod.tolerations" in tip and "{key: poc.test/reserved, operator: Exists" in tip
    (rec,) = _records(res).values()
    assert rec["scenario"] == "preflight" and rec["error"]["stage"] == "preflight"
    # nothing submitted: no JobSet made in the namespace since the taint went on
    jobsets = custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "poc", "jobsets")["items"]
    made = [j["metadata"]["name"] for j in jobsets
            if datetime.fromisoformat(j["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp()
            >= started - 1]
    assert made == [], made
    print(f"refused at preflight {took:.1f} s after poc run started")
    # the nodes are as they were
    for n in core.list_node().items:
        assert not any(t.key == REFUSED_TAINT["key"] for t in (n.spec.taints or [])), n.metadata.name
