"""What the harness ships as package data (harness/data), and the copies people read at the top level.

The harness reads only harness/data (through importlib.resources), so a wheel install works
(tests/integration/test_wheel_install.py proves it). The top-level files are for people:
workloads/ddp_train.py to take to a cluster, sbatch/job.sbatch and manifests/ to read,
docker-compose.yml for Docker Compose v2. Each must equal what the package holds or renders.
Edit harness/data, then POC_UPDATE_GOLDEN=1 rewrites the copies (manifests/jobset.yaml, kueue.yaml
and rbac.yaml: tests/unit/render/test_jobset.py).
"""
from __future__ import annotations

import fnmatch
import os
import tomllib

import pytest
from support.paths import ROOT

from harness import config, data, scenarios
from harness.render.sbatch import render_sbatch

DATA = ROOT / "harness" / "data"
UPDATE = os.environ.get("POC_UPDATE_GOLDEN") == "1"
REGENERATE = "POC_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_package_data.py"


def copy_header(source: str) -> str:
    return (f"# Generated copy of harness/data/{source}, which the harness reads: edit that one, then run\n"
            f"# {REGENERATE}\n")


def example_sbatch() -> str:
    """What `poc render --platform slurm` writes for the built-in default config, with a note after #!."""
    cfg = config.load(None)
    first = scenarios.plan(cfg, "slurm")[0]
    run_id = first.run_id
    script = render_sbatch(scenarios.job_spec(cfg, "slurm", first), cfg.slurm).script
    shebang, rest = script.split("\n", 1)
    note = (f"# Example, generated: `poc render --platform slurm` for the built-in default config (run {run_id}),\n"
            f"# from the template harness/data/sbatch/job.sbatch.tmpl. Regenerate:\n# {REGENERATE}\n")
    return f"{shebang}\n{note}{rest}"


COPIES = {
    # byte for byte: the ConfigMap and the Slurm run directory get the package's text, and a
    # user's copy must hash the same (the JobSet's poc/workload-sha256 annotation)
    "workloads/ddp_train.py": lambda: data.text("workloads", "ddp_train.py"),
    # the modules shipped beside it (calibration, the health gate, the check before training)
    "workloads/poc_calibration.py": lambda: data.text("workloads", "poc_calibration.py"),
    "workloads/poc_health.py": lambda: data.text("workloads", "poc_health.py"),
    "workloads/poc_check.py": lambda: data.text("workloads", "poc_check.py"),
    "sbatch/job.sbatch": example_sbatch,
    "manifests/kind-cluster.yaml": lambda: copy_header("kind-cluster.yaml") + data.text("kind-cluster.yaml"),
    "docker-compose.yml": lambda: copy_header("docker-compose.yml") + data.text("docker-compose.yml"),
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_top_level_copy_matches_the_package(name):
    want = COPIES[name]()
    path = ROOT / name
    if UPDATE:
        path.write_text(want)
    assert path.read_text() == want, (f"{name} differs from what harness/data holds or renders: make the change "
                                      f"in harness/data, then {REGENERATE}")


def test_the_wheel_carries_every_data_file():
    """Every file under harness/data matches a package-data pattern in pyproject.toml, so a wheel has it
    (a file the code reads but the wheel lacks works in the repository and fails after `pip install .`)."""
    st = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = st["package-data"]["harness.data"]
    excluded = st["exclude-package-data"]["harness.data"]
    assert st["include-package-data"] is False      # only what the patterns name
    files = [p.relative_to(DATA).as_posix() for p in DATA.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.name != "__init__.py"]
    assert "workloads/ddp_train.py" in files and "images/worker/Dockerfile" in files
    unshipped = [f for f in files
                 if not any(fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/") for pat in patterns)
                 or any(fnmatch.fnmatch(f, pat) for pat in excluded)]
    assert unshipped == [], f"add a package-data pattern for {unshipped} in pyproject.toml"


def test_data_paths_are_real_files():
    script = data.path("workloads", "ddp_train.py")
    assert script.is_file() and script.read_text() == data.text("workloads", "ddp_train.py")
    for image in ("worker", "slurm", "mariadb"):
        assert (data.path("images", image) / "Dockerfile").is_file()
    assert data.path("kind-cluster.yaml").is_file() and data.path("docker-compose.yml").is_file()


def test_unit_tests_mirror_harness_and_are_imported_by_path():
    """tests/unit/<package>/test_<module>.py tests harness/<package>/<module>.py, so test modules share
    basenames across folders (tests/unit/check/test_k8s.py, tests/unit/evidence/test_k8s.py). pytest
    imports each by its path (--import-mode=importlib), which needs no __init__.py in a test folder;
    by basename (the default) such a pair stops collection of the whole suite ("import file mismatch")."""
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--import-mode=importlib" in ini["addopts"].split()
    assert "tests" in ini["pythonpath"]          # tests/support: what the tests share
    unit = ROOT / "tests" / "unit"
    folders = [d.relative_to(unit) for d in unit.rglob("*") if d.is_dir() and d.name != "__pycache__"]
    assert folders and [f.as_posix() for f in folders if not (ROOT / "harness" / f).is_dir()] == []
    assert [p.relative_to(unit).as_posix() for p in unit.rglob("*.py") if not p.name.startswith("test_")] == []
