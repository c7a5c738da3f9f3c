"""The Slurm version-upgrade drill on the local cluster (24.11 from trixie -> 26.05 from sid, the path
Slurm's upgrade guide allows; harness/clusters/slurm/upgrade.py): slurmdbd and slurmctld come back from
the newer image with their volumes (the accounting database converted by slurmdbd, the saved job state
by slurmctld), each slurmd is upgraded in place, and a real 2-node job keeps running through it, its
24.11 slurmstepd under 26.05's slurmd. Then the cluster is recreated at the pinned release.

Not in the default run (it fetches packages once, builds an image and recreates the cluster: minutes
of CI): tests/upgrade is collected only by name, `flock /tmp/poc-slurm.lock .venv/bin/pytest
tests/upgrade/test_drill_slurm_upgrade.py`; benchmarks/upgrade_drill.py runs the same drill through
`poc run` and its output is committed with results/drills-2026-12-03."""
from __future__ import annotations

import time

import pytest
from _drill_slurm import Probes, backend, handle, step_pids, submit_pair
from _poc import login, squeue_state, wait_for

from harness.clusters import slurm_docker
from harness.config.drills import Drills
from harness.drills.platforms import platform_drill

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.upgrade]


def test_upgrade_drill_carries_the_running_job_and_the_accounting_over():
    info = slurm_docker.up(release="trixie", timeout=300)
    assert info.slurm_version.startswith("24.11"), info.slurm_version
    drill = platform_drill(backend(), Drills(component_timeout_s=180))
    assert drill.owned()[0]
    t0 = time.time()
    prepared = drill.prepare("upgrade")
    print(f"\nprepare: {time.time() - t0:.1f} s {prepared}")
    target = prepared["version"].split("-")[0]
    # a job that ended before the upgrade: its accounting record must come through the conversion
    done = login(["sbatch", "--parsable", "-N1", "-o", "/dev/null", "--wrap", "true"], check=True).stdout.strip()
    wait_for(f"job {done} recorded as completed",
             lambda: "COMPLETED" in login(["sacct", "-n", "-X", "-j", done, "-o", "State"]).stdout, 60)
    jobs: list[str] = []
    try:
        run_id, queued = submit_pair(jobs)
        pids = step_pids()
        before = drill.snapshot([handle(run_id), handle(done)])
        steps = []
        with Probes(drill) as probes:
            for comp in drill.plan("upgrade"):
                st = drill.step("upgrade", comp)
                steps.append(st)
                assert st.ok and st.back is not None, st.to_json()
                assert st.version_after == target, st.to_json()
        print("upgrade drill: " + "; ".join(
            f"{s.component} {s.version_before}->{s.version_after} back after {s.back - s.started:.2f} s"
            + (f" (install {s.extra['install_s']} s)" if "install_s" in s.extra else "") for s in steps))
        print(f"submissions refused {probes.refused_s('submit')} s {probes.refusals('submit')}; "
              f"status refused {probes.refused_s('status')} s {probes.refusals('status')}")
        assert drill.try_submit() is None and drill.try_status() is None
        assert squeue_state(run_id) == "RUNNING"
        assert f"{run_id}.0" in login(["squeue", "-h", "-s", "-o", "%i"]).stdout
        assert step_pids() == pids
        after = drill.snapshot([handle(run_id), handle(done)])
        rows = {r["JobID"]: r for r in after["sacct"]["rows"]}
        old = {r["JobID"]: r for r in before["sacct"]["rows"]}
        assert rows[done]["State"] == "COMPLETED" and rows[done]["Submit"] == old[done]["Submit"]
        assert rows[run_id]["Start"] == old[run_id]["Start"]
        assert "poc" in login(["sacctmgr", "-n", "-P", "show", "assoc", "user=poc", "format=account"]).stdout
        login(["scancel", run_id], check=True)
        t1 = time.time()
        wait_for(f"queued job {queued} running", lambda: squeue_state(queued) == "RUNNING", 90)
        print(f"queued job started {time.time() - t1:.1f} s after the running one was cancelled")
        final = drill.snapshot([handle(run_id)])
        print(f"the upgraded-through job ended as {[(r['JobID'], r['State']) for r in final['sacct']['rows']]}")
        login(["scancel", queued], check=True)
        wait_for("both jobs gone and the nodes idle", lambda: not drill.leftovers([handle(run_id), handle(queued)]), 90)
    finally:
        if jobs:
            login(["scancel", *jobs])
        t2 = time.time()
        restored = drill.restore("upgrade")
        print(f"restore: {time.time() - t2:.1f} s {restored}")
    assert restored["slurm_version"].startswith("24.11")
    assert "poc" in login(["sacctmgr", "-n", "-P", "show", "assoc", "user=poc", "format=account"]).stdout
