"""A bounded closed-loop load generator for the inference server, the same on every platform.

Closed loop: `clients` concurrent clients, each sending its next request when its last one was
answered (or failed), so the offered load follows the server's speed and a slow server is not
buried under a queue the generator made. Bounded twice, both required: a request count and a
wall-clock limit, each under a hard cap (HARD_MAX_REQUESTS, HARD_MAX_S), so no plan can run away.

Only to allowed addresses: a load generator pointed at someone else's service is an attack, and
this one's targets are the clusters on this machine: loopback, or the private addresses Docker's
bridges, the pod network and a Service's ClusterIP use (RFC 1918, and ULA fc00::/7 for IPv6).
`allow` decides per address (a parameter, so a site can narrow it to its own subnets); a name is
resolved once and every address it gives must be allowed (a guard against mistakes, not against
a hostile DNS server).

Every request's start (time.time), latency (a monotonic clock), status, error kind and the replica
that answered (the server's X-Poc-Replica header, passed on by a balancer; None without one) is kept;
successful latencies go into an HdrHistogram (the `hdrhistogram` package, HdrHistogram_py: the
same algorithm and V2 encoding as the Java/C libraries, so the stored histogram can be re-read by
any of them), in microseconds from 1 µs to 600 s with 3 significant digits (a value's bucket is
within 0.1% of it). Failed requests are counted by kind and kept out of the latency figures: a
refused connection answers in microseconds and would make a dead server look fast.

After a failed request a client pauses `error_pause_s` before its next one: without it, 4 clients
against a refused port would spend a 2,000-request budget in milliseconds and the recovery would
go unseen. The pause is in the result; it bounds how finely a recovery can be timed.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

import aiohttp
from hdrh.histogram import HdrHistogram

from ..errors import ConfigError, PocError

RESULT_SCHEMA = 1
HARD_MAX_REQUESTS = 100_000
HARD_MAX_S = 600.0
HARD_MAX_CLIENTS = 256
# The histogram's range and precision (µs): 1 µs .. 600 s (the longest allowed timeout), 3 digits.
HIST_LOWEST_US, HIST_HIGHEST_US, HIST_DIGITS = 1, 600_000_000, 3
PERCENTILES = (50.0, 95.0, 99.0, 99.9)
REPLICA_HEADER = "X-Poc-Replica"   # harness/data/serve/serve_model.py's, "<host>/<pid>"
PRIVATE_NETS = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))


class LoadError(PocError):
    """The load generator could not run as asked."""


class AddressRefused(LoadError):
    """The target is not an address this generator may load."""


def loopback_or_private(addr: str) -> bool:
    """The default allow-list: loopback, RFC 1918 and ULA (IPv4-mapped IPv6 judged as its IPv4)."""
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or any(ip in net for net in PRIVATE_NETS if net.version == ip.version)


def resolve(host: str, port: int) -> list[str]:
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)})
    except socket.gaierror as exc:
        raise LoadError(f"cannot resolve {host!r}: {exc}", "give the endpoint's IP address") from exc


def check_target(url: str, allow: Callable[[str], bool] = loopback_or_private,
                 resolver: Callable[[str, int], list[str]] = resolve) -> list[str]:
    """The addresses `url` reaches, once every one of them is allowed; AddressRefused otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"not an http(s) URL with a host: {url!r}", "e.g. http://10.244.1.5:8000")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addrs = resolver(parts.hostname, port)
    refused = [a for a in addrs if not allow(a)]
    if not addrs or refused:
        raise AddressRefused(f"refusing to load {url}: {', '.join(refused) or 'no address'} is not an allowed address",
                             "the load generator only targets loopback and this machine's private cluster networks "
                             "(RFC 1918, ULA); pass an allow function to widen or narrow that on purpose")
    return addrs


