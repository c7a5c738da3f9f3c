"""slurm.venv, setup_script, modules and fabric.env on the Slurm-in-Docker cluster, in real jobs.

A virtualenv (--system-site-packages, so the image's torch) and a site script on the shared
directory; the site script records what it saw in GLOO_* variables, which the workload writes
into its torch_imported event (comm.env) on every rank, and it sets NCCL_IB_HCA, which the
config's fabric.env must override. The cluster has no `module` command, so a config with
slurm.modules must end the job at once with the renderer's message.
"""
from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

from harness import config
from harness.backends.factory import make_backend
from harness.clusters import slurm_docker
from harness.pipeline import campaign
from harness.store import Store, load_events

pytestmark = [
    pytest.mark.integration, pytest.mark.slurm,
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),   # see test_slurm_runs.py
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
FABRIC = {"NCCL_IB_HCA": "^mlx5_2", "NCCL_SOCKET_IFNAME": "^docker,lo", "NCCL_POC_ODD": "a b $HOME 'q' \"d\" ;x"}
SITE = """export GLOO_SITE_VENV="${VIRTUAL_ENV:-none}"
export GLOO_SITE_PY="$(command -v python3)"
export NCCL_IB_HCA=from-the-site-script
"""
SMALL = {"model_params": "1M", "steps": 4, "checkpoint_every": 0, "sweep": "1K:4K", "sweep_iters": 1,
         "sweep_warmup": 0, "backend": "gloo"}


@pytest.fixture(scope="module")
def shared():
    slurm_docker.up(release=RELEASE, timeout=300)   # cheap when it is running; left running
    d = f"/shared/poc-env-test-{uuid.uuid4().hex[:8]}"
    script = (f"set -e; mkdir -p {d}; python3 -m venv --without-pip --system-site-packages {d}/venv; "
              f"cat > {d}/site.sh")
    argv = slurm_docker.login_exec_argv(["sh", "-c", script])
    subprocess.run([*argv[:2], "-i", *argv[2:]], input=SITE, text=True, check=True)   # docker exec -i
    yield d
    subprocess.run(slurm_docker.login_exec_argv(["rm", "-rf", d]), check=False)


def run(tmp_path, name: str, slurm: dict) -> tuple[dict, list[dict], float]:
    cfg = config.from_mapping({
        "campaign": name, "platforms": ["slurm"], "repetitions": 1, "faults": [], "workload": SMALL,
        "resources": {"nodes": 2, "procs_per_node": 1, "cpus_per_node": 1, "memory_mb": 1024},
        "timeouts": {"queue_s": 120, "run_s": 300}, "fabric": {"env": FABRIC}, "slurm": slurm})
    store = Store(str(tmp_path / "results"), cfg.campaign)
    t0 = time.monotonic()
    recs = campaign(cfg, ["slurm"], store, lambda p: make_backend(p, cfg), resume=False)
    took = time.monotonic() - t0
    assert len(recs) == 1
    print(f"\n{name}: {recs[0]['status']} in {took:.1f}s {recs[0].get('error') or ''}")
    return recs[0], load_events(store.run_dir(recs[0]["run_id"])) or [], took


def test_venv_setup_script_and_fabric_env_reach_every_rank(shared, tmp_path):
    rec, events, _ = run(tmp_path, "env-setup", {"venv": f"{shared}/venv", "setup_script": f"{shared}/site.sh"})
    assert rec["status"] == "ok", rec.get("error")
    started = [e for e in events if e.get("kind") == "torch_imported"]
    assert len({e["host"] for e in started}) == 2, "one rank on each of two nodes"
    for e in started:
        env = e["comm"]["env"]
        assert {k: env.get(k) for k in FABRIC} == FABRIC, env          # exact, and fabric.env wins
        assert env["GLOO_SITE_VENV"] == f"{shared}/venv", env           # the venv was active for the script
        assert env["GLOO_SITE_PY"] == f"{shared}/venv/bin/python3", env  # and its python3 ran torchrun


def test_modules_without_a_module_command_end_the_job_with_why(tmp_path):
    slurm_docker.up(release=RELEASE, timeout=300)
    rec, events, took = run(tmp_path, "env-modules", {"modules": ["cuda/12.4"]})
    assert rec["status"] == "failed" and not [e for e in events if e.get("kind") == "torch_imported"]
    text = str(rec)
    assert "module is neither a command nor a shell function" in text, rec
    assert took < 90
