"""Serving on Kubernetes (PlatformServe): a Deployment and a ClusterIP Service for a training run's
checkpoint, through the harness's K8sClient; the objects are render/serving.py's.

What Kubernetes does by itself here, and what the evidence shows it did: the Service's ClusterIP is
the one address a client needs (kube-proxy spreads connections over the ready pods, which the
EndpointSlice controller lists from the readiness probes); a crashed server is restarted by the
kubelet (restartPolicy Always); a lost node's replica is replaced by the ReplicaSet once the node
controller marks the pod for eviction; scaling is one PATCH of the Deployment's scale.

Faults:
- kill_server: `kill -9` of the python server inside one replica's container (pods/exec of a fixed
  script: the pid is the process whose command line starts with the launch line's), so the
  container's main process (sh) exits with 137 and the kubelet restarts the container.
- lose_node: the backend's node-loss machinery (backends/k8s/faults.py) on the node of one ready
  replica, and only on a node where a running pod of this Deployment is: on the native cluster a
  power loss (clusters/native_power.py, noted in the backend's ledger first so a crashed campaign's
  node comes back at the next preflight); elsewhere a cordon plus deletion of this Deployment's pods
  there, the cordon (the harness's own taint, never spec.unschedulable) named with its mark on the
  training run's handle and journalled first, so `poc cleanup` or --resume lifts it after a crash.
  restore() undoes it with faults.restore (power on, out-of-service taint off, the harness's cordon
  taint off; an operator's cordon stays).

Every object deploy() makes carries the campaign's poc/owner label; the training run's handle records
them with their uids, and every delete (a leftover of the run, teardown, a crashed campaign's cancel)
takes only an object that carries that label and, where recorded, that uid (backends/k8s/ownership.py).
A name taken by another user's object refuses the deploy, nothing touched.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..backends.base import Handle
from ..backends.k8s import faults, ownership
from ..backends.k8s.api import K8sClient, parse_time
from ..backends.k8s.evidence_raw import slim
from ..backends.k8s.state import get, items
from ..config import Kubernetes
from ..errors import BackendError, PocError
from ..render import jobset as rj
from ..render import serving as rs
from ..spec import JobSpec


class K8sServe:
    platform = "k8s"

    def __init__(self, client: K8sClient, cfg: Kubernetes, *, image: str, checkpoint_root: str,
                 checkpoint_pvc: str | None = None, local: bool = False, power=None, ledger: str | None = None,
                 port: int = rs.PORT, kueue_pods: bool = False, clock=time.time, sleep=time.sleep):
        """power, ledger: the native cluster's power module and the backend's ledger of powered-off
        nodes (one ledger, so the backend's preflight brings back a node a crashed serving run lost)."""
        self.client, self.cfg, self.image = client, cfg, image
        self.checkpoint_root, self.checkpoint_pvc = checkpoint_root, checkpoint_pvc
        self.local, self.power, self.ledger, self.port, self.kueue_pods = local, power, ledger, port, kueue_pods
        self.clock, self.sleep = clock, sleep
        self.serving: rs.K8sServing | None = None
        self.fault_handle: Handle | None = None
        self.train: Handle | None = None
        self.how: list[str] = []
        self.owner = self.campaign = ""     # the training run's campaign: its owner id labels every object
        self.left: list[str] = []           # objects of the serving's names that were not ours: left

    # ------------------------------------------------------------------ names
    @property
    def _s(self) -> rs.K8sServing:
        if self.serving is None:
            raise BackendError("nothing is deployed yet", tip="deploy() first")
        return self.serving

    def _selector(self) -> str:
        """The Deployment's pods, and only the campaign's own (poc/owner): a fault or a force-delete never
        reaches another user's replica of a run of the same id."""
        return ownership.selector(self.owner, self.campaign, **self._s.selector)

    def _names(self, uids: dict | None = None) -> dict:
        s = self._s
        return {"namespace": s.namespace, "deployment": s.name, "service": s.name,
                "configmap": s.of("ConfigMap")["metadata"]["name"], "uids": dict(uids or {})}

    def _apps(self):
        from kubernetes import client as k
        return k.AppsV1Api(self.client.api)

    def _discovery(self):
        from kubernetes import client as k
        return k.DiscoveryV1Api(self.client.api)

    # ------------------------------------------------------------------ deploy
    def deploy(self, train: Handle, spec: JobSpec) -> dict:
        s = rs.render_serving(spec, self.cfg, self.image, self.checkpoint_root, self.checkpoint_pvc,
                              port=self.port, kueue_pods=self.kueue_pods)
        self.serving, self.train = s, train
        self.owner, self.campaign = ownership.check_owner(spec.owner), spec.campaign
        if self.local and not self.checkpoint_pvc:
            ckpts = sorted(Path(s.checkpoint_path, "ckpt").glob("ckpt-*.pt"))
            if not ckpts:
                raise BackendError(f"no checkpoint of run {spec.run_id} in {s.checkpoint_path}/ckpt",
                                   tip="the serving run's training must write one (checkpoint_every <= steps) "
                                       "and its files must still be there (serve before cleanup)")
        core, apps, ns, c = self.client.core(), self._apps(), s.namespace, self.client
        # a name taken by someone else's object (another user's run of the same id) refuses the deploy,
        # nothing touched; a leftover of this campaign's run (a resumed campaign) goes first
        ownership.refuse_serving_names_not_ours(c, self._names(), owner=self.owner, campaign=self.campaign,
                                                run_id=spec.run_id)
        self._delete_objects(wait_s=60)
        cm, dep, svc = s.of("ConfigMap"), s.of("Deployment"), s.of("Service")
        # on the training run's handle (journalled again by the session): a crashed campaign's cancel on
        # --resume deletes these too, each only by its uid and while it carries the campaign's owner label
        train.data["serving"] = sv = self._names()
        uid = ownership.uid_of
        sv["uids"]["ConfigMap"] = uid(c.to_dict(c.call("CREATE ConfigMap", core.create_namespaced_config_map, ns, cm)))
        t0 = self.clock()
        sv["uids"]["Deployment"] = uid(c.to_dict(c.call("CREATE Deployment", apps.create_namespaced_deployment, ns,
                                                        dep)))
        t1 = self.clock()
        sv["uids"]["Service"] = uid(c.to_dict(c.call("CREATE Service", core.create_namespaced_service, ns, svc)))
        self.how = [f"CREATE ConfigMap {ns}/{cm['metadata']['name']} (serve_model.py, ddp_train.py)",
                    f"CREATE Deployment {ns}/{s.name} (replicas 1, readiness /readyz, liveness /healthz)",
                    f"CREATE Service {ns}/{s.name} (ClusterIP, port {s.port})"]
        return {"submitted": t0, "submitted_after": t1, "how": list(self.how),
                "objects": [f"ConfigMap/{cm['metadata']['name']}", f"Deployment/{s.name}", f"Service/{s.name}"],
                "namespace": ns, "checkpoint": s.checkpoint_path, "ckpt_dir": s.ckpt_dir,
                "train_run": train.run_id, "scripts_sha256": s.scripts_sha256,
                "kueue": ("pods labelled for the LocalQueue (Kueue pod integration)" if self.kueue_pods else
                          "not queued: the harness's Kueue manages Jobs and JobSets only")}

    def url(self, timeout_s: float) -> str:
        s, core = self._s, self.client.core()
        deadline = self.clock() + timeout_s
        while True:
            svc = self.client.call("GET Service", core.read_namespaced_service, s.name, s.namespace, missing_ok=True)
            ip = get(self.client.to_dict(svc), "spec", "clusterIP") if svc is not None else None
            if ip and ip != "None":
                return f"http://{ip}:{s.port}"
            if self.clock() >= deadline:
                raise BackendError(f"Service {s.namespace}/{s.name} has no ClusterIP after {timeout_s:g} s",
                                   tip="is the API server allocating Service IPs (service-cluster-ip-range)?")
            self.sleep(0.5)

    def networks(self) -> list[str]:
        if self.local:
            from ..clusters.k8s.layout import CLUSTER_CIDR, SERVICE_CIDR
            return [SERVICE_CIDR, CLUSTER_CIDR]
        # a user's cluster: only this Service's address and its pods' (their ranges are the site's)
        out = [self.url(10).split("//")[1].rsplit(":", 1)[0] + "/32"]
        out += sorted({f"{r['endpoint'].rsplit(':', 1)[0]}/32" for r in self.replicas() if r["endpoint"]})
        return out

    # ------------------------------------------------------------------ what runs
    def _pods(self) -> list[dict]:
        s, core = self._s, self.client.core()
        pods = self.client.call("LIST pods", core.list_namespaced_pod, s.namespace, label_selector=self._selector())
        return [self.client.to_dict(p) for p in pods.items]

    def _slices(self) -> list[dict]:
        s = self._s
        out = self.client.call("LIST EndpointSlices", self._discovery().list_namespaced_endpoint_slice, s.namespace,
                               label_selector=f"kubernetes.io/service-name={s.name}")
        return [self.client.to_dict(x) for x in out.items]

    def replicas(self) -> list[dict]:
        return replicas_of(self._pods(), self._slices(), self._s.port)

    def scale(self, n: int) -> dict:
        s = self._s
        t = self.clock()
        self.client.call("PATCH Deployment scale", self._apps().patch_namespaced_deployment_scale, s.name,
                         s.namespace, {"spec": {"replicas": int(n)}})
        how = f"PATCH Deployment {s.namespace}/{s.name} scale: replicas {n}"
        self.how.append(how)
        return {"asked": t, "asked_after": self.clock(), "how": [how]}

    # ------------------------------------------------------------------ faults
    def _target(self, exclude_nodes: tuple[str, ...] = ()) -> dict:
        """A Running, ready replica (the oldest first: the one serving longest)."""
        reps = [p for p in self._pods() if pod_ready(p) and not get(p, "metadata", "deletionTimestamp")
                and get(p, "spec", "nodeName") not in exclude_nodes]
        if not reps:
            raise BackendError(f"no ready replica of {self._s.name} to aim the fault at",
                               tip="wait until the Deployment has a ready pod")
        return min(reps, key=lambda p: (parse_time(get(p, "metadata", "creationTimestamp")) or 0,
                                        get(p, "metadata", "name")))

    def kill_server(self) -> dict:
        from kubernetes.stream import stream
        pod = self._target()
        name, node, ns = get(pod, "metadata", "name"), get(pod, "spec", "nodeName"), self._s.namespace
        before = restart_count(pod)
        self.client.count("EXEC pod")
        t = self.clock()
        api = self.client.own_core()     # stream() patches the client it is given: one of its own
        ws = None
        try:
            # not preloaded: the client's preloading never closes its websocket (an unclosed socket)
            ws = stream(api.connect_get_namespaced_pod_exec, name, ns, container=rs.CONTAINER,
                        command=["sh", "-c", rs.KILL_SERVER], stderr=True, stdout=True, stdin=False, tty=False,
                        _preload_content=False)
            ws.run_forever(timeout=30)
            out = ws.read_all()
        finally:
            if ws is not None:
                ws.close()
            api.api_client.close()
        pid = parse_killed(out)
        if pid is None:
            raise BackendError(f"kill_server in pod {name} did not kill the server: {str(out).strip()[:300]}",
                               tip="is the pod's container running serve_model.py (render/serving.py LAUNCH)?")
        return {"t": t, "replica": name, "node": node, "pid_in_container": pid, "restarts_before": before,
                "how": "pods/exec into the serving container: SIGKILL (kill -9) of the python server, a child "
                       "of the container's sh, so the container exits 137 and the kubelet restarts it",
                "output": str(out).strip()}

    def lose_node(self, journal: Callable[[], None]) -> dict:
        pod = self._target()
        node, name = get(pod, "spec", "nodeName"), get(pod, "metadata", "name")
        self._held(pod, node)
        h = self._handle()
        if self.power is not None and h.data.get("ledger") and node in self.power.native_nodes():
            link = self.power.bridge_of(node)
            h.data["lost_nodes"].append(node)
            h.data["downed_links"].append(link)
            self.power.Ledger(Path(h.data["ledger"])).add(h.run_id, node, link)   # before the power-off
            t = self.clock()
            try:
                detail = self.power.power_off(node, link)
            except PocError as exc:
                raise BackendError(exc.message, tip=exc.tip) from None
            return {"t": t, "node": node, "replica": name, **detail}
        core, ns = self.client.core(), self._s.namespace
        mark = faults.cordon_mark(h)
        h.data["cordoned"].append(node)
        # the training run's handle names the cordon and its mark, journalled before the cordon: whatever
        # cancels that handle after a crash (`poc cleanup`, --resume) uncordons it while the mark is ours
        cordoned = self.train.data.setdefault("cordoned", [])
        if node not in cordoned:
            cordoned.append(node)
        self.train.data.setdefault("cordon_marks", {})[node] = mark
        journal()
        t = self.clock()
        faults.cordon(self.client, node, mark)
        gone = [p for p in self._pods() if get(p, "spec", "nodeName") == node]
        for p in gone:   # the campaign's own replicas there (the selector), each by its uid
            self.client.call("DELETE pod", core.delete_namespaced_pod, get(p, "metadata", "name"), ns,
                             body=ownership.delete_options(get(p, "metadata", "uid"), grace_s=0))
        return {"t": t, "node": node, "replica": name, "deleted": [get(p, "metadata", "name") for p in gone],
                "how": f"cordon {node} (taint {faults.CORDON_TAINT['key']}:NoSchedule) + delete this Deployment's "
                       "pods there (no power control on this cluster)"}

    def _held(self, pod: dict, node: str | None) -> None:
        """Only a node where a running pod of this very Deployment is, and not cordoned by someone else."""
        labels = get(pod, "metadata", "labels", default={}) or {}
        if any(labels.get(k) != v for k, v in self._s.selector.items()) or get(pod, "status", "phase") != "Running" \
                or not node:
            raise BackendError(f"lose_node refused: pod {get(pod, 'metadata', 'name')} is not a running replica "
                               f"of {self._s.name}", tip="the fault touches only nodes the run holds")
        n = self.client.to_dict(self.client.call("GET node", self.client.core().read_node, node))
        taken = faults.taken_by_other(n, faults.cordon_mark(self._handle()))
        if taken:
            raise BackendError(f"lose_node refused: node {node} is already {taken}",
                               tip="the fault takes only a node nobody else has cordoned; drop the node_loss fault")

    def _handle(self) -> Handle:
        """What faults.restore reads: the nodes this serving took down (kept for restore and teardown)."""
        if self.fault_handle is None:
            s = self._s
            # the campaign's owner id and the Deployment's uid make the cordon's mark this serving's alone
            uid = (((self.train.data.get("serving") or {}).get("uids") or {}).get("Deployment")
                   if self.train is not None else None)
            data = {"namespace": s.namespace, "name": s.name, "owner": self.owner, "campaign": self.campaign,
                    "uid": uid, "lost_nodes": [], "downed_links": [], "cordoned": []}
            if self.power is not None and self.ledger:
                data["ledger"] = self.ledger
            self.fault_handle = Handle("k8s", s.name, [f"{s.namespace}/{s.name}"], self.clock(), data=data)
        return self.fault_handle

    def restore(self) -> dict:
        h = self.fault_handle
        if h is None:
            return {"restored": []}
        nodes = [*h.data.get("lost_nodes", []), *h.data.get("cordoned", [])]
        t = self.clock()
        faults.restore(self.client, h, power=self.power)
        if self.train is not None:   # undone: the training run's handle stops naming those cordons
            marks = self.train.data.get("cordon_marks") or {}
            for node in nodes:
                if node in marks:
                    marks.pop(node)
                    if node in (self.train.data.get("cordoned") or []):
                        self.train.data["cordoned"].remove(node)
        return {"restored": nodes, "t": t, "t_after": self.clock(),
                "how": "power on (bridge up, kubelet started), out-of-service taint off, uncordon; "
                       "waited for the node Ready"}

    # ------------------------------------------------------------------ records
    def evidence(self) -> dict:
        s, c, core, ns = self._s, self.client, self.client.core(), self._s.namespace
        dep = c.call("GET Deployment", self._apps().read_namespaced_deployment, s.name, ns, missing_ok=True)
        rsets = c.call("LIST ReplicaSets", self._apps().list_namespaced_replica_set, ns,
                       label_selector=self._selector())
        svc = c.call("GET Service", core.read_namespaced_service, s.name, ns, missing_ok=True)
        pods, slices = self._pods(), self._slices()
        names = {s.name, *(get(c.to_dict(r), "metadata", "name") for r in rsets.items),
                 *(get(p, "metadata", "name") for p in pods), *(get(x, "metadata", "name") for x in slices)}
        evs = [c.to_dict(e) for e in c.call("LIST events", core.list_namespaced_event, ns).items]
        evs = [e for e in evs if get(e, "involvedObject", "name") in names]
        return slim({"deployment": c.to_dict(dep) if dep is not None else None,
                     "replicasets": [c.to_dict(r) for r in rsets.items], "pods": pods,
                     "service": c.to_dict(svc) if svc is not None else None, "endpointslices": slices,
                     "events": sorted(evs, key=lambda e: str(get(e, "lastTimestamp") or get(e, "eventTime") or "")),
                     "replicas": replicas_of(pods, slices, s.port), "how": list(self.how)})

    def beyond(self) -> dict:
        return beyond_of(self._s)

    def teardown(self) -> dict:
        removed, errors = [], []
        if self.fault_handle is not None and (self.fault_handle.data.get("lost_nodes")
                                              or self.fault_handle.data.get("cordoned")):
            try:   # a lost node must come back even when the session never reached restore()
                removed += [f"node {n} restored" for n in self.restore()["restored"]]
            except (PocError, OSError) as exc:
                errors.append(f"restore: {getattr(exc, 'message', exc)}")
        if self.serving is None:
            return {"removed": removed, "errors": errors}
        try:
            removed += self._delete_objects(wait_s=60)
            errors += self.left
        except (PocError, OSError) as exc:
            errors.append(getattr(exc, "message", str(exc)))
        left = []
        try:
            left = [get(p, "metadata", "name") for p in self._pods()]
        except (PocError, OSError) as exc:
            errors.append(getattr(exc, "message", str(exc)))
        return {"removed": removed, "errors": errors, "pods_left": left}

    def _delete_objects(self, wait_s: float) -> list[str]:
        """Delete Deployment, Service, ConfigMap (those that exist and are this campaign's run's: its owner
        label, and the uids deploy() recorded) and wait for the run's pods to go."""
        c, core, ns = self.client, self.client.core(), self._s.namespace
        recorded = ((self.train.data.get("serving") or {}).get("uids") if self.train is not None else None) or {}
        done, self.left = ownership.delete_serving_objects(
            c, self._names(recorded), owner=self.owner, campaign=self.campaign,
            run_id=self._s.selector[rs.RUN_LABEL], grace_s=5)
        deadline = self.clock() + wait_s
        while self.clock() < deadline:
            pods = self._pods()
            if not pods:
                break
            stuck = [p for p in pods if get(p, "metadata", "deletionTimestamp")
                     and get(p, "spec", "nodeName") in (self.fault_handle.data.get("lost_nodes", [])
                                                        if self.fault_handle else [])]
            for p in stuck:   # on a powered-off node no kubelet confirms: force, as the pod GC would
                c.call("DELETE pod (force)", core.delete_namespaced_pod, get(p, "metadata", "name"), ns,
                       missing_ok=True, conflict_ok=True,
                       body=ownership.delete_options(get(p, "metadata", "uid"), grace_s=0))
            self.sleep(1)
        return done


# ---------------------------------------------------------------------- pure helpers (unit-tested)

def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in items(pod, "status", "conditions"))


