"""The raw Kubernetes evidence a run's time-stamps are derived from (``Collected.raw``).

Kept as the API server wrote it (camelCase JSON, ``K8sClient.to_dict``), so ``harness.evidence.k8s``
can derive every stamp again from the stored file alone:

* ``jobset``, ``workload``: the final objects;
* ``pods``: every pod of every attempt, the last copy seen of each (by uid). A JobSet restart deletes
  the earlier attempt's pods; the pod watch keeps what their DELETED event carried, and
  ``pod_deleted_seen`` {uid: harness clock when that event arrived} bounds when each went away, and
  ``pod_deletion_first_seen`` {uid: the first deletionTimestamp and grace seen, and when} keeps the
  deletion request (the last copy's deletionTimestamp is the final delete's);
* ``events``: the Events about the JobSet, its Jobs, the Workload and the pods (the scheduler's
  Scheduled events carry ``eventTime`` in microseconds; the kubelet's and controllers' whole seconds);
* ``nodes``: node conditions and taints around a lost node (at the fault, at remediation, at collect);
* ``submit``: the harness clock around the create call and the API server's creationTimestamp;
* ``image``: the container image reference and the digest the kubelet ran.

What is dropped: managedFields and last-applied annotations (bulk), and the value of any environment
variable whose name says secret or token. No Secret object is ever read.
"""
from __future__ import annotations

import re
import time

from ...errors import BackendError
from ...render import jobset as rj
from ..base import Handle
from .api import JOBSETS, K8sClient
from .state import get, items

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE", re.IGNORECASE)
REDACTED = "<redacted>"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
# which rules harness/evidence/k8s.py reads these records with (its READER_RULES): raised with each
# change there, so a run kept earlier re-derives by the rules it was derived with
EVIDENCE_VERSION = 3


def slim(o):
    """A copy without managedFields, last-applied annotations, secret-looking env values, Secret data."""
    if isinstance(o, list):
        return [slim(v) for v in o]
    if not isinstance(o, dict):
        return o
    out = {}
    for k, v in o.items():
        if k == "managedFields":
            continue
        keep = {a: x for a, x in v.items() if a != LAST_APPLIED} if k == "annotations" and isinstance(v, dict) else v
        out[k] = slim(keep)
    if o.get("kind") == "Secret":
        out.pop("data", None)
        out.pop("stringData", None)
    if isinstance(o.get("name"), str) and "value" in o and SECRET_NAME.search(o["name"]):
        out["value"] = REDACTED      # an env entry {name, value}
    return out


def node_snapshot(node: dict | None, name: str, why: str, at: float) -> dict:
    """A node's conditions, taints and cordon at one moment (no capacity, images or addresses)."""
    node = node or {}
    return {"name": name, "why": why, "at": at, "found": bool(node),
            "conditions": items(node, "status", "conditions"), "taints": items(node, "spec", "taints"),
            "unschedulable": bool(get(node, "spec", "unschedulable", default=False))}


def note_node(client: K8sClient, h: Handle, name: str, why: str, node: dict | None = None,
              clock=time.time) -> None:
    """Keep a snapshot of a node in handle.data["node_evidence"] (read now unless given)."""
    snap = node_snapshot(node, name, why, clock()) if node is not None else _snapshot_now(client, name, why, clock)
    h.data.setdefault("node_evidence", []).append(snap)


class RawKeeper:
    """What observe() saw of one run: the last JobSet and Workload, and the last copy of each pod."""

    def __init__(self, clock=time.time) -> None:
        self.jobset: dict | None = None
        self.workload: dict | None = None
        self.pods: dict[str, dict] = {}
        # uid -> the first deletion seen: a pod's last copy has deletionTimestamp rewritten by the final
        # (grace 0) delete, so the request time (deletionTimestamp - grace) survives only in an earlier one
        self.deletion_first_seen: dict[str, dict] = {}
        self.clock = clock

    def note(self, j: dict | None, w: dict | None, pods: list[dict]) -> None:
        if j is not None:
            self.jobset = j
        if w is not None:
            self.workload = w
        for p in pods:
            uid = get(p, "metadata", "uid") or get(p, "metadata", "name")
            self.pods[uid] = p
            if uid not in self.deletion_first_seen and get(p, "metadata", "deletionTimestamp"):
                self.deletion_first_seen[uid] = {
                    "deletionTimestamp": get(p, "metadata", "deletionTimestamp"),
                    "deletionGracePeriodSeconds": get(p, "metadata", "deletionGracePeriodSeconds"),
                    "seen_at": self.clock()}


def _newer(a: dict, b: dict) -> dict:
    """The later of two copies of one object, by resourceVersion (etcd's revision; opaque elsewhere)."""
    try:
        return b if int(get(b, "metadata", "resourceVersion")) >= int(get(a, "metadata", "resourceVersion")) else a
    except (TypeError, ValueError):
        return b


