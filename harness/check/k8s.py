"""`poc check` for Kubernetes: the API server answers, it serves the APIs the renderer writes
(discovery, which any authenticated user may read), this identity may do every verb the harness
does (one SelfSubjectAccessReview each), the config's LocalQueue exists, and the job fits the quota
of the ClusterQueue behind it where this identity may read that. Nothing is created but the reviews,
which the API server answers and does not store.

The checks take a ``Cluster`` (what they ask of the API server, as plain dicts): ``LiveCluster`` is
the real one over the official client; tests pass one fed with recorded answers.
"""
from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ..backends.k8s.api import CLUSTERQUEUES, JOBSETS, LOCALQUEUES, WORKLOADS, api_message, qty
from ..backends.k8s.preflight import JOBSET_INSTALL, KUEUE_INSTALL, missing_queue_tip, no_rights_tip
from ..config import Kubernetes
from ..render.rbac import HARNESS_ROLE, cluster_rules, role_rules
from .report import Failed, Note, Runner


class Api(NamedTuple):
    """An API the harness needs served: group/version and the resources it uses there."""
    group: str
    version: str
    plurals: tuple[str, ...]

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}"


# what the renderer writes and the backend reads (render/jobset.py's JOBSET_API and KUEUE_API)
RENDERED_APIS = (Api(JOBSETS.group, JOBSETS.version, (JOBSETS.plural,)),
                 Api(WORKLOADS.group, WORKLOADS.version, (WORKLOADS.plural, LOCALQUEUES.plural, CLUSTERQUEUES.plural)))


def parse_api(text: str) -> Api:
    """GROUP/VERSION[/PLURAL] (the --require-api option)."""
    parts = text.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"{text!r} is not GROUP/VERSION or GROUP/VERSION/PLURAL (e.g. kueue.x-k8s.io/v1beta2)")
    return Api(parts[0], parts[1], tuple(parts[2:]))


@dataclass(frozen=True)
class Access:
    """One right the harness uses: a verb on a resource (and subresource), in a namespace or cluster-wide."""
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str | None = None

    def text(self) -> str:
        res = self.resource + (f"/{self.subresource}" if self.subresource else "")
        where = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {res}{'.' + self.group if self.group else ''} {where}"

    def attributes(self) -> dict:
        a = {"verb": self.verb, "group": self.group, "resource": self.resource}
        if self.subresource:
            a["subresource"] = self.subresource
        if self.namespace:
            a["namespace"] = self.namespace
        return a


def _accesses(rules: list[dict], ns: str | None) -> list[Access]:
    out = []
    for r in rules:
        for group in r["apiGroups"]:
            for res in r["resources"]:
                name, _, sub = res.partition("/")
                out += [Access(v, group, name, sub, ns) for v in r["verbs"]]
    return out


def needed(k: Kubernetes, *, node_faults: bool, serving: bool) -> tuple[list[Access], list[Access]]:
    """(required, optional): the rights of the Role and ClusterRole `poc render` prints for this config
    (render/rbac.py, the one list of what the backend, cleanup, evidence and serving do), and the
    cluster-scoped reads preflight does without (a 403 there is recorded as not visible)."""
    required = _accesses(role_rules(node_faults, cleanup_pod=bool(k.checkpoint_pvc), serving=serving), k.namespace)
    required += _accesses(cluster_rules(False, node_faults), None)
    optional = [a for a in _accesses(cluster_rules(True, False), None) if a not in required]
    return required, optional


