"""A trace job as the batch script a Slurm replay submits (pure)."""
from __future__ import annotations

from harness.render import replay_slurm as rs
from harness.scale.trace import TraceJob


def job(**kw) -> TraceJob:
    base = {"id": "j1", "submit_s": 0, "tenant": "team-a", "nodes": 4, "gpus_per_node": 8, "limit_s": 90,
            "runtime_s": 45}
    return TraceJob(**{**base, **kw})


def test_a_job_is_its_nodes_one_task_each_its_gpus_its_tenant_and_a_sleep_of_its_run_time():
    text = rs.batch_script(job(), rs.SlurmTarget(replay="r1"))
    assert text.splitlines() == [
        "#!/bin/sh", "#SBATCH --job-name=r1", "#SBATCH --account=team-a", "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=1", "#SBATCH --mem=1G",
        "#SBATCH --time=2", "#SBATCH --output=/dev/null", "#SBATCH --gpus-per-node=8", "exec sleep 45"]


def test_limits_are_whole_minutes_with_the_grace_and_never_zero():
    assert rs.time_minutes(1, 0) == 1 and rs.time_minutes(60, 0) == 1 and rs.time_minutes(61, 0) == 2
    assert rs.time_minutes(30, 30) == 1 and rs.time_minutes(31, 30) == 2


def test_trace_text_reaches_only_sbatch_lines_and_only_as_a_name():
    text = rs.batch_script(job(tenant="a b\n#SBATCH --uid=0; rm -rf /", qos="x$(id)", gpus_per_node=0),
                           rs.SlurmTarget(replay="r 1", with_qos=True, partition="gpu;x"))
    lines = text.splitlines()
    assert "#SBATCH --account=a_b_SBATCH_--uid_0_rm_-rf_" in lines and "#SBATCH --qos=x_id_" in lines
    assert "#SBATCH --partition=gpu_x" in lines and "#SBATCH --job-name=r_1" in lines
    assert not any("gpus" in ln for ln in lines)
    assert [ln for ln in lines if not ln.startswith("#")] == ["exec sleep 45"]
