"""The one state enum every backend maps its scheduler's states into."""
from __future__ import annotations

import enum


class JobState(str, enum.Enum):
    PENDING = "pending"        # submitted, resources not yet allocated (queued, suspended, not admitted)
    STARTING = "starting"      # resources allocated, processes not yet all running
    RUNNING = "running"
    RESTARTING = "restarting"  # requeued or being restarted after a failure
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT})
