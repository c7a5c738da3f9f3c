"""One run's stages in order, each time-stamped; and a campaign of runs.

render -> (the scenario prepares) -> submit -> queue (until allocated) -> run (the scenario acts
on each look) -> collect -> (after a success, the scenario again) -> metrics -> store. A failed
stage is recorded with its name and error; whatever the outcome, what was submitted is cancelled.
Which scenario a run has comes from harness/scenarios.py: this module names none.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from . import events as evmod
from . import evidence, footprint, hostload, provenance, redact, run_record
from . import metrics as metmod
from .afterrun import audit_run, calls_by_phase, cleanup_run
from .backends.base import Backend, Collected, Handle, Observation
from .backends.identity import refuse_other_cluster
from .config import Config
from .context import Evidence, Progress, RunContext, Scenario, StageFailed, Stages, _noop
from .errors import BackendError, PocError, RunTimeout
from .order import arrange
from .scenarios import job_spec, kind_of, plan, runner, scenario_class
from .spec import JobSpec, resolve_caps
from .states import JobState
from .store import RunRecord, Store


def derive_inputs(cfg: Config, spec: JobSpec) -> dict:
    """What metrics.derive needs beyond events and stamps; stored with the record for `poc rederive`."""
    return {"world": spec.world_size, "nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node,
            "steps": spec.steps, "price": cfg.pricing[spec.platform].model_dump()}


def _stamp(new_events: list[dict], now: float) -> list[dict]:
    """Mark when the harness saw each event: observed_at - ts is the observation latency."""
    for e in new_events:
        e.setdefault("observed_at", now)
    return new_events


@dataclass
class _Run:
    """One run's state as its stages fill it in."""
    ctx: RunContext
    spec: JobSpec
    scenario: Scenario
    stages: Stages
    record: RunRecord
    files: dict[str, str] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    times: dict = field(default_factory=dict)
    handle: Handle | None = None
    intent: Handle | None = None
    collected: Collected | None = None
    state: JobState = JobState.PENDING
    obs: Observation | None = None
    stamps: dict | None = None
    interrupted: bool = False
    refusal_cancelled: bool = False
    cancel_calls: dict = field(default_factory=dict)
    host: hostload.Sampler | None = None   # the host's load, looked at from before render until the record

    def journal(self, h: Handle) -> None:
        self.ctx.store.mark_inflight(h.to_json())

    def look(self, handles: list[Handle]) -> dict:
        """One batched observe; the run's own observation is taken in."""
        looked = self.ctx.backend.observe(handles)
        self.obs = looked[self.spec.run_id]
        self.events.extend(_stamp(self.obs.events, self.ctx.clock()))
        self.times.update(self.obs.times)
        self.state = self.obs.state
        return looked

    def take_collected(self) -> None:
        self.collected = self.ctx.backend.collect(self.handle)
        # first copy wins: it carries observed_at
        self.events = evmod.dedupe(self.events + list(self.collected.events or []))
        self.times.update(self.collected.times)


HostSampler = Callable[[], hostload.Sampler]


def execute(ctx: RunContext, spec: JobSpec, order: dict | None = None,
            host_sampler: HostSampler = hostload.Sampler) -> dict:
    """Run one job end to end and return its record as stored (already appended to the store). The stages
    are the same for every run; the scenario (harness/scenarios.py) adds what its run does at each.
    host_sampler: what looks at the host's load around the run (harness/hostload.py)."""
    host = host_sampler().start()
    stages = Stages(clock=ctx.clock, calls=ctx.backend.call_counts)
    usage0 = provenance.own_usage()
    record = run_record.start(ctx.cfg, spec.platform, spec.run_id, spec.scenario, ctx.clock(), stages.items)
    if order is not None:
        record.order = order
    run = _Run(ctx, spec, scenario_class(spec.scenario)(ctx, spec), stages, record, host=host)
    try:
        _stages(run)
        record.status = "ok"
    except StageFailed as sf:
        run.interrupted = run_record.fail(record, sf.stage, sf.error)
    except KeyboardInterrupt as exc:
        run.interrupted = run_record.fail(record, "between stages", exc)
    finally:
        _cancel(run)
    try:
        stored = _write(run, usage0)
    finally:
        host.close()
    if run.interrupted:
        raise KeyboardInterrupt
    return stored


