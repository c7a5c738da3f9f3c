"""The renderers' own checks on every run a config plans, without rendering anything.

`poc validate` runs these after the config model's checks, so a config that validates also renders:
each check lives once, in the renderer that needs it (sbatch.check, jobset.check), and both the
renderer and this module call it. The local baseline's renderer refuses nothing.
"""
from __future__ import annotations

from collections.abc import Callable

from ..config import PLATFORMS, Config
from ..spec import JobSpec
from . import jobset, sbatch

Submitted = Callable[[Config, str], list[JobSpec]]   # config, platform -> every job a campaign submits there


def check_config(cfg: Config, submitted: Submitted) -> int:
    """Raise the first ConfigError a renderer would raise on a job of ``submitted`` (the scenarios'
    plan: harness/scenarios.py, submitted_specs); returns the number of jobs checked.

    Every platform, not only cfg.platforms: `poc render --platform` renders any of them."""
    n = 0
    for platform in PLATFORMS:
        for s in submitted(cfg, platform):
            if platform == "slurm":
                sbatch.check(s, cfg.slurm)
            elif platform == "k8s":
                jobset.check(s, cfg.kubernetes.image)
                jobset.check_placement(cfg.kubernetes)
            n += 1
    return n