def rule_for(missing: Iterable[Access]) -> str:
    """The Role (or ClusterRole) rules that grant `missing`, as YAML flow lines."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for a in missing:
        res = a.resource + (f"/{a.subresource}" if a.subresource else "")
        grouped.setdefault((a.group, res), []).append(a.verb)
    return "; ".join(f'{{apiGroups: ["{g}"], resources: ["{r}"], verbs: [{", ".join(v)}]}}'
                     for (g, r), v in grouped.items())


class Cluster(Protocol):
    def version(self) -> dict: ...                       # GET /version
    def host(self) -> str: ...
    def groups(self) -> dict[str, list[str]]: ...        # GET /apis: group -> versions served
    def resources(self, group: str, version: str) -> list[str] | None: ...   # GET /apis/G/V; None: 404
    def review(self, attributes: dict) -> dict: ...      # a SelfSubjectAccessReview's status
    def read(self, kind: str, name: str, ns: str | None = None) -> tuple[dict | None, int, str]: ...
    def list(self, kind: str, ns: str) -> tuple[list[dict] | None, int, str]: ...


# ---------------------------------------------------------------- the checks
def api_server(c: Cluster) -> str:
    v = c.version()
    return f"{c.host()} answers: Kubernetes {v.get('gitVersion') or v.get('git_version')}"


def apis_served(c: Cluster, apis: Iterable[Api]) -> str:
    groups = c.groups()
    missing, fine = [], []
    for api in apis:
        served = groups.get(api.group)
        install = JOBSET_INSTALL if api.group == JOBSETS.group else KUEUE_INSTALL if api.group == WORKLOADS.group \
            else f"install the operator that serves {api.group_version}"
        if not served:
            missing.append((f"{api.group_version} is not served: the API server has no {api.group} API group", install))
            continue
        if api.version not in served:
            others = ", ".join(f"{api.group}/{v}" for v in served)
            missing.append((f"{api.group_version} is not served (it serves {others})",
                            f"{api.group_version} is needed: upgrade what serves {api.group}; {install}"))
            continue
        have = c.resources(api.group, api.version) or []
        lacking = [p for p in api.plurals if p not in have]
        if lacking:
            missing.append((f"{api.group_version} serves no {', '.join(lacking)} (it serves {', '.join(have)})",
                            install))
        else:
            fine.append(f"{api.group_version} ({', '.join(api.plurals) or 'served'})")
    if missing:
        raise Failed("; ".join(m for m, _ in missing), tip=" | ".join(dict.fromkeys(t for _, t in missing)))
    return "served: " + ", ".join(fine)


def rbac(c: Cluster, k: Kubernetes, required: list[Access], optional: list[Access], workers: int = 8) -> str:
    everything = required + optional
    with ThreadPoolExecutor(max_workers=workers) as pool:   # one request each: a remote API server's round trips
        answers = list(pool.map(lambda a: c.review(a.attributes()), everything))
    allowed = {a: bool(s.get("allowed")) and not s.get("denied") for a, s in zip(everything, answers, strict=True)}
    denied = [a for a in required if not allowed[a]]
    extra = [a for a in optional if not allowed[a]]
    note = (f"; not allowed, and not needed (preflight records them as not visible): "
            f"{', '.join(a.text() for a in extra)}") if extra else ""
    if denied:
        ns_missing = [a for a in denied if a.namespace]
        cl_missing = [a for a in denied if not a.namespace]
        tips = []
        if ns_missing:
            tips.append(f"ask the cluster admins to add to the Role {HARNESS_ROLE} in namespace {k.namespace}: "
                        f"{rule_for(ns_missing)}")
        if cl_missing:
            tips.append(f"and to the ClusterRole {HARNESS_ROLE}-{k.namespace}: {rule_for(cl_missing)}")
        raise Failed(f"{len(denied)} of {len(required)} rights the harness uses are not allowed: "
                     + "; ".join(a.text() for a in denied),
                     tip=" ".join(tips) + " (rbac.yaml from `poc render --platform k8s --out DIR` has the whole Role)")
    return f"all {len(required)} rights the harness uses are allowed in namespace {k.namespace}{note}"


def local_queue(c: Cluster, k: Kubernetes, managed: bool = False) -> dict:
    """The LocalQueue object; Failed when it is missing (listing those that exist) or unreadable.
    managed: this machine's native cluster, where the campaign's own setup creates the namespace and the
    queues before the first run, so right after `poc cluster up` their absence is expected (a Note)."""
    lq, status, msg = c.read("localqueue", k.local_queue, k.namespace)
    if status == 403:
        raise Failed(f"cannot read LocalQueue {k.local_queue!r} in namespace {k.namespace!r}: {msg}",
                     tip=no_rights_tip(k.namespace))
    if lq is None and managed:
        raise Note(f"LocalQueue {k.local_queue!r} does not exist in namespace {k.namespace!r} yet; the campaign's "
                   "setup on this machine's native cluster creates it and its ClusterQueue before the first run")
    if lq is None:
        found, lstatus, _ = c.list("localqueue", k.namespace)
        there = ("the LocalQueues there: " + (", ".join(sorted(_name(q) for q in found)) or "none")
                 if found is not None else f"listing them failed (HTTP {lstatus})")
        raise Failed(f"LocalQueue {k.local_queue!r} does not exist in namespace {k.namespace!r}; {there}",
                     tip=missing_queue_tip(k))
    return lq


def _name(obj: dict) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def describe_queue(lq: dict) -> str:
    cq = (lq.get("spec") or {}).get("clusterQueue")
    active = {c.get("type"): c for c in (lq.get("status") or {}).get("conditions") or []}.get("Active") or {}
    state = {"True": "active", "False": f"not active ({active.get('reason')}: {active.get('message')})"}.get(
        active.get("status"), "activity not reported")
    if active.get("status") == "False":
        raise Failed(f"LocalQueue {_name(lq)} -> ClusterQueue {cq} is {state}",
                     tip="ask the cluster admins to fix its ClusterQueue")
    return f"LocalQueue {_name(lq)} -> ClusterQueue {cq}, {state}"


def job_request(requests: dict[str, str], pods: int) -> dict[str, float]:
    """The job's total request: one pod's requests times the pods (one per node)."""
    return {r: qty(v) * pods for r, v in requests.items()}


def quota_fit(c: Cluster, lq: dict, total: dict[str, float], managed: bool = False, what: str = "the job",
              tip: str = "lower resources.nodes, cpus_per_node, memory_mb or gpus_per_node, or ask the cluster "
                         "admins for more quota") -> str:
    """managed: this machine's native cluster, whose ClusterQueue the campaign's own setup sizes to the
    campaign's largest job before the first run (backends/k8s/local_setup.py): a shortfall there is not the
    user's to fix. what: the job ``total`` is (the campaign's largest), and tip what to do when it does not fit."""
    name = (lq.get("spec") or {}).get("clusterQueue")
    cq, status, msg = c.read("clusterqueue", name)
    if status in (401, 403):
        raise Note(f"ClusterQueue {name} is not readable with these rights: quota fit not checked "
                   "(Kueue admits or refuses the job at submit)")
    if cq is None:
        raise Failed(f"the LocalQueue points at ClusterQueue {name!r}, which does not exist ({msg})",
                     tip="ask the cluster admins: the ClusterQueue behind your LocalQueue is missing")
    best: dict[str, tuple[float, str, str]] = {}   # resource -> (most nominal quota of a flavor, as written, flavor)
    for g in (cq.get("spec") or {}).get("resourceGroups") or []:
        for f in g.get("flavors") or []:
            for r in f.get("resources") or []:
                q = qty(r.get("nominalQuota"))
                if r.get("name") not in best or q > best[r["name"]][0]:
                    best[r["name"]] = (q, str(r.get("nominalQuota")), str(f.get("name")))
    short, fits = [], []
    for res, want in total.items():
        if res not in best:
            short.append(f"{res}: the ClusterQueue does not cover it (Kueue never admits the job)")
        elif want > best[res][0]:
            short.append(f"{res}: the job asks for {_fmt(want)} in all, the nominal quota is {best[res][1]} "
                         f"(flavor {best[res][2]})")
        else:
            fits.append(f"{res} {_fmt(want)} of {best[res][1]}")
    cohort = (cq.get("spec") or {}).get("cohort")
    if short and managed:
        raise Note(f"ClusterQueue {name} is short of the job's request now ({'; '.join(short)}); the campaign's "
                   "setup on this machine's native cluster resizes it to fit the job before the first run")
    if short and cohort:
        raise Note(f"ClusterQueue {name} is short of the job's request, but it is in cohort {cohort}: the job fits "
                   f"only by borrowing: {'; '.join(short)}")
    if short:
        raise Failed(f"{what} does not fit ClusterQueue {name}: {'; '.join(short)}", tip=tip)
    return f"{what} fits ClusterQueue {name}: {', '.join(fits)}"


def _fmt(x: float) -> str:
    for unit, mult in (("Gi", 1024**3), ("Mi", 1024**2)):
        if x >= mult and x % mult == 0:
            return f"{int(x // mult)}{unit}"
    return f"{x:g}"


def run_all(c: Cluster, k: Kubernetes, runner: Runner, *, apis: Iterable[Api], required: list[Access],
            optional: list[Access], requests: dict[str, str], pods: int, managed: bool = False,
            job: dict | None = None) -> None:
    """job: quota_fit's ``what`` and ``tip`` for the job of ``pods`` pods (the campaign's largest)."""
    runner.run("api server", lambda: api_server(c), gate=True)
    runner.run("apis served", lambda: apis_served(c, apis))
    runner.run("rbac", lambda: rbac(c, k, required, optional))
    found: list[dict] = []

    def queue() -> str:
        found.append(local_queue(c, k, managed))
        return describe_queue(found[0])
    runner.run("local queue", queue)
    runner.run("quota", lambda: quota_fit(c, found[0], job_request(requests, pods), managed, **(job or {})) if found
               else _no_queue())


def _no_queue() -> str:
    raise Note("not checked: no LocalQueue to follow to its ClusterQueue")


# ---------------------------------------------------------------- the real cluster
_KINDS = {"localqueue": LOCALQUEUES, "clusterqueue": CLUSTERQUEUES}


class LiveCluster:
    """Cluster over the official client, through the backend's K8sClient (its kubeconfig and context)."""

    def __init__(self, client):
        self.client = client

    def _json(self, obj) -> dict:
        return self.client.to_dict(obj)

    def host(self) -> str:
        return self.client.host

    def version(self) -> dict:
        from kubernetes import client as k
        return self._json(self.client.call("GET /version", k.VersionApi(self.client.api).get_code))

    def groups(self) -> dict[str, list[str]]:
        from kubernetes import client as k
        doc = self._json(self.client.call("GET /apis", k.ApisApi(self.client.api).get_api_versions))
        return {g["name"]: [v["version"] for v in g.get("versions") or []] for g in doc.get("groups") or []}

    def resources(self, group: str, version: str) -> list[str] | None:
        doc = self.client.call(f"GET /apis/{group}/{version}", self.client.custom().get_api_resources, group, version,
                               missing_ok=True)
        return None if doc is None else [r["name"] for r in self._json(doc).get("resources") or []]

    def review(self, attributes: dict) -> dict:
        from kubernetes import client as k
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes}}
        got = self.client.call("CREATE SelfSubjectAccessReview",
                               k.AuthorizationV1Api(self.client.api).create_self_subject_access_review, body)
        return self._json(got).get("status") or {}

    def _ask(self, what: str, fn, *args) -> tuple[object, int, str]:
        from kubernetes.client.rest import ApiException

        def attempt(*a, **kw):
            try:
                return fn(*a, **kw), 200, ""
            except ApiException as exc:
                if exc.status in (401, 403, 404):
                    return None, exc.status, api_message(exc)
                raise
        return self.client.call(what, attempt, *args)

    def read(self, kind: str, name: str, ns: str | None = None) -> tuple[dict | None, int, str]:
        r, co = _KINDS[kind], self.client.custom()
        if ns is None:
            return self._ask(f"GET {kind} {name}", co.get_cluster_custom_object, *r, name)
        return self._ask(f"GET {kind} {ns}/{name}", co.get_namespaced_custom_object, r.group, r.version, ns,
                         r.plural, name)

    def list(self, kind: str, ns: str) -> tuple[list[dict] | None, int, str]:
        r = _KINDS[kind]
        doc, status, msg = self._ask(f"LIST {kind} in {ns}", self.client.custom().list_namespaced_custom_object,
                                     r.group, r.version, ns, r.plural)
        return (None if doc is None else doc.get("items") or []), status, msg
