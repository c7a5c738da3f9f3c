"""Recovery after a fault, broken down the way large-scale training reports do; lost steps; step times.

Instants (Stamps), in the order a recovery passes them:
  fault       harness clock when the fault was injected (fault["injected_at"]; fault["stamp"] if a bracket was kept)
  detected    scheduler-level restart: the failed attempt's "detected" stamp (the scheduler, batch script or
              JobSet noticed). Restart inside one allocation (torchrun; the local platform; only the innermost
              attempt counter changed): the first process of the restarted workers. torchrun notices the dead
              worker, stops the survivors and spawns again; from outside the three cannot be told apart, so
              detection there includes stopping the survivors.
  released    the failed attempt's resources free again (scheduler)
  allocated   the next attempt holds all its resources (scheduler)
  rendezvous  every rank of the new attempt past init_process_group
  loaded      every rank's checkpoint_loaded (model built, DDP wrapped, checkpoint read; train_start if absent)
  caught_up   every rank has completed again the last step that every rank had completed before the fault
Phases (metrics recovery_<phase>_s): detection fault->detected, teardown ->released, rescheduling ->allocated,
restart ->rendezvous, checkpoint_load ->loaded, recompute ->caught_up. recovery_s = fault -> caught_up, the
sum of the phases. A phase whose end has no evidence is null and its time is counted in the next phase
(whose detail lists it under "includes"); a phase the restart does not have (nothing released or allocated
inside one allocation) is null with a note: never invented.
resume_s: fault -> every rank's first step of the new attempt (what recovery_s meant in older campaigns).
lost_steps = (last step completed by every rank before the fault instant) - (checkpoint step resumed from):
steps a rank finished after the injection, before the kill landed, are not progress the fault destroyed.
"""
from __future__ import annotations

from collections import defaultdict

from .. import events as ev
from ..timing import Stamp, stamp_of
from .common import _all_ranks, _metric, _per_rank_first, _span_metric, _t, at, span

PHASES = (("detection", "detected"), ("teardown", "released"), ("rescheduling", "allocated"),
          ("restart", "rendezvous"), ("checkpoint_load", "loaded"), ("recompute", "caught_up"))
IN_ALLOCATION = "restart inside the same allocation (torchrun): nothing was released or allocated again"


def step_times(events: list[dict]) -> list[float]:
    """Step durations by (attempt, rank), without the first step of each (it pays for warm-up).
    Not by (host, pid): Kubernetes pods of a restarted JobSet reuse both."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for e in ev.of_kind(events, "step"):
        by[(ev.attempt_of(e), e["rank"])].append(e)
    out = []
    for steps in by.values():
        steps.sort(key=_t)
        out.extend(float(s["dur_s"]) for s in steps[1:])
    return out


def fault_stamp(fault: dict) -> Stamp:
    if fault.get("stamp"):
        return stamp_of(fault["stamp"])
    return Stamp.exact(float(fault["injected_at"]), "harness clock (fault injected)")


def _landing(steps: list[dict], t_f: float, new_att: tuple) -> tuple[dict[int, int], dict[int, int]]:
    """Each rank's last step completed before the fault instant, and its last step in the failed attempt(s)."""
    at_inj: dict[int, int] = {}
    last: dict[int, int] = {}
    for e in steps:
        if ev.attempt_of(e) >= new_att:
            continue
        r = e["rank"]
        last[r] = max(last.get(r, 0), e["step"])
        if _t(e) < t_f:
            at_inj[r] = max(at_inj.get(r, 0), e["step"])
    return at_inj, last


def _every_rank_done(steps: list[dict], step: int, world: int, keep) -> float | None:
    """When every rank had completed `step` (each rank's first completion among the kept events)."""
    per: dict[int, float] = {}
    for e in steps:
        if e["step"] == step and keep(e):
            per[e["rank"]] = min(per.get(e["rank"], _t(e)), _t(e))
    return _all_ranks(per, world)


def _scheduler_attempts(st: dict, t_f: float) -> tuple[dict, dict]:
    """The scheduler attempt the fault hit (the last allocated at or before it) and the one after."""
    atts = st.get("attempts") or []
    k = None
    for i, a in enumerate(atts):
        al = a.get("allocated")
        if al is not None and al.lo <= t_f:
            k = i
    if k is None and atts:
        k = 0
    failed = atts[k] if k is not None else {}
    nxt = atts[k + 1] if k is not None and k + 1 < len(atts) else {}
    return failed, nxt


def _null(fault: dict, t_f: float, note: str) -> tuple[dict, dict]:
    src = {"fault": t_f}
    return ({"recovery_s": _metric("recovery_s", None, src, note=note, kind=fault["kind"]),
             "resume_s": _metric("resume_s", None, src, note=note),
             "lost_steps": _metric("lost_steps", None, src, note=note)}, {})


