"""The serving figures, from stored load results (harness/serve/load.py) and time-stamps.

Pure, so `poc rederive` can recompute them from the raw evidence. Every figure is named serve_*:
the report keeps those apart per scenario ("serve_degraded_s:kill_server"). Each is the project's
metric record ({value, unit, lo, hi, uncertainty, sources, stamps, detail}; harness/metrics/common.py),
with the units common.UNITS gives them.

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

Two more per fault phase, computed by the report from the same stored requests (not stored as records,
so that committed campaigns keep re-deriving as they were), the primary figures of a fault because no
harness constant enters them:
time_to_success      the fault's instant -> the first successful answer to a request started after the
                     last failed one (after the fault itself where nothing failed): when the service was
                     back, counted from the fault rather than from the first failure.
window_availability  1 - (degraded time inside [fault, fault + WINDOW_S]) / WINDOW_S: the same fixed window
                     from the fault instant on every platform. Time-weighted availability over the phase
                     is ≈ settle / (settle + degraded), the phase's settle time (a harness constant) in
                     disguise; this figure takes the degraded interval the requests bound and a window no
                     phase length sets. After the phase's load stopped (the service had answered for the
                     settle time) it counts as available; a service never healthy again while the load ran
                     counts as down to the window's end.
"""
from __future__ import annotations

from ..metrics.common import UNITS as COMMON_UNITS
from ..metrics.common import _r
from ..metrics.cost import rate
from ..timing import Span, Stamp, stamp_of
from .load import histogram

UNITS = {k: v for k, v in COMMON_UNITS.items() if k.startswith("serve_")}
# for the report's direction of "better" (stats.HIGHER_IS_BETTER)
HIGHER_IS_BETTER = {"serve_throughput_rps", "serve_availability"}
LOAD_CLOCK = "load generator clock (time.time start + monotonic latency)"


def record(name: str, value, lo=None, hi=None, sources: dict | None = None,
           stamps: dict[str, Stamp | None] | None = None, **detail) -> dict:
    """common._record's shape (a "name:phase" key has its name's unit)."""
    unit = COMMON_UNITS[name.split(":", 1)[0]]
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


WINDOW_S = 120.0   # from the fault instant: longer than either fault's outage seen here (a lost node's ~75 s)


def time_to_success(result: dict, fault_t: float) -> dict:
    """{value, lo, hi}: fault -> the first successful answer to a request started after the last failure (after
    the fault where none failed). lo: that request's start (the service answered from then on); hi: its end."""
    rows = [r for r in requests(result) if r["end"] >= fault_t]
    failed = [r for r in rows if not r["ok"]]
    since = max((r["start"] for r in failed), default=fault_t)
    ok = [r for r in rows if r["ok"] and r["start"] >= since]
    if not ok:
        return {"value": None, "lo": None, "hi": None, "failed": len(failed),
                "note": "no success after the last failure while the load ran"}
    first = min(ok, key=lambda r: r["end"])
    return {"value": first["end"] - fault_t, "lo": max(first["start"] - fault_t, 0.0), "hi": first["end"] - fault_t,
            "failed": len(failed)}


def window_availability(result: dict, fault_t: float, window_s: float = WINDOW_S,
                        load_window: tuple[float, float] | None = None) -> dict:
    """{value, lo, hi, degraded_s, window_s, load_s}: 1 - degraded seconds inside [fault, fault + window_s] / window_s,
    the degraded interval as degraded() bounds it (its lo/hi give this figure's hi/lo)."""
    deg = degraded(result, load_window)
    end = fault_t + window_s
    load_end = result["started"] + result["elapsed_s"]
    out = {"window_s": window_s, "load_s": max(load_end - fault_t, 0.0)}
    if deg["value"] == 0.0 and deg["detail"].get("note") == "no failed request":
        return {**out, "value": 1.0, "lo": 1.0, "hi": 1.0, "degraded_s": 0.0}
    stamps = deg.get("stamps") or {}
    bad, good = stamps.get("from"), stamps.get("to")
    if bad is None:
        return {**out, "value": None, "lo": None, "hi": None, "degraded_s": None}

    def down(a: float, b: float) -> float:
        return max(0.0, min(b, end) - max(a, fault_t))
    if good is None:   # never healthy again while the load ran: down until the window's end
        v = down(bad["t"], end)
        return {**out, "value": 1 - v / window_s, "lo": 1 - down(bad["lo"], end) / window_s,
                "hi": 1 - down(bad["hi"], end) / window_s, "degraded_s": v}
    v = down(bad["t"], good["t"])
    longest, shortest = down(bad["lo"], good["hi"]), down(bad["hi"], good["lo"])
    return {**out, "value": 1 - v / window_s, "lo": 1 - longest / window_s, "hi": 1 - shortest / window_s,
            "degraded_s": v}


