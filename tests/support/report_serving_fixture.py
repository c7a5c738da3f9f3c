"""Regenerates tests/fixtures/report/serving/ (run: cd tests && ../.venv/bin/python -m support.report_serving_fixture).

Per platform a real aiohttp server on 127.0.0.1 stands in for the deployed inference server, and the real
load generator (harness/serve/load.py) runs every phase of a serve run against it in real time: the
readiness probe while the server is still starting, steady load, the server killed during load and back
after a while, its "node" lost for longer, then a second replica (a capacity of two requests at once
instead of one) and load again. The figures come from harness/serve/metrics.py on that evidence, and the
run is stored with the real Store (record + raw.json.gz). The timings are scripted; the record shapes,
histograms, timelines and figures are the real code's.
"""
from __future__ import annotations

import asyncio
import json
import random
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

from aiohttp import web

from harness.serve import load
from harness.serve import metrics as sm
from harness.store import Store

CAMPAIGN = "serving-fixture"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "report" / "serving"
TEMPLATE = Path(__file__).parents[1] / "fixtures" / "report" / "drills" / "drills-fixture"
PRICE = {"usd_per_hour": 1.0, "unit": "node", "sets": {}, "price_set": None, "overhead_usd_per_hour": 0.0,
         "utilisation": 1.0}
# seconds: service time per request, server start after deploy, kill -> back, node lost -> back, scale-out
SCRIPT = {"slurm": {"service_s": 0.002, "start_s": 1.4, "kill_s": 1.3, "node_s": 2.6, "scale_s": 1.6},
          "k8s": {"service_s": 0.0024, "start_s": 0.9, "kill_s": 0.7, "node_s": 1.9, "scale_s": 1.0}}
BEYOND = {
    "slurm": {"discovery": "the harness reads the job's node from squeue/scontrol and the port from the "
                           "server's serve_listening event",
              "balancing": "the harness's own reverse proxy (round-robin, health-checked) on the login side",
              "restarts": "a restart loop around srun in the batch script, and --requeue for a lost node",
              "scaling": "another batch job per replica, added to the balancer by the harness",
              "written": {"serve.sbatch": 38, "harness/serve/balancer.py": 180, "harness/serve/slurm.py": 260},
              "harness_parts": ["a reverse proxy with health checks (balancer.py)",
                                "endpoint discovery from squeue/scontrol", "a restart loop in the batch script",
                                "one batch job per replica"]},
    "k8s": {"discovery": "the Service's ClusterIP and DNS name", "balancing": "kube-proxy (iptables) over ready pods",
            "restarts": "the kubelet restarts the container; the Deployment replaces a pod on a lost node",
            "scaling": "the Deployment's replicas field; the readiness probe adds the pod to the Service",
            "written": {"deployment.yaml": 61, "service.yaml": 14},
            "harness_parts": []},
}


class Server:
    """The stand-in server: /predict answers after its service time, `capacity` requests at once."""

    def __init__(self, service_s: float):
        self.service_s, self.capacity = service_s, 1
        self.port = _free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner: web.AppRunner | None = None
        self.sem = None

    async def _predict(self, request: web.Request) -> web.Response:
        await request.read()
        async with self.sem:
            await asyncio.sleep(self.service_s * random.uniform(0.8, 1.3))
        return web.json_response({"logits": [0.1, 0.9]})

    async def _start(self) -> None:
        self.sem = asyncio.Semaphore(self.capacity)
        app = web.Application()
        app.router.add_post("/predict", self._predict)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def _stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    def start(self, capacity: int = 1) -> None:
        self.capacity = capacity
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)

    def later(self, delay: float, fn, *args) -> threading.Timer:
        t = threading.Timer(delay, fn, args)
        t.start()
        return t

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/predict"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan(url: str, duration_s: float, **kw) -> load.Plan:
    return load.Plan(url=url, body={"x": [0.0] * 16}, requests=kw.pop("requests", 20_000), duration_s=duration_s,
                     clients=kw.pop("clients", 4), timeout_s=2.0, error_pause_s=0.05, **kw)


def serve_run(platform: str) -> dict:
    """One platform's raw["serve"], every phase run for real against the stand-in server."""
    sc = SCRIPT[platform]
    srv = Server(sc["service_s"])
    deploy = {"submitted": time.time(), "how": f"scripted stand-in for the {platform} deploy"}
    deploy["submitted_after"] = deploy["submitted"] + 0.004
    srv.later(sc["start_s"], srv.start)
    phases = [{"name": "ready", "fault": None,
               "load": load.run(plan(srv.url, 10, clients=1, requests=500, stop_after_ok=1))}]
    phases.append({"name": "steady", "fault": None, "load": load.run(plan(srv.url, 2.0))})
    for name, down_s, how in (("kill_server", sc["kill_s"], "SIGKILL to the server process"),
                              ("node_loss", sc["node_s"], "the node's container stopped")):
        fault: dict = {}

        def inject(fault=fault, down_s=down_s, how=how):
            fault.update(t=time.time(), node="node-1", how=how)
            srv.stop()
            srv.later(down_s, srv.start)

        srv.later(1.0, inject)
        res = load.run(plan(srv.url, 1.0 + down_s + 1.5))
        phases.append({"name": name, "load": res, "fault": fault})
    scale = {"asked": time.time()}
    time.sleep(sc["scale_s"])   # the second replica being scheduled and starting
    srv.stop()
    srv.start(capacity=2)
    scale["second_ready"] = time.time()
    phases.append({"name": "two_replicas", "fault": None, "load": load.run(plan(srv.url, 2.0))})
    t0 = time.time()
    srv.stop()
    srv.loop.call_soon_threadsafe(srv.loop.stop)
    return {"deploy": deploy, "phases": phases, "scale": scale, "replicas": [],
            "platform": {"scripted": True, "endpoint": srv.url}, "beyond": BEYOND[platform],
            "teardown": {"t0": t0, "t": time.time()}}


def record(template: dict, platform: str, ev: dict) -> dict:
    """The serve run's record: the template training record's shape, with the serve figures."""
    rec = {k: v for k, v in template.items() if k not in ("schema", "contention", "cleanup", "audit")}
    metrics = {k: v for k, v in rec["metrics"].items() if k in ("queue_s", "startup_s", "step_time_s")}
    metrics.update(sm.from_evidence(ev, PRICE, 0))
    return {**rec, "run_id": f"{platform}-serve", "campaign": CAMPAIGN, "scenario": "serve", "status": "ok",
            "started_at": ev["deploy"]["submitted"] - 20, "finished_at": ev["teardown"]["t"], "metrics": metrics,
            "derive_inputs": {**rec["derive_inputs"], "price": PRICE}}


def generate(dest: Path) -> None:
    templates = {r["platform"]: r for r in map(json.loads, (TEMPLATE / "runs.jsonl").read_text().splitlines())
                 if r["scenario"] == "contention"}
    config = json.loads((TEMPLATE / "campaign.json").read_text())["config"] | {"campaign": CAMPAIGN}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp, CAMPAIGN)
        store.open("serving-fixture-1", config, resume=False)
        for platform in ("slurm", "k8s"):
            ev = serve_run(platform)
            rec = record(templates[platform], platform, ev)
            rec["raw_evidence"] = store.write_raw(rec["run_id"], {"serve": ev})
            store.append(rec)
        store.close()
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(Path(tmp) / CAMPAIGN, dest / CAMPAIGN, ignore=shutil.ignore_patterns(".lock"))


if __name__ == "__main__":
    generate(FIXTURE)
