"""Faults on Kubernetes, aimed at the pod that ran a given rank: kill_rank, delete_pod, lose_node.

lose_node on the native cluster is a power loss (harness/clusters/native_power.py); elsewhere it is a
cordon plus eviction of this run's pods on the node. Either way, what the fault changes outside the
job is written into the handle and persisted (journal) before it happens, and ``restore`` undoes it.

The harness's cordon is a NoSchedule taint of its own (CORDON_TAINT) plus the CORDONED_BY annotation
naming the run, never spec.unschedulable: that field is the operator's. An operator who cordons or
drains the node after the fault sets spec.unschedulable (a `kubectl cordon` of a node the harness had
cordoned through spec.unschedulable would change nothing, and could not be told from the harness's
own), so ``restore`` removes only the harness's taint and mark and leaves an operator's cordon in
place, saying so (a warning, and the handle's "nodes_left").

Shared clusters (``held_node``): the node must be where a Running pod of this very JobSet (its uid and
the campaign's poc/owner label) runs, and not already cordoned by someone else. Other users' pods on
the node are no reason to refuse: a cordon only stops new placements, and only this JobSet's pods are
evicted.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from ...errors import BackendError, PocError
from ...render import jobset as rj
from ...render.rbac import CORDON_ANNOTATION, CORDON_TAINT_KEY, OUT_OF_SERVICE_KEY
from ..base import FaultRecord, Handle, Journal
from . import ownership
from .api import CONFLICT, K8sClient, parse_time
from .evidence_raw import JOBSET_UID_LABEL, note_node
from .state import RESTART_LABEL, get, items

log = logging.getLogger(__name__)

CORDONED_BY = CORDON_ANNOTATION   # node annotation: which run's lose_node cordoned it
CORDON_TAINT = {"key": CORDON_TAINT_KEY, "value": "lost", "effect": "NoSchedule"}   # the harness's cordon
OUT_OF_SERVICE = {"key": OUT_OF_SERVICE_KEY, "value": "nodeshutdown", "effect": "NoExecute"}
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"   # what the node controller adds for a cordon
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
                       label_selector=run_selector(h, **{RESTART_LABEL: str(att)})).items
    for p in map(client.to_dict, pods):
        if not of_this_jobset(p, h):
            continue
        if ev.get("host") in (get(p, "spec", "hostname"), get(p, "metadata", "name")) or \
                (get(p, "spec", "hostNetwork") and ev.get("host") == get(p, "spec", "nodeName")):
            return p
    raise BackendError(f"no pod of {h.data['name']} has host name {ev.get('host')!r} (attempt {att})")


def run_selector(h: Handle, **more: str) -> str:
    """The run's own pods: its JobSet's name and the campaign's poc/owner label (ownership.selector)."""
    return ownership.selector(h.data.get("owner") or "", h.data.get("campaign") or "",
                              **{rj.JOBSET_NAME_LABEL: h.data["name"]}, **more)


def of_this_jobset(pod: dict, h: Handle) -> bool:
    """A pod of the very JobSet the run made (its uid, where the pod and the handle both name one)."""
    uid = (get(pod, "metadata", "labels", default={}) or {}).get(JOBSET_UID_LABEL)
    return not (uid and h.data.get("uid") and uid != h.data["uid"])


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
        client.call("DELETE pod", core.delete_namespaced_pod, name, ns,
                    body=ownership.delete_options(get(pod, "metadata", "uid")))
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
        cordon(client, node, cordon_mark(h))
        evicted = []
        for p in map(client.to_dict, client.call(
                "LIST pods on node", core.list_namespaced_pod, ns, field_selector=f"spec.nodeName={node}",
                label_selector=run_selector(h)).items):
            if not of_this_jobset(p, h):
                continue
            pname = get(p, "metadata", "name")
            body = k.V1Eviction(metadata=k.V1ObjectMeta(name=pname, namespace=ns),
                                delete_options=ownership.delete_options(get(p, "metadata", "uid")))
            client.call("CREATE eviction", core.create_namespaced_pod_eviction, pname, ns, body)
            evicted.append(pname)
        return FaultRecord(kind, t, target, {"how": f"cordon (taint {CORDON_TAINT_KEY}:NoSchedule) + evict this "
                                                    "run's pods on the node", "evicted": evicted},
                           acted_at=time.time())
    raise BackendError(f"fault {kind!r} is not available on Kubernetes", tip="use kill_rank, delete_pod or lose_node")


def cordon_mark(h: Handle) -> str:
    """The cordon annotation's value: the campaign's owner id (its name in a record without one)/run id/the
    uid of the object the run made, as far as the handle knows them. Names and run ids repeat across
    campaigns and users; the owner id and the uid never do, so a cordon is undone only by the run that
    made it."""
    return "/".join(p for p in (h.data.get("owner") or h.data.get("campaign"), h.run_id, h.data.get("uid")) if p)


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
    taken = taken_by_other(n, cordon_mark(h))
    if taken:
        raise refuse(f"node {node} is already {taken}",
                     tip="the fault takes only a node nobody else has cordoned; wait until it is back, or drop "
                         "the lose_node fault")


def _mark(n: dict) -> str | None:
    return (get(n, "metadata", "annotations", default={}) or {}).get(CORDONED_BY)


def _has_cordon_taint(n: dict) -> bool:
    return any(t.get("key") == CORDON_TAINT_KEY for t in items(n, "spec", "taints"))