def run_events(events: list[dict], ns: str, name: str, jobset: dict | None, workload: dict | None,
               pods: list[dict]) -> list[dict]:
    """The events whose object is the run's JobSet, one of its Jobs (the pods' owners), its Workload
    or one of its pods."""
    uids = {get(o, "metadata", "uid") for o in (jobset, workload, *pods) if o}
    uids |= {r.get("uid") for p in pods for r in items(p, "metadata", "ownerReferences") if r.get("kind") == "Job"}
    names = {("JobSet", name)} | {("Pod", get(p, "metadata", "name")) for p in pods}
    if workload:
        names.add(("Workload", get(workload, "metadata", "name")))
    out = []
    for e in events:
        io = e.get("involvedObject") or e.get("regarding") or {}
        if io.get("namespace") not in (None, ns):
            continue
        # by uid where the event names one: an earlier run of the same name left events too
        if (io.get("uid") in uids) if io.get("uid") else (io.get("kind"), io.get("name")) in names:
            out.append(e)
    return out


def image_of(pods: list[dict]) -> dict:
    """The worker container's image reference and the digest the kubelet reports it ran."""
    ref, image_id = None, None
    for p in pods:
        for c in items(p, "spec", "containers"):
            if c.get("name") == rj.CONTAINER:
                ref = ref or c.get("image")
        for cs in items(p, "status", "containerStatuses"):
            if cs.get("name") == rj.CONTAINER and cs.get("imageID"):
                image_id = image_id or cs["imageID"]
    return {"ref": ref, "id": image_id, "source": "pod status (spec.containers[].image, containerStatuses[].imageID)"}


def gather(client: K8sClient, h: Handle, keeper: RawKeeper, gone: list[tuple[float, dict]],
           clock=time.time) -> dict:
    """The run's raw evidence at collect(). Each API read that fails is noted in ``errors``, not raised:
    collect() must return what it has."""
    ns, name = h.data["namespace"], h.data["name"]
    errors = []
    jobset = keeper.jobset
    try:
        got = client.get("GET JobSet", JOBSETS, name, ns, missing_ok=True)
        if got is not None and get(got, "metadata", "uid") == h.data.get("uid"):
            jobset = got
    except BackendError as exc:
        errors.append(exc.message)
    pods = dict(keeper.pods)
    deleted_seen = {}
    for seen_at, p in gone:
        if get(p, "metadata", "labels", rj.JOBSET_NAME_LABEL) != name:
            continue
        uid = get(p, "metadata", "uid") or get(p, "metadata", "name")
        if uid in pods or owned_by(p, jobset):
            pods[uid] = _newer(pods[uid], p) if uid in pods else p
            deleted_seen[uid] = seen_at
    pod_list = sorted(pods.values(), key=lambda p: (str(get(p, "metadata", "creationTimestamp", default="")),
                                                    str(get(p, "metadata", "name", default=""))))
    try:
        evs = [client.to_dict(e) for e in client.call("LIST events", client.core().list_namespaced_event, ns).items]
    except BackendError as exc:
        evs, errors = [], [*errors, exc.message]
    events = run_events(evs, ns, name, jobset, keeper.workload, pod_list)
    events.sort(key=lambda e: str(e.get("eventTime") or e.get("firstTimestamp") or ""))
    nodes = list(h.data.get("node_evidence") or [])
    for node in sorted({*(h.data.get("lost_nodes") or []), *(h.data.get("remediated") or {}),
                        *(h.data.get("cordoned") or [])}):
        nodes.append(_snapshot_now(client, node, "collect", clock))
    ct = get(jobset, "metadata", "creationTimestamp")
    raw = {"namespace": ns, "name": name, "expected_pods": h.data.get("nodes"),
           "jobset": jobset, "workload": keeper.workload, "pods": pod_list, "pod_deleted_seen": deleted_seen,
           "pod_deletion_first_seen": dict(keeper.deletion_first_seen),
           "events": events, "nodes": nodes,
           "submit": {"before": h.submitted_at, "after": h.data.get("submit_returned"),
                      "scheduler_record": ct, "scheduler_record_source": "JobSet metadata.creationTimestamp"},
           "image": image_of(pod_list), "collected_at": clock(), "evidence_version": EVIDENCE_VERSION}
    if errors:
        raw["errors"] = errors
    return slim(raw)


def owned_by(pod: dict, jobset: dict | None) -> bool:
    """A pod this run created: its JobSet label names the run and, when known, the JobSet uid matches
    (a leftover run of the same name has another uid)."""
    want = get(jobset, "metadata", "uid")
    have = get(pod, "metadata", "labels", JOBSET_UID_LABEL)
    return want is None or have is None or want == have


def _snapshot_now(client: K8sClient, name: str, why: str, clock) -> dict:
    try:
        n = client.call("GET node", client.core().read_node, name, missing_ok=True)
    except BackendError:
        n = None
    return node_snapshot(client.to_dict(n) if n is not None else None, name, why, clock())
