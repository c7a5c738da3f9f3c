"""The serving scenario (``serve``): after its training job succeeded, the run serves that job's
checkpoint and measures the service (session.Session), before the run's cleanup removes it.
"""
from __future__ import annotations

from dataclasses import replace

from .. import redact
from ..config import Config
from ..context import Evidence, Scenario, Stages
from ..spec import JobSpec, Planned
from ..store import RunRecord
from .metrics import from_evidence
from .session import Session


class ServeScenario(Scenario):
    kind = "serve"
    raw_key = "serve"

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        return [Planned(f"{platform}-serve", None, "serve")] if cfg.serve_for(platform) else []

    @staticmethod
    def shaped(cfg: Config, spec: JobSpec) -> JobSpec:
        """The training run the service serves: its checkpoint is what the server loads."""
        return replace(spec, steps=cfg.serve.train_steps)

    def __init__(self, ctx, spec):
        super().__init__(ctx, spec)
        self.session: Session | None = None

    def prepare(self, stages: Stages, files: dict[str, str]) -> None:
        with stages.stage("serve:open"):      # refuses a platform with no way to run a service
            self.session = Session(self.ctx, self.spec)
            self.session.open()

    def succeeded(self, handle, stages: Stages) -> None:
        with stages.stage("serve"):
            self.session.run(handle)
        with stages.stage("serve:teardown"):
            self.session.close()

    def evidence(self) -> dict | None:
        return self.session.evidence if self.session is not None else None

    @staticmethod
    def metrics(ev: Evidence) -> tuple[dict, dict]:
        m, timeline = Scenario.metrics(ev)
        if ev.raw:
            m.update(from_evidence(ev.raw, ev.inputs["price"], ev.inputs["gpus_per_node"]))
        return m, timeline

    def stop(self) -> None:
        if self.session is not None:
            self.session.close()       # idempotent; a failed or interrupted serving run leaves nothing behind

    def finish(self, raw: dict, record: RunRecord) -> None:
        if self.session is not None:
            raw["serve"] = redact.scrub(self.session.evidence).data
            record.serve = self.session.summary()
