"""Emulated GPU nodes on the native cluster: KWOK's controller fakes nodes and pod lifecycles, while
the real kube-apiserver, kube-scheduler, Kueue and JobSet schedule onto them.

One ``kwok`` process (built like JobSet and Kueue, ``builds.KWOK``) runs on the host against the
admin kubeconfig and manages only the nodes labelled ``type=kwok``. Its stages come from KWOK's own
files in the module cache (``kustomize/stage``), passed in its config file rather than as Stage
objects, so nothing is left in the API server when it stops. A pod on a fake node goes Running at
once and, when a Job owns it, Succeeded after the delay in its annotation ``DELAY_ANNOTATION``
(a Go duration, ``"90s"``); without it, after one second.

Every fake node is tainted ``TAINT`` (real pods never land there) and labelled with its place in a
block/rack topology (``TOPOLOGY_LABELS``). Nodes are created and deleted through the API (the
kubernetes Python client, passed in), not one kubectl per node.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.clusters.k8s import builds, host, procs
from harness.clusters.k8s.layout import Layout, load_state, save_state
from harness.errors import ClusterError, ConfigError
from harness.render.jobset import GPU_RESOURCE
from harness.render.replay_k8s import BLOCK_LABEL, DELAY_ANNOTATION, RACK_LABEL

COMPONENT = "kwok"
NODE_PREFIX = "kwok-"
TYPE_LABEL = ("type", "kwok")
SELECTOR = f"{TYPE_LABEL[0]}={TYPE_LABEL[1]}"
TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
TOLERATION = {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
TOPOLOGY_LABELS = (BLOCK_LABEL, RACK_LABEL)
# Fake pod IPs: KWOK's default (10.0.0.0/24) runs out after 254 pods; this range is outside the
# cluster's pod (10.244/16) and service (10.96/16) ranges.
POD_CIDR = "10.250.0.0/16"
# KWOK renews each node's lease every quarter of this. It must stay well under the cluster's
# node-monitor grace period (20 s) or the node lifecycle controller marks fake nodes NotReady;
# 40 s (KWOK's default) renews every 10 s: about 100 lease writes a second at 1,000 nodes.
LEASE_SECONDS = 40
# The stage files KWOK's own deployment uses: nodes go Ready and keep a lease; pods walk
# create → (init) → ready → complete → delete.
NODE_STAGE_FILES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
POD_STAGE_FILES = tuple(f"pod/general/pod-{s}.yaml"
                        for s in ("create", "init-container-running", "init-container-completed", "ready",
                                  "complete", "delete"))


@dataclass(frozen=True)
class Shape:
    """N fake nodes, each with `gpus` GPUs, `rack_size` nodes to a rack and `racks_per_block` racks to a block."""

    nodes: int
    gpus: int = 8
    cpu: str = "96"
    memory: str = "1Ti"
    pods: int = 110
    rack_size: int = 8
    racks_per_block: int = 4

    def check(self) -> Shape:
        for name in ("nodes", "rack_size", "racks_per_block", "pods"):
            if getattr(self, name) < 1:
                raise ConfigError(f"emulated nodes: {name.replace('_', ' ')} must be at least 1, "
                                  f"not {getattr(self, name)}", tip="e.g. --emulated 256 --gpus-per-node 8")
        if self.gpus < 0:
            raise ConfigError(f"emulated nodes: GPUs per node must be 0 or more, not {self.gpus}",
                              tip="e.g. --gpus-per-node 8")
        if self.nodes > 9999:
            raise ConfigError(f"emulated nodes: at most 9999 ({self.nodes} asked)",
                              tip="node names have four digits (kwok-0001 … kwok-9999)")
        return self


def node_name(i: int) -> str:
    """The i-th fake node (1-based)."""
    return f"{NODE_PREFIX}{i:04d}"


def topology(i: int, shape: Shape) -> dict[str, str]:
    """Block and rack labels of the i-th node (1-based): racks of `rack_size` in blocks of `racks_per_block`."""
    rack = (i - 1) // shape.rack_size
    block = rack // shape.racks_per_block
    return {BLOCK_LABEL: f"b{block:02d}", RACK_LABEL: f"b{block:02d}-r{rack % shape.racks_per_block:02d}"}


def node_manifest(i: int, shape: Shape) -> dict:
    """The Node object of the i-th fake node: capacity, labels, the fake-node taint, KWOK's annotation."""
    name = node_name(i)
    resources = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods)}
    if shape.gpus:
        resources[GPU_RESOURCE] = str(shape.gpus)
    labels = {TYPE_LABEL[0]: TYPE_LABEL[1], "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "kubernetes.io/role": "agent", "node.kubernetes.io/instance-type": "kwok",
              **topology(i, shape)}
    if shape.gpus:
        labels |= {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(shape.gpus),
                   "nvidia.com/gpu.product": "emulated"}
    return {
        "apiVersion": "v1", "kind": "Node",
        # KWOK's own convention for a fake node; it manages them by the label selector, not this
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": [dict(TAINT)]},
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "nodeInfo": {"kubeletVersion": "fake", "operatingSystem": "linux", "architecture": "amd64"}},
    }


