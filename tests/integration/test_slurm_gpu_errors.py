"""An impossible GPU request on the GPU-shaped Slurm-in-Docker cluster (gpu:4 per node) fails fast.

More GPUs per node than any node has: sbatch refuses it ("Requested node configuration is not
available") and the SubmitError's TIP names the 4 GPUs per node sinfo reports. A GPU type no node
has: preflight refuses it before anything is submitted. Through the real backend, over ssh.
"""
from __future__ import annotations

import os
import time

import pytest

from harness import config, scenarios
from harness.backends.slurm.backend import SlurmBackend
from harness.clusters import slurm_docker
from harness.errors import BackendError, SubmitError

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")


@pytest.fixture(scope="module")
def cluster():
    return slurm_docker.up(release=RELEASE, timeout=300)   # cheap when it is running; left running


def gpu_config(name: str, gpus: int, **slurm) -> config.Config:
    return config.from_mapping({
        "campaign": name, "platforms": ["slurm"], "repetitions": 1, "faults": [],
        "resources": {"nodes": 2, "procs_per_node": gpus, "gpus_per_node": gpus, "cpus_per_node": 1},
        "workload": {"backend": "gloo", "simulated_gpus": True, "steps": 2, "sweep": "1K:1K"},
        "slurm": slurm})


def test_too_many_gpus_per_node_is_refused_with_the_nodes_gpus(cluster):
    cfg = gpu_config("gpu-too-many", 8)
    b = SlurmBackend.from_config(cfg)
    assert b.preflight()["node_gpus"] == "gpu:4"        # GPUs exist: the count is sbatch's to refuse
    s = scenarios.job_spec(cfg, "slurm", scenarios.plan(cfg, "slurm")[0])
    t0 = time.monotonic()
    with pytest.raises(SubmitError) as exc:
        b.submit(s, b.render(s))
    took = time.monotonic() - t0
    print(f"\nrefused in {took:.2f}s: ERROR {exc.value.message}\nTIP {exc.value.tip}")
    assert "Requested node configuration is not available" in exc.value.message
    assert "has more than 4" in exc.value.message and "gpu:4" in exc.value.message
    assert "resources.gpus_per_node" in exc.value.tip and "4 or less" in exc.value.tip
    assert took < 30
    b.t.run(["rm", "-rf", b.render(s).payload.run_dir])


def test_a_gpu_type_no_node_has_fails_at_preflight(cluster):
    b = SlurmBackend.from_config(gpu_config("gpu-no-type", 2, gpu_type="h100"))
    with pytest.raises(BackendError, match=r"no node of the cluster has a gpu:h100 gres") as exc:
        b.preflight()
    assert "slurm.gpu_type" in exc.value.tip
