"""A trace replayed on the native cluster's real control plane over emulated nodes (KWOK): each job a
gang JobSet in its tenant's LocalQueue, Kueue admitting within the cohort's GPUs, kube-scheduler
placing each gang on distinct nodes, KWOK ending each pod after its job's run time; the outcomes come
from the API server's own records, and everything the replay created is gone afterwards.

The trace (tests/integration/_replay.py) makes queueing certain: a whole-cluster job borrows the
second tenant's idle quota, so the jobs behind it wait for its end (no preemption is configured).
Needs root (the native cluster); about a minute.
"""
from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from _kwok import kwok_nodes
from _replay import GPUS, NODES, TRACE, check_queued_behind_the_whole_cluster_job

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness.backends.k8s.api import CLUSTERQUEUES, RESOURCEFLAVORS, TOPOLOGIES, K8sClient  # noqa: E402
from harness.clusters.k8s import kwok  # noqa: E402
from harness.render import replay_k8s as rr  # noqa: E402
from harness.replay import k8s_records  # noqa: E402
from harness.replay.k8s import K8sReplay  # noqa: E402
from harness.scale import outcome  # noqa: E402
from harness.scale import trace as tr  # noqa: E402


@pytest.fixture(scope="module")
def emulated():
    # racks of 4 in blocks of 8, as the Slurm replay test's topology.conf: two blocks to place gangs in
    with kwok_nodes(NODES, GPUS, rack_size=4, racks_per_block=2) as (L, _core):
        yield L


@pytest.mark.parametrize("topology", ["off", "preferred"])
def test_a_trace_replays_with_gangs_on_distinct_nodes_and_queues_behind_the_whole_cluster_job(tmp_path, emulated,
                                                                                               topology):
    """With Kueue TAS (preferred: inside one block) and without it."""
    L = emulated
    name = f"it-{uuid.uuid4().hex[:6]}"
    target = rr.Target(namespace=f"poc-replay-{name}", replay=name, topology=topology,
                       node_labels={kwok.TYPE_LABEL[0]: kwok.TYPE_LABEL[1]}, tolerations=(kwok.TOLERATION,))
    client = K8sClient(str(L.admin_kubeconfig))
    rep = K8sReplay(client, target)
    try:
        result = rep.run(TRACE, rr.equal_quotas(TRACE, NODES * GPUS), timeout_s=90)
    finally:
        gone = rep.delete()
        left = [o["metadata"]["name"] for res in (CLUSTERQUEUES, RESOURCEFLAVORS, TOPOLOGIES) for o in client.to_dict(
            client.custom().list_cluster_custom_object(*res, label_selector=f"{rr.REPLAY_LABEL}={name}"))["items"]]
        client.close()
    (tmp_path / "records.json").write_text(json.dumps(result, indent=1))
    print(f"\nreplay: {len(TRACE.jobs)} jobs, harness CPU {result['harness_cpu_s']} s, {result['looks']} looks, "
          f"calls {result['calls']}")
    assert gone and not left, f"left behind: namespace gone={gone}, cluster objects {left}"
    assert result["ended"] and not [s for s in result["submitted"] if s["error"]], result["submitted"]
    # the submissions kept to the trace's offsets (a second's slack: pacing sleeps up to 1 s)
    for s in result["submitted"]:
        assert s["due_s"] <= s["sent_at"] <= s["due_s"] + 1.5, s

    raw = result["raw"]
    got = {o.id: o for o in k8s_records.outcomes(TRACE, raw["jobsets"], raw["pods"])}
    for o in got.values():
        print(f"  {o.id}: {o.nodes} nodes, queued {o.queue_s} s, ran {o.end - o.start} s, {o.state}")
    check_queued_behind_the_whole_cluster_job(got)
    # each gang on distinct emulated nodes
    nodes_of: dict[str, list[str]] = {}
    for p in raw["pods"]:
        nodes_of.setdefault(p["metadata"]["labels"][rr.JOBSET_NAME_LABEL], []).append(p["spec"]["nodeName"])
    for j in TRACE.jobs:
        placed = nodes_of[rr.jobset_name(j)]
        assert len(placed) == len(set(placed)) == j.nodes and all(n.startswith(kwok.NODE_PREFIX) for n in placed)
    admitted = k8s_records.admitted_times(raw["workloads"])
    assert set(admitted) == {rr.jobset_name(j) for j in TRACE.jobs}
    q = outcome.queue_by_size(list(got.values()))
    assert q["all"]["jobs"] == q["all"]["started"] == 4
    if topology == "preferred":   # as Slurm's topology/tree: every gang that fits a block of 8 inside one
        where = outcome.placement(list(got.values()), k8s_records.block_of(raw))
        assert where == {"block_nodes": 8, "multi_node_jobs": 3, "in_fewest_blocks": 3, "extra_blocks": 0}, where
        # Kueue placed them: each admission carries its topology assignment
        assert all("topologyAssignment" in ps for w in raw["workloads"]
                   for ps in w["status"]["admission"]["podSetAssignments"]), raw["workloads"]


