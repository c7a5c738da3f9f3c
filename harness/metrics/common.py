"""What every metric module shares: units, the metric record, per-rank helpers, the inputs as Stamps."""
from __future__ import annotations

from .. import events as ev
from .. import evidence
from ..timing import Span, Stamp

UNITS = {
    "queue_s": "s", "queue_admission_s": "s", "startup_s": "s", "launch_s": "s", "rendezvous_s": "s",
    "first_step_s": "s", "sweep_s": "s", "calibration_s": "s", "step_launch_s": "s", "allreduce_busbw_gbps": "GB/s",
    "recovery_s": "s",
    "image_pull_s": "s",   # inside launch_s (metrics/image.py)
    "lost_steps": "steps",
    "step_time_s": "s", "handover_s": "s", "cost_per_step_usd": "USD", "cost_per_step_steady_usd": "USD",
    # recovery broken down, goodput, cost to release and of recovery
    "resume_s": "s", "recovery_detection_s": "s", "recovery_teardown_s": "s", "recovery_rescheduling_s": "s",
    "recovery_restart_s": "s", "recovery_checkpoint_load_s": "s", "recovery_recompute_s": "s",
    "goodput": "ratio", "cost_run_usd": "USD", "recovery_cost_usd": "USD",
    "allreduce_avg_busbw_gbps": "GB/s",   # nccl-tests' "Avg bus bandwidth" (metrics/bandwidth.py)
    # user experience
    "first_log_s": "s", "time_to_error_s": "s",
    # the serving scenario (serve/metrics.py); a fault or two-replica phase's figure is keyed
    # "name:phase" with the same unit
    "serve_ready_s": "s", "serve_latency_p50_s": "s", "serve_latency_p95_s": "s", "serve_latency_p99_s": "s",
    "serve_throughput_rps": "req/s", "serve_availability": "ratio", "serve_failed_requests": "count",
    "serve_degraded_s": "s", "serve_scaleout_s": "s", "serve_scaleout_p50_ratio": "ratio",
    "serve_cost_per_1k_usd": "USD",
    # upgrade drills (metrics/drill.py); yes/no figures are 1/0 so runs can be summed and compared
    "upgrade_job_survived": "yes=1", "upgrade_job_restarts": "count", "upgrade_steps_lost": "steps",
    "upgrade_max_step_gap_s": "s", "upgrade_submit_refused_s": "s", "upgrade_status_refused_s": "s",
    "upgrade_submit_slowest_s": "s", "upgrade_queued_delay_s": "s", "upgrade_leftovers": "count",
    "upgrade_records_intact": "yes=1", "upgrade_drill_s": "s",
    # the calibration phase (metrics/calibration.py): the allocation checked before training
    "calibration_allreduce_busbw_gbps": "GB/s", "calibration_nccl_tests_busbw_gbps": "GB/s",
    "calibration_workload_vs_nccl_tests": "ratio", "calibration_nodes_refused": "count",
    # the step before training (workloads/poc_check.py): its time, the all-reduce across the allocation, the
    # nodes the health gate refused
    "allocation_check_s": "s", "allocation_allreduce_busbw_gbps": "GB/s", "health_nodes_refused": "count",
    # checkpoints (metrics/checkpoint.py), throughput (metrics/throughput.py), stragglers (metrics/straggler.py)
    "checkpoint_save_s": "s", "checkpoint_load_s": "s", "samples_per_s": "samples/s", "tokens_per_s": "tokens/s",
    "mfu": "ratio", "straggler_ratio": "ratio",
}
HEADLINE = ("queue_s", "startup_s", "allreduce_busbw_gbps", "recovery_s", "cost_per_step_usd", "goodput")

# Workload events carry time.time_ns() of the node; on this project's clusters every node is a
# container or VM on one host, so workload and scheduler times are read from the same host clock.
WORKLOAD_CLOCK = "workload clock (time_ns)"


def _t(e: dict) -> float:
    return e["ts_ns"] / 1e9


def at(t: float | None, source: str = WORKLOAD_CLOCK) -> Stamp | None:
    """A workload instant (or any microsecond clock read) as a Stamp."""
    return None if t is None else Stamp.exact(t, source)


def _r(v):
    return round(v, 9) if isinstance(v, float) else v


def _record(name: str, value, lo, hi, sources: dict, stamps: dict, detail: dict) -> dict:
    unc = None if lo is None or hi is None else _r((hi - lo) / 2)
    return {"value": _r(value), "unit": UNITS[name], "lo": _r(lo), "hi": _r(hi), "uncertainty": unc,
            "sources": {k: v for k, v in sources.items() if v is not None},
            "stamps": {k: s.to_json() for k, s in stamps.items() if s is not None}, "detail": detail}


def _metric(name: str, value, sources: dict | None = None, **detail) -> dict:
    """A metric from exact inputs (a count, perf_counter durations): its interval is the value itself.
    The interval bounds timestamp resolution only; run-to-run spread is the report's business."""
    return _record(name, value, value, value, sources or {}, {}, detail)


def _span_metric(name: str, span: Span | None, stamps: dict[str, Stamp | None], **detail) -> dict:
    """A metric that is a difference of instants: value, and the interval [lo, hi] it must lie in."""
    sources = {k: s.t for k, s in stamps.items() if s is not None}
    if span is None:
        return _record(name, None, None, None, sources, stamps, detail)
    return _record(name, span.value, span.lo, span.hi, sources, stamps, detail)


def _scaled(name: str, span: Span | None, factor: float, stamps: dict, **detail) -> dict:
    """factor x span (a cost rate times a held time), interval scaled alike (factor >= 0)."""
    if span is None:
        return _span_metric(name, None, stamps, **detail)
    return _span_metric(name, Span(span.value * factor, span.lo * factor, span.hi * factor), stamps, **detail)


def span(a: Stamp | None, b: Stamp | None) -> Span | None:
    return None if a is None or b is None else Span.between(a, b)


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


def normalise(stamps: dict | None) -> dict:
    """The evidence dict (Stamps or their JSON, see docs/plan) as Stamps. The old flat `times`
    (name -> epoch seconds) is still accepted: each number becomes an exact Stamp (resolution 0)."""
    out: dict = {}
    for k, v in (stamps or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = Stamp(float(v), float(v), float(v), f"times[{k}] (flat, taken as exact)", 0.0)
        else:
            out[k] = evidence.from_json({"v": v})["v"]
    out.setdefault("attempts", [])
    out.setdefault("checks", [])
    return out


def held_until(events: list[dict], st: dict) -> tuple[str, Stamp | None, str]:
    """When the job's resources were free again: the scheduler's release record; without one the last
    rank's `done` event (the teardown after it then goes uncounted), then the job's end."""
    if st.get("released") is not None:
        return "released", st["released"], "released"
    done = [_t(e) for e in ev.of_kind(events, "done")]
    if done:
        return "done", at(max(done)), "last rank done (no release record: teardown not counted)"
    return "ended", st.get("ended"), "job ended (no release record, no done event)"
