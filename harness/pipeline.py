"""One run's stages in order, each time-stamped; and a campaign of runs.

render -> submit -> queue (until allocated) -> run (inject the fault on the way)
-> collect -> metrics -> store. A failed stage is recorded with its name and
error; whatever the outcome, what was submitted is cancelled.
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import replace

from . import events as evmod
from . import evidence, footprint, provenance, redact
from . import metrics as metmod
from .afterrun import audit_run, calls_by_phase, cleanup_run
from .backends.base import Backend, FaultRecord, Handle
from .backends.identity import refuse_other_cluster
from .config import Config
from .contention import Blocker, check_contention, start_blocker
from .context import Progress, RunContext, StageFailed, Stages, _noop
from .drills.runner import Session as DrillSession
from .errors import BackendError, PocError, RunTimeout
from .metrics.drill import from_evidence as drill_metrics
from .order import arrange
from .serve.metrics import from_evidence as serve_metrics
from .serve.session import Session as ServeSession
from .spec import FaultPlan, JobSpec, build, run_plan
from .states import JobState
from .store import Store


def derive_inputs(cfg: Config, spec: JobSpec) -> dict:
    """What metrics.derive needs beyond events and stamps; stored with the record for `poc rederive`."""
    return {"world": spec.world_size, "nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node,
            "steps": spec.steps, "price": cfg.pricing[spec.platform].model_dump()}


def _stamp(new_events: list[dict], now: float) -> list[dict]:
    """Mark when the harness saw each event: observed_at - ts is the observation latency."""
    for e in new_events:
        e.setdefault("observed_at", now)
    return new_events


def fault_target(events: list[dict], fault: FaultPlan, first_attempt: tuple | None) -> dict | None:
    for e in events:
        if (e["kind"] == "step" and e["rank"] == fault.rank and e["step"] >= fault.at_step
                and (first_attempt is None or evmod.attempt_of(e) == first_attempt)):
            return e
    return None


def execute(ctx: RunContext, spec: JobSpec, order: dict | None = None) -> dict:
    """Run one job end to end and return its record (already appended to the store)."""
    backend, store = ctx.backend, ctx.store
    stages = Stages(clock=ctx.clock, calls=backend.call_counts)
    usage0 = provenance.own_usage()
    record: dict = {"run_id": spec.run_id, "campaign": spec.campaign, "platform": spec.platform,
                    "scenario": spec.scenario, "config_hash": ctx.cfg.config_hash(), "started_at": ctx.clock(),
                    "status": "failed", "stages": stages.items}
    if order is not None:
        record["order"] = order
    handle: Handle | None = None
    intent: Handle | None = None
    events: list[dict] = []
    times: dict = {}
    faults: list[FaultRecord] = []
    files: dict[str, str] = {}
    collected = None
    interrupted = False
    blocker: Blocker | None = None
    stamps: dict | None = None
    drill: DrillSession | None = None
    serve: ServeSession | None = None
    try:
        if spec.fault is not None and spec.fault.kind not in backend.supported_faults():
            with stages.stage("plan"):   # the plan reads capabilities.py: a backend that disagrees says so
                raise BackendError(f"the {spec.platform} backend cannot inject {spec.fault.kind} "
                                   f"(it injects: {', '.join(sorted(backend.supported_faults())) or 'nothing'})",
                                   tip="see harness/capabilities.py for what each platform injects")
        with stages.stage("render"):
            rendered = backend.render(spec)
            files.update({f"rendered/{k}": v for k, v in rendered.files.items()})
            record["ux"] = {"written": footprint.written(rendered.files)}
        if spec.scenario == "contention":
            with stages.stage("blocker"):
                blocker = start_blocker(ctx, spec, files)
        if spec.scenario == "serve":
            with stages.stage("serve:open"):      # refuses a platform with no way to run a service
                serve = ServeSession(ctx, spec)
                serve.open()
        if spec.scenario.startswith("drill:"):
            with stages.stage("drill:prepare"):   # refuses a cluster not known to be the user's
                drill = DrillSession(ctx, spec)
                drill.open()
        with stages.stage("submit"):
            intent = backend.intent(spec, rendered)
            if intent is not None:   # on disk before the job exists: a crash in the submit call finds it
                store.mark_inflight(intent.to_json())
            handle = backend.submit(spec, rendered)
            store.mark_inflight(handle.to_json())
            record["job_ids"] = handle.ids
        def journal(h: Handle) -> None:
            store.mark_inflight(h.to_json())

        t_sub = handle.submitted_at
        queue_deadline, run_deadline = t_sub + ctx.cfg.timeouts.queue_s, t_sub + ctx.cfg.timeouts.run_s
        state = JobState.PENDING
        with stages.stage("queue"):
            while True:
                watching = blocker is not None and blocker.watching
                looked = backend.observe([handle, blocker.handle] if watching else [handle])  # one batched look
                obs = looked[spec.run_id]
                events.extend(_stamp(obs.events, ctx.clock()))
                times.update(obs.times)
                state = obs.state
                if watching:
                    blocker.see(looked[blocker.handle.run_id])
                    if blocker.state == JobState.SUCCEEDED and blocker.done_at is None:  # its last lines
                        blocker.see_events(backend.collect(blocker.handle).events)
                if blocker is not None:
                    check_contention(blocker, times)
                ctx.progress(spec.platform, spec.run_id, f"queued ({obs.native_state or state.value})"
                             + (" behind the blocker" if watching else ""), ctx.clock() - t_sub)
                if times.get("allocated") is not None or state.terminal:
                    break
                if ctx.clock() > queue_deadline:
                    raise RunTimeout(f"not allocated within {ctx.cfg.timeouts.queue_s:g} s "
                                     f"(state {obs.native_state or state.value}"
                                     + (f": {obs.reason}" if obs.reason else "") + ")",
                                     tip="raise timeouts.queue_s, or check the queue/partition has room for the job")
                ctx.sleep(ctx.poll_s)
        with stages.stage("run"):
            pending = spec.fault
            first_attempt = None
            while not state.terminal:
                if events and first_attempt is None:
                    first_attempt = min(evmod.attempt_of(e) for e in events)
                if pending is not None:
                    target = fault_target(events, pending, first_attempt)
                    if target is not None:
                        with stages.stage(f"fault:{pending.kind}"):
                            try:
                                faults.append(backend.inject(handle, pending.kind, target, journal=journal))
                            finally:  # what the fault changed is on disk before anything else can fail
                                journal(handle)
                        pending = None
                if drill is not None and drill.due(events):
                    with stages.stage(f"drill:{drill.kind}"):
                        drill.start(handle, journal, files)
                if ctx.clock() > run_deadline:
                    raise RunTimeout(f"run did not finish within {ctx.cfg.timeouts.run_s:g} s (state {state.value})",
                                     tip="raise timeouts.run_s, or look at the run's logs in the results dir")
                ctx.sleep(ctx.poll_s)
                obs = backend.observe([handle])[spec.run_id]
                events.extend(_stamp(obs.events, ctx.clock()))
                times.update(obs.times)
                state = obs.state
                last = max((e.get("step", 0) for e in obs.events if e["kind"] == "step"), default=None)
                ctx.progress(spec.platform, spec.run_id,
                             f"{state.value}" + (f" step {last}" if last else ""), ctx.clock() - t_sub)
            # a job that succeeded before the fault's or the drill's step is the scenario's problem;
            # one that failed (or never started) reports its own reason below, whatever its scenario
            if drill is not None and not drill.started and state == JobState.SUCCEEDED:
                raise BackendError(f"the drill did not start: the job ended before rank 0 reached step "
                                   f"{ctx.cfg.drills.at_step}", tip="lower drills.at_step or raise drills.steps")
            if pending is not None and state == JobState.SUCCEEDED:
                raise BackendError(f"fault {pending.kind} was not injected: the job ended before rank {pending.rank} "
                                   f"reached step {pending.at_step}", tip="choose an earlier faults[].at_step")
        with stages.stage("collect"):
            collected = backend.collect(handle)
            events = evmod.dedupe(events + list(collected.events or []))  # first copy wins: it carries observed_at
            times.update(collected.times)
        if drill is not None:
            with stages.stage("drill:after"):
                drill.after(handle, state)
        # a drill that killed the job is its result; a job that failed before the drill began is not
        if state != JobState.SUCCEEDED and (drill is None or not drill.started):
            refused = next((e for e in events if e["kind"] == "workload_error"), None)
            if refused is not None:
                # the workload stopped before training on purpose (no GPU where GPUs were asked for ...):
                # its own sentence says what is wrong, better than a log tail
                raise StageFailed("run", BackendError(
                    f"job ended {state.value}: the workload refused to run: {refused.get('message')}",
                    tip="check resources.gpus_per_node and the image's torch build (CUDA) against the nodes"))
            tail = ""
            if collected and collected.logs:
                name, text = next(reversed(collected.logs.items()))
                tail = f"\n--- last lines of {name} ---\n" + "\n".join(text.splitlines()[-15:])
            # the scheduler's own reason first (Kueue: "> maximum capacity", the kube-scheduler's
            # "Insufficient nvidia.com/gpu"): for a job that never ran it is the whole story
            why = f": {obs.reason}" if obs is not None and obs.reason else ""
            raise StageFailed("run", BackendError(f"job ended {state.value}{why}{tail}",
                                                  tip="read the run's logs under the results dir"
                                                  + ("" if events else "; the job never started: its request "
                                                     "(resources, queue, image) is what to check")))
        if serve is not None:   # the training job's checkpoint is still there: cleanup comes after
            with stages.stage("serve"):
                serve.run(handle)
            with stages.stage("serve:teardown"):
                serve.close()
        with stages.stage("metrics"):
            # every time-stamp from the raw scheduler records, by the same pure code `poc rederive` runs
            # (from the redacted copy: what is stored is exactly what the stamps were derived from)
            stamps = ctx.stamps(spec.platform, redact.scrub(collected.raw).data)
            record["derive_inputs"] = inputs = derive_inputs(ctx.cfg, spec)
            m, timeline = ({}, {}) if state != JobState.SUCCEEDED else metmod.derive(
                events, stamps, **inputs, faults=[f.to_json() for f in faults],
                contention=blocker.to_json() if blocker else None)
            if drill is not None:
                m.update(drill_metrics(ctx.stamps, spec.platform, events, drill.evidence, spec.world_size))
            if serve is not None:
                m.update(serve_metrics(serve.evidence, inputs["price"], spec.gpus_per_node))
            record["metrics"] = m
            record["timeline"] = timeline
        record["status"] = "ok"
    except StageFailed as sf:
        err = sf.error
        record["error"] = {"stage": sf.stage, "type": type(err).__name__, "origin": "platform",
                           "message": getattr(err, "message", str(err)), "tip": getattr(err, "tip", None)}
        if not isinstance(err, (PocError, KeyboardInterrupt)):
            # not a failure the platform reported: the harness itself raised (a bug to fix here),
            # so the report must not count it against the platform
            record["status"] = "harness_error"
            record["error"]["origin"] = "harness"
            record["error"]["traceback"] = "".join(traceback.format_exception(err))[-4000:]
        if isinstance(err, KeyboardInterrupt):
            record["error"]["origin"] = "user"
            record["status"], interrupted = "interrupted", True
    except KeyboardInterrupt:
        record["status"], interrupted = "interrupted", True
        record["error"] = {"stage": "between stages", "type": "KeyboardInterrupt", "origin": "user",
                           "message": "interrupted"}
    finally:
        calls_before_cancel = backend.call_counts()
        if serve is not None:
            serve.close()       # idempotent; a failed or interrupted serving run leaves nothing behind
        if drill is not None:
            drill.cancel_follower()
        # a submit that raised cancels its intent: whatever the call made before it failed is found and removed
        for h in (handle or intent, blocker.handle if blocker is not None else None):  # a blocker's objects too
            if h is None:
                continue
            try:
                backend.cancel(h)
                store.clear_inflight(h.run_id)
            except Exception as exc:  # noqa: BLE001 - whatever failed, the inflight file stays for --resume
                record["cancel_error"] = str(exc)[:500]
        cancel_calls = footprint.diff(calls_before_cancel, backend.call_counts())
    if collected is None and handle is not None:
        try:
            collected = backend.collect(handle)
            events = evmod.dedupe(events + list(collected.events or []))  # first copy wins: it carries observed_at
            times.update(collected.times)
        except Exception as exc:  # noqa: BLE001 - the record is written whatever collect raised
            record["collect_error"] = str(exc)[:500]
    if handle is not None:
        try:   # after collect and cancel: the run's files on the cluster are removed or kept (keep_run_files)
            record["cleanup"] = cleanup_run(backend, handle, record, ctx.cfg.keep_run_files)
            if blocker is not None:
                record["cleanup"]["blocker"] = cleanup_run(backend, blocker.handle, record, ctx.cfg.keep_run_files)
        except KeyboardInterrupt:
            record["cleanup"], interrupted = {"warning": "interrupted during cleanup: files kept"}, True
    raw = redact.scrub(collected.raw).data if collected else {}
    if handle is not None:
        audit_run(backend, handle, raw, record)
    if drill is not None:   # after the audit: putting an upgraded cluster back may start it afresh
        drill.close()
        raw["drill"] = drill.evidence
        record["drill"] = drill.summary()
    if serve is not None:
        raw["serve"] = redact.scrub(serve.evidence).data
        record["serve"] = serve.summary()
    record.setdefault("ux", {})["calls"] = calls_by_phase(stages.items, cancel_calls)
    record["finished_at"] = ctx.clock()
    usage1 = provenance.own_usage()
    # The harness's own footprint while it watched this run (benchmarks/observation_latency.py prints it).
    record["harness_usage"] = {"cpu_s": round(usage1["cpu_s"] - usage0["cpu_s"], 3), "max_rss_mb": usage1["max_rss_mb"]}
    record["faults"] = [f.to_json() for f in faults]
    if blocker is not None:
        record["contention"] = blocker.to_json()
    if stamps is None and raw:
        try:   # a failed run's evidence is kept and readable too
            stamps = ctx.stamps(spec.platform, raw)
        except Exception as exc:  # noqa: BLE001 - the record is written whatever the evidence reader raised
            record["stamps_error"] = f"{type(exc).__name__}: {exc}"[:500]
    record["scheduler"] = {"times": times, "attempts": collected.attempts if collected else [],
                           "info": collected.info if collected else {},
                           "stamps": evidence.to_json(stamps) if stamps is not None else None}
    record["environment"] = provenance.environment(ctx.platform_info, events, raw)
    record["raw_evidence"] = store.write_raw(spec.run_id, raw)
    files["events.jsonl"] = evmod.dumps(events)
    if collected:
        files.update({f"logs/{k}": v for k, v in collected.logs.items()})
    store.write_artifacts(spec.run_id, files)
    store.append(record)
    if interrupted:
        raise KeyboardInterrupt
    return record


BackendFactory = Callable[[str], Backend]


def _preflight_failed(cfg: Config, plat: str, run_id: str, exc: PocError, now: float) -> dict:
    return {"run_id": run_id, "campaign": cfg.campaign, "platform": plat, "scenario": "preflight",
            "config_hash": cfg.config_hash(), "status": "failed", "started_at": now, "finished_at": now,
            "stages": [], "error": {"stage": "preflight", "type": type(exc).__name__, "origin": "platform",
                                    "message": exc.message, "tip": exc.tip}}


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
             make_probe_backend: Callable[[str, Config], Backend] | None = None) -> list[dict]:
    """Run every planned run not yet done, in the configured order (harness/order.py); return the
    records written now. Every platform's backend stays open for the whole campaign, since runs
    of different platforms alternate. A user-experience probe (scenario "mistake:<kind>") gets a
    backend of its own from make_probe_backend(platform, the config with the mistake in it)."""
    existing = store.open(cfg.config_hash(), cfg.redacted(), resume)
    done = {r["run_id"] for r in existing if r.get("status") == "ok"}
    written: list[dict] = []

    def emit(rec: dict) -> None:
        written.append(rec)
        on_record(rec)

    plans = {plat: [p for p in run_plan(cfg, plat) if p.run_id not in done] for plat in platforms}
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
                emit(rec)
                plans[plat] = []
                continue
            if not plans[plat]:
                backend.close()
                continue
            contexts[plat] = RunContext(backend, store, cfg, info, progress,
                                        poll_s or getattr(backend, "poll_s", 0.5), clock, sleep, stamps_fn)
        for slot in arrange({p: v for p, v in plans.items() if p in contexts}, cfg.order, cfg.seed):
            ctx = contexts[slot.platform]
            run_id, fault, scenario = slot.planned
            if scenario.startswith("mistake:"):
                from .ux import probe
                if make_probe_backend is None:
                    from .backends.factory import make_backend as make_probe_backend
                emit(probe.run(cfg, slot.platform, run_id, scenario.split(":", 1)[1], store, make_probe_backend,
                               clock=clock, sleep=sleep, progress=progress))
                continue
            spec = replace(build(cfg, slot.platform, run_id, fault, scenario), owner=store.token)
            emit(execute(ctx, spec, order=slot.to_json(cfg.seed, cfg.order)))
    finally:
        try:
            for ctx in contexts.values():
                ctx.backend.close()
        finally:
            store.close()
    return written
