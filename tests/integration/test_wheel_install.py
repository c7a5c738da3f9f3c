"""A wheel install (not editable) renders every platform's job exactly as the repository does.

Builds a wheel from a copy of the package (pyproject.toml, README.md, harness/), installs it with
--no-deps into a fresh venv that sees this venv's dependencies through a path line in a .pth file
(so torch and the rest are not installed again), and from a directory outside the repository runs
`poc render` for local, slurm and k8s with both installs. Needs no cluster and no network.
"""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.local]

ROOT = Path(__file__).resolve().parents[2]
PLATFORMS = ("local", "slurm", "k8s")
# Where each install finds what it ships, and the image refs hashed from it (equal in both: the hash
# covers file names, modes and bytes, not where the folder lies).
PROBE = ("import json, sys, harness; from harness import data; from harness.clusters import images; "
         "print(json.dumps({'harness': harness.__file__, 'python': sys.executable, "
         "'workload': str(data.path('workloads', 'ddp_train.py')), "
         "'refs': [images.worker_ref(), images.slurm_ref(), images.mariadb_ref()]}))")


def run(argv: list, cwd: Path, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    res = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout, check=False)
    assert res.returncode == 0, f"{argv}\n--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    return res


@pytest.fixture(scope="module")
def installs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "harness", src / "harness", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    env.update(POC_STATE_DIR=str(tmp / "state"), POC_CACHE_DIR=str(tmp / "cache"), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src],
                tmp, env)
    wheel = next((tmp / "dist").glob("k8s_slurm_poc-*.whl"))
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], tmp, env)
    py = venv / "bin" / "python"
    purelib = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env).stdout.strip()
    # a path line, not a site dir: this venv's .pth files (the editable install's finder) stay out
    Path(purelib, "poc_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", wheel], tmp, env)
    work = tmp / "elsewhere"                      # not the repository: nothing imported from a checkout
    work.mkdir()
    out = {"tmp": tmp, "work": work, "env": env, "build_output": built.stdout + built.stderr,
           "wheel": [str(venv / "bin" / "poc")], "repo": [sys.executable, "-m", "harness.cli"]}
    for kind in ("wheel", "repo"):
        python = py if kind == "wheel" else sys.executable
        out[f"{kind}_probe"] = json.loads(run([python, "-c", PROBE], work, env).stdout)
        for plat in PLATFORMS:
            d = tmp / kind / plat
            run([*out[kind], "render", "--platform", plat, "--out", d], work, env)
            out[f"{kind}_{plat}"] = {p.name: p.read_text() for p in sorted(d.iterdir())}
    return out


def test_the_wheel_is_what_runs(installs):
    wheel, repo = installs["wheel_probe"], installs["repo_probe"]
    assert wheel["harness"].startswith(str(installs["tmp"] / "venv")), wheel
    assert repo["harness"].startswith(str(ROOT)), repo
    assert Path(wheel["workload"]).is_file() and wheel["workload"].startswith(str(installs["tmp"] / "venv"))
    assert Path(wheel["workload"]).read_text() == (ROOT / "harness" / "data" / "workloads" / "ddp_train.py").read_text()


def test_building_the_wheel_prints_no_warnings(installs):
    """The license table's deprecation warning, and setuptools' "package would be ignored" ones, are gone."""
    text = installs["build_output"].lower()
    assert "warning" not in text and "deprecat" not in text, installs["build_output"]


def test_image_refs_do_not_depend_on_the_install(installs):
    """pip byte-compiles the .py files of the build contexts into __pycache__; the hash must not see them."""
    assert installs["wheel_probe"]["refs"] == installs["repo_probe"]["refs"]


@pytest.mark.parametrize("plat", ["slurm", "k8s"])
def test_wheel_renders_what_the_repository_renders(installs, plat):
    wheel, repo = installs[f"wheel_{plat}"], installs[f"repo_{plat}"]
    assert set(wheel) == {"slurm": {"job.sbatch"},
                          "k8s": {"jobset.yaml", "workload-configmap.yaml", "kueue.yaml", "rbac.yaml"}}[plat]
    assert wheel == repo


def test_wheel_renders_the_local_baseline(installs):
    """The same commands but for where each install keeps its Python and its copy of the workload (the folder:
    the modules shipped beside ddp_train.py are mounted from it too)."""
    def neutral(files: dict, probe: dict) -> dict:
        folder = str(Path(probe["workload"]).parent)
        return {name: text.replace(folder, "WORKLOADS").replace(probe["python"], "PYTHON")
                for name, text in files.items()}

    wheel, repo = installs["wheel_local"], installs["repo_local"]
    assert set(wheel) == {"launch.sh"} and installs["wheel_probe"]["workload"] in wheel["launch.sh"]
    assert neutral(wheel, installs["wheel_probe"]) == neutral(repo, installs["repo_probe"])
