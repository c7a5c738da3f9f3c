"""Is this Kubernetes cluster usable for the job? JobSet and Kueue installed, the namespace and its
LocalQueue there, some node able to hold a pod; and the facts stored with every run (versions,
queue quota, nodes, settings, and what this identity could and could not see).

On a shared cluster the harness's identity has a namespace, a LocalQueue and the namespaced Role
that `poc render` prints, not cluster-admin. Cluster-scoped reads (CRDs, ClusterQueues, Nodes) and
the Namespace object are then forbidden: a 403 there is recorded ("forbidden: not needed") and the
check goes on with what the namespace shows. A missing API group answers a namespaced read with
404 "page not found" when the identity may read it (the Role names the group), so JobSet and Kueue
are still known to be installed or not. Measured on the native cluster (v1.34) as the restricted
user: a read in a namespace that does not exist is a 403 like any namespace without a Role.
"""
from __future__ import annotations

from ...config import Kubernetes
from ...errors import BackendError
from ...render import jobset as rj
from ...spec import JobSpec
from . import quota_fit, taints
from .api import CLUSTERQUEUES, JOBSETS, LOCALQUEUES, WORKLOADS, K8sClient, api_message, qty
from .state import conds, fits_no_node, get, items, quota_of

JOBSET_CRD = "jobsets.jobset.x-k8s.io"
KUEUE_CRDS = ("workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
              "resourceflavors.kueue.x-k8s.io")
JOBSET_INSTALL = ("install JobSet: kubectl apply --server-side -f "
                  "https://github.com/kubernetes-sigs/jobset/releases/download/v0.10.1/manifests.yaml "
                  "(or `poc cluster up --k8s` for the local cluster)")
KUEUE_INSTALL = ("install Kueue: kubectl apply --server-side -f "
                 "https://github.com/kubernetes-sigs/kueue/releases/download/v0.14.5/manifests.yaml "
                 "(or `poc cluster up --k8s` for the local cluster)")
FORBIDDEN = "forbidden: not needed"


def _read(client: K8sClient, what: str, fn, *args, **kw) -> tuple[object, int, str]:
    """(object, 200, "") or (None, 403|404, the API's message); other errors raise as client.call does."""
    from kubernetes.client.rest import ApiException

    def attempt(*a, **k):
        try:
            return fn(*a, **k), 200, ""
        except ApiException as exc:
            if exc.status in (403, 404):
                return None, exc.status, api_message(exc)
            raise
    return client.call(what, attempt, *args, **kw)


def _group_missing(status: int, message: str) -> bool:
    """A 404 for the resource type itself (its CRD is not installed), not for one object."""
    return status == 404 and "page not found" in message


def require_crds(client: K8sClient, ns: str | None = None, seen: dict | None = None) -> None:
    """JobSet's and Kueue's CRDs, read directly where allowed, else inferred from namespace ns."""
    from kubernetes import client as k
    seen = {} if seen is None else seen
    ext = k.ApiextensionsV1Api(client.api)
    for crd, tip, product in [(JOBSET_CRD, JOBSET_INSTALL, "JobSet")] + [(c, KUEUE_INSTALL, "Kueue")
                                                                         for c in KUEUE_CRDS]:
        # presence only: the raw response, not a parse of the whole (large) schema
        _, status, _ = _read(client, f"GET CRD {crd}", ext.read_custom_resource_definition, crd,
                             _preload_content=False)
        if status == 404:
            raise BackendError(f"{product} is not installed on {client.host}: CRD {crd} is missing", tip=tip)
        if status == 403:
            seen["crds"] = FORBIDDEN + " (JobSet and Kueue known from reads in the namespace)"
            break
    else:
        seen["crds"] = "visible"
        return
    if ns is None:
        return
    co = client.custom()
    for res, tip, product in ((JOBSETS, JOBSET_INSTALL, "JobSet"), (WORKLOADS, KUEUE_INSTALL, "Kueue")):
        _, status, msg = _read(client, f"LIST {res.plural} in {ns}", co.list_namespaced_custom_object,
                               res.group, res.version, ns, res.plural, limit=1)
        if _group_missing(status, msg):
            raise BackendError(f"{product} is not installed on {client.host}: the API has no {res.plural}.{res.group}",
                               tip=tip)
        if status == 403:
            raise BackendError(f"this identity may not list {res.plural}.{res.group} in namespace {ns!r}: {msg}",
                               tip=no_rights_tip(ns))


