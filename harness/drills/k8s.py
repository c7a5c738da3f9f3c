"""The Kubernetes side of the upgrade drills: the native cluster's components restarted (or
upgraded one minor release) one at a time, in the order of Kubernetes' version-skew policy: the
control plane first (kube-apiserver, kube-controller-manager, kube-scheduler), then the Kueue and
JobSet controllers with their webhooks, then the kubelets one node at a time (a kubelet may lag the
API server, never lead it).

The restarts themselves are harness/clusters/k8s/upgrade.py (the command lines `up` recorded); this
module decides the order, waits for each component's own health check and answers the probes. On a
user's cluster only owned() and the probes work here (through the kubeconfig alone); the restart
commands there are the user's (harness/drills/commands.py).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import yaml

from ..backends.base import Handle
from ..backends.k8s import ownership
from ..backends.k8s.api import JOBSETS, WORKLOADS, K8sClient, parse_time
from ..clusters.k8s.layout import (
    APISERVER_PORT,
    JOBSET_PORTS,
    KCM_PORT,
    KUEUE_PORTS,
    SCHEDULER_PORT,
    Layout,
    kubelet_healthz_port,
    load_state,
    state_root,
)
from ..errors import BackendError
from ..render import jobset as rj
from . import commands
from .base import Step

PLATFORM = "k8s"
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
CONTROLLERS = ("kueue", "jobset")
POLL_S = 0.5
ENDED = ("Completed", "Failed")


def plan_for(nodes: list[str]) -> list[str]:
    """The order: control plane, then the controllers, then each node's kubelet."""
    return [*CONTROL_PLANE, *CONTROLLERS, *(f"kubelet@{n}" for n in nodes)]


def group_of(component: str) -> str:
    if component in CONTROL_PLANE:
        return "control plane"
    if component in CONTROLLERS:
        return "controllers"
    return "nodes"


def state_name(component: str) -> str:
    """Plan name -> the native cluster's state-file name (kubelet@poc-n1 -> kubelet-poc-n1)."""
    return component.replace("kubelet@", "kubelet-", 1)


def kubeconfig_cluster(doc: dict, context: str | None) -> str | None:
    """The cluster name a kubeconfig's context (default: current-context) points at."""
    name = context or doc.get("current-context")
    for c in doc.get("contexts") or []:
        if c.get("name") == name:
            return (c.get("context") or {}).get("cluster")
    return None


def decide_owned(*, native: bool, native_state: dict | None, kubeconfig: str, native_kubeconfig: str,
                 kube_doc: dict | None, context: str | None, confirm: str | None) -> tuple[bool, str]:
    """Whether a drill may restart this cluster: the harness's own native cluster (its state file
    lists running components and the backend talks to its kubeconfig), or the user named the
    kubeconfig context's cluster in drills.confirm_cluster."""
    if native:
        if native_state and native_state.get("components") and native_state.get("ready") \
                and Path(kubeconfig) == Path(native_kubeconfig):
            return True, f"the harness's own native cluster (state in {Path(native_kubeconfig).parent})"
        if not native_state or not native_state.get("components"):
            return False, "kubeconfig: native, but the native cluster has no state file: is it up?"
    cluster = kubeconfig_cluster(kube_doc or {}, context)
    if confirm and cluster and confirm == cluster:
        return True, f"drills.confirm_cluster names the kubeconfig context's cluster {cluster!r}"
    if confirm:
        return False, (f"drills.confirm_cluster is {confirm!r} but the kubeconfig context's cluster is "
                       f"{cluster!r}: not restarting a cluster the user did not name")
    return False, (f"not the harness's own cluster, and drills.confirm_cluster is not set "
                   f"(the kubeconfig context's cluster is {cluster!r})")


def conditions(obj: dict) -> list[dict]:
    return [{k: c.get(k) for k in ("type", "status", "reason", "lastTransitionTime")}
            for c in (obj.get("status") or {}).get("conditions") or []]


def is_true(obj: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions(obj))


