"""local.runtime: host needs torch in the harness's Python, which a plain `pip install k8s-slurm-poc` lacks
(torch is the `workload` extra): the preflight says so as ERROR/TIP, never with a traceback.

The Python without torch is a real one: a fresh venv of the interpreter these tests run on."""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from harness.backends.local import LocalBackend
from harness.cli import main
from harness.errors import BackendError


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("bare") / "venv"
    venv.create(d, with_pip=False, system_site_packages=False)
    py = d / "bin" / "python"
    assert subprocess.run([py, "-c", "import torch"], capture_output=True, check=False).returncode != 0
    return str(py)


def test_preflight_without_torch_names_the_python_and_the_extra(bare_python, tmp_path):
    with pytest.raises(BackendError) as ei:
        LocalBackend(tmp_path, python=bare_python).preflight()
    assert ei.value.message == (f"torch is not installed in {bare_python}, the Python that local.runtime: host "
                                "runs torchrun with")
    assert ei.value.tip.startswith("pip install 'k8s-slurm-poc[workload]' into the Python that runs torchrun "
                                   f"({bare_python} -m pip install 'k8s-slurm-poc[workload]')")
    assert "local.runtime: container" in ei.value.tip


def test_preflight_of_a_python_that_is_not_there(tmp_path):
    missing = str(tmp_path / "no-such-python")
    with pytest.raises(BackendError) as ei:
        LocalBackend(tmp_path, python=missing).preflight()
    assert ei.value.message.startswith(f"cannot run {missing}, the Python that local.runtime: host")
    assert "k8s-slurm-poc[workload]" in ei.value.tip


@pytest.mark.parametrize("body, reason, tip", [
    ("raise RuntimeError('CUDA driver initialization failed')", "CUDA driver initialization failed",
     "reinstall torch in that Python"),
    ("raise ImportError('libcudnn.so.9: cannot open shared object file')",
     "libcudnn.so.9: cannot open shared object file", "reinstall torch in that Python"),
    ("import numpy_that_is_not_there", "No module named 'numpy_that_is_not_there'",
     "install numpy_that_is_not_there, which torch imports"),
])
def test_a_broken_torch_is_not_called_missing(tmp_path, body, reason, tip):
    """A torch that is there but fails to import keeps its own reason: a traceback's last line, an
    ImportError without a module name, a module torch itself imports."""
    d = tmp_path / "venv"
    venv.create(d, with_pip=False)
    site = next(Path(d).glob("lib/python*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(body + "\n")
    with pytest.raises(BackendError) as ei:
        LocalBackend(tmp_path, python=str(d / "bin" / "python")).preflight()
    assert ei.value.message.startswith("torch cannot be imported by ") and ei.value.message.endswith(reason), \
        ei.value.message
    assert ei.value.tip.startswith(tip) and ei.value.tip.endswith("or use local.runtime: container")


def test_preflight_with_torch_reports_its_version(tmp_path):
    pytest.importorskip("torch", reason="the lab venv has the workload extra: pip install -e '.[dev,workload]'")
    import torch

    info = LocalBackend(tmp_path, python=sys.executable).preflight()
    assert info["torch_local"] == torch.__version__


def test_poc_run_on_the_host_without_torch_says_error_and_tip(bare_python, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path / "state"))
    rc = main(["run", "--platform", "local", "--set", "local.runtime=host", "--results", str(tmp_path / "out"),
               "--repetitions", "1"],
              backend_fn=lambda plat, cfg: LocalBackend(tmp_path / "work", python=bare_python), env=dict(os.environ))
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("ERROR "))
    assert lines[at].startswith(f"ERROR local preflight: torch is not installed in {bare_python}"), err
    assert lines[at + 1].startswith("TIP pip install 'k8s-slurm-poc[workload]'"), err
    assert "Traceback" not in err