def _stages(run: _Run) -> None:
    ctx, spec, stages, scen = run.ctx, run.spec, run.stages, run.scenario
    with stages.stage("render"):
        rendered = ctx.backend.render(spec)
        run.files.update({f"rendered/{k}": v for k, v in rendered.files.items()})
        run.record.ux = {"written": footprint.written(rendered.files)}
    scen.prepare(stages, run.files)
    with stages.stage("submit"):
        run.intent = ctx.backend.intent(spec, rendered)
        if run.intent is not None:   # on disk before the job exists: a crash in the submit call finds it
            ctx.store.mark_inflight(run.intent.to_json())
        run.handle = ctx.backend.submit(spec, rendered)
        ctx.store.mark_inflight(run.handle.to_json())
        run.record.job_ids = run.handle.ids
    with stages.stage("queue"):
        _queue(run)
    with stages.stage("run"):
        _watch(run)
    with stages.stage("collect"):
        run.take_collected()
    scen.collected(run.handle, run.state, stages)
    if run.state != JobState.SUCCEEDED and not scen.owns_failure:
        _job_failed(run)
    if run.state == JobState.SUCCEEDED:   # before the run's cleanup: its checkpoint is still there
        scen.succeeded(run.handle, stages)
    with stages.stage("metrics"):
        # every time-stamp from the raw scheduler records, by the same pure code `poc rederive` runs
        # (from the redacted copy: what is stored is exactly what the stamps were derived from)
        run.stamps = ctx.stamps(spec.platform, redact.scrub(run.collected.raw).data)
        run.record.derive_inputs = inputs = derive_inputs(ctx.cfg, spec)
        m, timeline = scen.metrics(Evidence(
            spec.platform, run.events, run.stamps, ctx.stamps, inputs, metmod.derive, **scen.derive_kwargs(),
            job_ok=run.state == JobState.SUCCEEDED, raw=scen.evidence()))
        run.record.metrics = m
        run.record.timeline = timeline


def _queue(run: _Run) -> None:
    """Until the job holds its resources (or ended), within timeouts.queue_s."""
    ctx, spec = run.ctx, run.spec
    t_sub = run.handle.submitted_at
    deadline = t_sub + ctx.cfg.timeouts.queue_s
    while True:
        looked = run.look([run.handle, *run.scenario.watched()])   # one batched look
        note = run.scenario.queued(looked, run.times)
        obs = run.obs
        ctx.progress(spec.platform, spec.run_id, f"queued ({obs.native_state or run.state.value}){note}",
                     ctx.clock() - t_sub)
        if run.times.get("allocated") is not None or run.state.terminal:
            return
        if ctx.clock() > deadline:
            raise RunTimeout(f"not allocated within {ctx.cfg.timeouts.queue_s:g} s "
                             f"(state {obs.native_state or run.state.value}"
                             + (f": {obs.reason}" if obs.reason else "") + ")",
                             tip="raise timeouts.queue_s, or check the queue/partition has room for the job")
        ctx.sleep(ctx.poll_s)


def _watch(run: _Run) -> None:
    """Until the job ended, within timeouts.run_s; the scenario acts on each look."""
    ctx, spec = run.ctx, run.spec
    t_sub = run.handle.submitted_at
    deadline = t_sub + ctx.cfg.timeouts.run_s
    while not run.state.terminal:
        run.scenario.running(run.handle, run.events, run.journal, run.files, run.stages)
        if ctx.clock() > deadline:
            raise RunTimeout(f"run did not finish within {ctx.cfg.timeouts.run_s:g} s (state {run.state.value})",
                             tip="raise timeouts.run_s, or look at the run's logs in the results dir")
        ctx.sleep(ctx.poll_s)
        obs = run.look([run.handle])[spec.run_id]
        _stop_a_refused_job(run)
        last = max((e.get("step", 0) for e in obs.events if e["kind"] == "step"), default=None)
        ctx.progress(spec.platform, spec.run_id, f"{run.state.value}" + (f" step {last}" if last else ""),
                     ctx.clock() - t_sub)
    # a job that succeeded before the scenario acted is the scenario's problem; one that failed (or
    # never started) reports its own reason after collect, whatever its scenario
    run.scenario.ended(run.state)


def _stop_a_refused_job(run: _Run) -> None:
    """The workload refused to run (no GPU where GPUs were asked for, a node the calibration refused):
    its job is cancelled at once, before the scheduler restarts it onto the same nodes again and again."""
    if run.refusal_cancelled or run.state.terminal:
        return
    if any(e["kind"] == "workload_error" for e in run.events):
        run.ctx.backend.cancel(run.handle)
        run.refusal_cancelled = True