def test_poc_scale_replay_stores_records_that_rederive(tmp_path, capsys, emulated):
    """The command a user runs: a synthetic trace (seed 4: 11 jobs in 2 h, the longest 2.8 h) compressed
    600x, replayed, stored, re-derived."""
    from harness.cli import main
    trace = tmp_path / "t.jsonl"
    assert main(["scale", "synth", "--nodes", str(NODES), "--hours", "2", "--load", "0.5", "--seed", "4",
                 "--out", str(trace), "-q"], env={}) == 0
    results = tmp_path / "results"
    capsys.readouterr()
    rc = main(["scale", "replay", str(trace), "--platform", "k8s", "--compress", "600", "--results", str(results),
               "--name", "r1", "-o", "json"], env={})
    out = capsys.readouterr().out
    print(out)
    assert rc == 0, out
    figs = json.loads(out)["k8s"]
    jobs = len(tr.load(trace).jobs)
    assert figs["jobs"] == jobs and figs["states"] == {"completed": jobs} and figs["queue_s"]["all"]["started"] == jobs
    assert 0 < figs["gpu_utilisation"] <= 1
    assert main(["scale", "rederive", str(results / "r1")], env={}) == 0


def test_an_interrupted_replay_keeps_the_records_of_what_it_created_and_leaves_nothing(emulated):
    """Ctrl-C during submission: the JobSets created so far are in the records, marked interrupted, and the
    clean-up still removes everything."""
    L = emulated
    name = f"it-{uuid.uuid4().hex[:6]}"
    target = rr.Target(namespace=f"poc-replay-{name}", replay=name,
                       node_labels={kwok.TYPE_LABEL[0]: kwok.TYPE_LABEL[1]}, tolerations=(kwok.TOLERATION,))
    client = K8sClient(str(L.admin_kubeconfig))

    pressed = []

    def ctrl_c(s):   # the first wait of the submission is interrupted; the clean-up's waits are real
        if not pressed:
            pressed.append(s)
            raise KeyboardInterrupt
        time.sleep(s)
    rep = K8sReplay(client, target, sleep=ctrl_c)
    try:
        result = rep.run(TRACE, rr.equal_quotas(TRACE, NODES * GPUS), timeout_s=90)
    finally:
        gone = rep.delete()
        client.close()
    first = [j.id for j in TRACE.jobs if j.submit_s == TRACE.jobs[0].submit_s]
    assert result["interrupted"] and not result["ended"] and gone
    assert sorted(s["job"] for s in result["submitted"]) == sorted(first)
    assert set(first) < {j.id for j in TRACE.jobs}
    assert sorted(js["metadata"]["name"] for js in result["raw"]["jobsets"]) == sorted(
        rr.jobset_name(j) for j in TRACE.jobs if j.id in first)
