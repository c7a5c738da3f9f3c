"""k8s-slurm-poc: run the same PyTorch DDP job on Kubernetes and Slurm and compare them."""
from __future__ import annotations

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("k8s-slurm-poc")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.1.0+src"
