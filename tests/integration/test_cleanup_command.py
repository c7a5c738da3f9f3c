"""`poc cleanup` after a crash mid-fault on the Slurm-in-Docker cluster: the job is cancelled and the
lost node is back, the campaign is not resumed.

The crash is staged exactly as the journal leaves it (harness/backends/base.py Journal): a real job
runs on c1-c2, its in-flight record names c2 as lost and its container, and c2's container is really
killed, as the fault does. Then the real CLI runs `poc cleanup` (no --resume).
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from _poc import ACTIVE_SLURM_STATES, inflight, login, poc_argv, records, squeue_state, wait_for, write_config

from harness import config
from harness.backends.base import Handle
from harness.clusters import slurm_docker
from harness.slurm_parse import node_usable
from harness.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")


def running(container: str) -> bool:
    out = slurm_docker.run(["docker", "inspect", "-f", "{{.State.Running}}", container], check=False).stdout
    return out.strip() == "true"


def test_poc_cleanup_cancels_the_job_and_brings_the_lost_node_back(tmp_path):
    info = slurm_docker.up(release=RELEASE, timeout=300)
    node = "c2"
    container = json.loads(Path(info.ssh_settings_path).read_text())["node_containers"][node]
    campaign = f"cleanup-{os.getpid() % 100000}"
    data = {"campaign": campaign, "platforms": ["slurm"], "repetitions": 0, "faults": [],
            "allow_destructive_faults": True}
    cfg_path = write_config(tmp_path / "poc.yaml", data)
    results = tmp_path / "results"
    cfg = config.from_mapping(data)
    store = Store(results, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    job_id = login(["sbatch", "--parsable", "-N2", "-w", "c1,c2", "-o", "/dev/null", "--wrap", "sleep 300"],
                   check=True).stdout.strip()
    wait_for(f"job {job_id} running", lambda: squeue_state(job_id) == "RUNNING", 60)
    h = Handle("slurm", "slurm-lose-node-01", [job_id], time.time(),
               data={"job_id": job_id, "run_dir": f"/shared/poc/{campaign}/slurm-lose-node-01",
                     "events_dir": f"/shared/poc/{campaign}/slurm-lose-node-01/events", "campaign": campaign,
                     "lost_nodes": [node], "stopped_containers": {node: container}})
    store.mark_inflight(h.to_json())   # what the journal holds when the harness dies mid-fault
    store.close()
    slurm_docker.run(["docker", "kill", container], check=True)
    try:
        # slurmctld marks the node not responding (*) once SlurmdTimeout (30 s here) has passed: then it is
        # lost for Slurm too, as after a real fault, and not only stopped
        wait_for(f"slurmctld sees {node} as not responding",
                 lambda: "*" in login(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout, 150)
        t0 = time.monotonic()
        p = subprocess.run(poc_argv("cleanup", "--config", str(cfg_path), "--results", str(results), "--json"),
                           capture_output=True, text=True, timeout=300, check=False)
        took = time.monotonic() - t0
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["undone"] == ["slurm-lose-node-01"]
        assert running(container)
        assert node_usable(login(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout)
        # the cancelled job leaves c2 only once slurmd, back, tells slurmctld it has no such job: until then the
        # node shows mixed (one CPU still held), for a few seconds after cleanup returned
        wait_for(f"{node} idle once the cancelled job let go of it",
                 lambda: login(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout.strip() == "idle", 90)
        assert squeue_state(job_id) not in ACTIVE_SLURM_STATES
        assert inflight(results / campaign) == [] and records(results / campaign) == []   # not resumed
        print(f"\npoc cleanup: job {job_id} cancelled, {node} back (idle) in {took:.1f} s")
    finally:
        if not running(container):
            slurm_docker.run(["docker", "start", container], check=False)
        login(["scancel", job_id])
