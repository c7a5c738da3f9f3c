"""Golden tests of the rendered batch script (POC_UPDATE_GOLDEN=1 rewrites the golden files)."""
from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from harness import config, spec
from harness.errors import ConfigError
from harness.render.sbatch import render_sbatch

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "golden"

CASES = {
    "default-clean": ({"platforms": ["slurm"]}, 0),
    "default-kill-rank": ({"platforms": ["slurm"]}, 1),
    "gpu-pyxis": ({"platforms": ["slurm"],
                   "resources": {"nodes": 4, "procs_per_node": 8, "gpus_per_node": 8, "cpus_per_node": 64,
                                 "memory_mb": 512000},
                   "workload": {"backend": "nccl"},
                   "faults": [],
                   "slurm": {"partition": "gpu", "account": "ml-team", "qos": "high", "time_limit": "02:00:00",
                             "container": "pyxis", "container_image": "nvcr.io#nvidia/pytorch:24.05-py3",
                             "workdir": "/lustre/poc", "max_restarts": 2,
                             "extra_sbatch": ["--exclusive", "--constraint=a100"]}}, 0),
    "apptainer": ({"platforms": ["slurm"], "faults": [],
                   "slurm": {"container": "apptainer", "container_image": "/shared/images/worker.sif"}}, 0),
}


def rendered(name: str) -> str:
    data, index = CASES[name]
    cfg = config.from_mapping(data)
    run_id, fault, scenario = spec.run_plan(cfg, "slurm")[index]
    return render_sbatch(spec.build(cfg, "slurm", run_id, fault, scenario), cfg.slurm).script


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    text = rendered(name)
    path = GOLDEN / f"{name}.sbatch"
    if os.environ.get("POC_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; POC_UPDATE_GOLDEN=1 rewrites it after review"


@pytest.mark.parametrize("name", sorted(CASES))
def test_script_is_valid_bash(name):
    res = subprocess.run(["bash", "-n"], input=rendered(name), capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


def test_required_options_present():
    text = rendered("default-clean")
    for opt in ("--nodes=2", "--ntasks-per-node=1", "--requeue", "--open-mode=append", "--signal=B:USR1@60",
                "--comment=poc-run-id=slurm-clean-01", "--job-name=poc-slurm-clean-01", "--mem=3072M"):
        assert f"#SBATCH {opt}\n" in text
    assert '--rdzv_endpoint="$head":29500' in text
    assert "scontrol requeue" in text and "MAX_RESTARTS=3" in text


def test_gpu_options():
    text = rendered("gpu-pyxis")
    for opt in ("--gpus-per-node=8", "--partition=gpu", "--account=ml-team", "--qos=high", "--exclusive",
                "--constraint=a100"):
        assert f"#SBATCH {opt}\n" in text
    assert "'--container-image=nvcr.io#nvidia/pytorch:24.05-py3'" in text


def test_bad_run_id_is_refused():
    cfg = config.from_mapping({"platforms": ["slurm"]})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    with pytest.raises(ConfigError):
        render_sbatch(dataclasses.replace(s, run_id="x; rm -rf /"), cfg.slurm)


@pytest.mark.parametrize("bad", [
    {"partition": "gpu;reboot"},
    {"extra_sbatch": ["--wrap=rm -rf /"]},
    {"extra_sbatch": ["-o /etc/passwd"]},
    {"workdir": "/shared/$(reboot)"},
    {"time_limit": "15 minutes"},
    {"container": "pyxis"},
])
def test_unsafe_values_never_reach_the_script(bad):
    with pytest.raises(ConfigError):
        config.from_mapping({"platforms": ["slurm"], "slurm": bad})


def test_container_image_is_checked():
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"container": "apptainer",
                                                                 "container_image": "/x.sif"}})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    bad = cfg.slurm.model_copy(update={"container_image": "x`reboot`"})
    with pytest.raises(ConfigError):
        render_sbatch(s, bad)


@pytest.mark.parametrize("container, image", [
    ("apptainer", "x`reboot`"), ("apptainer", "docker://$(reboot)"), ("pyxis", "nvcr.io#Nvidia/torch:1"),
    ("pyxis", "a b"),
])
def test_config_and_renderer_refuse_the_same_images(container, image):
    """One check (harness/imageref.py) behind both: what the config refuses, the renderer refuses too."""
    with pytest.raises(ConfigError, match=r"slurm\.container_image"):
        config.from_mapping({"platforms": ["slurm"], "slurm": {"container": container, "container_image": image}})
    cfg = config.from_mapping({"platforms": ["slurm"]})
    unchecked = cfg.slurm.model_copy(update={"container": container, "container_image": image})
    with pytest.raises(ConfigError, match=r"slurm\.container_image"):
        render_sbatch(spec.build(cfg, "slurm", "slurm-clean-01", None), unchecked)
