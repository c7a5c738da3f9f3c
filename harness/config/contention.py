"""The contention scenario's section: a blocking job ahead of the measured one."""
from __future__ import annotations

from pydantic import Field

from .base import MAX_STEPS, Model


class Contention(Model):
    """A same-shape blocking job holds what the measured job needs until it finishes by itself."""
    runs: int = Field(1, ge=1, le=100)
    blocker_steps: int | None = Field(None, ge=1, le=MAX_STEPS)   # None: the workload's steps
