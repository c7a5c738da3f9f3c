"""`poc scale replay` on both schedulers, as a user runs it: one synthetic trace, replayed on the native
cluster's KWOK nodes and on the emulated Slurm cluster, both at 16 nodes × 8 GPUs; each platform's
records stored beside the trace and re-derived; the same jobs on both. About a minute and a half.
"""
from __future__ import annotations

import json
import os

import pytest
from _kwok import kwok_nodes
from _replay import GPUS, NODES, PREEMPT_TRACE

pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness.cli import main  # noqa: E402
from harness.clusters import images  # noqa: E402
from harness.clusters.slurm.emulated import EmulatedShape, EmulatedSlurm  # noqa: E402
from harness.replay import slurm_tenancy  # noqa: E402
from harness.scale import trace as tr  # noqa: E402


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    slurm = EmulatedSlurm(EmulatedShape(nodes=NODES, gpus_per_node=GPUS), tmp_path_factory.mktemp("etc"),
                          images.ensure_slurm_emulated_image())
    with kwok_nodes(NODES, GPUS):
        try:
            slurm.up(idle_timeout=120)
            yield
        finally:
            slurm.down()


def replay_on_both(trace, out, name: str, capsys, *flags: str) -> dict:
    """`poc scale replay TRACE FLAGS... -o json` as a user runs it: each platform's figures."""
    capsys.readouterr()
    rc = main(["scale", "replay", str(trace), *flags, "--results", str(out), "--name", name, "-o", "json"], env={})
    text = capsys.readouterr().out
    print(text)
    assert rc == 0, text
    return json.loads(text)


