"""The five user mistakes on the Slurm-in-Docker cluster, through the mistake probe (harness/ux/probe.py),
as poc smoke runs them (the smoke config, user poc over ssh).

For each mistake the probe must store a run whose messages include one that names the problem, in
Slurm's own words, before the deadline; and the cluster must be left with nothing of the run (no job
in squeue, the run directory removed as keep_run_files says). What each said, and when, was recorded
by hand first (tests/fixtures/slurm/mistakes): sbatch refuses a wrong partition and an impossible GPU
count at once; a missing venv shows in the job's output within ~2-4 s; an entrypoint typo when
python starts (~5-10 s); an uncreatable checkpoint directory at the first checkpoint (~11-15 s with
checkpoint_every 5). About 30 s on 2 cores. Uses the cluster test_slurm_cluster.py describes.
"""
from __future__ import annotations

import fcntl
import os
import time

import pytest

from harness import config
from harness.backends.factory import make_backend
from harness.clusters import slurm_docker
from harness.smoke import smoke_config
from harness.store import Store
from harness.ux import probe

pytestmark = [
    pytest.mark.integration, pytest.mark.slurm,
    # harness.pipeline.host_facts() leaves /proc/cpuinfo open (see test_slurm_runs.py)
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
LOCK = "/tmp/poc-slurm.lock"    # other suites on this machine submit to the same cluster
SMALL = {"steps": 24, "checkpoint_every": 5, "sweep": "1K:1M", "sweep_iters": 3, "sweep_warmup": 1}

# (where a user reads it first, words it holds): recorded in tests/fixtures/slurm/mistakes
EXPECTED = {
    "impossible_resources": ("at submit: SubmitError", "Requested node configuration is not available"),
    "missing_image": ("job output", "/opt/poc-venv-missing/bin/activate: No such file or directory"),
    "wrong_queue": ("at submit: SubmitError", "invalid partition specified: gpu-typo"),
    "entrypoint_typo": ("job output", "can't open file"),
    # the run's checkpoint directory is made at submit (mode 0700, with its owner mark), so a path the user
    # cannot create is named there, before the job queues
    "missing_checkpoint_volume": ("at submit: BackendError", "cannot create directory '/poc-missing-filesystem'"),
}


@pytest.fixture(scope="module")
def cluster():
    """Brought up when it is not; never taken down here: other suites and sessions share it."""
    info = slurm_docker.up(release=RELEASE, timeout=300)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield info


@pytest.fixture(scope="module")
def store(tmp_path_factory, cluster):
    cfg = smoke_config(config.load(None), ["slurm"], 1)
    cfg = config.from_mapping({**cfg.model_dump(mode="json"), "campaign": "ux-mistakes-slurm",
                               "workload": {**cfg.workload.model_dump(mode="json"), **SMALL}})
    s = Store(tmp_path_factory.mktemp("results"), cfg.campaign)
    s.open(cfg.config_hash(), cfg.redacted(), resume=False)
    yield cfg, s
    s.close()


def login(argv: list[str]) -> str:
    return slurm_docker.run(slurm_docker.login_exec_argv(argv)).stdout


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_slurm_names_the_mistake_before_the_deadline_and_nothing_is_left(kind, store):
    cfg, s = store
    run_id = f"slurm-mistake-{kind.replace('_', '-')}"
    rec = probe.run(cfg, "slurm", run_id, kind, s, make_backend)
    m = rec["mistake"]
    said = "\n".join(f"+{x['at_s']}s [{x['source']}] {x['text'][:200]}" for x in m["messages"])
    print(f"\n{kind}: clear={m['clear']} in {m['time_to_error_s']} s [{m['source']}] {m['message']}\n{said}")
    assert rec["status"] == "ok", rec.get("error")
    assert m["clear"], f"no clear message within {m['deadline_s']} s; the user saw:\n{said}"
    source, words = EXPECTED[kind]
    assert m["source"].startswith(source) and words in m["message"], said
    assert m["at_submit"] is source.startswith("at submit")
    assert m["time_to_error_s"] <= m["deadline_s"]
    assert f"time_to_error_s:{kind}" in rec["metrics"]
    calls = rec["ux"]["calls"]
    if m["at_submit"] and kind == "missing_checkpoint_volume":   # refused while preparing: nothing submitted
        assert "sbatch" not in calls["submit"] and "watch" not in calls and not rec.get("job_ids"), calls
    elif m["at_submit"]:
        assert calls["submit"].get("sbatch") == 1 and "watch" not in calls, calls
    else:   # the probe watched: squeue once per look (sacct once the job had ended)
        assert calls["submit"].get("sbatch") == 1 and calls["watch"].get("squeue", 0) >= 1, calls
        assert calls["cancel"].get("scancel") == 1, calls
    assert not rec.get("cancel_error"), rec["cancel_error"]
    # a cancelled job stays in squeue while it completes (its step's processes are killed, the epilog
    # runs): gone within seconds, never left behind
    deadline = time.monotonic() + 60
    while (left := [j for j in rec.get("job_ids") or [] if j in login(["squeue", "-h", "-o", "%i"]).split()]) \
            and time.monotonic() < deadline:
        time.sleep(1)
    assert not left, f"job(s) {left} left in squeue 60 s after the cancel"
    rdir = f"{cfg.slurm.workdir.rstrip('/')}/{cfg.campaign}-{s.token}/{run_id}"   # keyed by the campaign's token
    kept = rec.get("cleanup", {}).get("kept") or []
    left = login(["sh", "-c", 'test -e "$1" && echo yes || echo no', "sh", rdir]).strip()
    assert left == ("yes" if rdir in kept else "no"), rec.get("cleanup")
    stored = [r for r in s.runs() if r["run_id"] == run_id]
    assert stored and stored[-1]["mistake"]["message"] == m["message"]
    assert not s.inflight(), "the probe left its run marked in flight"
