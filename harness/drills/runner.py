"""An upgrade drill inside one training run: the same for every platform.

The pipeline (harness/pipeline.py execute) runs a drill scenario like any training run, with four
hooks here: `open` before the submit (refuse a cluster that is not the user's, prepare the newer
releases), `start` once rank 0 reaches drills.at_step (queue a same-shape job behind the running
one, then restart or upgrade each component in order while a thread probes submissions and status
queries), `after` once the training job ended (watch the queued job start, list what was left
inconsistent), and `close` (put the cluster back as a campaign expects it). Everything seen goes to
raw["drill"] with its time-stamps, so harness/metrics/drill.py can re-derive every figure.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .. import redact
from ..backends.base import Handle
from ..context import RunContext
from ..errors import BackendError
from ..spec import JobSpec
from ..states import JobState
from .base import PlatformDrill, Step
from .platforms import platform_drill

LEFTOVER_SETTLE_S = 60.0


def queued_spec(spec: JobSpec, steps: int) -> JobSpec:
    """The job that waits behind the drilled one: the same shape, short, holding whole nodes (so
    Slurm, like Kueue's quota, cannot start it beside the running one)."""
    run_id = f"{spec.run_id}-queued"
    return replace(spec, run_id=run_id, scenario="queued", steps=steps, fault=None, exclusive=True,
                   labels=(("poc/campaign", spec.campaign), ("poc/run-id", run_id)))


@dataclass
class Prober:
    """Tries a submission and a status query every `interval` seconds on a thread of its own, each
    try with the instants it was asked and answered (the outage's bounds come from those)."""
    drill: PlatformDrill
    interval: float
    clock: Callable[[], float] = time.time
    items: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="drill-prober", daemon=True)

    def _try(self, what: str, fn: Callable[[], str | None]) -> None:
        t0 = self.clock()
        try:
            err = fn()
        except Exception as exc:  # noqa: BLE001 - a probe that raised was refused; the drill goes on
            err = f"{type(exc).__name__}: {exc}"
        self.items.append({"what": what, "t0": t0, "t1": self.clock(),
                           "error": None if err is None else str(err).splitlines()[0][:300] if str(err) else "refused"})

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._try("submit", self.drill.try_submit)
            self._try("status", self.drill.try_status)
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 120) -> None:
        self._stop.set()
        self._thread.join(timeout)


