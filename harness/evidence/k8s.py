"""Kubernetes: the raw API objects a run kept (``Collected.raw``) -> time-stamps (pure).

Where each edge comes from, the most precise record first (each Stamp names its source):
* submitted: the harness clock around the JobSet create call [before, after], narrowed by the API
  server's creationTimestamp T, which says [T, T + 1). When the two disagree (another host's clock)
  the bracket stands alone and ``checks`` says so.
* admitted: the Workload's Admitted condition (whole s).
* allocated (per attempt; the run's is the first attempt's): every pod of the attempt bound to a
  node, i.e. the latest of its pods' kube-scheduler Scheduled events (eventTime, microseconds).
  Only where an event is missing, that pod's PodScheduled condition (whole s); the source says so.
  The scheduler writes the event after the bind, under load up to a second or more later: where a
  pod's eventTime lies outside its PodScheduled condition's second, that pod's stamp is the hull of
  both, so it never excludes the pod's own condition (evidence version 2); from version 3 on, the
  bind lies in the condition's second and no later than the event, so the stamp is the intersection
  of the two, its point in the middle (see READER_RULES).
* detected (an attempt that failed): the earliest evidence that the platform noticed: a container
  that exited non-zero (the kubelet's finishedAt), a pod deletion requested (deletionTimestamp minus
  its grace period: delete_pod, an eviction from a lost node), the kubelet's Killing event, a
  DisruptionTarget condition, the node controller marking a node of the attempt not Ready, a Job
  failure event.
* ended: the last attempt's is the JobSet's Completed/Failed condition; an earlier attempt's is its
  Job failure event, else the JobSet's teardown (the latest deletion request among its pods).
* released: every pod of the attempt stopped holding its node: all its containers finished (finishedAt,
  whole s), or, for a pod that never reported (its node was lost), its deletion: between the request
  and the harness seeing the pod watch's DELETED event.
* image_pull (facts, not an instant): the first attempt's pods (name, uid, node, slot) and the kubelet's
  Pulling and Pulled events about them, each at its whole second; harness/metrics/image.py reads the
  messages (image_pull_s). Absent where no such pod has a Pulled event.
Every time text with a fraction of a second is read at microseconds, without one as [T, T + 1).
Never raises: odd input gives None stamps and a failed check.
"""
from __future__ import annotations

import re

from ..backends.k8s.api import parse_time
from ..backends.k8s.state import attempt_of, conds, get, is_true, items
from ..timing import Stamp

FRACTION = re.compile(r"T\d\d:\d\d:\d\d[.,]\d")
# raw["evidence_version"] (backends/k8s/evidence_raw.py) -> what changed in reading it. Raw records
# kept before a change are read by the rules of their version, so stored runs re-derive exactly.
READER_RULES = {1: "allocated: the Scheduled eventTime alone",
                2: "allocated: the hull of eventTime and the PodScheduled condition where they disagree",
                3: "allocated: where they disagree, the bind's own bounds: the PodScheduled condition's second up to "
                   "the eventTime (written after the bind), the point in the middle"}
JOB_FAILED = {"BackoffLimitExceeded", "PodFailurePolicy", "DeadlineExceeded", "FailedIndexes",
              "MaxFailedIndexesExceeded"}


def stamp_at(text, source: str) -> Stamp | None:
    """An API time: microseconds when it has a fraction (eventTime), else whole seconds."""
    t = parse_time(text)
    if t is None:
        return None
    if isinstance(text, str) and FRACTION.search(text):
        return Stamp.exact(t, f"{source} (µs)")
    return Stamp.truncated(t, f"{source} (whole s)")


def latest(stamps: list[Stamp], source: str) -> Stamp | None:
    """The last of several instants: it lies in [max lo, max hi]."""
    if not stamps:
        return None
    return Stamp(max(s.t for s in stamps), max(s.lo for s in stamps), max(s.hi for s in stamps), source,
                 max(s.resolution_s for s in stamps))


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and abs(f) != float("inf") else None


def _check(checks: list, what: str, ok: bool, detail: str) -> None:
    checks.append({"what": what, "ok": bool(ok), "detail": detail})


def _uid(o: dict) -> str:
    return get(o, "metadata", "uid") or get(o, "metadata", "name") or ""


