"""The inference server (harness/data/serve/serve_model.py) on checkpoints written in the workload's
format: the newest one served, outputs equal to the model's own, readiness, bad requests, the
dynamic batcher (each request gets its own rows back), and the process's events and SIGTERM."""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.paths import ROOT

torch = pytest.importorskip("torch")
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402 - after the importorskip

SERVE = ROOT / "harness" / "data" / "serve" / "serve_model.py"
_spec = importlib.util.spec_from_file_location("serve_model_shipped", SERVE)
serve_model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve_model)
wl = serve_model.load_workload()


def save(ckpt_dir: Path, step: int, model, **extra) -> None:
    """As the workload's save_checkpoint writes (the optimizer state is not read by the server)."""
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": {}, "step": step, **extra}, ckpt_dir / f"ckpt-{step}.pt")


def mlp(seed: int):
    torch.manual_seed(seed)
    return wl.build_model(torch, 0, 3, 8)[0]


TINY = wl.transformer_dims(200_000, 2, 64, 16)


def transformer(seed: int):
    torch.manual_seed(seed)
    return wl.build_transformer(torch, TINY)


class Recorder:
    host = "test-host"

    def __init__(self):
        self.events = []

    def emit(self, kind, **data):
        self.events.append({"kind": kind, **data})


@contextlib.asynccontextmanager
async def server(ckpt_dir: Path, max_batch=64, batch_wait_ms=2.0, load=True):
    ev = Recorder()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    srv = serve_model.Server(ev, max_batch, batch_wait_ms / 1e3, pool)
    client = TestClient(TestServer(srv.app(), host="127.0.0.1"))
    await client.start_server()
    batcher = asyncio.create_task(srv.batcher.run())
    args = SimpleNamespace(ckpt_dir=str(ckpt_dir), wait_ckpt_s=0.0, device="cpu", threads=1)
    try:
        if load:
            await serve_model.load(args, wl, ev, srv, pool)
        yield client, srv, ev, args, pool
    finally:
        batcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await batcher
        await client.close()
        pool.shutdown()


def test_the_newest_checkpoint_is_served_and_answers_like_the_model(tmp_path):
    save(tmp_path, 10, mlp(1))
    save(tmp_path, 20, mlp(2))
    rows = [[float(i + j) / 10 for j in range(8)] for i in range(3)]
    with torch.inference_mode():
        want = mlp(2)(torch.tensor(rows)).tolist()

    async def go():
        async with server(tmp_path) as (client, _srv, ev, *_):
            resp = await client.post("/predict", json={"inputs": rows})
            body = await resp.json()
            info = await (await client.get("/info")).json()
            return resp.status, body, info, ev.events
    status, body, info, events = asyncio.run(go())
    assert status == 200 and body["step"] == 20
    assert torch.allclose(torch.tensor(body["outputs"]), torch.tensor(want), atol=1e-6)
    assert info["model"]["kind"] == "mlp" and info["model"]["dims"] == {"width": 8, "layers": 3}
    assert info["model"]["step"] == 20 and info["model"]["checkpoint"].endswith("ckpt-20.pt")
    assert info["ok"] == 1 and info["rows"] == 3 and info["pid"] == os.getpid() and info["ready"]
    ready = [e for e in events if e["kind"] == "serve_ready"]
    assert len(ready) == 1 and ready[0]["step"] == 20 and ready[0]["load_s"] >= 0 and ready[0]["warmup_s"] >= 0


def test_live_at_once_ready_only_after_the_model_loaded(tmp_path):
    save(tmp_path, 5, mlp(1))

    async def go():
        async with server(tmp_path, load=False) as (client, srv, ev, args, pool):
            before = [(await client.get(p)).status for p in ("/healthz", "/readyz")]
            before.append((await client.post("/predict", json={"inputs": [[0.0] * 8]})).status)
            await serve_model.load(args, wl, ev, srv, pool)
            after = [(await client.get(p)).status for p in ("/healthz", "/readyz")]
            after.append((await client.post("/predict", json={"inputs": [[0.0] * 8]})).status)
            return before, after
    before, after = asyncio.run(go())
    assert before == [200, 503, 503] and after == [200, 200, 200]


@pytest.mark.parametrize("body", [{"inputs": [[0.0] * 7]}, {"inputs": []}, {"inputs": [[0.0] * 8, [0.0] * 7]},
                                  {"inputs": [["a"] * 8]}, {"inputs": [[True] * 8]}, {"rows": [[0.0] * 8]},
                                  {"inputs": [[0.0] * 8] * 5}, "not json"])
def test_bad_requests_are_400_with_a_reason(tmp_path, body):
    save(tmp_path, 5, mlp(1))

    async def go():
        async with server(tmp_path, max_batch=4) as (client, srv, *_):
            kw = {"data": body} if isinstance(body, str) else {"json": body}
            resp = await client.post("/predict", **kw)
            return resp.status, await resp.json(), srv.counts
    status, answer, counts = asyncio.run(go())
    assert status == 400 and answer["error"].startswith("bad request") and counts["bad_request"] == 1


