"""Queue and startup: scheduler edges and the workload's phases."""
from __future__ import annotations

from .. import events as ev
from .common import _all_ranks, _metric, _per_rank_first, _sub


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
