"""The pod that removes a finished run's checkpoint sub-path from the PersistentVolumeClaim (pure).

A real cluster's PVC is reachable only from a pod, so the harness runs one short pod per run, after
the run is collected: the run's image, the whole claim mounted at CKPT_MOUNT, and the owned-directory
command (render/owned_dir.py) on <CKPT_MOUNT>/<campaign dir>/<run_id>, its words passed as arguments: the
directory goes only when the owner mark the run's pods wrote in it is the run's (spec.owner_mark, a keyed
digest of that directory's path), else the pod exits MARK_NOT_OURS and touches nothing. The pod carries
the campaign's poc/owner label: the harness deletes a pod of its name only when that label is the
campaign's (backends/k8s/cleanup.py). It is placed and permitted like
the run's pods (tolerations, nodeSelector, priority class, service account, pull secrets, pod
labels), so it lands where the run could and passes the same admission policies. It carries no
Kueue queue label: it is not a workload to admit, and it asks for little.
"""
from __future__ import annotations

import re

from ..config import Kubernetes
from . import jobset as rj
from .owned_dir import owned_dir_argv

CLEANUP_SUFFIX = "-cleanup"
_SEGMENT = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
REQUESTS = {"cpu": "100m", "memory": "64Mi"}


def pod_name(run_id: str) -> str:
    return f"{run_id[:63 - len(CLEANUP_SUFFIX)].rstrip('-')}{CLEANUP_SUFFIX}"


def cleanup_target(campaign: str, run_id: str) -> str:
    """<CKPT_MOUNT>/<campaign>/<run_id>; both must be plain names (no '/', no '..')."""
    for what, v in (("campaign", campaign), ("run id", run_id)):
        if not _SEGMENT.match(v or ""):
            raise ValueError(f"{what} {v!r} is not a plain name: refusing to build a path to remove")
    return f"{rj.CKPT_MOUNT}/{campaign}/{run_id}"


def cleanup_pod(k: Kubernetes, image: str, pvc: str, campaign: str, run_id: str, owner: str = "",
                mark: str | None = None, mode: str = "remove") -> dict:
    """campaign: the campaign's directory name (spec.campaign_dir); owner: its public owner id (the pod's
    poc/owner label); mark: the run directory's owner mark (spec.owner_mark; the owner id when None, as
    marks were written before there was a key)."""
    pod = k.pod
    spec: dict = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "enableServiceLinks": False,
        "tolerations": rj.tolerations(k),
        "containers": [{
            "name": "cleanup",
            "image": image,
            "imagePullPolicy": k.image_pull_policy,
            "command": owned_dir_argv(mode, cleanup_target(campaign, run_id), owner if mark is None else mark),
            "resources": {"requests": dict(REQUESTS), "limits": dict(REQUESTS)},
            "volumeMounts": [{"name": "run", "mountPath": rj.CKPT_MOUNT}],
        }],
        "volumes": [{"name": "run", "persistentVolumeClaim": {"claimName": pvc}}],
    }
    spec.update(rj.placement(pod))
    labels = {**pod.labels, "poc/campaign": campaign, "poc/run-id": run_id, "poc/role": "cleanup"}
    if owner:
        if not rj.OWNER_ID.match(owner):
            raise ValueError(f"owner id {owner[:80]!r} is not an owner id: refusing to label a pod with it")
        labels[rj.OWNER_LABEL] = owner
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(run_id), "namespace": k.namespace, "labels": labels},
            "spec": spec}
