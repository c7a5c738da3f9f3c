"""What "usable" means for the native cluster, checked through the API server: nodes Ready,
JobSet's and Kueue's webhooks answering, and a pod that actually runs.
"""
from __future__ import annotations

import json

from harness.clusters.k8s.gpu_shape import GPU_TOLERATION
from harness.clusters.k8s.layout import PAUSE_IMAGE, Layout
from harness.clusters.k8s.procs import kubectl, wait

BAD_JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
    "metadata": {"name": "poc-webhook-probe", "namespace": "default"},
    "spec": {"successPolicy": {"operator": "All", "targetReplicatedJobs": ["does-not-exist"]},
             "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
                 "restartPolicy": "Never", "containers": [{"name": "c", "image": PAUSE_IMAGE}]}}}}}]},
}

QUEUED_JOB = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "poc-webhook-probe", "namespace": "default",
                 "labels": {"kueue.x-k8s.io/queue-name": "poc-probe"}},
    "spec": {"template": {"spec": {"restartPolicy": "Never",
                                   "containers": [{"name": "c", "image": PAUSE_IMAGE}]}}},
}


def nodes_ready(L: Layout, n: int) -> bool:
    out = kubectl(L, "get", "nodes", "-o", "json", check=False)
    if out.returncode != 0:
        return False
    ready = 0
    for item in json.loads(out.stdout)["items"]:
        for cond in item["status"].get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                ready += 1
    return ready >= n


def jobset_webhook_answers(L: Layout) -> bool:
    """JobSet's validating webhook rejects a JobSet whose success policy names no replicated job."""
    out = kubectl(L, "create", "--dry-run=server", "-f", "-", input=json.dumps(BAD_JOBSET), check=False)
    return out.returncode != 0 and "does-not-exist" in out.stderr and "admission webhook" in out.stderr


def kueue_webhook_answers(L: Layout) -> bool:
    """Kueue's mutating webhook suspends a Job that names a queue."""
    out = kubectl(L, "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(QUEUED_JOB), check=False)
    return out.returncode == 0 and json.loads(out.stdout)["spec"].get("suspend") is True


def smoke_pod_runs(L: Layout) -> bool:
    """A pause pod is scheduled, gets its sandbox and network, and runs."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "poc-smoke", "namespace": "default"},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "tolerations": [GPU_TOLERATION],   # nodes that kept their GPU taint
                    "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]}}
    kubectl(L, "delete", "pod", "poc-smoke", "--ignore-not-found", "--grace-period=0", "--force", check=False)
    wait("the default service account",
         lambda: kubectl(L, "get", "serviceaccount", "default", check=False).returncode == 0, 60, L)
    kubectl(L, "create", "-f", "-", input=json.dumps(pod))
    try:
        wait("the smoke-test pod to run",
             lambda: kubectl(L, "get", "pod", "poc-smoke", "-o", "jsonpath={.status.phase}").stdout == "Running",
             120, L)
    finally:
        kubectl(L, "delete", "pod", "poc-smoke", "--ignore-not-found", "--wait=false", check=False)
    return True
