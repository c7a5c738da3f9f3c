"""The serving figures (issue 14), from stored load results (harness/serve/load.py) and time-stamps.

Pure, so `poc rederive` can recompute them from the raw evidence. Every figure is named serve_*:
the report keeps those apart per scenario ("serve_degraded_s:kill_server"). Each is the project's
metric record ({value, unit, lo, hi, uncertainty, sources, stamps, detail}; harness/metrics/common.py),
with this module's units (UNITS: merge them into common.UNITS when the scenario is wired in).

serve_ready_s        submitted -> the first successful response (the load generator's clock when the
                     answer arrived; the harness's submit stamp as the platform's backend took it).
serve_latency_p50_s  (p95, p99) of the successful requests, from the stored HdrHistogram; [lo, hi] is
                     the histogram bucket the percentile fell in (3 significant digits).
serve_throughput_rps successful requests / the load's elapsed time, at the plan's fixed concurrency.
serve_availability   successful / all requests started inside a window (a fault's, or the whole load).
serve_failed_requests the failed requests in that window.
serve_degraded_s     the first failed request -> the first success after the last failed one (of the
                     failures that overlap the window: one in flight at a kill started before it).
                     The service went bad after the last success before the first failure started
                     and before the first failure ended, and was good again after the last failure
                     started and before the next success ended: that bounds [lo, hi].
serve_scaleout_s     the second replica asked for -> its first successful response (stamps given).
serve_scaleout_p50_ratio  p50 with two replicas / p50 with one (< 1: scaling out bought latency).
serve_cost_per_1k_usd     (price rate x billed seconds) / successful requests x 1000, the rate as
                     harness/metrics/cost.py computes it from the platform's Price; detail.steady is
                     rate / throughput x 1000, what 1,000 requests cost while the service is busy.
"""
from __future__ import annotations

from ..metrics.common import UNITS as COMMON_UNITS
from ..metrics.common import _r
from ..metrics.cost import rate
from ..timing import Span, Stamp, stamp_of
from .load import histogram

UNITS = {
    "serve_ready_s": "s", "serve_latency_p50_s": "s", "serve_latency_p95_s": "s", "serve_latency_p99_s": "s",
    "serve_throughput_rps": "req/s", "serve_availability": "ratio", "serve_failed_requests": "count",
    "serve_degraded_s": "s", "serve_scaleout_s": "s", "serve_scaleout_p50_ratio": "ratio",
    "serve_cost_per_1k_usd": "USD",
}
# for the report's direction of "better" (stats.HIGHER_IS_BETTER)
HIGHER_IS_BETTER = {"serve_throughput_rps", "serve_availability"}
LOAD_CLOCK = "load generator clock (time.time start + monotonic latency)"


def record(name: str, value, lo=None, hi=None, sources: dict | None = None,
           stamps: dict[str, Stamp | None] | None = None, **detail) -> dict:
    """common._record's shape, with this module's units (common.UNITS does not name serve_* yet)."""
    unit = {**COMMON_UNITS, **UNITS}[name]
    if value is not None and lo is None and hi is None:
        lo = hi = value             # an exact figure: its interval is the value itself
    unc = None if lo is None or hi is None else _r((hi - lo) / 2)
    stamps = stamps or {}
    return {"value": _r(value), "unit": unit, "lo": _r(lo), "hi": _r(hi), "uncertainty": unc,
            "sources": {k: v for k, v in (sources or {}).items() if v is not None},
            "stamps": {k: s.to_json() for k, s in stamps.items() if s is not None}, "detail": detail}


def _span_record(name: str, a: Stamp | None, b: Stamp | None, **detail) -> dict:
    stamps = {"from": a, "to": b}
    sources = {k: s.t for k, s in stamps.items() if s is not None}
    if a is None or b is None:
        return record(name, None, sources=sources, stamps=stamps, **detail)
    sp = Span.between(a, b)
    return record(name, sp.value, sp.lo, sp.hi, sources, stamps, **detail)


def requests(result: dict) -> list[dict]:
    """The result's request log as rows {start, end, ok, error}, absolute times, in order of start."""
    log, t0 = result["log"], result["started"]
    rows = [{"start": t0 + s, "end": t0 + s + lat, "ok": err is None, "error": err}
            for s, lat, err in zip(log["start"], log["latency_s"], log["error"], strict=True)]
    return sorted(rows, key=lambda r: r["start"])


def _window(rows: list[dict], window: tuple[float, float] | None) -> list[dict]:
    if window is None:
        return rows
    return [r for r in rows if window[0] <= r["start"] < window[1]]


def first_ok(result: dict) -> Stamp | None:
    """When the first successful response arrived (the earliest-ending ok request)."""
    ends = [r["end"] for r in requests(result) if r["ok"]]
    return Stamp.exact(min(ends), f"{LOAD_CLOCK}: first successful response") if ends else None


def ready(submitted: Stamp | dict | None, first: Stamp | dict | None) -> dict:
    return _span_record("serve_ready_s", stamp_of(submitted), stamp_of(first))


def latency(result: dict) -> dict[str, dict]:
    """p50/p95/p99 from the stored histogram, each with its bucket as the interval."""
    h = histogram(result)
    n = h.get_total_count()
    out = {}
    for p in (50, 95, 99):
        name = f"serve_latency_p{p}_s"
        if not n:
            out[name] = record(name, None, count=0, note="no successful request")
            continue
        v = h.get_value_at_percentile(p)
        lo, hi = h.get_lowest_equivalent_value(v) / 1e6, h.get_highest_equivalent_value(v) / 1e6
        out[name] = record(name, v / 1e6, lo, hi, {"histogram": "stored HdrHistogram (µs, 3 digits)"},
                           count=n, max_s=h.get_max_value() / 1e6, clients=result["plan"]["clients"])
    return out