@dataclass(frozen=True)
class Plan:
    url: str                    # the full endpoint, e.g. http://127.0.0.1:8000/predict
    body: dict                  # the JSON every request posts
    requests: int               # at most this many requests in all
    duration_s: float           # and no new request after this many seconds
    clients: int = 4
    timeout_s: float = 5.0      # per request, connect to last byte
    error_pause_s: float = 0.05
    stop_after_ok: int = 0      # > 0: stop at that many successes (a readiness probe: submit -> first answer)
    # > 0: once a request has failed, stop when none has failed for this long and one succeeded since (a
    # fault phase ends once the service is healthy again, instead of running out its whole bound)
    settle_s: float = 0.0

    def check(self) -> None:
        bad = []
        if not 1 <= self.requests <= HARD_MAX_REQUESTS:
            bad.append(f"requests {self.requests} (1..{HARD_MAX_REQUESTS})")
        if not 0 < self.duration_s <= HARD_MAX_S:
            bad.append(f"duration_s {self.duration_s} (0..{HARD_MAX_S:g})")
        if not 1 <= self.clients <= HARD_MAX_CLIENTS:
            bad.append(f"clients {self.clients} (1..{HARD_MAX_CLIENTS})")
        if not 0 < self.timeout_s <= HARD_MAX_S:
            bad.append(f"timeout_s {self.timeout_s} (0..{HARD_MAX_S:g})")
        if not 0 <= self.settle_s <= HARD_MAX_S:
            bad.append(f"settle_s {self.settle_s} (0..{HARD_MAX_S:g})")
        if self.stop_after_ok < 0:
            bad.append(f"stop_after_ok {self.stop_after_ok} (>= 0)")
        if not 0 <= self.error_pause_s <= 10:
            bad.append(f"error_pause_s {self.error_pause_s} (0..10)")
        if bad:
            raise ConfigError(f"load plan out of bounds: {'; '.join(bad)}",
                              "the hard caps keep a load test bounded; split a longer test into several")


def error_kind(exc: BaseException) -> str:
    """A short, stable name for what went wrong (counted per kind in the result)."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect"           # refused, unreachable: nothing listens (yet)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "disconnected"      # the server went away mid-request or closed a kept-alive connection
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "payload"
    if isinstance(exc, aiohttp.ClientOSError):
        return "reset"             # e.g. connection reset by peer
    return type(exc).__name__


class Recorder:
    """Every request's outcome, in the order they ended; the histogram of the successful ones."""

    def __init__(self):
        self.hist = HdrHistogram(HIST_LOWEST_US, HIST_HIGHEST_US, HIST_DIGITS)
        self.start: list[float] = []
        self.latency: list[float] = []
        self.status: list[int | None] = []
        self.error: list[str | None] = []
        self.replica: list[str | None] = []

    def add(self, start: float, latency_s: float, status: int | None, error: str | None,
            replica: str | None = None) -> None:
        self.start.append(start)
        self.latency.append(latency_s)
        self.status.append(status)
        self.error.append(error)
        self.replica.append(replica)
        if error is None:
            us = min(max(round(latency_s * 1e6), HIST_LOWEST_US), HIST_HIGHEST_US)
            self.hist.record_value(us)


async def _one(session: aiohttp.ClientSession, url: str, data: bytes, timeout: aiohttp.ClientTimeout):
    """(status, error kind or None, replica or None) of one POST; the body is read, so the whole answer
    is timed. The replica is named on failed answers too: a 404 from a replica says who answered it."""
    try:
        async with session.post(url, data=data, headers={"Content-Type": "application/json"},
                                timeout=timeout) as resp:
            await resp.read()
            return (resp.status, None if resp.status == 200 else f"http_{resp.status}",
                    resp.headers.get(REPLICA_HEADER))
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return None, error_kind(exc), None


async def run_async(plan: Plan, *, allow: Callable[[str], bool] = loopback_or_private,
                    resolver: Callable[[str, int], list[str]] = resolve,
                    clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                    session: aiohttp.ClientSession | None = None) -> dict:
    """Run the plan; the result (see summarise). A session passed in is used as is (and not closed)."""
    plan.check()
    addrs = check_target(plan.url, allow, resolver)
    data = json.dumps(plan.body, separators=(",", ":")).encode()
    timeout = aiohttp.ClientTimeout(total=plan.timeout_s)
    rec = Recorder()
    issued = 0
    last_fail: float | None = None      # when the last failed request ended (the clock's)
    ok_since_fail = False
    stopped_by: list[str] = []
    t0_wall, t0 = wall(), clock()
    deadline = t0 + plan.duration_s

    async def client(s: aiohttp.ClientSession) -> None:
        nonlocal issued, last_fail, ok_since_fail
        while True:
            if issued >= plan.requests:
                stopped_by.append("count")
                return
            if clock() >= deadline:
                stopped_by.append("time")
                return
            if plan.settle_s and last_fail is not None and ok_since_fail and clock() - last_fail >= plan.settle_s:
                stopped_by.append("settled")
                return
            if plan.stop_after_ok and rec.hist.get_total_count() >= plan.stop_after_ok:
                stopped_by.append("ok")
                return
            issued += 1                 # one event loop: no lock needed between the check and this
            start_wall, a = wall(), clock()
            status, err, replica = await _one(s, plan.url, data, timeout)
            rec.add(start_wall, clock() - a, status, err, replica)
            if err is not None:
                last_fail, ok_since_fail = clock(), False
            elif last_fail is not None and a >= last_fail:   # started after the last failure ended
                ok_since_fail = True
            if err is not None and plan.error_pause_s:
                await asyncio.sleep(max(0.0, min(plan.error_pause_s, deadline - clock())))

    async def all_clients(s: aiohttp.ClientSession) -> None:
        # the last requests may still run their timeout after the deadline; nothing runs past this
        limit = plan.duration_s + plan.timeout_s + plan.error_pause_s + 5
        try:
            await asyncio.wait_for(asyncio.gather(*(client(s) for _ in range(plan.clients))), limit)
        except TimeoutError as exc:     # a request outlived its own timeout: a bug, but the bound holds
            raise LoadError(f"the load did not stop within {limit:g} s", "report this as a harness bug") from exc

    if session is not None:
        await all_clients(session)
    else:
        # connection reuse: one pool, a connection per client, kept alive between requests
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=plan.clients)) as s:
            await all_clients(s)
    elapsed = clock() - t0
    why = next(s for s in ("ok", "settled", "count", "time") if s in stopped_by)
    return summarise(rec, plan, addrs, t0_wall, elapsed, why)


