#!/usr/bin/env python3
"""Online inference server for the model that the DDP workload trained, the same on every platform.

Standalone like the workload (torch, aiohttp and the standard library; no harness), so the worker
image can run it on Slurm and Kubernetes alike: Debian trixie packages aiohttp as python3-aiohttp.
The model definitions are the workload's own (ddp_train.py, found next to this file, in
../workloads/ or at --workload), so the served model is exactly what was trained.

It loads the newest ``ckpt-<step>.pt`` in --ckpt-dir (the workload's format: {"model": state_dict,
"step": n, ...}; the transformer's also carries "model_kind" and "dims"; the MLP's shape is read
from its weights), puts it in eval mode and answers under torch.inference_mode:

    POST /predict   {"inputs": [[...], ...]} -> {"outputs": [...], "step": n}
                    mlp: rows of `width` floats -> rows of `width` floats;
                    transformer: rows of token ids (one length per request, <= seq_len) -> the next
                    token id of each row (argmax of the last position's logits).
    GET  /healthz   liveness: 200 as soon as the process serves HTTP, also while the model loads.
    GET  /readyz    readiness: 200 once the model is loaded and one warm-up inference ran, else 503.
    GET  /info      model, checkpoint step and path, requests/rows/batches served, errors, pid, host.

Every answer carries ``X-Poc-Replica: <host>/<pid>`` (a pod's host name is the pod's name), so a load
generator behind a balancer or a Service can say which replica served each request.

The port is bound before the model loads (so a liveness probe passes during a long load, and a
load balancer holds off on readiness); /predict answers 503 until ready.

Batching: aiohttp has no request batching (nor has FastAPI/uvicorn), so this server has a small
dynamic batcher of its own: requests queue, and one forward pass takes what is queued, up to
--max-batch rows of one shape, waiting at most --batch-wait-ms for more after the first. Forward
passes run one at a time on a worker thread, so the event loop keeps answering /healthz.

Events: one JSON line each on stdout, prefixed ``POC_EVENT `` like the workload's (its Events
class, so --events-dir and the restart counters work the same): serve_start, serve_listening (the
bound host and port: --port 0 lets the kernel choose), serve_ready (load_s, warmup_s, ready_s since
the process started), serve_error (each failed request or load), serve_stop.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import importlib.util
import os
import signal
import sys
import time

PROCESS_T0 = time.time()
REPLICA_HEADER = "X-Poc-Replica"
HERE = os.path.dirname(os.path.abspath(__file__))


def load_workload(path: str = ""):
    """The workload module, for its model builders, Events and checkpoint finder."""
    cands = [path] if path else [os.path.join(HERE, "ddp_train.py"),
                                 os.path.join(HERE, "..", "workloads", "ddp_train.py")]
    for cand in cands:
        if os.path.isfile(cand):
            spec = importlib.util.spec_from_file_location("ddp_train", cand)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    raise SystemExit(f"serve_model: ddp_train.py not found (looked at {', '.join(cands)}); pass --workload PATH")


class Model:
    """A checkpoint rebuilt as the workload built it, in eval mode, with its input rules."""

    def __init__(self, wl, torch, path: str, device):
        self.torch, self.device, self.path = torch, device, path
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.step = int(state["step"])
        weights = state["model"]
        if state.get("model_kind") == "transformer":
            self.kind, self.dims = "transformer", dict(state["dims"])
            module = wl.build_transformer(torch, self.dims)
        else:
            # the MLP checkpoint has no shape record: square Linear layers "0", "2", ... (ReLU between)
            shapes = [w.shape for k, w in weights.items() if k.endswith(".weight")]
            width = int(shapes[0][0])
            module, _ = wl.build_model(torch, 0, len(shapes), width)
            self.kind, self.dims = "mlp", {"width": width, "layers": len(shapes)}
        module.load_state_dict(weights)
        self.module = module.to(device).eval()
        self.params = sum(p.numel() for p in module.parameters())

    def check(self, rows) -> tuple:
        """The shape key of a request's rows (requests batch together only with the same key), or ValueError."""
        if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
            raise ValueError("inputs must be a non-empty list of rows (lists)")
        n = len(rows[0])
        if any(len(r) != n for r in rows):
            raise ValueError("every row of one request must have the same length")
        if self.kind == "mlp":
            if n != self.dims["width"]:
                raise ValueError(f"each row must have {self.dims['width']} numbers (the model's width), not {n}")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for r in rows for v in r):
                raise ValueError("mlp inputs must be numbers")
            return ("mlp", n)
        vocab, seq = self.dims["vocab_size"], self.dims["seq_len"]
        if not 1 <= n <= seq:
            raise ValueError(f"each row must have 1..{seq} token ids (the model's seq_len), not {n}")
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < vocab for r in rows for v in r):
            raise ValueError(f"transformer inputs must be token ids in [0, {vocab})")
        return ("transformer", n)

    def forward(self, rows: list) -> list:
        """One batch, on the caller's thread (inference_mode is per thread)."""
        torch = self.torch
        with torch.inference_mode():
            if self.kind == "mlp":
                out = self.module(torch.tensor(rows, dtype=torch.float32, device=self.device))
                return out.cpu().tolist()
            logits = self.module(torch.tensor(rows, dtype=torch.long, device=self.device))
            return logits[:, -1, :].argmax(dim=-1).cpu().tolist()

    def warmup_rows(self) -> list:
        if self.kind == "mlp":
            return [[0.0] * self.dims["width"]]
        return [[0] * self.dims["seq_len"]]