def _fault_window(phase: dict) -> tuple[float, float] | None:
    """From the fault to the end of its phase's load: the requests a fault can have touched."""
    fault, res = phase.get("fault") or {}, phase["load"]
    if fault.get("t") is None:
        return None
    return float(fault["t"]), res["started"] + res["elapsed_s"] + res["plan"]["timeout_s"]


def _billed(ev: dict) -> list[tuple[Stamp, Stamp]]:
    """Each replica's held time: the first from its submit, the second from when it was asked for,
    both until teardown began (a replica holds its node until it is deleted or cancelled)."""
    dep, td, scale = ev.get("deploy") or {}, ev.get("teardown") or {}, ev.get("scale") or {}
    end_lo, end_hi = td.get("t0"), td.get("t")
    if dep.get("submitted") is None or end_lo is None or end_hi is None:
        return []
    end = Stamp.between(float(end_lo), float(end_hi), "harness clock around the teardown")
    spans = [(submitted(dep), end)]
    if scale.get("asked") is not None:
        spans.append((Stamp.exact(float(scale["asked"]), "harness clock: second replica asked for"), end))
    return spans


def submitted(dep: dict) -> Stamp:
    """The deploy call's instant, bracketed by the harness clock before and after it."""
    a = float(dep["submitted"])
    return Stamp.between(a, float(dep.get("submitted_after", a)), "harness clock around the deploy call")


def from_evidence(ev: dict, price: dict, gpus_per_node: int = 0) -> dict[str, dict]:
    """Every serve_* figure from raw["serve"] (pure: `poc rederive` runs this on the stored copy).
    Keys: the steady phase's figures plain; a fault phase's "name:kill_server", "name:node_loss";
    the two-replica phase's "name:two_replicas"."""
    out: dict[str, dict] = {}
    phases = {p["name"]: p for p in ev.get("phases") or []}
    if "ready" in phases and ev.get("deploy"):
        out["serve_ready_s"] = ready(submitted(ev["deploy"]), first_ok(phases["ready"]["load"]))
    if "steady" in phases:
        out.update(from_load(phases["steady"]["load"]))
    for name in ("kill_server", "node_loss"):
        if name in phases:
            figs = from_load(phases[name]["load"], _fault_window(phases[name]))
            out.update({f"{k}:{name}": v for k, v in figs.items()
                        if k in ("serve_availability", "serve_failed_requests", "serve_degraded_s")})
    if "two_replicas" in phases:
        two = phases["two_replicas"]["load"]
        figs = {**latency(two), "serve_throughput_rps": throughput(two)}
        out.update({f"{k}:two_replicas": v for k, v in figs.items()})
    scale = ev.get("scale") or {}
    if scale.get("asked") is not None:
        out.update(scaleout(Stamp.exact(float(scale["asked"]), "harness clock: second replica asked for"),
                            Stamp.exact(float(scale["second_ready"]), f"{LOAD_CLOCK}: the new replica's first answer")
                            if scale.get("second_ready") is not None else None,
                            phases["steady"]["load"] if "steady" in phases else None,
                            phases["two_replicas"]["load"] if "two_replicas" in phases else None))
    spans = _billed(ev)
    if spans:
        ok = sum(p["load"]["ok"] for p in phases.values())
        steady_rps = (phases.get("steady") or {}).get("load", {}).get("throughput_rps")
        out["serve_cost_per_1k_usd"] = cost_per_1k_spans(price, gpus_per_node, spans, ok, steady_rps)
    return out


def cost_per_1k_spans(price: dict, gpus_per_node: int, spans: list[tuple[Stamp, Stamp]], ok_requests: int,
                      throughput_rps: float | None) -> dict:
    """cost_per_1k over several replicas' held spans (one node each): the sum of their seconds."""
    per_s, how = rate(price, 1, gpus_per_node)
    sps = [Span.between(a, b) for a, b in spans]
    billed, lo, hi = sum(s.value for s in sps), sum(max(s.lo, 0.0) for s in sps), sum(s.hi for s in sps)
    steady = per_s / throughput_rps * 1000 if throughput_rps else None
    stamps = {f"replica{i + 1}_{k}": s for i, (a, b) in enumerate(spans) for k, s in (("from", a), ("to", b))}
    detail = {**how, "usd_per_node_s": per_s, "ok_requests": ok_requests, "steady": steady, "billed_s": billed,
              "replica_spans_s": [s.value for s in sps]}
    if ok_requests <= 0:
        return record("serve_cost_per_1k_usd", None, stamps=stamps, **detail, note="no successful request")
    k = per_s * 1000 / ok_requests
    return record("serve_cost_per_1k_usd", billed * k, lo * k, hi * k, {n: s.t for n, s in stamps.items()},
                  stamps, **detail)
