"""The environment a job submitted through the local cluster's real slurmrestd starts with.

* slurm.rest.job_environment set: one small batch job prints its PATH into its output file, and that
  PATH holds a directory only the configured environment names.
* unset: preflight's record (the transport's description) holds the PATH a login shell on the login
  node has, read over the harness's ssh channel; nothing is submitted.

Run it as the other Slurm integration tests are run: ``flock /tmp/poc-slurm.lock pytest tests/integration/...``.
"""
from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from _slurm_checks import settings_without_starting

from harness import config
from harness.backends.slurm.rest import rest_parts
from harness.clusters import slurm_docker

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
TOKEN_ENV = "POC_TEST_SLURM_JWT"
# a directory no login shell or default PATH on the cluster has: seen by the job only if it was sent
PROBE_PATH = "/opt/poc-only-in-the-config/bin:/usr/local/bin:/usr/bin:/bin"


@pytest.fixture(scope="module")
def settings() -> dict:
    return settings_without_starting(RELEASE)


@pytest.fixture
def rest(settings, monkeypatch):
    """rest_parts for a config's slurm.rest.job_environment, with a fresh token for user poc."""
    monkeypatch.setenv(TOKEN_ENV, slurm_docker.rest_token(user="poc", lifespan_s=300))
    made = []

    def make(job_environment=None):
        cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"transport": "rest", "rest": {
            "token_env": TOKEN_ENV, "job_environment": job_environment}}})
        files, sched, _ = rest_parts(cfg.slurm, settings)
        made.append(sched)
        return files, sched
    yield make
    for sched in made:
        sched.close()


def test_a_configured_job_environment_is_the_batch_jobs_environment(rest):
    files, sched = rest({"PATH": PROBE_PATH, "LANG": "C.UTF-8"})
    assert sched.describe()["job_environment"]["source"] == "config"
    run_dir = f"/shared/poc/itest-rest-env-{uuid.uuid4().hex[:8]}"
    files.run(["mkdir", "-p", run_dir], timeout=30)
    script = ("#!/bin/bash\n#SBATCH --job-name=poc-itest-rest-env --nodes=1 --ntasks=1 --time=00:01:00\n"
              f"#SBATCH --output={run_dir}/env.out\nprintf 'PATH=%s\\n' \"$PATH\"\n")
    job_id = sched.submit(script, run_dir)
    try:
        deadline, state = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            _, text, _ = sched.squeue([job_id])
            jobs = json.loads(text)["jobs"]
            state = jobs[0]["job_state"] if jobs else ["GONE"]
            if not {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING"} & set(state):
                break
            time.sleep(1)
        assert state == ["COMPLETED"], f"job {job_id} is {state}"
        out = files.run(["cat", f"{run_dir}/env.out"], timeout=30).stdout
        assert out.splitlines() == [f"PATH={PROBE_PATH}"], out
    finally:
        sched.cancel([job_id])
        files.run(["rm", "-rf", "--", run_dir], timeout=30, check=False)


def test_unset_the_job_environment_is_the_login_shells_path_read_at_preflight(rest):
    _, sched = rest()
    d = sched.describe()["job_environment"]    # what preflight stores with the run
    login_path = slurm_docker.run(slurm_docker.login_exec_argv(["bash", "-lc", 'printf %s "$PATH"'])).stdout
    assert d["source"] == "login shell", d
    assert d["environment"][0] == f"PATH={login_path}" and d["names"][0] == "PATH"
    assert set(d["names"]) <= {"PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH"}
    assert sched.calls["bash"] == 1
    sched.describe()
    assert sched.calls["bash"] == 1            # read once
