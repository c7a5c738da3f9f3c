"""The fault scenario: the planned fault is injected into its rank once that rank reaches the fault's
step in the job's first attempt; what the fault changed is journalled before anything else can fail.
"""
from __future__ import annotations

from . import events as evmod
from .backends.base import FaultRecord, Handle
from .config import Config
from .context import RunContext, Scenario, Stages
from .errors import BackendError
from .spec import FaultPlan, Planned
from .states import JobState


def fault_target(events: list[dict], fault: FaultPlan, first_attempt: tuple | None) -> dict | None:
    for e in events:
        if (e["kind"] == "step" and e["rank"] == fault.rank and e["step"] >= fault.at_step
                and (first_attempt is None or evmod.attempt_of(e) == first_attempt)):
            return e
    return None


class FaultScenario(Scenario):
    """One planned fault (spec.fault) into a running job; registered for every fault kind."""
    kind = "fault"

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        return [Planned(f"{platform}-{f.kind.replace('_', '-')}-{i + 1:02d}", FaultPlan.of(f), f.kind)
                for i, f in enumerate(cfg.faults_for(platform))]

    def __init__(self, ctx: RunContext, spec):
        super().__init__(ctx, spec)
        self.pending: FaultPlan | None = spec.fault
        self.first_attempt: tuple | None = None
        self.records: list[FaultRecord] = []

    def prepare(self, stages: Stages, files: dict[str, str]) -> None:
        backend, kind = self.ctx.backend, self.spec.fault.kind
        if kind not in backend.supported_faults():
            with stages.stage("plan"):   # the plan reads capabilities.py: a backend that disagrees says so
                raise BackendError(f"the {self.spec.platform} backend cannot inject {kind} "
                                   f"(it injects: {', '.join(sorted(backend.supported_faults())) or 'nothing'})",
                                   tip="see harness/capabilities.py for what each platform injects")

    def running(self, handle: Handle, events: list[dict], journal, files: dict[str, str], stages: Stages) -> None:
        if events and self.first_attempt is None:
            self.first_attempt = min(evmod.attempt_of(e) for e in events)
        if self.pending is None:
            return
        target = fault_target(events, self.pending, self.first_attempt)
        if target is None:
            return
        with stages.stage(f"fault:{self.pending.kind}"):
            try:
                self.records.append(self.ctx.backend.inject(handle, self.pending.kind, target, journal=journal))
            finally:  # what the fault changed is on disk before anything else can fail
                journal(handle)
        self.pending = None

    def ended(self, state) -> None:
        p = self.pending
        if p is not None and state == JobState.SUCCEEDED:
            raise BackendError(f"fault {p.kind} was not injected: the job ended before rank {p.rank} "
                               f"reached step {p.at_step}", tip="choose an earlier faults[].at_step")

    def faults(self) -> list[dict]:
        return [f.to_json() for f in self.records]
