"""The drill scenario (``drill:<kind>``): the run's job trains while the drill restarts or upgrades
the platform's components one at a time (runner.Session); a job the drill killed is the drill's
result, not a failed run.
"""
from __future__ import annotations

from dataclasses import replace

from ..config import Config
from ..context import Evidence, Scenario, Stages
from ..errors import BackendError
from ..metrics.drill import from_evidence
from ..spec import JobSpec, Planned
from ..states import JobState
from ..store import RunRecord
from .runner import Session


class DrillScenario(Scenario):
    kind = "drill"
    raw_key = "drill"

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        return [Planned(f"{platform}-drill-{kind}", None, f"drill:{kind}") for kind in cfg.drills_for(platform)]

    @staticmethod
    def shaped(cfg: Config, spec: JobSpec) -> JobSpec:
        """A drilled job runs long enough to outlast the drill, on whole nodes so the job queued behind it waits."""
        return replace(spec, steps=cfg.drills.steps_for(spec.scenario.split(":", 1)[1]), exclusive=True)

    def __init__(self, ctx, spec):
        super().__init__(ctx, spec)
        self.session: Session | None = None

    def prepare(self, stages: Stages, files: dict[str, str]) -> None:
        with stages.stage("drill:prepare"):   # refuses a cluster not known to be the user's
            self.session = Session(self.ctx, self.spec)
            self.session.open()

    def running(self, handle, events, journal, files, stages: Stages) -> None:
        if self.session.due(events):
            with stages.stage(f"drill:{self.session.kind}"):
                self.session.start(handle, journal, files)

    def ended(self, state) -> None:
        if not self.session.started and state == JobState.SUCCEEDED:
            raise BackendError(f"the drill did not start: the job ended before rank 0 reached step "
                               f"{self.ctx.cfg.drills.at_step}", tip="lower drills.at_step or raise drills.steps")

    @property
    def owns_failure(self) -> bool:
        # a drill that killed the job is its result; a job that failed before the drill began is not
        return self.session is not None and self.session.started

    def collected(self, handle, state, stages: Stages) -> None:
        with stages.stage("drill:after"):
            self.session.after(handle, state)

    def evidence(self) -> dict | None:
        return self.session.evidence if self.session is not None else None

    @staticmethod
    def job_ok(own: dict | None) -> bool:
        return own is None or own.get("job_state") == "succeeded"

    @staticmethod
    def metrics(ev: Evidence) -> tuple[dict, dict]:
        m, timeline = Scenario.metrics(ev)
        if ev.raw is not None:
            m.update(from_evidence(ev.stamps_fn, ev.platform, ev.events, ev.raw, ev.inputs["world"]))
        return m, timeline

    def stop(self) -> None:
        if self.session is not None:
            self.session.cancel_follower()

    def finish(self, raw: dict, record: RunRecord) -> None:
        if self.session is not None:   # after the audit: putting an upgraded cluster back may start it afresh
            self.session.close()
            raw["drill"] = self.session.evidence
            record.drill = self.session.summary()
