"""A crash right after a Slurm lose_node fault: `--resume` brings the node back and leaves no job behind.

`poc run` (the real CLI, in a session of its own) runs one lose_node run on the Slurm-in-Docker
cluster. Once the run's in-flight record names the lost node and its container is really stopped,
the whole process group is SIGKILLed: a crash, with no chance to clean up. `poc run --resume` must
first cancel what the record names (scancel the job, start the container, wait until the node is
idle again) and then run the fault run again to the end. The node is seen back before the re-run
injects its own fault, so what brought it back was the resume's cancel, not the re-run's. The re-run
is Slurm's lose_node end to end (the one in the integration tests): it is checked as every fault run is
(tests/integration/_slurm_checks.py: NODE_FAIL then COMPLETED, the raw evidence, the node back).
"""
from __future__ import annotations

import json
import os
import signal
import time

import pytest
from _poc import ACTIVE_SLURM_STATES, Poc, inflight, login, records, squeue_state, wait_for, write_config
from _slurm_checks import assert_fault_recovered, idle_nodes

from harness.clusters import slurm_docker

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
SMALL = {"steps": 24, "checkpoint_every": 5, "sweep": "1K:1M", "sweep_iters": 3, "sweep_warmup": 1}
RUN = "slurm-lose-node-01"


@pytest.fixture(scope="module")
def slurm_cluster():
    # Reuses a running cluster; left up afterwards (other tests and people use it).
    return slurm_docker.up(release=RELEASE, timeout=300)


def running(container: str) -> bool:
    out = slurm_docker.run(["docker", "inspect", "-f", "{{.State.Running}}", container], check=False).stdout
    return out.strip() == "true"


def node_state(host: str) -> str:
    return login(["sinfo", "-h", "-n", host, "-o", "%T"]).stdout.strip()


def record_of(cdir) -> dict:
    try:
        return json.loads((cdir / "inflight" / f"{RUN}.json").read_text())
    except (OSError, ValueError):
        return {}


def test_lose_node_survives_a_harness_crash_and_resume_recovers(slurm_cluster, tmp_path):
    campaign = f"crash-slurm-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    cfg = write_config(tmp_path / "poc.yaml", {
        "campaign": campaign, "platforms": ["slurm"], "repetitions": 0, "workload": SMALL,
        "faults": [{"kind": "lose_node", "at_step": 8, "rank": 1}], "allow_destructive_faults": True,
        "timeouts": {"queue_s": 180, "run_s": 600}})
    results = tmp_path / "results"
    args = ["run", "--platform", "slurm", "--config", str(cfg), "--results", str(results)]
    cdir = results / campaign
    env = dict(os.environ)

    def node_lost():
        data = record_of(cdir).get("data") or {}
        lost = data.get("lost_nodes") or []
        container = (data.get("stopped_containers") or {}).get(lost[0]) if lost else None
        return container and not running(container) and data

    t0 = time.monotonic()
    poc = Poc(args, tmp_path, env, "crash")
    try:
        data = wait_for("the in-flight record names the lost node, and its container is stopped", node_lost, 600,
                        poc, interval=0.2)
        poc.kill()   # SIGKILL to the whole process group: a crash
    finally:
        poc.kill()
    assert poc.proc.returncode == -signal.SIGKILL
    job_id, host = data["job_id"], data["lost_nodes"][0]
    container = data["stopped_containers"][host]
    print(f"\n{RUN}: job {job_id}, node {host} lost; poc killed after {time.monotonic() - t0:.1f} s")
    assert not running(container)
    assert inflight(cdir) == [f"{RUN}.json"]            # left for --resume
    assert records(cdir) == []                           # the crash wrote no record

    t1 = time.monotonic()
    resumed = Poc([*args, "--resume", "--json"], tmp_path, env, "resume")
    try:
        def crashed_run_undone():
            again = record_of(cdir).get("data") or {}
            if again.get("job_id") not in (None, job_id) and again.get("lost_nodes"):
                pytest.fail("the re-run's own fault came before the crashed run's node was seen back")
            return (running(container) and node_state(host) == "idle"
                    and squeue_state(job_id) not in ACTIVE_SLURM_STATES)

        wait_for(f"{host} back (idle) and job {job_id} gone, before the re-run's fault", crashed_run_undone, 300,
                 resumed, interval=0.5)
        print(f"--resume: {host} idle and job {job_id} gone after {time.monotonic() - t1:.1f} s")
        resumed.proc.wait(timeout=900)
    finally:
        resumed.kill()
    assert resumed.proc.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr, resumed.stderr[-3000:]
    (rec,) = records(cdir)
    assert rec["run_id"] == RUN and rec["status"] == "ok", rec.get("error")
    assert rec["job_ids"] != [job_id]
    assert_fault_recovered(results, rec, "lose_node")
    assert inflight(cdir) == []
    assert idle_nodes() == {"c1", "c2", "c3"}
    left = login(["squeue", "-h", "-o", "%i %j"]).stdout.split("\n")
    assert not [ln for ln in left if f"poc-{RUN}" in ln or ln.split(" ")[0] == job_id], left
    print(f"resumed run ok after {time.monotonic() - t1:.1f} s")