def run(plan: Plan, **kw) -> dict:
    """run_async from synchronous code (the pipeline, tests)."""
    return asyncio.run(run_async(plan, **kw))


def nearest_rank(sorted_values: list[float], p: float) -> float | None:
    """HdrHistogram's rank rule (the value with rank max(1, round(p% of n))), on exact values."""
    if not sorted_values:
        return None
    k = max(1, int(p * len(sorted_values) / 100 + 0.5))
    return sorted_values[min(k, len(sorted_values)) - 1]


def timeline(rec: Recorder, t0_wall: float, elapsed_s: float) -> list[dict]:
    """Per second of the run (by when each request ended): requests ok and failed, p50/p99 of the ok ones.
    Every second is listed, empty ones too: a gap while requests hang is part of a fault's picture."""
    n = max(1, math.ceil(elapsed_s))
    ok: list[list[float]] = [[] for _ in range(n)]
    failed = [0] * n
    for start, lat, err in zip(rec.start, rec.latency, rec.error, strict=True):
        i = min(n - 1, max(0, int(start + lat - t0_wall)))
        if err is None:
            ok[i].append(lat)
        else:
            failed[i] += 1
    out = []
    for i in range(n):
        lats = sorted(ok[i])
        out.append({"t": i, "ok": len(lats), "failed": failed[i],
                    "p50_s": nearest_rank(lats, 50), "p99_s": nearest_rank(lats, 99)})
    return out


def summarise(rec: Recorder, plan: Plan, addrs: list[str], t0_wall: float, elapsed_s: float, stopped_by: str) -> dict:
    """The JSON-ready result: figures, errors by kind, the encoded histogram, the timeline, every request."""
    h = rec.hist
    ok = h.get_total_count()
    errors: dict[str, int] = {}
    for e in rec.error:
        if e is not None:
            errors[e] = errors.get(e, 0) + 1
    pct = {f"p{p:g}".replace(".", "_"): h.get_value_at_percentile(p) / 1e6 if ok else None for p in PERCENTILES}
    return {
        "v": RESULT_SCHEMA,
        "plan": asdict(plan) | {"body_bytes": len(json.dumps(plan.body)), "body": None},
        "addresses": addrs,
        "started": t0_wall, "elapsed_s": elapsed_s, "stopped_by": stopped_by,
        "requests": len(rec.error), "ok": ok, "failed": len(rec.error) - ok, "errors": errors,
        "latency_s": {**pct, "min": h.get_min_value() / 1e6 if ok else None,
                      "max": h.get_max_value() / 1e6 if ok else None,
                      "mean": h.get_mean_value() / 1e6 if ok else None},
        "throughput_rps": ok / elapsed_s if elapsed_s > 0 else None,
        "histogram": {"encoding": "HdrHistogram V2, compressed, base64 (hdrh encode())", "unit": "us",
                      "lowest": HIST_LOWEST_US, "highest": HIST_HIGHEST_US, "digits": HIST_DIGITS,
                      "data": h.encode().decode("ascii")},
        "timeline": timeline(rec, t0_wall, elapsed_s),
        # columns, not one dict per request: 100,000 requests stay a few MB of JSON
        "log": {"start": [round(s - t0_wall, 6) for s in rec.start], "latency_s": [round(x, 6) for x in rec.latency],
                "status": rec.status, "error": rec.error, "replica": rec.replica},
    }


def histogram(result: dict) -> HdrHistogram:
    """The stored histogram, decoded (what `poc rederive` recomputes percentiles from)."""
    return HdrHistogram.decode(result["histogram"]["data"].encode("ascii"))
