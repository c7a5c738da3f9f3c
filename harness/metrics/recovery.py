"""Recovery after a fault, and step times."""
from __future__ import annotations

from collections import defaultdict

from .. import events as ev
from .common import _all_ranks, _metric, _per_rank_first, _sub, _t


def step_times(events: list[dict]) -> list[float]:
    """Step durations without the first step of each process (it pays for warm-up)."""
    by_proc: dict[tuple, list[dict]] = defaultdict(list)
    for e in ev.of_kind(events, "step"):
        by_proc[(e.get("host"), e.get("pid"), e["rank"])].append(e)
    out = []
    for steps in by_proc.values():
        steps.sort(key=_t)
        out.extend(float(s["dur_s"]) for s in steps[1:])
    return out


def recovery(events: list[dict], fault: dict, world: int) -> dict:
    t_f = float(fault["injected_at"])
    before = tuple(fault.get("target", {}).get("attempt") or ())
    post = [e for e in ev.of_kind(events, "step") if _t(e) > t_f and (not before or ev.attempt_of(e) > before)]
    src = {"fault": t_f}
    if not post:
        return {"recovery_s": _metric("recovery_s", None, src, note="no step was done after the fault",
                                      kind=fault["kind"]),
                "lost_steps": _metric("lost_steps", None, src)}
    new_att = ev.attempt_of(min(post, key=_t))
    resumed = _all_ranks(_per_rank_first(events, "step", new_att), world)
    # process_start carries each process's own view of the attempt (agreed only at rendezvous),
    # so the relaunch is every rank's first process start after the fault.
    starts_after: dict[int, float] = {}
    for e in ev.of_kind(events, "process_start"):
        if _t(e) > t_f:
            starts_after[e["rank"]] = min(starts_after.get(e["rank"], _t(e)), _t(e))
    relaunched = _all_ranks(starts_after, world)
    starts = ev.of_kind(events, "train_start", new_att)
    resumed_from = min((s.get("start_step", 0) for s in starts), default=None)
    pre_steps = [e["step"] for e in ev.of_kind(events, "step") if ev.attempt_of(e) < new_att]
    last_before = max(pre_steps, default=0)
    lost = None if resumed_from is None else max(0, last_before - resumed_from)
    src.update({"relaunched": relaunched, "resumed": resumed})
    detail = {"kind": fault["kind"], "attempt_before": list(before), "attempt_after": list(new_att),
              "relaunch_s": _sub(relaunched, t_f), "resume_after_relaunch_s": _sub(resumed, relaunched),
              "last_step_before": last_before, "resumed_from_step": resumed_from}
    return {"recovery_s": _metric("recovery_s", _sub(resumed, t_f), src, **detail),
            "lost_steps": _metric("lost_steps", lost, {"fault": t_f, "resumed": resumed},
                                  last_step_before=last_before, resumed_from_step=resumed_from)}