def recovery(events: list[dict], fault: dict, world: int, st: dict | None = None) -> tuple[dict, dict]:
    """Metrics of one fault's recovery, and the instants it used (name -> Stamp or None)."""
    st = st or {}
    f_st = fault_stamp(fault)
    t_f = f_st.t
    before = tuple(fault.get("target", {}).get("attempt") or ())
    steps = ev.of_kind(events, "step")
    if not before:  # the attempt of the last step before the fault (survivors may finish one after it)
        before = max((ev.attempt_of(e) for e in steps if _t(e) < t_f), default=())
    post = [e for e in steps if _t(e) > t_f and (not before or ev.attempt_of(e) > before)]
    if not post:
        return _null(fault, t_f, "no step was done after the fault")
    new_att = ev.attempt_of(min(post, key=_t))
    before = before or (0,) * len(new_att)
    pre = [e for e in steps if ev.attempt_of(e) < new_att and _t(e) < t_f]

    at_inj, last_failed = _landing(steps, t_f, new_att)
    last_all = min((at_inj.get(r, 0) for r in range(world)), default=0)
    train = ev.of_kind(events, "train_start", new_att)
    loads = ev.of_kind(events, "checkpoint_loaded", new_att)
    resumed_from = (min(s.get("start_step", 0) for s in train) if train
                    else min((c.get("step", 0) for c in loads), default=None))
    lost = None if resumed_from is None else max(0, last_all - resumed_from)

    failed, nxt = _scheduler_attempts(st, t_f)
    scheduler_restart = bool(nxt) or tuple(new_att[:-1]) != tuple(before[:-1])
    starts_after: dict[int, float] = {}
    for e in ev.of_kind(events, "process_start"):  # its attempt is each process's own guess until rendezvous
        if _t(e) > t_f:
            starts_after[e["rank"]] = min(starts_after.get(e["rank"], _t(e)), _t(e))
    inst: dict[str, Stamp | None] = {"fault": f_st}
    na: dict[str, str] = {}
    if scheduler_restart:
        inst.update(detected=failed.get("detected"), released=failed.get("released"), allocated=nxt.get("allocated"))
    else:
        inst["detected"] = failed.get("detected") or at(
            min(starts_after.values(), default=None), "first process of the restarted workers (workload clock)")
        na = {"released": IN_ALLOCATION, "allocated": IN_ALLOCATION}
    inst["rendezvous"] = at(_all_ranks(_per_rank_first(events, "rendezvous_done", new_att), world))
    loaded = _per_rank_first(events, "checkpoint_loaded", new_att) or _per_rank_first(events, "train_start", new_att)
    inst["loaded"] = at(_all_ranks(loaded, world))
    if lost == 0:
        inst["caught_up"] = inst["loaded"]  # nothing to redo: back at the pre-fault step once loaded
    elif lost is not None:
        inst["caught_up"] = at(_every_rank_done(steps, last_all, world, lambda e: ev.attempt_of(e) == new_att))
    inst["resumed"] = at(_all_ranks(_per_rank_first(events, "step", new_att), world))
    inst["relaunched"] = at(_all_ranks(starts_after, world))
    # when the job last had every rank's work of a step: the partial step after it was lost too (cost)
    common_done = _every_rank_done(pre, last_all, world, lambda e: True) if last_all else None
    inst["last_common_step"] = at(common_done) if common_done is not None else f_st

    m = _phases(inst, na)
    m["recovery_s"] = _span_metric(
        "recovery_s", span(f_st, inst.get("caught_up")), {"fault": f_st, "caught_up": inst.get("caught_up")},
        kind=fault["kind"], attempt_before=list(before), attempt_after=list(new_att),
        scheduler_restart=scheduler_restart, phases=[f"recovery_{p}_s" for p, _ in PHASES],
        last_step_before=last_all, resumed_from_step=resumed_from,
        **({} if inst.get("caught_up") else {"note": "the new attempt never got back to the pre-fault step"}))
    m["resume_s"] = _span_metric("resume_s", span(f_st, inst["resumed"]), {"fault": f_st, "resumed": inst["resumed"]},
                                 attempt_after=list(new_att))
    target = fault.get("target", {})
    m["lost_steps"] = _metric(
        "lost_steps", lost, {"fault": t_f}, last_step_before=last_all, resumed_from_step=resumed_from,
        fault_landed={"trigger": {"rank": target.get("rank"), "step": target.get("step")},
                      "at_injection": {str(r): s for r, s in sorted(at_inj.items())},
                      "last_in_failed_attempt": {str(r): s for r, s in sorted(last_failed.items())}})
    return m, inst


def _phases(inst: dict, na: dict[str, str]) -> dict:
    out: dict = {}
    prev_name, prev = "fault", inst["fault"]
    carried: list[str] = []
    for phase, end_name in PHASES:
        name, end = f"recovery_{phase}_s", inst.get(end_name)
        if end_name in na:
            out[name] = _span_metric(name, None, {}, note=na[end_name])
            continue
        if end is None:
            out[name] = _span_metric(name, None, {}, note=f"no evidence of '{end_name}': its time is in the next phase")
            carried.append(phase)
            continue
        sp = span(prev, end)
        detail: dict = {"from": prev_name, "to": end_name}
        if carried:
            detail["includes"], carried = carried, []
        if sp.value < 0:
            detail["note"] = f"'{end_name}' came before '{prev_name}': the phases overlap"
        out[name] = _span_metric(name, sp, {prev_name: prev, end_name: end}, **detail)
        prev_name, prev = end_name, end
    return out
