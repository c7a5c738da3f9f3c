"""The harness's own load balancer for Slurm serving jobs: the "second platform" part a Slurm site has
to build, because Slurm places a job on a node and says which, and nothing more.

An aiohttp reverse proxy on 127.0.0.1 (port 0: the kernel chooses), on a thread with its own event
loop, so the session's thread and the load generator's never share it. It forwards every request,
round-robin, to one of the backends ("ip:port") that a discovery callback returns (asked every
``refresh_s``, on a worker thread of its own: the callback runs squeue and reads files over the
cluster's transport, which may take a second; the proxy keeps serving with the last answer
meanwhile). A backend takes traffic only while GET /readyz answers 200 (checked every ``health_s``;
a new backend starts out of rotation, so a server still loading its model gets nothing); a
connection error on a forwarded request takes it out at once and retries once on another backend.

Everything it decides is logged with its time-stamp (``log()``): the evidence of what balancing the
harness had to do. The log is bounded (``LOG_MAX``; what was dropped is counted).

Its own added latency is measured per forwarded request (``overhead()``): the handler's time minus the
upstream round trip (reading the client's body, choosing, copying the answer), into an HdrHistogram.
It leaves out what aiohttp does before and after the handler (parsing, writing) and the extra
loopback hop, so it is a lower bound on what the proxy adds to a Slurm request's latency.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable

import aiohttp
from aiohttp import web
from hdrh.histogram import HdrHistogram

from ..errors import BackendError

LOG_MAX = 20_000
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
              "transfer-encoding", "upgrade", "host", "content-length"}
# a connection that never reached the backend (or was cut by its death): safe to send elsewhere
RETRYABLE = (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


class Balancer:
    def __init__(self, discover: Callable[[], list[str]], *, refresh_s: float = 1.0, health_s: float = 0.5,
                 health_timeout_s: float = 1.0, request_timeout_s: float = 30.0,
                 clock: Callable[[], float] = time.time):
        self.discover, self.refresh_s, self.health_s = discover, refresh_s, health_s
        self.health_timeout_s, self.request_timeout_s, self.clock = health_timeout_s, request_timeout_s, clock
        self._lock = threading.Lock()           # guards what other threads read: _backends, _log
        self._backends: dict[str, dict] = {}    # "ip:port" -> {"healthy", "since", "added", "served", "failed"}
        self._log: list[dict] = []
        self._dropped = 0
        self._overhead = HdrHistogram(1, 60_000_000, 3)   # µs, 1 µs .. 60 s
        self._rr = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="balancer-discover")
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.port: int | None = None

    # ------------------------------------------------------------------ the session's side (any thread)
    @property
    def url(self) -> str:
        if self.port is None:
            raise BackendError("the balancer is not running", tip="report this as a harness bug")
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 10.0) -> str:
        """Start the proxy's thread; return its URL once it listens."""
        if self._thread is not None:
            return self.url
        self._thread = threading.Thread(target=self._main, name="poc-balancer", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout_s) or self._error is not None:
            self.stop()
            raise BackendError(f"the harness's balancer did not start: {self._error or 'no answer'}",
                               tip="is 127.0.0.1 usable for a listening socket here?")
        self.note("started", None, f"listening on {self.url}")
        return self.url

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving, close every connection, join the thread; safe to repeat."""
        loop, thread = self._loop, self._thread
        if loop is not None and self._stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:   # the loop closed in between: nothing left to stop
                pass
        if thread is not None:
            thread.join(timeout_s)
        # a discovery call in flight ends within its transport's timeout; waiting leaves no thread behind
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.port is not None and (thread is None or not thread.is_alive()):
            self.note("stopped", None, "")

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def backends(self) -> list[dict]:
        """Now, per backend: {"endpoint", "healthy", "since", "added", "served", "failed"}."""
        with self._lock:
            return [{"endpoint": ep, **dict(b)} for ep, b in self._backends.items()]

    def log(self) -> dict:
        with self._lock:
            return {"entries": list(self._log), "dropped": self._dropped}

    def overhead(self) -> dict:
        """The proxy's own time per forwarded request (see the module docstring), in seconds."""
        with self._lock:
            h = self._overhead
            n = h.get_total_count()
            figs = {f"p{p}_s": h.get_value_at_percentile(p) / 1e6 if n else None for p in (50, 95, 99)}
            return {"count": n, **figs, "mean_s": h.get_mean_value() / 1e6 if n else None,
                    "max_s": h.get_max_value() / 1e6 if n else None,
                    "what": "handler time minus the upstream round trip (a lower bound on the proxy's latency)",
                    "histogram": h.encode().decode("ascii") if n else None}

    def _add_overhead(self, seconds: float) -> None:
        with self._lock:
            self._overhead.record_value(min(max(round(seconds * 1e6), 1), 60_000_000))

    def note(self, event: str, backend: str | None, why: str) -> None:
        with self._lock:
            if len(self._log) >= LOG_MAX:
                self._dropped += 1
                return
            self._log.append({"t": round(self.clock(), 3), "event": event, "backend": backend, "why": why})

    # ------------------------------------------------------------------ the balancer's thread
    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:   # noqa: BLE001 - reported to start() / kept for the log, never lost
            self._error = exc
            self.note("crashed", None, f"{type(exc).__name__}: {exc}")
        finally:
            self._started.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._proxy)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        # one pool for forwarded requests and health checks; no environment proxy for cluster addresses
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256), trust_env=False)
        tasks = []
        try:
            await site.start()
            self.port = runner.addresses[0][1]
            try:                           # the first list before anyone is told the URL (bounded)
                await asyncio.wait_for(self._refresh(), 10)
            except TimeoutError:
                self.note("discovery_error", None, "the first discovery took over 10 s; starting with none")
            self._started.set()
            tasks = [asyncio.create_task(self._every(self.refresh_s, self._refresh)),
                     asyncio.create_task(self._every(self.health_s, self._check_all))]
            await self._stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await runner.cleanup()
            await self._session.close()

    async def _every(self, period: float, fn) -> None:
        while True:   # _serve did the first round already (and a new backend is checked when added)
            await asyncio.sleep(period)
            await fn()

    async def _refresh(self) -> None:
        try:
            found = await asyncio.get_running_loop().run_in_executor(self._pool, self.discover)
        except Exception as exc:   # noqa: BLE001 - a failed discovery keeps the last list, and says so
            self.note("discovery_error", None, f"{type(exc).__name__}: {str(exc)[:300]}")
            return
        found = list(dict.fromkeys(str(e) for e in found or []))
        with self._lock:
            gone = [ep for ep in self._backends if ep not in found]
            new = [ep for ep in found if ep not in self._backends]
            for ep in gone:
                del self._backends[ep]
            for ep in new:
                self._backends[ep] = {"healthy": False, "since": None, "added": self.clock(), "served": 0, "failed": 0}
        for ep in gone:
            self.note("removed", ep, "discovery no longer lists it")
        for ep in new:
            self.note("added", ep, "discovered; out of rotation until /readyz answers 200")
        if new:
            await asyncio.gather(*(self._check(ep) for ep in new))

    async def _check_all(self) -> None:
        with self._lock:
            eps = list(self._backends)
        await asyncio.gather(*(self._check(ep) for ep in eps))

    async def _check(self, ep: str) -> None:
        why = ""
        try:
            async with self._session.get(f"http://{ep}/readyz",
                                         timeout=aiohttp.ClientTimeout(total=self.health_timeout_s)) as r:
                await r.read()
                ok = r.status == 200
                why = f"/readyz {r.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            ok, why = False, f"/readyz {type(exc).__name__}"
        self._set(ep, ok, why)

    def _set(self, ep: str, healthy: bool, why: str) -> None:
        with self._lock:
            b = self._backends.get(ep)
            if b is None or b["healthy"] == healthy:
                return
            b["healthy"], b["since"] = healthy, self.clock()
        self.note("healthy" if healthy else "unhealthy", ep, why)

    def _pick(self, exclude: set[str]) -> str | None:
        with self._lock:
            ready = [ep for ep, b in self._backends.items() if b["healthy"] and ep not in exclude]
            if not ready:
                return None
            self._rr = (self._rr + 1) % (1 << 30)
            return ready[self._rr % len(ready)]

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        t_in = time.perf_counter()
        upstream = 0.0
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        tried: set[str] = set()
        for attempt in (1, 2):   # one retry, on another backend, for a connection error
            ep = self._pick(tried)
            if ep is None:
                why = "no ready backend" if attempt == 1 else f"retry found no other ready backend than {sorted(tried)}"
                return web.json_response({"error": f"balancer: {why}"}, status=503)
            tried.add(ep)
            t_up = time.perf_counter()
            try:
                async with self._session.request(request.method, f"http://{ep}{request.rel_url}", data=body,
                                                 headers=headers, allow_redirects=False,
                                                 timeout=aiohttp.ClientTimeout(total=self.request_timeout_s)) as r:
                    data = await r.read()
                    upstream += time.perf_counter() - t_up
                    out = {k: v for k, v in r.headers.items() if k.lower() not in HOP_BY_HOP}
                    self._count(ep, "served")
                    resp = web.Response(body=data, status=r.status, headers=out)
                    self._add_overhead(time.perf_counter() - t_in - upstream)
                    return resp
            except RETRYABLE as exc:
                # a failed try's time is the backend's, not the proxy's
                upstream += time.perf_counter() - t_up
                self._count(ep, "failed")
                self._set(ep, False, f"forwarding: {type(exc).__name__}")
                if attempt == 1:
                    self.note("retry", ep, f"{type(exc).__name__}; sending the request to another backend")
            except TimeoutError:
                self._count(ep, "failed")
                return web.json_response({"error": f"balancer: {ep} did not answer in {self.request_timeout_s:g} s"},
                                         status=504)
        return web.json_response({"error": f"balancer: connection failed on {sorted(tried)}"}, status=502)

    def _count(self, ep: str, key: str) -> None:
        with self._lock:
            if ep in self._backends:
                self._backends[ep][key] += 1
