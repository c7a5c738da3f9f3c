"""Files the harness reads at run time, shipped inside the package so that a wheel install works.

    workloads/ddp_train.py      the training job (the local baseline runs it; Slurm and Kubernetes get a copy)
    sbatch/job.sbatch.tmpl      the batch script template (harness/render/sbatch.py)
    kind-cluster.yaml           the kind cluster's config (harness/clusters/kind.py)
    docker-compose.yml          the Slurm-in-Docker cluster (harness/clusters/slurm_docker.py)
    images/<name>/              Docker build contexts (harness/clusters/images.py)

The repository's top-level ``workloads/``, ``sbatch/``, ``manifests/`` and ``docker-compose.yml``
are generated copies for people to read and use by hand; tests/unit/test_package_data.py keeps
them equal to these files and to what the renderers write.
"""
from __future__ import annotations

import atexit
import contextlib
from functools import cache
from importlib import resources
from pathlib import Path

_kept = contextlib.ExitStack()
atexit.register(_kept.close)


def text(*parts: str) -> str:
    return resources.files(__name__).joinpath(*parts).read_text(encoding="utf-8")


@cache
def path(*parts: str) -> Path:
    """A real file-system path to a shipped file or folder, valid until the process exits.

    For a package on disk (every pip install, editable or not) as_file yields the file itself,
    so a folder's files keep their names and modes (image tags hash both); from a zip it would
    yield a temporary copy.
    """
    return _kept.enter_context(resources.as_file(resources.files(__name__).joinpath(*parts)))
