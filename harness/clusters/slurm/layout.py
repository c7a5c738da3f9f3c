"""Where the Slurm-in-Docker cluster's files are: its compose file (in the package data) and its
state directory. Below ``slurm_docker`` and the upgrade drill's helpers, which both read them."""
from __future__ import annotations

import os
from pathlib import Path

from harness import data
from harness.paths import SLURM_CLUSTER, cluster_state_dir

COMPOSE_FILE = data.path("docker-compose.yml")


def state_dir(base: str | os.PathLike | None = None) -> Path:
    """``<base or $POC_STATE_DIR>/slurm``."""
    return cluster_state_dir(SLURM_CLUSTER, base)
