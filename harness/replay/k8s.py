"""Replay a trace on Kubernetes: its tenants' queues created, each job's JobSet created at its submit
offset, the cluster watched with one list per look until every JobSet has ended, then the raw records
(JobSets, pods, Workloads) listed once and kept; everything the replay made is deleted afterwards.

The nodes are whatever ``Target.node_labels`` selects: KWOK's emulated nodes on the local cluster
(harness/clusters/k8s/kwok.py), where a pod runs for its job's annotated run time. Submission is paced
by the harness's wall clock against the (already compressed) trace; creates go out ``workers`` at a
time so a burst of arrivals is not serialised behind one connection. The harness's own CPU time is
measured over submit and watch, to show it is not what limits the replay.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..backends.k8s.api import (
    CLUSTERQUEUES,
    JOBSETS,
    LOCALQUEUES,
    RESOURCEFLAVORS,
    TOPOLOGIES,
    WORKLOADPRIORITYCLASSES,
    WORKLOADS,
    K8sClient,
)
from ..errors import BackendError
from ..render import replay_k8s as rr
from ..scale.trace import Trace, TraceJob
from . import k8s_records
from .pace import due_batches

# the cluster-wide objects a replay makes, in the order they are deleted after it (a ClusterQueue first:
# Kueue keeps a flavor while a ClusterQueue names it)
CLUSTER_SCOPED = {"ClusterQueue": CLUSTERQUEUES, "ResourceFlavor": RESOURCEFLAVORS, "Topology": TOPOLOGIES,
                  "WorkloadPriorityClass": WORKLOADPRIORITYCLASSES}
PAGE = 500     # list in pages: thousands of pods in one response would be one large allocation on both sides


@dataclass
class Submitted:
    """The harness's own record of one create: when it was due and when it was sent (epoch s, µs)."""

    job: str
    due_s: float
    sent_at: float
    error: str = ""


