"""The upgrade drills' settings: restart, or upgrade, the scheduler's components one at a
time while a training job runs and a same-shape job waits behind it.

A drill restarts a platform's control plane: it runs only where the harness can tell the cluster is
the user's own (the local clusters' markers, or `confirm_cluster` naming it), never by default.
"""
from __future__ import annotations

from pydantic import Field, field_validator

from .. import capabilities as cap
from .base import MAX_STEPS, Model

KINDS = ("restart", "upgrade")


class Drills(Model):
    kinds: list[str] = Field(default_factory=list)       # one drill run per kind and scheduler platform
    at_step: int = Field(5, ge=1, le=MAX_STEPS)       # the drill starts once rank 0 has reached this step
    # the training job's steps: long enough to outlast the drill (about 0.4 s a step on the smoke workload)
    steps: int = Field(250, ge=1, le=MAX_STEPS)
    upgrade_steps: int = Field(500, ge=1, le=MAX_STEPS)
    probe_s: float = Field(0.5, gt=0, le=30)   # how often submissions and status queries are tried
    component_timeout_s: float = Field(300, gt=0, le=3600)   # one component's bound to be healthy again
    # the cluster's own name (Slurm's ClusterName, the kubeconfig context's cluster): the user's word
    # that it is theirs to restart. The local clusters need none: the harness made them
    confirm_cluster: str | None = None
    # on a user's cluster: platform -> kind -> [{component, group, argv}] run in order (argv lists,
    # never a shell string); the local clusters have their own built-in sequences
    commands: dict[str, dict[str, list[dict]]] = Field(default_factory=dict)

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        for k in v:
            if k not in KINDS:
                raise ValueError(f"unknown drill {k!r}; choose from {', '.join(KINDS)}")
        if len(set(v)) != len(v):
            raise ValueError("each drill once")
        return v

    @field_validator("commands")
    @classmethod
    def _commands(cls, v: dict) -> dict:
        for plat, kinds in v.items():
            if not cap.runs("drills", plat):
                raise ValueError(f"commands.{plat}: drills are for {', '.join(sorted(cap.SCENARIOS['drills']))}")
            for kind, steps in (kinds or {}).items():
                if kind not in KINDS:
                    raise ValueError(f"commands.{plat}.{kind}: choose from {', '.join(KINDS)}")
                for i, s in enumerate(steps or []):
                    argv = s.get("argv") if isinstance(s, dict) else None
                    if not s.get("component") or not isinstance(argv, list) or not argv \
                            or not all(isinstance(a, str) for a in argv):
                        raise ValueError(f"commands.{plat}.{kind}[{i}]: give component and argv "
                                         "(a list of strings: no shell)")
                    if any("\0" in a for a in argv) or not isinstance(s["component"], str) \
                            or len(s["component"]) > 64:
                        raise ValueError(f"commands.{plat}.{kind}[{i}]: component is a name (at most 64 "
                                         "characters) and no argument holds a NUL")
        return v

    def steps_for(self, kind: str) -> int:
        return self.upgrade_steps if kind == "upgrade" else self.steps