def taken_by_other(n: dict, mark: str) -> str | None:
    """Why the node is someone else's to leave alone (cordoned by an operator, or lost by another run);
    None when it is schedulable or cordoned by the run of this mark."""
    other = _mark(n)
    if get(n, "spec", "unschedulable"):
        return "cordoned (spec.unschedulable)" + (f"; run {other} also marked it" if other and other != mark else "")
    if _has_cordon_taint(n) and other != mark:
        return f"cordoned by run {other}" if other else f"tainted {CORDON_TAINT_KEY} by someone else"
    return None


def _patch_node(client: K8sClient, what: str, node: str, change) -> dict | None:
    """PATCH node with change(node) -> patch body (or None: nothing to do), guarded by the node's
    resourceVersion (a concurrent change of its taints is never overwritten: read again, up to 5 times).
    The node as read before the patch; None when the node is gone."""
    core = client.core()
    for _ in range(5):
        n = client.call("GET node", core.read_node, node, missing_ok=True)
        if n is None:
            return None
        n = client.to_dict(n)
        body = change(n)
        if body is None:
            return n
        body.setdefault("metadata", {})["resourceVersion"] = get(n, "metadata", "resourceVersion")
        if client.call(what, core.patch_node, node, body, conflict_ok=True) is not CONFLICT:
            return n
    raise BackendError(f"{what} {node}: the node kept changing (5 conflicts in a row)", tip="try again")


def cordon(client: K8sClient, node: str, mark: str) -> None:
    """The harness's cordon: its own NoSchedule taint and the CORDONED_BY mark (spec.unschedulable untouched)."""
    _patch_node(client, "PATCH node (cordon)", node, lambda n: {
        "metadata": {"annotations": {CORDONED_BY: mark}},
        "spec": {"taints": [*(t for t in items(n, "spec", "taints") if t.get("key") != CORDON_TAINT_KEY),
                            CORDON_TAINT]}})


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
        _patch_node(client, "PATCH node taints", node, lambda n: None if any(
            t.get("key") == OUT_OF_SERVICE["key"] for t in items(n, "spec", "taints")) else
            {"spec": {"taints": [*items(n, "spec", "taints"), OUT_OF_SERVICE]}})
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
        _patch_node(client, "PATCH node taints", node, lambda n: None if not any(
            t.get("key") == OUT_OF_SERVICE["key"] for t in items(n, "spec", "taints")) else
            {"spec": {"taints": [t for t in items(n, "spec", "taints") if t.get("key") != OUT_OF_SERVICE["key"]]
                      or None}})
        deadline = clock() + ready_wait_s
        while clock() < deadline:
            n = client.call("GET node", core.read_node, node, missing_ok=True)
            n = client.to_dict(n) if n is not None else None
            # an operator's cordon (spec.unschedulable, and the node controller's taint for it) is theirs:
            # the node is back without it going
            if n is not None and _ready(n) and not any(
                    str(t.get("key", "")).startswith("node.kubernetes.io/") and not (
                        t.get("key") == UNSCHEDULABLE_TAINT and get(n, "spec", "unschedulable"))
                    for t in items(n, "spec", "taints")):
                note_node(client, h, node, "restored", n)
                if get(n, "spec", "unschedulable"):
                    _left(h, node, "cordoned (spec.unschedulable) by someone else since the fault: left cordoned")
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


def _left(h: Handle, node: str, why: str) -> None:
    """A node the run's restore leaves as it is for someone else's sake: said, and kept on the handle."""
    h.data.setdefault("nodes_left", {})[node] = why
    log.warning("node %s left as it is (%s): the harness undoes only its own cordon", node, why)


def uncordon(client: K8sClient, h: Handle, node: str) -> str:
    """Undo this run's cordon of node (its taint and mark); what was done. Idempotent: a node that is gone,
    already schedulable, or cordoned by someone else (no CORDONED_BY mark of this run) is left as it is.
    spec.unschedulable is never changed: set, it is an operator's cordon or drain (also after the fault;
    an older harness's cordon, too, is left for a person to lift), and the node stays cordoned."""
    ours = (h.data.get("cordon_marks") or {}).get(node) or cordon_mark(h)
    # a node another part of the run cordoned (a serving replica's node loss) carries that part's mark
    done: list[str] = []

    def change(n: dict) -> dict | None:
        done.clear()
        mark = _mark(n)
        if mark is not None and mark != ours:
            done.append(f"cordoned by run {mark}: left")
            return None
        if mark is None:
            # the journal is written before the cordon: a crash in between leaves no cordon of ours
            done.append("not cordoned by this run: left" if get(n, "spec", "unschedulable") or _has_cordon_taint(n)
                        else "already schedulable")
            return None
        done.append("uncordoned")
        return {"metadata": {"annotations": {CORDONED_BY: None}},
                "spec": {"taints": [t for t in items(n, "spec", "taints") if t.get("key") != CORDON_TAINT_KEY]
                         or None}}

    n = _patch_node(client, "PATCH node (uncordon)", node, change)
    if n is None:
        return "node gone"
    if get(n, "spec", "unschedulable") and done[0] in ("uncordoned", "not cordoned by this run: left"):
        why = "cordoned (spec.unschedulable) by an operator, or by an older harness's run: left cordoned"
        _left(h, node, why)
        return ("taint and mark removed; " if done[0] == "uncordoned" else "") + why
    return done[0]


def restore_ledger(client: K8sClient, power, ledger) -> list[str]:
    """Power back on every node the ledger lists (a crashed campaign's lose_node faults)."""
    restored = []
    for run_id, entry in power.Ledger(ledger).read().items():
        h = Handle("k8s", run_id, [], 0.0, data={"lost_nodes": entry.get("nodes", []), "ledger": str(ledger),
                                                 "downed_links": entry.get("links", []), "cordoned": []})
        restore(client, h, power=power)
        restored += entry.get("nodes", [])
    return restored
