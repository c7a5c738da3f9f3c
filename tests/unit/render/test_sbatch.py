"""Golden tests of the rendered batch script (POC_UPDATE_GOLDEN=1 rewrites the golden files)."""
from __future__ import annotations

import dataclasses
import os
import subprocess

import pytest
from support.paths import FIXTURES

from harness import config, scenarios, spec
from harness.errors import ConfigError
from harness.render.sbatch import render_sbatch

GOLDEN = FIXTURES / "slurm" / "golden"

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
    "gpu-pyxis-fabric": ({"platforms": ["slurm"], "faults": [],
                          "resources": {"nodes": 2, "procs_per_node": 8, "gpus_per_node": 8, "cpus_per_node": 96,
                                        "memory_mb": 1024000},
                          "workload": {"backend": "nccl", "model": "transformer"},
                          "fabric": {"env": {"NCCL_IB_HCA": "^mlx5_2", "NCCL_SOCKET_IFNAME": "ib0",
                                             "UCX_TLS": "rc,cuda_copy"}},
                          "slurm": {"partition": "gpu", "container": "pyxis",
                                    "container_image": "nvcr.io#nvidia/pytorch:24.05-py3", "workdir": "/lustre/poc"}},
                         0),
    "gpu-apptainer": ({"platforms": ["slurm"], "faults": [],
                       "resources": {"nodes": 2, "procs_per_node": 4, "gpus_per_node": 4, "cpus_per_node": 32},
                       "workload": {"backend": "nccl"},
                       "fabric": {"env": {"NCCL_IB_HCA": "^mlx5_2"}},
                       "slurm": {"container": "apptainer", "container_image": "/shared/images/worker.sif"}}, 0),
    "gpu-bare-venv": ({"platforms": ["slurm"], "faults": [],
                       "resources": {"nodes": 2, "procs_per_node": 4, "gpus_per_node": 4, "cpus_per_node": 32},
                       "workload": {"backend": "nccl"},
                       "fabric": {"env": {"NCCL_IB_HCA": "^mlx5_2", "NCCL_NET_GDR_LEVEL": "PHB"}},
                       "slurm": {"partition": "gpu", "reservation": "poc-week", "constraint": "a100&ib",
                                 "gpu_type": "a100", "gres": ["nvme:1", "lscratch:100"],
                                 "switches": "1@00:10:00", "modules": ["cuda/12.4", "nccl/2.21.5"],
                                 "venv": "~/venvs/torch", "setup_script": "/shared/poc/site-env.sh"}}, 0),
}


def rendered(name: str) -> str:
    data, index = CASES[name]
    cfg = config.from_mapping(data)
    return render_sbatch(scenarios.job_spec(cfg, "slurm", scenarios.plan(cfg, "slurm")[index]), cfg.slurm).script


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
    assert '--rdzv_endpoint="$head":"$rdzv_port"' in text
    assert "scontrol requeue" in text and "MAX_RESTARTS=3" in text


def test_each_job_rendezvous_on_a_port_of_its_own():
    """Two jobs sharing a head node must not meet at one c10d store: the port follows the job id."""
    (line,) = [ln for ln in rendered("default-clean").splitlines() if ln.startswith("rdzv_port=")]
    ports = {}
    for job in ("1", "2", "500", "123457"):
        res = subprocess.run(["bash", "-c", f'{line}; echo "$rdzv_port"'], env={"SLURM_JOB_ID": job},
                             capture_output=True, text=True, check=True)
        ports[job] = int(res.stdout)
    assert ports == {"1": 29501, "2": 29502, "500": 29500, "123457": 29957}


@pytest.mark.parametrize("name", ["default-clean", "gpu-pyxis", "gpu-apptainer", "gpu-bare-venv"])
def test_the_step_gets_the_jobs_cpus_per_task(name):
    """srun of Slurm 22.05-23.02 does not inherit --cpus-per-task: without it the agent, its ranks and
    NCCL's threads share one core. The step asks for the job's own value, whatever the container."""
    text = rendered(name)
    (cpus,) = [ln for ln in text.splitlines() if ln.startswith("#SBATCH --cpus-per-task=")]
    srun = text[text.index("\nsrun \\\n"):]
    srun = srun[:srun.index("\n\n")] if "\n\n" in srun else srun
    # written out, not "$SLURM_CPUS_PER_TASK": a job submitted through slurmrestd has no such variable
    assert f"  --cpus-per-task={int(cpus.split('=')[1])} \\\n" in srun and int(cpus.split("=")[1]) >= 1


