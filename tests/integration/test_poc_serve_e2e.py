"""The serving scenario end to end through the `poc` CLI on each local cluster: a short real DDP training run
writes a checkpoint, the same inference server serves it (Kubernetes: a Deployment behind a Service
routed by kube-proxy; Slurm: a batch job found through squeue and its own event, behind the
harness's balancer), the same bounded load measures ready, steady latency, the serving process
killed, its node lost, and the scale-out to two replicas; nothing is left behind, `poc report` shows
the inference section with its two charts and `poc rederive` re-derives every figure."""
from __future__ import annotations

import json
import subprocess

import pytest

from harness import config
from harness.smoke import smoke_config

pytestmark = pytest.mark.integration

from _poc import poc_argv, write_config  # noqa: E402

# One campaign per platform, each in its platform's integration lane (scripts/test.sh): the node loss
# and the restarts touch only that platform's cluster, so the two run side by side.
PLATFORMS = [pytest.param("slurm", marks=pytest.mark.slurm), pytest.param("k8s", marks=pytest.mark.k8s)]


def _poc(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run(poc_argv(*args), capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module", params=PLATFORMS)
def campaign(request, tmp_path_factory):
    plat = request.param
    up = _poc("cluster", "up", f"--{plat}", "--provider", "native", "--quiet", timeout=3600)
    assert up.returncode == 0, up.stderr[-3000:]
    cfg = smoke_config(config.load(None), [plat], 0)
    data = cfg.model_dump(mode="json")
    data.update(campaign=f"serve-e2e-{plat}", faults=[], contention=None, order="blocked")
    data["ux"]["mistakes"] = []
    data["drills"]["kinds"] = []
    # short phases: the figures' meaning is the same, their counts smaller. A fault phase ends 5 s after
    # its last failure; its bound covers Slurm's node loss here (SlurmdTimeout 30 s, then the requeue:
    # about 80 s) and Kubernetes' (20 s grace + 30 s toleration + the pod's start: about 55 s)
    data["serve"].update(enabled=True, train_steps=12, clients=2, phase_s=5, fault_phase_s=150, fault_after_s=3,
                         settle_s=5)
    tmp = tmp_path_factory.mktemp(f"serve-{plat}")
    path = write_config(tmp / "poc.json", data)
    res = tmp / "results"
    run = _poc("run", "--config", str(path), "--results", str(res))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cdir = res / f"serve-e2e-{plat}"
    recs = {r["run_id"]: r for r in map(json.loads, (cdir / "runs.jsonl").read_text().splitlines())}
    return {"dir": cdir, "res": res, "recs": recs, "plat": plat}


def test_the_service_is_measured_through_every_phase(campaign):
    plat = campaign["plat"]
    rec = campaign["recs"][f"{plat}-serve"]
    assert rec["status"] == "ok", rec.get("error")
    m = rec["metrics"]
    assert "step_time_s" in m                              # the training run it served is measured too
    ready = m["serve_ready_s"]
    assert 0 < ready["lo"] <= ready["value"] <= ready["hi"] < 300, ready
    assert m["serve_availability"]["value"] == 1.0, m["serve_availability"]     # no fault in the steady phase
    assert 0 < m["serve_latency_p50_s"]["value"] <= m["serve_latency_p99_s"]["value"] < 5
    assert m["serve_throughput_rps"]["value"] > 1
    for fault in ("kill_server", "node_loss"):
        # one replica: a crash or a lost node is an outage until the platform (or the user's loop) restarts it
        assert m[f"serve_failed_requests:{fault}"]["value"] >= 1, (fault, m[f"serve_failed_requests:{fault}"])
        d = m[f"serve_degraded_s:{fault}"]
        assert d["value"] is not None and d["value"] > 0, (fault, d)    # healthy again before the phase ended
        assert rec["serve"]["stopped_by"][fault] == "settled"
    assert 0 < m["serve_scaleout_s"]["value"] < 300 and m["serve_scaleout_p50_ratio"]["value"] > 0
    assert m["serve_latency_p50_s:two_replicas"]["value"] > 0
    assert m["serve_cost_per_1k_usd"]["value"] > 0
    s = rec["serve"]
    assert set(s["phases"]) == {"ready", "steady", "kill_server", "node_loss", "two_replicas"}
    assert not s["teardown"].get("errors"), s["teardown"]
    print(f"\n{plat} serve: ready {ready['value']:.1f}s, p50 {m['serve_latency_p50_s']['value'] * 1e3:.1f} ms, "
          f"p99 {m['serve_latency_p99_s']['value'] * 1e3:.1f} ms, {m['serve_throughput_rps']['value']:.0f} req/s; "
          f"kill: {m['serve_failed_requests:kill_server']['value']} failed, "
          f"{m['serve_degraded_s:kill_server']['value']:.1f}s degraded; node loss: "
          f"{m['serve_failed_requests:node_loss']['value']} failed, {m['serve_degraded_s:node_loss']['value']:.1f}s; "
          f"scale-out {m['serve_scaleout_s']['value']:.1f}s (p50 x{m['serve_scaleout_p50_ratio']['value']:.2f})")


def test_the_report_shows_the_inference_section_and_rederive_finds_no_mismatch(campaign):
    out = campaign["res"] / "report"
    rep = _poc("report", str(campaign["res"]), "--out", str(out), timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    text = (out / "report.md").read_text()
    label = {"slurm": "Slurm", "k8s": "Kubernetes"}[campaign["plat"]]
    assert "## Online inference (serving)" in text
    # the decision row: its conditions first (the ledger), then the platform's figures
    row = next((ln for ln in text.splitlines() if ln.startswith("| inference |")), "")
    assert f"| {label}: ready" in row, row
    pngs = [p for p in (out / "charts").glob("*.png") if "serv" in p.name or "latency_cdf" in p.name]
    assert len(pngs) >= 2 and all(p.stat().st_size > 10_000 for p in pngs), pngs
    red = _poc("rederive", str(campaign["res"]), "--json", timeout=300)
    doc = json.loads(red.stdout)
    assert red.returncode == 0 and doc["mismatches"] == 0 and doc["runs_checked"] == 1, red.stdout[-3000:]
