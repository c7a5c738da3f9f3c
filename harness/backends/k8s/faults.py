"""Faults on Kubernetes, aimed at the pod that ran a given rank: kill_rank, delete_pod, lose_node.

lose_node on the native cluster is a power loss (harness/clusters/native_power.py); elsewhere it is a
cordon plus eviction of this run's pods on the node. Either way, what the fault changes outside the
job is written into the handle and persisted (journal) before it happens, and ``restore`` undoes it.

Shared clusters (``held_node``): the node must be where a Running pod of this very JobSet (its uid)
runs, and not already cordoned by someone else (the harness's uncordon would undo theirs). Other
users' pods on the node are no reason to refuse: a cordon only stops new placements, and only this
JobSet's pods are evicted; the node is marked with CORDONED_BY so that ``restore`` uncordons only a
cordon of this run, and does nothing to a node that is already back.
"""
from __future__ import annotations

import time
from pathlib import Path

from ...errors import BackendError, PocError
from ...render import jobset as rj
from ...render.rbac import CORDON_ANNOTATION, OUT_OF_SERVICE_KEY
from ..base import FaultRecord, Handle, Journal
from .api import K8sClient, parse_time
from .evidence_raw import JOBSET_UID_LABEL, note_node
from .state import RESTART_LABEL, get, items

CORDONED_BY = CORDON_ANNOTATION   # node annotation: which run's lose_node cordoned it
OUT_OF_SERVICE = {"key": OUT_OF_SERVICE_KEY, "value": "nodeshutdown", "effect": "NoExecute"}
RECOVERY_CHAIN = ("node-monitor grace period -> NotReady + unreachable taint -> toleration_seconds -> "
                  "eviction (a failed Job) -> JobSet restart; the lost node's pods stay Terminating "
                  "(no kubelet confirms), so once the node is NotReady the harness adds the out-of-service "
                  "taint (what a node-repair controller does) and the pod GC force-deletes them")


def pod_of(client: K8sClient, h: Handle, ev: dict) -> dict:
    """The pod of the attempt that emitted ev whose host name is ev's host. With hostNetwork a rank's
    host name is its node's, so the pod on that node (one per node: the anti-affinity) is the one."""
    att = (ev.get("attempt") or [0])[0]
    core = client.core()
    pods = client.call("LIST pods", core.list_namespaced_pod, h.data["namespace"],
                       label_selector=f"{rj.JOBSET_NAME_LABEL}={h.data['name']},{RESTART_LABEL}={att}").items
    for p in map(client.to_dict, pods):
        if ev.get("host") in (get(p, "spec", "hostname"), get(p, "metadata", "name")) or \
                (get(p, "spec", "hostNetwork") and ev.get("host") == get(p, "spec", "nodeName")):
            return p
    raise BackendError(f"no pod of {h.data['name']} has host name {ev.get('host')!r} (attempt {att})")