def restart_count(pod: dict) -> int:
    return sum(int(cs.get("restartCount") or 0) for cs in items(pod, "status", "containerStatuses"))


def parse_killed(out) -> int | None:
    """The pid from KILL_SERVER's "<pid> killed" line; None when it killed nothing."""
    for line in str(out or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == "killed" and parts[0].isdigit():
            return int(parts[0])
    return None


def replicas_of(pods: list[dict], slices: list[dict], port: int = rs.PORT) -> list[dict]:
    """One dict per pod: what the pod says (Ready since when) and whether the Service sends it
    traffic (its EndpointSlice entry is ready)."""
    in_service = {}
    for sl in slices:
        for ep in items(sl, "endpoints"):
            for addr in ep.get("addresses") or []:
                in_service[addr] = bool((ep.get("conditions") or {}).get("ready"))
    out = []
    for p in sorted(pods, key=lambda p: get(p, "metadata", "name") or ""):
        ip = get(p, "status", "podIP")
        ready = pod_ready(p) and not get(p, "metadata", "deletionTimestamp")
        since = next((parse_time(c.get("lastTransitionTime")) for c in items(p, "status", "conditions")
                      if c.get("type") == "Ready" and c.get("status") == "True"), None)
        out.append({"name": get(p, "metadata", "name"), "node": get(p, "spec", "nodeName"),
                    "endpoint": f"{ip}:{port}" if ip else None, "ready": ready, "since": since if ready else None,
                    "in_service": in_service.get(ip, False) if ip else False,
                    "restarts": restart_count(p), "phase": get(p, "status", "phase"),
                    "terminating": bool(get(p, "metadata", "deletionTimestamp"))})
    return out


def beyond_of(s: rs.K8sServing) -> dict:
    dep, svc = s.of("Deployment"), s.of("Service")
    return {
        "discovery": f"the Service's ClusterIP (and DNS name {s.name}.{s.namespace}.svc): one address for every "
                     "replica; the EndpointSlice controller lists the pods that pass /readyz",
        "balancing": "kube-proxy (iptables mode) spreads connections over the ready endpoints; nothing the user runs",
        "restarts": "a crashed server: the kubelet restarts the container (restartPolicy Always; liveness /healthz "
                    "for a hung one); a lost node: the ReplicaSet creates a replacement once the node controller "
                    "evicts the pod (node-monitor grace period + the cluster's default not-ready/unreachable "
                    "toleration)",
        "scaling": "one PATCH of the Deployment's replicas; the new pod joins the Service when ready",
        # what the user writes: the two objects (the ConfigMap only ships the same scripts as on Slurm)
        "written": {"deployment.yaml": len(rj.to_yaml([dep]).splitlines()),
                    "service.yaml": len(rj.to_yaml([svc]).splitlines())},
        "harness_parts": [],
    }