class Batcher:
    """Coalesces queued requests of one shape into one forward pass (see the module docstring)."""

    def __init__(self, run_batch, max_rows: int, wait_s: float):
        self.run_batch, self.max_rows, self.wait_s = run_batch, max_rows, wait_s
        self.queue: asyncio.Queue = asyncio.Queue()
        self.carry = None           # a request of another shape, taken off the queue: it starts the next batch
        self.batches = 0

    async def submit(self, key: tuple, rows: list) -> list:
        fut = asyncio.get_running_loop().create_future()
        await self.queue.put((key, rows, fut))
        return await fut

    async def _next(self, timeout: float | None):
        if self.carry is not None:
            item, self.carry = self.carry, None
            return item
        if timeout is None:
            return await self.queue.get()
        return await asyncio.wait_for(self.queue.get(), max(timeout, 0.0))

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self._next(None)
            batch, n = [first], len(first[1])
            deadline = loop.time() + self.wait_s
            while n < self.max_rows:
                try:
                    item = self._take_now() or await self._next(deadline - loop.time())
                except TimeoutError:
                    break
                if item[0] != first[0] or n + len(item[1]) > self.max_rows:
                    self.carry = item
                    break
                batch.append(item)
                n += len(item[1])
            rows = [r for _, rs, _ in batch for r in rs]
            self.batches += 1
            try:
                out = await self.run_batch(rows)
            except Exception as exc:    # noqa: BLE001 - every waiting request gets the error, the loop goes on
                for *_, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            i = 0
            for _, rs, fut in batch:
                if not fut.done():      # a client that went away cancelled its future
                    fut.set_result(out[i:i + len(rs)])
                i += len(rs)

    def _take_now(self):
        """What is already queued, without waiting (a zero wait still coalesces a backlog)."""
        if self.carry is not None:
            return None
        try:
            return self.queue.get_nowait()
        except asyncio.QueueEmpty:
            return None


class Server:
    """The HTTP endpoints and their counters; the model arrives when it has loaded (see start())."""

    def __init__(self, ev, max_batch: int, wait_s: float, pool):
        self.ev, self.max_batch, self.pool = ev, max_batch, pool
        self.model: Model | None = None
        self.ready_s: float | None = None
        self.counts = {"requests": 0, "ok": 0, "rows": 0, "bad_request": 0, "errors": 0}
        self.batcher = Batcher(self._forward, max_batch, wait_s)

    async def _forward(self, rows: list) -> list:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.model.forward, rows)

    def app(self):
        from aiohttp import web
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.on_response_prepare.append(self._identify)
        app.add_routes([web.post("/predict", self.predict), web.get("/healthz", self.healthz),
                        web.get("/readyz", self.readyz), web.get("/info", self.info)])
        return app

    async def _identify(self, request, response) -> None:
        response.headers[REPLICA_HEADER] = f"{self.ev.host}/{os.getpid()}"

    async def healthz(self, request):
        from aiohttp import web
        return web.json_response({"ok": True})

    async def readyz(self, request):
        from aiohttp import web
        ready = self.ready_s is not None
        return web.json_response({"ready": ready}, status=200 if ready else 503)

    async def info(self, request):
        from aiohttp import web
        m = self.model
        return web.json_response({
            "ready": self.ready_s is not None, "ready_s": self.ready_s, "pid": os.getpid(), "host": self.ev.host,
            "uptime_s": time.time() - PROCESS_T0, "batches": self.batcher.batches, "max_batch": self.max_batch,
            **self.counts,
            "model": None if m is None else {"kind": m.kind, "dims": m.dims, "params": m.params,
                                             "checkpoint": m.path, "step": m.step, "device": str(m.device)}})

    async def predict(self, request):
        from aiohttp import web
        self.counts["requests"] += 1
        if self.ready_s is None:
            return web.json_response({"error": "not ready: the model is loading"}, status=503)
        try:
            body = await request.json()
            rows = body["inputs"]
            key = self.model.check(rows)
            if len(rows) > self.max_batch:
                raise ValueError(f"at most {self.max_batch} rows a request (--max-batch)")
        except (ValueError, KeyError, TypeError) as exc:    # json.JSONDecodeError is a ValueError
            self.counts["bad_request"] += 1
            return web.json_response({"error": f"bad request: {exc}"}, status=400)
        try:
            out = await self.batcher.submit(key, rows)
        except Exception as exc:    # noqa: BLE001 - a failed forward is the client's 500 and an event, not a crash
            self.counts["errors"] += 1
            self.ev.emit("serve_error", where="predict", error=type(exc).__name__, message=str(exc)[:500])
            return web.json_response({"error": f"inference failed: {type(exc).__name__}"}, status=500)
        self.counts["ok"] += 1
        self.counts["rows"] += len(rows)
        return web.json_response({"outputs": out, "step": self.model.step})


