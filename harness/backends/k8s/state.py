"""A run's state and times from its JobSet, Kueue Workload and Pods (pure: API objects in, no calls).

Objects are the API server's JSON (camelCase dicts): what a watch or list returns after
``K8sClient.to_dict``, and what tests/fixtures/k8s/recorded holds. Nothing here talks to a
cluster; what needs another lookup (the scheduler's Scheduled events, node capacity) is asked
for by name and passed in.

Where the numbers come from (the API's timestamps have 1 s resolution, events microseconds):
* ``submitted``: the JobSet's creationTimestamp.
* ``quota_reserved`` / ``admitted``: the Workload's QuotaReserved / Admitted conditions.
* per attempt (JobSet restart): ``created`` (first pod), ``allocated`` (the last pod's Scheduled
  event, else its PodScheduled condition), ``containers_started``; the first attempt's feed the run.
* ``ended``: the JobSet's Completed/Failed condition.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ...render import jobset as rj
from ...states import JobState
from .api import parse_time, qty

# native state -> the shared enum
STATE_TABLE: dict[str, JobState] = {
    "Completed": JobState.SUCCEEDED,        # JobSet condition Completed=True
    "Failed": JobState.FAILED,              # JobSet condition Failed=True (restarts exhausted)
    "Suspended": JobState.PENDING,          # waiting for Kueue to admit (unsuspend) it
    "PodsUnscheduled": JobState.PENDING,    # admitted, not every pod placed yet
    "PodsStarting": JobState.STARTING,      # every pod placed, not every container running
    "Running": JobState.RUNNING,            # every pod of the current attempt running
    "Restarting": JobState.RESTARTING,      # a pod failed or the set is being recreated (attempt > 0)
    "Unrunnable": JobState.FAILED,          # image cannot be pulled, or no node can ever hold a pod
    "NotFound": JobState.CANCELLED,         # the JobSet is gone (deleted from outside)
    "Unknown": JobState.UNKNOWN,
}
IMAGE_ERRORS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                "CreateContainerConfigError", "CreateContainerError"}
RESTART_LABEL = rj.RESTART_ANNOTATION     # JobSet puts the attempt on each pod as a label too
# The scheduler's verdict on a pod no node can take, as kube-scheduler 1.34 words it (recorded:
# tests/fixtures/k8s/impossible): "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. ...,
# preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling." Preemption is
# "not helpful" on a node whose filter failure is UnschedulableAndUnresolvable: a request above the
# node's allocatable, an untolerated taint, a selector that does not match. A node that is merely
# busy says "No preemption victims found" instead, and the pod waits.
_NOT_HELPFUL = re.compile(r"preemption: 0/(\d+) nodes are available: (\d+) Preemption is not helpful for scheduling")


def get(obj, *path, default=None):
    """obj[path[0]][path[1]]...; default where a level is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(key)
    return default if obj is None else obj


def items(obj, *path) -> list[dict]:
    """The mappings in the list at path ([] where there is none): API lists of objects, defensively."""
    v = get(obj, *path, default=[])
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def conds(obj) -> dict[str, dict]:
    return {c.get("type"): c for c in items(obj, "status", "conditions")}


def is_true(c: dict, kind: str) -> bool:
    return c.get(kind, {}).get("status") == "True"


def attempt_of(pod: dict) -> int:
    try:
        return int(get(pod, "metadata", "labels", RESTART_LABEL, default=0))
    except (TypeError, ValueError):
        return 0


def scheduled(pod: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "True"
               for c in items(pod, "status", "conditions"))


def deleting(pod: dict) -> bool:
    return get(pod, "metadata", "deletionTimestamp") is not None


def phase(pod: dict) -> str:
    return get(pod, "status", "phase", default="")


@dataclass(frozen=True)
class Verdict:
    native: str
    reason: str = ""
    unscheduled: dict | None = None      # a pod not yet placed: the caller may check node capacity

    @property
    def state(self) -> JobState:
        return STATE_TABLE[self.native]


