"""The serving scenario's session in the pipeline: a scripted scheduler for the training job, and a
platform whose replicas are the real inference server (harness/data/serve/serve_model.py) as local
processes on loopback, driven by the real load generator. What the platforms do (Deployment and
Service; a batch job behind the harness's balancer) is tested on the real clusters in
tests/integration/test_serve_k8s.py, test_serve_slurm.py and test_poc_serve_e2e.py.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.fakes import ScriptedBackend
from support.paths import ROOT

from harness import evidence
from harness.config import from_mapping
from harness.errors import BackendError
from harness.pipeline import campaign
from harness.rederive import check
from harness.scenarios import plan
from harness.serve import platforms
from harness.serve import session as ss
from harness.serve.platforms import platform_serve
from harness.store import Store

torch = pytest.importorskip("torch")

SERVE = ROOT / "harness" / "data" / "serve" / "serve_model.py"
WORKLOAD = ROOT / "harness" / "data" / "workloads" / "ddp_train.py"


def LOCAL_STAMPS(platform, raw):
    return evidence.stamps("local", raw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServe:
    """Replicas as local server processes; a 'crash' is a SIGKILL that a supervisor (this class)
    answers by starting the process again after `restart_s`, as a container restart would."""
    platform = "slurm"

    def __init__(self, ckpt: Path, restart_s: float = 1.0, inflight: Path | None = None):
        """inflight: the campaign's journal directory, read back when the node loss is about to act."""
        self.ckpt, self.restart_s, self.inflight = ckpt, restart_s, inflight
        self.procs: dict[str, tuple[subprocess.Popen, int]] = {}
        self.calls: list[str] = []
        self.journalled: dict | None = None
        self.train = None

    def _start(self, name: str, port: int) -> None:
        p = subprocess.Popen([sys.executable, str(SERVE), "--ckpt-dir", str(self.ckpt), "--port", str(port),
                              "--workload", str(WORKLOAD), "--threads", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs[name] = (p, port)

    def deploy(self, train, spec):
        self.calls.append(f"deploy:{train.run_id}")
        self.train = train
        t0 = time.time()
        self._start("r1", free_port())
        return {"submitted": t0, "submitted_after": time.time(), "how": ["serve_model.py"], "objects": ["r1"]}

    def url(self, timeout_s):
        return f"http://127.0.0.1:{self.procs['r1'][1]}"

    def networks(self):
        return ["127.0.0.0/8"]

    def replicas(self):
        return [{"name": n, "node": "localhost", "endpoint": f"127.0.0.1:{port}", "ready": p.poll() is None,
                 "since": None, "in_service": p.poll() is None and self._ready(port)}
                for n, (p, port) in self.procs.items()]

    def _ready(self, port: int) -> bool:
        """In this fake's routing once /readyz answers (as a Service's endpoint or the balancer's backend)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def scale(self, n):
        self.calls.append(f"scale:{n}")
        t = time.time()
        self._start("r2", free_port())
        return {"asked": t, "how": ["another process"]}

    def _crash(self, what: str) -> dict:
        p, port = self.procs["r1"]
        t = time.time()
        p.send_signal(signal.SIGKILL)
        p.wait()
        time.sleep(self.restart_s)
        self._start("r1", port)
        self.calls.append(what)
        return {"t": t, "replica": "r1", "node": "localhost", "how": "SIGKILL"}

    def kill_server(self):
        return self._crash("kill")

    def lose_node(self, journal):
        # as a platform does: the node and its mark on the training run's handle, journalled, then the fault
        self.train.data.setdefault("lost_nodes", []).append("localhost")
        self.train.data.setdefault("lost_marks", {})["localhost"] = "poc-lose-node job r1"
        journal()
        if self.inflight is not None:
            self.journalled = json.loads((self.inflight / f"{self.train.run_id}.json").read_text())
        return self._crash("lose")

    def restore(self):
        self.calls.append("restore")
        self.train.data["lost_nodes"].remove("localhost")
        self.train.data["lost_marks"].pop("localhost")
        return {"restored": ["localhost"]}

    def evidence(self):
        return {"processes": sorted(self.procs)}

    def beyond(self):
        return {"discovery": "a fixed port", "balancing": "none", "restarts": "the test's supervisor",
                "scaling": "another process", "written": {}, "harness_parts": []}

    def teardown(self):
        self.calls.append("teardown")
        for p, _ in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        return {"removed": sorted(self.procs), "errors": []}


class ServingScheduler(ScriptedBackend):
    platform = "slurm"

    def __init__(self, serve):
        super().__init__()
        self.serve = serve

    def make_serve(self, cfg):
        return self.serve


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))
    torch.save({"model": model.state_dict(), "opt": {}, "step": 7}, d / "ckpt-7.pt")
    return d


CFG = {"platforms": ["slurm"], "repetitions": 0, "faults": [], "workload": {"steps": 2},
       "allow_destructive_faults": True,
       "serve": {"enabled": True, "clients": 2, "phase_s": 1.5, "fault_phase_s": 30, "fault_after_s": 1,
                 "settle_s": 1,
                 "ready_timeout_s": 60, "scale_timeout_s": 60, "rows": 2}}


@pytest.fixture(autouse=True)
def fake_slurm_part(monkeypatch):
    """The session asks the platform registry for its part: here Slurm's is the fake scheduler's own."""
    monkeypatch.setitem(platforms.PARTS, ServingScheduler.platform, lambda b, serve: b.make_serve(serve))


def _run(tmp_path, backend, cfg=CFG):
    store = Store(tmp_path, "smoke")
    return campaign(from_mapping(cfg), ["slurm"], store, lambda p: backend, resume=False, poll_s=0.05,
                    stamps_fn=LOCAL_STAMPS)


def test_the_plan_has_one_serving_run_per_scheduler_only_when_enabled():
    on = from_mapping({**CFG, "platforms": ["slurm", "k8s", "local"], "repetitions": 1})
    assert [p.run_id for p in plan(on, "k8s")] == ["k8s-clean-01", "k8s-serve"]
    assert not [p for p in plan(on, "local") if p.scenario == "serve"]
    off = from_mapping({**CFG, "serve": {}})
    assert not [p for p in plan(off, "slurm") if p.scenario == "serve"]


def test_a_serving_run_measures_every_phase_and_rederives(tmp_path, ckpt):
    plat = LocalServe(ckpt, inflight=tmp_path / "smoke" / "inflight")
    (rec,) = _run(tmp_path, ServingScheduler(plat))
    assert rec["status"] == "ok", rec.get("error")
    assert plat.calls == ["deploy:slurm-serve", "kill", "lose", "restore", "scale:2", "teardown"]
    # the node loss was in the journal, with its mark, before it acted: `poc cleanup` after a crash there
    # cancels the training handle, which brings the node back
    assert plat.journalled["data"]["lost_nodes"] == ["localhost"], plat.journalled
    assert plat.journalled["data"]["lost_marks"] == {"localhost": "poc-lose-node job r1"}
    names = [s["name"] for s in rec["stages"]]
    assert names.index("submit") < names.index("serve") < names.index("serve:teardown") < names.index("metrics")
    m = rec["metrics"]
    ready = m["serve_ready_s"]
    assert 0 < ready["lo"] <= ready["value"] <= ready["hi"] < 60
    assert 0 < m["serve_latency_p50_s"]["value"] <= m["serve_latency_p99_s"]["value"] < 5
    assert m["serve_throughput_rps"]["value"] > 1 and m["serve_availability"]["value"] == 1.0
    for fault in ("kill_server", "node_loss"):
        # down for at least the supervisor's 1 s restart plus the server's start: requests failed
        assert m[f"serve_failed_requests:{fault}"]["value"] >= 1, fault
        assert m[f"serve_availability:{fault}"]["value"] < 1.0
        d = m[f"serve_degraded_s:{fault}"]
        assert d["value"] is not None and d["hi"] >= 1.0 and d["lo"] <= d["value"]
    assert 0 < m["serve_scaleout_s"]["value"] < 60 and m["serve_scaleout_p50_ratio"]["value"] > 0
    assert m["serve_latency_p50_s:two_replicas"]["value"] > 0
    c = m["serve_cost_per_1k_usd"]
    assert c["value"] > 0 and len(c["detail"]["replica_spans_s"]) == 2
    # the raw evidence keeps every phase's whole load result, and the platform's own records
    raw = json.loads(__import__("gzip").open(tmp_path / "smoke" / "runs" / "slurm-serve" / "raw.json.gz").read())
    serve = raw["serve"]
    assert [p["name"] for p in serve["phases"]] == ["ready", "steady", "kill_server", "node_loss", "two_replicas"]
    # the two-replica load starts once both are in the platform's routing, not at the new one's first answer
    scale, two = serve["scale"], serve["phases"][4]["load"]
    assert scale["second_ready"] <= scale["in_service_at"] <= two["started"] and scale["in_service_polls"] >= 1
    # each fault phase ended once the service had answered for settle_s, well inside its 30 s bound
    assert [p["load"]["stopped_by"] for p in serve["phases"][2:4]] == ["settled", "settled"]
    assert serve["platform"] == {"processes": ["r1", "r2"]} and serve["teardown"]["removed"] == ["r1", "r2"]
    assert all(p.poll() is not None for p, _ in plat.procs.values())
    (res,) = check(tmp_path / "smoke", stamps_fn=LOCAL_STAMPS)
    assert res.findings == []


def test_the_two_replica_phase_waits_for_both_replicas_in_service(ckpt):
    """A replica that answers directly but is not yet in the routing (a pod before its EndpointSlice says
    ready): the phase waits; one that never joins ends the run with why, at the scale-out deadline."""
    from harness.serve.session import Session
    plat = LocalServe(ckpt)
    sess = Session.__new__(Session)
    sess.platform, sess.clock, sess.sleep = plat, time.time, time.sleep
    sess.cfg = SimpleNamespace(scale_timeout_s=2.0)
    plat._start("r1", free_port())
    plat._start("r2", free_port())
    try:
        deadline = time.time() + 60
        got = sess._in_service(2, deadline)
        assert all(r["in_service"] for r in plat.replicas()) and got["in_service_at"] <= time.time()
        with pytest.raises(BackendError, match="2 of 3 replicas in the platform's routing"):
            sess._in_service(3, time.time() + 0.5)
    finally:
        plat.teardown()


def test_a_platform_without_serving_is_refused_before_anything_is_submitted(tmp_path, monkeypatch):
    monkeypatch.delitem(platforms.PARTS, "slurm")
    class NoServe(ScriptedBackend):
        platform = "slurm"

        def submit(self, spec, rendered):
            raise AssertionError("submitted")
    (rec,) = _run(tmp_path, NoServe())
    assert rec["status"] == "failed" and rec["error"]["stage"] == "serve:open"
    assert "no serving scenario" in rec["error"]["message"] and rec["error"]["tip"]


def test_a_service_that_never_answers_fails_the_run_and_is_torn_down(tmp_path, ckpt):
    class Dead(LocalServe):
        def deploy(self, train, spec):
            out = super().deploy(train, spec)
            self.procs["r1"][0].kill()
            return out
    plat = Dead(ckpt)
    cfg = {**CFG, "serve": {**CFG["serve"], "ready_timeout_s": 3}}
    (rec,) = _run(tmp_path, ServingScheduler(plat), cfg)
    assert rec["status"] == "failed" and rec["error"]["stage"] == "serve"
    assert "not ready within serve.ready_timeout_s" in rec["error"]["message"]
    assert plat.calls[-1] == "teardown"


def test_the_load_only_targets_the_platforms_own_networks():
    allow = ss.allow_networks(["10.96.0.0/16", "127.0.0.0/8"])
    assert allow("10.96.3.4") and allow("127.0.0.1")
    assert not allow("10.97.0.1") and not allow("192.168.1.1") and not allow("not-an-ip")


def test_the_request_body_follows_the_servers_own_model_description():
    assert ss.body_for({"kind": "mlp", "dims": {"width": 3}}, 2)["inputs"] == [[0.0, 1 / 13, 2 / 13],
                                                                                [1 / 13, 2 / 13, 3 / 13]]
    rows = ss.body_for({"kind": "transformer", "dims": {"seq_len": 4, "vocab_size": 5}}, 3)["inputs"]
    assert len(rows) == 3 and all(len(r) == 4 and all(0 <= t < 5 for t in r) for r in rows)


def test_no_server_is_left_running(ckpt):
    # the module's servers were all killed by teardown (no stray serve_model.py of ours)
    out = subprocess.run(["pgrep", "-f", f"{SERVE} --ckpt-dir {ckpt}"], check=False, capture_output=True, text=True)
    assert out.stdout.strip() == "", out.stdout
    assert os.path.exists(SERVE)


def test_a_platform_without_a_serving_part_is_refused_with_a_tip():
    with pytest.raises(BackendError, match="no serving scenario on local") as exc:
        platform_serve(ScriptedBackend(), None)
    assert exc.value.tip == "the serving scenario runs on the k8s and slurm platforms"


def test_node_loss_needs_the_destructive_opt_in():
    with pytest.raises(Exception, match="allow_destructive_faults"):
        from_mapping({**CFG, "allow_destructive_faults": False})
    cfg = from_mapping({**CFG, "allow_destructive_faults": False,
                        "serve": {**CFG["serve"], "faults": ["kill_server"]}})
    assert cfg.serve.faults == ["kill_server"]
    with pytest.raises(Exception, match="unknown serving fault"):
        from_mapping({**CFG, "serve": {"faults": ["meteor"]}})
