"""Kubernetes' answers, from its own records only: the API server's audit events (raw["audit"],
backends/k8s/auditlog.py) for who and the exact submitted spec, and the JobSet, Workload, pods and
Events the run's raw evidence keeps (backends/k8s/evidence_raw.py) for when, where, usage and outcome.

Pure: raw dict in, answers out. Without a readable audit log, who submitted and who deleted are
not answered: no other Kubernetes record names the requesting user."""
from __future__ import annotations

import hashlib
import json

from ..backends.k8s.api import parse_time  # pure: API time text -> epoch seconds
from ..backends.k8s.state import get  # pure: a nested field or the default
from .common import answer, no

AUDIT = "API server audit log"
EVENTS = "Events"
JOBSET = "JobSet object"
WORKLOAD = "Kueue Workload"
PODS = "Pod objects"
GPU = "nvidia.com/gpu"


def _who(ev: dict) -> str:
    u = ev.get("user") or {}
    groups = [g for g in u.get("groups") or [] if g != "system:authenticated"]
    imp = (ev.get("impersonatedUser") or {}).get("username")
    return f"{u.get('username', '?')}" + (f" (groups {', '.join(groups)})" if groups else "") \
        + (f" as {imp}" if imp else "")


def _ok(ev: dict) -> bool:
    return 200 <= int(get(ev, "responseStatus", "code", default=0) or 0) < 300


def _find(events: list[dict], verb: str, resource: str, name: str | None = None, sub: str | None = None) -> list[dict]:
    return [e for e in events if e.get("verb") == verb and get(e, "objectRef", "resource") == resource
            and get(e, "objectRef", "subresource") == sub and (name is None or get(e, "objectRef", "name") == name)
            and _ok(e)]


def answers(raw: dict) -> dict:
    audit = raw.get("audit") or {}
    readable = bool(audit.get("readable"))
    events = audit.get("events") or [] if readable else []
    why = audit.get("note") or "no audit evidence was gathered for this run"
    name = raw.get("name")
    created = _find(events, "create", "jobsets", name)
    deleted = _find(events, "delete", "jobsets", name)
    n_events = f"{len(events)} audit events about the run"
    return {
        "who_submitted": answer(_who(created[0]), f"{AUDIT}: create jobsets, user",
                                note=n_events) if created
        else no(AUDIT, why if not readable else "no successful create of the run's JobSet in the audit log "
                "(the policy does not record it, or the file was rotated away)"),
        "what": _what(created, raw, readable, why),
        "when": _when(created, raw),
        "where": _where(raw),
        "usage": _usage(raw),
        "outcome": _outcome(raw, deleted),
        "who_cancelled": answer(_who(deleted[0]), f"{AUDIT}: delete jobsets, user",
                                note=f"deleted the JobSet at {deleted[0].get('requestReceivedTimestamp')}"
                                + _cascade(events)) if deleted
        else no(AUDIT, why if not readable else "no delete of the run's JobSet in the audit log"),
    }


def _cascade(events: list[dict]) -> str:
    """Who deleted the pods and Jobs after the JobSet (the garbage collector, the kubelet)."""
    who = sorted({(e.get("user") or {}).get("username", "?") for e in events
                  if e.get("verb") == "delete" and get(e, "objectRef", "resource") in ("pods", "jobs") and _ok(e)})
    return f"; its Jobs/pods were then deleted by {', '.join(who)}" if who else ""


def _what(created: list[dict], raw: dict, readable: bool, why: str) -> dict:
    body = created[0].get("requestObject") if created else None
    if isinstance(body, dict):
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        return answer(f"the JobSet as submitted: {_summary(body)}; sha256 {digest[:16]} of the request body",
                      f"{AUDIT}: requestObject of create jobsets (Request level)")
    js = raw.get("jobset")
    if isinstance(js, dict) and js.get("spec"):
        note = ("the spec as the API server stored it (after admission defaulting), not the request as sent: "
                + (why if not readable else "the audit policy keeps no request body for JobSet creation"))
        return answer(f"the JobSet as stored: {_summary(js)}", f"{JOBSET}: spec (read while it existed)", note=note)
    return no(AUDIT, why)


def _summary(js: dict) -> str:
    rjs = get(js, "spec", "replicatedJobs", default=[]) or []
    parts = []
    for rj in rjs:
        pod = get(rj, "template", "spec", "template", "spec", default={}) or {}
        cs = pod.get("containers") or [{}]
        parts.append(f"{rj.get('name')}: {rj.get('replicas', 1)} x parallelism "
                     f"{get(rj, 'template', 'spec', 'parallelism', default=1)}, image {cs[0].get('image')}, "
                     f"limits {json.dumps(get(cs[0], 'resources', 'limits', default={}), sort_keys=True)}")
    queue = get(js, "metadata", "labels", "kueue.x-k8s.io/queue-name")
    return "; ".join(parts) + (f"; queue {queue}" if queue else "")


def _conditions(o: dict | None) -> dict[str, dict]:
    return {c.get("type"): c for c in get(o, "status", "conditions", default=[]) or [] if c.get("status") == "True"}


def _when(created: list[dict], raw: dict) -> dict:
    js, wl = raw.get("jobset") or {}, raw.get("workload") or {}
    sub = created[0].get("requestReceivedTimestamp") if created else get(js, "metadata", "creationTimestamp")
    src = [f"{AUDIT}: requestReceivedTimestamp" if created else f"{JOBSET}: creationTimestamp"]
    wc, jc = _conditions(wl), _conditions(js)
    admitted = (wc.get("Admitted") or wc.get("QuotaReserved") or {}).get("lastTransitionTime")
    ended = (jc.get("Completed") or jc.get("Failed") or wc.get("Finished") or {}).get("lastTransitionTime")
    if admitted:
        src.append(f"{WORKLOAD}: Admitted condition")
    if ended:
        src.append(f"{JOBSET}: Completed/Failed condition")
    if not sub:
        return no(AUDIT, "neither an audit event nor the JobSet's creationTimestamp was kept")
    return answer(f"submitted {sub}, admitted {admitted or '?'}, ended {ended or 'not before it was deleted'}",
                  "; ".join(src))


