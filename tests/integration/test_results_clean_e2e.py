"""What a real run on the local clusters stores is clean: a credential given to the job (in the fabric's
environment, under a name that says nothing) is in no stored file, no stored file names this machine's
directories or host name, and `poc rederive` still re-derives every figure and audit answer from what was
stored, the Kubernetes digest of the JobSet's request body included (the body is cleaned before it is hashed).
About a minute per platform; run with the cluster lock held.
"""
from __future__ import annotations

import gzip
import importlib.util
import os

import pytest
from _native import native_cluster, restricted_tenant
from support.paths import ROOT

from harness import config, rederive
from harness.clusters import slurm_docker
from harness.clusters.k8s.gpu_shape import GPU_TOLERATION
from harness.pipeline import campaign
from harness.store import Store

pytestmark = [pytest.mark.integration]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the local clusters need root", allow_module_level=True)

BODY = "Zq7" * 12          # the credential's random part: found nowhere once stored
TOKEN = "ghp_" + BODY      # a GitHub token, known by its form alone


def _cfg(name: str, platform: str, kube: dict | None = None) -> config.Config:
    return config.from_mapping({
        "campaign": name, "platforms": [platform], "faults": [], "repetitions": 1,
        "resources": {"nodes": 2, "procs_per_node": 1, "gpus_per_node": 1, "cpus_per_node": 1, "memory_mb": 1024},
        "workload": {"simulated_gpus": True, "steps": 20, "checkpoint_every": 10},
        "fabric": {"env": {"DEPLOY_VALUE": TOKEN}},
        "timeouts": {"queue_s": 240, "run_s": 300},
        **({"kubernetes": kube} if kube else {})})


def _scan(cdir) -> dict:
    """scripts/trim_campaign.py's scan: this machine's directories and host names left in the files."""
    spec = importlib.util.spec_from_file_location("trim_campaign", ROOT / "scripts" / "trim_campaign.py")
    trim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trim)
    return trim.scan(cdir)


def _stored_text(cdir) -> str:
    out = []
    for f in sorted(p for p in cdir.rglob("*") if p.is_file() and p.name != ".owner-key"):
        data = f.read_bytes()
        out.append((gzip.decompress(data) if f.suffix == ".gz" else data).decode("utf-8", errors="replace"))
    return "\n".join(out)


def _check(cfg: config.Config, platform: str, results) -> dict:
    from harness.backends.factory import make_backend
    recs = campaign(cfg, [platform], Store(results, cfg.campaign), lambda p: make_backend(p, cfg), resume=False)
    assert [r["status"] for r in recs] == ["ok"], [(r["status"], r.get("error")) for r in recs]
    cdir = results / cfg.campaign
    text = _stored_text(cdir)
    assert BODY not in text
    assert "<redacted>" in (cdir / "campaign.json").read_text()   # the config as stored: the credential replaced
    assert _scan(cdir) == {}                                        # no directory, no host name of this machine
    checks = rederive.check(cdir)
    assert rederive.passed(checks), rederive.table(checks)[-3000:]
    return recs[0]


@pytest.mark.slurm
def test_a_slurm_run_stores_no_secret_and_no_machine_and_rederives(tmp_path):
    slurm_docker.up(release=os.environ.get("POC_SLURM_RELEASE", "trixie"), timeout=300)
    rec = _check(_cfg("clean-slurm", "slurm"), "slurm", tmp_path)
    assert "sha256" in rec["audit"]["answers"]["what"]["value"]


@pytest.mark.k8s
def test_a_k8s_run_stores_no_secret_and_no_machine_and_its_audit_digest_rederives(tmp_path):
    from harness.clusters.images import worker_ref
    from harness.clusters.k8s import audit
    tenant = restricted_tenant(native_cluster())
    kube = {"kubeconfig": tenant["kubeconfig"], "namespace": tenant["namespace"],
            "local_queue": tenant["local_queue"], "image": worker_ref(), "image_pull_policy": "Never",
            "audit_log": str(audit.log_path(tenant["state_dir"])),
            "pod": {"tolerations": [GPU_TOLERATION], "priority_class": tenant["priority_class"]}}
    rec = _check(_cfg("clean-k8s", "k8s", kube), "k8s", tmp_path)
    what = rec["audit"]["answers"]["what"]
    assert what["source"].startswith("API server audit log: requestObject") and "sha256" in what["value"], what