def _job_failed(run: _Run) -> None:
    """The job did not succeed and that is not the scenario's result: say why, in the words closest to it."""
    events, collected, obs = run.events, run.collected, run.obs
    refused = next((e for e in events if e["kind"] == "workload_error"), None)
    if refused is not None:
        # the workload stopped before training on purpose (no GPU where GPUs were asked for ...):
        # its own sentence says what is wrong, better than a log tail
        raise StageFailed("run", BackendError(
            f"job ended {run.state.value}: the workload refused to run: {refused.get('message')}",
            tip=refused.get("tip") or "check resources.gpus_per_node and the image's torch build (CUDA) "
                                      "against the nodes"))
    tail = ""
    if collected and collected.logs:
        name, text = next(reversed(collected.logs.items()))
        tail = f"\n--- last lines of {name} ---\n" + "\n".join(text.splitlines()[-15:])
    # the scheduler's own reason first (Kueue: "> maximum capacity", the kube-scheduler's
    # "Insufficient nvidia.com/gpu"): for a job that never ran it is the whole story
    why = f": {obs.reason}" if obs is not None and obs.reason else ""
    raise StageFailed("run", BackendError(f"job ended {run.state.value}{why}{tail}",
                                          tip="read the run's logs under the results dir"
                                          + ("" if events else "; the job never started: its request "
                                             "(resources, queue, image) is what to check")))


def _cancel(run: _Run) -> None:
    """Whatever happened: what runs beside the job stops, and everything submitted is cancelled."""
    backend = run.ctx.backend
    calls_before_cancel = backend.call_counts()
    run.scenario.stop()
    # a submit that raised cancels its intent: whatever the call made before it failed is found and removed
    run_record.cancel(backend, run.ctx.store, [run.handle or run.intent, *run.scenario.handles().values()],
                      run.record)
    run.cancel_calls = footprint.diff(calls_before_cancel, backend.call_counts())


def _after(run: _Run) -> dict:
    """After the cancel: collect (if the stages did not), clean up, audit; returns the redacted raw evidence."""
    ctx, record, handle = run.ctx, run.record, run.handle
    if run.collected is None and handle is not None:
        try:
            run.take_collected()
        except Exception as exc:  # noqa: BLE001 - the record is written whatever collect raised
            record.collect_error = str(exc)[:500]
    if handle is not None:
        try:   # after collect and cancel: the run's files on the cluster are removed or kept (keep_run_files)
            record.cleanup = cleanup_run(ctx.backend, handle, record, ctx.cfg.keep_run_files)
            for name, other in run.scenario.handles().items():
                record.cleanup[name] = cleanup_run(ctx.backend, other, record, ctx.cfg.keep_run_files)
        except KeyboardInterrupt:
            record.cleanup, run.interrupted = {"warning": "interrupted during cleanup: files kept"}, True
    raw = redact.scrub(run.collected.raw).data if run.collected else {}
    if handle is not None:
        audit_run(ctx.backend, handle, raw, record)
    return raw


def _write(run: _Run, usage0: dict) -> dict:
    ctx, spec, record = run.ctx, run.spec, run.record
    raw = _after(run)
    collected = run.collected
    run.scenario.finish(raw, record)
    if record.ux is None:   # the render stage did not get as far as the files a user writes
        record.ux = {}
    record.ux["calls"] = calls_by_phase(run.stages.items, run.cancel_calls)
    record.finished_at = ctx.clock()
    usage1 = provenance.own_usage()
    # The harness's own footprint while it watched this run (benchmarks/observation_latency.py prints it).
    record.harness_usage = {"cpu_s": round(usage1["cpu_s"] - usage0["cpu_s"], 3), "max_rss_mb": usage1["max_rss_mb"]}
    if run.host is not None:
        record.host_load = run.host.stop()
    run.scenario.record_fields(record)
    stamps = run.stamps
    if stamps is None and raw:
        try:   # a failed run's evidence is kept and readable too
            stamps = ctx.stamps(spec.platform, raw)
        except Exception as exc:  # noqa: BLE001 - the record is written whatever the evidence reader raised
            record.stamps_error = f"{type(exc).__name__}: {exc}"[:500]
    record.scheduler = {"times": run.times, "attempts": collected.attempts if collected else [],
                      "info": collected.info if collected else {},
                      "stamps": evidence.to_json(stamps) if stamps is not None else None}
    record.environment = provenance.environment(ctx.platform_info, run.events, raw)
    run.files["events.jsonl"] = evmod.dumps(run.events)
    if collected:
        run.files.update({f"logs/{k}": v for k, v in collected.logs.items()})
    return run_record.write(ctx.store, record, raw, run.files)