def inject(client: K8sClient, h: Handle, kind: str, ev: dict, journal: Journal, *, power=None) -> FaultRecord:
    """power: the native cluster's power module when this host runs the cluster (else None)."""
    from kubernetes import client as k
    from kubernetes.stream import stream
    pod = pod_of(client, h, ev)
    ns, name, node = h.data["namespace"], pod["metadata"]["name"], get(pod, "spec", "nodeName")
    target = {key: ev.get(key) for key in ("rank", "host", "pid", "attempt", "step")}
    target.update({"pod": name, "node": node})
    core = client.core()
    if kind == "kill_rank":
        pid = int(ev["pid"])
        client.count("EXEC pod")
        t = time.time()
        out = stream(client.own_core().connect_get_namespaced_pod_exec, name, ns, container=rj.CONTAINER,
                     command=["sh", "-c", 'kill -9 "$1"', "sh", str(pid)], stderr=True, stdout=True,
                     stdin=False, tty=False, _request_timeout=30)
        return FaultRecord(kind, t, target, {"signal": "SIGKILL", "via": "pods/exec kill -9", "output": out},
                           acted_at=time.time())
    if kind == "delete_pod":
        t = time.time()
        client.call("DELETE pod", core.delete_namespaced_pod, name, ns)
        return FaultRecord(kind, t, target, {"how": "DELETE pod (default grace period)",
                                             "grace_s": get(pod, "spec", "terminationGracePeriodSeconds")},
                           acted_at=time.time())
    if kind == "lose_node":
        held_node(client, h, pod, node)
        if power is not None and node in power.native_nodes():
            link = power.bridge_of(node)
            h.data.setdefault("lost_nodes", []).append(node)
            h.data.setdefault("downed_links", []).append(link)
            journal(h)
            power.Ledger(ledger_path(h)).add(h.run_id, node, link)
            note_node(client, h, node, "before the fault")
            t = time.time()
            try:
                detail = power.power_off(node, link)
            except PocError as exc:
                raise BackendError(exc.message, tip=exc.tip) from None
            return FaultRecord(kind, t, target, {**detail, "recovery_chain": RECOVERY_CHAIN}, acted_at=time.time())
        if node not in h.data.setdefault("cordoned", []):
            h.data["cordoned"].append(node)
        journal(h)
        note_node(client, h, node, "before the fault")
        t = time.time()
        client.call("PATCH node (cordon)", core.patch_node, node,
                    {"metadata": {"annotations": {CORDONED_BY: cordon_mark(h)}}, "spec": {"unschedulable": True}})
        evicted = []
        for p in map(client.to_dict, client.call(
                "LIST pods on node", core.list_namespaced_pod, ns, field_selector=f"spec.nodeName={node}",
                label_selector=f"{rj.JOBSET_NAME_LABEL}={h.data['name']}").items):
            pname = get(p, "metadata", "name")
            body = k.V1Eviction(metadata=k.V1ObjectMeta(name=pname, namespace=ns))
            client.call("CREATE eviction", core.create_namespaced_pod_eviction, pname, ns, body)
            evicted.append(pname)
        return FaultRecord(kind, t, target, {"how": "cordon + evict this run's pods on the node", "evicted": evicted},
                           acted_at=time.time())
    raise BackendError(f"fault {kind!r} is not available on Kubernetes", tip="use kill_rank, delete_pod or lose_node")


def cordon_mark(h: Handle) -> str:
    """The cordon annotation's value: campaign/run id/JobSet uid, as far as the handle knows them. Run ids
    repeat across campaigns and users; the uid of the object the run made never does, so a cordon is
    undone only by the run that made it."""
    return "/".join(p for p in (h.data.get("campaign"), h.run_id, h.data.get("uid")) if p)


def held_node(client: K8sClient, h: Handle, pod: dict, node: str | None) -> None:
    """Refuse (BackendError) unless node runs a Running pod of this JobSet and nobody else cordoned it."""
    def refuse(why: str, tip: str) -> BackendError:
        return BackendError(f"lose_node refused: {why}", tip=tip)
    name = get(pod, "metadata", "name")
    labels = get(pod, "metadata", "labels", default={}) or {}
    if labels.get(rj.JOBSET_NAME_LABEL) != h.data.get("name") or (
            h.data.get("uid") and labels.get(JOBSET_UID_LABEL, h.data["uid"]) != h.data["uid"]):
        raise refuse(f"pod {name} is not a pod of this run's JobSet {h.data.get('name')}",
                     tip="the fault touches only nodes the run holds")
    if not node or get(pod, "status", "phase") != "Running":
        raise refuse(f"pod {name} is {get(pod, 'status', 'phase') or 'unknown'}"
                     + (f" on node {node}" if node else " and on no node"),
                     tip="the fault is aimed at a node where the run's pod is running; choose another at_step")
    n = client.to_dict(client.call("GET node", client.core().read_node, node))
    mark = (get(n, "metadata", "annotations", default={}) or {}).get(CORDONED_BY)
    if get(n, "spec", "unschedulable") and mark != cordon_mark(h):
        raise refuse(f"node {node} is already cordoned" + (f" (by run {mark})" if mark else " by someone else"),
                     tip="the harness would undo that cordon when it restores the node; wait until it is "
                         "uncordoned, or drop the lose_node fault")


def ledger_path(h: Handle) -> Path:
    return Path(h.data["ledger"])


