"""The serve_* figures from hand-made load results and stamps (harness/serve/metrics.py)."""
from __future__ import annotations

import pytest
from hdrh.histogram import HdrHistogram

from harness.metrics import common
from harness.serve import load
from harness.serve import metrics as sm
from harness.timing import Stamp

T0 = 1_700_000_000.0


def result(rows, elapsed_s=10.0, clients=4):
    """A load result as load.summarise writes it, from (start offset, latency, error) rows."""
    h = HdrHistogram(load.HIST_LOWEST_US, load.HIST_HIGHEST_US, load.HIST_DIGITS)
    for _, lat, err in rows:
        if err is None:
            h.record_value(round(lat * 1e6))
    ok = sum(err is None for *_, err in rows)
    return {"started": T0, "elapsed_s": elapsed_s, "stopped_by": "count", "plan": {"clients": clients},
            "ok": ok, "failed": len(rows) - ok, "latency_s": {"p50": None},
            "histogram": {"data": h.encode().decode()},
            "log": {"start": [s for s, *_ in rows], "latency_s": [lat for _, lat, _ in rows],
                    "status": [200 if e is None else None for *_, e in rows], "error": [e for *_, e in rows]}}


# one request every 0.1 s taking 0.02 s; the server dies for the requests started in [2.0, 3.0)
FAULT = [(i / 10, 0.02, "connect" if 20 <= i < 25 else "http_503" if 25 <= i < 30 else None) for i in range(50)]


def test_records_have_the_projects_shape():
    mine = sm.record("queue_s", 1.5, 1.0, 2.0, {"a": 1.0}, {"s": Stamp.exact(T0, "x")}, note="n")
    theirs = common._record("queue_s", 1.5, 1.0, 2.0, {"a": 1.0}, {"s": Stamp.exact(T0, "x")}, {"note": "n"})
    assert mine == theirs
    # common.UNITS names every serve_* figure; this module reads them from there
    assert sm.UNITS and all(k.startswith("serve_") and common.UNITS[k] == u for k, u in sm.UNITS.items())
    assert set(sm.UNITS) >= sm.HIGHER_IS_BETTER


def test_latency_percentiles_from_the_stored_histogram_with_their_bucket():
    rows = [(i * 0.01, (i + 1) / 1000, None) for i in range(100)]     # 1 ms .. 100 ms
    got = sm.latency(result(rows))
    # nearest rank: p50 is the 50th value (50 ms), p95 the 95th, p99 the 99th; buckets of 3 digits
    for p, want in ((50, 0.050), (95, 0.095), (99, 0.099)):
        m = got[f"serve_latency_p{p}_s"]
        assert m["lo"] <= want <= m["hi"] and m["value"] == pytest.approx(want, rel=1e-3)
        assert m["unit"] == "s" and m["detail"]["count"] == 100 and m["detail"]["max_s"] == pytest.approx(0.1, rel=1e-3)
    empty = sm.latency(result([(0.0, 0.1, "timeout")]))
    assert empty["serve_latency_p99_s"]["value"] is None


def test_throughput_and_availability():
    res = result(FAULT, elapsed_s=5.0)
    assert sm.throughput(res)["value"] == pytest.approx(40 / 5.0)
    whole = sm.availability(res)
    assert whole["serve_availability"]["value"] == pytest.approx(40 / 50)
    assert whole["serve_failed_requests"]["value"] == 10
    assert whole["serve_failed_requests"]["detail"]["errors"] == {"connect": 5, "http_503": 5}
    # a window around the fault: [1.5 s, 3.5 s) holds 20 requests, 10 of them failed
    win = sm.availability(res, (T0 + 1.5, T0 + 3.5))
    assert win["serve_availability"]["value"] == pytest.approx(0.5)
    assert win["serve_availability"]["detail"]["requests"] == 20
    assert sm.availability(res, (T0 + 100, T0 + 200))["serve_availability"]["value"] is None


