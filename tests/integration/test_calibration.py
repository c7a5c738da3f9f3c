"""The calibration phase in its CPU form on the local clusters, through `poc run`: before training, in
the job's own allocation and image, every node's facts (limits, versions, RDMA devices) and health are
recorded, a matmul per rank and a gloo all-reduce over the job are measured and checked, and a node far
below its peers is refused: the job is cancelled at once with the node named and why, instead of
being measured (and requeued onto the same node).

The unhealthy node is a real one made slow: the Slurm compute container c2 gets a twentieth of a CPU
(docker update --cpus) while c1 keeps its share, as a throttled or failing node would be.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _poc import poc_argv, wait_slurm_nodes_free

from harness.store import load_events, read_runs

pytestmark = pytest.mark.integration

SET = ["--set", "faults=[]", "--set", "repetitions=1", "--set", "calibration.enabled=true",
       "--set", "workload.steps=6", "--set", "workload.checkpoint_every=0"]
# the local clusters' nodes share this machine's two cores with each other and with the other lane's
# tests: a healthy node's best window can still fall to half its peer's, so the healthy runs ask less
HEALTHY_BAR = ["--set", "calibration.min_peer_ratio=0.25"]
SLOW_NODE = "poc-slurm-c2"


def _run(plat: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    res = tmp_path / "results"
    proc = subprocess.run(poc_argv("run", "--platform", plat, "--results", str(res), *SET, *extra),
                          capture_output=True, text=True, timeout=900, check=False, cwd=str(tmp_path))
    (campaign,) = [p for p in res.iterdir() if (p / "runs.jsonl").exists()]
    (rec,) = read_runs(campaign / "runs.jsonl")
    return proc, {"record": rec, "events": load_events(campaign / "runs" / rec["run_id"]) or []}


def _calibration(events: list[dict]) -> dict:
    (cal,) = [e for e in events if e["kind"] == "calibration"]
    return cal


@pytest.mark.parametrize("plat", [pytest.param("slurm", marks=pytest.mark.slurm),
                                  pytest.param("k8s", marks=pytest.mark.k8s)])
def test_every_node_is_recorded_and_checked_before_training(plat, tmp_path):
    if plat == "slurm":
        from harness.clusters import slurm_docker
        wait_slurm_nodes_free(tuple(slurm_docker.up(timeout=300).compute_nodes))
    proc, run = _run(plat, tmp_path, *HEALTHY_BAR)
    rec = run["record"]
    assert proc.returncode == 0 and rec["status"] == "ok", proc.stderr[-3000:]
    cal = _calibration(run["events"])
    assert cal["ok"] and not cal["refused"]
    assert len(cal["nodes"]) == 2 and len({n["host"] for n in cal["nodes"]}) == 2
    # each node as its scheduler names it: Slurm's NodeName; the Kubernetes node, not the pod's host name
    if plat == "slurm":
        assert {n["node"] for n in cal["nodes"]} <= {"c1", "c2", "c3"}, cal["nodes"]
    else:
        assert all(n["node"] and n["node"] != n["host"] for n in cal["nodes"]), cal["nodes"]
    for node in cal["nodes"]:
        facts = node["facts"]
        assert node["gflops"] > 0 and facts["torch"] and facts["limits"]["memlock"][0], node
        assert not node["problems"], node
    job = cal["job_allreduce"]
    assert job["correct"] and job["backend"] == "gloo" and job["busbw_gbps"] > 0 and job["world_size"] == 2
    done = [e for e in run["events"] if e["kind"] == "calibration_done"]
    assert len(done) == 2                                            # every rank
    m = rec["metrics"]
    assert m["calibration_s"]["value"] > 0
    # the calibration is the harness's phase: the sweep's span starts after it, startup leaves both out
    steps = [e for e in run["events"] if e["kind"] == "step"]
    assert min(e["ts_ns"] for e in steps) > max(e["ts_ns"] for e in done)
    print(json.dumps({n["host"]: round(n["gflops"], 1) for n in cal["nodes"]}), job["busbw_gbps"])


@pytest.mark.slurm
def test_a_node_far_below_its_peers_is_refused_and_the_job_cancelled(tmp_path):
    from harness.clusters import slurm_docker
    wait_slurm_nodes_free(tuple(slurm_docker.up(timeout=300).compute_nodes))
    subprocess.run(["docker", "update", "--cpus", "0.05", SLOW_NODE], check=True, capture_output=True)
    try:
        # at the default bar (0.5): c2 gets 5 ms of CPU in every 100 ms, so even its best window
        # multiplies at a small fraction of c1's
        proc, run = _run("slurm", tmp_path)
    finally:
        # a container's CPU limit cannot be unset by `docker update`: give it every CPU this machine has
        subprocess.run(["docker", "update", "--cpus", str(os.cpu_count() or 2), SLOW_NODE], check=True,
                       capture_output=True)
    rec = run["record"]
    assert proc.returncode == 1 and rec["status"] == "failed", proc.stderr[-3000:]
    msg = rec["error"]["message"]
    assert "calibration refused node c2" in msg and "of the nodes' median" in msg, msg
    assert "--exclude=c2" in (rec["error"].get("tip") or ""), rec["error"]
    assert "the workload refused to run: calibration refused node c2" in proc.stderr
    cal = _calibration(run["events"])
    assert [r["host"] for r in cal["refused"]] == ["c2"], cal["refused"]
    assert not [e for e in run["events"] if e["kind"] == "step"]      # nothing was trained on it
    # cancelled at the refusal: one attempt, not requeued onto c2 again and again
    assert {tuple(e["attempt"]) if isinstance(e["attempt"], list) else (e["attempt"],)
            for e in run["events"]} <= {(0, 0, 0), (0,)}, "one attempt only"
    print(msg)