def native_state(nodes: int, j: dict | None, w: dict | None, pods: list[dict]) -> Verdict:
    """The run's native state from one consistent look at its objects."""
    if j is None:
        return Verdict("NotFound", "the JobSet no longer exists")
    c = conds(j)
    if is_true(c, "Completed"):
        return Verdict("Completed")
    if is_true(c, "Failed"):
        return Verdict("Failed", str(c["Failed"].get("message", "")))
    try:
        restarts = int(get(j, "status", "restarts", default=0))
    except (TypeError, ValueError):
        restarts = 0
    for p in pods:  # unrunnable pods: an image that cannot be pulled ...
        for cs in items(p, "status", "containerStatuses"):
            wr = get(cs, "state", "waiting", "reason")
            if wr in IMAGE_ERRORS:
                msg = get(cs, "state", "waiting", "message", default="")
                return Verdict("Unrunnable", f"pod {get(p, 'metadata', 'name')}: {wr}: {msg}".strip())
    if get(j, "spec", "suspend") or is_true(c, "Suspended"):
        reason = ""
        if w is not None:
            qr = conds(w).get("QuotaReserved", {})
            reason = str(qr.get("message", "")) if qr.get("status") != "True" else ""
            if "> maximum capacity" in reason:   # the job alone exceeds the quota: it will never fit
                return Verdict("Unrunnable", f"Kueue: {reason} ({OVER_QUOTA_HINT})")
        return Verdict("Suspended", reason or "waiting for Kueue admission")
    current = [p for p in pods if attempt_of(p) == restarts and not deleting(p)]
    if any(phase(p) == "Failed" for p in pods if not deleting(p)):
        return Verdict("Restarting", "a pod failed; JobSet recreates the set")
    unsched = [p for p in current if not scheduled(p)]
    if len(current) < nodes or unsched:
        msg = next((str(c.get("message")) for p in unsched for c in items(p, "status", "conditions")
                    if c.get("type") == "PodScheduled" and c.get("message")), "")
        # the first attempt only: after a lost node, a recreated set may see every node unresolvable
        # for a moment (the lost one tainted, the others still holding terminating pods)
        if not restarts and no_node_can_ever(msg):
            return Verdict("Unrunnable", f"no node can ever hold pod {get(unsched[0], 'metadata', 'name')}: {msg} "
                                         f"({NO_NODE_HINT})")
        return Verdict("Restarting" if restarts else "PodsUnscheduled", msg, unsched[0] if unsched else None)
    if all(phase(p) == "Running" for p in current):
        return Verdict("Running")
    if all(phase(p) == "Succeeded" for p in current):
        return Verdict("Running", "pods done; JobSet completing")
    if all(phase(p) in ("Running", "Succeeded") for p in current):
        return Verdict("Running", "some ranks done")    # seen recorded: ranks finish a moment apart
    if restarts and any(phase(p) != "Pending" for p in current):
        return Verdict("Restarting")
    return Verdict("PodsStarting")


NO_NODE_HINT = ("ask for what one node has: resources.gpus_per_node, cpus_per_node, memory_mb, "
                "kubernetes.pod.extra_resources; or check kubernetes.pod.tolerations and node_selector")
OVER_QUOTA_HINT = ("the job alone exceeds its queue's quota: fewer nodes or GPUs, or ask the cluster admins "
                   "for a larger ClusterQueue behind kubernetes.local_queue")


def no_node_can_ever(message: str) -> bool:
    """The scheduler says that preemption could help on no node (every node is unresolvable)."""
    m = _NOT_HELPFUL.search(message or "")
    return bool(m) and int(m.group(1)) > 0 and m.group(1) == m.group(2)


def requests_of(pod: dict) -> dict[str, float]:
    req: dict[str, float] = {}
    for c in items(pod, "spec", "containers"):
        reqs = get(c, "resources", "requests", default={})
        for r, v in (reqs.items() if isinstance(reqs, dict) else ()):
            req[r] = req.get(r, 0.0) + qty(v)
    return req


def fits_no_node(pod: dict, allocatable: list[dict]) -> bool:
    """True when the pod's requests exceed every node's allocatable (not a transient shortage)."""
    req = requests_of(pod)
    for alloc in allocatable:
        have = {r: qty(alloc.get(r, "0")) for r in req}
        if all(not math.isnan(have[r]) and have[r] >= v for r, v in req.items()):
            return False
    return True


def with_capacity(v: Verdict, allocatable: list[dict] | None) -> Verdict:
    """A pod no node can ever hold makes the run Unrunnable (allocatable: each node's status.allocatable)."""
    if v.unscheduled is None or allocatable is None or not fits_no_node(v.unscheduled, allocatable):
        return v
    return Verdict("Unrunnable", f"no node can hold pod {get(v.unscheduled, 'metadata', 'name')}: {v.reason}")


