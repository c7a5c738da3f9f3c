"""`poc cleanup` after a crash mid-fault on the Slurm-in-Docker cluster: the job is cancelled and the
lost node is back, the campaign is not resumed.

The crash is staged exactly as the journal leaves it (harness/backends/base.py Journal): a real job
runs on c1-c2, its in-flight record names c2 as lost and its container, and c2's container is really
killed, as the fault does. Then the real CLI runs `poc cleanup` (no --resume). When an operator has
drained the node meanwhile, cleanup starts its container but leaves the drain, and says so.

Also: a handle made on another cluster is refused and its job left running; and a crash inside the
submit call (only the intent journalled) is undone on both platforms by finding the job.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from _poc import (
    ACTIVE_SLURM_STATES,
    inflight,
    login,
    poc_argv,
    records,
    squeue_state,
    wait_for,
    wait_slurm_nodes_free,
    write_config,
)

from harness import config
from harness.backends.base import Handle
from harness.clusters import slurm_docker
from harness.slurm_parse import node_usable
from harness.store import Store

pytestmark = [pytest.mark.integration]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")


def running(container: str) -> bool:
    out = slurm_docker.run(["docker", "inspect", "-f", "{{.State.Running}}", container], check=False).stdout
    return out.strip() == "true"


def _crash_mid_fault(tmp_path, node: str):
    """A real job on c1 and `node`, the journal naming `node` as lost, and its container killed; wait until
    slurmctld sees the node not responding. Returns (config path, results dir, campaign, job id, container)."""
    info = slurm_docker.up(release=RELEASE, timeout=300)
    container = json.loads(Path(info.ssh_settings_path).read_text())["node_containers"][node]
    campaign = f"cleanup-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    data = {"campaign": campaign, "platforms": ["slurm"], "repetitions": 0, "faults": [],
            "allow_destructive_faults": True}
    cfg_path = write_config(tmp_path / "poc.yaml", data)
    results = tmp_path / "results"
    cfg = config.from_mapping(data)
    store = Store(results, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    wait_slurm_nodes_free(("c1", node))
    job_id = login(["sbatch", "--parsable", "-N2", "-w", f"c1,{node}", "-o", "/dev/null", "--wrap", "sleep 300"],
                   check=True).stdout.strip()
    try:
        wait_for(f"job {job_id} running", lambda: squeue_state(job_id) == "RUNNING", 120)
        h = Handle("slurm", "slurm-lose-node-01", [job_id], time.time(),
                   data={"job_id": job_id, "run_dir": f"/shared/poc/{campaign}/slurm-lose-node-01",
                         "events_dir": f"/shared/poc/{campaign}/slurm-lose-node-01/events", "campaign": campaign,
                         "lost_nodes": [node], "stopped_containers": {node: container}})
        store.mark_inflight(h.to_json())   # what the journal holds when the harness dies mid-fault
        store.close()
        slurm_docker.run(["docker", "kill", container], check=True)
        # slurmctld marks the node not responding (*) once SlurmdTimeout (30 s here) has passed: then it is
        # lost for Slurm too, as after a real fault, and not only stopped
        wait_for(f"slurmctld sees {node} as not responding",
                 lambda: "*" in login(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout, 150)
    except BaseException:
        login(["scancel", job_id])
        if not running(container):
            slurm_docker.run(["docker", "start", container], check=False)
        raise
    return cfg_path, results, campaign, job_id, container


def _cleanup(cfg_path, results) -> subprocess.CompletedProcess:
    return subprocess.run(poc_argv("cleanup", "--config", str(cfg_path), "--results", str(results), "--json"),
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slurm
def test_poc_cleanup_cancels_the_job_and_brings_the_lost_node_back(tmp_path):
    node = "c2"
    cfg_path, results, campaign, job_id, container = _crash_mid_fault(tmp_path, node)
    try:
        t0 = time.monotonic()
        p = _cleanup(cfg_path, results)
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


def ctld(argv: list[str]) -> None:
    """As the cluster's operator (root on the controller), not as the harness's user."""
    slurm_docker.run(["docker", "exec", slurm_docker.CTLD_CONTAINER, *argv], check=True)


@pytest.mark.slurm
def test_poc_cleanup_leaves_an_operators_drain_of_the_lost_node_and_says_so(tmp_path):
    node = "c3"
    cfg_path, results, campaign, job_id, container = _crash_mid_fault(tmp_path, node)
    try:
        ctld(["scontrol", "update", f"nodename={node}", "state=drain", "reason=maint window"])
        p = _cleanup(cfg_path, results)
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["undone"] == ["slurm-lose-node-01"]
        assert f"node {node} left as it is" in p.stderr and "maint window" in p.stderr, p.stderr[-3000:]
        assert running(container)                        # the harness's own doing is undone
        # once slurmd is back the node is idle but still drained, with the operator's reason on it
        wait_for(f"{node} registered again, drained",
                 lambda: login(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout.strip() == "drained", 90)
        assert login(["sinfo", "-h", "-n", node, "-o", "%E"]).stdout.strip() == "maint window"
        assert squeue_state(job_id) not in ACTIVE_SLURM_STATES
        assert inflight(results / campaign) == []
        again = _cleanup(cfg_path, results)             # nothing left to undo: the drain stays
        assert again.returncode == 0 and json.loads(again.stdout)["undone"] == []
        assert login(["sinfo", "-h", "-n", node, "-o", "%E"]).stdout.strip() == "maint window"
        print(f"\npoc cleanup: job {job_id} cancelled, {node}'s container started, the operator's drain kept")
    finally:
        if not running(container):
            slurm_docker.run(["docker", "start", container], check=False)
        login(["scancel", job_id])
        ctld(["scontrol", "update", f"nodename={node}", "state=resume"])
        wait_for(f"{node} idle again", lambda: login(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout.strip() == "idle",
                 90)


@pytest.mark.slurm
def test_poc_cleanup_refuses_a_handle_made_on_another_cluster_and_touches_nothing(tmp_path):
    """The journal's handle says it was made on Slurm cluster `prod` (controller prod-ctl); this config
    reaches the local cluster `poc`. The running job it names (a real one here: the same job id could
    be anyone's on this cluster) is not cancelled, the record stays, and the ERROR says why."""
    slurm_docker.up(release=RELEASE, timeout=300)
    campaign = f"replay-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    data = {"campaign": campaign, "platforms": ["slurm"], "repetitions": 0, "faults": []}
    cfg_path = write_config(tmp_path / "poc.yaml", data)
    results = tmp_path / "results"
    cfg = config.from_mapping(data)
    store = Store(results, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    wait_slurm_nodes_free(("c1",))
    job_id = login(["sbatch", "--parsable", "-N1", "-w", "c1", "-o", "/dev/null", "--wrap", "sleep 300"],
                   check=True).stdout.strip()
    try:
        wait_for(f"job {job_id} running", lambda: squeue_state(job_id) == "RUNNING", 120)
        h = Handle("slurm", "slurm-clean-01", [job_id], time.time(),
                   data={"job_id": job_id, "run_dir": f"/shared/poc/{campaign}/slurm-clean-01",
                         "events_dir": f"/shared/poc/{campaign}/slurm-clean-01/events", "campaign": campaign,
                         "lost_nodes": [], "cluster": {"platform": "slurm", "cluster_name": "prod",
                                                       "controllers": ["prod-ctl"]}})
        store.mark_inflight(h.to_json())
        store.close()
        p = _cleanup(cfg_path, results)
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
        err = p.stderr.splitlines()
        at = next(i for i, line in enumerate(err) if line.startswith("ERROR "))
        assert "made on another slurm cluster than the one this config reaches" in err[at], p.stderr
        assert "cluster_name prod then, poc now" in err[at] and "controllers prod-ctl then, slurmctld now" in err[at]
        assert err[at + 1].startswith("TIP point --config"), p.stderr
        assert squeue_state(job_id) == "RUNNING"                      # not touched
        assert inflight(results / campaign) == ["slurm-clean-01.json"]   # kept for the right cluster
        print(f"\npoc cleanup refused a handle of cluster prod; job {job_id} on this cluster still running")
    finally:
        login(["scancel", job_id])


# each case carries its cluster's marker: it runs in that cluster's integration lane (scripts/test.sh)
@pytest.mark.parametrize("plat", [pytest.param("slurm", marks=pytest.mark.slurm),
                                  pytest.param("k8s", marks=pytest.mark.k8s)])
def test_poc_cleanup_finds_a_job_whose_handle_never_reached_the_journal(tmp_path, plat):
    """The harness dies inside the submit call: the intent is in the journal (written before the
    submit), the job exists, its id or uid is nowhere on disk. The real `poc cleanup` finds it by what
    the intent names (Slurm: this user's job of that name in the run's directory; Kubernetes: the
    JobSet of that name whose labels are this campaign's run) and cancels it."""
    from harness.backends.factory import make_backend
    from harness.spec import build

    campaign = f"intent-{plat}-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    data = {"campaign": campaign, "platforms": [plat], "repetitions": 0, "faults": []}
    cfg_path = write_config(tmp_path / "poc.yaml", data)
    results = tmp_path / "results"
    cfg = config.from_mapping(data)
    store = Store(results, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    if plat == "slurm":
        slurm_docker.up(release=RELEASE, timeout=300)
        wait_slurm_nodes_free(("c1", "c2"))
    else:
        from _native import native_cluster
        native_cluster()          # up, or brought up (another suite may have taken it down)
    backend = make_backend(plat, cfg)
    made = None
    try:
        backend.preflight()
        spec = build(cfg, plat, f"{plat}-clean-01", None)
        rendered = backend.render(spec)
        store.mark_inflight(backend.intent(spec, rendered).to_json())
        made = backend.submit(spec, rendered)          # ... and the harness dies before journalling this
        store.close()
        (saved,) = store.inflight()
        assert saved["data"]["intent"] and not (saved["data"].get("uid") or (saved["ids"] if plat == "slurm" else None))
        p = _cleanup(cfg_path, results)
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["undone"] == [spec.run_id]
        if plat == "slurm":
            wait_for(f"job {made.ids[0]} cancelled", lambda: squeue_state(made.ids[0]) not in ACTIVE_SLURM_STATES,
                     60)
        else:
            from harness.backends.k8s.api import JOBSETS
            assert backend.client.get("GET JobSet", JOBSETS, made.data["name"], made.data["namespace"],
                                      missing_ok=True) is None
        assert inflight(results / campaign) == []
        print(f"\npoc cleanup found and cancelled {plat} {' '.join(made.ids)} from its intent alone")
    finally:
        if made is not None:
            backend.cancel(made)
        backend.close()