@dataclass
class K8sReplay:
    client: K8sClient
    target: rr.Target
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    cpu: Callable[[], float] = time.process_time
    workers: int = 8
    poll_s: float = 2.0
    submitted: list[Submitted] = field(default_factory=list)
    looks: int = 0

    # ---------------------------------------------------------------- queues
    def create_queues(self, quotas: list[rr.TenantQuota]) -> None:
        core, co = self.client.core(), self.client.custom()
        for obj in rr.queue_objects(self.target, quotas):
            kind = obj["kind"]
            if kind == "Namespace":
                self.client.call("CREATE namespace", core.create_namespace, obj, conflict_ok=True)
            elif kind in CLUSTER_SCOPED:
                res = CLUSTER_SCOPED[kind]
                self.client.call(f"CREATE {kind}", co.create_cluster_custom_object, res.group, res.version,
                                 res.plural, obj, conflict_ok=True)
            else:
                self.client.call("CREATE LocalQueue", co.create_namespaced_custom_object, LOCALQUEUES.group,
                                 LOCALQUEUES.version, self.target.namespace, LOCALQUEUES.plural, obj, conflict_ok=True)

    # ---------------------------------------------------------------- submit
    def _create(self, job: TraceJob, due: float, t0: float) -> Submitted:
        co = self.client.custom()
        sent = self.clock()
        try:
            self.client.call("CREATE JobSet", co.create_namespaced_custom_object, JOBSETS.group, JOBSETS.version,
                             self.target.namespace, JOBSETS.plural, rr.jobset(job, self.target))
            return Submitted(job.id, due, round(sent - t0, 6))
        except BackendError as e:
            return Submitted(job.id, due, round(sent - t0, 6), e.message)

    def submit(self, trace: Trace) -> float:
        """Create every job's JobSet at its offset from now; returns the wall-clock zero (epoch s)."""
        t0 = self.clock()
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            for due in due_batches(trace, t0, self.clock, self.sleep):
                self.submitted += pool.map(lambda j: self._create(j, j.submit_s, t0), due)
        return t0

    # ---------------------------------------------------------------- watch
    def _list(self, what: str, fn, *args, **kw) -> list[dict]:
        items, token = [], None
        while True:
            page = self.client.call(what, fn, *args, limit=PAGE, _continue=token, **kw) if token else \
                self.client.call(what, fn, *args, limit=PAGE, **kw)
            page = self.client.to_dict(page)
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def jobsets(self) -> list[dict]:
        co = self.client.custom()
        return self._list("LIST jobsets", co.list_namespaced_custom_object, JOBSETS.group, JOBSETS.version,
                          self.target.namespace, JOBSETS.plural,
                          label_selector=f"{rr.REPLAY_LABEL}={self.target.replay}")

    def wait_ended(self, jobs: int, timeout_s: float) -> bool:
        """Until `jobs` JobSets have a Completed or Failed condition (one list per look), or timeout_s."""
        deadline = self.clock() + timeout_s
        while True:
            self.looks += 1
            ended = sum(1 for js in self.jobsets() if k8s_records.condition_time(js, "Completed") is not None
                        or k8s_records.condition_time(js, "Failed") is not None)
            if ended >= jobs:
                return True
            if self.clock() >= deadline:
                return False
            self.sleep(self.poll_s)

    # ---------------------------------------------------------------- records
    def records(self) -> dict:
        """The raw records, trimmed to what the figures need: JobSets, pods, Workloads, and where each of
        the nodes sits (block and rack)."""
        co, core = self.client.custom(), self.client.core()
        ns, sel = self.target.namespace, f"{rr.REPLAY_LABEL}={self.target.replay}"
        pods = self._list("LIST pods", core.list_namespaced_pod, ns, label_selector=sel)
        workloads = self._list("LIST workloads", co.list_namespaced_custom_object, WORKLOADS.group,
                               WORKLOADS.version, ns, WORKLOADS.plural)
        nodes = self._list("LIST nodes", core.list_node,
                           label_selector=",".join(f"{k}={v}" for k, v in self.target.node_labels.items()))
        return {"jobsets": [k8s_records.trim(o) for o in self.jobsets()],
                "pods": [k8s_records.trim(o) for o in pods],
                "workloads": [k8s_records.trim(o) for o in workloads],
                "nodes": [k8s_records.node_place(o) for o in nodes]}

    def run(self, trace: Trace, quotas: list[rr.TenantQuota], timeout_s: float) -> dict:
        """Queues, submission, watch, records: what a replay on this cluster produced (interrupted by
        Ctrl-C, what it produced until then, marked interrupted)."""
        self.create_queues(quotas)
        cpu0 = self.cpu()
        t0, interrupted = self.clock(), False
        try:
            t0 = self.submit(trace)
            ended = self.wait_ended(len(trace.jobs), timeout_s)
        except KeyboardInterrupt:   # the records of what was created are still read; the caller deletes it all
            ended, interrupted = False, True
        cpu_s = self.cpu() - cpu0
        raw = self.records()
        return {"platform": "k8s", "t0": t0, "ended": ended, "interrupted": interrupted, "raw": raw,
                "submitted": [vars(s) for s in self.submitted], "looks": self.looks,
                "harness_cpu_s": round(cpu_s, 3), "calls": dict(self.client.calls),
                "resolution_s": k8s_records.RESOLUTION_S}

    # ---------------------------------------------------------------- cleanup
    def delete(self, wait_s: float = 120) -> bool:
        """The namespace (its JobSets, pods, Workloads, LocalQueues go with it), then the ClusterQueues, the
        flavor, the Topology and the priority classes; True when all of it is gone within wait_s. Kueue's
        finalizers keep a ClusterQueue until its Workloads are gone and a flavor until no ClusterQueue
        names it, so each is waited for."""
        core, co = self.client.core(), self.client.custom()
        sel = f"{rr.REPLAY_LABEL}={self.target.replay}"
        deadline = self.clock() + wait_s

        def until(gone) -> bool:
            while not gone():
                if self.clock() >= deadline:
                    return False
                self.sleep(1)
            return True

        def remaining(res) -> list[str]:
            return [o["metadata"]["name"] for o in self.client.to_dict(self.client.call(
                f"LIST {res.plural}", co.list_cluster_custom_object, *res, label_selector=sel)).get("items", [])]

        self.client.call("DELETE namespace", core.delete_namespace, self.target.namespace, missing_ok=True)
        ok = until(lambda: self.client.call("GET namespace", core.read_namespace, self.target.namespace,
                                            missing_ok=True) is None)
        for res in CLUSTER_SCOPED.values():
            for name in remaining(res):
                self.client.call(f"DELETE {res.plural}", co.delete_cluster_custom_object, *res, name, missing_ok=True)
            ok = until(lambda res=res: not remaining(res)) and ok
        return ok
