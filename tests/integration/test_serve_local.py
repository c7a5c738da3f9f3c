"""The inference probe on the host, end to end with real processes: the real workload trains a tiny
model (world size 1, gloo), serve_model.py serves its newest checkpoint on 127.0.0.1, the load
generator measures it, the serving process is SIGKILLed and started again under load, and the
serve_* figures come from the stored results alone (after a JSON round trip)."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness import data
from harness.netutil import free_port
from harness.serve import load
from harness.serve import metrics as sm
from harness.timing import Stamp

pytestmark = [pytest.mark.integration, pytest.mark.local]

CLEAN = {"connect", "disconnected", "reset", "http_503"}    # what a killed and restarting server may answer


def events(path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("POC_EVENT "):
            out.append(json.loads(line[len("POC_EVENT "):]))
    return out


def train(tmp_path) -> str:
    """The real workload, one process: MLP of ~1M parameters, checkpoints at steps 10 and 20."""
    ckpt = tmp_path / "ckpt"
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0",
           "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(data.path("workloads", "ddp_train.py")), "--steps", "21",
                           "--batch", "8", "--model-params", "1M", "--layers", "4", "--ckpt-dir", str(ckpt),
                           "--ckpt-every", "10", "--sweep", "", "--backend", "gloo", "--run-id", "serve-train"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in ckpt.iterdir()) == ["ckpt-10.pt", "ckpt-20.pt"]
    return str(ckpt)


def start(ckpt: str, port: int, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(data.path("serve", "serve_model.py")), "--ckpt-dir", ckpt,
                             "--host", "127.0.0.1", "--port", str(port), "--threads", "1", "--run-id", "serve-local"],
                            stdout=log, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_serve_the_trained_model_measure_it_kill_it_and_recover(tmp_path):
    ckpt = train(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/predict"
    body = {"inputs": [[0.1] * 512]}         # one row of the MLP's width: sqrt(1 MiB parameters / 4 layers)
    logs = [tmp_path / "serve-1.log", tmp_path / "serve-2.log"]
    procs: list[subprocess.Popen] = []
    try:
        # 1. submit -> the first successful response, probing as a client would
        submitted = Stamp.exact(time.time(), "harness clock before Popen")
        with logs[0].open("w") as log:
            procs.append(start(ckpt, port, log))
        probe = load.run(load.Plan(url=url, body=body, requests=10_000, duration_s=60, clients=1,
                                   error_pause_s=0.05, stop_after_ok=1))
        assert probe["stopped_by"] == "ok"

        # 2. a fixed load: 4 clients, 2,000 requests, 30 s at most
        steady = load.run(load.Plan(url=url, body=body, requests=2000, duration_s=30, clients=4))

        # 3. the serving process killed under load, started again at once (what a supervisor does)
        async def fault():
            task = asyncio.create_task(load.run_async(load.Plan(url=url, body=body, requests=100_000,
                                                                duration_s=12, clients=4, timeout_s=2)))
            await asyncio.sleep(2)
            killed = time.time()
            os.kill(procs[0].pid, signal.SIGKILL)
            procs[0].wait()
            with logs[1].open("w") as log:
                procs.append(start(ckpt, port, log))
            return killed, await task
        killed, faulted = asyncio.run(fault())
    finally:
        for p in procs:
            stop(p)

    # the figures from what would be stored (JSON), as `poc rederive` would see them
    probe, steady, faulted = (json.loads(json.dumps(r)) for r in (probe, steady, faulted))
    ready = sm.ready(submitted, sm.first_ok(probe))
    figs = sm.from_load(steady)
    window = (killed, faulted["started"] + faulted["elapsed_s"])
    fault_figs = sm.from_load(faulted, window)
    first_events, second_events = events(logs[0]), events(logs[1])
    print("\nserve figures:", json.dumps({
        "ready_s": ready["value"], "ready_event_s": [e["ready_s"] for e in first_events if e["kind"] == "serve_ready"],
        "p50_s": figs["serve_latency_p50_s"]["value"], "p95_s": figs["serve_latency_p95_s"]["value"],
        "p99_s": figs["serve_latency_p99_s"]["value"], "max_s": steady["latency_s"]["max"],
        "throughput_rps": figs["serve_throughput_rps"]["value"], "steady_requests": steady["requests"],
        "fault_requests": fault_figs["serve_availability"]["detail"]["requests"],
        "fault_failed": fault_figs["serve_failed_requests"]["value"],
        "fault_errors": fault_figs["serve_failed_requests"]["detail"]["errors"],
        "availability_after_kill": fault_figs["serve_availability"]["value"],
        "degraded_s": fault_figs["serve_degraded_s"]["value"],
        "degraded_bounds_s": [fault_figs["serve_degraded_s"]["lo"], fault_figs["serve_degraded_s"]["hi"]],
        "restart_ready_event_s": [e["ready_s"] for e in second_events if e["kind"] == "serve_ready"],
    }, indent=1))

    # readiness: the server loaded the newest checkpoint (step 20) and answered
    assert [e["step"] for e in first_events if e["kind"] == "serve_ready"] == [20]
    assert 0.1 < ready["value"] < 60 and ready["lo"] <= ready["value"] <= ready["hi"]
    # the fixed load: every request answered, real percentiles and throughput
    assert steady["stopped_by"] == "count" and steady["requests"] == steady["ok"] == 2000
    p50, p95, p99 = (figs[f"serve_latency_p{p}_s"]["value"] for p in (50, 95, 99))
    assert 0 < p50 <= p95 <= p99 <= steady["latency_s"]["max"] < 5
    assert figs["serve_throughput_rps"]["value"] > 20 and figs["serve_availability"]["value"] == 1.0
    # the kill: requests failed (refused, cut off, or 503 while the new process loaded), then recovered
    failed = fault_figs["serve_failed_requests"]
    assert failed["value"] > 0 and set(failed["detail"]["errors"]) <= CLEAN
    assert 0 < fault_figs["serve_availability"]["value"] < 1
    deg = fault_figs["serve_degraded_s"]
    assert deg["value"] is not None and 0 < deg["lo"] <= deg["value"] <= deg["hi"] < 12
    # the restarted process was ready before the load ended, and served the same checkpoint
    assert [e["step"] for e in second_events if e["kind"] == "serve_ready"] == [20]
    assert any(e["kind"] == "serve_ready" for e in second_events) and faulted["timeline"][-1]["ok"] > 0
