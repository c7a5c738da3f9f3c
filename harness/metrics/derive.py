"""All metrics of one run."""
from __future__ import annotations

import statistics

from .. import events as ev
from .bandwidth import allreduce
from .common import _metric, _sub, _t
from .cost import cost
from .recovery import recovery, step_times
from .timing import startup


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
