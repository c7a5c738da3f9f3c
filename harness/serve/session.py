"""The serving scenario inside one run: the same for every platform.

The pipeline (harness/pipeline.py execute) runs a "serve" run like a short training run, with three
hooks here: `open` before the submit (the platform's PlatformServe, or an ERROR/TIP that it has none),
`run` once the training job succeeded and before cleanup removes its checkpoint (deploy one replica
for that checkpoint, then drive the same bounded load through each phase), and `close` in the
pipeline's finally (teardown: nothing the scenario made outlives the run). Everything seen goes to
raw["serve"] with its time-stamps, so harness/serve/metrics.py can re-derive every figure.

Phases, in order (each a bounded closed-loop load through the platform's own endpoint):
ready (submit -> first successful /predict), steady (one replica), kill_server (SIGKILL the serving
process some seconds in), node_loss (lose the replica's node some seconds in; the node is put back
after), then scale to two replicas (asked -> the new replica's first direct answer) and two_replicas.
"""
from __future__ import annotations

import ipaddress
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from .. import redact
from ..backends.base import Handle
from ..context import RunContext
from ..errors import BackendError
from ..spec import JobSpec
from . import load
from .base import PREDICT, PlatformServe
from .platforms import platform_serve

INFO_POLL_S = 0.25
FAULTS = ("kill_server", "node_loss")


def allow_networks(cidrs: list[str]) -> Callable[[str], bool]:
    """The load generator's allow function: only the platform's own addresses."""
    nets = [ipaddress.ip_network(c, strict=False) for c in cidrs]

    def allow(addr: str) -> bool:
        try:
            ip = ipaddress.ip_address(addr)
        except ValueError:
            return False
        return any(ip in n for n in nets)
    return allow


def body_for(model: dict, rows: int) -> dict:
    """A request the served model accepts (from the server's own /info, as a client would build it)."""
    dims = model.get("dims") or {}
    if model.get("kind") == "transformer":
        seq, vocab = int(dims["seq_len"]), int(dims["vocab_size"])
        return {"inputs": [[(i * 7 + j) % vocab for j in range(seq)] for i in range(rows)]}
    width = int(dims["width"])
    return {"inputs": [[((i + j) % 13) / 13.0 for j in range(width)] for i in range(rows)]}


