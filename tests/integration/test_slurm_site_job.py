"""What a GPU site's Slurm does to the job, on the Slurm-in-Docker cluster, in real jobs.

- The time-limit warning (``--signal=B:USR1@60``; sent here with ``scancel --signal=USR1 --batch``, as
  slurmctld sends it) reaches the workers, whose rank 0 checkpoints, and the job goes on to complete
  in its first attempt: torchrun's agent, which has no USR1 handler, no longer dies of it.
- A checkpoint directory outside slurm.workdir is the campaign's and the run's own: a resumed
  campaign's run starts from step 0 though the interrupted attempt's checkpoint is there, the
  checkpoints land under <checkpoint_dir>/<campaign>-<token>/<run_id> with the owner mark, and the
  directory goes with the run.
- The ranks get slurmd's memlock limit, not the submitting shell's (``--propagate=NONE``), and each
  records it.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid

import pytest
from _poc import wait_for, wait_slurm_nodes_free

from harness import config
from harness.backends.factory import make_backend
from harness.clusters import slurm_docker
from harness.owner import dir_mark
from harness.pipeline import campaign
from harness.render.local import workload_script
from harness.render.owned_dir import OWNER_MARK
from harness.render.sbatch import render_sbatch
from harness.spec import build as build_spec
from harness.store import Store, load_events

pytestmark = [
    pytest.mark.integration, pytest.mark.slurm,
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),   # see test_slurm_runs.py
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
# long enough to signal it mid-training on a loaded machine (0.5-2 s a step), no interval checkpoints
WORKLOAD = {"model_params": "1M", "steps": 40, "checkpoint_every": 0, "sweep": "1K:4K", "sweep_iters": 1,
            "sweep_warmup": 0, "backend": "gloo"}
RESOURCES = {"nodes": 2, "procs_per_node": 1, "cpus_per_node": 1, "memory_mb": 1024}


def login(argv: list[str], check: bool = False, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(slurm_docker.login_exec_argv(argv), capture_output=True, text=True, timeout=60,
                          check=check, **kw)


@pytest.fixture(scope="module")
def cluster():
    info = slurm_docker.up(release=RELEASE, timeout=300)   # reuses a running cluster, leaves it up
    wait_slurm_nodes_free(tuple(info.compute_nodes))
    root = f"/shared/poc-ckpt-test-{uuid.uuid4().hex[:8]}"   # beside slurm.workdir (/shared/poc), not in it
    login(["mkdir", "-p", root], check=True)
    yield root
    login(["rm", "-rf", root])


def _events_of(path: str) -> list[dict]:
    res = login(["sh", "-c", 'cat "$1"/*.jsonl 2>/dev/null', "sh", path])
    return [json.loads(ln) for ln in res.stdout.splitlines() if ln.startswith("{")]


def test_usr1_checkpoints_and_a_resumed_run_ignores_the_stale_checkpoint(cluster, tmp_path):
    cfg = config.from_mapping({"campaign": "site-job", "platforms": ["slurm"], "repetitions": 1, "faults": [],
                               "workload": WORKLOAD, "resources": RESOURCES, "keep_run_files": "never",
                               "timeouts": {"queue_s": 120, "run_s": 300}, "slurm": {"checkpoint_dir": cluster}})
    results = str(tmp_path / "results")
    first = Store(results, cfg.campaign)
    first.open(cfg.config_hash(), cfg.redacted(), False)
    token = first.token
    run_id = "slurm-clean-01"
    mark = dir_mark(first.owner_key, f"site-job-{token}", run_id)   # the run's owner mark (spec.owner_mark)
    first.close()
    ckpt = f"{cluster}/site-job-{token}/{run_id}"
    rdir = f"/shared/poc/site-job-{token}/{run_id}"
    # what an interrupted attempt of this run left: its checkpoint (not loadable) and the run's mark
    login(["sh", "-c", 'mkdir -p "$1" && printf %s "$2" > "$1/$3" && echo stale > "$1/ckpt-30.pt"', "sh",
           ckpt, mark, OWNER_MARK], check=True)

    store = Store(results, cfg.campaign)
    out: dict = {}
    th = threading.Thread(target=lambda: out.update(recs=campaign(cfg, ["slurm"], store,
                                                                   lambda p: make_backend(p, cfg), resume=True)))
    th.start()
    try:
        # the workers' USR1 handler is installed once training starts
        wait_for("the job's first training step",
                 lambda: any(e.get("kind") == "step" for e in _events_of(f"{rdir}/events")), 240)
        job = login(["squeue", "-h", "--me", "-n", f"poc-{run_id}", "-o", "%i"]).stdout.split()
        assert len(job) == 1, job
        sent = login(["scancel", "--signal=USR1", "--batch", job[0]])
        assert sent.returncode == 0, sent.stderr
    finally:
        th.join(timeout=400)
    assert not th.is_alive()
    (rec,) = out["recs"]
    assert rec["status"] == "ok", rec.get("error")
    events = load_events(store.run_dir(run_id)) or []
    loaded = [e for e in events if e["kind"] == "checkpoint_loaded"]
    assert loaded and all(e["step"] == 0 for e in loaded), loaded          # not from the stale ckpt-30.pt
    saved = [e for e in events if e["kind"] == "checkpoint_saved"]
    assert [e["why"] for e in saved] == ["signal"], saved
    assert saved[0]["path"].startswith(f"{ckpt}/ckpt-"), saved
    steps = [e for e in events if e["kind"] == "step"]
    attempts = {json.dumps(e["attempt"]) for e in steps}
    assert all(not any(json.loads(a)) if a.startswith("[") else not json.loads(a) for a in attempts), \
        f"the job finished in its first attempt, with no requeue: {attempts}"
    assert max(e["step"] for e in steps) == WORKLOAD["steps"]
    # the batch script stamped the step's request: srun -> every rank's first event is its own phase
    assert 0 < rec["metrics"]["step_launch_s"]["value"] < rec["metrics"]["launch_s"]["value"]
    # the run's checkpoint directory went with the run, through its owner mark
    assert login(["test", "-e", ckpt]).returncode != 0
    assert login(["test", "-e", rdir]).returncode != 0


def test_ranks_get_slurmds_memlock_not_the_submitting_shells(cluster):
    """sbatch from a shell whose memlock is 64 KiB: the ranks record slurmd's 8 MiB."""
    cfg = config.from_mapping({"campaign": "site-memlock", "platforms": ["slurm"], "faults": [],
                               "workload": {**WORKLOAD, "steps": 2}, "resources": RESOURCES})
    spec = build_spec(cfg, "slurm", "slurm-clean-01", None)
    job = render_sbatch(spec, cfg.slurm)
    login(["mkdir", "-p", job.run_dir], check=True)
    for path, text in ((job.workload_path, workload_script().read_text()), (f"{job.run_dir}/job.sbatch", job.script)):
        argv = slurm_docker.login_exec_argv(["sh", "-c", 'cat > "$1"', "sh", path])
        subprocess.run([*argv[:2], "-i", *argv[2:]], input=text, text=True, check=True, timeout=60)   # docker exec -i
    try:
        sub = login(["bash", "-c", 'ulimit -S -l 64 && cd "$1" && sbatch --parsable job.sbatch', "bash", job.run_dir])
        assert sub.returncode == 0, sub.stderr
        job_id = sub.stdout.strip().split(";")[0]
        wait_for(f"job {job_id} to end", lambda: login(["squeue", "-h", "-j", job_id]).stdout.strip() == "", 240)
        starts = [e for e in _events_of(job.events_dir) if e["kind"] == "process_start"]
        assert len(starts) == 2, starts
        assert all(e["limits"]["memlock"][0] == 8 * 1024 * 1024 for e in starts), [e["limits"] for e in starts]
    finally:
        login(["rm", "-rf", job.run_dir])