def remediate(client: K8sClient, h: Handle, pods: list[dict], clock=time.time) -> None:
    """Native cluster, after a power loss: once the node controller has evicted the lost node's pods
    (they stay Terminating: no kubelet confirms), taint the node out-of-service so the pod GC
    force-deletes them and JobSet's foreground Job deletion can finish."""
    core = client.core()
    done = h.data.setdefault("remediated", {})
    for node in h.data.get("lost_nodes") or []:
        if node in done:
            continue
        stuck = [p for p in pods if get(p, "spec", "nodeName") == node and get(p, "metadata", "deletionTimestamp")]
        if not stuck:
            continue
        n = client.to_dict(client.call("GET node", core.read_node, node))
        if _ready(n):
            continue   # the node controller has not noticed yet (node-monitor grace period)
        note_node(client, h, node, "node controller noticed (remediation)", n)
        taints = items(n, "spec", "taints")
        if not any(t.get("key") == OUT_OF_SERVICE["key"] for t in taints):
            client.call("PATCH node taints", core.patch_node, node, {"spec": {"taints": [*taints, OUT_OF_SERVICE]}})
        evicted = [t for p in stuck if (t := parse_time(get(p, "metadata", "deletionTimestamp"))) is not None]
        done[node] = {"out_of_service_at": clock(), "evicted_at": min(evicted, default=None)}


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in items(node, "status", "conditions"))


def restore(client: K8sClient, h: Handle, *, power=None, ready_wait_s: float = 90,
            clock=time.monotonic, sleep=time.sleep) -> None:
    """Undo what the handle records: nodes powered off (native), their out-of-service taints,
    cordons. Idempotent; the handle (and the ledger) forget a fault once it is undone."""
    core = client.core()
    lost = list(h.data.get("lost_nodes") or [])
    if lost or h.data.get("downed_links"):
        if power is None:
            raise BackendError(f"nodes {', '.join(lost)} were powered off on a native cluster this host no longer runs",
                               tip="`poc cluster up --k8s` brings every node back")
        power.power_on(lost, list(h.data.get("downed_links") or []))
    h.data["downed_links"] = []
    for node in lost:
        n = client.call("GET node", core.read_node, node, missing_ok=True)
        if n is not None:
            n = client.to_dict(n)
            taints = [t for t in items(n, "spec", "taints") if t.get("key") != OUT_OF_SERVICE["key"]]
            client.call("PATCH node taints", core.patch_node, node, {"spec": {"taints": taints or None}})
        deadline = clock() + ready_wait_s
        while clock() < deadline:
            n = client.call("GET node", core.read_node, node, missing_ok=True)
            n = client.to_dict(n) if n is not None else None
            if n is not None and _ready(n) and not any(str(t.get("key", "")).startswith("node.kubernetes.io/")
                                                       for t in items(n, "spec", "taints")):
                note_node(client, h, node, "restored", n)
                break
            sleep(1)
    h.data["lost_nodes"] = []
    for node in list(h.data.get("cordoned") or []):
        uncordon(client, h, node)
        h.data["cordoned"].remove(node)
    h.data["cordoned"] = []
    h.data.pop("cordon_marks", None)
    if power is not None and h.data.get("ledger"):
        power.Ledger(ledger_path(h)).drop(h.run_id)


def uncordon(client: K8sClient, h: Handle, node: str) -> str:
    """Undo this run's cordon of node; what was done. Idempotent: a node that is gone, already
    schedulable, or cordoned by someone else (no CORDONED_BY mark of this run) is left as it is."""
    core = client.core()
    n = client.call("GET node", core.read_node, node, missing_ok=True)
    if n is None:
        return "node gone"
    n = client.to_dict(n)
    mark = (get(n, "metadata", "annotations", default={}) or {}).get(CORDONED_BY)
    # a node another part of the run cordoned (a serving replica's node loss) carries that part's mark
    ours = (h.data.get("cordon_marks") or {}).get(node) or cordon_mark(h)
    if mark is not None and mark != ours:
        return f"cordoned by run {mark}: left"
    if mark is None:
        # the journal is written before the cordon: a crash in between leaves no cordon of ours
        return "not cordoned by this run: left" if get(n, "spec", "unschedulable") else "already schedulable"
    client.call("PATCH node (uncordon)", core.patch_node, node,
                {"metadata": {"annotations": {CORDONED_BY: None}}, "spec": {"unschedulable": False}})
    return "uncordoned"


def restore_ledger(client: K8sClient, power, ledger) -> list[str]:
    """Power back on every node the ledger lists (a crashed campaign's lose_node faults)."""
    restored = []
    for run_id, entry in power.Ledger(ledger).read().items():
        h = Handle("k8s", run_id, [], 0.0, data={"lost_nodes": entry.get("nodes", []), "ledger": str(ledger),
                                                 "downed_links": entry.get("links", []), "cordoned": []})
        restore(client, h, power=power)
        restored += entry.get("nodes", [])
    return restored
