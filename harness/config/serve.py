"""The serving scenario's settings: serve the checkpoint a short training run wrote, on
each scheduler platform, and measure it under the same bounded closed-loop load.

Every load phase is bounded in count and time (harness/serve/load.py has the hard caps), and it only
targets the platform's own addresses on this machine or cluster (PlatformServe.networks()).
"""
from __future__ import annotations

from pydantic import Field, field_validator

from .base import MAX_STEPS, Model

FAULTS = ("kill_server", "node_loss")


class Serve(Model):
    enabled: bool = False               # one serving run per scheduler platform (scenario "serve")
    train_steps: int = Field(20, ge=1, le=MAX_STEPS)  # the short training job whose newest checkpoint is served
    clients: int = Field(4, ge=1, le=64)            # the closed loop's concurrency, the same on both
    phase_s: float = Field(15, gt=0, le=300)        # each steady load phase
    # each fault phase's bound: long enough to see recovery (Slurm's node loss here: about 80 s)
    fault_phase_s: float = Field(150, gt=0, le=600)
    fault_after_s: float = Field(5, ge=0, le=60)    # into a fault phase, the fault
    # a fault phase ends once no request has failed for this long (healthy again), else at fault_phase_s
    settle_s: float = Field(10, ge=0, le=120)
    max_requests: int = Field(50_000, ge=1, le=100_000)   # per phase
    request_timeout_s: float = Field(5, gt=0, le=60)
    ready_timeout_s: float = Field(300, gt=0, le=1800)    # submit -> first successful response
    scale_timeout_s: float = Field(300, gt=0, le=1800)    # second replica asked -> it answers
    rows: int = Field(8, ge=1, le=64)   # rows per request
    faults: list[str] = Field(default_factory=lambda: ["kill_server", "node_loss"])
    scale_out: bool = True
    port: int = Field(8000, ge=1, le=65535)   # the server's port in the pod / on the compute node

    @field_validator("faults")
    @classmethod
    def _faults(cls, v: list[str]) -> list[str]:
        for f in v:
            if f not in FAULTS:
                raise ValueError(f"unknown serving fault {f!r}; choose from {', '.join(FAULTS)}")
        if len(set(v)) != len(v):
            raise ValueError("each fault once")
        return v
