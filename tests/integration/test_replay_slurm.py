"""A trace replayed on the emulated Slurm cluster (slurmctld's real scheduler over 16 slurmd in one
container): each job a batch script sleeping its run time, submitted at its offset, the queue watched
with squeue, the outcomes read from slurmctld's job completion records; each job on distinct nodes,
the three behind the whole-cluster job queued until its end, and nothing of the replay left queued.

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


def test_a_trace_replays_on_emulated_slurm_nodes_and_queues_behind_the_whole_cluster_job(cluster, tmp_path):
    assert local.emulated_slurm_nodes() == (NODES, GPUS)
    rep = SlurmReplay(local.slurm_shell, rs.SlurmTarget(replay="it-slurm"))
    result = rep.run(TRACE, timeout_s=120)
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
        assert f["Account"] in ("a", "b") and f["Name"] == "it-slurm"
    # stored, the figures re-derive from the raw records
    figs = rstore.save(tmp_path / "r", TRACE, "slurm", result, NODES * GPUS)
    assert figs["states"] == {"completed": 4} and figs["jobs_without_record"] == 0
    # topology/tree over racks of 4 in blocks of 8: every multi-node job in the fewest blocks it fits
    assert figs["placement"] == {"block_nodes": 8, "multi_node_jobs": 3, "in_fewest_blocks": 3, "extra_blocks": 0}
    assert rstore.rederive(tmp_path / "r") == []
    (tmp_path / "slurm-records.json").write_text(json.dumps(result, indent=1))


def test_an_unfinished_replay_cancels_what_it_left(cluster):
    """A watch that gives up cancels the replay's jobs still queued, so none is left on the cluster."""
    rep = SlurmReplay(local.slurm_shell, rs.SlurmTarget(replay="it-slurm-cut"))
    result = rep.run(TRACE, timeout_s=0)
    assert not result["ended"] and result["cancelled"], result
    assert rep.queued() == {}
    states = {slurm_records.fields(ln)["JobState"] for ln in result["raw"]["jobcomp"]}
    assert "CANCELLED" in states, result["raw"]["jobcomp"]