def _tuned(stage: dict) -> dict:
    """KWOK's stage, with the delays a replay wants: Running at once, Succeeded exactly after the annotation.

    KWOK's general pod stages wait 1–5 s (random) before each step, and its pod-complete stage takes
    min(delay, jitter) when the jitter (default 5 s) is not above the delay, so a "90s" annotation
    alone would complete in 5 s. Without a jitter the delay is the annotation's, else 1 s.

    A deleted pod (a preempted gang's) is gone 1 s later: KWOK's own stage waits a random time up to
    the pod's deletion timestamp, the whole grace period (30 s by default), as if the process ignored
    SIGTERM; the emulated job ends at SIGTERM, as the sleep of a Slurm replay's job does.
    """
    s = copy.deepcopy(stage)
    name = s["metadata"]["name"]
    if name == "pod-delete":
        s["spec"]["delay"] = {"durationMilliseconds": 1000}
    elif s["spec"]["resourceRef"]["kind"] == "Pod":
        if name == "pod-complete":
            s["spec"]["delay"] = {"durationMilliseconds": 1000,
                                  "durationFrom": {"expressionFrom": f'.metadata.annotations["{DELAY_ANNOTATION}"]'}}
        else:
            s["spec"].pop("delay", None)
    return s


def stages(stage_dir: Path) -> list[dict]:
    """The node and pod stages from KWOK's ``kustomize/stage`` directory, tuned for replays."""
    out = []
    for rel in NODE_STAGE_FILES + POD_STAGE_FILES:
        path = stage_dir / rel
        if not path.is_file():
            raise ClusterError(f"KWOK stage file {path} is missing",
                               tip=f"is kwok {builds.KWOK_VERSION} whole in the module cache? "
                                   "`go clean -modcache`, then retry")
        out.extend(_tuned(d) for d in yaml.safe_load_all(path.read_text()) if d)
    return out


def config_documents(stage_list: list[dict], lease_seconds: int = LEASE_SECONDS) -> list[dict]:
    """KWOK's config file: the controller's options, then every stage (no Stage CRD needed)."""
    options = {"cidr": POD_CIDR, "nodeLeaseDurationSeconds": lease_seconds, "manageNodesWithLabelSelector": SELECTOR,
               "nodeLeaseParallelism": 8, "podPlayStageParallelism": 8, "nodePlayStageParallelism": 8,
               "enableCRDs": []}
    return [{"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration", "options": options},
            *stage_list]


def command(kubeconfig: Path, config: Path, kwok_bin: Path) -> list[str]:
    # WARN: at INFO it logs every node and pod patch, a line per lease renewal and pod step at scale
    return [str(kwok_bin), "--kubeconfig", str(kubeconfig), "--config", str(config),
            "--manage-nodes-with-label-selector", SELECTOR, "-v", "WARN"]


# ------------------------------------------------------------------ the controller process

def running(L: Layout) -> bool:
    entry = load_state(L).get("components", {}).get(COMPONENT)
    return bool(entry) and procs.alive(entry)


def start(L: Layout, stage_dir: Path, kwok_bin: Path | None = None) -> int:
    """Start the controller (once: a running one with the same configuration is kept, one with another
    is restarted), logging to logs/kwok.log; its pid."""
    cfg = L.config / "kwok.yaml"
    text = yaml.safe_dump_all(config_documents(stages(stage_dir)), sort_keys=False)
    state = load_state(L)
    entry = state.get("components", {}).get(COMPONENT)
    if entry and procs.alive(entry):
        if cfg.is_file() and cfg.read_text() == text:
            return entry["pid"]
        stop(L)
        state = load_state(L)
    if not state.get("ready"):
        raise ClusterError("the native Kubernetes cluster is not up", tip="poc cluster up --k8s --provider native")
    L.config.mkdir(parents=True, exist_ok=True)
    cfg.write_text(text)
    return procs.spawn(L, state, COMPONENT, command(L.admin_kubeconfig, cfg, kwok_bin or builds.KWOK.path("kwok")))


def stop(L: Layout) -> bool:
    """Stop the controller and forget it in the cluster's state; True when one was running."""
    state = load_state(L)
    entry = state.get("components", {}).pop(COMPONENT, None)
    if entry is None:
        return False
    host.stop_pid(entry["pid"], entry.get("exe"), grace=5)
    save_state(L, state)
    return True


# ------------------------------------------------------------------ the fake nodes (through the API)