def no_rights_tip(ns: str) -> str:
    return (f"the namespace may not exist, or no Role there is bound to you: ask the cluster admins to apply "
            f"rbac.yaml from `poc render --platform k8s --out DIR` in {ns} and bind it to you "
            f"(the file says how), or set kubernetes.namespace to your team's namespace")


def missing_queue_tip(cfg: Kubernetes) -> str:
    if cfg.native:
        return ("`poc cluster up --k8s` creates the local cluster's queues; or set kubernetes.local_queue "
                f"(kubectl get localqueues -n {cfg.namespace})")
    return (f"ask the cluster admins for a Kueue LocalQueue in namespace {cfg.namespace} (see which exist: "
            f"kubectl get localqueues -n {cfg.namespace}), then set kubernetes.local_queue to its name")


def pod_requests(spec: JobSpec, cfg: Kubernetes) -> dict[str, str]:
    return rj.resources(spec, cfg.pod.extra_resources)["requests"]


def check_nodes(nodes: list[dict], requests: dict[str, str], node_selector: dict[str, str],
                tolerations: list[dict] | tuple = ()) -> None:
    """Fail fast, before anything is submitted, when no node could ever hold a pod: the node selector
    picks none, lasting taints the pods do not tolerate cover every one it picks, or none has the
    allocatable for one pod. Fewer such nodes than resources.nodes is no refusal: a cluster that
    scales its node pools adds nodes for a job that waits."""
    picked = [n for n in nodes
              if all(get(n, "metadata", "labels", key) == v for key, v in node_selector.items())]
    if not picked:
        raise BackendError(f"no node has the labels kubernetes.pod.node_selector asks for: {node_selector}",
                           tip="check the node labels: kubectl get nodes --show-labels")
    allowed = [n for n in picked if not taints.untolerated(n, list(tolerations))]
    if not allowed:
        _taint_error(picked, tolerations, bool(node_selector))
    pod = {"spec": {"containers": [{"resources": {"requests": requests}}]}}
    if not fits_no_node(pod, [get(n, "status", "allocatable", default={}) for n in allowed]):
        return
    def amount(n: dict, r: str) -> float:
        x = qty(get(n, "status", "allocatable", r, default="0"))
        return x if x == x else 0.0      # NaN: not a quantity, as good as none
    short = []
    for r, v in requests.items():
        best = max(allowed, key=lambda n: amount(n, r))
        have = get(best, "status", "allocatable", r, default="0")
        if amount(best, r) < qty(v):
            short.append(f"{r} {v} (the most any node has: {have}, on {get(best, 'metadata', 'name')})")
    raise BackendError("no node can hold one pod of this job; each pod asks for " + ", ".join(short),
                       tip="lower resources.gpus_per_node (with procs_per_node), cpus_per_node or memory_mb, or "
                           "kubernetes.pod.extra_resources, to what one node has: kubectl describe nodes")


def _taint_error(picked: list[dict], tolerations, selected: bool) -> None:
    """Name each taint that keeps the pods off, with the nodes it covers and the toleration to add."""
    where: dict[str, list[str]] = {}
    example: dict[str, dict] = {}
    for n in picked:
        for t in taints.untolerated(n, list(tolerations)):
            where.setdefault(taints.text(t), []).append(get(n, "metadata", "name"))
            example.setdefault(taints.text(t), t)
    named = "; ".join(f"{t} on {len(ns)} of {len(picked)} nodes ({', '.join(ns[:3])}{', …' if len(ns) > 3 else ''})"
                      for t, ns in where.items())
    which = "the nodes kubernetes.pod.node_selector picks" if selected else "the cluster's nodes"
    adds = ", ".join(taints.toleration_for(t) for t in example.values())
    raise BackendError(f"no node can hold a pod of this job: {which} carry taints its pods do not tolerate: {named}",
                       tip=f"if the job may run on such nodes, add to kubernetes.pod.tolerations: [{adds}]; "
                           f"or pick other nodes with kubernetes.pod.node_selector")


