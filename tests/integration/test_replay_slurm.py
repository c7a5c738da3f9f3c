"""A trace replayed on the emulated Slurm cluster (slurmctld's real scheduler over 16 slurmd in one
container): each job a batch script sleeping its run time, submitted at its offset, the queue watched
with squeue, the outcomes read from slurmctld's job completion records; each job on distinct nodes,
the three behind the whole-cluster job queued until its end, and nothing of the replay left queued.
Each tenant is a slurmdbd account for the replay's length, with equal fair shares; associations are
enforced, so a job of an account that is none is refused.

Uses its own container and network (harness/clusters/slurm/emulated.py), never the Slurm-in-Docker
cluster's; builds the image when it is missing (about 4 minutes the first time). About a minute after.
"""
from __future__ import annotations

import json

import pytest
from _replay import GPUS, NODES, TRACE, check_queued_behind_the_whole_cluster_job

from harness.clusters import images
from harness.clusters.slurm.emulated import EmulatedShape, EmulatedSlurm
from harness.render import replay_slurm as rs
from harness.replay import local, slurm_records
from harness.replay import store as rstore
from harness.replay.slurm import SlurmReplay

pytestmark = [pytest.mark.integration, pytest.mark.slurm]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmulatedSlurm(EmulatedShape(nodes=NODES, gpus_per_node=GPUS, rack_size=4, racks_per_block=2),
                      tmp_path_factory.mktemp("etc"), images.ensure_slurm_emulated_image())
    try:
        c.up(idle_timeout=120)
        yield c
    finally:
        c.down()


def _accounts(cluster) -> set[str]:
    return set(cluster.exec(["sacctmgr", "-n", "-P", "list", "account", "format=account"]).stdout.split())


def test_a_trace_replays_on_emulated_slurm_nodes_and_queues_behind_the_whole_cluster_job(cluster, tmp_path):
    assert local.emulated_slurm_nodes() == (NODES, GPUS)
    result, gpus = local.replay_slurm(TRACE, "it-slurm", timeout_s=120)
    assert gpus == NODES * GPUS
    print(f"\nreplay: harness CPU {result['harness_cpu_s']} s, {result['looks']} looks, calls {result['calls']}")
    assert result["ended"] and not result["cancelled"]
    assert [s["error"] for s in result["submitted"]] == [""] * len(TRACE.jobs), result["submitted"]
    for s in result["submitted"]:
        assert s["due_s"] <= s["sent_at"] <= s["due_s"] + 1.5, s
    assert len(result["raw"]["jobcomp"]) == len(TRACE.jobs) and result["raw"]["utc_offset"]

    got = {o.id: o for o in slurm_records.outcomes(TRACE, result["submitted"], result["raw"])}
    for o in got.values():
        print(f"  {o.id}: {o.nodes} nodes, queued {o.queue_s} s, ran {o.end - o.start} s, {o.state}")
    check_queued_behind_the_whole_cluster_job(got)
    # each job on as many distinct nodes as it asked for
    for line in result["raw"]["jobcomp"]:
        f = slurm_records.fields(line)
        hosts = cluster.exec(["scontrol", "show", "hostnames", f["NodeList"]]).stdout.split()
        trace_job = next(s["job"] for s in result["submitted"] if s["job_id"] == f["JobId"])
        assert len(set(hosts)) == int(f["NodeCnt"]) == next(j.nodes for j in TRACE.jobs if j.id == trace_job)
        assert f["Account"] in ("a", "b") and f["Name"] == result["settings"]["job_name"]
    # stored, the figures re-derive from the raw records
    figs = rstore.save(tmp_path / "r", TRACE, "slurm", result, NODES * GPUS)
    assert figs["states"] == {"completed": 4} and figs["jobs_without_record"] == 0
    # topology/tree over racks of 4 in blocks of 8: every multi-node job in the fewest blocks it fits
    assert figs["placement"] == {"block_nodes": 8, "multi_node_jobs": 3, "in_fewest_blocks": 3, "extra_blocks": 0}
    assert rstore.rederive(tmp_path / "r") == []
    (tmp_path / "slurm-records.json").write_text(json.dumps(result, indent=1))


def test_fair_share_is_live_with_the_tenants_equal_shares_and_the_accounts_go_after(cluster, tmp_path):
    """sshare at the replay's end shows each tenant's account with the same raw shares (equal quotas of
    128 GPUs: 64 each), and the accounts made for the replay are gone afterwards."""
    result, _ = local.replay_slurm(TRACE, "it-share", timeout_s=120)
    s = result["settings"]
    print("\n".join(s["sshare_at_end"]))
    assert [(a["account"], a["fairshare"], a["made_for_replay"]) for a in s["accounts"]] == [
        ("a", 64, True), ("b", 64, True)]
    rows = [dict(zip(s["sshare_at_end"][0].split("|"), ln.split("|"), strict=True)) for ln in s["sshare_at_end"][1:]]
    accounts = {r["Account"].strip(): r for r in rows if not r["User"]}
    assert accounts["a"]["RawShares"] == accounts["b"]["RawShares"] == "64", accounts
    assert accounts["a"]["NormShares"] == accounts["b"]["NormShares"], accounts
    assert any(r["Account"].strip() == "a" and r["User"] == "root" for r in rows)
    assert s["PriorityWeightFairShare"] == "10000" and "associations" in s["AccountingStorageEnforce"]
    assert s["accounts_removed"] and not {"a", "b"} & _accounts(cluster)


def test_associations_are_enforced_a_job_of_an_unknown_account_is_refused(cluster):
    res = cluster.exec(["sbatch", "--account=no-such-tenant", "--wrap", "true"])
    assert res.returncode != 0 and "Invalid account" in res.stderr, res
    # root's own association (the cluster's root account) still runs jobs without --account
    ok = cluster.exec(["sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "true"], timeout=60)
    assert ok.returncode == 0, ok.stderr


def test_an_unfinished_replay_cancels_what_it_left(cluster):
    """A watch that gives up cancels the replay's jobs still queued, so none is left on the cluster."""
    rep = SlurmReplay(local.slurm_shell, rs.SlurmTarget(replay="it-slurm-cut"))
    made = local.make_accounts(local.rsl.account_shares(local.rr.equal_quotas(TRACE, NODES * GPUS)))
    try:
        result = rep.run(TRACE, timeout_s=0)
    finally:
        assert local.remove_accounts(made) == ""
    assert not result["ended"] and result["cancelled"], result
    assert rep.queued() == {}
    states = {slurm_records.fields(ln)["JobState"] for ln in result["raw"]["jobcomp"]}
    assert "CANCELLED" in states, result["raw"]["jobcomp"]
