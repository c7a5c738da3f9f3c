"""What every metric module shares: units, the metric record, per-rank helpers."""
from __future__ import annotations

from .. import events as ev

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