def check(client: K8sClient, cfg: Kubernetes, *, image: str, local: bool, checkpoint: dict, setup: dict,
          spec: JobSpec | None = None) -> dict:
    from kubernetes import client as k
    seen: dict[str, str] = {}
    ver, status, _ = _read(client, "GET /version", k.VersionApi(client.api).get_code)
    seen["version"] = "visible" if status == 200 else FORBIDDEN
    ns = cfg.namespace
    require_crds(client, ns, seen)
    core = client.core()
    _, status, msg = _read(client, f"GET namespace {ns}", core.read_namespace, ns)
    if status == 404:
        raise BackendError(f"namespace {ns!r} does not exist",
                           tip=f"kubectl create namespace {ns}, or set kubernetes.namespace")
    seen["namespace"] = "visible" if status == 200 else FORBIDDEN + " (a Role cannot grant it)"
    co = client.custom()
    lq, status, msg = _read(client, f"GET LocalQueue {ns}/{cfg.local_queue}", co.get_namespaced_custom_object,
                            LOCALQUEUES.group, LOCALQUEUES.version, ns, LOCALQUEUES.plural, cfg.local_queue)
    if _group_missing(status, msg):
        raise BackendError(f"Kueue is not installed on {client.host}: the API has no localqueues", tip=KUEUE_INSTALL)
    if status == 403:
        raise BackendError(f"cannot read LocalQueue {cfg.local_queue!r} in namespace {ns!r}: {msg}",
                           tip=no_rights_tip(ns))
    if lq is None:
        raise BackendError(f"Kueue LocalQueue {cfg.local_queue!r} does not exist in namespace {ns!r}",
                           tip=missing_queue_tip(cfg))
    active = conds(lq).get("Active", {})
    if active.get("status") == "False":
        raise BackendError(f"LocalQueue {ns}/{cfg.local_queue} is not active: {active.get('reason')}: "
                           f"{active.get('message')}", tip="ask the cluster admins to fix its ClusterQueue")
    cq_name = get(lq, "spec", "clusterQueue")
    cq, status, _ = _read(client, f"GET ClusterQueue {cq_name}", co.get_cluster_custom_object,
                          *CLUSTERQUEUES, cq_name)
    if status == 404:
        raise BackendError(f"LocalQueue {cfg.local_queue!r} points at ClusterQueue {cq_name!r}, which does not exist",
                           tip=("`poc cluster up --k8s` creates it" if cfg.native else
                                "ask the cluster admins: the ClusterQueue behind your LocalQueue is missing"))
    seen["cluster_queue"] = "visible" if cq is not None else FORBIDDEN + " (the LocalQueue is Active)"
    if not image:
        raise BackendError("no container image set", tip="set kubernetes.image to an image with python3 and torch")
    got, status, _ = _read(client, "LIST nodes", core.list_node)
    nodes = [client.to_dict(n) for n in got.items] if got is not None else None
    seen["nodes"] = "visible" if nodes is not None else FORBIDDEN + " (capacity unchecked before submit)"
    if nodes is not None and spec is not None:
        check_nodes(nodes, pod_requests(spec, cfg), cfg.pod.node_selector, rj.tolerations(cfg))
    # spec: the campaign's largest job; on the local cluster the harness sized the quota to it (setup_local)
    fit = None if local else quota_fit.check(cq, spec, cfg.pod.extra_resources)
    info = {
        "scheduler": "kubernetes",
        "scheduler_version": getattr(ver, "git_version", None),
        "kubernetes_version": getattr(ver, "git_version", None),
        "api_server": client.host,
        "jobset_version": None, "kueue_version": None,
        "failure_policy": {"maxRestarts": cfg.max_restarts, "restartStrategy": "Recreate",
                           "torchrun_max_restarts": 0, "job_backoff_limit": 0},
        "toleration_seconds": cfg.toleration_seconds,
        "node_monitor_grace_period": None,
        "local_queue": cfg.local_queue, "cluster_queue": cq_name,
        "cluster_queue_quota": quota_of(cq) if cq is not None else None,
        **({"largest_job_quota_fit": fit} if fit else {}),
        "local_queue_flavors": [f.get("name") for f in items(lq, "status", "flavors")],
        "image": image, "image_pull_policy": cfg.image_pull_policy,
        "checkpoint": checkpoint,
        "nodes": None if nodes is None else [
            {"node": get(n, "metadata", "name"), "cpu": get(n, "status", "allocatable", "cpu"),
             "memory": get(n, "status", "allocatable", "memory"),
             "gpus": get(n, "status", "allocatable", rj.GPU_RESOURCE),
             "ready": any(c.get("type") == "Ready" and c.get("status") == "True"
                          for c in items(n, "status", "conditions"))}
            for n in nodes],
        "visibility": seen,
        "time_resolution_s": 1.0,
        "setup": setup,
    }
    info.update(component_versions(client, local))
    info.update(kueue_settings(client, local))
    return info


