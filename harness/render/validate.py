"""The renderers' own checks on every run a config plans, without rendering anything.

`poc validate` runs these after the config model's checks, so a config that validates also renders:
each check lives once, in the renderer that needs it (sbatch.check, jobset.check), and both the
renderer and this module call it. The local baseline's renderer refuses nothing.
"""
from __future__ import annotations

from ..config import PLATFORMS, Config
from ..spec import JobSpec, blocker_spec, build, run_plan
from . import jobset, sbatch


def planned_specs(cfg: Config, platform: str) -> list[JobSpec]:
    """Every job a campaign on platform submits: the planned runs and the contention runs' blockers."""
    out = []
    for p in run_plan(cfg, platform):
        s = build(cfg, platform, p.run_id, p.fault, p.scenario)
        out.append(s)
        if p.scenario == "contention" and cfg.contention:
            out.append(blocker_spec(s, cfg.contention.blocker_steps))
    return out


def check_config(cfg: Config) -> int:
    """Raise the first ConfigError a renderer would raise; returns the number of jobs checked.

    Every platform, not only cfg.platforms: `poc render --platform` renders any of them."""
    n = 0
    for platform in PLATFORMS:
        for s in planned_specs(cfg, platform):
            if platform == "slurm":
                sbatch.check(s, cfg.slurm)
            elif platform == "k8s":
                jobset.check(s, cfg.kubernetes.image)
                jobset.check_placement(cfg.kubernetes)
            n += 1
    return n
