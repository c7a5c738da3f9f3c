"""Kubernetes: a suspended JobSet labelled for a Kueue LocalQueue, observed through watches.

Where the numbers come from (Kubernetes' own clocks; the API's timestamps have 1 s resolution):
* ``submitted``: the JobSet's creationTimestamp.
* ``quota_reserved`` / ``admitted``: the Kueue Workload's QuotaReserved / Admitted conditions
  (lastTransitionTime); ``admitted`` feeds ``queue_admission_s``.
* ``allocated``: the last pod's PodScheduled condition of the first attempt (all pods placed);
  feeds ``queue_s``. Each JobSet restart is one entry of ``attempts`` with its own times.
* ``ended``: the JobSet's Completed/Failed condition.
* Workload events (startup, all-reduce, steps, recovery) are read from the pods' logs, each
  pod's log incrementally (``sinceTime`` + timestamps, deduplicated), and on the local cluster
  also from the run's checkpoint volume, where the workload writes the same lines.

JobSets, Workloads and Pods are watched (one list + watch per kind and namespace, in background
threads); a poll (observe) reads those caches, and lists each kind once instead when a cache is
out of sync. Logs are read per running pod and poll. STATE_TABLE is the one mapping into JobState.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import events as evmod
from ..config import Config, Kubernetes
from ..errors import BackendError, SubmitError
from ..paths import state_dir
from ..render import jobset as rj
from ..spec import JobSpec, build
from ..states import JobState
from .base import Backend, Collected, FaultRecord, Handle, Journal, Observation, Rendered, no_journal

# native state (computed in _native_state) -> shared enum
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
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"
OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
KUEUE_CRDS = ("workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
              "resourceflavors.kueue.x-k8s.io")
JOBSET_INSTALL = ("install JobSet: kubectl apply --server-side -f "
                  "https://github.com/kubernetes-sigs/jobset/releases/download/v0.10.1/manifests.yaml "
                  "(or `poc cluster up --k8s` for the local cluster)")
KUEUE_INSTALL = ("install Kueue: kubectl apply --server-side -f "
                 "https://github.com/kubernetes-sigs/kueue/releases/download/v0.14.5/manifests.yaml "
                 "(or `poc cluster up --k8s` for the local cluster)")


def parse_time(s) -> float | None:
    """An API timestamp (datetime or RFC 3339 text) -> epoch seconds."""
    if s is None:
        return None
    if isinstance(s, dt.datetime):
        return s.replace(tzinfo=s.tzinfo or dt.timezone.utc).timestamp()
    return dt.datetime.fromisoformat(str(s).replace("Z", "+00:00")).timestamp()


def _conds(obj: dict) -> dict[str, dict]:
    return {c.get("type"): c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def _true(conds: dict, kind: str) -> bool:
    return conds.get(kind, {}).get("status") == "True"


def _qty(v) -> float:
    """A Kubernetes quantity -> a number (cpu in cores, memory in bytes)."""
    s = str(v)
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3,
             "Ti": 1024**4}
    for u in sorted(units, key=len, reverse=True):
        if s.endswith(u):
            return float(s[: -len(u)]) * units[u]
    return float(s)


class _Watched:
    """One kind in one namespace, kept current by a watch in a background thread: list once (with
    its resourceVersion), then apply ADDED/MODIFIED/DELETED; re-list when the watch ends or fails.
    ``objects()`` is None while the cache is not in sync (the caller lists instead)."""

    def __init__(self, what: str, list_fn, args: tuple, kwargs: dict, timeout: float):
        import threading
        self.what, self.list_fn, self.args, self.kwargs, self.timeout = what, list_fn, args, kwargs, timeout
        self._objs: dict = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self.relists = 0
        self.last_error = ""
        self._thread = threading.Thread(target=self._run, name=f"poc-watch-{what}", daemon=True)
        self._thread.start()

    @staticmethod
    def _key(o) -> str:
        return o["metadata"]["name"] if isinstance(o, dict) else o.metadata.name

    def _run(self) -> None:
        from kubernetes import watch
        while not self._stop.is_set():
            w = None
            try:
                resp = self.list_fn(*self.args, _request_timeout=self.timeout, **self.kwargs)
                if isinstance(resp, dict):
                    items, rv = resp.get("items", []), resp["metadata"].get("resourceVersion")
                else:
                    items, rv = resp.items, resp.metadata.resource_version
                with self._lock:
                    self._objs = {self._key(o): o for o in items}
                self.relists += 1
                self._synced.set()
                w = watch.Watch()
                for ev in w.stream(self.list_fn, *self.args, resource_version=rv, timeout_seconds=55,
                                   _request_timeout=70, allow_watch_bookmarks=False, **self.kwargs):
                    if self._stop.is_set():
                        break
                    kind, obj = ev.get("type"), ev.get("object")
                    if kind == "ERROR" or obj is None:
                        break                                   # e.g. 410 Gone: list again
                    with self._lock:
                        if kind == "DELETED":
                            self._objs.pop(self._key(obj), None)
                        else:
                            self._objs[self._key(obj)] = obj
            except Exception as exc:  # noqa: BLE001 - API server away: out of sync until the next list
                self._synced.clear()
                self.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
                self._stop.wait(1.0)
            finally:
                if w is not None:
                    w.stop()

    def objects(self, wait_s: float = 0.0) -> list | None:
        if not self._synced.wait(wait_s):
            return None
        with self._lock:
            return list(self._objs.values())

    def stop(self) -> None:
        self._stop.set()


@dataclass
class _RunState:
    """What observe() has learnt about one run (kept between polls)."""
    seen: set = field(default_factory=set)
    log_since: dict = field(default_factory=dict)        # pod name -> newest line's time (epoch s, whole seconds)
    log_errors: dict = field(default_factory=dict)       # pod name -> the last log read's error
    logs: dict = field(default_factory=dict)             # pod name -> text read so far (trimmed)
    log_last: dict = field(default_factory=dict)         # pod name -> newest line's timestamp (sortable)
    attempts: dict = field(default_factory=dict)          # restart attempt -> {'allocated', 'pods', ...}
    times: dict = field(default_factory=dict)
    reason: str = ""


class KubernetesBackend(Backend):
    platform = "k8s"
    poll_s = 1.0

    def __init__(self, cfg: Kubernetes, *, kubeconfig: str, context: str | None, image: str,
                 checkpoint_root: str, checkpoint_pvc: str | None = None, local_cluster: bool = False,
                 setup_spec: JobSpec | None = None, queue_jobs: int = 1, api_timeout_s: float = 10.0,
                 query_budget: int = 5, use_watches: bool = True):
        self.cfg = cfg
        self.kubeconfig = kubeconfig
        self.context = context
        self.image = image
        self.checkpoint_root = checkpoint_root
        self.checkpoint_pvc = checkpoint_pvc
        self.local = local_cluster          # the native cluster on this host: setup and node faults allowed
        self.setup_spec = setup_spec
        self.queue_jobs = queue_jobs
        self.timeout = api_timeout_s
        self._api = None
        self._runs: dict[str, _RunState] = {}
        self.query_budget = query_budget
        self._failed_polls = 0
        self.use_watches = use_watches
        self._watches: dict[str, tuple[_Watched, _Watched, _Watched]] = {}
        self.poll_stats = {"from_watches": 0, "from_lists": 0}
        self.setup_report: dict = {}

    # ------------------------------------------------------------------ construction (no cluster contact)
    @classmethod
    def from_config(cls, cfg: Config) -> "KubernetesBackend":
        k = cfg.kubernetes
        local = k.kubeconfig is None
        native_root = state_dir() / "k8s-native"
        kubeconfig = str(Path(os.path.expandvars(k.kubeconfig)).expanduser()) if k.kubeconfig else str(native_root / "kubeconfig")
        image = k.image
        if image is None:
            from ..clusters import images  # the ref is a content hash of the image recipe: no docker call
            image = images.worker_ref()
        ckpt = os.path.expandvars(os.path.expanduser(k.checkpoint_host_path)) if k.checkpoint_host_path \
            else str(native_root / "checkpoints")
        return cls(k, kubeconfig=kubeconfig, context=k.context, image=image, checkpoint_root=ckpt,
                   checkpoint_pvc=k.checkpoint_pvc, local_cluster=local,
                   setup_spec=build(cfg, "k8s", "k8s-setup", None))

    # ------------------------------------------------------------------ clients
    def api(self):
        if self._api is None:
            try:
                from kubernetes import client, config
            except ImportError as exc:
                raise BackendError(f"the kubernetes Python client is missing: {exc}",
                                   tip="pip install -e . in the repository") from None
            if not Path(self.kubeconfig).is_file():
                raise BackendError(f"kubeconfig {self.kubeconfig} does not exist",
                                   tip="run `poc cluster up --k8s` for the local cluster, or set kubernetes.kubeconfig")
            conf = client.Configuration()
            try:
                config.load_kube_config(config_file=self.kubeconfig, context=self.context, client_configuration=conf)
            except Exception as exc:  # noqa: BLE001 - the loader raises many kinds
                raise BackendError(f"cannot load kubeconfig {self.kubeconfig}: {exc}",
                                   tip="check the file and kubernetes.context") from None
            conf.retries = 1
            self._api = client.ApiClient(conf)
        return self._api

    def _k(self):
        from kubernetes import client
        a = self.api()
        return client.CoreV1Api(a), client.CustomObjectsApi(a)

    def _call(self, what: str, fn, *args, missing_ok: bool = False, **kw):
        """One API call with a time-out; errors become BackendError naming the call."""
        from kubernetes.client.rest import ApiException
        try:
            return fn(*args, _request_timeout=self.timeout, **kw)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            body = _api_message(exc)
            raise BackendError(f"{what}: HTTP {exc.status} {exc.reason}: {body}".strip(),
                               tip=_tip_for_status(exc.status)) from None
        except Exception as exc:  # urllib3 connection errors, time-outs
            if type(exc).__module__.startswith(("urllib3", "socket", "ssl")) or isinstance(exc, OSError):
                raise BackendError(f"{what}: the Kubernetes API server at {self.api().configuration.host} "
                                   f"is unreachable ({type(exc).__name__})",
                                   tip="start the cluster (`poc cluster up --k8s`) or fix kubernetes.kubeconfig/context") from None
            raise

    # ------------------------------------------------------------------ render
    def render(self, spec: JobSpec) -> Rendered:
        job = rj.render_jobset(spec, self.cfg, self.image, self.checkpoint_root, self.checkpoint_pvc)
        setup = rj.setup_objects(spec, self.cfg, self.queue_jobs)
        files = {"jobset.yaml": rj.to_yaml([job.jobset]),
                 "workload-configmap.yaml": rj.to_yaml([job.configmap]),
                 "kueue.yaml": rj.to_yaml(o for o in setup if o["apiVersion"].startswith("kueue")
                                          or o["kind"] == "Namespace"),
                 "rbac.yaml": rj.to_yaml(o for o in setup if o["apiVersion"].startswith(("rbac", "v1"))
                                         and o["kind"] != "Namespace")}
        return Rendered("k8s", files, payload=job)

    # ------------------------------------------------------------------ preflight
    def preflight(self) -> dict:
        from kubernetes import client
        a = self.api()
        ver = self._call("GET /version", client.VersionApi(a).get_code)
        ext = client.ApiextensionsV1Api(a)
        if self._call(f"GET CRD {JOBSET_CRD}", ext.read_custom_resource_definition, JOBSET_CRD, missing_ok=True) is None:
            raise BackendError(f"JobSet is not installed on {a.configuration.host}: CRD {JOBSET_CRD} is missing",
                               tip=JOBSET_INSTALL)
        for crd in KUEUE_CRDS:
            if self._call(f"GET CRD {crd}", ext.read_custom_resource_definition, crd, missing_ok=True) is None:
                raise BackendError(f"Kueue is not installed on {a.configuration.host}: CRD {crd} is missing",
                                   tip=KUEUE_INSTALL)
        if self.local:
            self.setup_report = self.setup_local()
        core, co = self._k()
        ns = self.cfg.namespace
        if self._call(f"GET namespace {ns}", core.read_namespace, ns, missing_ok=True) is None:
            raise BackendError(f"namespace {ns!r} does not exist",
                               tip=f"kubectl create namespace {ns}, or set kubernetes.namespace")
        lq = self._call(f"GET LocalQueue {ns}/{self.cfg.local_queue}", co.get_namespaced_custom_object,
                        "kueue.x-k8s.io", "v1beta1", ns, "localqueues", self.cfg.local_queue, missing_ok=True)
        if lq is None:
            raise BackendError(f"Kueue LocalQueue {self.cfg.local_queue!r} does not exist in namespace {ns!r}",
                               tip="create it: `poc render --platform k8s --out DIR` writes kueue.yaml; "
                                   "kubectl apply -f DIR/kueue.yaml (or set kubernetes.local_queue)")
        cq_name = lq["spec"]["clusterQueue"]
        cq = self._call(f"GET ClusterQueue {cq_name}", co.get_cluster_custom_object,
                        "kueue.x-k8s.io", "v1beta1", "clusterqueues", cq_name, missing_ok=True)
        if cq is None:
            raise BackendError(f"LocalQueue {self.cfg.local_queue!r} points at ClusterQueue {cq_name!r}, "
                               "which does not exist", tip="kubectl apply -f the kueue.yaml that `poc render` writes")
        if not self.image:
            raise BackendError("no container image set", tip="set kubernetes.image to an image with python3 and torch")
        nodes = self._call("LIST nodes", core.list_node).items
        info = {
            "scheduler": "kubernetes",
            "scheduler_version": ver.git_version,
            "kubernetes_version": ver.git_version,
            "api_server": a.configuration.host,
            "jobset_version": None, "kueue_version": None,
            "failure_policy": {"maxRestarts": self.cfg.max_restarts, "restartStrategy": "Recreate",
                               "torchrun_max_restarts": 0, "job_backoff_limit": 0},
            "toleration_seconds": self.cfg.toleration_seconds,
            "node_monitor_grace_period": None,
            "local_queue": self.cfg.local_queue, "cluster_queue": cq_name,
            "cluster_queue_quota": _quota_of(cq),
            "image": self.image, "image_pull_policy": self.cfg.image_pull_policy,
            "checkpoint": ({"pvc": self.checkpoint_pvc} if self.checkpoint_pvc else {"host_path": self.checkpoint_root}),
            "nodes": [{"node": n.metadata.name, "cpu": n.status.allocatable.get("cpu"),
                       "memory": n.status.allocatable.get("memory"),
                       "ready": any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])}
                      for n in nodes],
            "time_resolution_s": 1.0,
            "setup": self.setup_report,
        }
        info.update(self._component_versions())
        return info

    def _component_versions(self) -> dict:
        """JobSet/Kueue versions from their controller Deployments' images; the local native cluster
        records what it built, and its node-monitor grace period (not visible through the API)."""
        from kubernetes import client
        out: dict = {}
        apps = client.AppsV1Api(self.api())
        for key, ns, name in (("jobset_version", "jobset-system", "jobset-controller-manager"),
                              ("kueue_version", "kueue-system", "kueue-controller-manager")):
            try:
                d = apps.read_namespaced_deployment(name, ns, _request_timeout=self.timeout)
                img = d.spec.template.spec.containers[0].image
                out[key] = img.rsplit(":", 1)[-1] if ":" in img else img
            except Exception:  # noqa: BLE001 - absent on the native cluster
                pass
        if self.local:
            try:
                from ..clusters import native_k8s
                ci = native_k8s.info()
                out.setdefault("jobset_version", ci.versions.get("jobset"))
                out.setdefault("kueue_version", ci.versions.get("kueue"))
                out["node_monitor_grace_period"] = ci.settings.get("node_monitor_grace_period")
                out["cluster_settings"] = ci.settings
                out["cluster_provider"] = "native"
            except Exception as exc:  # noqa: BLE001
                out["cluster_settings_error"] = str(exc)[:200]
        return {k: v for k, v in out.items() if v is not None}

    def setup_local(self) -> dict:
        """The local cluster only: the namespace, Kueue queues (quota for `queue_jobs` jobs) and the
        worker image on every node, created when absent. Returns what it did."""
        from kubernetes.client.rest import ApiException
        core, co = self._k()
        spec = self.setup_spec
        report: dict = {"created": [], "updated": []}
        for obj in rj.setup_objects(spec, self.cfg, self.queue_jobs):
            kind = obj["kind"]
            if kind not in ("Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue"):
                continue
            self._create_or_update(core, co, obj, report)
        # the default service account appears shortly after the namespace
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                core.read_namespaced_service_account("default", self.cfg.namespace, _request_timeout=self.timeout)
                break
            except ApiException:
                time.sleep(0.5)
        report["restored_nodes"] = self.restore_lost_nodes()
        from ..clusters import images, native_k8s
        if self.cfg.image is None:
            t0 = time.time()
            try:
                ref = images.ensure_worker_image()
                report["image_import"] = native_k8s.import_image(ref)
            except Exception as exc:  # noqa: BLE001 - ClusterError, CommandError
                raise BackendError(f"the worker image could not be put on the local cluster's nodes: "
                                   f"{getattr(exc, 'message', exc)}",
                                   tip="python -m harness.clusters.images worker; then retry") from None
            report["image_s"] = round(time.time() - t0, 1)
        return report

    def _create_or_update(self, core, co, obj: dict, report: dict, patience_s: float = 60) -> None:
        """Create one setup object; on 409 keep a ClusterQueue's quota in step. Kueue's webhooks answer
        500 while Kueue (re)starts: retried for patience_s."""
        from kubernetes.client.rest import ApiException
        kind, name = obj["kind"], obj["metadata"]["name"]
        deadline = time.time() + patience_s
        while True:
            try:
                if kind == "Namespace":
                    core.create_namespace(obj, _request_timeout=self.timeout)
                elif kind == "LocalQueue":
                    co.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", self.cfg.namespace,
                                                       "localqueues", obj, _request_timeout=self.timeout)
                else:
                    co.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", kind.lower() + "s", obj,
                                                    _request_timeout=self.timeout)
                report["created"].append(f"{kind}/{name}")
                return
            except ApiException as exc:
                if exc.status in (500, 503) and time.time() < deadline:
                    time.sleep(2)
                    continue
                if exc.status != 409:
                    body = _api_message(exc)
                    raise BackendError(f"creating {kind} {name}: HTTP {exc.status} {exc.reason}: {body}",
                                       tip="is Kueue running? its webhooks must answer") from None
                if kind == "ClusterQueue":  # keep its quota at what fits queue_jobs of this config's job
                    cur = co.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", name,
                                                       _request_timeout=self.timeout)
                    if cur["spec"].get("resourceGroups") != obj["spec"]["resourceGroups"]:
                        co.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", name,
                                                       {"spec": {"resourceGroups": obj["spec"]["resourceGroups"]}},
                                                       _request_timeout=self.timeout)
                        report["updated"].append(f"ClusterQueue/{name}")
                return

    # ------------------------------------------------------------------ submit
    def submit(self, spec: JobSpec, rendered: Rendered) -> Handle:
        job: rj.K8sJob = rendered.payload
        core, co = self._k()
        ns = job.namespace
        # a resumed campaign re-runs from scratch: remove a leftover of the same run and its checkpoints
        old = self._call("GET JobSet", co.get_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", ns,
                         "jobsets", job.name, missing_ok=True)
        if old is not None:
            self._delete_run(ns, job.name, wait_s=120)
        self._call("DELETE ConfigMap", core.delete_namespaced_config_map, job.configmap["metadata"]["name"], ns,
                   missing_ok=True)
        if not job.checkpoint_pvc and self.local:
            shutil.rmtree(job.checkpoint_path, ignore_errors=True)
        self._call("CREATE ConfigMap", core.create_namespaced_config_map, ns, job.configmap)
        from kubernetes.client.rest import ApiException
        deadline = time.time() + 30
        while True:
            submitted = time.time()
            try:
                created = co.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets",
                                                             job.jobset, _request_timeout=self.timeout)
                break
            except ApiException as exc:
                # JobSet's and Kueue's webhooks answer 500 while their controller (re)starts
                if exc.status in (500, 503) and "webhook" in str(exc.body) and time.time() < deadline:
                    time.sleep(2)
                    continue
                self._call("DELETE ConfigMap", core.delete_namespaced_config_map, job.configmap["metadata"]["name"],
                           ns, missing_ok=True)
                body = _api_message(exc)
                raise SubmitError(f"the API server refused the JobSet: HTTP {exc.status}: {body}",
                                  tip="check the rendered jobset.yaml (`poc render --platform k8s`); "
                                      "a webhook error means the JobSet or Kueue controller is down") from None
            except Exception as exc:  # noqa: BLE001 - connection errors
                if not type(exc).__module__.startswith("urllib3"):
                    raise
                raise SubmitError(f"the JobSet could not be sent: the API server is unreachable ({type(exc).__name__})",
                                  tip="is the cluster up? `poc cluster status --k8s`") from None
        self._runs[spec.run_id] = _RunState()
        return Handle("k8s", spec.run_id, [f"{ns}/{job.name}"], submitted,
                      data={"namespace": ns, "name": job.name, "uid": created["metadata"]["uid"],
                            "configmap": job.configmap["metadata"]["name"], "nodes": spec.nodes,
                            "checkpoint_path": job.checkpoint_path, "checkpoint_pvc": job.checkpoint_pvc,
                            "lost_nodes": [], "cordoned": []})

    # ------------------------------------------------------------------ observe
    def _watched(self, ns: str) -> tuple[_Watched, _Watched, _Watched]:
        if ns not in self._watches:
            core, co = self._k()
            t = self.timeout
            self._watches[ns] = (
                _Watched(f"jobsets/{ns}", co.list_namespaced_custom_object,
                         ("jobset.x-k8s.io", "v1alpha2", ns, "jobsets"), {"label_selector": "poc/platform=k8s"}, t),
                _Watched(f"workloads/{ns}", co.list_namespaced_custom_object,
                         ("kueue.x-k8s.io", "v1beta1", ns, "workloads"), {}, t),
                _Watched(f"pods/{ns}", core.list_namespaced_pod, (ns,), {"label_selector": "poc/platform=k8s"}, t))
        return self._watches[ns]

    def _from_watches(self, handles: list[Handle]) -> tuple[dict, dict, dict] | None:
        """The watch caches, or None when one is out of sync or lacks a handle's JobSet (just created,
        or gone): then this poll lists."""
        js, wl, pods = {}, {}, {}
        for ns in sorted({h.data["namespace"] for h in handles}):
            jw, ww, pw = self._watched(ns)
            got = [x.objects(wait_s=5.0) for x in (jw, ww, pw)]
            if any(g is None for g in got):
                return None
            j_items, w_items, p_items = got
            names = {h.data["name"] for h in handles if h.data["namespace"] == ns}
            for o in j_items:
                js[(ns, o["metadata"]["name"])] = o
            if any((ns, n) not in js for n in names):
                return None
            for o in w_items:
                for ref in o["metadata"].get("ownerReferences") or []:
                    if ref.get("kind") == "JobSet":
                        wl[(ns, ref["name"])] = o
            for p in p_items:
                owner = (p.metadata.labels or {}).get(rj.JOBSET_NAME_LABEL)
                if owner in names:
                    pods.setdefault((ns, owner), []).append(p)
        return js, wl, pods

    def close(self) -> None:
        """Stop the watches and close the API client (the campaign is done with this platform)."""
        for trio in self._watches.values():
            for w in trio:
                w.stop()
        self._watches.clear()
        if self._api is not None:
            self._api.close()
            self._api = None

    def _list(self, handles: list[Handle]) -> tuple[dict, dict, dict]:
        """JobSets, Kueue Workloads and Pods: from the watches when in sync, else one list per kind."""
        if self.use_watches:
            cached = self._from_watches(handles)
            if cached is not None:
                self.poll_stats["from_watches"] += 1
                return cached
        self.poll_stats["from_lists"] += 1
        core, co = self._k()
        js, wl, pods = {}, {}, {}
        for ns in sorted({h.data["namespace"] for h in handles}):
            names = sorted(h.data["name"] for h in handles if h.data["namespace"] == ns)
            sel = f"{rj.JOBSET_NAME_LABEL} in ({','.join(names)})"
            for o in self._call("LIST jobsets", co.list_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2",
                                ns, "jobsets", label_selector="poc/platform=k8s")["items"]:
                js[(ns, o["metadata"]["name"])] = o
            for o in self._call("LIST workloads", co.list_namespaced_custom_object, "kueue.x-k8s.io", "v1beta1",
                                ns, "workloads")["items"]:
                for ref in o["metadata"].get("ownerReferences") or []:
                    if ref.get("kind") == "JobSet":
                        wl[(ns, ref["name"])] = o
            for p in self._call("LIST pods", core.list_namespaced_pod, ns, label_selector=sel).items:
                pods.setdefault((ns, p.metadata.labels.get(rj.JOBSET_NAME_LABEL)), []).append(p)
        return js, wl, pods

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        try:
            js, wl, pods = self._list(handles)
            self._failed_polls = 0
        except BackendError as exc:   # a restarting API server: a few failed polls in a row are tolerated
            self._failed_polls += 1
            if self._failed_polls > self.query_budget:
                raise
            return {h.run_id: Observation(JobState.UNKNOWN, times=dict(self._runs.setdefault(h.run_id, _RunState()).times),
                                          native_state="Unknown", reason=exc.message) for h in handles}
        out = {}
        for h in handles:
            key = (h.data["namespace"], h.data["name"])
            rs = self._runs.setdefault(h.run_id, _RunState())
            j, w, ps = js.get(key), wl.get(key), pods.get(key, [])
            if j is not None and j["metadata"].get("uid") != h.data.get("uid"):
                j = None  # a different JobSet of the same name
            self._times(h, rs, j, w, ps)
            native, reason = self._native_state(h, j, w, ps)
            if self.local and h.data.get("lost_nodes"):
                self._remediate_lost_nodes(h, ps)
            new = self._read_logs(h, rs, ps)
            rs.reason = reason
            out[h.run_id] = Observation(STATE_TABLE[native], events=new, times=dict(rs.times),
                                        attempts=[dict(v, attempt=k) for k, v in sorted(rs.attempts.items())],
                                        native_state=native, reason=reason)
        return out

    def _times(self, h: Handle, rs: _RunState, j, w, ps) -> None:
        t = rs.times
        if j is not None:
            t.setdefault("submitted", parse_time(j["metadata"]["creationTimestamp"]))
            c = _conds(j)
            for kind in ("Completed", "Failed"):
                if _true(c, kind):
                    t["ended"] = parse_time(c[kind].get("lastTransitionTime"))
        if w is not None:
            c = _conds(w)
            for kind, key in (("QuotaReserved", "quota_reserved"), ("Admitted", "admitted")):
                if _true(c, kind) and key not in t:
                    t[key] = parse_time(c[kind].get("lastTransitionTime"))
        by_att: dict[int, list] = {}
        for p in ps:
            by_att.setdefault(int(p.metadata.labels.get(RESTART_LABEL, "0")), []).append(p)
        for att, group in by_att.items():
            a = rs.attempts.setdefault(att, {})
            a["pods"] = sorted({p.metadata.name for p in group} | set(a.get("pods", [])))
            a["nodes"] = sorted({p.spec.node_name for p in group if p.spec.node_name} | set(a.get("nodes", [])))
            a.setdefault("created", min(parse_time(p.metadata.creation_timestamp) for p in group))
            sched = [c.last_transition_time for p in group for c in (p.status.conditions or [])
                     if c.type == "PodScheduled" and c.status == "True"]
            if len(sched) >= h.data["nodes"] and "allocated" not in a:
                # the scheduler's Scheduled events carry microseconds; the condition only seconds
                precise = self._scheduled_times(h.data["namespace"], [p.metadata.name for p in group])
                if len(precise) >= h.data["nodes"]:
                    a["allocated"], a["allocated_from"] = max(precise.values()), "Scheduled events (eventTime)"
                else:
                    a["allocated"], a["allocated_from"] = max(parse_time(s) for s in sched), "PodScheduled (1 s)"
            started = [cs.state.running.started_at for p in group for cs in (p.status.container_statuses or [])
                       if cs.state and cs.state.running and cs.state.running.started_at]
            if len(started) >= h.data["nodes"] and "containers_started" not in a:
                a["containers_started"] = max(parse_time(s) for s in started)
        first = rs.attempts.get(min(rs.attempts)) if rs.attempts else None
        if first and "allocated" in first:
            t.setdefault("allocated", first["allocated"])
        if first and "containers_started" in first:
            t.setdefault("containers_started", first["containers_started"])

    def _scheduled_times(self, ns: str, pods: list[str]) -> dict[str, float]:
        """pod name -> the kube-scheduler's Scheduled event time (one list per call)."""
        core, _ = self._k()
        out = {}
        try:
            evs = self._call("LIST events", core.list_namespaced_event, ns, field_selector="reason=Scheduled").items
        except BackendError:
            return out
        for e in evs:
            if e.involved_object and e.involved_object.name in pods and e.event_time:
                out[e.involved_object.name] = parse_time(e.event_time)
        return out

    def _native_state(self, h: Handle, j, w, ps) -> tuple[str, str]:
        if j is None:
            return "NotFound", "the JobSet no longer exists"
        c = _conds(j)
        if _true(c, "Completed"):
            return "Completed", ""
        if _true(c, "Failed"):
            return "Failed", c["Failed"].get("message", "")
        restarts = int((j.get("status") or {}).get("restarts") or 0)
        for p in ps:  # unrunnable pods: an image that cannot be pulled ...
            for cs in p.status.container_statuses or []:
                wr = cs.state.waiting.reason if cs.state and cs.state.waiting else None
                if wr in IMAGE_ERRORS:
                    return "Unrunnable", f"pod {p.metadata.name}: {wr}: {cs.state.waiting.message or ''}".strip()
        if j["spec"].get("suspend") or _true(c, "Suspended"):
            reason = ""
            if w is not None:
                qr = _conds(w).get("QuotaReserved", {})
                reason = qr.get("message", "") if qr.get("status") != "True" else ""
                if "> maximum capacity" in reason:   # the job alone exceeds the quota: it will never fit
                    return "Unrunnable", f"Kueue: {reason}"
            return "Suspended", reason or "waiting for Kueue admission"
        current = [p for p in ps if int(p.metadata.labels.get(RESTART_LABEL, "0")) == restarts
                   and not p.metadata.deletion_timestamp]
        if any(p.status.phase == "Failed" for p in ps if not p.metadata.deletion_timestamp):
            return "Restarting", "a pod failed; JobSet recreates the set"
        unsched = [p for p in current if not any(c.type == "PodScheduled" and c.status == "True"
                                                  for c in p.status.conditions or [])]
        if len(current) < h.data["nodes"] or unsched:
            msg = next((c.message for p in unsched for c in p.status.conditions or []
                        if c.type == "PodScheduled" and c.message), "")
            if unsched and self._fits_no_node(unsched[0]):
                return "Unrunnable", f"no node can hold pod {unsched[0].metadata.name}: {msg}"
            return ("Restarting" if restarts else "PodsUnscheduled"), msg
        if all(p.status.phase == "Running" for p in current):
            return "Running", ""
        if all(p.status.phase == "Succeeded" for p in current):
            return "Running", "pods done; JobSet completing"
        return ("Restarting" if restarts and any(p.status.phase != "Pending" for p in current) else "PodsStarting"), ""

    def _fits_no_node(self, pod) -> bool:
        """True when the pod's requests exceed every node's allocatable (not a transient shortage)."""
        core, _ = self._k()
        req = {}
        for c in pod.spec.containers:
            for r, v in ((c.resources and c.resources.requests) or {}).items():
                req[r] = req.get(r, 0.0) + _qty(v)
        for n in self._call("LIST nodes", core.list_node).items:
            alloc = n.status.allocatable or {}
            if all(_qty(alloc.get(r, "0")) >= v for r, v in req.items()):
                return False
        return True

    def _read_logs(self, h: Handle, rs: _RunState, ps) -> list[dict]:
        """New events from each pod's log since the last read. The API offers sinceSeconds (whole
        seconds, on this host's clock = the nodes' clock here): lines are re-read around the last
        one, and kept only if newer (log text) or not seen before (events)."""
        from kubernetes.client.rest import ApiException
        core, _ = self._k()
        new = []
        for p in ps:
            if p.status.phase not in ("Running", "Succeeded", "Failed"):
                continue
            name = p.metadata.name
            kw = {"container": rj.CONTAINER, "timestamps": True}
            last = rs.log_since.get(name)
            if last is not None:
                kw["since_seconds"] = max(1, int(time.time() - last) + 2)
            try:
                text = core.read_namespaced_pod_log(name, h.data["namespace"], _request_timeout=5, **kw)
            except (ApiException, OSError) as exc:  # a pod going away, a dead kubelet: next poll
                rs.log_errors[name] = str(exc).splitlines()[0][:200]
                continue
            except Exception as exc:  # noqa: BLE001 - urllib3 time-outs and protocol errors
                if not type(exc).__module__.startswith("urllib3"):
                    raise
                rs.log_errors[name] = f"{type(exc).__name__}"
                continue
            for line in text.splitlines():
                ts, _, rest = line.partition(" ")
                if not rest:
                    continue
                key = _sortable(ts)
                if key > rs.log_last.get(name, ""):
                    rs.logs[name] = (rs.logs.get(name, "") + rest + "\n")[-200_000:]
                    rs.log_last[name] = key
                    rs.log_since[name] = parse_time(ts[:19] + "Z")
                e = evmod.parse_line(rest)
                if e is None:
                    continue
                k = evmod.event_key(e)
                if k not in rs.seen:
                    rs.seen.add(k)
                    new.append(e)
        return new

    # ------------------------------------------------------------------ faults
    def supported_faults(self) -> set[str]:
        return {"kill_rank", "delete_pod", "lose_node"}

    def _pod_of(self, h: Handle, ev: dict):
        core, _ = self._k()
        att = (ev.get("attempt") or [0])[0]
        pods = self._call("LIST pods", core.list_namespaced_pod, h.data["namespace"],
                          label_selector=f"{rj.JOBSET_NAME_LABEL}={h.data['name']},{RESTART_LABEL}={att}").items
        for p in pods:
            if p.spec.hostname == ev.get("host") or p.metadata.name == ev.get("host"):
                return p
        raise BackendError(f"no pod of {h.data['name']} has host name {ev.get('host')!r} (attempt {att})")

    def inject(self, handle: Handle, kind: str, target_event: dict, journal: Journal = no_journal) -> FaultRecord:
        from kubernetes import client
        from kubernetes.stream import stream
        pod = self._pod_of(handle, target_event)
        ns = handle.data["namespace"]
        target = {k: target_event.get(k) for k in ("rank", "host", "pid", "attempt", "step")}
        target.update({"pod": pod.metadata.name, "node": pod.spec.node_name})
        core, _ = self._k()
        if kind == "kill_rank":
            pid = int(target_event["pid"])
            exec_api = client.CoreV1Api(self._exec_client())   # stream() patches its client: keep it apart
            t = time.time()
            out = stream(exec_api.connect_get_namespaced_pod_exec, pod.metadata.name, ns, container=rj.CONTAINER,
                         command=["sh", "-c", 'kill -9 "$1"', "sh", str(pid)], stderr=True, stdout=True,
                         stdin=False, tty=False, _request_timeout=30)
            return FaultRecord(kind, t, target, {"signal": "SIGKILL", "via": "pods/exec kill -9", "output": out})
        if kind == "delete_pod":
            t = time.time()
            self._call("DELETE pod", core.delete_namespaced_pod, pod.metadata.name, ns)
            return FaultRecord(kind, t, target, {"how": "DELETE pod (default grace period)",
                                                 "grace_s": pod.spec.termination_grace_period_seconds})
        if kind == "lose_node":
            node = pod.spec.node_name
            native = self._native_nodes()
            if node in native:
                return self._power_off_native_node(handle, node, target, kind)
            t = time.time()
            self._call("PATCH node (cordon)", core.patch_node, node, {"spec": {"unschedulable": True}})
            handle.data.setdefault("cordoned", []).append(node)
            evicted = []
            for p in self._call("LIST pods on node", core.list_namespaced_pod, ns,
                                field_selector=f"spec.nodeName={node}").items:
                body = client.V1Eviction(metadata=client.V1ObjectMeta(name=p.metadata.name, namespace=ns))
                self._call("CREATE eviction", core.create_namespaced_pod_eviction, p.metadata.name, ns, body)
                evicted.append(p.metadata.name)
            return FaultRecord(kind, t, target, {"how": "cordon + evict the node's pods", "evicted": evicted})
        raise BackendError(f"fault {kind!r} is not available on Kubernetes", tip="use kill_rank, delete_pod or lose_node")

    def _power_off_native_node(self, handle: Handle, node: str, target: dict, kind: str) -> FaultRecord:
        """Local native cluster: the node dies as in a power loss. Its pods' network goes first (the
        node's bridge down, so no peer sees a FIN or RST), then its kubelet (SIGKILL: the node stops
        reporting), then every process of its pods (SIGKILL through the node's pod cgroup). Peers
        hang in their collective; only Kubernetes' node lifecycle notices (grace period, then
        unreachable taint, then toleration_seconds, then eviction)."""
        import subprocess

        from ..clusters import native_k8s
        from ..clusters.k8s import host as khost
        bridge = f"{native_k8s.BRIDGE_PREFIX}{list(native_k8s.info().nodes).index(node) + 1}"
        t = time.time()
        p = subprocess.run(["ip", "link", "set", bridge, "down"], capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise BackendError(f"ip link set {bridge} down failed: {p.stderr.strip()}", tip="run as root")
        handle.data.setdefault("downed_links", []).append(bridge)
        handle.data.setdefault("lost_nodes", []).append(node)
        self._ledger_write({**self._ledger_read(), handle.run_id: {"nodes": [node], "links": [bridge]}})
        kubelet_pid = native_k8s.stop_kubelet(node)
        killed = khost.kill_cgroup_tree(f"{native_k8s.CGROUP_PARENT}/{node}")
        return FaultRecord(kind, t, target, {
            "how": f"power loss of {node}: bridge {bridge} down, kubelet SIGKILL, every pod process SIGKILL",
            "kubelet_pid": kubelet_pid, "pod_processes_killed": len(killed),
            "recovery_chain": "node-monitor grace period -> NotReady + unreachable taint -> toleration_seconds -> "
                              "eviction (a failed Job) -> JobSet restart; the lost node's pods stay Terminating "
                              "(no kubelet confirms), so once the node is NotReady the harness adds the "
                              "out-of-service taint (what a node-repair controller does) and the pod GC "
                              "force-deletes them"})

    def _exec_client(self):
        from kubernetes import client
        return client.ApiClient(self.api().configuration)

    def _native_nodes(self) -> list[str]:
        if not self.local:
            return []
        try:
            from ..clusters import native_k8s
            return list(native_k8s.info().nodes)
        except Exception:  # noqa: BLE001
            return []

    def _remediate_lost_nodes(self, h: Handle, ps) -> None:
        """Local cluster, after stop_kubelet: once the node controller has evicted the lost node's pods
        (they stay Terminating: no kubelet confirms), taint the node out-of-service so the pod GC
        force-deletes them and JobSet's foreground Job deletion can finish."""
        core, _ = self._k()
        done = h.data.setdefault("remediated", {})
        for node in h.data["lost_nodes"]:
            if node in done:
                continue
            stuck = [p for p in ps if p.spec.node_name == node and p.metadata.deletion_timestamp]
            if not stuck:
                continue
            n = self._call("GET node", core.read_node, node)
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []):
                continue   # the node controller has not noticed yet (node-monitor grace period)
            taints = [t.to_dict() for t in (n.spec.taints or [])]
            if not any(t["key"] == OUT_OF_SERVICE["key"] for t in taints):
                taints = [{k: v for k, v in t.items() if v is not None} for t in taints] + [OUT_OF_SERVICE]
                self._call("PATCH node taints", core.patch_node, node, {"spec": {"taints": taints}})
            done[node] = {"out_of_service_at": time.time(),
                          "evicted_at": min(parse_time(p.metadata.deletion_timestamp) for p in stuck)}

    def _restore_nodes(self, h: Handle) -> None:
        import subprocess
        core, _ = self._k()
        for link in h.data.get("downed_links") or []:
            subprocess.run(["ip", "link", "set", link, "up"], capture_output=True, timeout=30)
        h.data["downed_links"] = []
        for node in h.data.get("lost_nodes") or []:
            from ..clusters import native_k8s
            native_k8s.start_kubelet(node)
            n = self._call("GET node", core.read_node, node, missing_ok=True)
            if n is not None:
                taints = [{k: v for k, v in t.to_dict().items() if v is not None} for t in (n.spec.taints or [])
                          if t.key != OUT_OF_SERVICE["key"]]
                self._call("PATCH node taints", core.patch_node, node, {"spec": {"taints": taints or None}})
            deadline = time.time() + 90
            while time.time() < deadline:
                n = self._call("GET node", core.read_node, node, missing_ok=True)
                if n is not None and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) \
                        and not any(t.key.startswith("node.kubernetes.io/") for t in (n.spec.taints or [])):
                    break
                time.sleep(1)
        for node in h.data.get("cordoned") or []:
            self._call("PATCH node (uncordon)", core.patch_node, node, {"spec": {"unschedulable": False}})
        h.data["lost_nodes"], h.data["cordoned"] = [], []
        ledger = self._ledger_read()
        if ledger.pop(h.run_id, None) is not None:
            self._ledger_write(ledger)

    # A lost node must come back even if the harness dies between the fault and cancel(): the
    # handle in the store's in-flight file predates the fault, so the fault is also noted here.
    def _ledger_path(self) -> Path:
        return Path(self.checkpoint_root) / ".lost-nodes.json"

    def _ledger_read(self) -> dict:
        try:
            return json.loads(self._ledger_path().read_text())
        except (OSError, ValueError):
            return {}

    def _ledger_write(self, data: dict) -> None:
        p = self._ledger_path()
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, p)

    def restore_lost_nodes(self) -> list[str]:
        """Bring back nodes that a crashed campaign's lose_node fault left down (local cluster)."""
        restored = []
        for run_id, entry in self._ledger_read().items():
            h = Handle("k8s", run_id, [], 0.0, data={"lost_nodes": entry.get("nodes", []),
                                                     "downed_links": entry.get("links", []), "cordoned": []})
            self._restore_nodes(h)
            restored += entry.get("nodes", [])
        return restored

    # ------------------------------------------------------------------ collect / cancel
    def collect(self, handle: Handle) -> Collected:
        rs = self._runs.setdefault(handle.run_id, _RunState())
        try:
            obs = self.observe([handle])[handle.run_id]
            state, native, reason = obs.state, obs.native_state, obs.reason
        except BackendError as exc:
            state, native, reason = JobState.UNKNOWN, "Unknown", exc.message
        events = list(self._volume_events(handle))
        for text in rs.logs.values():   # what the logs showed (the volume may lack a killed process's last line)
            events.extend(evmod.parse_lines(text.splitlines()))
        events = evmod.dedupe(events)
        logs = {f"{n}.log": t for n, t in rs.logs.items()}
        info = {"jobset": handle.data["name"], "namespace": handle.data["namespace"], "final_state": native,
                "reason": reason, "restarts": max(rs.attempts, default=0),
                "node_remediation": handle.data.get("remediated") or {},
                "polls": dict(self.poll_stats),
                "events_from": "pod logs" + (" + checkpoint volume" if self.local and not handle.data.get("checkpoint_pvc") else "")}
        logs["status.txt"] = (f"JobSet {handle.data['namespace']}/{handle.data['name']}: {native} ({state.value})"
                              + (f"\nreason: {reason}" if reason else "") + "\n")
        attempts = [dict(v, attempt=k) for k, v in sorted(rs.attempts.items())]
        return Collected(events=events, times=dict(rs.times), attempts=attempts, logs=logs, info=info)

    def _volume_events(self, h: Handle):
        """The workload's own event files on the checkpoint volume (hostPath on this host only)."""
        if h.data.get("checkpoint_pvc") or not self.local:
            return []
        d = Path(h.data["checkpoint_path"]) / "events"
        out = []
        if d.is_dir():
            for f in sorted(d.glob("*.jsonl")):
                out.extend(evmod.parse_lines(f.read_text(errors="replace").splitlines()))
        return out

    def _delete_run(self, ns: str, name: str, wait_s: float = 90) -> None:
        core, co = self._k()
        from kubernetes import client
        self._call("DELETE JobSet", co.delete_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", ns,
                   "jobsets", name, body=client.V1DeleteOptions(propagation_policy="Foreground"), missing_ok=True)
        # wait until it and its pods are gone, so the next run's queue time does not include this teardown
        deadline = time.time() + wait_s
        while time.time() < deadline:
            js = self._call("GET JobSet", co.get_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", ns,
                            "jobsets", name, missing_ok=True)
            pods = self._call("LIST pods", core.list_namespaced_pod, ns,
                              label_selector=f"{rj.JOBSET_NAME_LABEL}={name}").items
            if js is None and not pods:
                return
            time.sleep(1)

    def cancel(self, handle: Handle) -> None:
        ns, name = handle.data["namespace"], handle.data["name"]
        try:
            self._restore_nodes(handle)
        finally:
            self._delete_run(ns, name)
            self._call("DELETE ConfigMap", self._k()[0].delete_namespaced_config_map, handle.data["configmap"], ns,
                       missing_ok=True)
            if self.local and not handle.data.get("checkpoint_pvc") and handle.data.get("checkpoint_path"):
                # the checkpoints are spent; the event files beside them stay for collect()
                shutil.rmtree(Path(handle.data["checkpoint_path"]) / "ckpt", ignore_errors=True)


def _sortable(ts: str) -> str:
    """An RFC 3339 (nano) timestamp as text that sorts in time order (fraction padded to 9 digits)."""
    head, _, frac = ts.rstrip("Z").partition(".")
    return f"{head}.{frac:0<9}"


def _quota_of(cq: dict) -> dict:
    out = {}
    for g in cq.get("spec", {}).get("resourceGroups", []):
        for f in g.get("flavors", []):
            for r in f.get("resources", []):
                out[f"{f['name']}/{r['name']}"] = r.get("nominalQuota")
    return out



def _api_message(exc) -> str:
    """The API server's own message from an ApiException (its body is JSON when it has one)."""
    body = exc.body.decode() if isinstance(exc.body, bytes) else (exc.body or "")
    try:
        return json.loads(body).get("message", body)
    except (ValueError, AttributeError):
        return body

def _tip_for_status(status: int) -> str:
    if status in (401, 403):
        return "the kubeconfig's identity lacks rights: apply rbac.yaml from `poc render --platform k8s --out DIR`"
    if status == 404:
        return "a resource is missing: check that JobSet and Kueue are installed and the namespace exists"
    return "see the API server's message above"
