"""Emulated Slurm nodes: slurmctld and 32 slurmd in one container (multiple-slurmd build) schedule a
4-node × 8-GPU job onto four distinct emulated nodes of one rack (topology/tree), each step sees its
8 fake GPUs, and the cluster goes away afterwards.

Needs the image ``k8s-slurm-poc/slurm-emulated`` (built when missing: minutes the first time); after
that, well under two minutes. Uses its own container and network, never the Slurm-in-Docker cluster's.
"""
from __future__ import annotations

import time

import pytest

from harness.clusters import images
from harness.clusters.slurm import emulated
from harness.clusters.slurm.emulated import EmulatedShape, EmulatedSlurm

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

NODES, GPUS = 32, 8


def _gone(runner) -> bool:
    return (runner(["docker", "container", "inspect", emulated.CONTAINER], check=False).returncode != 0
            and runner(["docker", "network", "inspect", emulated.NETWORK], check=False).returncode != 0)


def test_a_four_node_gang_job_runs_on_four_emulated_nodes_and_down_removes_all(tmp_path):
    image = images.ensure_slurm_emulated_image()
    cluster = EmulatedSlurm(EmulatedShape(nodes=NODES, gpus_per_node=GPUS), tmp_path / "etc", image)
    try:
        cluster.up(idle_timeout=90)
        t0 = time.monotonic()
        res = cluster.exec(["sbatch", "--parsable", "--wait", "-N", "4", f"--gpus-per-node={GPUS}",
                            "-o", "/tmp/gang.out", "--wrap",
                            "srun sh -c 'echo $SLURMD_NODENAME $SLURM_GPUS_ON_NODE'; sleep 5"], timeout=90)
        assert res.returncode == 0, res.stderr
        job_id = res.stdout.strip().split(";")[0]
        assert time.monotonic() - t0 >= 5
        log = cluster.exec(["cat", "/var/log/slurm/jobcomp.log"]).stdout
        record = next(line for line in log.splitlines() if f"JobId={job_id} " in line)
        fields = dict(kv.split("=", 1) for kv in record.split() if "=" in kv)
        assert fields["JobState"] == "COMPLETED"
        assert fields["NodeCnt"] == "4"
        nodes = cluster.exec(["scontrol", "show", "hostnames", fields["NodeList"]]).stdout.split()
        assert len(set(nodes)) == 4 and all(n.startswith("e") for n in nodes)
        rack = cluster.shape.rack_size
        assert len({(int(n[1:]) - 1) // rack for n in nodes}) == 1, f"{nodes} span racks of {rack}"
        # one line per task: the node it ran on and the GPUs Slurm gave it there
        steps = sorted(cluster.exec(["cat", "/tmp/gang.out"]).stdout.splitlines())
        assert steps == sorted(f"{n} {GPUS}" for n in nodes)
    finally:
        cluster.down()
    assert _gone(cluster.runner)
