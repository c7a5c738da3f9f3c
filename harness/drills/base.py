"""What a drill asks of a platform: restart (or upgrade) its components one at a time, in the order
the platform's upgrade guide prescribes, and answer small probes while it happens.

The drill runner (harness/drills/runner.py) is the same for every platform: it starts the drill
while a training job runs with a same-shape job queued behind it, probes submissions and status
queries from a thread of its own while the components restart, and records everything with its
time-stamps in the run's record, so the metrics (harness/metrics/drill.py) can be re-derived.

Threads: `try_submit` and `try_status` are called only from the probe thread, everything else only
from the runner's thread; an implementation must not share one non-thread-safe connection between
the two (an SSH channel, say).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol

from ..backends.base import Handle

KINDS = ("restart", "upgrade")
# where each component sits in the order, for the report's timeline (one row per component)
GROUPS = ("database", "control plane", "controllers", "nodes")


@dataclass
class Step:
    """One component restarted (or replaced by its newer release) and seen healthy again."""
    component: str              # "slurmctld", "slurmd@c1", "kube-apiserver", "kueue", "kubelet@poc-worker-1" ...
    group: str                  # one of GROUPS
    started: float              # epoch s: the restart was asked for
    back: float | None = None   # epoch s: its health check passed again (None: it did not come back in time)
    version_before: str = ""
    version_after: str = ""
    how: str = ""               # what was done, in words (an argv, never a secret)
    health: str = ""            # what "back" means for this component (the check that passed)
    resolution_s: float = 0.0   # how often that check was polled: `back` is late by at most this much
    ok: bool = True
    error: str | None = None
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


class PlatformDrill(Protocol):
    platform: str

    def owned(self) -> tuple[bool, str]:
        """(True, why) when this is a cluster the harness itself made (its own markers), or the user
        confirmed it is theirs; (False, why not) otherwise. A drill never runs on (False, ...)."""

    def prepare(self, kind: str) -> dict:
        """Before the training job is submitted: build or fetch what the drill needs (the newer releases,
        cached by version outside the clone), so no build time falls inside the drill. Returns what it
        did ({} for a restart)."""

    def plan(self, kind: str) -> list[str]:
        """The components to restart/upgrade, in order (e.g. slurmdbd, slurmctld, slurmd@c1, ...)."""

    def versions(self) -> dict[str, str]:
        """component -> the version running now."""

    def step(self, kind: str, component: str) -> Step:
        """Restart (kind "restart") or upgrade (kind "upgrade") one component and wait, bounded, until
        it is healthy again. Never raises for a component that does not come back: Step.ok=False."""

    def try_submit(self) -> str | None:
        """One submission through the whole admission path that leaves nothing behind (sbatch
        --test-only; a server-side dry-run create). None: accepted; else the platform's refusal."""

    def try_status(self) -> str | None:
        """One status query a user would make (squeue; list the JobSets). None: answered; else why not."""

    def snapshot(self, handles: list[Handle]) -> dict:
        """What the platform keeps about these jobs (objects, uids, accounting records, steps), so the
        runner can tell whether they survived the drill intact. JSON-ready; no secrets."""

    def leftovers(self, handles: list[Handle]) -> list[dict]:
        """After the jobs ended: what is left inconsistent (orphaned pods or steps, a Workload stuck
        admitted or pending, a node not back, a controller not ready). [] when all is clean."""

    def restore(self, kind: str) -> dict:
        """Put the cluster back the way a campaign expects it (after an upgrade: the pinned release
        again, which may mean a new cluster: Slurm and Kueue state cannot be downgraded). Returns
        what was done."""
