"""The calibration phase in its CPU form on the local clusters, through `poc run`: before training, in
the job's own allocation and image, the step before training (workloads/poc_check.py: the health gate on every
node, then a gloo all-reduce across the whole allocation, read in nccl-tests' layout and held to an absolute
floor), then every node's facts (limits, versions, RDMA devices) and health are recorded, a matmul per rank and a
gloo all-reduce over the job are measured and checked, and a node far below its peers is refused: the job is
cancelled at once with the node named and why, instead of being measured (and requeued onto the same node).

The lab's Slurm nodes are named as many GPU sites name theirs (docker-compose.yml): NodeName c1, host name
c1.poc.lab, which each node's /etc/hosts maps to 127.0.1.1 (as Ubuntu and DGX OS do). So the healthy Slurm run
is also the reproduction of three defects: a node named by its host name (a refusal's --exclude, a fault's
--nodelist), gloo binding loopback (the workload now names the interface), and a calibration child
(nccl-tests, here a stand-in on the shared volume) that inherited the rank's NCCL_DEBUG_FILE and Slurm's
step variables (its own environment and log now).

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
# A stand-in for all_reduce_perf on the Slurm nodes' shared volume: it opens NCCL_DEBUG_FILE with fopen("w"), as
# NCCL does, and names the launcher variables it was given in its version line (which the calibration records)
STAND_IN_DIR = "/shared/poc-itest-bin"
STAND_IN = """#!/usr/bin/env python3
import os, socket
path = os.environ.get("NCCL_DEBUG_FILE")
if path:
    path = path.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
    with open(path, "w") as f:
        f.write("%s:%d:1 [0] NCCL INFO NCCL version 2.99.9+stand-in\\n" % (socket.gethostname(), os.getpid()))
leaked = sorted(k for k in os.environ if k.startswith(("SLURM_", "PMI", "OMPI_")) or k in ("RANK", "MASTER_ADDR"))
print("# nccl-tests version 2.99.9 stand-in leaked=" + ",".join(leaked))
print("  16777216  4194304  float  sum  -1  1000.0  16.78  16.78  0  1000.0  16.78  16.78  0")
"""
PARENT_LOG = f"{STAND_IN_DIR}/parent-nccl-%h.log"
# the run's own NCCL_DEBUG_FILE (as a user's fabric.env may set it) and the stand-in as the calibration's
# nccl-tests, on (simulated) GPU nodes: a simulated GPU node runs the nccl-tests a GPU node would
SLURM_CHILD = ["--set", "workload.simulated_gpus=true", "--set", "resources.gpus_per_node=1",
               "--set", f"calibration.nccl_tests={STAND_IN_DIR}/all_reduce_perf",
               "--set", f"fabric.env={{NCCL_DEBUG_FILE: {PARENT_LOG}}}"]


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


def _login(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    from harness.clusters import slurm_docker
    return subprocess.run(["docker", "exec", "-i", "-u", "poc", slurm_docker.LOGIN_CONTAINER, *argv], input=stdin,
                          capture_output=True, text=True, timeout=60, check=True)


def _stand_in() -> None:
    _login(["sh", "-c", f'mkdir -p {STAND_IN_DIR} && rm -f {STAND_IN_DIR}/parent-nccl-* && '
                        f'cat > {STAND_IN_DIR}/all_reduce_perf && chmod 755 {STAND_IN_DIR}/all_reduce_perf'], STAND_IN)


def _check_ran(run: dict, plat: str) -> None:
    """The step before training, in the run's allocation: the gate over both nodes, then gloo across them."""
    ev = run["events"]
    (gate,) = [e for e in ev if e["kind"] == "health_gate"]
    (ar,) = [e for e in ev if e["kind"] == "allocation_allreduce"]
    assert gate["ok"] and not gate["refused"] and len(gate["nodes"]) == 2, gate
    assert ar["ok"] and ar["form"] == "gloo" and ar["world"] == 2 and ar["busbw_gbps"] > 0, ar
    assert ar["bytes"] == 16 << 20 and len(ar["rows"]) == 8        # -b 1K -e 16M -f 4, nccl-tests' table
    starts = [e for e in ev if e["kind"] == "check_start"]
    assert len(starts) == (4 if plat == "slurm" else 2)            # Slurm: two steps of a task per node
    first_train = min(e["ts_ns"] for e in ev if e["kind"] == "process_start")
    assert max(e["ts_ns"] for e in ev if e["kind"] == "check_done") < first_train    # before training
    m = run["record"]["metrics"]
    assert m["allocation_check_s"]["value"] > 0 and m["health_nodes_refused"]["value"] == 0
    assert m["allocation_allreduce_busbw_gbps"]["value"] == ar["busbw_gbps"]
    assert m["launch_s"]["detail"]["left_out"].startswith("the allocation check")
    if plat == "slurm":
        # NodeName is not the host name here, and the host name maps to 127.0.1.1: every node of the gate is
        # named as Slurm names it, and gloo was given the interface instead of binding loopback
        for n in gate["nodes"]:
            assert n["node"] in {"c1", "c2", "c3"} and n["host"] == f"{n['node']}.poc.lab", n
            assert n["facts"]["host_loopback"] is True and n["facts"]["gloo_ifname"]["name"] == "eth0", n["facts"]
        assert all(e["node"] in {"c1", "c2", "c3"} for e in ev if e["kind"] == "step")   # every event names it
        comm = next(e for e in ev if e["kind"] == "comm")
        assert comm["gloo_ifname"]["why"].startswith("the host name resolves to a loopback address"), comm


