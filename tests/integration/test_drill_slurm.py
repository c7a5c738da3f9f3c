"""The Slurm restart drill on the local cluster, step by step, with a real 2-node job running and a
same-shape job queued behind it: slurmdbd, slurmctld, then slurmd on c1, c2, c3 each come back, the
running job keeps its id and its srun step's processes (slurmd restarts in place; the job's
slurmstepd does not), the probes answer before and after, and the queued job starts once the running
one is cancelled. The cluster is left as it was (restore in finally; never `down`)."""
from __future__ import annotations

import os
import time

import pytest
from _drill_slurm import Probes, backend, handle, step_pids, submit_pair
from _poc import login, squeue_state, wait_for

from harness.clusters import slurm_docker
from harness.config.drills import Drills
from harness.drills.platforms import platform_drill

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")


def test_restart_drill_keeps_the_running_job_and_the_queued_one_starts_after():
    slurm_docker.up(release=RELEASE, timeout=300)
    drill = platform_drill(backend(), Drills(component_timeout_s=60))
    owned, why = drill.owned()
    assert owned, why
    plan = drill.plan("restart")
    assert plan == ["slurmdbd", "slurmctld", "slurmd@c1", "slurmd@c2", "slurmd@c3"]
    assert drill.prepare("restart") == {}
    jobs: list[str] = []
    try:
        run_id, queued = submit_pair(jobs)
        pids = step_pids()
        assert all(pids.values()), pids
        assert drill.try_submit() is None and drill.try_status() is None
        before = drill.snapshot([handle(run_id)])
        steps = []
        with Probes(drill) as probes:
            for comp in plan:
                st = drill.step("restart", comp)
                steps.append(st)
                assert st.ok and st.back is not None, st.to_json()
                assert st.back >= st.started
        took = {s.component: round(s.back - s.started, 2) for s in steps}
        print(f"\nrestart drill: back after {took}; submissions refused {probes.refused_s('submit')} s "
              f"({probes.refusals('submit')}), status refused {probes.refused_s('status')} s")
        assert drill.try_submit() is None and drill.try_status() is None
        # the same job, still running, its step's processes never restarted
        assert squeue_state(run_id) == "RUNNING"
        assert f"{run_id}.0" in login(["squeue", "-h", "-s", "-o", "%i"]).stdout
        assert step_pids() == pids
        after = drill.snapshot([handle(run_id)])
        assert after["scontrol"][run_id]["fields"]["JobState"] == "RUNNING"
        assert after["scontrol"][run_id]["fields"]["StartTime"] == before["scontrol"][run_id]["fields"]["StartTime"]
        assert {r["JobID"] for r in after["sacct"]["rows"]} >= {run_id, f"{run_id}.0", f"{run_id}.batch"}
        assert squeue_state(queued) == "PENDING"
        login(["scancel", run_id], check=True)
        t0 = time.time()
        wait_for(f"queued job {queued} running", lambda: squeue_state(queued) == "RUNNING", 60)
        print(f"queued job started {time.time() - t0:.1f} s after the running one was cancelled")
        login(["scancel", queued], check=True)
        wait_for("both jobs gone and the nodes idle",
                 lambda: not drill.leftovers([handle(run_id), handle(queued)]), 60)
    finally:
        if jobs:
            login(["scancel", *jobs])
        drill.restore("restart")
