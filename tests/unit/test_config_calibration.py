"""config calibration: validated before anything runs, and handed to the workload the same on every
platform (the job spec's workload arguments)."""
from __future__ import annotations

import pytest

from harness import config, spec
from harness.errors import ConfigError
from harness.render.jobset import render_jobset
from harness.render.sbatch import render_sbatch


def cfg(**cal):
    return config.from_mapping({"platforms": ["slurm", "k8s"], "calibration": cal})


def test_off_by_default_and_then_the_workload_gets_nothing():
    assert not cfg().calibration.enabled
    assert "--calibrate" not in spec.build(cfg(), "slurm", "slurm-clean-01", None).workload_args("/c", "/e")


def test_on_every_platform_the_workload_gets_the_same_options():
    c = cfg(enabled=True, min_peer_ratio=0.7, min_memlock_kib=65536, allreduce_bytes="1G")
    args = {p: spec.build(c, p, f"{p}-clean-01", None).calibration for p in ("slurm", "k8s", "local")}
    assert args["slurm"] == args["k8s"] == args["local"]
    assert args["slurm"] == ("--calibrate", "--calibrate-min-ratio", "0.7", "--calibrate-min-memlock-kib", "65536",
                             "--calibrate-seconds", "0.5", "--calibrate-bytes", str(1 << 30),
                             "--nccl-tests", "all_reduce_perf", "--nccl-tests-args=-b 8 -e 8G -f 2")
    assert "'--nccl-tests-args=-b 8 -e 8G -f 2'" in render_sbatch(spec.build(c, "slurm", "slurm-clean-01", None),
                                                                  c.slurm).script
    k8s = render_jobset(spec.build(c, "k8s", "k8s-clean-01", None), c.kubernetes, "poc-worker:test", "/ckpt")
    assert "--nccl-tests-args=-b 8 -e 8G -f 2" in str(k8s.jobset)


@pytest.mark.parametrize("bad, words", [
    ({"min_peer_ratio": 0}, "min_peer_ratio"),
    ({"min_peer_ratio": 1.5}, "min_peer_ratio"),
    ({"allreduce_bytes": "2"}, "allreduce_bytes"),
    ({"allreduce_bytes": "16G"}, "allreduce_bytes"),
    ({"nccl_tests_args": "-b 8 -g 8"}, "-g is set by the harness"),
    ({"allocation_args": "-b 8 -g 1"}, "-g is set by the harness"),
    ({"allocation_nccl_tests": "x;y"}, "program name or path"),
    ({"mpi": "pmix --x"}, "mpi"),
    ({"min_allreduce_busbw_gbps": -1}, "min_allreduce_busbw_gbps"),
    ({"dcgm_diag_level": 5}, "dcgm_diag_level"),
    ({"nccl_tests_args": "-b 8; rm -rf /"}, "all_reduce_perf options"),
    ({"nccl_tests": "all_reduce_perf $(x)"}, "program name or path"),
])
def test_bad_settings_are_refused_with_the_field_named(bad, words):
    with pytest.raises(ConfigError) as ei:
        cfg(enabled=True, **bad)
    assert words in str(ei.value) or words in (ei.value.tip or "")


def test_the_check_before_training_gets_the_gpu_or_the_cpu_form_of_its_options():
    c = cfg(enabled=True, min_allreduce_busbw_gbps=300, require_gdr=True, dcgm_diag_level=1)
    gpu = c.calibration.check_args(gpus=True)
    assert "--require-gdr" in gpu and gpu[gpu.index("--dcgm-level") + 1] == "1"
    assert gpu[gpu.index("--binary") + 1] == "all_reduce_perf_mpi" and "--args=-b 8 -e 8G -f 2" in gpu
    cpu = c.calibration.check_args(gpus=False)
    assert "--binary" not in cpu and "--require-gdr" not in cpu and "--args=-b 1K -e 16M -f 4 -n 5 -w 1" in cpu
    assert cpu[cpu.index("--min-busbw-gbps") + 1] == "300"
    assert cfg().calibration.check_args(gpus=True) == ()
    assert cfg(enabled=True, allocation_check=False).calibration.check_args(gpus=True) == ()


def test_keys_added_later_leave_an_older_campaigns_hash_alone_at_their_defaults():
    """`--resume` finds a campaign by its config_hash: the new calibration and workload keys, at their defaults, are
    left out of it, so a campaign started before them is still its own."""
    import hashlib
    import json
    plain = config.from_mapping({"campaign": "c"})
    data = plain.model_dump(mode="json")
    for key in ("host", "port", "user", "key_file", "known_hosts", "connection_file", "accept_unknown_host",
                "ssh_config", "proxy_jump", "rest", "controller_log"):
        data["slurm"].pop(key, None)
    for key in ("kubeconfig", "context", "audit_log"):
        data["kubernetes"].pop(key, None)
        data["ux"]["kubernetes"].pop(key, None)
    data["resources"].pop("caps")
    data["local"].pop("rounds")
    from harness.config.calibration import LATER_DEFAULTS as cal_later
    from harness.config.workload import LATER_DEFAULTS as work_later
    for key in cal_later:
        data["calibration"].pop(key)
    for key in work_later:
        data["workload"].pop(key)
    older = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    assert plain.config_hash() == older
    floor = {"campaign": "c", "calibration": {"min_allreduce_busbw_gbps": 10}}
    assert config.from_mapping(floor).config_hash() != older
    assert config.from_mapping({"campaign": "c", "workload": {"stop_grace_s": 30}}).config_hash() != older


@pytest.mark.parametrize("hca, ok", [("=mlx5_0,mlx5_1", True), ("^=mlx5_8", True), ("^mlx5_2", True),
                                     ("mlx5_0,mlx5_1", False), ("mlx5", False)])
def test_a_prefix_nccl_ib_hca_is_refused_with_the_exact_form_to_write(hca, ok):
    """NCCL reads a bare list as prefixes: mlx5_1 also takes mlx5_10 and mlx5_11, mlx5 every adapter (the storage
    ports of a DGX too); `poc validate` took it silently."""
    mapping = {"fabric": {"env": {"NCCL_IB_HCA": hca}}}
    if ok:
        config.from_mapping(mapping)
        return
    with pytest.raises(ConfigError) as ei:
        config.from_mapping(mapping)
    assert f"'={hca}'" in str(ei.value)
