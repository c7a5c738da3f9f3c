"""A Kubernetes replay's raw records -> one JobOutcome per trace job (pure).

The records are what the API server kept, listed once at the end of a replay: the JobSets (their
creation, the submission's time on the server; their Completed or Failed condition, the end), the
pods (each one's PodScheduled condition: the gang is placed when its last pod is), and Kueue's
Workloads (Admitted: the quota decision, before the pods are bound). All are whole seconds: that is
the resolution every figure drawn from them carries.
"""
from __future__ import annotations

from ..backends.k8s.api import parse_time
from ..render import replay_k8s as rr
from ..scale.outcome import JobOutcome
from ..scale.trace import Trace

RESOLUTION_S = 1.0     # metav1.Time is serialised to the second
PREEMPTED = "Preempted"   # Kueue's eviction reason (WorkloadEvictedByPreemption)


def condition_time(obj: dict, kind: str) -> float | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return parse_time(c.get("lastTransitionTime"))
    return None


def trim(obj: dict) -> dict:
    """What a record keeps of an API object: names, labels, owners, times, node, conditions."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    out = {"metadata": {k: meta[k] for k in ("name", "namespace", "labels", "creationTimestamp", "ownerReferences")
                        if k in meta},
           "status": {k: status[k] for k in ("conditions", "phase", "admission", "schedulingStats") if k in status}}
    node = (obj.get("spec") or {}).get("nodeName")
    if node:
        out["spec"] = {"nodeName": node}
    return out


def node_place(node: dict) -> dict:
    """A node's name and place: {"name", "block", "rack"} from its topology labels (None where unlabelled)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return {"name": node["metadata"]["name"], "block": labels.get(rr.BLOCK_LABEL), "rack": labels.get(rr.RACK_LABEL)}


def block_of(raw: dict) -> dict[str, str]:
    return {n["name"]: n["block"] for n in raw.get("nodes") or [] if n.get("block")}


def _label(obj: dict, key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(key)


def _owner(workload: dict) -> str | None:
    return next((o.get("name") for o in (workload.get("metadata") or {}).get("ownerReferences") or []
                 if o.get("kind") == "JobSet"), None)


def preempted(workloads: list[dict]) -> dict[str, int]:
    """JobSet name -> how often Kueue evicted its Workload to make room for another (``Preempted`` in the
    Workload's ``schedulingStats.evictions``, which counts every eviction by reason)."""
    out = {}
    for w in workloads:
        stats = ((w.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
        n = sum(int(e.get("count") or 0) for e in stats if e.get("reason") == PREEMPTED)
        owner = _owner(w)
        if owner and n:
            out[owner] = out.get(owner, 0) + n
    return out


def outcomes(trace: Trace, jobsets: list[dict], pods: list[dict], workloads: list[dict] = ()) -> list[JobOutcome]:
    """One outcome per trace job the server has a JobSet for, in trace order. Start: the last of its pods
    scheduled, once all `nodes` of them are; a JobSet whose gang never fully held nodes has none. A
    preempted JobSet's pods are deleted and made again when it is admitted again, so the pods at the end
    are the last run's: its queue time runs from its creation to the run that finished."""
    evicted = preempted(list(workloads))
    by_name = {js["metadata"]["name"]: js for js in jobsets}
    placed: dict[str, list[float]] = {}
    where: dict[str, list[str]] = {}
    for p in pods:
        owner = _label(p, rr.JOBSET_NAME_LABEL)
        t = condition_time(p, "PodScheduled")
        if owner and t is not None:
            placed.setdefault(owner, []).append(t)
            where.setdefault(owner, []).append((p.get("spec") or {}).get("nodeName", ""))
    out = []
    for job in trace.jobs:
        js = by_name.get(rr.jobset_name(job))
        if js is None:
            continue
        submit = parse_time(js["metadata"].get("creationTimestamp"))
        times = placed.get(js["metadata"]["name"], [])
        start = max(times) if len(times) >= job.nodes else None
        done, failed = condition_time(js, "Completed"), condition_time(js, "Failed")
        end = done if done is not None else failed
        state = ("completed" if done is not None else "failed" if failed is not None
                 else "running" if start is not None else "pending")
        out.append(JobOutcome(job.id, job.tenant, job.nodes, job.gpus_per_node, submit, start, end, state,
                              tuple(sorted(where.get(js["metadata"]["name"], []))) if start is not None else (),
                              preemptions=evicted.get(js["metadata"]["name"], 0)))
    return out


def admitted_times(workloads: list[dict]) -> dict[str, float]:
    """JobSet name -> when Kueue admitted its Workload (the quota decision, before the pods are bound)."""
    out = {}
    for w in workloads:
        owner = _owner(w)
        t = condition_time(w, "Admitted")
        if owner and t is not None:
            out[owner] = t
    return out
