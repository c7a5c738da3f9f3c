"""The order a campaign runs its jobs in.

On a shared (or merely noisy) machine, conditions drift: other tenants, thermal state, caches.
Running every local run, then every Slurm run, then every Kubernetes run confounds the platform
with the time it ran at. The default interleaves: round k holds the k-th planned run of every
platform, and the platforms' order within each round is shuffled with a recorded seed (a
randomised complete block design), so drift lands on every platform alike and the order can
be reproduced. `blocked` keeps the old order for whoever needs it (one cluster at a time).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .spec import Planned


@dataclass(frozen=True)
class Slot:
    platform: str
    planned: Planned
    round: int
    position: int                      # 0-based place in the whole campaign

    def to_json(self, seed: int, order: str) -> dict:
        return {"order": order, "seed": seed, "round": self.round, "position": self.position}


def arrange(plans: dict[str, list[Planned]], order: str, seed: int) -> list[Slot]:
    """plans: platform -> its runs in plan order (clean, faults, contention)."""
    platforms = list(plans)
    out: list[Slot] = []
    if order == "blocked":
        for plat in platforms:
            for i, p in enumerate(plans[plat]):
                out.append(Slot(plat, p, i, len(out)))
        return out
    rng = random.Random(seed)
    rounds = max((len(v) for v in plans.values()), default=0)
    for k in range(rounds):
        here = [plat for plat in platforms if k < len(plans[plat])]
        rng.shuffle(here)
        for plat in here:
            out.append(Slot(plat, plans[plat][k], k, len(out)))
    return out