def _where(raw: dict) -> dict:
    pods = raw.get("pods") or []
    nodes = [(get(p, "metadata", "name"), get(p, "spec", "nodeName")) for p in pods]
    placed = [(p, n) for p, n in nodes if n]
    if placed:
        return answer(", ".join(sorted({n for _, n in placed})) + f" ({len(placed)} pods: "
                      + ", ".join(f"{p}->{n}" for p, n in placed) + ")", f"{PODS}: spec.nodeName")
    sched = [e.get("message") for e in raw.get("events") or [] if e.get("reason") == "Scheduled"]
    if sched:
        return answer("; ".join(sched), f"{EVENTS}: Scheduled")
    nowhere = _ran_nowhere(raw)
    if nowhere:
        return answer(f"nowhere: {nowhere[0]}", nowhere[1])
    return no(PODS, "no pod of the run was bound to a node")


def _ran_nowhere(raw: dict) -> tuple[str, str] | None:
    """(why, source) when the records show the run never held a node: its Workload was never admitted,
    or its pods exist and none was ever bound. None when they do not say (nothing was recorded)."""
    pods = raw.get("pods") or []
    w = raw.get("workload")
    conds = {c.get("type"): c for c in get(w, "status", "conditions", default=[]) or []} if w else {}
    if w and not pods and not any(conds.get(t, {}).get("status") == "True" for t in ("QuotaReserved", "Admitted")):
        msg = (conds.get("QuotaReserved") or {}).get("message") or "no QuotaReserved/Admitted condition"
        return f"the Workload was never admitted ({msg})", f"{WORKLOAD}: QuotaReserved/Admitted conditions"
    if pods and not any(get(p, "spec", "nodeName") for p in pods):
        why = next((c.get("message") for p in pods for c in get(p, "status", "conditions", default=[]) or []
                    if c.get("type") == "PodScheduled" and c.get("message")), "unscheduled")
        return f"its pods were never bound to a node ({why})", f"{PODS}: PodScheduled condition"
    return None


def _pod_interval(p: dict, raw: dict) -> tuple[float, float] | None:
    """From binding (PodScheduled) to the last container's finish, else the pod's deletion."""
    start = next((parse_time(c.get("lastTransitionTime")) for c in get(p, "status", "conditions", default=[]) or []
                  if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
    if start is None:
        return None
    ends = [parse_time(get(cs, "state", "terminated", "finishedAt")) for cs in get(p, "status", "containerStatuses",
                                                                            default=[]) or []]
    ends = [e for e in ends if e is not None]
    uid = get(p, "metadata", "uid")
    end = max(ends) if ends else (parse_time(get(p, "metadata", "deletionTimestamp"))
                                  or (raw.get("pod_deleted_seen") or {}).get(uid) or raw.get("collected_at"))
    return (start, float(end)) if end is not None and end >= start else None


def _usage(raw: dict) -> dict:
    per_node: dict[str, list[tuple[float, float]]] = {}
    gpu_s, counted = 0.0, 0
    for p in raw.get("pods") or []:
        node, iv = get(p, "spec", "nodeName"), _pod_interval(p, raw)
        if not node or iv is None:
            continue
        counted += 1
        per_node.setdefault(node, []).append(iv)
        gpus = sum(float(get(c, "resources", "limits", GPU, default=0) or 0)
                   for c in get(p, "spec", "containers", default=[]) or [])
        gpu_s += gpus * (iv[1] - iv[0])
    if not counted:
        nowhere = _ran_nowhere(raw)
        if nowhere:   # the records say it never held a node: it used nothing
            return answer("node-hours 0, GPU-hours 0 (never ran)", nowhere[1], note=nowhere[0])
        return no(PODS, "no pod of the run ran on a node (nothing was used)")
    node_s = sum(_union(ivs) for ivs in per_node.values())
    return answer(f"node-hours {node_s / 3600:.4f}, GPU-hours {gpu_s / 3600:.4f} ({counted} pods on "
                  f"{len(per_node)} nodes)", f"{PODS}: PodScheduled to container finishedAt or deletion, x {GPU}",
                  note="Kubernetes keeps no accounting record: computed from the pods as read before they were "
                       "deleted; node-hours count the time a node held one of the run's pods")


def _union(ivs: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(ivs):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _outcome(raw: dict, deleted: list[dict]) -> dict:
    js, wl = raw.get("jobset") or {}, raw.get("workload") or {}
    jc, wc = _conditions(js), _conditions(wl)
    for kind in ("Completed", "Failed"):
        if kind in jc:
            c = jc[kind]
            return answer(f"{kind}: {c.get('reason', '')} {c.get('message', '')}".strip(),
                          f"{JOBSET}: status.conditions {kind}")
    if "Finished" in wc:
        c = wc["Finished"]
        return answer(f"Finished: {c.get('reason', '')} {c.get('message', '')}".strip(),
                      f"{WORKLOAD}: status.conditions Finished")
    phases = sorted({get(p, "status", "phase", default="?") for p in raw.get("pods") or []})
    if deleted:
        return answer(f"deleted before it finished (pods {', '.join(phases) or 'none'})",
                      f"{AUDIT}: delete jobsets; {PODS}: status.phase")
    return no(JOBSET, "the JobSet has no Completed/Failed condition and its end was not seen",
              value=f"pods {', '.join(phases)}" if phases else None)