def get_json(url: str, timeout: float) -> tuple[int | None, dict | None, str | None]:
    """(status, body, error kind) of one GET; never raises for what a server that is not up yet does."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null"), None
    except urllib.error.HTTPError as exc:
        return exc.code, None, f"http_{exc.code}"
    except (OSError, ValueError) as exc:
        return None, None, type(exc).__name__


class Session:
    """One serving scenario, from `open` to `close`; `evidence` is what raw["serve"] keeps."""

    def __init__(self, ctx: RunContext, spec: JobSpec, *, sleep: Callable[[float], None] = time.sleep):
        self.ctx, self.spec, self.cfg = ctx, spec, ctx.cfg.serve
        self.clock, self.sleep = ctx.clock, sleep
        self.platform: PlatformServe | None = None
        self.evidence: dict = {"settings": self.cfg.model_dump(), "phases": [], "replicas": []}
        self._closed = False

    # --- hooks -------------------------------------------------------------------------------
    def open(self) -> None:
        self.platform = platform_serve(self.ctx.backend, self.cfg)
        self.evidence["platform_name"] = self.platform.platform

    def run(self, train: Handle) -> None:
        p, ev, cfg = self.platform, self.evidence, self.cfg
        assert p is not None, "open() first"
        ev["deploy"] = p.deploy(train, self.spec)
        self._journal(train)
        base = p.url(cfg.ready_timeout_s).rstrip("/")
        ev["url"], ev["networks"] = base, p.networks()
        allow = allow_networks(ev["networks"])
        load.check_target(base + PREDICT, allow)            # before the first request: refused, not tried
        deadline = float(ev["deploy"]["submitted"]) + cfg.ready_timeout_s
        info = self._wait_info(base, deadline)
        ev["model"] = info.get("model")
        body = body_for(ev["model"], cfg.rows)
        self._progress("ready")
        ready = load.run(load.Plan(base + PREDICT, body, requests=100_000, clients=1,
                                   duration_s=max(1.0, deadline - self.clock()), timeout_s=cfg.request_timeout_s,
                                   error_pause_s=0.1, stop_after_ok=1), allow=allow)
        self._phase_done("ready", ready, None, extra={"info_polls": info.pop("_polls", None)})
        if not ready["ok"]:
            raise BackendError(f"the service did not answer /predict within serve.ready_timeout_s "
                               f"({cfg.ready_timeout_s:g} s) of the submit",
                               tip="read the serving replica's logs (raw evidence) and raise serve.ready_timeout_s")
        self._steady("steady", base + PREDICT, body, allow)
        for fault in cfg.faults:
            self._fault_phase(fault, base + PREDICT, body, allow, train)
        if cfg.scale_out:
            ev["scale"] = self._scale(body, allow, train)
            ev["scale"].update(self._in_service(2, float(ev["scale"]["asked"]) + cfg.scale_timeout_s))
            self._steady("two_replicas", base + PREDICT, body, allow)
        ev["platform"] = redact.scrub(p.evidence()).data
        ev["beyond"] = p.beyond()

    def close(self) -> None:
        if self._closed or self.platform is None:
            return
        self._closed = True
        t0 = self.clock()
        try:
            self.evidence["teardown"] = {**self.platform.teardown(), "t0": t0, "t": self.clock()}
        except Exception as exc:  # noqa: BLE001 - teardown reports, never hides the run's own error
            self.evidence["teardown"] = {"t0": t0, "t": self.clock(), "errors": [f"{type(exc).__name__}: {exc}"]}
        if "platform" not in self.evidence:       # a run that failed part-way still keeps what the platform shows
            try:
                self.evidence["platform"] = redact.scrub(self.platform.evidence()).data
            except Exception as exc:  # noqa: BLE001
                self.evidence["platform"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}

    def summary(self) -> dict:
        ph = {x["name"]: x["load"] for x in self.evidence["phases"]}
        return {"url": self.evidence.get("url"), "phases": {n: {"requests": r["requests"], "ok": r["ok"],
                                                                "failed": r["failed"]} for n, r in ph.items()},
                "stopped_by": {n: r["stopped_by"] for n, r in ph.items()},
                "teardown": {k: v for k, v in (self.evidence.get("teardown") or {}).items() if k != "t0"}}

    # --- phases ------------------------------------------------------------------------------
    def _progress(self, what: str) -> None:
        self.ctx.progress(self.spec.platform, self.spec.run_id, f"serve: {what}", 0.0)

    def _wait_info(self, base: str, deadline: float) -> dict:
        """Poll the server's /info until it says ready (each try is kept: the ready stamp's lower bound)."""
        polls = []
        while self.clock() < deadline:
            t0 = self.clock()
            status, body, err = get_json(base + "/info", timeout=min(2.0, self.cfg.request_timeout_s))
            polls.append({"t0": t0, "t1": self.clock(), "status": status, "error": err,
                          "ready": bool(body and body.get("ready"))})
            if body and body.get("ready") and body.get("model"):
                return {**body, "_polls": {"tries": len(polls), "first": polls[0], "last": polls[-1]}}
            self.sleep(INFO_POLL_S)
        raise BackendError(f"the service was not ready within serve.ready_timeout_s ({self.cfg.ready_timeout_s:g} s) "
                           f"of the submit ({len(polls)} tries of {base}/info; last: "
                           f"{polls[-1]['status'] or polls[-1]['error'] if polls else 'none'})",
                           tip="read the serving replica's logs (raw evidence) and raise serve.ready_timeout_s")

    def _plan(self, url: str, body: dict, duration: float, settle_s: float = 0.0) -> load.Plan:
        c = self.cfg
        return load.Plan(url, body, requests=c.max_requests, duration_s=duration, clients=c.clients,
                         timeout_s=c.request_timeout_s, settle_s=settle_s)

    def _phase_done(self, name: str, result: dict, fault: dict | None, extra: dict | None = None) -> None:
        self.evidence["phases"].append({"name": name, "load": result, "fault": fault, **(extra or {})})
        self._snapshot(name)

    def _snapshot(self, when: str) -> None:
        try:
            self.evidence["replicas"].append({"when": when, "t": self.clock(), "replicas": self.platform.replicas()})
        except Exception as exc:  # noqa: BLE001 - a snapshot is evidence, not a step that can fail the run
            self.evidence["replicas"].append({"when": when, "t": self.clock(), "error": str(exc)[:300]})

    def _steady(self, name: str, url: str, body: dict, allow) -> None:
        self._progress(name)
        self._phase_done(name, load.run(self._plan(url, body, self.cfg.phase_s), allow=allow), None)

    def _fault_phase(self, fault: str, url: str, body: dict, allow, train: Handle) -> None:
        """The load on a thread of its own; the fault `fault_after_s` into it, from this thread. The node
        loss is journalled on the training run's handle before it acts (the platform calls back)."""
        self._progress(fault)
        box: dict = {}

        def drive() -> None:
            try:
                box["result"] = load.run(self._plan(url, body, self.cfg.fault_phase_s, self.cfg.settle_s),
                                         allow=allow)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the session's thread
                box["error"] = exc
        th = threading.Thread(target=drive, name=f"serve-load-{fault}", daemon=True)
        th.start()
        self.sleep(self.cfg.fault_after_s)
        info: dict | None = None
        try:
            info = (self.platform.kill_server() if fault == "kill_server"
                    else self.platform.lose_node(journal=lambda: self._journal(train)))
        finally:
            th.join(self.cfg.fault_phase_s + self.cfg.request_timeout_s + 30)
            restored = self.platform.restore() if fault == "node_loss" else None
        if "error" in box:
            raise box["error"]
        if "result" not in box:
            raise BackendError(f"the {fault} phase's load did not end", tip="report this as a harness bug")
        self._phase_done(fault, box["result"], info, extra={"restored": restored} if restored is not None else None)

    def _journal(self, train: Handle) -> None:
        """The platform names what it made or is about to change on the training run's handle (Slurm:
        the serving jobs' ids; Kubernetes: the Deployment, Service, ConfigMap; a node the node loss takes,
        with the fault's own mark): journal it again, so a crashed campaign's cancel on --resume or
        `poc cleanup` removes those and brings the node back."""
        self.ctx.store.mark_inflight(train.to_json())

    def _in_service(self, n: int, deadline: float) -> dict:
        """Wait until n replicas are in the platform's own routing (Kubernetes: ready in the Service's
        EndpointSlices; Slurm: healthy in the balancer). The new replica answers a direct request before
        that, and a phase started then opens its kept-alive connections to the old replica only (seen:
        Kubernetes' two-replica phase started 0.03 s after the direct answer, its pod in the Service 0.3 s
        later, and 100 % of the phase's requests went to the old pod)."""
        polls = 0
        while True:
            polls += 1
            serving = [r for r in self.platform.replicas() if r.get("in_service")]
            if len(serving) >= n:
                return {"in_service_at": self.clock(), "in_service_polls": polls}
            if self.clock() >= deadline:
                raise BackendError(f"{len(serving)} of {n} replicas in the platform's routing within "
                                   f"serve.scale_timeout_s ({self.cfg.scale_timeout_s:g} s) of the scale-out",
                                   tip="read the replicas' records in the raw evidence; raise serve.scale_timeout_s")
            self.sleep(0.5)     # as _scale: each look is the platform's own query (squeue, the API server)

    def _scale(self, body: dict, allow, train: Handle) -> dict:
        """Two replicas: asked -> the new replica's first successful answer, asked of it directly."""
        self._progress("scale out")
        before = {r.get("name") for r in self.platform.replicas()}
        asked = self.platform.scale(2)
        self._journal(train)
        deadline = float(asked["asked"]) + self.cfg.scale_timeout_s
        tries, last_err = 0, None
        while self.clock() < deadline:
            new = [r for r in self.platform.replicas() if r.get("name") not in before and r.get("endpoint")]
            for r in new:
                url = f"http://{r['endpoint']}{PREDICT}"
                try:
                    load.check_target(url, allow)
                except load.AddressRefused as exc:
                    raise BackendError(str(exc), tip="the new replica's address is not the platform's own") from exc
                tries += 1
                res = load.run(load.Plan(url, body, requests=1, duration_s=self.cfg.request_timeout_s + 1,
                                         clients=1, timeout_s=self.cfg.request_timeout_s, error_pause_s=0),
                               allow=allow)
                if res["ok"]:
                    end = max(s + lat for s, lat, e in zip(res["log"]["start"], res["log"]["latency_s"],
                                                          res["log"]["error"], strict=True) if e is None)
                    return {**asked, "replica": r, "second_ready": res["started"] + end, "tries": tries,
                            "probe": res}
                last_err = next((e for e in res["log"]["error"] if e), None)
            self.sleep(0.5)
        raise BackendError(f"the second replica did not answer within serve.scale_timeout_s "
                           f"({self.cfg.scale_timeout_s:g} s) ({tries} tries; last error {last_err})",
                           tip="read the replicas' records in the raw evidence; raise serve.scale_timeout_s")
