"""Emulated GPU nodes (KWOK) under the native cluster's real control plane: Kueue admits a gang JobSet
within a GPU quota, kube-scheduler places its pods on distinct fake nodes, KWOK completes them after
their annotated delay, and a JobSet over the quota is never admitted.

Leaves the cluster as it found it: the fake nodes it added and the KWOK controller (when it started
it) go, with its namespace and queues. Needs root (the native cluster); about half a minute.
"""
from __future__ import annotations

import json
import os
import time
import uuid

import pytest
import yaml
from _kwok import kwok_nodes

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness.clusters.k8s import kwok, procs  # noqa: E402
from harness.clusters.k8s.layout import Layout  # noqa: E402
from harness.render.jobset import JOBSET_API, KUEUE_API, QUEUE_LABEL  # noqa: E402

NODES, GPUS, PODS = 16, 8, 4
QUOTA_GPUS = PODS * GPUS
DELAY_S = 10


@pytest.fixture(scope="module")
def emulated():
    """(Layout, CoreV1Api) with NODES fake nodes Ready; afterwards only what this fixture added is removed."""
    with kwok_nodes(NODES, GPUS) as emulated:
        yield emulated


@pytest.fixture
def queue(emulated):
    """A namespace whose LocalQueue feeds a ClusterQueue with QUOTA_GPUS GPUs; all of it deleted afterwards."""
    L, _ = emulated
    ns = f"poc-kwok-{uuid.uuid4().hex[:6]}"
    objs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": ns}, "spec": {}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": ns}, "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", kwok.GPU_RESOURCE], "flavors": [
                {"name": ns, "resources": [{"name": "cpu", "nominalQuota": "1000"},
                                           {"name": "memory", "nominalQuota": "100Ti"},
                                           {"name": kwok.GPU_RESOURCE, "nominalQuota": str(QUOTA_GPUS)}]}]}]}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": "gpus", "namespace": ns},
         "spec": {"clusterQueue": ns}},
    ]
    procs.kubectl(L, "apply", "-f", "-", input=yaml.safe_dump_all(objs))
    try:
        yield ns
    finally:
        procs.kubectl(L, "delete", "--wait=false", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(objs),
                      check=False, timeout=60)
        procs.kubectl(L, "wait", "--for=delete", f"namespace/{ns}", "--timeout=60s", check=False, timeout=90)


def jobset(name: str, ns: str, pods: int) -> dict:
    """A gang of `pods` pods × GPUS GPUs on the fake nodes only, each 'running' DELAY_S seconds."""
    pod = {
        "metadata": {"annotations": {kwok.DELAY_ANNOTATION: f"{DELAY_S}s"}},
        "spec": {
            "nodeSelector": {kwok.TYPE_LABEL[0]: kwok.TYPE_LABEL[1]},
            "tolerations": [kwok.TOLERATION],
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": "emulated.invalid/train:1", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", kwok.GPU_RESOURCE: str(GPUS)},
                "limits": {kwok.GPU_RESOURCE: str(GPUS)}}}],
        },
    }
    job = {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": pod}
    return {"apiVersion": JOBSET_API, "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "gpus"}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": job}}]}}


def get(L: Layout, *args: str) -> dict:
    return json.loads(procs.kubectl(L, "get", *args, "-o", "json").stdout)


def condition(obj: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in obj.get("status", {}).get("conditions") or [])


def workload_of(L: Layout, ns: str, name: str) -> dict | None:
    for w in get(L, "workloads.kueue.x-k8s.io", "-n", ns)["items"]:
        if any(o["name"] == name for o in w["metadata"].get("ownerReferences") or []):
            return w
    return None


def test_a_gang_jobset_is_admitted_placed_on_distinct_fake_nodes_and_completes_after_its_delay(emulated, queue):
    L, _ = emulated
    procs.kubectl(L, "apply", "-f", "-", input=json.dumps(jobset("fits", queue, PODS)))
    admitted = procs.wait("Kueue to admit the JobSet",
                          lambda: (w := workload_of(L, queue, "fits")) and condition(w, "Admitted") and w, 30)
    t_admitted = time.monotonic()
    assert admitted["status"]["admission"]["clusterQueue"] == queue

    def running():
        pods = get(L, "pods", "-n", queue, "-l", "jobset.sigs.k8s.io/jobset-name=fits")["items"]
        return len(pods) == PODS and all(p["status"].get("phase") in ("Running", "Succeeded") for p in pods) and pods
    pods = procs.wait(f"{PODS} pods running on fake nodes", running, 30)
    nodes = {p["spec"]["nodeName"] for p in pods}
    assert len(nodes) == PODS and all(n.startswith(kwok.NODE_PREFIX) for n in nodes), nodes

    procs.wait("the JobSet to complete", lambda: condition(get(L, "jobset", "fits", "-n", queue), "Completed"),
               DELAY_S + 30)
    took = time.monotonic() - t_admitted
    assert DELAY_S - 1 <= took <= DELAY_S + 20, f"completed {took:.1f}s after admission, delay {DELAY_S}s"

    # over the quota: never admitted, and no pod is created
    procs.kubectl(L, "apply", "-f", "-", input=json.dumps(jobset("too-big", queue, PODS + 1)))
    procs.wait("Kueue to see the JobSet", lambda: workload_of(L, queue, "too-big"), 30)
    time.sleep(5)
    w = workload_of(L, queue, "too-big")
    assert not condition(w, "Admitted") and not condition(w, "QuotaReserved"), w.get("status")
    assert get(L, "jobset", "too-big", "-n", queue)["spec"].get("suspend") is True
    assert not get(L, "pods", "-n", queue, "-l", "jobset.sigs.k8s.io/jobset-name=too-big")["items"]
