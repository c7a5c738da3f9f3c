"""The queue policy pairs: each side's settings, the Kueue objects they give, and the running Slurm cluster
checked against a pair's Slurm side."""
from __future__ import annotations

import pytest

from harness.clusters.slurm import emulated
from harness.render import replay_k8s as rr
from harness.render import replay_policy as rpol


def target(**kw) -> rr.Target:
    return rr.Target(namespace="ns", replay="r", node_labels={"type": "kwok"}, tolerations=(), **kw)


QUOTAS = [rr.TenantQuota("a", 64), rr.TenantQuota("b", 64)]


def test_strict_fifo_is_one_cluster_queue_for_every_tenant_and_strict_order():
    pair = rpol.policy("strict-fifo")
    objs = rr.queue_objects(target(queueing=pair.kueue.queueing, one_queue=pair.kueue.one_queue), QUOTAS)
    cqs = [o for o in objs if o["kind"] == "ClusterQueue"]
    lqs = [o for o in objs if o["kind"] == "LocalQueue"]
    assert len(cqs) == 1 and cqs[0]["spec"]["queueingStrategy"] == "StrictFIFO"
    gpu = cqs[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "128"}
    assert {lq["spec"]["clusterQueue"] for lq in lqs} == {cqs[0]["metadata"]["name"]} and len(lqs) == 2
    assert pair.slurm.conf() == {"SchedulerType": "sched/builtin", "PriorityWeightFairShare": "0",
                                 "PriorityWeightAge": "0", "PriorityWeightJobSize": "0"}


def test_the_site_pair_keeps_a_cluster_queue_per_tenant_with_best_effort_fifo():
    objs = rr.queue_objects(target(), QUOTAS)
    cqs = [o for o in objs if o["kind"] == "ClusterQueue"]
    assert len(cqs) == 2 and {c["spec"]["queueingStrategy"] for c in cqs} == {"BestEffortFIFO"}
    assert rpol.policy("site").slurm.weight_job_size == 1000 and rpol.policy("no-size").slurm.weight_job_size == 0
    with pytest.raises(ValueError, match="StrictFIFO"):
        target(queueing="Fair")


def test_the_emulated_cluster_renders_a_pairs_slurm_side_and_the_replay_checks_it():
    pair = rpol.policy("strict-fifo")
    conf = emulated.render_slurm_conf(emulated.EmulatedShape(nodes=4, **rpol.emulated_fields(pair)))
    assert "SchedulerType=sched/builtin" in conf and "PriorityWeightJobSize=0" in conf
    assert "PriorityWeightFairshare=0" in conf and "PriorityWeightAge=0" in conf
    site = emulated.render_slurm_conf(emulated.EmulatedShape(nodes=4))
    assert "SchedulerType=sched/backfill" in site and "PriorityWeightJobSize=1000" in site
    running = {"SchedulerType": "sched/backfill", "PriorityWeightFairShare": "10000", "PriorityWeightAge": "1000",
               "PriorityWeightJobSize": "1000"}
    assert rpol.slurm_mismatch(rpol.policy("site"), running) == [] and rpol.of_slurm_conf(running) == "site"
    wrong = rpol.slurm_mismatch(pair, running)
    assert "SchedulerType: running sched/backfill, strict-fifo wants sched/builtin" in wrong
    with pytest.raises(ValueError, match="one of site, defaults, strict-fifo, no-size"):
        rpol.policy("fair")


def test_the_limit_grace_scales_with_the_compression():
    assert rr.grace_for(1) == 30 and rr.grace_for(10) == 3 and rr.grace_for(120) == 2 and rr.grace_for(7) == 5