def create_nodes(core, shape: Shape, workers: int = 8, body: Callable[[int, Shape], dict] = node_manifest,
                 leases=None) -> list[str]:
    """Create the shape's nodes that do not exist yet, `workers` requests at a time; the names created."""
    from kubernetes.client.rest import ApiException

    existing = {n.metadata.name for n in core.list_node(label_selector=SELECTOR).items}
    todo = [i for i in range(1, shape.nodes + 1) if node_name(i) not in existing]
    drop_leases(core, {node_name(i) for i in todo}, workers, leases)

    def one(i: int) -> str:
        try:
            core.create_node(body(i, shape))
        except ApiException as e:
            if e.status != 409:      # already there: a concurrent or earlier run made it
                raise
        return node_name(i)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, todo))


LEASE_NAMESPACE = "kube-node-lease"


def drop_leases(core, names: set[str], workers: int = 8, leases=None) -> int:
    """Delete the node leases of these names (nodes just deleted, or about to be made); how many.
    leases: a CoordinationV1Api (default: one on core's connection).

    A deleted node's lease is left to the garbage collector, which at the controller manager's default
    20 requests a second takes minutes for a thousand; a node made again under the same name meanwhile
    finds a lease owned by its predecessor, KWOK's lease updates fail, and it never turns Ready."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    leases = leases or client.CoordinationV1Api(core.api_client)
    stale = [x.metadata.name for x in leases.list_namespaced_lease(LEASE_NAMESPACE).items if x.metadata.name in names]

    def one(name: str) -> None:
        try:
            leases.delete_namespaced_lease(name, LEASE_NAMESPACE)
        except ApiException as e:
            if e.status != 404:      # gone meanwhile: the garbage collector got there first
                raise
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, stale))
    return len(stale)


def delete_nodes(core, names: Iterable[str] | None = None, leases=None) -> int:
    """Delete the given fake nodes, or all of them (one collection delete), and their leases; how many
    nodes there were."""
    present = [n.metadata.name for n in core.list_node(label_selector=SELECTOR).items]
    if names is None:
        if present:
            core.delete_collection_node(label_selector=SELECTOR)
        drop_leases(core, set(present), leases=leases)
        return len(present)
    gone = [n for n in names if n in present]
    for n in gone:
        core.delete_node(n)
    drop_leases(core, set(gone), leases=leases)
    return len(gone)


def ready_count(core) -> int:
    """Fake nodes whose Ready condition is True."""
    return sum(1 for n in core.list_node(label_selector=SELECTOR).items
               if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or [])))


def wait_ready(core, n: int, timeout: float = 120, L: Layout | None = None) -> float:
    """Wait until n fake nodes are Ready; the seconds it took."""
    t0 = time.monotonic()
    procs.wait(f"{n} emulated nodes Ready", lambda: ready_count(core) >= n, timeout, L, (COMPONENT,), interval=1)
    return time.monotonic() - t0


def core_api(kubeconfig: Path):
    """A CoreV1Api for the admin kubeconfig (the default client of up/down)."""
    from kubernetes import client, config

    conf = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=conf)
    conf.connection_pool_maxsize = 16
    return client.CoreV1Api(client.ApiClient(conf))


# ------------------------------------------------------------------ what `poc cluster up|down` calls

def up(L: Layout, shape: Shape, core=None, stage_dir: Path | None = None) -> dict:
    """The controller running and exactly the shape's nodes Ready (idempotent); what it did and how long it took.

    Nodes already there are kept as they are: to change GPUs or topology of existing nodes, `down` first.
    """
    shape.check()
    builds.ensure_built(builds=(builds.KWOK,))
    stage_dir = stage_dir or builds.module_dir("sigs.k8s.io/kwok", builds.KWOK_VERSION) / "kustomize/stage"
    core = core or core_api(L.admin_kubeconfig)
    pid = start(L, stage_dir)
    t0 = time.monotonic()
    created = create_nodes(core, shape)
    create_s = time.monotonic() - t0
    wanted = {node_name(i) for i in range(1, shape.nodes + 1)}
    extra = sorted(n.metadata.name for n in core.list_node(label_selector=SELECTOR).items
                   if n.metadata.name not in wanted)
    delete_nodes(core, extra)
    ready_s = wait_ready(core, shape.nodes, timeout=max(120, shape.nodes / 5), L=L)
    return {"kwok_pid": pid, "nodes": shape.nodes, "created": len(created), "removed": len(extra),
            "gpus_per_node": shape.gpus, "create_seconds": round(create_s, 2), "ready_seconds": round(ready_s, 2),
            "selector": SELECTOR, "taint": f"{TAINT['key']}={TAINT['value']}:{TAINT['effect']}"}


def down(L: Layout, core=None) -> dict:
    """No fake nodes and no controller (idempotent; a cluster that is not up has neither)."""
    deleted = 0
    if load_state(L).get("ready"):
        core = core or core_api(L.admin_kubeconfig)
        deleted = delete_nodes(core)
    return {"nodes_deleted": deleted, "kwok_stopped": stop(L)}
