"""The faults section: which fault each run injects, into which rank, at which step."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import MAX_RANKS, MAX_STEPS, Model

# faults that change the cluster, not only the run's own processes
DESTRUCTIVE_FAULTS = frozenset({"lose_node"})


class Fault(Model):
    kind: Literal["kill_rank", "delete_pod", "lose_node", "requeue"]
    at_step: int = Field(ge=1, le=MAX_STEPS)
    rank: int = Field(1, ge=0, le=MAX_RANKS)
