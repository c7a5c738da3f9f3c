"""The harness's balancer (harness/serve/balancer.py) against real local aiohttp servers: round-robin
over ready backends only, a failed backend taken out and its request retried elsewhere, discovery
changes followed, and a clean stop."""
from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from harness.serve.balancer import Balancer


class Backend:
    """A tiny inference server on its own thread: /readyz (settable) and /predict answering its name."""

    def __init__(self, name: str, ready: bool = True):
        self.name, self.ready, self.hits = name, ready, 0
        self._loop = asyncio.new_event_loop()
        self._up = threading.Event()
        self._t = threading.Thread(target=self._main, daemon=True)
        self._t.start()
        assert self._up.wait(10)

    def _main(self):
        asyncio.set_event_loop(self._loop)

        async def readyz(_):
            return web.json_response({"ready": self.ready}, status=200 if self.ready else 503)

        async def predict(request):
            self.hits += 1
            body = await request.json()
            return web.json_response({"who": self.name, "echo": body, "path": request.path_qs})

        app = web.Application()
        app.add_routes([web.get("/readyz", readyz), web.post("/predict", predict)])
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.endpoint = f"127.0.0.1:{self._runner.addresses[0][1]}"
        self._up.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def stop(self):
        if self._t.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._t.join(10)


def post(url: str, body: dict | None = None, timeout: float = 5) -> tuple[int, dict]:
    req = urllib.request.Request(url + "/predict?x=1", data=json.dumps(body or {"inputs": [[1]]}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait(what, probe, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if probe():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def servers():
    made: list[Backend] = []
    yield lambda name, ready=True: made.append(Backend(name, ready)) or made[-1]
    for b in made:
        b.stop()


def healthy(bal) -> set[str]:
    return {b["endpoint"] for b in bal.backends() if b["healthy"]}


def test_round_robin_over_ready_backends_only_and_a_backend_joins_once_ready(servers):
    a, b = servers("a"), servers("b", ready=False)
    bal = Balancer(lambda: [a.endpoint, b.endpoint], refresh_s=0.2, health_s=0.1)
    url = bal.start()
    try:
        assert url.startswith("http://127.0.0.1:")
        wait("a healthy", lambda: healthy(bal) == {a.endpoint})
        whos = [post(url)[1]["who"] for _ in range(6)]
        assert whos == ["a"] * 6          # b is discovered but its /readyz says 503
        b.ready = True
        wait("b healthy", lambda: healthy(bal) == {a.endpoint, b.endpoint})
        answers = [post(url, {"inputs": [[i]]}) for i in range(10)]
        assert [s for s, _ in answers] == [200] * 10
        whos = [d["who"] for _, d in answers]
        assert whos.count("a") == 5 and whos.count("b") == 5 and whos[0] != whos[1]   # alternating
        assert answers[3][1]["echo"] == {"inputs": [[3]]} and answers[3][1]["path"] == "/predict?x=1"
        served = {x["endpoint"]: x["served"] for x in bal.backends()}
        assert served[b.endpoint] == 5
        # its own time per forwarded request: every one counted, far below a round trip's
        ov = bal.overhead()
        assert ov["count"] == 16 and 0 < ov["p50_s"] <= ov["p99_s"] < 0.05 and ov["histogram"]
        events = [(e["event"], e["backend"]) for e in bal.log()["entries"]]
        assert ("added", b.endpoint) in events and ("healthy", b.endpoint) in events
        assert events.index(("added", b.endpoint)) < events.index(("healthy", b.endpoint))
    finally:
        bal.stop()


def test_a_dead_backend_is_taken_out_and_its_request_retried_on_another(servers):
    a, b = servers("a"), servers("b")
    bal = Balancer(lambda: [a.endpoint, b.endpoint], refresh_s=0.2, health_s=5.0)   # no health check in time
    url = bal.start()
    try:
        wait("both healthy", lambda: len(healthy(bal)) == 2)
        b.stop()   # connection refused from now on; the health check would only notice in 5 s
        answers = [post(url) for _ in range(6)]
        assert [s for s, _ in answers] == [200] * 6 and {d["who"] for _, d in answers} == {"a"}
        assert healthy(bal) == {a.endpoint}
        entries = bal.log()["entries"]
        assert any(e["event"] == "retry" and e["backend"] == b.endpoint for e in entries), entries
        assert any(e["event"] == "unhealthy" and e["backend"] == b.endpoint and "forwarding" in e["why"]
                   for e in entries)
        a.stop()
        status, body = post(url)
        assert status in (502, 503) and "balancer" in body["error"]
    finally:
        bal.stop()


def test_discovery_changes_are_followed_and_a_failing_discovery_keeps_the_last_list(servers):
    a, b = servers("a"), servers("b")
    found = {"list": [a.endpoint], "fail": False}

    def discover():
        if found["fail"]:
            raise RuntimeError("squeue: slurmctld not responding")
        return list(found["list"])

    bal = Balancer(discover, refresh_s=0.1, health_s=0.1)
    url = bal.start()
    try:
        wait("a healthy", lambda: healthy(bal) == {a.endpoint})
        found["list"] = [b.endpoint]
        wait("b replaces a", lambda: healthy(bal) == {b.endpoint})
        assert {d["who"] for _, d in (post(url) for _ in range(4))} == {"b"}
        found["fail"] = True
        wait("a discovery error logged", lambda: any(e["event"] == "discovery_error" for e in bal.log()["entries"]))
        assert healthy(bal) == {b.endpoint} and post(url)[0] == 200
        entries = bal.log()["entries"]
        assert ("removed", a.endpoint) in [(e["event"], e["backend"]) for e in entries]
        assert all(isinstance(e["t"], float) for e in entries)
    finally:
        bal.stop()


def test_no_backend_answers_503_and_stop_leaves_no_thread():
    before = {t.name for t in threading.enumerate()}
    bal = Balancer(lambda: [], refresh_s=0.1, health_s=0.1)
    url = bal.start()
    status, body = post(url)
    assert status == 503 and "no ready backend" in body["error"]
    bal.stop()
    bal.stop()   # idempotent
    assert not bal.running()
    left = {t.name for t in threading.enumerate()} - before
    assert not [n for n in left if "balancer" in n], left
    with pytest.raises(OSError):
        post(url, timeout=2)
    assert [e["event"] for e in bal.log()["entries"]][::len(bal.log()["entries"]) - 1] == ["started", "stopped"]