def test_the_first_node_of_the_step_hosts_the_rendezvous_store(tmp_path):
    """torchrun hosts the c10d store only where it takes the endpoint's host for its own, and Slurm's
    NodeName need not be the host name: the launch tells the step's node 0 that it is the host and the
    others that they are not. The rendered launch, from `bash` on, runs with a `python3` that prints
    what it was given, once as SLURM_NODEID 0 and once as 1."""
    text = rendered("default-clean")
    launch = text[text.index("  bash \\\n"):]
    launch = launch[:launch.rindex(" &\n")] if " &\n" in launch else launch[:launch.index("\n\n")]
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (bin_ / "python3").chmod(0o755)
    got = {}
    for node in ("0", "1"):
        res = subprocess.run(["bash", "-c", f"head=c1; rdzv_port=29501; {launch}"], capture_output=True, text=True,
                             env={"PATH": f"{bin_}:/usr/bin:/bin", "SLURM_NODEID": node}, check=True)
        got[node] = res.stdout.splitlines()
    assert got["0"][:3] == ["-m", "torch.distributed.run", "--rdzv_conf=is_host=1,join_timeout=600"]
    assert got["1"][:3] == ["-m", "torch.distributed.run", "--rdzv_conf=is_host=0,join_timeout=600"]
    assert "--rdzv_endpoint=c1:29501" in got["1"] and got["1"][-2:] == got["0"][-2:]


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


def test_gpu_placement_options():
    text = rendered("gpu-bare-venv")
    for opt in ("--gpus-per-node=a100:4", "--gres=nvme:1,lscratch:100", "--reservation=poc-week",
                "--constraint=a100&ib", "--switches=1@00:10:00", "--partition=gpu"):
        assert f"#SBATCH {opt}\n" in text


def test_setup_runs_in_order_before_the_launch():
    text = rendered("gpu-bare-venv")
    at = [text.index(w) for w in ("module load cuda/12.4 ", "module load nccl/2.21.5 ",
                                  'source "$HOME"/venvs/torch/bin/activate ', "source /shared/poc/site-env.sh ",
                                  "set -uo pipefail", "export POC_RUN_ID=", "srun \\\n  --kill-on-bad-exit=1")]
    assert at == sorted(at)
    assert "  --export=ALL \\\n" in text   # the step inherits the set-up environment


def test_apptainer_gets_nv_only_for_real_gpus():
    assert " --nv " in rendered("gpu-apptainer")
    assert "--nv" not in rendered("apptainer")
    data, _ = CASES["gpu-apptainer"]
    cfg = config.from_mapping({**data, "workload": {"backend": "gloo", "simulated_gpus": True}})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    assert "--nv" not in render_sbatch(s, cfg.slurm).script


def test_containers_get_the_fabric_env():
    pyxis = rendered("gpu-pyxis-fabric")
    assert ("--container-env=POC_RUN_ID,OMP_NUM_THREADS,TORCH_DISABLE_SHARE_RDZV_TCP_STORE,PYTHONUNBUFFERED,"
            "POC_FABRIC_ENV,NCCL_IB_HCA,NCCL_SOCKET_IFNAME,UCX_TLS") in pyxis
    assert "POC_FABRIC_ENV=NCCL_IB_HCA,NCCL_SOCKET_IFNAME,UCX_TLS" in pyxis
    assert "NCCL_IB_HCA='^mlx5_2'" in pyxis and "UCX_TLS=rc,cuda_copy" in pyxis
    app = rendered("gpu-apptainer")
    assert "APPTAINERENV_NCCL_IB_HCA='^mlx5_2'" in app and "--cleanenv" not in app