BackendFactory = Callable[[str], Backend]


def _preflight_failed(cfg: Config, plat: str, run_id: str, exc: PocError, now: float) -> RunRecord:
    rec = run_record.start(cfg, plat, run_id, "preflight", now)
    rec.finished_at = now
    run_record.fail(rec, "preflight", exc)
    return rec


def _open_platform(plat: str, plan: list, store: Store, make_backend: BackendFactory) -> tuple[Backend, dict]:
    """Cancel what an interrupted or crashed campaign left on this platform, then preflight it.
    A cancel that fails keeps the in-flight record (a node it could not bring back is not
    forgotten) and stops the platform with the error as a preflight failure."""
    backend = make_backend(plat)
    try:
        for h in [h for h in store.inflight() if h["platform"] == plat]:
            refuse_other_cluster(h, backend.cluster_identity())   # its jobs and nodes are another cluster's
            backend.cancel(Handle.from_json(h))
            store.clear_inflight(h["run_id"])
        return backend, (backend.preflight() if plan else {})
    except BaseException:
        backend.close()
        raise


def campaign(cfg: Config, platforms: list[str], store: Store, make_backend: BackendFactory, *, resume: bool,
             progress: Progress = _noop, on_record: Callable[[dict], None] = _noop, poll_s: float | None = None,
             clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
             stamps_fn: Callable[[str, dict], dict] = evidence.stamps,
             make_own_backend: Callable[[str, Config], Backend] | None = None,
             host_sampler: HostSampler = hostload.Sampler) -> list[dict]:
    """Run every planned run not yet done, in the configured order (harness/order.py); return the
    records written now. Every platform's backend stays open for the whole campaign, since runs
    of different platforms alternate. A scenario that makes its own record (scenarios.runner) gets
    a backend of its own from make_own_backend(platform, the config it changed)."""
    existing = store.open(cfg.config_hash(), cfg.redacted(), resume)
    done = {r["run_id"] for r in existing if r.get("status") == "ok"}
    written: list[dict] = []

    def emit(rec: dict) -> None:
        written.append(rec)
        on_record(rec)

    plans = {plat: [p for p in plan(cfg, plat) if p.run_id not in done] for plat in platforms}
    contexts: dict[str, RunContext] = {}
    try:
        for plat in platforms:
            leftovers = any(h["platform"] == plat for h in store.inflight())
            if not plans[plat] and not leftovers:
                continue
            try:
                backend, info = _open_platform(plat, plans[plat], store, make_backend)
            except PocError as exc:
                rec = _preflight_failed(cfg, plat, plans[plat][0].run_id if plans[plat] else f"{plat}-cleanup",
                                        exc, clock())
                store.append(rec)
                emit(rec.to_json())
                plans[plat] = []
                continue
            if not plans[plat]:
                backend.close()
                continue
            contexts[plat] = RunContext(backend, store, cfg, info, progress,
                                        poll_s or getattr(backend, "poll_s", 0.5), clock, sleep, stamps_fn)
        caps, why = resolve_caps(cfg.resources.caps, {p: c.platform_info for p, c in contexts.items()})
        for c in contexts.values():   # every run's environment says which, and why (the conditions ledger)
            c.platform_info["resources_caps"] = {"caps": caps, "why": why}
        for slot in arrange({p: v for p, v in plans.items() if p in contexts}, cfg.order, cfg.seed):
            ctx = contexts[slot.platform]
            run_id, _, scenario = slot.planned
            own = runner(scenario)
            if own is not None:   # a scenario that makes its own record (it trains nothing)
                if make_own_backend is None:
                    from .backends.factory import make_backend as make_own_backend
                emit(own(cfg, slot.platform, run_id, kind_of(scenario)[1], store, make_own_backend,
                         clock=clock, sleep=sleep, progress=progress, host_sampler=host_sampler))
                continue
            spec = replace(job_spec(cfg, slot.platform, slot.planned), owner=store.owner_id,
                           owner_key=store.owner_key, caps=caps)
            emit(execute(ctx, spec, order=slot.to_json(cfg.seed, cfg.order), host_sampler=host_sampler))
    finally:
        try:
            for ctx in contexts.values():
                ctx.backend.close()
        finally:
            store.close()
    return written
