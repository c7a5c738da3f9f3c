"""Audit answers from the platforms' own records, on the project's local clusters: each run's record
holds the seven answers with their sources, a run made as the restricted user is attributed to that
user (not an admin), and the answer to "who cancelled or deleted it" names who did.

Slurm: the harness connects as the ordinary account `poc`; the run outlives run_s, so the harness
cancels it (scancel as poc) while it runs. Kubernetes: the native cluster's restricted user
`poc-user` submits, the run outlives run_s, the harness deletes the JobSet as that user; the audit
log is the native cluster's file (kubernetes.audit_log). About a minute per platform; run with the
cluster locks held (`flock /tmp/poc-slurm.lock flock /tmp/poc-k8s.lock pytest tests/integration/test_audit_records.py`).
"""
from __future__ import annotations

import os

import pytest
from _native import native_cluster, restricted_tenant

from harness import config
from harness.audit import QUESTIONS, retention_of
from harness.clusters import slurm_docker
from harness.clusters.k8s.gpu_shape import GPU_TOLERATION
from harness.pipeline import campaign
from harness.store import Store

pytestmark = [pytest.mark.integration]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the local clusters need root", allow_module_level=True)


RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")


@pytest.fixture(scope="module")
def slurm_cluster():
    """Brought up when it is not (on a fresh machine this module runs first); left running for the others."""
    return slurm_docker.up(release=RELEASE, timeout=300)


def _cfg(name: str, platform: str, kube: dict | None = None) -> config.Config:
    """A run that outlives run_s (400 steps, 15 s), so the harness cancels it while it runs."""
    return config.from_mapping({
        "campaign": name, "platforms": [platform], "faults": [], "repetitions": 1,
        "resources": {"nodes": 2, "procs_per_node": 1, "gpus_per_node": 1, "cpus_per_node": 1, "memory_mb": 1024},
        "workload": {"simulated_gpus": True, "steps": 400, "checkpoint_every": 0},
        "timeouts": {"queue_s": 240, "run_s": 15},
        **({"kubernetes": kube} if kube else {})})


def _one_run(cfg: config.Config, platform: str, results) -> dict:
    from harness.backends.factory import make_backend
    recs = campaign(cfg, [platform], Store(results, cfg.campaign), lambda p: make_backend(p, cfg), resume=False)
    assert len(recs) == 1, recs
    rec = recs[0]
    assert "audit_error" not in rec, rec["audit_error"]
    assert set(rec["audit"]["answers"]) == set(QUESTIONS)
    for q, a in rec["audit"]["answers"].items():
        assert a["source"], (q, a)          # every answer, given or not, says where it looked
        assert a["answered"] or a["note"], (q, a)
    return rec


@pytest.mark.slurm
def test_slurm_run_is_attributed_to_the_ordinary_user_who_also_cancelled_it(slurm_cluster, tmp_path):
    rec = _one_run(_cfg("audit-slurm", "slurm"), "slurm", tmp_path)
    a = rec["audit"]["answers"]
    assert all(a[q]["answered"] for q in QUESTIONS), a
    assert a["who_submitted"]["value"].startswith("poc (uid 1000"), a["who_submitted"]
    assert a["who_submitted"]["source"].startswith("sacct (slurmdbd)")
    assert a["who_cancelled"]["value"] == "poc (uid 1000)", a["who_cancelled"]
    assert "slurmctld log" in a["who_cancelled"]["source"]      # the kill request's uid, from the controller
    assert "kill request by uid 1000 (poc)" in a["who_cancelled"]["note"]
    assert a["outcome"]["value"].startswith("CANCELLED by 1000"), a["outcome"]
    assert "sha256" in a["what"]["value"], a["what"]            # the script itself, kept by slurmdbd
    assert "GPU-hours" in a["usage"]["value"] and "gres/gpu=2" in a["usage"]["value"], a["usage"]
    assert {"sacct (slurmdbd)", "slurmctld log"} <= set(retention_of(rec["audit"]))


@pytest.fixture(scope="module")
def tenant() -> dict:
    return restricted_tenant(native_cluster())


@pytest.mark.k8s
def test_k8s_run_of_the_restricted_user_is_attributed_to_it_in_the_audit_log(tenant, tmp_path):
    from harness.clusters.images import worker_ref
    from harness.clusters.k8s import audit
    kube = {"kubeconfig": tenant["kubeconfig"], "namespace": tenant["namespace"],
            "local_queue": tenant["local_queue"], "image": worker_ref(), "image_pull_policy": "Never",
            "audit_log": str(audit.log_path(tenant["state_dir"])),
            "pod": {"tolerations": [GPU_TOLERATION], "priority_class": tenant["priority_class"]}}
    rec = _one_run(_cfg("audit-k8s", "k8s", kube), "k8s", tmp_path)
    a = rec["audit"]["answers"]
    assert all(a[q]["answered"] for q in QUESTIONS), a
    user = tenant["user"]
    assert a["who_submitted"]["value"].startswith(f"{user} (groups "), a["who_submitted"]
    assert "system:masters" not in a["who_submitted"]["value"]
    assert a["who_submitted"]["source"] == "API server audit log: create jobsets, user"
    assert a["who_cancelled"]["value"].startswith(f"{user} (groups "), a["who_cancelled"]
    assert a["who_cancelled"]["note"].startswith("deleted the JobSet at ")
    assert a["what"]["source"].startswith("API server audit log: requestObject")   # the spec as submitted
    assert a["outcome"]["value"].startswith("deleted before it finished"), a["outcome"]
    assert "poc-n" in a["where"]["value"]
    assert {"API server audit log", "Pod objects"} <= set(retention_of(rec["audit"]))