def test_concurrent_requests_share_forward_passes_and_each_gets_its_own_rows(tmp_path):
    save(tmp_path, 5, mlp(3))
    reqs = [[[float(i), float(j)] * 4 for j in range(1 + i % 3)] for i in range(24)]
    with torch.inference_mode():
        want = [mlp(3)(torch.tensor(r)).tolist() for r in reqs]

    async def go():
        async with server(tmp_path, max_batch=16, batch_wait_ms=30) as (client, srv, *_):
            b0 = srv.batcher.batches                 # the warm-up pass
            resps = await asyncio.gather(*(client.post("/predict", json={"inputs": r}) for r in reqs))
            bodies = [await r.json() for r in resps]
            return bodies, srv.batcher.batches - b0
    bodies, batches = asyncio.run(go())
    for got, exp in zip(bodies, want, strict=True):
        assert torch.allclose(torch.tensor(got["outputs"]), torch.tensor(exp), atol=1e-5)
    # 48 rows at <= 16 a pass: at least 3 passes, and far fewer than one per request
    assert 3 <= batches < len(reqs) // 2


def test_a_transformer_answers_the_next_token_and_lengths_batch_apart(tmp_path):
    save(tmp_path, 30, transformer(4), model_kind="transformer", dims=TINY)
    a = [[1, 2, 3, 4], [5, 6, 7, 8]]
    b = [[9, 10, 11, 12, 13, 14]]
    model = transformer(4).eval()
    with torch.inference_mode():
        want_a = model(torch.tensor(a))[:, -1].argmax(-1).tolist()
        want_b = model(torch.tensor(b))[:, -1].argmax(-1).tolist()

    async def go():
        async with server(tmp_path, batch_wait_ms=20) as (client, *_):
            ra, rb, bad = await asyncio.gather(client.post("/predict", json={"inputs": a}),
                                               client.post("/predict", json={"inputs": b}),
                                               client.post("/predict", json={"inputs": [[TINY["vocab_size"]]]}))
            return await ra.json(), await rb.json(), bad.status
    ja, jb, bad = asyncio.run(go())
    assert ja["outputs"] == want_a and jb["outputs"] == want_b and ja["step"] == 30
    assert bad == 400


def test_no_checkpoint_is_an_event_and_a_failed_load(tmp_path):
    async def go():
        async with server(tmp_path / "empty", load=False) as (client, srv, ev, args, pool):
            with pytest.raises(serve_model.LoadFailed):
                await serve_model.load(args, wl, ev, srv, pool)
            return ev.events, (await client.get("/readyz")).status
    events, ready = asyncio.run(go())
    assert ready == 503
    assert [(e["kind"], e["where"], e["error"]) for e in events] == [("serve_error", "load", "no_checkpoint")]


def test_the_process_logs_its_events_and_stops_on_sigterm(tmp_path):
    save(tmp_path / "ckpt", 7, mlp(1))
    proc = subprocess.Popen([sys.executable, str(SERVE), "--ckpt-dir", str(tmp_path / "ckpt"), "--port", "0",
                             "--threads", "1", "--run-id", "t1"], stdout=subprocess.PIPE, text=True)
    events = []
    try:
        deadline = time.monotonic() + 60
        while not any(e["kind"] == "serve_ready" for e in events) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("POC_EVENT "):
                events.append(json.loads(line[len("POC_EVENT "):]))
        port = next(e["port"] for e in events if e["kind"] == "serve_listening")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events += [json.loads(x[len("POC_EVENT "):]) for x in rest.splitlines() if x.startswith("POC_EVENT ")]
    kinds = [e["kind"] for e in events]
    assert kinds == ["serve_start", "serve_listening", "serve_ready", "serve_stop"] and proc.returncode == 0
    assert all(e["run_id"] == "t1" and e["pid"] == proc.pid for e in events)
    ready = events[2]
    assert ready["step"] == 7 and 0 < ready["ready_s"] < 60 and ready["model"] == "mlp"


def test_every_answer_names_the_replica_that_gave_it(tmp_path):
    """host/pid on answers and refusals alike, so a load generator can attribute each request (a 404 too)."""
    save(tmp_path, 5, mlp(1))

    async def go():
        async with server(tmp_path, load=False) as (client, *_):
            not_ready = await client.post("/predict", json={"inputs": [[0.0] * 8]})
            missing = await client.post("/nowhere", json={})
            return not_ready.status, not_ready.headers, missing.status, missing.headers
    s1, h1, s2, h2 = asyncio.run(go())
    want = f"test-host/{os.getpid()}"
    assert (s1, s2) == (503, 404)
    assert h1[serve_model.REPLICA_HEADER] == want and h2[serve_model.REPLICA_HEADER] == want