async def serve(args, wl, ev) -> int:
    from aiohttp import web
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="infer")
    srv = Server(ev, args.max_batch, args.batch_wait_ms / 1e3, pool)
    runner = web.AppRunner(srv.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    host, port = runner.addresses[0][:2]
    ev.emit("serve_listening", bind=args.host, host_port=f"{host}:{port}", port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    batcher = asyncio.create_task(srv.batcher.run())
    code = 0
    try:
        await load(args, wl, ev, srv, pool)
    except LoadFailed:
        code = 2
    if code == 0:
        await stop.wait()
    batcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await batcher
    await runner.cleanup()
    pool.shutdown(wait=True)
    ev.emit("serve_stop", code=code, **srv.counts)
    return code


class LoadFailed(Exception):
    pass


async def load(args, wl, ev, srv: Server, pool) -> None:
    """Load the newest checkpoint (waiting up to --wait-ckpt-s for one), then one warm-up inference."""
    loop = asyncio.get_running_loop()
    # imported on the worker thread: a torch import takes seconds, and on the event loop it would
    # stall /healthz and hold the accepted connections of clients until they time out
    torch = await loop.run_in_executor(pool, importlib.import_module, "torch")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    give_up = time.monotonic() + args.wait_ckpt_s
    while (path := wl.newest_checkpoint(args.ckpt_dir)) is None and time.monotonic() < give_up:
        await asyncio.sleep(0.5)
    if path is None:
        ev.emit("serve_error", where="load", error="no_checkpoint",
                message=f"no ckpt-<step>.pt in {args.ckpt_dir!r} after {args.wait_ckpt_s} s")
        raise LoadFailed
    t0 = time.perf_counter()
    try:
        model = await loop.run_in_executor(pool, Model, wl, torch, path, device)
        t1 = time.perf_counter()
        await loop.run_in_executor(pool, model.forward, model.warmup_rows())
    except Exception as exc:    # an unreadable checkpoint is reported as an event, then exit 2
        ev.emit("serve_error", where="load", error=type(exc).__name__, message=str(exc)[:500], path=path)
        raise LoadFailed from exc
    t2 = time.perf_counter()
    srv.model = model
    srv.ready_s = time.time() - PROCESS_T0
    ev.emit("serve_ready", ready_s=srv.ready_s, load_s=t1 - t0, warmup_s=t2 - t1, step=model.step, path=path,
            model=model.kind, dims=model.dims, params=model.params, device=str(device), torch=torch.__version__)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt-dir", required=True, help="the training run's --ckpt-dir; its newest ckpt-<step>.pt")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 inside a pod or on a compute node)")
    ap.add_argument("--port", type=int, default=8000, help="0: the kernel chooses (see the serve_listening event)")
    ap.add_argument("--max-batch", type=int, default=64, help="rows per forward pass, and per request")
    ap.add_argument("--batch-wait-ms", type=float, default=2.0, help="how long a batch waits for more requests")
    ap.add_argument("--wait-ckpt-s", type=float, default=0.0, help="wait this long for a first checkpoint")
    ap.add_argument("--device", default="auto", help="auto (cuda when visible, else cpu), cpu, cuda, cuda:N")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads; 0: torch's default")
    ap.add_argument("--workload", default="", help="path to ddp_train.py (default: next to this file or ../workloads)")
    ap.add_argument("--run-id", default=os.environ.get("POC_RUN_ID", "adhoc"))
    ap.add_argument("--events-dir", default="")
    args = ap.parse_args(argv)
    if args.max_batch < 1 or args.batch_wait_ms < 0:
        ap.error("--max-batch must be >= 1 and --batch-wait-ms >= 0")
    wl = load_workload(args.workload)
    ev = wl.Events(args.run_id, args.events_dir or None)
    try:
        ev.emit("serve_start", argv=sys.argv[1:] if argv is None else list(argv), python=sys.version.split()[0],
                process_t0=PROCESS_T0)
        return asyncio.run(serve(args, wl, ev))
    finally:
        ev.close()


if __name__ == "__main__":
    sys.exit(main())