def _name(o: dict) -> str:
    return str(get(o, "metadata", "name", default="?"))


def submitted(raw: dict, jobset: dict | None, checks: list) -> Stamp | None:
    sub = raw.get("submit") if isinstance(raw.get("submit"), dict) else {}
    before, after = _num(sub.get("before")), _num(sub.get("after"))
    record = sub.get("scheduler_record") or get(jobset, "metadata", "creationTimestamp")
    api = stamp_at(record, "API server JobSet creationTimestamp")
    bracket = None
    if before is not None and after is not None and before <= after:
        bracket = Stamp.between(before, after, "harness clock around the JobSet create call")
    if bracket is None:
        _check(checks, "submitted: harness bracket", False, "no submit bracket in the raw evidence; "
               + ("creationTimestamp alone" if api else "no submit time at all"))
        return api
    if api is None:
        _check(checks, "submitted: creationTimestamp inside the harness bracket", False, "no creationTimestamp")
        return bracket
    both = bracket.narrowed(api)
    _check(checks, "submitted: creationTimestamp inside the harness bracket", both is not None,
           f"bracket [{bracket.lo:.6f}, {bracket.hi:.6f}], creationTimestamp [{api.lo:.0f}, {api.hi:.0f})"
           + ("" if both else ": disjoint (clocks differ?), the bracket alone is used"))
    return both or bracket


def _scheduled_events(events: list[dict]) -> dict[str, Stamp]:
    """pod uid and pod name -> its kube-scheduler Scheduled event time (the first, if repeated)."""
    out: dict[str, Stamp] = {}
    for e in events:
        io = e.get("involvedObject") or e.get("regarding") or {}
        if e.get("reason") != "Scheduled" or io.get("kind", "Pod") != "Pod":
            continue
        s = stamp_at(e.get("eventTime") or e.get("firstTimestamp"), "kube-scheduler Scheduled event")
        for key in (io.get("uid"), io.get("name")):
            if s is not None and key and (key not in out or s.t < out[key].t):
                out[key] = s
    return out


def _slot(p: dict) -> str:
    """One rank's place in the set: a pod the Job controller replaces keeps it."""
    lab = get(p, "metadata", "labels", default={})
    job, idx = lab.get("batch.kubernetes.io/job-name"), lab.get("batch.kubernetes.io/job-completion-index")
    return f"{job}/{idx}" if job is not None and idx is not None else _name(p)


