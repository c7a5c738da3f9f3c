"""The interface every platform implements, and the records it returns.

The pipeline drives a backend through: render (pure) -> preflight -> submit ->
observe (repeatedly, batched) -> inject (a fault) -> collect -> cancel/cleanup.
Backends receive their clients and runners in their constructor, so tests pass
real or recording ones without patching.
"""
from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import capabilities as cap
from ..config import DESTRUCTIVE_FAULTS
from ..errors import BackendError
from ..spec import JobSpec
from ..states import JobState
from ..timing import Stamp


@dataclass(frozen=True)
class Rendered:
    """What render() produced: printable files, plus the object submit() sends."""
    platform: str
    files: dict[str, str]            # file name -> text, written to the run's artifacts and by `poc render --out`
    payload: Any = None              # backend-specific (argv lists, sbatch text, k8s object dicts)


@dataclass
class Handle:
    """A submitted job; `ids` is everything to cancel. Serialisable, so a crashed campaign can cancel it later."""
    platform: str
    run_id: str
    ids: list[str]
    submitted_at: float               # harness clock, epoch seconds, taken just before the submit call
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"platform": self.platform, "run_id": self.run_id, "ids": list(self.ids),
                "submitted_at": self.submitted_at, "data": self.data}

    @classmethod
    def from_json(cls, d: dict) -> Handle:
        return cls(platform=d["platform"], run_id=d["run_id"], ids=list(d["ids"]),
                   submitted_at=float(d["submitted_at"]), data=dict(d.get("data") or {}))


@dataclass
class Observation:
    """One observe() result. Times are epoch seconds on the scheduler's clock.

    times keys used by metrics: 'submitted' (the scheduler's record of submission),
    'admitted' (Kueue), 'allocated' (all resources allocated: Slurm Start, last
    PodScheduled, local spawn), 'ended'. attempts: one dict per scheduler-level
    attempt with the same keys (Slurm requeues, JobSet restarts).
    """
    state: JobState
    events: list[dict] = field(default_factory=list)     # new workload events since the last call
    times: dict[str, float] = field(default_factory=dict)
    attempts: list[dict] = field(default_factory=list)
    native_state: str = ""
    reason: str = ""


@dataclass
class Collected:
    """Everything read after the job ended."""
    events: list[dict]
    times: dict[str, float]
    attempts: list[dict]
    logs: dict[str, str] = field(default_factory=dict)      # name -> text (trimmed), stored with the run
    info: dict = field(default_factory=dict)                 # scheduler-specific facts worth keeping
    # the scheduler's own records, JSON-able and unparsed, that every time-stamp is derived from
    # (harness.evidence.stamps); stored redacted as runs/<run_id>/raw.json.gz for `poc rederive`
    raw: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FaultRecord:
    kind: str
    injected_at: float                # harness clock, epoch seconds, just before the fault action
    target: dict                      # rank, host, pid, node, pod... as seen in the triggering event
    detail: dict = field(default_factory=dict)
    # harness clock when the action returned: the fault happened inside [injected_at, acted_at]. The
    # injector's own start-up (srun --overlap, pods/exec, docker exec) comes before its kill, so the
    # best estimate is the return, and detection (metrics/recovery.fault_stamp) does not count it
    acted_at: float | None = None

    def to_json(self) -> dict:
        out = {"kind": self.kind, "injected_at": self.injected_at, "target": self.target, "detail": self.detail}
        if self.acted_at is not None:
            acted = max(self.acted_at, self.injected_at)
            out["acted_at"] = self.acted_at
            out["stamp"] = Stamp(acted, self.injected_at, acted, "harness clock around the fault action "
                                 "(asked, returned: the action lands by its return)", 1e-6).to_json()
        return out


Journal = Callable[["Handle"], None]
"""Persists a handle at once (the store's in-flight record). A backend calls it after noting in
``handle.data`` what a destructive fault is about to change and before changing it, so a harness
that dies mid-fault leaves a record from which ``cancel`` (at the next ``--resume``) undoes it."""


def no_journal(_handle: Handle) -> None:
    pass


