"""A trace's jobs and tenants as the Kubernetes objects a replay creates (pure)."""
from __future__ import annotations

from harness.render import replay_k8s as rr
from harness.scale.trace import NodeShape, Trace, TraceJob

TARGET = rr.Target(namespace="poc-replay-x", replay="x", node_labels={"type": "kwok"},
                   tolerations=({"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},))


def trace() -> Trace:
    jobs = (TraceJob(id="J_7.big", submit_s=5, tenant="Team A", nodes=4, gpus_per_node=8, limit_s=600,
                     runtime_s=90, qos="high"),
            TraceJob(id="j2", submit_s=9, tenant="b", nodes=1, gpus_per_node=0, limit_s=60, runtime_s=30))
    return Trace(name="t", source="test", shape=NodeShape(nodes=16, gpus_per_node=8), duration_s=10, jobs=jobs)


def test_a_trace_job_is_a_gang_on_distinct_nodes_running_its_runtime_limited_by_its_limit():
    js = rr.jobset(trace().jobs[0], TARGET)
    assert js["metadata"]["name"].startswith("r-j-7-big-") and js["metadata"]["namespace"] == "poc-replay-x"
    assert js["metadata"]["labels"][rr.QUEUE_LABEL] == "t-team-a"
    spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (4, 4, 0)
    assert spec["activeDeadlineSeconds"] == 600 + 30       # the limit and the grace Slurm's KillWait gives
    pod = spec["template"]
    assert pod["metadata"]["annotations"] == {rr.DELAY_ANNOTATION: "90s"}
    assert pod["metadata"]["labels"][rr.TRACE_JOB_LABEL] == "j-7-big"
    assert pod["metadata"]["labels"][rr.QOS_LABEL] == "high"
    term = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term == {"labelSelector": {"matchLabels": {rr.JOBSET_NAME_LABEL: js["metadata"]["name"]}},
                    "topologyKey": "kubernetes.io/hostname"}
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"][rr.GPU] == "8" and res["limits"] == {rr.GPU: "8"}


def test_a_job_without_gpus_asks_for_none():
    res = rr.jobset(trace().jobs[1], TARGET)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert rr.GPU not in res["containers"][0]["resources"]["requests"]
    assert res["containers"][0]["resources"]["limits"] == {}


def test_equal_quotas_split_the_gpus_and_hand_the_remainder_out_in_name_order():
    assert rr.equal_quotas(trace(), 130) == [rr.TenantQuota("Team A", 65), rr.TenantQuota("b", 65)]
    assert [q.gpus for q in rr.equal_quotas(trace(), 129)] == [65, 64]


def test_each_tenant_is_a_local_queue_on_its_own_cluster_queue_in_one_cohort():
    objs = rr.queue_objects(TARGET, [rr.TenantQuota("Team A", 64, borrow_gpus=32), rr.TenantQuota("b", 64)])
    # the ClusterQueues first, then the LocalQueues that feed them (one ClusterQueue may take several)
    assert [o["kind"] for o in objs] == ["Namespace", "ResourceFlavor", "ClusterQueue", "ClusterQueue",
                                          "LocalQueue", "LocalQueue"]
    flavor = objs[1]
    assert flavor["spec"]["nodeLabels"] == {"type": "kwok"}
    assert flavor["spec"]["tolerations"] == list(TARGET.tolerations)
    cq_a, cq_b, lq_a = objs[2], objs[3], objs[4]
    assert cq_a["spec"]["cohort"] == cq_b["spec"]["cohort"] == "poc-replay"
    gpu_a = cq_a["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu_a == {"name": rr.GPU, "nominalQuota": "64", "borrowingLimit": "32"}
    assert "borrowingLimit" not in cq_b["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert lq_a["metadata"] == {"name": "t-team-a", "namespace": "poc-replay-x", "labels": {rr.REPLAY_LABEL: "x"}}
    assert lq_a["spec"]["clusterQueue"] == cq_a["metadata"]["name"] == "x-team-a"
    assert all(o["metadata"]["labels"] == {rr.REPLAY_LABEL: "x"} for o in objs)


def test_names_are_dns_labels_whatever_the_trace_says():
    assert rr.k8s_name("__A b.C__") == "a-b-c"
    assert rr.k8s_name("!!!") == "x"


def _job(id: str) -> TraceJob:
    return TraceJob(id=id, submit_s=0, tenant="a", nodes=1, gpus_per_node=1, limit_s=2, runtime_s=1)


def test_jobset_names_are_short_and_two_ids_never_share_one():
    assert rr.jobset_name(_job("j-001")) == "r-j-001"
    ids = ["J_1", "j-1", "j.1", "x" * 100, "x" * 100 + "y"]
    names = [rr.jobset_name(_job(i)) for i in ids]
    assert len(set(names)) == len(ids) and all(len(n) <= 40 and rr.k8s_name(n) == n for n in names)


def test_with_topology_aware_scheduling_the_flavor_names_a_topology_and_each_gang_prefers_one_block():
    import dataclasses
    tas = dataclasses.replace(TARGET, topology="preferred")
    objs = rr.queue_objects(tas, rr.equal_quotas(trace(), 128))
    kinds = [o["kind"] for o in objs]
    assert kinds[:3] == ["Namespace", "Topology", "ResourceFlavor"]      # a flavor's topology must exist first
    topo, flavor = objs[1], objs[2]
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [rr.BLOCK_LABEL, rr.RACK_LABEL,
                                                                   "kubernetes.io/hostname"]
    assert flavor["spec"]["topologyName"] == topo["metadata"]["name"]
    assert topo["metadata"]["labels"] == {rr.REPLAY_LABEL: "x"}          # so the clean-up finds it
    pod = rr.jobset(trace().jobs[0], tas)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"][rr.PREFERRED_TOPOLOGY] == rr.BLOCK_LABEL
    assert "Kueue TAS: each gang preferred inside one poc.scale/block" in rr.topology_text(tas)
    # off: no Topology, no annotation, and the settings say so
    assert "Topology" not in [o["kind"] for o in rr.queue_objects(TARGET, [])]
    assert "topologyName" not in rr.queue_objects(TARGET, [])[1]["spec"]
    assert "Kueue TAS off" in rr.topology_text(TARGET)
    required = dataclasses.replace(TARGET, topology="required")
    pod = rr.jobset(trace().jobs[0], required)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == rr.BLOCK_LABEL