def test_one_trace_replays_on_both_and_each_platforms_figures_rederive(clusters, tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    # seed 4: 11 jobs in 2 h, the longest 2.8 h; 600x makes it a 12 s window
    assert main(["scale", "synth", "--nodes", str(NODES), "--hours", "2", "--load", "0.5", "--seed", "4",
                 "--out", str(trace), "-q"], env={}) == 0
    jobs = len(tr.load(trace).jobs)
    figs = replay_on_both(trace, tmp_path / "out", "both", capsys, "--compress", "600")
    for platform in ("k8s", "slurm"):
        f = figs[platform]
        assert f["jobs"] == jobs and f["states"] == {"completed": jobs} and f["jobs_without_record"] == 0, f
        assert f["queue_s"]["all"]["started"] == jobs and 0 < f["gpu_utilisation"] <= 1
        # the same block layout on both (racks of 8 in blocks of 4 racks): the 16 nodes are one block, so
        # each of the 5 multi-node jobs sits in the fewest blocks it fits
        assert f["placement"] == {"block_nodes": 16, "multi_node_jobs": 5, "in_fewest_blocks": 5,
                                  "extra_blocks": 0}, f["placement"]
        assert (tmp_path / "out" / "both" / f"{platform}.json").is_file()
    # the same work on both: each tenant's share of the GPU-seconds within the records' 1 s per job
    k8s, slurm = figs["k8s"]["tenant_gpu_share"], figs["slurm"]["tenant_gpu_share"]
    assert set(k8s) == set(slurm)
    assert all(abs(k8s[t] - slurm[t]) < 0.1 for t in k8s), (k8s, slurm)
    # the limit grace: Slurm's scaled with the 600x compression (backfill plans with --time), Kubernetes' not
    graces = {p: json.loads((tmp_path / "out" / "both" / f"{p}.json").read_text())["settings"]["limit_grace_s"]
              for p in ("k8s", "slurm")}
    assert graces == {"k8s": 30, "slurm": 2}, graces
    assert main(["scale", "rederive", str(tmp_path / "out" / "both")], env={}) == 0


def test_a_recorded_sacct_export_of_the_local_cluster_replays_on_both(clusters, tmp_path, capsys):
    """A site's own history, round trip: the local Slurm cluster's recorded `sacct --json` export
    (tests/fixtures/scale/sacct, 10 jobs that ran over 13 minutes, CPU only) imported and replayed 30x faster."""
    from pathlib import Path
    export = Path(__file__).parents[1] / "fixtures" / "scale" / "sacct" / "sacct.json"
    trace = tmp_path / "history.jsonl"
    assert main(["scale", "import", str(export), "--out", str(trace), "-q"], env={}) == 0
    jobs = tr.load(trace).jobs
    figs = replay_on_both(trace, tmp_path / "out", "history", capsys, "--compress", "30")
    for platform in ("k8s", "slurm"):
        assert figs[platform]["states"] == {"completed": len(jobs)}, figs[platform]
        assert figs[platform]["queue_s"]["all"]["started"] == len(jobs)


def test_a_higher_class_preempts_a_lower_one_on_both_and_the_preempted_job_runs_again(clusters, tmp_path, capsys):
    """--preemption priority: b's high-class job, arriving while a's low-class job borrows the whole
    cluster, starts within seconds on both; the low job is preempted once, requeued and completes after."""
    trace = tmp_path / "preempt.jsonl"
    tr.save(PREEMPT_TRACE, trace)
    figs = replay_on_both(trace, tmp_path / "out", "preempt", capsys, "--preemption", "priority")
    for platform in ("k8s", "slurm"):
        f = figs[platform]
        assert f["states"] == {"completed": 2}, f
        assert f["preemptions"] == {"events": 1, "jobs": 1, "most_per_job": 1}, (platform, f["preemptions"])
        # b-high is the one 4-node job ("2-8"): placed within seconds, not after a-low's 20 s
        assert f["queue_s"]["2-8"]["max_s"] <= 8, (platform, f["queue_s"])
        # a-low's start is its second run's, after b-high's end: at least b-high's 6 s offset plus its 4 s
        assert f["queue_s"]["9-64"]["max_s"] >= 10 - 1, (platform, f["queue_s"])
    body = json.loads((tmp_path / "out" / "preempt" / "slurm.json").read_text())
    assert [ln.split("JobState=")[1].split()[0] for ln in body["raw"]["jobcomp"]].count("PREEMPTED") == 1
    assert body["settings"]["qos_removal_error"] == "" and body["settings"]["accounts_removed"]
    assert {"high|10000|low|requeue", "low|100||requeue"} <= set(body["settings"]["qos_during_replay"]), body
    assert slurm_tenancy.slurm_qos() == {"normal"}    # the replay's QOSes are gone again
    k8s = json.loads((tmp_path / "out" / "preempt" / "k8s.json").read_text())
    assert k8s["settings"]["cleaned_up"] and k8s["settings"]["preemption"].startswith("priority")
    assert main(["scale", "rederive", str(tmp_path / "out" / "preempt")], env={}) == 0


def test_the_new_queue_figures_host_cpu_and_policy_pair_on_a_small_replay(clusters, tmp_path, capsys):
    """The figures that say why jobs waited, on the queueing trace (a whole-cluster job, three behind it): its
    queue head waited the whole job's length, nothing passed it; Kubernetes' wait splits into Kueue's admission
    (the quota frees when the whole job ends) and a short pod pipeline; every replay kept the host's CPU and its
    offered rate. Then the strict-fifo pair: Kueue's side is one StrictFIFO ClusterQueue, and a Slurm cluster
    not running its side is refused before anything is submitted."""
    from _replay import TRACE
    trace = tmp_path / "q.jsonl"
    tr.save(TRACE, trace)
    figs = replay_on_both(trace, tmp_path / "out", "why", capsys)
    for platform in ("k8s", "slurm"):
        f = figs[platform]
        # the three behind the whole-cluster job all start once it ends, within a few seconds of each other: at
        # most the later two pass the first by a second; the head (b-four) waited the whole job out
        assert f["overtaking"]["overtakes"] <= 2 and f["overtaking"]["head_wait_max_s"] >= 12 - 4 - 1, f["overtaking"]
        every = f["bounded_slowdown"]["classes"]["all"]
        assert every["jobs"] == 4 and every["mean"] > 1
        assert 0 < f["arrival_window_utilisation"] <= 1 and set(f["per_tenant"]) == {"a", "b"}
    split = figs["k8s"]["wait_split"]
    assert split["jobs"] == 4 and split["admission"]["max_s"] >= 12 - 4 - 1 and split["pod_pipeline"]["p50_s"] <= 5
    assert figs["slurm"]["wait_split"] is None
    for platform, daemon in (("k8s", "kube-apiserver"), ("slurm", "slurmctld")):
        body = json.loads((tmp_path / "out" / "why" / f"{platform}.json").read_text())
        cpu = body["host_cpu"]
        assert cpu["samples"] >= 5 and cpu["host"]["mean_cores"] > 0 and daemon in cpu["components"], cpu["components"]
        assert body["offered"]["busiest_jobs_per_s"] == 0.4 and body["figures_version"] == 2
        assert body["settings"]["queue_policy"] == "site" and body["settings"]["limit_grace_s"] == 30
    assert main(["scale", "rederive", str(tmp_path / "out" / "why")], env={}) == 0
    assert main(["scale", "report", str(tmp_path / "out" / "why")], env={}) == 0
    md = (tmp_path / "out" / "why" / "report" / "report.md").read_text()
    assert "## Why jobs waited" in md and "## The host's CPU over each replay" in md and "no ceilings measured" in md
    # strict-fifo: Kubernetes' side is the replay's own objects; Slurm's is the cluster's, which runs site
    capsys.readouterr()
    assert main(["scale", "replay", str(trace), "--results", str(tmp_path / "out"), "--name", "fifo", "-p", "k8s",
                 "--queue-policy", "strict-fifo", "-o", "json"], env={}) == 0
    k8s = json.loads((tmp_path / "out" / "fifo" / "k8s.json").read_text())["settings"]
    assert k8s["queueing_strategy"] == "StrictFIFO" and k8s["cluster_queues"] == "one ClusterQueue for every tenant"
    capsys.readouterr()
    assert main(["scale", "replay", str(trace), "--results", str(tmp_path / "out"), "--name", "fifo-s", "-p", "slurm",
                 "--queue-policy", "strict-fifo"], env={}) == 2
    err = capsys.readouterr().err
    assert "does not run the Slurm side of queue policy strict-fifo" in err and "--queue-policy strict-fifo" in err