def require_destructive_allowed(kind: str, allowed: bool, platform: str) -> None:
    """The backend's own check of the config's opt-in (config validation is the first): a fault that
    takes a node away from a shared cluster is refused unless allow_destructive_faults is true."""
    if kind in DESTRUCTIVE_FAULTS and not allowed:
        raise BackendError(f"{kind} on {platform} takes a node away from the cluster and "
                           "allow_destructive_faults is false",
                           tip="set allow_destructive_faults: true in the config (the fault touches only nodes "
                               "the run holds)")


def keep_reason(ok: bool, keep: str) -> str | None:
    """Why a run's files stay on the cluster under keep_run_files, or None when they are removed."""
    if keep == "always":
        return "keep_run_files: always"
    if keep == "on_failure" and not ok:
        return "the run did not succeed (keep_run_files: on_failure)"
    if keep not in ("always", "on_failure", "never"):
        return f"unknown keep_run_files {keep!r}"
    return None


class Backend(abc.ABC):
    platform: str = ""

    @abc.abstractmethod
    def render(self, spec: JobSpec) -> Rendered:
        """Pure: no I/O, no clock. `poc render` prints this."""

    @abc.abstractmethod
    def preflight(self) -> dict:
        """Check the platform is usable; return environment facts (versions, settings) stored with each run.
        Raise BackendError with a TIP when something is missing."""

    @abc.abstractmethod
    def submit(self, spec: JobSpec, rendered: Rendered) -> Handle: ...

    def intent(self, spec: JobSpec, rendered: Rendered) -> Handle | None:
        """A handle for the job submit() is about to make, naming it by what the submit gives it (a
        job name and directory, a JobSet name and labels) rather than by the id it does not have yet;
        the pipeline journals it before submit(), so a crash inside the submit call leaves a record
        whose cancel() finds the job. None where a crash leaves nothing on a cluster to find."""
        return None

    @abc.abstractmethod
    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        """One batched look at several jobs (keyed by run_id)."""

    @abc.abstractmethod
    def inject(self, handle: Handle, kind: str, target_event: dict, journal: Journal = no_journal) -> FaultRecord:
        """Inject a fault aimed at the rank that emitted target_event; time-stamp it. A fault that
        changes something outside the job (a node down) records it in handle.data and calls
        journal(handle) before acting; cancel() undoes whatever handle.data records."""

    @abc.abstractmethod
    def collect(self, handle: Handle) -> Collected: ...

    @abc.abstractmethod
    def cancel(self, handle: Handle) -> None:
        """Stop and remove what the run created. Idempotent; must not raise for an already-gone job.
        An intent() handle (no ids) finds the job first, and touches only what is the run's own."""

    def cleanup(self, handle: Handle, ok: bool, keep: str) -> dict:
        """After collect and cancel: remove the run's files on the cluster (Slurm run directory,
        Kubernetes checkpoint sub-path) unless keep_run_files keeps them (``keep_reason``). Returns
        what was done for the run record: {"removed": [...], "kept": [...], "reason": ...}; a
        failure is raised and recorded as a warning, never fails the run. Default: nothing to do."""
        return {}

    def user_view(self, handle: Handle) -> list[dict]:
        """What a user can read about the job right now, in the platform's own words: one dict per
        message, {"source": where a user sees it, "text": the words}. The user-experience probe calls
        it every poll, so it stays at a few calls. Default: nothing readable."""
        return []

    def audit_evidence(self, handle: Handle) -> dict:
        """After cancel and cleanup: the platform's own records of who did what to this run, raw and
        JSON-able (accounting lines, controller log lines, API-server audit events). Stored as
        raw["audit"] and read by harness.audit.answers. Default: none kept."""
        return {}

    def call_counts(self) -> dict[str, int]:
        """Calls made to the platform so far by this backend, by kind (a command's name, an API
        verb and resource); the pipeline diffs it around each stage. Default: not counted."""
        return {}

    def supported_faults(self) -> set[str]:
        """The faults this backend injects: its platform's row of capabilities.FAULTS (Slurm: narrowed by
        its transport), so config validation, the run plan and the backend agree."""
        return set(cap.faults(self.platform))

    def cluster_identity(self) -> dict | None:
        """The cluster this backend reaches (backends/identity.py), recorded in every handle it makes so
        a journalled handle is never cancelled on another cluster; None for this machine's own runs."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook: a backend without connections inherits this no-op
        """Release connections (SSH, API clients) when the campaign is done with this platform."""