# Kueue's Configuration on an ordinary install (its manifests.yaml): a ConfigMap in kueue-system; the
# native cluster starts kueue-manager with --config=<state dir>/config/kueue.yaml instead
KUEUE_CONFIGMAP = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
WAIT_FOR_PODS_READY = ("enable", "timeout", "blockAdmission", "recoveryTimeout", "requeuingStrategy")


def kueue_settings(client: K8sClient, local: bool) -> dict:
    """Kueue's waitForPodsReady as its Configuration sets it (None: not set, Kueue's default: off), where
    it came from, and the requeue backoff it implies; or why it could not be read (a user of a shared
    cluster may not read kueue-system)."""
    import yaml
    if local:
        try:
            from ...clusters import native_k8s
            path = native_k8s.info().state_dir / "config" / "kueue.yaml"
            text, source = path.read_text(), f"{path} (the native cluster's kueue-manager --config)"
        except Exception as exc:  # noqa: BLE001 - a missing state file: recorded, not fatal to the run
            return {"kueue_config": {"source": "the native cluster's state dir", "unreadable": str(exc)[:200]}}
    else:
        ns, name, key = KUEUE_CONFIGMAP
        source = f"ConfigMap {ns}/{name}, key {key}"
        try:
            cm, status, msg = _read(client, f"GET configmap {ns}/{name}", client.core().read_namespaced_config_map,
                                    name, ns)
        except BackendError as exc:
            cm, status, msg = None, None, exc.message
        if cm is None:
            why = f"HTTP {status}: {msg}" if status else msg
            return {"kueue_config": {"source": source, "unreadable": why[:300]}}
        text = (cm.data or {}).get(key)
        if text is None:
            return {"kueue_config": {"source": source, "unreadable": f"the ConfigMap has no key {key}"}}
    try:
        conf = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        return {"kueue_config": {"source": source, "unreadable": f"not YAML: {str(exc)[:200]}"}}
    wait = conf.get("waitForPodsReady") if isinstance(conf, dict) else None
    wait = {k: wait[k] for k in WAIT_FOR_PODS_READY if k in wait} if isinstance(wait, dict) else None
    frameworks = jobset_integration(conf, source)
    return {"kueue_config": {"source": source, "waitForPodsReady": wait, "frameworks": frameworks},
            "kueue_requeue_backoff": requeue_backoff(wait)}


JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"


