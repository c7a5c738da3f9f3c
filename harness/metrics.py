"""Workload events + scheduler timestamps -> the five metrics, defined once for every platform.

Every metric carries the timestamps it was computed from (`sources`, epoch
seconds), so a reader can recompute it. Scheduler timestamps come from the
scheduler's own clock (Slurm, Kubernetes), workload timestamps from the
nodes' clocks; on one host these are the same clock.

Definitions (all platforms):
- queue_s: submitted -> allocated (all resources held: Slurm Start, last pod
  PodScheduled, local spawn). queue_admission_s: submitted -> Kueue admission.
- startup_s = launch_s + rendezvous_s + first_step_s, from allocated to the
  first step done by every rank, less the all-reduce sweep (sweep_s, which the
  harness adds and a real job would not run):
    launch_s: allocated -> every rank's process started;
    rendezvous_s: -> every rank past init_process_group (includes importing torch);
    first_step_s: end of sweep -> every rank's first step done (model, DDP, checkpoint load, one step).
- allreduce_busbw_gbps: peak busbw of the sweep (nccl-tests: busbw = algbw * 2(n-1)/n, GB = 1e9 B).
- handover_s (contention runs): the blocking job done (its last rank's `done` event) -> the
  waiting job allocated; queue_s of those runs is kept apart as queue_s:contention.
- recovery_s: fault injected -> first step done by every rank after the restart;
  lost_steps: steps done before the fault that had to be done again.
- cost_per_step_usd: effective = price x units x (done - submitted) / steps;
  cost_per_step_steady_usd = price x units x median step time.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from . import events as ev

UNITS = {
    "queue_s": "s", "queue_admission_s": "s", "startup_s": "s", "launch_s": "s", "rendezvous_s": "s",
    "first_step_s": "s", "sweep_s": "s", "allreduce_busbw_gbps": "GB/s", "recovery_s": "s", "lost_steps": "steps",
    "step_time_s": "s", "handover_s": "s", "cost_per_step_usd": "USD", "cost_per_step_steady_usd": "USD",
}
HEADLINE = ("queue_s", "startup_s", "allreduce_busbw_gbps", "recovery_s", "cost_per_step_usd")


def _t(e: dict) -> float:
    return e["ts_ns"] / 1e9


def _metric(name: str, value, sources: dict | None = None, **detail) -> dict:
    if isinstance(value, float):
        value = round(value, 9)
    return {"value": value, "unit": UNITS[name], "sources": {k: v for k, v in (sources or {}).items() if v is not None},
            "detail": detail}


def busbw_factor(world_size: int) -> float:
    return 2.0 * (world_size - 1) / world_size if world_size > 1 else 0.0


def busbw(algbw_gbps: float, world_size: int) -> float:
    return algbw_gbps * busbw_factor(world_size)


def _per_rank_first(events: list[dict], kind: str, attempt: tuple) -> dict[int, float]:
    first: dict[int, float] = {}
    for e in ev.of_kind(events, kind, attempt):
        first[e["rank"]] = min(first.get(e["rank"], _t(e)), _t(e))
    return first


def _all_ranks(per_rank: dict[int, float], world: int) -> float | None:
    """The moment every rank had reached the point; None if some rank never did."""
    return max(per_rank.values()) if per_rank and len(per_rank) >= world else None


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def startup(events: list[dict], times: dict, world: int) -> tuple[dict, dict]:
    atts = ev.attempts(events)
    first = atts[0] if atts else (0, 0, 0)
    launched = _all_ranks(_per_rank_first(events, "process_start", first), world)
    rdzv = _all_ranks(_per_rank_first(events, "rendezvous_done", first), world)
    swept = _all_ranks(_per_rank_first(events, "sweep_done", first), world)
    step1 = _all_ranks(_per_rank_first(events, "step", first), world)
    alloc = times.get("allocated")
    sweep_end = swept if swept is not None else rdzv
    src = {"allocated": alloc, "launched": launched, "rendezvous": rdzv, "sweep_done": swept, "first_step": step1}
    launch_s, rdzv_s = _sub(launched, alloc), _sub(rdzv, launched)
    sweep_s = _sub(swept, rdzv) if swept is not None else 0.0
    first_s = _sub(step1, sweep_end)
    parts = (launch_s, rdzv_s, first_s)
    total = sum(parts) if all(p is not None for p in parts) else None
    out = {
        "startup_s": _metric("startup_s", total, src, attempt=list(first)),
        "launch_s": _metric("launch_s", launch_s, {"allocated": alloc, "launched": launched}),
        "rendezvous_s": _metric("rendezvous_s", rdzv_s, {"launched": launched, "rendezvous": rdzv}),
        "first_step_s": _metric("first_step_s", first_s, {"sweep_done": sweep_end, "first_step": step1}),
        "sweep_s": _metric("sweep_s", sweep_s, {"rendezvous": rdzv, "sweep_done": swept}),
    }
    return out, src


def allreduce(events: list[dict], world: int) -> dict:
    atts = ev.attempts(events)
    first = atts[0] if atts else (0, 0, 0)
    rows = [e for e in ev.of_kind(events, "allreduce", first) if e["rank"] == 0]
    if not rows:
        return _metric("allreduce_busbw_gbps", None, note="no sweep ran")
    curve = [{"bytes": e["bytes"], "time_s": e["time_s"], "algbw_gbps": e["algbw_gbps"],
              "busbw_gbps": busbw(e["algbw_gbps"], e.get("world_size", world)), "correct": bool(e.get("correct"))}
             for e in sorted(rows, key=lambda r: r["bytes"])]
    peak = max(curve, key=lambda r: r["busbw_gbps"])
    return _metric("allreduce_busbw_gbps", peak["busbw_gbps"],
                   {"sweep_first": _t(rows[0]), "sweep_last": _t(rows[-1])},
                   peak_bytes=peak["bytes"], world_size=rows[0].get("world_size", world),
                   all_correct=all(r["correct"] for r in curve), curve=curve)


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


def cost(events: list[dict], times: dict, price: dict, nodes: int, gpus_per_node: int, steps: int,
         median_step: float | None) -> dict:
    units = nodes * gpus_per_node if price["unit"] == "gpu" else nodes
    per_s = price["usd_per_hour"] * units / 3600.0
    done = [_t(e) for e in ev.of_kind(events, "done")]
    end = max(done) if done else times.get("ended")
    submitted = times.get("submitted")
    steps_done = steps if done else max((e["step"] for e in ev.of_kind(events, "step")), default=0)
    wall = _sub(end, submitted)
    effective = per_s * wall / steps_done if wall is not None and steps_done else None
    steady = per_s * median_step if median_step is not None else None
    common = {"usd_per_hour": price["usd_per_hour"], "unit": price["unit"], "units": units}
    return {
        "cost_per_step_usd": _metric("cost_per_step_usd", effective, {"submitted": submitted, "done": end},
                                     wall_s=wall, steps=steps_done, steady=steady, **common),
        "cost_per_step_steady_usd": _metric("cost_per_step_steady_usd", steady, {},
                                            median_step_s=median_step, **common),
    }


def derive(events: list[dict], times: dict, *, world: int, nodes: int, gpus_per_node: int, steps: int,
           price: dict, faults: list[dict], contention: dict | None = None) -> tuple[dict, dict]:
    """All metrics of one run, and its phase timeline (name -> epoch seconds)."""
    events = sorted(events, key=lambda e: e["ts_ns"])
    m: dict = {}
    submitted, allocated = times.get("submitted"), times.get("allocated")
    m["queue_s"] = _metric("queue_s", _sub(allocated, submitted), {"submitted": submitted, "allocated": allocated})
    if times.get("admitted") is not None:
        m["queue_admission_s"] = _metric("queue_admission_s", _sub(times["admitted"], submitted),
                                         {"submitted": submitted, "admitted": times["admitted"]})
    if contention:
        released = contention.get("released")
        # Scheduler times are whole seconds on both platforms (Slurm Start, PodScheduled) and the
        # release is a workload event: a handover under a second reads within +-1 s.
        m["handover_s"] = _metric("handover_s", _sub(allocated, released),
                                  {"released": released, "allocated": allocated},
                                  blocker_run_id=contention.get("blocker_run_id"))
    sm, src = startup(events, times, world)
    m.update(sm)
    m["allreduce_busbw_gbps"] = allreduce(events, world)
    st = step_times(events)
    med = statistics.median(st) if st else None
    m["step_time_s"] = _metric("step_time_s", med, {}, n=len(st), samples=[round(x, 6) for x in st])
    for f in faults:
        m.update(recovery(events, f, world))
    m.update(cost(events, times, price, nodes, gpus_per_node, steps, med))

    done = [_t(e) for e in ev.of_kind(events, "done")]
    timeline = {"submitted": submitted, "admitted": times.get("admitted"), "allocated": allocated,
                "launched": src["launched"], "rendezvous": src["rendezvous"], "sweep_done": src["sweep_done"],
                "first_step": src["first_step"]}
    for f in faults:
        timeline["fault"] = float(f["injected_at"])
        rs = m.get("recovery_s", {}).get("sources", {})
        timeline["resumed"] = rs.get("resumed")
    if contention and contention.get("released"):
        timeline["blocker_released"] = contention["released"]
    timeline["done"] = max(done) if done else times.get("ended")
    return m, {k: v for k, v in timeline.items() if v is not None}
