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
    ({"nccl_tests_args": "-b 8 -g 8"}, "-g is set by the workload"),
    ({"nccl_tests_args": "-b 8; rm -rf /"}, "all_reduce_perf options"),
    ({"nccl_tests": "all_reduce_perf $(x)"}, "program name or path"),
])
def test_bad_settings_are_refused_with_the_field_named(bad, words):
    with pytest.raises(ConfigError) as ei:
        cfg(enabled=True, **bad)
    assert words in str(ei.value) or words in (ei.value.tip or "")
