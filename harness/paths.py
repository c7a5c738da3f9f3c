"""Where the harness keeps builds (cache) and running clusters' state, outside any checkout."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("POC_CACHE_DIR") or "~/.cache/k8s-slurm-poc").expanduser()


def state_dir() -> Path:
    return Path(os.environ.get("POC_STATE_DIR") or "~/.local/state/k8s-slurm-poc").expanduser()