class Session:
    """One drill, from `open` to `close`; `evidence` is what raw["drill"] keeps."""

    def __init__(self, ctx: RunContext, spec: JobSpec):
        self.ctx, self.spec = ctx, spec
        self.kind = spec.scenario.split(":", 1)[1]
        self.cfg = ctx.cfg.drills
        self.drill: PlatformDrill = platform_drill(ctx.backend, self.cfg)
        self.follower: Handle | None = None
        self.started = False
        self._cancelled = False
        self.evidence: dict = {"kind": self.kind, "platform": spec.platform, "at_step": self.cfg.at_step,
                               "probe_s": self.cfg.probe_s, "steps": [], "probes": []}

    # -- before the submit ------------------------------------------------------------------------
    def open(self) -> None:
        owned, why = self.drill.owned()
        self.evidence["owned"] = why
        if not owned:
            raise BackendError(f"the {self.kind} drill restarts the cluster's scheduler, and this cluster is not "
                               f"known to be yours: {why}",
                               tip="name it in drills.confirm_cluster to confirm it is yours to restart, or "
                                   "leave drills.kinds empty")
        t0 = self.ctx.clock()
        self.evidence["prepared"] = self.drill.prepare(self.kind)
        self.evidence["prepare_s"] = round(self.ctx.clock() - t0, 3)
        self.evidence["plan"] = self.drill.plan(self.kind)
        self.evidence["versions_before"] = self.drill.versions()

    def due(self, events: list[dict]) -> bool:
        return not self.started and any(e["kind"] == "step" and e.get("rank") == 0 and e["step"] >= self.cfg.at_step
                                        for e in events)

    # -- while the job runs ---------------------------------------------------------------------
    def start(self, handle: Handle, journal: Callable[[Handle], None], files: dict[str, str]) -> None:
        self.started = True
        ctx, ev = self.ctx, self.evidence
        qspec = queued_spec(self.spec, self.ctx.cfg.workload.steps)
        rendered = ctx.backend.render(qspec)
        files.update({f"rendered/queued/{k}": v for k, v in rendered.files.items()})
        self.follower = ctx.backend.submit(qspec, rendered)
        ctx.store.mark_inflight(self.follower.to_json())
        ev["queued"] = {"run_id": qspec.run_id, "ids": self.follower.ids, "submitted": self.follower.submitted_at}
        # it must be seen waiting before the drill starts, or the drill does not test a queued job
        deadline = ctx.clock() + 30
        while True:
            obs = ctx.backend.observe([self.follower])[qspec.run_id]
            ev["queued"]["state_before"] = obs.native_state or obs.state.value
            if obs.state == JobState.PENDING or obs.times.get("allocated") is not None or ctx.clock() > deadline:
                break
            ctx.sleep(ctx.poll_s)
        ev["queued"]["waiting_before"] = obs.state == JobState.PENDING and obs.times.get("allocated") is None
        ev["snapshot_before"] = self._snapshot(handle)
        prober = Prober(self.drill, self.cfg.probe_s, ctx.clock)
        ev["window"] = {"start": ctx.clock()}
        prober.start()
        try:
            for component in ev["plan"]:
                ctx.progress(self.spec.platform, self.spec.run_id, f"drill: {self.kind} {component}",
                             ctx.clock() - handle.submitted_at)
                ev["steps"].append(self._step(component).to_json())
                journal(handle)
            # probe on after the last component until both kinds are accepted again (bounded): an outage
            # that outlasts the restarts is measured to its end, not cut off
            last = ctx.clock()
            settle, deadline = last + max(5 * self.cfg.probe_s, 3.0), last + self.cfg.component_timeout_s
            while ctx.clock() < deadline:
                back = {p["what"] for p in list(prober.items) if p["t0"] >= last and p["error"] is None}
                if ctx.clock() >= settle and back >= {"submit", "status"}:
                    break
                ctx.sleep(self.cfg.probe_s)
        finally:
            prober.stop()
            ev["window"]["end"] = ctx.clock()
            ev["probes"] = prober.items
        ev["versions_after"] = self.drill.versions()
        ev["snapshot_after"] = self._snapshot(handle)

    def _step(self, component: str) -> Step:
        t = self.ctx.clock()
        try:
            return self.drill.step(self.kind, component)
        except Exception as exc:  # noqa: BLE001 - a component that failed is a result; the rest still run
            return Step(component, "", t, None, ok=False, error=f"{type(exc).__name__}: {exc}"[:500])

    def _snapshot(self, handle: Handle) -> dict:
        try:
            return redact.scrub(self.drill.snapshot([h for h in (handle, self.follower) if h])).data
        except Exception as exc:  # noqa: BLE001 - no snapshot is a finding, not a harness crash
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}

    # -- after the job ended ----------------------------------------------------------------------
    def after(self, handle: Handle, job_state: JobState) -> None:
        """Watch the queued job until it is allocated and training (or the queue timeout), then list
        what the drill left inconsistent once both are stopped."""
        ctx, ev = self.ctx, self.evidence
        ev["job_state"] = job_state.value
        ev["job_outlasted_drill"] = self.started and bool(ev.get("steps"))
        q = ev.setdefault("queued", {})
        if self.follower is not None:
            deadline = ctx.clock() + ctx.cfg.timeouts.queue_s
            rid = self.follower.run_id
            while True:
                obs = ctx.backend.observe([self.follower])[rid]
                steps = [e for e in obs.events if e["kind"] == "step"]
                if steps and "first_step_seen" not in q:
                    q["first_step_seen"] = ctx.clock()
                if obs.times.get("allocated") is not None:
                    q.setdefault("allocated_seen", ctx.clock())
                if obs.state.terminal or "first_step_seen" in q or ctx.clock() > deadline:
                    q["state_after"] = obs.native_state or obs.state.value
                    break
                ctx.sleep(ctx.poll_s)
            self.cancel_follower()   # it started (or never will): its objects go before its records are read
            try:
                got = ctx.backend.collect(self.follower)
                q["raw"] = redact.scrub(got.raw).data
                q["first_step"] = min((e["ts_ns"] / 1e9 for e in got.events if e["kind"] == "step"), default=None)
            except Exception as exc:  # noqa: BLE001 - without its records the delay is unknown, not a crash
                q["collect_error"] = f"{type(exc).__name__}: {exc}"[:300]
        # a cancelled job takes seconds to let go of its nodes (Slurm: COMPLETING until the epilog ends):
        # what is left is what is still there once the platform had LEFTOVER_SETTLE_S to finish
        t0, first = ctx.clock(), None
        while True:
            try:
                got = redact.scrub(self.drill.leftovers([h for h in (handle, self.follower) if h])).data
            except Exception as exc:  # noqa: BLE001 - a check that failed is listed, not raised
                got = [{"what": "leftovers check failed", "error": f"{type(exc).__name__}: {exc}"[:300]}]
            first = got if first is None else first
            if not got or ctx.clock() - t0 >= LEFTOVER_SETTLE_S:
                break
            ctx.sleep(2.0)
        ev["leftovers"], ev["leftovers_first_look"] = got, first
        ev["leftovers_settle_s"] = round(ctx.clock() - t0, 3)

    def cancel_follower(self) -> None:
        if self.follower is None or self._cancelled:
            return
        try:
            self.ctx.backend.cancel(self.follower)
            self.ctx.store.clear_inflight(self.follower.run_id)
            self._cancelled = True
        except Exception as exc:  # noqa: BLE001 - the inflight record stays for --resume
            self.evidence.setdefault("queued", {})["cancel_error"] = str(exc)[:300]

    def summary(self) -> dict:
        """What the run record keeps (raw["drill"] keeps everything, probes and snapshots included)."""
        ev = self.evidence
        q = {k: v for k, v in (ev.get("queued") or {}).items() if k != "raw"}
        return {"kind": self.kind, "plan": ev.get("plan"), "versions_before": ev.get("versions_before"),
                "versions_after": ev.get("versions_after"), "window": ev.get("window"),
                "steps": [{k: s.get(k) for k in ("component", "group", "started", "back", "ok", "error",
                                                  "version_before", "version_after")} for s in ev["steps"]],
                "queued": q, "job_state": ev.get("job_state"), "leftovers": ev.get("leftovers"),
                "restore": ev.get("restore"), "prepare_s": ev.get("prepare_s"), "probes": len(ev["probes"])}

    def close(self) -> None:
        if not self.started:   # refused, or the job ended first: the drill changed nothing to put back
            return
        try:
            self.evidence["restore"] = self.drill.restore(self.kind)
        except Exception as exc:  # noqa: BLE001 - said in the record; the next run's preflight will tell
            self.evidence["restore"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