def _pod_scheduled(p: dict) -> Stamp | None:
    c = next((c for c in items(p, "status", "conditions")
              if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
    return stamp_at(c.get("lastTransitionTime"), "PodScheduled condition") if c else None


def _hull(event: Stamp, cond: Stamp) -> Stamp:
    return Stamp(event.t, min(event.lo, cond.lo), max(event.hi, cond.hi),
                 "Scheduled eventTime ∪ PodScheduled condition", max(event.resolution_s, cond.resolution_s))


def _within(event: Stamp, cond: Stamp) -> Stamp:
    """The bind happened inside the condition's second and no later than the event was written: the stamp is
    that intersection, its point in the middle. An event before the condition's second (clocks that disagree)
    leaves no intersection: the hull then, as version 2 reads it."""
    lo, hi = cond.lo, min(cond.hi, event.hi)
    if hi < lo:
        return _hull(event, cond)
    return Stamp((lo + hi) / 2, lo, hi, "PodScheduled condition ∩ up to the Scheduled eventTime",
                 max(event.resolution_s, cond.resolution_s))


def allocated(group: list[dict], expected: int, sched: dict[str, Stamp], version: int = 2) -> Stamp | None:
    per_slot: dict[str, Stamp] = {}
    fallback, hulled = [], []
    for p in group:
        s = sched.get(get(p, "metadata", "uid")) or sched.get(_name(p))
        cond = _pod_scheduled(p)
        if s is None:
            s = cond
            if s is not None:
                fallback.append(_name(p))
        elif version >= 2 and cond is not None and not cond.lo <= s.t <= cond.hi:
            s = _within(s, cond) if version >= 3 else _hull(s, cond)
            hulled.append(f"{_name(p)} ({s.t - cond.lo:+.3f} s from the condition's second)")
        slot = _slot(p)
        if s is not None and (slot not in per_slot or s.t < per_slot[slot].t):
            per_slot[slot] = s
    if not per_slot or len(per_slot) < expected:
        return None
    src = f"latest of {len(per_slot)} pods' kube-scheduler Scheduled eventTime"
    if fallback:
        src += f"; PodScheduled condition (whole s) for {', '.join(sorted(fallback))}: no Scheduled event kept"
    if hulled:
        src += f"; with its PodScheduled condition's second for {', '.join(sorted(hulled))}: the event is outside it"
    return latest(list(per_slot.values()), src)


def _deletion_requested(p: dict, first_seen: dict | None = None) -> Stamp | None:
    """deletionTimestamp is the request time plus the grace period. The pod's last copy carries the
    final (grace 0) delete's, so the first copy the harness saw deleting (with the harness clock
    then, an upper bound) is preferred when it was kept."""
    first = (first_seen or {}).get(get(p, "metadata", "uid"))
    meta = first if isinstance(first, dict) else get(p, "metadata", default={})
    if not isinstance(meta, dict):
        return None
    s = stamp_at(meta.get("deletionTimestamp"), f"pod {_name(p)} deletion requested (deletionTimestamp - grace)")
    if s is None:
        return None
    grace = _num(meta.get("deletionGracePeriodSeconds")) or 0.0
    s = Stamp(s.t - grace, s.lo - grace, s.hi - grace, s.source, s.resolution_s)
    seen = _num(first.get("seen_at")) if isinstance(first, dict) else None
    if seen is not None and s.lo <= seen < s.hi:   # seen by the harness before the second was out
        s = Stamp.between(s.lo, seen, f"{s.source}, seen by the harness at {seen:.3f}")
    return s


def _terminated(p: dict) -> list[tuple[int | None, Stamp]]:
    out = []
    for cs in items(p, "status", "containerStatuses"):
        for st in (get(cs, "state", "terminated"), get(cs, "lastState", "terminated")):
            if isinstance(st, dict) and (s := stamp_at(st.get("finishedAt"), f"pod {_name(p)} container "
                                         f"{cs.get('name')} exited {st.get('exitCode')} (kubelet finishedAt)")):
                out.append((st.get("exitCode"), s))
    return out


def _job_failures(events: list[dict], group: list[dict]) -> list[Stamp]:
    jobs = {r.get("uid") for p in group for r in items(p, "metadata", "ownerReferences") if r.get("kind") == "Job"}
    out = []
    for e in events:
        io = e.get("involvedObject") or e.get("regarding") or {}
        if io.get("kind") == "Job" and io.get("uid") in jobs and e.get("reason") in JOB_FAILED:
            s = stamp_at(e.get("eventTime") or e.get("firstTimestamp"), f"Job {io.get('name')} {e.get('reason')} event")
            if s is not None:
                out.append(s)
    return out


def detected(group: list[dict], events: list[dict], nodes: list[dict], since: Stamp | None,
             first_del: dict | None = None) -> Stamp | None:
    cands = [s for p in group for code, s in _terminated(p) if code not in (0, None)]
    cands += [s for p in group if (s := _deletion_requested(p, first_del)) is not None]
    uids = {get(p, "metadata", "uid") for p in group}
    cands += [s for e in events if e.get("reason") == "Killing"
              and ((e.get("involvedObject") or {}).get("uid") in uids)
              and (s := stamp_at(e.get("eventTime") or e.get("firstTimestamp"),
                                 f"kubelet Killing event ({(e.get('involvedObject') or {}).get('name')})"))]
    cands += [s for p in group for c in items(p, "status", "conditions")
              if c.get("type") == "DisruptionTarget" and c.get("status") == "True"
              and (s := stamp_at(c.get("lastTransitionTime"), f"pod {_name(p)} DisruptionTarget "
                                 f"({c.get('reason')})")) is not None]
    cands += _job_failures(events, group)
    on = {get(p, "spec", "nodeName") for p in group}
    for snap in nodes:
        if not isinstance(snap, dict) or snap.get("name") not in on:
            continue
        for c in snap.get("conditions") or []:
            if isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") != "True":
                s = stamp_at(c.get("lastTransitionTime"), f"node controller: {snap['name']} Ready={c.get('status')}")
                if s is not None and (since is None or s.hi >= since.lo):
                    cands.append(s)
    if since is not None:
        cands = [s for s in cands if s.hi >= since.lo]
    return min(cands, key=lambda s: (s.t, s.width), default=None)


def released(group: list[dict], deleted_seen: dict, first_del: dict | None = None) -> Stamp | None:
    per_pod = []
    for p in group:
        cs = items(p, "status", "containerStatuses")
        done = [s for _, s in _terminated(p)]
        if cs and all(get(c, "state", "terminated") for c in cs) and done:
            per_pod.append(max(done, key=lambda s: s.t))
            continue
        seen = _num(deleted_seen.get(get(p, "metadata", "uid")))
        req = _deletion_requested(p, first_del)
        if seen is None or req is None or req.lo > seen:
            return None     # still holding its node, or no evidence of when it stopped
        per_pod.append(Stamp.between(req.lo, seen, f"pod {_name(p)} deleted: between the request and the watch's "
                                                   "DELETED event (harness clock)"))
    return latest(per_pod, f"the last of {len(per_pod)} pods stopped: " + "; ".join(sorted({s.source for s in per_pod}))
                  ) if per_pod else None


def attempt_ended(group: list[dict], events: list[dict], det: Stamp | None, nxt: list[dict],
                  first_del: dict | None = None) -> Stamp | None:
    """An attempt JobSet restarted: its Job's failure event, else the teardown (latest deletion request)."""
    fails = _job_failures(events, group)
    if fails:
        return min(fails, key=lambda s: s.t)
    dels = [s for p in group if (s := _deletion_requested(p, first_del)) is not None]
    if dels:
        return latest(dels, "JobSet teardown: the last of the attempt's pod deletion requests")
    created = [s for p in nxt if (s := stamp_at(get(p, "metadata", "creationTimestamp"), "next attempt's pod created"))]
    if det is not None and created:
        first = min(created, key=lambda s: s.t)
        if first.hi >= det.lo:
            return Stamp.between(det.lo, first.hi, "between detection and the next attempt's first pod creation")
    return None


def image_pull(groups: dict[int, list[dict]], events: list[dict]) -> dict | None:
    """The first attempt's pods and the kubelet's Pulling/Pulled events about them (matched by the pod's
    uid), message as the kubelet wrote it: {"pods": [{pod, uid, node, slot}], "events": [{reason, pod, uid,
    container, node, message, at}]}. None where none of those pods has a Pulled event."""
    if not groups:
        return None
    group = groups[min(groups)]
    pods = [{"pod": _name(p), "uid": get(p, "metadata", "uid"), "node": get(p, "spec", "nodeName"),
             "slot": _slot(p)} for p in group]
    uids = {p["uid"] for p in pods if p["uid"]}
    out = []
    for e in events:
        io = e.get("involvedObject") or e.get("regarding") or {}
        if e.get("reason") not in ("Pulling", "Pulled") or io.get("kind", "Pod") != "Pod" or io.get("uid") not in uids:
            continue
        at = stamp_at(e.get("eventTime") or e.get("firstTimestamp"), f"kubelet {e.get('reason')} event")
        out.append({"reason": e["reason"], "pod": io.get("name"), "uid": io.get("uid"),
                    "container": io.get("fieldPath"), "message": str(e.get("message") or ""),
                    "node": get(e, "source", "host") or e.get("reportingInstance"), "at": at})
    if not any(e["reason"] == "Pulled" for e in out):
        return None
    return {"pods": pods, "events": out}


def _by_attempt(pods: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for p in pods:
        if isinstance(p, dict):
            out.setdefault(attempt_of(p), []).append(p)
    return dict(sorted(out.items()))


def stamps(raw: dict) -> dict:
    checks: list[dict] = []
    try:
        return _stamps(raw if isinstance(raw, dict) else {}, checks)
    except Exception as exc:  # noqa: BLE001 - odd input is a failed check, never a crash
        _check(checks, "raw evidence readable", False, f"{type(exc).__name__}: {exc}")
        return {"submitted": None, "admitted": None, "allocated": None, "ended": None, "released": None,
                "attempts": [], "checks": checks}


def _stamps(raw: dict, checks: list) -> dict:
    jobset = raw.get("jobset") if isinstance(raw.get("jobset"), dict) else None
    workload = raw.get("workload") if isinstance(raw.get("workload"), dict) else None
    events = [e for e in raw.get("events") or [] if isinstance(e, dict)]
    nodes = [n for n in raw.get("nodes") or [] if isinstance(n, dict)]
    deleted_seen = raw.get("pod_deleted_seen") if isinstance(raw.get("pod_deleted_seen"), dict) else {}
    first_del = raw.get("pod_deletion_first_seen") if isinstance(raw.get("pod_deletion_first_seen"), dict) else {}
    groups = _by_attempt(list(raw.get("pods") or []))
    version = int(_num(raw.get("evidence_version")) or 1)
    sched = _scheduled_events(events)
    sub = submitted(raw, jobset, checks)
    adm = None
    if workload is not None and is_true(conds(workload), "Admitted"):
        adm = stamp_at(conds(workload)["Admitted"].get("lastTransitionTime"), "Kueue Workload Admitted condition")
    c = conds(jobset) if jobset else {}
    terminal = next((k for k in ("Completed", "Failed") if is_true(c, k)), None)
    job_ended = stamp_at(c[terminal].get("lastTransitionTime"), f"JobSet {terminal} condition") if terminal else None
    expected = int(_num(raw.get("expected_pods")) or 0)
    attempts = []
    keys = list(groups)
    for i, att in enumerate(keys):
        group = groups[att]
        a = allocated(group, expected or len({_slot(p) for p in group}), sched, version)
        last = i == len(keys) - 1
        failed = not last or terminal == "Failed"
        det = detected(group, events, nodes, a, first_del) if failed else None
        end = job_ended if last else attempt_ended(group, events, det, groups[keys[i + 1]], first_del)
        attempts.append({"attempt": att, "allocated": a, "detected": det, "ended": end,
                         "released": released(group, deleted_seen, first_del),
                         "nodes": sorted({n for p in group if (n := get(p, "spec", "nodeName"))})})
    first = attempts[0] if attempts else {}
    out = {"submitted": sub, "admitted": adm, "allocated": first.get("allocated"), "ended": job_ended,
           "released": attempts[-1]["released"] if attempts else None, "attempts": attempts, "checks": checks}
    pulls = image_pull(groups, events)
    if pulls is not None:   # the kubelet's events: where the image came from, and how long it took
        out["image_pull"] = pulls
    _cross_checks(out, jobset, groups, sched, checks)
    return out


def _cross_checks(st: dict, jobset: dict | None, groups: dict, sched: dict, checks: list) -> None:
    def order(what: str, a: Stamp | None, b: Stamp | None, slack: float = 0.0) -> None:
        if a is not None and b is not None:
            _check(checks, what, b.hi + slack >= a.lo,
                   f"{a.source} [{a.lo:.6f}, {a.hi:.6f}] then {b.source} [{b.lo:.6f}, {b.hi:.6f}]")
    order("admitted after submitted", st["submitted"], st["admitted"])
    order("allocated after submitted", st["submitted"], st["allocated"])
    order("allocated after admitted", st["admitted"], st["allocated"])
    order("ended after allocated", st["allocated"], st["ended"])
    for a in st["attempts"]:
        order(f"attempt {a['attempt']}: detected after allocated", a["allocated"], a["detected"])
        order(f"attempt {a['attempt']}: released after allocated", a["allocated"], a["released"])
    pods = [p for g in groups.values() for p in g]
    missing = [_name(p) for p in pods if get(p, "spec", "nodeName")
               and sched.get(get(p, "metadata", "uid")) is None and sched.get(_name(p)) is None]
    _check(checks, "every bound pod has its Scheduled event (µs)", not missing,
           f"{len(pods) - len(missing)} of {len(pods)} pods" + (f"; missing: {', '.join(missing)}" if missing else ""))
    restarts = _num(get(jobset, "status", "restarts", default=0)) if jobset else None
    if restarts is not None:
        _check(checks, "attempts kept = JobSet restarts + 1", len(groups) == int(restarts) + 1,
               f"{len(groups)} attempts of pods kept, JobSet status.restarts={int(restarts)}")
