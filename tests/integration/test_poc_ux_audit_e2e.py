"""UX and auditing end to end through the `poc` CLI on both local clusters: a campaign with one clean run per
scheduler and two user mistakes each (one Slurm refuses at sbatch, one that fails only once the job
runs), the Kubernetes probes as the native cluster's restricted user. Every run carries its audit
answers from the platforms' own records (attributed to who really submitted it), what the user wrote
and the calls it took; the probes their clear message; `poc report` opens with the decision summary
and shows the user-experience and audit sections from these records; `poc rederive` re-derives all
of it from the stored raw evidence."""
from __future__ import annotations

import json
import subprocess

import pytest

from harness import config
from harness.smoke import native_tenant, smoke_config

pytestmark = pytest.mark.integration

from _poc import poc_argv, write_config  # noqa: E402

MISTAKES = ["wrong_queue", "entrypoint_typo"]


def _poc(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(poc_argv(*args), capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    up = _poc("cluster", "up", "--slurm", "--k8s", "--provider", "native", "--quiet", timeout=3600)
    assert up.returncode == 0, up.stderr[-3000:]
    tenant = native_tenant()
    assert tenant, "the native cluster has no restricted user (harness/clusters/k8s/tenant.py)"
    cfg = smoke_config(config.load(None), ["slurm", "k8s"], 1, tenant=tenant)
    data = cfg.model_dump(mode="json")
    data.update(campaign="ux-audit-e2e", faults=[], contention=None, order="blocked")
    data["workload"]["steps"] = 12
    data["ux"]["mistakes"] = MISTAKES
    data["drills"]["kinds"] = []   # the drills have their own e2e test (test_poc_drill_e2e.py)
    data["serve"]["enabled"] = False   # so has the serving scenario (test_poc_serve_e2e.py)
    tmp = tmp_path_factory.mktemp("ux-audit")
    path = write_config(tmp / "poc.json", data)
    res = tmp / "results"
    run = _poc("run", "--config", str(path), "--results", str(res))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cdir = res / "ux-audit-e2e"
    recs = {r["run_id"]: r for r in map(json.loads, (cdir / "runs.jsonl").read_text().splitlines())}
    return {"dir": cdir, "recs": recs, "tenant": tenant, "said": run.stdout + run.stderr}


def test_every_run_is_audited_from_the_platforms_records_and_attributed_to_its_submitter(campaign):
    recs, tenant = campaign["recs"], campaign["tenant"]
    assert set(recs) == {"slurm-clean-01", "k8s-clean-01", *(f"{p}-mistake-{k.replace('_', '-')}"
                                                             for p in ("slurm", "k8s") for k in MISTAKES)}
    for run_id, rec in recs.items():
        assert rec["status"] == "ok", (run_id, rec.get("error"))
        if run_id == "slurm-mistake-wrong-queue":   # refused at sbatch: no job, nothing to audit
            continue
        answers = rec["audit"]["answers"]
        assert set(answers) == {"who_submitted", "what", "when", "where", "usage", "outcome", "who_cancelled"}
        who = answers["who_submitted"]
        assert who["answered"] and who["source"], (run_id, who)
        user = who["value"].split()[0]
        if run_id.startswith("slurm-"):
            assert user == "poc" and "account poc" in who["value"], (run_id, who)   # the ordinary account
        elif "mistake" in run_id:
            assert user == tenant["user"], (run_id, who)   # the namespace-scoped user, not the admin
            assert answers["who_cancelled"]["value"].split()[0] == tenant["user"], answers["who_cancelled"]
        else:
            assert user != tenant["user"]                  # the campaign's own (admin) identity
    clean = recs["slurm-clean-01"]["audit"]["answers"]
    assert clean["where"]["answered"] and clean["usage"]["answered"] and clean["outcome"]["answered"]


def test_clean_runs_carry_what_the_user_wrote_the_calls_and_the_first_log_line(campaign):
    for plat in ("slurm", "k8s"):
        rec = campaign["recs"][f"{plat}-clean-01"]
        w = rec["ux"]["written"]
        assert w["job_files"] == 1 and w["job_lines"] > 20 and w["job_objects"] == 1, w
        calls = rec["ux"]["calls"]
        assert set(calls) >= {"submit", "watch", "logs", "cancel"}, calls
        assert all(sum(c.values()) > 0 for c in calls.values()), calls
        m = rec["metrics"]["first_log_s"]
        assert 0 < m["lo"] <= m["value"] <= m["hi"] < 120, m
    assert "sbatch" in campaign["recs"]["slurm-clean-01"]["ux"]["calls"]["submit"]
    assert "CREATE JobSet" in campaign["recs"]["k8s-clean-01"]["ux"]["calls"]["submit"]


def test_each_mistake_got_a_clear_message_in_the_platforms_own_words(campaign):
    recs = campaign["recs"]
    refused = recs["slurm-mistake-wrong-queue"]["mistake"]
    assert refused["clear"] and refused["at_submit"] and "gpu-typo" in refused["message"]
    kueue = recs["k8s-mistake-wrong-queue"]["mistake"]
    assert kueue["clear"] and not kueue["at_submit"] and "doesn't exist" in kueue["message"], kueue
    for plat in ("slurm", "k8s"):
        typo = recs[f"{plat}-mistake-entrypoint-typo"]
        assert typo["mistake"]["clear"] and "ddp_trian.py" in typo["mistake"]["message"], typo["mistake"]
        assert typo["metrics"]["time_to_error_s:entrypoint_typo"]["value"] == typo["mistake"]["time_to_error_s"]
    assert "k8s-mistake-wrong-queue: ok  clear error after" in campaign["said"], campaign["said"][-3000:]


def test_the_report_opens_with_the_decision_and_shows_ux_and_audit_from_these_runs(campaign):
    rep = _poc("report", str(campaign["dir"]), timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    md = (campaign["dir"] / "report" / "report.md").read_text()
    sections = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    # the bottom line first (the answer in a few sentences), then the decision summary it comes from
    assert sections[0] == "Bottom line" and sections[1].lower().startswith("decision summary"), sections
    assert any("user experience" in s.lower() for s in sections) and any("audit" in s.lower() for s in sections)
    assert "LocalQueue poc-gpu-queue-typo doesn't exist" in md and "ddp_trian.py" in md
    assert campaign["tenant"]["user"] in md


def test_rederive_recomputes_metrics_audit_and_probes_from_the_raw_evidence(campaign):
    red = _poc("rederive", str(campaign["dir"].parent), "--json", timeout=300)
    doc = json.loads(red.stdout)
    assert red.returncode == 0 and doc["mismatches"] == 0, red.stdout[-3000:]
    assert doc["runs_checked"] == len(campaign["recs"])
