"""All-reduce bus bandwidth, as nccl-tests defines it."""
from __future__ import annotations

from .. import events as ev
from .common import _metric, _t


def busbw_factor(world_size: int) -> float:
    return 2.0 * (world_size - 1) / world_size if world_size > 1 else 0.0


def busbw(algbw_gbps: float, world_size: int) -> float:
    return algbw_gbps * busbw_factor(world_size)


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
