"""The load generator against a stub server on 127.0.0.1 with scripted latency and failures:
percentiles against a hand computation, the bounds, the allow-list, the histogram's round trip."""
from __future__ import annotations

import asyncio
import contextlib

import pytest
from aiohttp import web

from harness.errors import ConfigError
from harness.netutil import free_port
from harness.serve import load

BODY = {"inputs": [[0.0, 1.0]]}


@contextlib.asynccontextmanager
async def stub(script, replica=None):
    """A server whose i-th request (from 0) sleeps script(i)[0] seconds, then answers status script(i)[1];
    replica(i), if given, is the X-Poc-Replica header it answers with."""
    seen = []

    async def predict(request):
        i = len(seen)
        seen.append(await request.json())
        delay, status = script(i)
        await asyncio.sleep(delay)
        headers = {load.REPLICA_HEADER: replica(i)} if replica else None
        return web.json_response({"outputs": [[1.0, 2.0]]}, status=status, headers=headers)

    app = web.Application()
    app.add_routes([web.post("/predict", predict)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/predict", seen
    finally:
        await runner.cleanup()


def run_against(script, replica=None, **plan):
    async def go():
        async with stub(script, replica) as (url, seen):
            res = await load.run_async(load.Plan(url=url, body=BODY, **plan))
            return res, seen
    return asyncio.run(go())


def test_percentiles_match_a_hand_computation_within_the_histogram_precision():
    # 80% answer after 10 ms, 15% after 30 ms, 5% after 80 ms
    def script(i):
        k = i % 20
        return (0.08 if k == 0 else 0.03 if k <= 3 else 0.01), 200
    res, seen = run_against(script, requests=200, duration_s=30, clients=4)
    assert res["requests"] == res["ok"] == len(seen) == 200 and res["failed"] == 0 and res["errors"] == {}
    assert seen[0] == BODY
    exact = sorted(lat for lat, err in zip(res["log"]["latency_s"], res["log"]["error"], strict=True) if err is None)
    h = load.histogram(res)
    for p, key in ((50, "p50"), (95, "p95"), (99, "p99")):
        hand_us = round(load.nearest_rank(exact, p) * 1e6)
        got_us = round(res["latency_s"][key] * 1e6)
        # the histogram answers with the top of the bucket that holds the hand-computed value
        assert h.get_lowest_equivalent_value(got_us) <= hand_us <= got_us, (p, hand_us, got_us)
        assert abs(got_us - hand_us) <= hand_us * 1e-3
    assert 0.01 <= res["latency_s"]["p50"] < 0.03          # the script's 10 ms (plus the loop's overhead)
    assert 0.08 <= res["latency_s"]["p99"] <= res["latency_s"]["max"]
    assert res["throughput_rps"] == pytest.approx(res["ok"] / res["elapsed_s"])


def test_the_histogram_round_trips_and_the_timeline_adds_up():
    res, _ = run_against(lambda i: (0.002, 500 if i % 5 == 4 else 200), requests=50, duration_s=30, clients=2)
    assert res["ok"] == 40 and res["failed"] == 10 and res["errors"] == {"http_500": 10}
    h = load.histogram(res)
    assert h.get_total_count() == 40
    for p, key in ((50, "p50"), (95, "p95"), (99, "p99"), (99.9, "p99_9")):
        assert h.get_value_at_percentile(p) / 1e6 == res["latency_s"][key]
    assert h.get_max_value() / 1e6 == res["latency_s"]["max"]
    assert load.histogram({"histogram": {"data": h.encode().decode()}}).get_total_count() == 40
    tl = res["timeline"]
    assert sum(s["ok"] for s in tl) == 40 and sum(s["failed"] for s in tl) == 10
    assert [s["t"] for s in tl] == list(range(len(tl)))
    log = res["log"]
    assert len(log["start"]) == len(log["latency_s"]) == len(log["status"]) == len(log["error"]) == 50
    assert sorted(set(log["status"])) == [200, 500]


def test_the_request_count_bounds_the_load():
    res, seen = run_against(lambda i: (0.001, 200), requests=37, duration_s=30, clients=4)
    assert res["requests"] == len(seen) == 37 and res["stopped_by"] == "count"


def test_the_wall_clock_bounds_the_load():
    res, seen = run_against(lambda i: (0.05, 200), requests=100_000, duration_s=0.5, clients=3)
    assert res["stopped_by"] == "time"
    # no new request after 0.5 s; the ones in flight end within their 50 ms (generous for a busy machine)
    assert res["elapsed_s"] < 0.5 + 0.5
    assert res["requests"] == len(seen) <= 3 * (0.5 / 0.05 + 1)


def test_a_slow_answer_is_a_timeout():
    res, _ = run_against(lambda i: (1.0, 200), requests=4, duration_s=5, clients=2, timeout_s=0.2, error_pause_s=0)
    assert res["ok"] == 0 and res["errors"] == {"timeout": 4}
    assert res["latency_s"]["p50"] is None and res["throughput_rps"] == 0
    assert all(0.2 <= lat < 0.9 for lat in res["log"]["latency_s"])


def test_a_port_nobody_listens_on_fails_fast_and_the_pause_bounds_the_retries():
    url = f"http://127.0.0.1:{free_port()}/predict"
    res = load.run(load.Plan(url=url, body=BODY, requests=10_000, duration_s=0.5, clients=2, error_pause_s=0.1))
    assert res["ok"] == 0 and set(res["errors"]) == {"connect"}
    assert res["requests"] <= 2 * (0.5 / 0.1 + 2)


@pytest.mark.parametrize("plan", [
    {"requests": load.HARD_MAX_REQUESTS + 1, "duration_s": 10},
    {"requests": 0, "duration_s": 10},
    {"requests": 10, "duration_s": load.HARD_MAX_S + 1},
    {"requests": 10, "duration_s": 0},
    {"requests": 10, "duration_s": 10, "clients": 0},
    {"requests": 10, "duration_s": 10, "clients": load.HARD_MAX_CLIENTS + 1},
    {"requests": 10, "duration_s": 10, "timeout_s": 0},
])
def test_plans_beyond_the_hard_caps_are_refused(plan):
    with pytest.raises(ConfigError) as err:
        load.run(load.Plan(url="http://127.0.0.1:9/predict", body=BODY, **plan))
    assert "out of bounds" in err.value.message and err.value.tip


@pytest.mark.parametrize("addr, ok", [
    ("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("10.244.1.5", True), ("172.16.0.1", True),
    ("172.31.255.254", True), ("172.32.0.1", False), ("192.168.49.2", True), ("fd12:3456::1", True),
    ("::ffff:10.0.0.1", True), ("::ffff:8.8.8.8", False), ("8.8.8.8", False), ("2001:db8::1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("fe80::1%eth0", False),
])
def test_the_default_allow_list(addr, ok):
    assert load.loopback_or_private(addr) is ok


def test_addresses_that_are_not_allowed_are_refused_before_any_request():
    calls = []

    def allow(addr):
        calls.append(addr)
        return load.loopback_or_private(addr)
    for url, addrs in (("http://8.8.8.8:80/predict", ["8.8.8.8"]),
                       ("http://example.test:8000/predict", ["10.0.0.7", "93.184.216.34"])):
        with pytest.raises(load.AddressRefused) as err:
            load.run(load.Plan(url=url, body=BODY, requests=1, duration_s=1), allow=allow,
                     resolver=lambda host, port, addrs=addrs: addrs)
        assert "93.184.216.34" in err.value.message or "8.8.8.8" in err.value.message
        assert err.value.tip
    assert calls == ["8.8.8.8", "10.0.0.7", "93.184.216.34"]
    # a site's own allow function can narrow the default: loopback refused too
    with pytest.raises(load.AddressRefused):
        load.check_target("http://127.0.0.1:8000/", allow=lambda a: False)
    assert load.check_target("http://localhost:8000/", resolver=lambda h, p: ["127.0.0.1", "::1"]) == ["127.0.0.1",
                                                                                                      "::1"]
    with pytest.raises(ConfigError):
        load.check_target("ftp://127.0.0.1/x")


def test_a_readiness_probe_stops_at_the_first_success():
    res, seen = run_against(lambda i: (0.001, 503 if i < 3 else 200), requests=100, duration_s=10, clients=1,
                            stop_after_ok=1, error_pause_s=0.01)
    assert res["stopped_by"] == "ok" and res["requests"] == len(seen) == 4
    assert res["errors"] == {"http_503": 3} and res["log"]["status"] == [503, 503, 503, 200]


def test_a_fault_phase_stops_once_the_service_has_been_healthy_for_settle_s():
    # 5 failures, then answers: it stops about 0.3 s after the last failure, long before its 10 s bound
    res, _ = run_against(lambda i: (0.002, 503 if 10 <= i < 15 else 200), requests=100_000, duration_s=10,
                         clients=1, settle_s=0.3, error_pause_s=0.01)
    assert res["stopped_by"] == "settled" and res["failed"] == 5
    assert 0.3 <= res["elapsed_s"] < 3
    # without a failure there is nothing to settle: the time bound ends it
    res, _ = run_against(lambda i: (0.002, 200), requests=100_000, duration_s=0.5, clients=1, settle_s=0.1)
    assert res["stopped_by"] == "time" and res["failed"] == 0


def test_each_request_keeps_the_replica_that_answered_it_failures_too():
    res, _ = run_against(lambda i: (0.0, 404 if i % 3 == 2 else 200), replica=lambda i: f"pod-{i % 2}/7",
                         requests=12, duration_s=10, clients=1, error_pause_s=0)
    log = res["log"]
    assert log["replica"] == [f"pod-{i % 2}/7" for i in range(12)]
    assert [e for e, r in zip(log["error"], log["replica"], strict=True) if r == "pod-0/7"].count("http_404") == 2
    # a server that names no replica, and a port nobody listens on, leave None
    res, _ = run_against(lambda i: (0.0, 200), requests=3, duration_s=10, clients=1)
    assert res["log"]["replica"] == [None] * 3
