"""Fake GPUs on the native cluster's nodes, tainted the way GPU node pools are.

Every node advertises ``nvidia.com/gpu: 4`` (an extended resource: a JSON patch of the node's status,
what a device plugin would report) and carries the taint ``nvidia.com/gpu=present:NoSchedule``
(as GKE, AKS and the GPU operator's pools do) and the GPU feature discovery labels a node selector
names (``nvidia.com/gpu.present=true``, ``.count``, ``.product``), so a pod runs only when it
tolerates the taint, and a GPU request is scheduled, counted by Kueue and refused when too large,
as on a GPU cluster. No
device exists: pods see no /dev/nvidia*, and the workload is told its GPUs are simulated.

The kubelet keeps an extended resource it did not set, but a node restarted from scratch may
come back without it: ``apply`` is idempotent and runs on every ``up`` and after a node is powered
back on (``harness.clusters.native_power.power_on``).
"""
from __future__ import annotations

import json

from harness.clusters.k8s.layout import Layout
from harness.clusters.k8s.procs import kubectl

GPU_RESOURCE = "nvidia.com/gpu"
GPUS_PER_NODE = 4
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
# what a pod needs to run on these nodes (a toleration for the taint above)
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
# as NVIDIA's GPU feature discovery labels GPU nodes; the product says what these GPUs are
GPU_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(GPUS_PER_NODE),
              "nvidia.com/gpu.product": "simulated"}
_PATH = GPU_RESOURCE.replace("/", "~1")   # JSON pointer escaping of '/'


def _node(L: Layout, node: str) -> dict:
    return json.loads(kubectl(L, "get", "node", node, "-o", "json").stdout)


def advertise(L: Layout, node: str, count: int = GPUS_PER_NODE) -> None:
    """Capacity and allocatable nvidia.com/gpu = count on node (allocatable at once, not at the
    kubelet's next status update)."""
    patch = [{"op": "add", "path": f"/status/{field}/{_PATH}", "value": str(count)}
             for field in ("capacity", "allocatable")]
    kubectl(L, "patch", "node", node, "--subresource=status", "--type=json", "-p", json.dumps(patch))


def taint(L: Layout, node: str, current: dict | None = None) -> bool:
    """Add the GPU taint when missing; True when it was added."""
    obj = current or _node(L, node)
    taints = obj.get("spec", {}).get("taints") or []
    if any(t.get("key") == GPU_TAINT["key"] and t.get("effect") == GPU_TAINT["effect"] for t in taints):
        return False
    # a JSON patch with a test of the old list: a concurrent cordon or fault taint is never overwritten
    ops = ([{"op": "test", "path": "/spec/taints", "value": taints}] if "taints" in obj.get("spec", {}) else [])
    ops.append({"op": "add", "path": "/spec/taints", "value": [*taints, GPU_TAINT]})
    kubectl(L, "patch", "node", node, "--type=json", "-p", json.dumps(ops))
    return True


def apply(L: Layout, nodes: list[str] | tuple[str, ...]) -> dict:
    """Advertise, label and taint every node (idempotent). Returns what each node shows afterwards."""
    out = {}
    for node in nodes:
        obj = _node(L, node)
        alloc = obj.get("status", {}).get("allocatable", {}).get(GPU_RESOURCE)
        cap = obj.get("status", {}).get("capacity", {}).get(GPU_RESOURCE)
        if alloc != str(GPUS_PER_NODE) or cap != str(GPUS_PER_NODE):
            advertise(L, node)
        labels = obj.get("metadata", {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in GPU_LABELS.items()):
            kubectl(L, "label", "node", node, "--overwrite", *(f"{k}={v}" for k, v in GPU_LABELS.items()))
        taint(L, node, obj)
        out[node] = {"gpus": GPUS_PER_NODE, "taint": f"{GPU_TAINT['key']}={GPU_TAINT['value']}:{GPU_TAINT['effect']}"}
    return out