def by_attempt(pods: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for p in pods:
        out.setdefault(attempt_of(p), []).append(p)
    return out


def awaiting_allocation(attempts: dict, nodes: int, pods: list[dict]) -> list[str]:
    """Pods of attempts whose every pod is scheduled but whose allocation time is not yet known:
    the caller looks up their Scheduled events (microseconds) for update_times."""
    out = []
    for att, group in by_attempt(pods).items():
        if "allocated" not in attempts.get(att, {}) and sum(scheduled(p) for p in group) >= nodes:
            out += [get(p, "metadata", "name") for p in group]
    return out


def update_times(times: dict, attempts: dict, nodes: int, j: dict | None, w: dict | None, pods: list[dict],
                 scheduled_at: dict[str, float] | None = None) -> None:
    """Fold one look into the run's times and its per-attempt records (first value wins, except
    ``ended``). scheduled_at: pod name -> the scheduler's Scheduled event time."""
    scheduled_at = scheduled_at or {}
    if j is not None:
        if (t := parse_time(get(j, "metadata", "creationTimestamp"))) is not None:
            times.setdefault("submitted", t)
        c = conds(j)
        for kind in ("Completed", "Failed"):
            if is_true(c, kind) and (t := parse_time(c[kind].get("lastTransitionTime"))) is not None:
                times["ended"] = t
    if w is not None:
        c = conds(w)
        for kind, key in (("QuotaReserved", "quota_reserved"), ("Admitted", "admitted")):
            if is_true(c, kind) and key not in times and (t := parse_time(c[kind].get("lastTransitionTime"))):
                times[key] = t
    for att, group in by_attempt(pods).items():
        a = attempts.setdefault(att, {})
        a["pods"] = sorted({get(p, "metadata", "name") for p in group} | set(a.get("pods", [])))
        a["nodes"] = sorted({n for p in group if (n := get(p, "spec", "nodeName"))} | set(a.get("nodes", [])))
        created = [t for p in group if (t := parse_time(get(p, "metadata", "creationTimestamp"))) is not None]
        if created:
            a.setdefault("created", min(created))
        sched = [parse_time(c.get("lastTransitionTime")) for p in group
                 for c in items(p, "status", "conditions")
                 if c.get("type") == "PodScheduled" and c.get("status") == "True"]
        sched = [t for t in sched if t is not None]
        if len(sched) >= nodes and "allocated" not in a:
            precise = [scheduled_at[n] for n in a["pods"] if n in scheduled_at]
            if len(precise) >= nodes:
                a["allocated"], a["allocated_from"] = max(precise), "Scheduled events (eventTime)"
            else:
                a["allocated"], a["allocated_from"] = max(sched), "PodScheduled (1 s)"
        started = [t for p in group for cs in items(p, "status", "containerStatuses")
                   if (t := parse_time(get(cs, "state", "running", "startedAt"))) is not None]
        if len(started) >= nodes and "containers_started" not in a:
            a["containers_started"] = max(started)
    first = attempts.get(min(attempts)) if attempts else None
    for key in ("allocated", "containers_started"):
        if first and key in first:
            times.setdefault(key, first[key])


def scheduled_event_times(events: list[dict], pods: list[str]) -> dict[str, float]:
    """pod name -> the kube-scheduler's Scheduled event time, from Event objects."""
    out = {}
    wanted = set(pods)
    for e in events:
        name = get(e, "involvedObject", "name")
        if name in wanted and get(e, "reason") == "Scheduled":
            t = parse_time(get(e, "eventTime"))
            if t is not None:
                out[name] = t
    return out


def workload_of(workloads: list[dict]) -> dict[str, dict]:
    """JobSet name -> its Kueue Workload (by owner reference)."""
    out = {}
    for o in workloads:
        for ref in items(o, "metadata", "ownerReferences"):
            if ref.get("kind") == "JobSet" and ref.get("name"):
                out[ref["name"]] = o
    return out


def quota_of(cq: dict) -> dict:
    out = {}
    for g in items(cq, "spec", "resourceGroups"):
        for f in g.get("flavors", []):
            for r in f.get("resources", []):
                out[f"{f.get('name')}/{r.get('name')}"] = r.get("nominalQuota")
    return out
