"""The batch script's steps before training: the image made ready on every node as a timed step of its own
(pyxis: under the job's container name, which every later step reuses), the allocation check (the health gate,
one task per node; the all-reduce across the allocation: on GPUs an MPI build of nccl-tests, one task per GPU
under the site's PMI, on CPUs gloo), and the training step's agents named by their NodeName (--local_addr) with
the config's join timeout; the USR1 warning as long as Kubernetes' grace period."""
from __future__ import annotations

import re
import subprocess

import pytest

from harness import config, scenarios
from harness.render import sbatch

GPU = {"resources": {"nodes": 2, "procs_per_node": 8, "gpus_per_node": 8, "cpus_per_node": 96, "memory_mb": 512000},
       "workload": {"backend": "nccl"}}


def script(data: dict) -> str:
    cfg = config.from_mapping({"platforms": ["slurm"], **data})
    s = scenarios.job_spec(cfg, "slurm", scenarios.plan(cfg, "slurm")[0])
    return sbatch.render_sbatch(s, cfg.slurm).script


def steps(text: str) -> list[str]:
    """Each srun step as one line (its continuation lines joined)."""
    joined = text.replace(" \\\n  ", " ")
    return [ln for ln in joined.splitlines() if ln.lstrip().startswith("srun ")]


def test_calibration_off_renders_no_check_and_no_import_without_a_container():
    text = script({})
    assert "poc_check.py" not in text and len(steps(text)) == 1
    assert "# (no image to import, no allocation check: training starts at once)" in text


def test_the_cpu_form_checks_the_allocation_with_gloo_one_task_per_node_before_training():
    text = script({"calibration": {"enabled": True, "min_allreduce_busbw_gbps": 0.5}})
    gate, allreduce, train = steps(text)
    assert "poc_check.py gate" in gate and "--ntasks-per-node=1" in gate and "--ranks-from slurm" in gate
    assert '--master "$head":"$check_port"' in gate
    assert "poc_check.py allreduce" in allreduce and "--form=gloo" in allreduce and "--mpi=" not in allreduce
    assert "'--args=-b 1K -e 16M -f 4 -n 5 -w 1'" in allreduce and "--min-busbw-gbps 0.5" in allreduce
    assert "torch.distributed.run" in train
    # the check before the training step; a refusal ends the job unrequeued
    assert text.index("poc_check.py gate") < text.index("srun_start") < text.index("torch.distributed.run")
    assert 'check_port=$(( 30000 + SLURM_JOB_ID % 500 ))' in text
    assert ('if [ "$rc" -ne 0 ]; then echo "poc: the allocation check ended with exit $rc: no training on these '
            'nodes" >&2; exit "$rc"; fi') in text


def test_the_gpu_form_is_an_mpi_nccl_tests_step_one_task_per_gpu_under_the_sites_pmi():
    text = script({**GPU, "calibration": {"enabled": True, "mpi": "pmix_v4", "min_allreduce_busbw_gbps": 300,
                                          "allocation_nccl_tests": "/opt/nccl-tests/build/all_reduce_perf_mpi"}})
    gate, allreduce, _ = steps(text)
    assert "--ntasks-per-node=1" in gate and "--cpus-per-task=96" in gate and "--gpus-per-node 8" in gate
    assert "--mpi=pmix_v4" in allreduce and "--ntasks-per-node=8" in allreduce and "--cpus-per-task=12" in allreduce
    assert "--form=mpi" in allreduce and "--binary /opt/nccl-tests/build/all_reduce_perf_mpi" in allreduce
    assert "'--args=-b 8 -e 8G -f 2'" in allreduce and "--min-busbw-gbps 300" in allreduce
    assert "--gpus-per-task" not in allreduce    # every rank sees the node's GPUs: nccl-tests picks by local rank


def test_pyxis_imports_the_image_once_in_a_timed_step_and_every_step_reuses_it():
    text = script({**GPU, "calibration": {"enabled": True},
                   "slurm": {"container": "pyxis", "container_image": "/lustre/img/pytorch-24.05.sqsh"}})
    all_steps = steps(text)
    assert len(all_steps) == 4 and all_steps[0].endswith(" true; rc=$?")
    for s in all_steps:
        assert '--container-name=poc-"$SLURM_JOB_ID"' in s and "--container-image=/lustre/img/pytorch-24.05.sqsh" in s
    assert text.index("printf 'import_start") < text.index(" true; rc=$?") < text.index("printf 'import_done")
    assert re.search(r"printf 'import_done %s %s %s %s %s\\n' .* \"\$rc\" >> ", text)


def test_the_agents_name_themselves_by_nodename_and_wait_as_configured():
    text = script({"workload": {"rdzv_join_timeout_s": 1800, "stop_grace_s": 90}})
    assert '--rdzv_conf="is_host=$h,join_timeout=1800"' in text
    assert '--local_addr="$a"' in text and "a=${SLURMD_NODENAME:-$(hostname)}" in text
    assert "#SBATCH --signal=B:USR1@90" in text
    # unset: torch's 600 s, longer for more nodes (16 nodes pulling an image at once start minutes apart)
    assert 'join_timeout=600"' in script({})
    assert 'join_timeout=1320"' in script({"resources": {"nodes": 16}})


def test_the_rendered_script_is_valid_bash():
    pyxis = {"container": "pyxis", "container_image": "nvcr.io#nvidia/pytorch:24.05-py3"}
    text = script({**GPU, "calibration": {"enabled": True}, "slurm": pyxis})
    res = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("switches, k8s, queue_s, ok", [
    (None, {}, 300, True),
    # Slurm relaxes after 10 min, Kueue never: the same rule only while the run gives up queueing first
    ("1@00:10:00", {"topology_required": "x/rack"}, 300, True),
    ("1@00:10:00", {"topology_required": "x/rack"}, 1200, False),
    ("1@00:10:00", {"topology_preferred": "x/rack"}, 300, False),     # Slurm waits, Kueue does not
    ("1@00:05:00", {"topology_required": "x/rack"}, 300, True),
    ("1@0", {"topology_preferred": "x/rack"}, 300, True),
    ("1", {"topology_required": "x/rack"}, 300, True),               # the site's max_switch_wait, 300 s by default
    ("1", {"topology_required": "x/rack"}, 301, False),
    ("1@00:10:00", {}, 300, False), (None, {"topology_required": "x/rack"}, 300, False),   # one platform only
])
def test_topology_is_the_same_rule_on_both_platforms_or_refused(switches, k8s, queue_s, ok):
    from harness.errors import ConfigError
    from harness.render.validate import check_topology
    cfg = config.from_mapping({"platforms": ["slurm", "k8s"], "slurm": {"switches": switches}, "kubernetes": k8s,
                               "timeouts": {"queue_s": queue_s}})
    if ok:
        check_topology(cfg)
    else:
        with pytest.raises(ConfigError):
            check_topology(cfg)