def throughput(result: dict) -> dict:
    el = result["elapsed_s"]
    return record("serve_throughput_rps", result["ok"] / el if el > 0 else None, ok=result["ok"], elapsed_s=el,
                  clients=result["plan"]["clients"], stopped_by=result["stopped_by"])


def availability(result: dict, window: tuple[float, float] | None = None) -> dict[str, dict]:
    """serve_availability and serve_failed_requests over the requests started in `window` (epoch s)."""
    rows = _window(requests(result), window)
    ok = sum(r["ok"] for r in rows)
    kinds: dict[str, int] = {}
    for r in rows:
        if not r["ok"]:
            kinds[r["error"]] = kinds.get(r["error"], 0) + 1
    detail = {"window": list(window) if window else None, "requests": len(rows), "ok": ok, "errors": kinds}
    return {"serve_availability": record("serve_availability", ok / len(rows) if rows else None, **detail),
            "serve_failed_requests": record("serve_failed_requests", len(rows) - ok, **detail)}


def degraded(result: dict, window: tuple[float, float] | None = None) -> dict:
    """First failed request -> healthy again after the last failed one (see the module docstring)."""
    rows = requests(result)
    # the failures that overlap the window (a request in flight at a kill started before it); the
    # successes around them are looked for in the whole load
    w0, w1 = window or (float("-inf"), float("inf"))
    bad = [i for i, r in enumerate(rows) if not r["ok"] and r["end"] >= w0 and r["start"] < w1]
    if not bad:
        return record("serve_degraded_s", 0.0, requests=len(rows), window=list(window) if window else None,
                      note="no failed request")
    i0, i1 = bad[0], bad[-1]
    first, last = rows[i0], rows[i1]
    prev_ok = next((r for r in reversed(rows[:i0]) if r["ok"]), None)
    nexts = [r for r in rows[i1 + 1:] if r["ok"]]
    next_ok = min(nexts, key=lambda r: r["end"]) if nexts else None
    went_bad = Stamp(first["start"], prev_ok["start"] if prev_ok else first["start"], first["end"],
                     f"{LOAD_CLOCK}: first failed request (after the last success before it)")
    detail = {"window": list(window) if window else None, "failed": len(bad), "first_error": first["error"],
              "last_error": last["error"], "successes_in_between": sum(r["ok"] for r in rows[i0:i1 + 1])}
    if next_ok is None:
        return _span_record("serve_degraded_s", went_bad, None, note="never healthy again while the load ran",
                            **detail)
    good = Stamp(next_ok["end"], min(last["start"], next_ok["end"]), next_ok["end"],
                 f"{LOAD_CLOCK}: first success after the last failed request")
    return _span_record("serve_degraded_s", went_bad, good, **detail)


def scaleout(requested: Stamp | dict | None, second_ready: Stamp | dict | None,
             before: dict | None = None, after: dict | None = None) -> dict[str, dict]:
    """serve_scaleout_s, and with the load results at one and at two replicas the p50 ratio."""
    out = {"serve_scaleout_s": _span_record("serve_scaleout_s", stamp_of(requested), stamp_of(second_ready))}
    if before is not None and after is not None:
        b, a = before["latency_s"]["p50"], after["latency_s"]["p50"]
        out["serve_scaleout_p50_ratio"] = record("serve_scaleout_p50_ratio", a / b if a and b else None,
                                                 p50_one_s=b, p50_two_s=a,
                                                 throughput_one_rps=before["throughput_rps"],
                                                 throughput_two_rps=after["throughput_rps"])
    return out


def cost_per_1k(price: dict, nodes: int, gpus_per_node: int, billed_from: Stamp | dict | None,
                billed_to: Stamp | dict | None, ok_requests: int, throughput_rps: float | None = None) -> dict:
    """What 1,000 successful requests cost over the billed time (e.g. submitted -> released)."""
    per_s, how = rate(price, nodes, gpus_per_node)
    a, b = stamp_of(billed_from), stamp_of(billed_to)
    steady = per_s / throughput_rps * 1000 if throughput_rps else None
    detail = {**how, "usd_per_s": per_s, "ok_requests": ok_requests, "steady": steady}
    stamps = {"from": a, "to": b}
    if a is None or b is None or ok_requests <= 0:
        return record("serve_cost_per_1k_usd", None, sources={n: s.t for n, s in stamps.items() if s},
                      stamps=stamps, **detail, note="no billed window or no successful request")
    sp = Span.between(a, b)
    k = per_s * 1000 / ok_requests
    return record("serve_cost_per_1k_usd", sp.value * k, max(sp.lo, 0.0) * k, sp.hi * k,
                  {n: s.t for n, s in stamps.items()}, stamps, billed_s=sp.value, **detail)


def from_load(result: dict, window: tuple[float, float] | None = None) -> dict[str, dict]:
    """What one load result gives alone: latency, throughput, availability, failures, degraded time."""
    return {**latency(result), "serve_throughput_rps": throughput(result), **availability(result, window),
            "serve_degraded_s": degraded(result, window)}