def pod_facts(p: dict) -> dict:
    st = p.get("status") or {}
    return {"name": p["metadata"]["name"], "uid": p["metadata"]["uid"], "node": (p.get("spec") or {}).get("nodeName"),
            "phase": st.get("phase"), "deleting": bool(p["metadata"].get("deletionTimestamp")),
            "restarts": sum(c.get("restartCount", 0) for c in st.get("containerStatuses") or []),
            "started": st.get("startTime")}


def object_facts(o: dict) -> dict:
    m = o["metadata"]
    return {"name": m["name"], "uid": m["uid"], "resourceVersion": m.get("resourceVersion"),
            "generation": m.get("generation"), "conditions": conditions(o)}


def owned_by(o: dict, uid: str) -> bool:
    return any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])


def stale_pods(pods: list[dict], jobset: dict | None) -> list[dict]:
    """Pods of an ended run: a deleted JobSet leaves none behind, an ended one only finished ones."""
    if jobset is not None and not any(is_true(jobset, c) for c in ENDED):
        return []
    return [{"kind": "Pod", **pod_facts(p), "why": "a pod of an ended run"} for p in pods
            if jobset is None or (p.get("status") or {}).get("phase") in ("Pending", "Running")]


def stale_workloads(workloads: list[dict], jobset: dict | None) -> list[dict]:
    """Workloads left behind by an ended (or deleted) JobSet: not Finished, and still admitted or pending."""
    if jobset is not None and not any(is_true(jobset, c) for c in ENDED):
        return []
    out = []
    for w in workloads:
        if is_true(w, "Finished"):
            continue
        admitted = is_true(w, "Admitted") or is_true(w, "QuotaReserved")
        why = "still admitted" if admitted else "still pending"
        out.append({"kind": "Workload", "name": w["metadata"]["name"], "uid": w["metadata"]["uid"],
                    "why": f"{why} after its JobSet ended"})
    return out


