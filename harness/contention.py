"""The contention scenario: a same-shape blocking job holds what the measured job needs until it
finishes by itself (the way resources free up on a busy cluster), so the measured job's queue time
and the handover from one job to the next are measured the same way on every scheduler.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .backends.base import Handle
from .config import Config
from .context import RunContext, Scenario, Stages
from .errors import BackendError, RunTimeout
from .spec import JobSpec, Planned, blocker_spec
from .states import JobState
from .store import RunRecord


@dataclass
class Blocker:
    """The contention scenario's blocking job: the same job, started first, holding what the measured
    job needs until it finishes by itself (the way resources free up on a busy cluster)."""
    handle: Handle
    world: int
    allocated_at: float | None = None
    done_at: float | None = None       # workload clock: every rank of the blocker has finished training
    state: JobState = JobState.PENDING
    dones: dict = field(default_factory=dict)

    @property
    def watching(self) -> bool:
        return not self.state.terminal

    def see(self, obs) -> None:
        self.state = obs.state
        self.see_events(obs.events)

    def see_events(self, events: list[dict]) -> None:
        for e in events:
            if e["kind"] == "done":
                self.dones[e["rank"]] = max(self.dones.get(e["rank"], 0.0), e["ts_ns"] / 1e9)
        if len(self.dones) >= self.world:
            self.done_at = max(self.dones.values())

    def to_json(self) -> dict:
        return {"blocker_run_id": self.handle.run_id, "blocker_ids": self.handle.ids,
                "blocker_allocated": self.allocated_at, "released": self.done_at, "blocker_state": self.state.value}


def start_blocker(ctx: RunContext, spec: JobSpec, files: dict[str, str]) -> Blocker:
    """Submit the blocker and wait until it holds its resources."""
    steps = (ctx.cfg.contention.blocker_steps if ctx.cfg.contention else None) or spec.steps
    bspec = blocker_spec(spec, steps)
    rendered = ctx.backend.render(bspec)
    files.update({f"rendered/blocker/{k}": v for k, v in rendered.files.items()})
    handle = ctx.backend.submit(bspec, rendered)
    ctx.store.mark_inflight(handle.to_json())
    try:
        return _wait_blocker(ctx, spec, Blocker(handle, bspec.world_size))
    except BaseException:   # Ctrl-C included: nothing the harness submitted is left running
        ctx.backend.cancel(handle)
        ctx.store.clear_inflight(handle.run_id)
        raise


def _wait_blocker(ctx: RunContext, spec: JobSpec, blocker: Blocker) -> Blocker:
    handle = blocker.handle
    deadline = handle.submitted_at + ctx.cfg.timeouts.queue_s
    while True:
        obs = ctx.backend.observe([handle])[handle.run_id]
        blocker.see(obs)
        ctx.progress(spec.platform, spec.run_id, f"blocker queued ({obs.native_state or obs.state.value})",
                     ctx.clock() - handle.submitted_at)
        if obs.times.get("allocated") is not None and not obs.state.terminal:
            blocker.allocated_at = obs.times["allocated"]
            return blocker
        if obs.state.terminal:
            raise BackendError(f"the blocking job ended {obs.state.value} before the measured job was submitted"
                               + (f": {obs.reason}" if obs.reason else ""),
                               tip="read the blocker's logs under the results dir; a longer blocker "
                                   "(contention.blocker_steps) gives the harness time to submit behind it")
        if ctx.clock() > deadline:
            raise RunTimeout(f"the blocking job was not allocated within {ctx.cfg.timeouts.queue_s:g} s",
                             tip="contention needs a queue that is free when the scenario starts")
        ctx.sleep(ctx.poll_s)


def check_contention(blocker: Blocker, measured_times: dict) -> None:
    """The measured job may get its resources only once the blocker is done with them."""
    if blocker.state.terminal and blocker.state != JobState.SUCCEEDED:
        raise BackendError(f"the blocking job ended {blocker.state.value} instead of finishing its steps",
                           tip="read the blocker's logs under the results dir")
    if measured_times.get("allocated") is not None and blocker.done_at is None:
        raise BackendError("the measured job got its resources while the blocking job was still training: "
                           "the cluster has room for two jobs, so this run measured no contention",
                           tip="contention needs a queue that fits one job (Slurm: fewer than 2 x resources.nodes "
                               "free nodes; Kubernetes: a ClusterQueue quota that fits one job)")


class ContentionScenario(Scenario):
    """The measured job is submitted behind the blocker; each queued look checks the blocker is still
    what holds the job back, and the blocker is cancelled and cleaned up with the run."""
    kind = "contention"

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        return [Planned(f"{platform}-contention-{i + 1:02d}", None, "contention")
                for i in range(cfg.contention_runs(platform))]

    @staticmethod
    def also_submits(cfg: Config, spec: JobSpec) -> list[JobSpec]:
        return [blocker_spec(spec, cfg.contention.blocker_steps)] if cfg.contention else []

    def __init__(self, ctx: RunContext, spec: JobSpec):
        super().__init__(ctx, spec)
        self.blocker: Blocker | None = None

    def prepare(self, stages: Stages, files: dict[str, str]) -> None:
        with stages.stage("blocker"):
            self.blocker = start_blocker(self.ctx, self.spec, files)

    def watched(self) -> list[Handle]:
        return [self.blocker.handle] if self.blocker is not None and self.blocker.watching else []

    def queued(self, looked: dict, times: dict) -> str:
        b = self.blocker
        watching = b.handle.run_id in looked
        if watching:
            b.see(looked[b.handle.run_id])
            if b.state == JobState.SUCCEEDED and b.done_at is None:  # its last lines
                b.see_events(self.ctx.backend.collect(b.handle).events)
        check_contention(b, times)
        return " behind the blocker" if watching else ""

    def _held(self) -> dict | None:
        return self.blocker.to_json() if self.blocker is not None else None

    def derive_kwargs(self) -> dict:
        return {**super().derive_kwargs(), "contention": self._held()}

    def record_fields(self, record: RunRecord) -> None:
        super().record_fields(record)
        record.contention = self._held()

    def handles(self) -> dict[str, Handle]:
        return {"blocker": self.blocker.handle} if self.blocker is not None else {}
