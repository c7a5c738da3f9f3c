"""What one run's stages share, below the pipeline and the scenarios that plug into it.

``RunContext``: the backend, store, config and clocks a run is executed with (tests pass simulated
clocks and a scripted backend). ``Stages``: the run's stage records (name, start, end, ok, error and
the API calls each made), in the order they ran; a failure inside one is re-raised as ``StageFailed``
naming the stage, so the record says where a run failed.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import evidence, footprint
from .backends.base import Backend
from .config import Config
from .errors import BackendError
from .spec import JobSpec, Planned
from .store import RunRecord, Store

log = logging.getLogger(__name__)

Progress = Callable[[str, str, str, float], None]  # platform, run_id, phase, seconds since submit


def _noop(*_a) -> None:
    pass


def platform_part(parts: dict[str, Callable], backend: Backend, settings, *, none: str, runs: str):
    """A scenario's part for the backend's platform, built from ``parts`` (platform -> factory taking the
    backend and the scenario's settings); BackendError naming ``none`` and where it ``runs`` otherwise."""
    make = parts.get(backend.platform)
    if make is None:
        raise BackendError(f"no {none} on {backend.platform or 'this platform'}",
                           tip=f"{runs} on the {' and '.join(sorted(parts))} platforms")
    return make(backend, settings)


class StageFailed(Exception):
    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {error}")
        self.stage = stage
        self.error = error


@dataclass
class Stages:
    items: list[dict] = field(default_factory=list)
    clock: Callable[[], float] = time.time
    calls: Callable[[], dict] = dict          # the backend's cumulative call counts: each stage keeps its own
    label: str = ""                           # the run in its log lines ("slurm slurm-clean-01"), if given

    @contextmanager
    def stage(self, name: str):
        rec = {"name": name, "start": self.clock(), "end": None, "ok": False}
        self.items.append(rec)
        log.debug("%sstage %s started", self.label and f"{self.label}: ", name)
        before = self.calls()
        try:
            yield rec
            rec["ok"] = True
        except StageFailed:
            raise
        except BaseException as exc:
            rec["error"] = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
            raise StageFailed(name, exc) from exc
        finally:
            rec["end"] = self.clock()
            made = footprint.diff(before, self.calls())
            if made:
                rec["calls"] = made
            log.info("%sstage %s %s in %.2f s%s", self.label and f"{self.label}: ", name,
                     "ok" if rec["ok"] else "failed",
                     rec["end"] - rec["start"], f": {rec['error']}" if rec.get("error") else "")


@dataclass
class RunContext:
    backend: Backend
    store: Store
    cfg: Config
    platform_info: dict
    progress: Progress = _noop
    poll_s: float = 0.5
    clock: Callable[[], float] = time.time          # epoch seconds; tests pass a simulated one
    sleep: Callable[[float], None] = time.sleep
    # raw scheduler evidence -> time-stamps; pure-logic tests with a scripted backend pass their own
    stamps: Callable[[str, dict], dict] = evidence.stamps


@dataclass
class Evidence:
    """What a run's metrics are derived from, the same in the pipeline and in `poc rederive`: the
    workload's events, the scheduler's time-stamps (and the reader that made them), derive_inputs,
    the injected faults, the contention record, whether the job succeeded, and the scenario's own raw
    evidence (a drill's or a service's: raw.json.gz keeps it under the scenario's key)."""
    platform: str
    events: list[dict]
    stamps: dict
    stamps_fn: Callable[[str, dict], dict]
    inputs: dict
    derive: Callable                          # metrics.derive (rederive passes the one it checks with)
    faults: list[dict] = field(default_factory=list)
    contention: dict | None = None
    job_ok: bool = True
    raw: dict | None = None


class Scenario:
    """What a run does beside training: hooks named after the run's stages, called by the pipeline,
    which names no scenario. The default is a clean run: every hook does nothing. A scenario is
    registered by kind in harness/scenarios.py; ``metrics`` is static so `poc rederive` calls it too.

    One instance per run; ``ctx`` and ``spec`` are the run's."""
    kind = "clean"
    raw_key: str | None = None       # the key of raw.json.gz (and of the record) for its own evidence

    def __init__(self, ctx: RunContext, spec):
        self.ctx, self.spec = ctx, spec

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        """The runs it adds to a platform's plan (harness/scenarios.py puts them in registry order)."""
        return []

    @staticmethod
    def shaped(cfg: Config, spec: JobSpec) -> JobSpec:
        """The job a planned run of it submits: the config's job (spec.build), changed where it needs to."""
        return spec

    @staticmethod
    def also_submits(cfg: Config, spec: JobSpec) -> list[JobSpec]:
        """The other jobs a run of it submits beside ``spec`` (`poc validate` checks them too)."""
        return []

    def prepare(self, stages: Stages, files: dict[str, str]) -> None:
        """Before the submit: start or check what the run needs beside its job (its own stages)."""

    def watched(self) -> list:
        """Other jobs' handles to observe in the same batched look while the job is queued."""
        return []

    def queued(self, looked: dict, times: dict) -> str:
        """Each look while queued (``looked``: run id -> Observation); returns a note for the progress line."""
        return ""

    def running(self, handle, events: list[dict], journal, files: dict[str, str], stages: Stages) -> None:
        """Each look while the job runs, before the next observe."""

    def ended(self, state) -> None:
        """The job ended: raise BackendError when what the scenario does never happened."""

    @property
    def owns_failure(self) -> bool:
        """True when a job that did not succeed is the scenario's result, not a failed run."""
        return False

    def collected(self, handle, state, stages: Stages) -> None:
        """After collect, whatever the job's state."""

    def succeeded(self, handle, stages: Stages) -> None:
        """After the job succeeded, before metrics and the run's cleanup (its checkpoint is still there)."""

    def faults(self) -> list[dict]:
        """The faults it injected (their records)."""
        return []

    def derive_kwargs(self) -> dict:
        """What metrics.derive takes from the scenario (Evidence's fields of the same names)."""
        return {"faults": self.faults(), "contention": None}

    def record_fields(self, record: RunRecord) -> None:
        """Its fields of the run's record (the faults, a contention's blocker), for `poc rederive` and the report."""
        record.faults = self.faults()

    def evidence(self) -> dict | None:
        """Its own raw evidence (kept under raw_key), as metrics reads it."""
        return None

    @staticmethod
    def job_ok(own: dict | None) -> bool:
        """Whether the stored run's job succeeded, as `poc rederive` reads it from the scenario's own raw
        evidence (``own``); a stored run of any other scenario has metrics only if it did."""
        return True

    @staticmethod
    def metrics(ev: Evidence) -> tuple[dict, dict]:
        """(metrics, timeline) from the evidence: the training figures of a job that succeeded."""
        if not ev.job_ok:
            return {}, {}
        return ev.derive(ev.events, ev.stamps, **ev.inputs, faults=ev.faults, contention=ev.contention)

    def stop(self) -> None:
        """Whatever happened: stop what runs beside the job (idempotent; before the job is cancelled)."""

    def handles(self) -> dict:
        """Other jobs it submitted, by name (the key of their cleanup in the record): cancelled and
        cleaned up with the run."""
        return {}

    def finish(self, raw: dict, record: RunRecord) -> None:
        """After the audit: its raw evidence into ``raw``, its summary into ``record``: the RunRecord field
        named after its block (record.drill, record.serve), or record.extra[raw_key] until there is one."""


class CleanRuns(Scenario):
    """The clean repetitions: the job, no fault, nothing beside it."""

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        return [Planned(f"{platform}-clean-{i + 1:02d}") for i in range(cfg.clean_runs(platform))]
