"""The scale-curve scenario's section: the config's job again at several node counts on each scheduler
platform (harness/scale_curve.py), so queue time, startup, all-reduce bandwidth, step time and
throughput can be read against the job's size.
"""
from __future__ import annotations

from pydantic import Field, field_validator

from .. import capabilities as cap
from .base import Model

MAX_NODES = 4096   # resources.nodes' own bound


class Scale(Model):
    """nodes: the sizes, each a whole run of the config's job with resources.nodes replaced (per-rank
    batch and everything per node unchanged: weak scaling); [] plans no scale runs."""
    nodes: list[int] = Field(default_factory=list, max_length=64)
    repetitions: int = Field(1, ge=1, le=100)    # runs per size and platform

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, v: list[int]) -> list[int]:
        small = [n for n in v if n < 1]
        if small:
            raise ValueError(f"each size is a node count of at least 1, not {small[0]}")
        big = [n for n in v if n > MAX_NODES]
        if big:
            raise ValueError(f"each size is a node count of at most {MAX_NODES} (as resources.nodes), not {big[0]}")
        twice = sorted({n for n in v if v.count(n) > 1})
        if twice:
            raise ValueError(f"each size once: {', '.join(map(str, twice))} is listed more than once")
        if v != sorted(v):
            raise ValueError(f"list the sizes in increasing order, the order their runs are planned in: "
                             f"{sorted(v)}")
        return v

    def sizes_for(self, platform: str) -> list[int]:
        """The sizes a campaign runs on ``platform``: none on the local baseline, which has no scheduler."""
        return list(self.nodes) if cap.runs("scale", platform) else []

    def most_nodes(self, platform: str, nodes: int) -> int:
        """The most nodes one job of a campaign on ``platform`` asks for, ``nodes`` being the config's job's
        (resources.nodes): what a queue's quota or a partition must hold."""
        return max([nodes, *self.sizes_for(platform)])