def test_degraded_from_the_first_failure_to_healthy_with_its_bounds():
    m = sm.degraded(result(FAULT))
    # first failure started at 2.0; the first success after the last failure (2.9) ended at 3.0 + 0.02
    assert m["value"] == pytest.approx(3.02 - 2.0)
    # bad after the last success started (1.9) and before the first failure ended (2.02);
    # good after the last failure started (2.9) and before the next success ended (3.02)
    assert m["lo"] == pytest.approx(2.9 - 2.02) and m["hi"] == pytest.approx(3.02 - 1.9)
    assert m["lo"] <= m["value"] <= m["hi"]
    assert m["detail"]["failed"] == 10 and m["detail"]["first_error"] == "connect"
    assert m["detail"]["last_error"] == "http_503" and m["stamps"]["from"]["t"] == pytest.approx(T0 + 2.0)
    # a window that starts mid-outage: the failures overlapping it, the successes around them from the whole load
    late = sm.degraded(result(FAULT), (T0 + 2.41, T0 + 10))
    assert late["detail"]["failed"] == 6 and late["stamps"]["from"]["t"] == pytest.approx(T0 + 2.4)
    assert late["hi"] == pytest.approx(3.02 - 1.9) and late["value"] == pytest.approx(3.02 - 2.4)
    assert sm.degraded(result(FAULT), (T0 + 3.5, T0 + 10))["value"] == 0.0
    clean = sm.degraded(result([(0.0, 0.01, None)]))
    assert clean["value"] == 0.0 and clean["detail"]["note"] == "no failed request"
    never = sm.degraded(result([(0.0, 0.01, None), (0.1, 0.01, "connect")]))
    assert never["value"] is None and "never healthy" in never["detail"]["note"]


def test_a_flapping_service_is_degraded_until_after_its_last_failure():
    rows = [(0.0, 0.01, None), (1.0, 0.01, "reset"), (2.0, 0.01, None), (3.0, 0.01, "timeout"), (4.0, 0.01, None)]
    m = sm.degraded(result(rows))
    assert m["value"] == pytest.approx(4.01 - 1.0) and m["detail"]["successes_in_between"] == 1


def test_ready_from_submit_to_the_first_successful_response():
    res = result([(0.0, 0.01, "connect"), (0.5, 0.2, None), (0.6, 0.05, None)])
    first = sm.first_ok(res)
    assert first.t == pytest.approx(T0 + 0.65)          # the earliest-ending success, not the earliest started
    submitted = Stamp.truncated(T0 - 12, "kube-apiserver creationTimestamp (whole s)")
    m = sm.ready(submitted, first.to_json())
    assert m["value"] == pytest.approx(12.65 - 0.5) and m["lo"] < m["value"] < m["hi"]
    assert m["hi"] - m["lo"] == pytest.approx(1.0, abs=1e-5) and m["unit"] == "s"
    assert sm.ready(submitted, None)["value"] is None
    assert sm.first_ok(result([(0.0, 0.01, "connect")])) is None


def test_scaleout_and_the_latency_it_buys():
    one = {"latency_s": {"p50": 0.040}, "throughput_rps": 100.0}
    two = {"latency_s": {"p50": 0.025}, "throughput_rps": 160.0}
    got = sm.scaleout(Stamp.exact(T0, "asked"), Stamp.exact(T0 + 7.5, "first answer"), one, two)
    assert got["serve_scaleout_s"]["value"] == pytest.approx(7.5)
    assert got["serve_scaleout_p50_ratio"]["value"] == pytest.approx(0.625)
    assert got["serve_scaleout_p50_ratio"]["detail"]["throughput_two_rps"] == 160.0
    assert set(sm.scaleout(None, None)) == {"serve_scaleout_s"}


def test_cost_per_1000_requests_from_the_price_and_the_billed_time():
    price = {"usd_per_hour": 3.6, "unit": "node", "sets": {}, "price_set": None,
             "overhead_usd_per_hour": 0.0, "utilisation": 1.0}
    a, b = Stamp.truncated(T0, "submit (whole s)"), Stamp.exact(T0 + 100.5, "released")
    m = sm.cost_per_1k(price, 2, 0, a, b, ok_requests=5000, throughput_rps=50.0)
    # 2 nodes x 3.6 USD/h = 0.002 USD/s; 100 s billed; 5,000 requests -> 0.04 USD per 1,000
    assert m["value"] == pytest.approx(0.002 * 100.0 / 5)
    assert m["lo"] == pytest.approx(0.002 * 99.5 / 5) and m["hi"] == pytest.approx(0.002 * 100.500001 / 5)
    assert m["detail"]["steady"] == pytest.approx(0.002 / 50 * 1000) and m["unit"] == "USD"
    gpu = dict(price, unit="gpu", sets={"spot": 1.0}, price_set="spot")
    assert sm.cost_per_1k(gpu, 1, 4, a, b, 5000)["detail"]["units"] == 4
    assert sm.cost_per_1k(price, 1, 0, a, b, 0)["value"] is None


def test_from_load_names_every_figure():
    got = sm.from_load(result(FAULT, elapsed_s=5.0))
    assert set(got) == {"serve_latency_p50_s", "serve_latency_p95_s", "serve_latency_p99_s", "serve_throughput_rps",
                        "serve_availability", "serve_failed_requests", "serve_degraded_s"}
    assert all(m["unit"] == sm.UNITS[k] for k, m in got.items())
