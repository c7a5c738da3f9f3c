"""Where the harness keeps builds (cache) and running clusters' state, outside any checkout.

The one place that reads ``$POC_CACHE_DIR`` and ``$POC_STATE_DIR``; every module asks here.
"""
from __future__ import annotations

import os
from pathlib import Path

# Sub-directories of the state directory, one per local cluster (and the local baseline's runs).
SLURM_CLUSTER = "slurm"
NATIVE_K8S_CLUSTER = "k8s-native"
KIND_CLUSTER = "kind"
LOCAL_RUNS = "local"


def cache_dir() -> Path:
    """Builds and images that survive clusters: ``$POC_CACHE_DIR`` or ``~/.cache/k8s-slurm-poc``."""
    return Path(os.environ.get("POC_CACHE_DIR") or "~/.cache/k8s-slurm-poc").expanduser()


def state_dir() -> Path:
    """Running clusters' state: ``$POC_STATE_DIR`` or ``~/.local/state/k8s-slurm-poc``."""
    return Path(os.environ.get("POC_STATE_DIR") or "~/.local/state/k8s-slurm-poc").expanduser()


def cluster_state_dir(cluster: str, base: str | os.PathLike | None = None) -> Path:
    """``<base or state_dir()>/<cluster>``; cluster is one of the names above."""
    return (Path(base).expanduser() if base else state_dir()) / cluster


def build_times_file() -> Path:
    """One line per finished build (Go components and images): what progress estimates read."""
    return cache_dir() / "build-times.jsonl"