def jobset_integration(conf, source: str) -> list[str]:
    """Kueue's integrations.frameworks, refused (BackendError) when it does not manage JobSets: the JobSet is
    created suspended for Kueue to admit, and a Kueue that does not manage it never does, so the run would wait
    out its queue timeout and be recorded as queued. Unset, Kueue's own default is batch/job alone
    (apis/config/v1beta1 defaults)."""
    frameworks = (((conf or {}).get("integrations") or {}).get("frameworks") if isinstance(conf, dict) else None)
    said = [str(f) for f in frameworks] if isinstance(frameworks, list) else None
    effective = said if said is not None else ["batch/job"]
    if JOBSET_FRAMEWORK not in effective:
        raise BackendError(f"Kueue does not manage JobSets: integrations.frameworks is "
                           f"{said if said is not None else 'unset (Kueue default: batch/job only)'} in {source}, "
                           "so the run's suspended JobSet would never be admitted",
                           tip=f"ask the cluster admins to add {JOBSET_FRAMEWORK} to Kueue's integrations.frameworks "
                               "(and restart kueue-controller-manager)")
    return effective


def requeue_backoff(wait: dict | None) -> str:
    """When Kueue evicts and requeues a workload whose pods are not ready in time, and how long it waits
    before admitting it again; Kueue's documented defaults (apis/config/v1beta1) where the config is silent."""
    if not wait or not wait.get("enable"):
        return "none: waitForPodsReady off (Kueue does not evict a workload for pods not ready)"
    rs = wait.get("requeuingStrategy") or {}
    said = [f"{k} {rs[k]}" for k in ("backoffBaseSeconds", "backoffMaxSeconds", "backoffLimitCount") if k in rs]
    return (f"after timeout {wait.get('timeout', '5m (default)')}"
            + (f", recoveryTimeout {wait['recoveryTimeout']}" if wait.get("recoveryTimeout") else "")
            + ": " + (", ".join(said) + " (the rest at Kueue's defaults)" if said else
                      "Kueue's defaults (backoffBaseSeconds 60, backoffMaxSeconds 3600, no backoffLimitCount)"))


def failure_policy_of(jobset: dict | None) -> dict | None:
    """What restarts the run, from its own JobSet (as the API server kept it): spec.failurePolicy's
    maxRestarts, restartStrategy and rules, and each replicated Job's backoffLimit; None without a JobSet."""
    spec = get(jobset or {}, "spec")
    if not isinstance(spec, dict):
        return None
    fp = spec.get("failurePolicy")
    return {"source": "the run's JobSet spec.failurePolicy",
            "set": isinstance(fp, dict),
            "maxRestarts": (fp or {}).get("maxRestarts"), "restartStrategy": (fp or {}).get("restartStrategy"),
            "rules": (fp or {}).get("rules") or [],
            "job_backoff_limit": {rj.get("name"): get(rj, "template", "spec", "backoffLimit")
                                  for rj in spec.get("replicatedJobs") or [] if isinstance(rj, dict)}}


def component_versions(client: K8sClient, local: bool) -> dict:
    """JobSet/Kueue versions from their controller Deployments' images; the local native cluster
    records what it built, and its node-monitor grace period (not visible through the API)."""
    from kubernetes import client as k
    out: dict = {}
    apps = k.AppsV1Api(client.api)
    for key, ns, name in (("jobset_version", "jobset-system", "jobset-controller-manager"),
                          ("kueue_version", "kueue-system", "kueue-controller-manager")):
        try:
            d = client.call(f"GET deployment {ns}/{name}", apps.read_namespaced_deployment, name, ns, missing_ok=True)
        except BackendError:   # an ordinary user may not read another namespace: the version stays unknown
            continue
        if d is not None:
            img = d.spec.template.spec.containers[0].image
            out[key] = img.rsplit(":", 1)[-1] if ":" in img else img
    if local:
        try:
            from ...clusters import native_k8s
            ci = native_k8s.info()
            out.setdefault("jobset_version", ci.versions.get("jobset"))
            out.setdefault("kueue_version", ci.versions.get("kueue"))
            out["node_monitor_grace_period"] = ci.settings.get("node_monitor_grace_period")
            out["cluster_settings"] = ci.settings
            out["cluster_provider"] = "native"
        except Exception as exc:  # noqa: BLE001 - a broken state file: recorded, not fatal to the run
            out["cluster_settings_error"] = str(exc)[:200]
    return {key: v for key, v in out.items() if v is not None}
