"""The renderers' own checks on every run a config plans, without rendering anything.

`poc validate` runs these after the config model's checks, so a config that validates also renders:
each check lives once, in the renderer that needs it (sbatch.check, jobset.check), and both the
renderer and this module call it. The local baseline's renderer refuses nothing.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from ..config import PLATFORMS, Config
from ..config.slurm import slurm_seconds
from ..errors import ConfigError
from ..spec import JobSpec
from . import jobset, sbatch

# Slurm --switches without @time waits up to the site's SchedulerParameters max_switch_wait, 300 s by default
DEFAULT_MAX_SWITCH_WAIT_S = 300


def check_topology(cfg: Config) -> None:
    """The same placement rule on both schedulers of a campaign, or none. Kueue's topology_required never
    relaxes; topology_preferred tries the level and places the job anywhere at once when it cannot. Slurm's
    --switches=N@T waits up to T for N leaf switches, then places the job anyway (T unset: the site's
    max_switch_wait, 300 s by default), and is ignored without TopologyPlugin=topology/tree (the health gate
    records each node's SLURM_TOPOLOGY_ADDR, so a run shows the placement it got). Equal terms: required with a
    wait of at least the campaign's queue timeout (neither gives up while the run may queue), or preferred with
    no wait (N@0); and one level: the Kueue level whose domain is one leaf switch (a judgement the config cannot
    check: docs/gpu-guide.md)."""
    if not {"slurm", "k8s"} <= set(cfg.platforms):
        return
    sw, k = cfg.slurm.switches, cfg.kubernetes
    kueue = k.topology_required or k.topology_preferred
    if bool(sw) != bool(kueue):
        set_, unset = (("slurm.switches", "kubernetes.topology_required (or _preferred)") if sw else
                       ("kubernetes.topology_" + ("required" if k.topology_required else "preferred"),
                        "slurm.switches"))
        raise ConfigError(f"{set_} is set and {unset} is not: one platform's jobs would be packed under one "
                          "switch and the other's placed anywhere, and the difference measured as the schedulers'",
                          "set both (the same level, one leaf switch's domain) or neither")
    if not sw:
        return
    m = re.fullmatch(r"(\d+)(?:@(.+))?", sw)
    wait = DEFAULT_MAX_SWITCH_WAIT_S if m.group(2) is None else slurm_seconds(m.group(2))
    said = "its site's max_switch_wait (300 s by default)" if m.group(2) is None else f"{wait} s"
    if k.topology_required and wait < cfg.timeouts.queue_s:
        raise ConfigError(f"slurm.switches {sw} places the job across more switches after {said}, while "
                          "kubernetes.topology_required never relaxes: not the same rule",
                          f"wait at least the queue timeout on Slurm ({m.group(1)}@{slurm_time(cfg.timeouts.queue_s)}, "
                          "within the site's max_switch_wait), or use kubernetes.topology_preferred with "
                          f"slurm.switches {m.group(1)}@0")
    if k.topology_preferred and wait > 0:
        raise ConfigError(f"slurm.switches {sw} waits {said} for the switch, while kubernetes.topology_preferred "
                          "places the job elsewhere at once: not the same rule",
                          f"slurm.switches {m.group(1)}@0, or kubernetes.topology_required with a Slurm wait of at "
                          "least the queue timeout")


def slurm_time(seconds: float) -> str:
    s = int(-(-seconds // 1))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"

Submitted = Callable[[Config, str], list[JobSpec]]   # config, platform -> every job a campaign submits there


def check_config(cfg: Config, submitted: Submitted) -> int:
    """Raise the first ConfigError a renderer would raise on a job of ``submitted`` (the scenarios'
    plan: harness/scenarios.py, submitted_specs); returns the number of jobs checked.

    Every platform, not only cfg.platforms: `poc render --platform` renders any of them."""
    check_topology(cfg)
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
