"""The control-plane restart drill end to end through the `poc` CLI on each local cluster, during
real DDP training with a same-shape job queued behind it. Slurm restarts slurmdbd, slurmctld,
then each slurmd; Kubernetes the apiserver, controller-manager and scheduler, Kueue and JobSet, then
each kubelet. Every component comes back, the training job survives without a restart, the queued
job starts after it, the probes measured submissions and status queries the whole time, nothing is
left behind, `poc report` shows the drills and `poc rederive` re-derives every figure."""
from __future__ import annotations

import json
import subprocess

import pytest

from harness import config
from harness.smoke import smoke_config

pytestmark = pytest.mark.integration

from _poc import poc_argv, write_config  # noqa: E402

# One campaign per platform, each in its platform's integration lane (scripts/test.sh): a drill
# restarts only its own cluster's components, so the Slurm and the Kubernetes drill run side by side.
PLATFORMS = [pytest.param("slurm", marks=pytest.mark.slurm), pytest.param("k8s", marks=pytest.mark.k8s)]


def _poc(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(poc_argv(*args), capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module", params=PLATFORMS)
def campaign(request, tmp_path_factory):
    plat = request.param
    up = _poc("cluster", "up", f"--{plat}", "--provider", "native", "--quiet", timeout=3600)
    assert up.returncode == 0, up.stderr[-3000:]
    cfg = smoke_config(config.load(None), [plat], 0)
    data = cfg.model_dump(mode="json")
    data.update(campaign=f"drill-e2e-{plat}", faults=[], contention=None, order="blocked")
    data["ux"]["mistakes"] = []
    data["serve"]["enabled"] = False         # the serving scenario has its own e2e test (test_poc_serve_e2e.py)
    data["workload"]["steps"] = 12           # the queued job's
    data["drills"].update(kinds=["restart"], steps=200, at_step=5)
    tmp = tmp_path_factory.mktemp(f"drill-{plat}")
    path = write_config(tmp / "poc.json", data)
    res = tmp / "results"
    run = _poc("run", "--config", str(path), "--results", str(res))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cdir = res / f"drill-e2e-{plat}"
    recs = {r["run_id"]: r for r in map(json.loads, (cdir / "runs.jsonl").read_text().splitlines())}
    return {"dir": cdir, "res": res, "recs": recs, "plat": plat}


def test_the_restart_drill_keeps_the_job_running_and_starts_the_queued_one(campaign):
    plat = campaign["plat"]
    rec = campaign["recs"][f"{plat}-drill-restart"]
    assert rec["status"] == "ok", rec.get("error")
    d, m = rec["drill"], rec["metrics"]
    want = (["slurmdbd", "slurmctld"] if plat == "slurm"
            else ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue", "jobset"])
    assert d["plan"][:len(want)] == want and len(d["plan"]) > len(want)   # then the nodes one by one
    assert all(s["ok"] and s["back"] >= s["started"] for s in d["steps"]), d["steps"]
    assert d["queued"]["waiting_before"], d["queued"]       # it really waited behind the drilled job
    assert m["upgrade_job_survived"]["value"] == 1.0, m["upgrade_job_survived"]
    assert m["upgrade_steps_lost"]["value"] == 0 and m["upgrade_job_restarts"]["value"] == 0
    assert m["upgrade_queued_delay_s"]["value"] is not None and m["upgrade_queued_delay_s"]["value"] >= 0
    for k in ("upgrade_submit_refused_s", "upgrade_status_refused_s"):
        assert m[k]["value"] is not None and m[k]["detail"]["tries"] >= 10, m[k]   # probed throughout
    assert m["upgrade_records_intact"]["value"] == 1.0, m["upgrade_records_intact"]
    assert m["upgrade_leftovers"]["value"] == 0, d["leftovers"]
    assert "step_time_s" in m and "startup_s" in m          # it is a training run like the others
    print(f"\n{plat} restart drill: " + ", ".join(f"{s['component']} {s['back'] - s['started']:.1f}s"
                                                   for s in d["steps"])
          + f"; submissions refused {m['upgrade_submit_refused_s']['value']:.1f}s, status refused "
            f"{m['upgrade_status_refused_s']['value']:.1f}s, queued delay {m['upgrade_queued_delay_s']['value']:.1f}s")


def test_the_report_shows_the_drills_and_rederive_finds_no_mismatch(campaign):
    out = campaign["res"] / "report"
    rep = _poc("report", str(campaign["res"]), "--out", str(out), timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    text = (out / "report.md").read_text()
    assert "Upgrades (drills)" in text and (out / "charts" / "drills.png").stat().st_size > 10_000
    red = _poc("rederive", str(campaign["res"]), "--json", timeout=300)
    doc = json.loads(red.stdout)
    assert red.returncode == 0 and doc["mismatches"] == 0 and doc["runs_checked"] == 1, red.stdout[-3000:]
