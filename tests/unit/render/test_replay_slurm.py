"""A trace job as the batch script a Slurm replay submits (pure)."""
from __future__ import annotations

from harness.render import replay_slurm as rs
from harness.render.replay_k8s import TenantQuota
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
    assert "#SBATCH --account=a_b_sbatch_--uid_0_rm_-rf_" in lines and "#SBATCH --qos=x_id_" in lines
    assert "#SBATCH --partition=gpu_x" in lines and "#SBATCH --job-name=r_1" in lines
    assert not any("gpus" in ln for ln in lines)
    assert [ln for ln in lines if not ln.startswith("#")] == ["exec sleep 45"]


def test_equal_quotas_are_equal_shares_with_no_gpu_cap():
    shares = rs.account_shares([TenantQuota("Team-A", 16), TenantQuota("b", 16)])
    assert shares == [rs.AccountShare("team-a", "Team-A", 16), rs.AccountShare("b", "b", 16)]
    assert rs.account_setup(shares) == [
        ["sacctmgr", "-i", "add", "account", "team-a", "fairshare=16"],
        ["sacctmgr", "-i", "add", "user", "root", "account=team-a"],
        ["sacctmgr", "-i", "add", "account", "b", "fairshare=16"],
        ["sacctmgr", "-i", "add", "user", "root", "account=b"]]
    # the account sbatch names is the account made
    assert "#SBATCH --account=team-a" in rs.batch_script(job(tenant="Team-A"), rs.SlurmTarget(replay="r"))


def test_a_borrowing_limit_is_a_gpu_cap_and_a_zero_quota_still_one_share():
    shares = rs.account_shares([TenantQuota("a", 8, borrow_gpus=4), TenantQuota("z", 0)])
    assert shares == [rs.AccountShare("a", "a", 8, 12), rs.AccountShare("z", "z", 1)]
    assert rs.account_setup(shares[:1], user="alice")[0] == [
        "sacctmgr", "-i", "add", "account", "a", "fairshare=8", "GrpTRES=gres/gpu=12"]


def test_tenants_that_clean_up_alike_are_one_account_with_their_shares_summed():
    shares = rs.account_shares([TenantQuota("A", 4), TenantQuota("a", 4, borrow_gpus=0)])
    assert shares == [rs.AccountShare("a", "A,a", 8)]


def test_account_names_from_trace_text_stay_one_argv_item():
    shares = rs.account_shares([TenantQuota("x; sacctmgr -i delete account root", 1)])
    argv = rs.account_setup(shares)[0]
    assert argv[4] == "x_sacctmgr_-i_delete_account_root" and len(argv) == 6


def test_teardown_removes_the_user_from_the_accounts_then_the_accounts():
    assert rs.account_teardown(["a", "b"]) == [
        ["sacctmgr", "-i", "delete", "user", "name=root", "account=a,b"],
        ["sacctmgr", "-i", "delete", "account", "name=a,b"]]
    assert rs.account_teardown([]) == []