@pytest.mark.parametrize("plat", [pytest.param("slurm", marks=pytest.mark.slurm),
                                  pytest.param("k8s", marks=pytest.mark.k8s)])
def test_every_node_is_recorded_and_checked_before_training(plat, tmp_path):
    extra = []
    if plat == "slurm":
        from harness.clusters import slurm_docker
        wait_slurm_nodes_free(tuple(slurm_docker.up(timeout=300).compute_nodes))
        _stand_in()
        extra = SLURM_CHILD
    proc, run = _run(plat, tmp_path, *HEALTHY_BAR, *extra)
    rec = run["record"]
    assert proc.returncode == 0 and rec["status"] == "ok", proc.stderr[-3000:]
    _check_ran(run, plat)
    cal = _calibration(run["events"])
    assert cal["ok"] and not cal["refused"]
    assert len(cal["nodes"]) == 2 and len({n["host"] for n in cal["nodes"]}) == 2
    # each node as its scheduler names it: Slurm's NodeName; the Kubernetes node, not the pod's host name
    if plat == "slurm":
        assert {n["node"] for n in cal["nodes"]} <= {"c1", "c2", "c3"}, cal["nodes"]
    assert all(n["node"] and n["node"] != n["host"] for n in cal["nodes"]), cal["nodes"]
    for node in cal["nodes"]:
        facts = node["facts"]
        assert node["gflops"] > 0 and facts["torch"] and facts["limits"]["memlock"][0], node
        assert not node["problems"], node
    if plat == "slurm":
        # the child's environment held no launcher variable, its NCCL log was its own, the run's was left alone
        for node in cal["nodes"]:
            nt = node["nccl_tests"]
            assert nt["rc"] == 0 and nt["version"] == "nccl-tests version 2.99.9 stand-in leaked=", nt
            assert nt["nccl"]["version"] == "2.99.9+stand-in" and nt["parent_log"]["intact"] is True, nt
            assert {"NCCL_DEBUG_FILE", "SLURM_PROCID", "SLURM_JOB_ID"} <= set(nt["env_dropped"]), nt
        left = _login(["sh", "-c", f"ls {STAND_IN_DIR}"]).stdout.split()
        assert not [f for f in left if f.startswith("parent-nccl-")], left     # nobody wrote the run's log
    job = cal["job_allreduce"]
    assert job["correct"] and job["backend"] == "gloo" and job["busbw_gbps"] > 0 and job["world_size"] == 2
    done = [e for e in run["events"] if e["kind"] == "calibration_done"]
    assert len(done) == 2                                            # every rank
    m = rec["metrics"]
    assert m["calibration_s"]["value"] > 0
    # the calibration is the harness's phase: the sweep's span starts after it, startup leaves both out
    steps = [e for e in run["events"] if e["kind"] == "step"]
    assert min(e["ts_ns"] for e in steps) > max(e["ts_ns"] for e in done)
    print(json.dumps({n["host"]: round(n["gflops"], 1) for n in cal["nodes"]}), job["busbw_gbps"],
          rec["metrics"]["allocation_check_s"]["value"])


# Refused before training: on Slurm by the health gate (memlock below a bar no lab node meets: both nodes named by
# their NodeName, the host names being c1.poc.lab), on Kubernetes by the floor under the all-reduce across the
# allocation (no CPU reaches 10 TB/s). Nothing trains, nothing is requeued.
@pytest.mark.parametrize("plat, extra, words", [
    pytest.param("slurm", ["--set", "calibration.min_memlock_kib=1099511627776"],
                 "the health gate refused node c", marks=pytest.mark.slurm),
    pytest.param("k8s", ["--set", "calibration.min_allreduce_busbw_gbps=10000"],
                 "the all-reduce across the allocation", marks=pytest.mark.k8s)])
def test_an_unhealthy_allocation_is_refused_before_training(plat, extra, words, tmp_path):
    if plat == "slurm":
        from harness.clusters import slurm_docker
        wait_slurm_nodes_free(tuple(slurm_docker.up(timeout=300).compute_nodes))
    proc, run = _run(plat, tmp_path, *extra)
    rec = run["record"]
    assert proc.returncode == 1 and rec["status"] == "failed", proc.stderr[-3000:]
    msg, tip = rec["error"]["message"], rec["error"].get("tip") or ""
    assert f"the workload refused to run: {words}" in msg, msg
    kinds = {e["kind"] for e in run["events"]}
    assert "process_start" not in kinds and "step" not in kinds          # the training never started
    if plat == "slurm":
        assert "memlock is" in msg and "--exclude=c" in tip and ".poc.lab" not in tip, (msg, tip)
        (gate,) = [e for e in run["events"] if e["kind"] == "health_gate"]
        assert sorted(r["node"] for r in gate["refused"]) == sorted(n["node"] for n in gate["nodes"])
    else:
        (ar,) = [e for e in run["events"] if e["kind"] == "allocation_allreduce"]
        assert ar["ok"] is False and "below the floor 10000 GB/s" in ar["why"], ar
    print(msg)


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
    assert [r["node"] for r in cal["refused"]] == ["c2"], cal["refused"]
    assert not [e for e in run["events"] if e["kind"] == "step"]      # nothing was trained on it
    # cancelled at the refusal: one attempt, not requeued onto c2 again and again
    assert {tuple(e["attempt"]) if isinstance(e["attempt"], list) else (e["attempt"],)
            for e in run["events"]} <= {(0, 0, 0), (0,)}, "one attempt only"
    print(msg)
