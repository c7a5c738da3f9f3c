"""The API server's audit events about one run, read after it ended and was deleted (``raw["audit"]``;
answered by ``harness.audit.k8s`` together with the JobSet, Workload, pods and Events that
``evidence_raw`` already keeps).

Only the audit log says *who* did something: each event carries the authenticated ``user``
(username, groups), the ``verb``, the ``objectRef``, the ``responseStatus`` and when it was
received; at ``Request`` level (the native cluster's policy for JobSet creation,
harness/clusters/k8s/audit.py) also the body as submitted. Events and object status say what
happened but never who asked.

Where it is read from: ``kubernetes.audit_log`` (a file on this machine; rotated files beside it,
``<name>-<time>.<ext>``, are read too), else the native cluster's own file when that is the cluster.
A real cluster's audit log lives on its control plane (or the provider's log service) and is not
readable with a namespace-scoped identity: then nothing is read and the record says so.

Events kept: those whose object is the run's JobSet, its Jobs and pods (names prefixed by the JobSet
name), its Workload (``jobset-<name>-<hash>``) or its ConfigMap, received from shortly before the
submit on. Each is kept slim (no managed fields; the request body only for the JobSet's creation).
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from .api import parse_time

FORMAT = "k8s-audit/1"
SUBMIT_MARGIN_S = 10.0     # the ConfigMap is created just before the JobSet's submit stamp
_RECEIVED = re.compile(rb'"requestReceivedTimestamp":"([^"]+)"')
KEEP = ("auditID", "stage", "verb", "requestURI", "user", "impersonatedUser", "userAgent", "objectRef",
        "responseStatus", "requestReceivedTimestamp", "stageTimestamp")


def location(backend) -> tuple[Path | None, str]:
    """(the audit log file, how it is read) or (None, why it is not)."""
    configured = getattr(backend.cfg, "audit_log", None)
    if configured:
        return Path(os.path.expandvars(os.path.expanduser(configured))), "kubernetes.audit_log (a file on this machine)"
    if getattr(backend, "local", False):
        from ...clusters.k8s.audit import log_path
        from ...paths import NATIVE_K8S_CLUSTER, cluster_state_dir
        return (log_path(cluster_state_dir(NATIVE_K8S_CLUSTER)),
                "the native cluster's audit log on this machine, read as its admin")
    return None, ("kubernetes.audit_log is not set and this is not the project's native cluster: the API server's "
                  "audit log is on the control plane, not readable by a namespace-scoped user; ask the cluster "
                  "admin (managed clusters: the provider's control-plane audit logs)")


def files(path: Path, since: float) -> list[Path]:
    """The log and its rotated backups (lumberjack: audit-<time>.log) written to since `since`, oldest first."""
    stem, ext = path.stem, path.suffix
    rotated = [p for p in path.parent.glob(f"{stem}-*{ext}") if p.stat().st_mtime >= since]
    return sorted(rotated, key=lambda p: p.stat().st_mtime) + ([path] if path.exists() else [])


def run_objects(handle) -> dict:
    d = handle.data
    return {"namespace": d["namespace"], "name": d["name"], "configmap": d.get("configmap"),
            "workload_prefix": f"jobset-{d['name']}-", "child_prefix": f"{d['name']}-"}


def about_run(ev: dict, objs: dict) -> bool:
    ref = ev.get("objectRef") or {}
    if ref.get("namespace") != objs["namespace"]:
        return False
    name, res = ref.get("name") or "", ref.get("resource")
    if res == "jobsets":
        return name == objs["name"]
    if res == "configmaps":
        return name == objs["configmap"]
    if res == "workloads":
        return name.startswith(objs["workload_prefix"])
    if res in ("jobs", "pods"):
        return name.startswith(objs["child_prefix"])
    return False


def slim(ev: dict) -> dict:
    out = {k: ev[k] for k in KEEP if k in ev}
    ref = ev.get("objectRef") or {}
    if ev.get("verb") == "create" and ref.get("resource") == "jobsets" and not ref.get("subresource") \
            and "requestObject" in ev:
        out["requestObject"] = ev["requestObject"]     # the spec exactly as submitted
    return out


def _created(e: dict, resource: str) -> bool:
    ref = e.get("objectRef") or {}
    code = int((e.get("responseStatus") or {}).get("code") or 0)
    return e.get("verb") == "create" and ref.get("resource") == resource and not ref.get("subresource") \
        and 200 <= code < 300


def own(events: list[dict], submitted_at: float) -> list[dict]:
    """The events from this run's own start on: its JobSet's creation nearest the submit stamp, and the
    ConfigMap created just before it. An earlier run of the same name (another campaign, a resumed run)
    may have been torn down inside the margin before the submit; its events are not this run's."""
    creates = [e for e in events if _created(e, "jobsets")]
    if not creates:
        return events
    t = {id(e): parse_time(e.get("requestReceivedTimestamp")) or 0.0 for e in events}
    start = t[id(min(creates, key=lambda e: abs(t[id(e)] - submitted_at)))]
    cms = [t[id(e)] for e in events if _created(e, "configmaps") and t[id(e)] <= start]
    start = max(cms) if cms else start
    return [e for e in events if t[id(e)] >= start]


def read(path: Path, objs: dict, since: float, submitted_at: float | None = None) -> dict:
    """Scan the log files for the run's events (those of its own start on, given its submit stamp);
    the counts say what the window cost in log volume."""
    matched, stats = [], {"files": [], "lines_scanned": 0, "window_lines": 0, "window_bytes": 0, "bad_lines": 0}
    needles = (f'"namespace":"{objs["namespace"]}"',)
    for f in files(path, since):
        stats["files"].append({"path": str(f), "bytes": f.stat().st_size})
        with open(f, "rb") as fh:
            for line in fh:
                stats["lines_scanned"] += 1
                m = _RECEIVED.search(line)   # the time alone first: most lines are outside the window
                t = parse_time(m.group(1).decode()) if m else None
                if t is None or t < since:
                    continue
                stats["window_lines"] += 1
                stats["window_bytes"] += len(line)
                if not all(n.encode() in line for n in needles):
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    stats["bad_lines"] += 1
                    continue
                if about_run(ev, objs):
                    matched.append(slim(ev))
    matched.sort(key=lambda e: (str(e.get("requestReceivedTimestamp")), str(e.get("stageTimestamp"))))
    if submitted_at is not None:
        matched = own(matched, submitted_at)
    stats["matched_bytes"] = sum(len(json.dumps(e, separators=(",", ":"))) for e in matched)
    return {"events": matched, "stats": stats}


def gather(backend, handle, clock=time.time) -> dict:
    """raw["audit"] for one Kubernetes run (backend: a KubernetesBackend)."""
    path, how = location(backend)
    objs = run_objects(handle)
    out: dict = {"format": FORMAT, "objects": objs, "read_at": clock(), "how": how}
    if path is None:
        return {**out, "readable": False, "note": how}
    since = handle.submitted_at - SUBMIT_MARGIN_S
    out.update(path=str(path), since=since)
    try:
        got = read(path, objs, since, handle.submitted_at)
    except OSError as exc:
        return {**out, "readable": False, "note": f"the audit log {path} could not be read: {exc}"}
    if not got["stats"]["files"]:
        return {**out, "readable": False,
                "note": f"no audit log at {path}: the API server was started without --audit-log-path "
                        "(`poc cluster up --k8s` turns it on for the native cluster)"}
    return {**out, "readable": True, **got}
