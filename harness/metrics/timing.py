"""Queue, handover and startup: scheduler instants (Stamps with their resolution) and the workload's phases.

Every interval is Span.between(a, b) = [b.lo - a.hi, b.hi - a.lo]: a whole-second scheduler record
widens it by up to 1 s, the harness's bracket around the submit call by the call's duration, a
workload event by 1 us. Workload and scheduler instants are compared directly because on this
project's clusters they read the same host clock (nodes are containers or VMs of one host).
"""
from __future__ import annotations

from .. import events as ev
from ..timing import Span, Stamp
from .common import WORKLOAD_CLOCK, _all_ranks, _per_rank_first, _span_metric, at, span


def queue(st: dict) -> dict:
    sub, alloc, adm = st.get("submitted"), st.get("allocated"), st.get("admitted")
    out = {"queue_s": _span_metric("queue_s", span(sub, alloc), {"submitted": sub, "allocated": alloc})}
    if adm is not None:
        out["queue_admission_s"] = _span_metric("queue_admission_s", span(sub, adm),
                                                {"submitted": sub, "admitted": adm})
    return out


def handover(st: dict, contention: dict) -> dict:
    """The blocking job's last rank done (a workload event: exact) -> the waiting job allocated."""
    released = contention.get("released")
    rel = at(float(released), "blocker's last rank done (" + WORKLOAD_CLOCK + ")") if released is not None else None
    alloc = st.get("allocated")
    return _span_metric("handover_s", span(rel, alloc), {"released": rel, "allocated": alloc},
                        blocker_run_id=contention.get("blocker_run_id"))


def startup(events: list[dict], st: dict, world: int) -> tuple[dict, dict]:
    """startup_s = launch_s + rendezvous_s + first_step_s of the first attempt (the calibration and the
    sweep left out: both are the harness's, before training), and the instants it used (name -> Stamp
    or None)."""
    atts = ev.attempts(events)
    first = atts[0] if atts else (0, 0, 0)
    launched = at(_all_ranks(_per_rank_first(events, "process_start", first), world))
    rdzv = at(_all_ranks(_per_rank_first(events, "rendezvous_done", first), world))
    calibrated = at(_all_ranks(_per_rank_first(events, "calibration_done", first), world))
    swept = at(_all_ranks(_per_rank_first(events, "sweep_done", first), world))
    step1 = at(_all_ranks(_per_rank_first(events, "step", first), world))
    alloc = st.get("allocated")
    before_sweep = calibrated if calibrated is not None else rdzv
    sweep_end = swept if swept is not None else before_sweep
    launch_s, rdzv_s = span(alloc, launched), span(launched, rdzv)
    # the allocation check before training (workloads/poc_check.py: its own steps, or the pods' first command) is
    # the harness's, as the calibration is: left out of launch_s, its own figure allocation_check_s
    chk = [e for e in ev.of_kind(events, "check_start", first) + ev.of_kind(events, "check_done", first)]
    check_a = at(min(e["ts_ns"] for e in chk) / 1e9) if chk else None
    check_b = at(max(e["ts_ns"] for e in chk) / 1e9) if chk else None
    if chk and launch_s is not None:
        before, after = span(alloc, check_a), span(check_b, launched)
        launch_s = before.plus(after) if before is not None and after is not None else launch_s
    sweep_s = span(before_sweep, swept) if swept is not None else Span(0.0, 0.0, 0.0)
    first_s = span(sweep_end, step1)
    total = launch_s.plus(rdzv_s).plus(first_s) if None not in (launch_s, rdzv_s, first_s) else None
    inst = {"allocated": alloc, "launched": launched, "rendezvous": rdzv, "sweep_done": swept, "first_step": step1}
    out = {
        "startup_s": _span_metric("startup_s", total, inst, attempt=list(first)),
        "launch_s": _span_metric("launch_s", launch_s, {"allocated": alloc, "launched": launched},
                                 **({"left_out": "the allocation check (allocation_check_s)"} if chk else {})),
        "rendezvous_s": _span_metric("rendezvous_s", rdzv_s, {"launched": launched, "rendezvous": rdzv}),
        "first_step_s": _span_metric("first_step_s", first_s, {"sweep_done": sweep_end, "first_step": step1}),
        "sweep_s": _span_metric("sweep_s", sweep_s, {"rendezvous": before_sweep, "sweep_done": swept}),
    }
    atts0 = (st.get("attempts") or [{}])[0] if st.get("attempts") else {}
    step_requested = atts0.get("step_requested") if isinstance(atts0, dict) else None
    if step_requested is not None:   # Slurm: the batch script stamps the moment it starts srun
        out["step_launch_s"] = _span_metric("step_launch_s", span(step_requested, launched),
                                            {"step_requested": step_requested, "launched": launched})
    if chk:
        inst["checked"] = check_b
        out["allocation_check_s"] = _span_metric("allocation_check_s", span(check_a, check_b),
                                                 {"check_start": check_a, "check_done": check_b},
                                                 what="the health gate and the all-reduce across the allocation, "
                                                      "left out of launch_s")
    if calibrated is not None:   # a run with the calibration phase (config calibration.enabled)
        inst["calibrated"] = calibrated
        out["calibration_s"] = _span_metric("calibration_s", span(rdzv, calibrated),
                                            {"rendezvous": rdzv, "calibrated": calibrated})
    return out, inst


def first_log(events: list[dict], st: dict) -> dict:
    """first_log_s: submitted -> the first workload line the harness could read, as a user reading
    the job's output would: the earliest `observed_at` (harness clock, stamped by the pipeline when an
    observe returned the line). The line cannot have been readable before the workload wrote it
    (its ts_ns), so the instant lies in [written, read]; the poll interval is in that width."""
    seen = [e for e in events if e.get("observed_at") is not None]
    first = min(seen, key=lambda e: (e["observed_at"], e["ts_ns"])) if seen else None
    read = None
    if first is not None:
        written = min(first["ts_ns"] / 1e9, float(first["observed_at"]))
        read = Stamp(float(first["observed_at"]), written, float(first["observed_at"]),
                     "first workload line read by the harness (written .. read, harness clock)",
                     float(first["observed_at"]) - written)
    sub = st.get("submitted")
    return _span_metric("first_log_s", span(sub, read), {"submitted": sub, "first_line": read},
                        event=None if first is None else first["kind"])