def probe_jobset(ns: str, queue: str) -> dict:
    """A small JobSet sent with dryRun=All: the whole admission path (JobSet's and Kueue's webhooks), nothing made."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "poc.local/busybox:1.35",
                                                    "command": ["true"], "resources": {"requests": {"cpu": "10m"}}}]}
    return {"apiVersion": rj.JOBSET_API, "kind": "JobSet",
            "metadata": {"name": "poc-drill-probe", "namespace": ns, "labels": {rj.QUEUE_LABEL: queue}},
            "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": pod}}}}]}}


def poll(check, timeout: float, interval: float = POLL_S, *, clock=time.time, sleep=time.sleep,
         alive=lambda: True) -> tuple[float | None, float, str | None]:
    """check() until true: (when it passed, the largest gap between two checks, the last failure).
    `alive()` false ends the wait early (the process died)."""
    deadline = clock() + timeout
    last, gap, err = None, interval, None
    while clock() < deadline:
        t = clock()
        if last is not None:
            gap = max(gap, t - last)
        last = t
        try:
            if check():
                return clock(), round(gap, 2), None
            err = "not yet"
        except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
            err = f"{type(exc).__name__}: {exc}"[:300]
        if not alive():
            return None, round(gap, 2), f"the process exited ({err})"
        sleep(interval)
    return None, round(gap, 2), err


class K8sDrill:
    platform = PLATFORM

    def __init__(self, backend, drills, *, state_dir=None, clock=time.time, sleep=time.sleep):
        self.backend, self.drills = backend, drills
        self.clock, self.sleep = clock, sleep
        self.native = bool(getattr(backend, "local", False))
        self._state_dir = state_dir
        self._probe = threading.local()   # the probe thread's own API client

    # ------------------------------------------------------------------ the cluster
    @property
    def L(self) -> Layout:
        return Layout(state_root(self._state_dir))

    def _state(self) -> dict:
        return load_state(self.L)

    def _admin(self) -> K8sClient:
        """The native cluster's admin: nodes are read as the cluster's owner even when the campaign
        runs as the namespace-scoped user (who may not read them). The runner's thread only."""
        if getattr(self, "_admin_client", None) is None:
            self._admin_client = K8sClient(str(self.L.admin_kubeconfig), timeout_s=5)
        return self._admin_client

    def owned(self) -> tuple[bool, str]:
        c = self.backend.client
        doc = None
        try:
            doc = yaml.safe_load(Path(c.kubeconfig).read_text())
        except (OSError, yaml.YAMLError):
            pass
        return decide_owned(native=self.native, native_state=self._state() if self.native else None,
                            kubeconfig=c.kubeconfig, native_kubeconfig=str(self.L.kubeconfig), kube_doc=doc,
                            context=c.context, confirm=self.drills.confirm_cluster)

    def prepare(self, kind: str) -> dict:
        if kind != "upgrade" or not self.native:
            return {}
        from ..clusters.k8s import upgrade
        t0 = time.monotonic()
        out = upgrade.prepare()
        out["seconds"] = round(time.monotonic() - t0, 1)
        return out

    def plan(self, kind: str) -> list[str]:
        if not self.native:
            return commands.plan(self.drills.commands, PLATFORM, kind)
        return plan_for(list(self._state().get("nodes", [])))

    def versions(self) -> dict[str, str]:
        if not self.native:
            return {}
        from ..clusters.k8s import upgrade
        running = upgrade.running_versions(self.L)
        out = {c: running.get(state_name(c), "") for c in plan_for(list(self._state().get("nodes", [])))}
        return out

    # ------------------------------------------------------------------ one step
    def step(self, kind: str, component: str) -> Step:
        if not self.native:   # a user's cluster: their commands, back when their health check answers
            return commands.step(self.drills.commands, PLATFORM, kind, component, status=self.try_status,
                                 timeout_s=self.drills.component_timeout_s, poll_s=self.drills.probe_s,
                                 clock=self.clock, sleep=self.sleep)
        st = Step(component=component, group=group_of(component), started=self.clock())
        from ..clusters.k8s import upgrade
        L, name = self.L, state_name(component)
        try:
            if kind == "upgrade":
                new_argv = upgrade.upgraded_argv(L, name)
                if component == "kueue" or component == "jobset":
                    # the newer CRDs before the newer controller (it may watch a newer API version)
                    upgrade.apply_crds(L, {**upgrade.addon_versions(L), component: upgrade.version_of(new_argv[0])})
                if name.startswith("kubelet-"):
                    st.extra["kubelet_config_changed"] = upgrade.allow_cgroup_v1(L, name.split("-", 1)[1])
                res = upgrade.restart(L, name, new_argv)
            else:
                res = upgrade.restart(L, name)
        except Exception as exc:  # noqa: BLE001 - a step never raises: the drill records what failed
            st.ok, st.error = False, f"{type(exc).__name__}: {exc}"[:500]
            return st
        st.version_before, st.version_after = res.pop("version_before"), res.pop("version_after")
        st.how = f"stop pid {res['pid_before']} (SIGTERM, SIGKILL after {upgrade.STOP_GRACE_S}s); start {res['argv0']}"
        st.extra.update(res)
        check, st.health = self._health(component, st.started, st.version_after)
        entry = self._state()["components"][name]
        from ..clusters.k8s import procs
        back, gap, err = poll(check, self.drills.component_timeout_s, clock=self.clock, sleep=self.sleep,
                              alive=lambda: procs.alive(entry))
        st.back, st.resolution_s = back, gap
        if back is None:
            st.ok, st.error = False, f"not healthy within {self.drills.component_timeout_s:.0f}s: {err}"
            st.extra["log_tail"] = procs.log_tail(entry["log"], 8)
            return st
        if kind == "upgrade":
            if component in CONTROLLERS:
                try:   # the newer webhook configurations once the newer controller serves them
                    upgrade.apply_webhooks(L, upgrade.addon_versions(L))
                    wh, _ = self._health(component, st.started, st.version_after)
                    st.back = poll(wh, self.drills.component_timeout_s, clock=self.clock, sleep=self.sleep)[0]
                except Exception as exc:  # noqa: BLE001
                    st.ok, st.error = False, f"webhooks: {type(exc).__name__}: {exc}"[:500]
            upgrade.mark_upgraded(L, name, st.version_after)
        return st

    def _health(self, component: str, started: float, version: str):
        """(the check, what it means) for one component."""
        from ..clusters.k8s import pki, procs, readiness
        L = self.L
        if component == "kube-apiserver":
            certs = pki.ensure_cluster_certs(L, len(self._state().get("nodes", [])))
            url = f"https://127.0.0.1:{APISERVER_PORT}/readyz"
            return (lambda: procs.https_get(url, certs["admin"], certs["ca"].cert)[0] == 200), f"GET {url} 200"
        if component in ("kube-controller-manager", "kube-scheduler"):
            port = KCM_PORT if component == "kube-controller-manager" else SCHEDULER_PORT
            url = f"https://127.0.0.1:{port}/healthz"
            return (lambda: procs.https_get(url)[0] == 200), f"GET {url} 200"
        if component in CONTROLLERS:
            port = (KUEUE_PORTS if component == "kueue" else JOBSET_PORTS)["health"]
            url = f"http://127.0.0.1:{port}/readyz"
            hook = readiness.kueue_webhook_answers if component == "kueue" else readiness.jobset_webhook_answers
            return (lambda: procs.http_get(url)[0] == 200 and hook(L)), \
                f"GET {url} 200 and its webhook answers a server-side dry-run"
        node = component.split("@", 1)[1]
        i = self._state()["nodes"].index(node) + 1
        url = f"http://127.0.0.1:{kubelet_healthz_port(i)}/healthz"

        def kubelet_back() -> bool:
            if procs.http_get(url)[0] != 200:
                return False
            a = self._admin()
            n = a.to_dict(a.core().read_node(node, _request_timeout=5))
            ready = [c for c in n["status"].get("conditions", []) if c["type"] == "Ready"]
            beat = parse_time(ready[0].get("lastHeartbeatTime")) if ready else None
            return bool(ready and ready[0]["status"] == "True" and beat is not None and beat >= int(started) + 1
                        and (not version or n["status"]["nodeInfo"]["kubeletVersion"] == version))
        return kubelet_back, (f"GET {url} 200, node {node} Ready with a heartbeat after the restart"
                              + (f" from kubelet {version}" if version else ""))

    # ------------------------------------------------------------------ probes (the probe thread)
    def _probe_client(self):
        c = getattr(self._probe, "client", None)
        if c is None:
            from kubernetes import client, config
            b = self.backend.client
            conf = client.Configuration()
            config.load_kube_config(config_file=b.kubeconfig, context=b.context, client_configuration=conf)
            conf.retries = 0     # a refused probe is the answer: no retry hiding it, no retry warnings
            c = self._probe.client = K8sClient(b.kubeconfig, b.context, timeout_s=5,
                                               api_client=client.ApiClient(conf))
        return c

    def _probe_call(self, fn) -> str | None:
        c = self._probe_client()
        try:
            fn(c)
            return None
        except BackendError as exc:
            return str(exc)
        except Exception as exc:  # noqa: BLE001 - the refusal, whatever it is, is the answer
            return f"{type(exc).__name__}: {exc}"[:300]

    def try_submit(self) -> str | None:
        ns, queue = self.backend.cfg.namespace, self.backend.cfg.local_queue
        body = probe_jobset(ns, queue)
        return self._probe_call(lambda c: c.call("CREATE JobSet (dry run)", c.custom().create_namespaced_custom_object,
                                                 *JOBSETS[:2], ns, JOBSETS.plural, body, dry_run="All"))

    def try_status(self) -> str | None:
        ns = self.backend.cfg.namespace
        return self._probe_call(lambda c: c.list("LIST JobSets", JOBSETS, ns))

    # ------------------------------------------------------------------ evidence
    def _objects(self, h: Handle) -> dict:
        from kubernetes import client as kc
        c, ns, name = self.backend.client, h.data["namespace"], h.data["name"]
        owner = ownership.check_owner(h.data.get("owner") or "")
        # the run's own Jobs and pods: its JobSet's name and the campaign's owner label
        sel = f"{rj.JOBSET_NAME_LABEL}={name}" + (f",{rj.OWNER_LABEL}={owner}" if owner else "")
        js = c.get("GET JobSet", JOBSETS, name, ns, missing_ok=True)
        if js is not None and h.data.get("uid") and js.get("metadata", {}).get("uid") != h.data["uid"]:
            js = None   # the name is another JobSet's now
        jobs = c.to_dict(c.call("LIST Jobs", kc.BatchV1Api(c.api).list_namespaced_job,
                                ns, label_selector=sel))["items"]
        pods = c.to_dict(c.call("LIST Pods", c.core().list_namespaced_pod, ns, label_selector=sel))["items"]
        uid = (js or {}).get("metadata", {}).get("uid") or h.data.get("uid")
        wls = [w for w in c.list("LIST Workloads", WORKLOADS, ns) if owned_by(w, uid)]
        return {"jobset": js, "jobs": jobs, "pods": pods, "workloads": wls}

    def snapshot(self, handles: list[Handle]) -> dict:
        out = {}
        for h in handles:
            try:
                o = self._objects(h)
            except BackendError as exc:
                out[h.run_id] = {"error": str(exc)}
                continue
            js = o["jobset"]
            out[h.run_id] = {
                "jobset": None if js is None else {**object_facts(js), "restarts": (js.get("status") or {}).get(
                    "restarts", 0), "terminalState": (js.get("status") or {}).get("terminalState")},
                "jobs": [{**object_facts(j), "active": j.get("status", {}).get("active", 0),
                          "succeeded": j.get("status", {}).get("succeeded", 0),
                          "failed": j.get("status", {}).get("failed", 0)} for j in o["jobs"]],
                "pods": [pod_facts(p) for p in o["pods"]],
                "workloads": [{**object_facts(w), "clusterQueue": ((w.get("status") or {}).get("admission") or {})
                               .get("clusterQueue")} for w in o["workloads"]]}
        if self.native:
            out["versions"] = self.versions()
        return out

    def leftovers(self, handles: list[Handle]) -> list[dict]:
        out: list[dict] = []
        for h in handles:
            try:
                o = self._objects(h)
            except BackendError as exc:
                out.append({"kind": "error", "run_id": h.run_id, "why": str(exc)})
                continue
            js = o["jobset"]
            out += [{**p, "run_id": h.run_id} for p in stale_pods(o["pods"], js)]
            out += [{**w, "run_id": h.run_id} for w in stale_workloads(o["workloads"], js)]
        out += self._cluster_leftovers()
        return out

    def _cluster_leftovers(self) -> list[dict]:
        """Nodes not Ready and (native) components not healthy, once, without waiting."""
        out = []
        c = self._admin() if self.native else self.backend.client
        try:
            for n in c.to_dict(c.call("LIST nodes", c.core().list_node))["items"]:
                if not is_true(n, "Ready"):
                    out.append({"kind": "Node", "name": n["metadata"]["name"], "why": "not Ready"})
        except BackendError as exc:   # a namespace-scoped user cannot list nodes: say so, do not fail
            out.append({"kind": "Node", "why": f"could not list nodes: {exc}"[:200], "unknown": True})
        if self.native:
            for comp in plan_for(list(self._state().get("nodes", []))):
                check, what = self._health(comp, 0, "")
                try:
                    ok = bool(check())
                except Exception:  # noqa: BLE001
                    ok = False
                if not ok:
                    out.append({"kind": "component", "name": comp, "why": f"not healthy: {what}"})
        return out

    def restore(self, kind: str) -> dict:
        if not self.native:
            return {}
        from ..clusters import native_k8s
        return native_k8s.restore_pinned(self._state_dir, nodes=len(self._state().get("nodes", [])) or None)
