"""The user-experience probes' settings: which user mistakes to make on purpose, and as whom.

Each mistake is one short run per scheduler platform (harness/ux/probe.py) that measures how long
the platform takes to tell the user, in its own words, what is wrong.
"""
from __future__ import annotations

from pydantic import Field, field_validator

from .base import Model

# the mistakes users make most, in the order the report lists them
MISTAKES = ("impossible_resources", "missing_image", "wrong_queue", "entrypoint_typo", "missing_checkpoint_volume")
# kubernetes keys a probe may override: who submits and where, not what the job is
UX_K8S_KEYS = {"kubeconfig", "context", "namespace", "local_queue", "pod", "checkpoint_host_path",
               "checkpoint_pvc", "image", "image_pull_policy", "audit_log"}


class Ux(Model):
    mistakes: list[str] = Field(default_factory=list)
    # how long a probe waits for the platform to say what is wrong before it records "not clear"
    deadline_s: float = Field(150, gt=0, le=3600)
    # the probes' Kubernetes identity and place, over `kubernetes` (a restricted user's kubeconfig,
    # namespace and queue: what a team member has on a shared cluster); {}: the campaign's own
    kubernetes: dict = Field(default_factory=dict)

    @field_validator("mistakes")
    @classmethod
    def _mistakes(cls, v: list[str]) -> list[str]:
        for m in v:
            if m not in MISTAKES:
                raise ValueError(f"unknown mistake {m!r}; choose from {', '.join(MISTAKES)}")
        if len(set(v)) != len(v):
            raise ValueError("each mistake once")
        return v

    @field_validator("kubernetes")
    @classmethod
    def _k8s(cls, v: dict) -> dict:
        bad = sorted(set(v) - UX_K8S_KEYS)
        if bad:
            raise ValueError(f"{', '.join(bad)}: a probe may override only {', '.join(sorted(UX_K8S_KEYS))}")
        return v