def _setup_and_exports(text: str) -> str:
    """The rendered script from its setup block up to (not including) the rendezvous lookup."""
    start = text.index("# The environment torchrun starts in")
    return text[start:text.index("RUN_DIR=", start)]


def test_setup_part_is_valid_bash():
    for name in CASES:
        res = subprocess.run(["bash", "-n"], input=_setup_and_exports(rendered(name)), capture_output=True,
                             text=True, check=False)
        assert res.returncode == 0, (name, res.stderr)


HOSTILE = ["^mlx5_2", "$(touch PWNED)", "`touch PWNED`", "a'b\"c", "x; touch PWNED #", "* ?", "$HOME", "\\"]


def test_fabric_values_reach_the_ranks_exactly(tmp_path):
    """Values the config accepts (anything on one line) are exported byte for byte and run nothing."""
    env = {f"NCCL_T{i}": v for i, v in enumerate(HOSTILE)}
    cfg = config.from_mapping({"platforms": ["slurm"], "faults": [], "fabric": {"env": env}})
    text = render_sbatch(spec.build(cfg, "slurm", "slurm-clean-01", None), cfg.slurm).script
    script = _setup_and_exports(text) + "env -0\n"
    res = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, check=False)
    assert res.returncode == 0, res.stderr
    got = dict(item.split("=", 1) for item in res.stdout.decode().split("\0") if "=" in item)
    assert {k: got.get(k) for k in env} == env
    assert not list(tmp_path.iterdir())   # nothing ran


@pytest.mark.parametrize("bad", [
    {"modules": ["cuda; touch PWNED"]}, {"modules": ["$(reboot)"]}, {"venv": "/x/$(reboot)"},
    {"setup_script": "/x y.sh"}, {"setup_script": "a;b"}, {"gres": ["gpu:1,--wrap=x"]},
    {"reservation": "r --wrap"}, {"constraint": "a100 && $(x)"}, {"switches": "1;reboot"},
    {"gpu_type": "a100:8"},
])
def test_hostile_setup_values_are_refused(bad):
    with pytest.raises(ConfigError):
        config.from_mapping({"platforms": ["slurm"], "slurm": bad})


def test_setup_paths_are_quoted_and_tilde_is_home():
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"venv": "~/my+env", "setup_script": "/a/b-c.sh",
                                                                 "modules": ["gcc@12.2"]}})
    text = rendered_with(cfg)
    assert "source \"$HOME\"/my+env/bin/activate ||" in text
    assert "module load gcc@12.2 ||" in text
    bad = cfg.slurm.model_copy(update={"venv": "~root/venv"})
    with pytest.raises(ConfigError, match=r"slurm\.venv"):
        render_sbatch(spec.build(cfg, "slurm", "slurm-clean-01", None), bad)


def rendered_with(cfg) -> str:
    return render_sbatch(spec.build(cfg, "slurm", "slurm-clean-01", None), cfg.slurm).script


def test_module_missing_fails_with_a_message(tmp_path):
    """Without Lmod or Environment Modules the job ends at once, saying why (not at torchrun)."""
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"modules": ["cuda/12.4"]}})
    script = _setup_and_exports(rendered_with(cfg)) + "echo reached\n"
    res = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], capture_output=True, text=True,
                         check=False, env={"PATH": "/usr/bin:/bin", "LMOD_PKG": str(tmp_path),
                                           "MODULESHOME": str(tmp_path)})
    if res.returncode == 0 and "reached" in res.stdout:
        pytest.skip("this machine has a module command")   # e.g. /etc/profile.d/modules.sh exists
    assert res.returncode == 1 and "module is neither a command nor a shell function" in res.stderr


def test_failed_setup_script_ends_the_job(tmp_path):
    site = tmp_path / "site.sh"
    site.write_text("false\n")
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"setup_script": str(site)}})
    script = _setup_and_exports(rendered_with(cfg)) + "echo reached\n"
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert res.returncode == 1 and "reached" not in res.stdout
    assert f"poc: slurm.setup_script {site} failed on" in res.stderr
