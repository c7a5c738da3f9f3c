"""Server-side dry-run: the API server's verdict on the rendered objects, with nothing stored.

`poc validate --server-dry-run` sends every planned run's ConfigMap and JobSet with ``dryRun=All``
and ``fieldValidation=Strict``: authentication, RBAC (may this identity create them in the
namespace?), the CRD schema (an unknown or misspelt field is an error, not silently pruned), and
the admission webhooks (JobSet's and Kueue's defaulting and validation) all run, as for a real
submit; then the API server discards the objects.

Pod Security admission (and any other pod admission: a policy engine, the ServiceAccount and
PriorityClass checks) judges Pods, not JobSets: a JobSet whose pods break the namespace's level is
accepted, and its Jobs then fail to create pods (FailedCreate) with nothing in the JobSet's status
saying why. So each replicated job's pod template is also sent as a bare Pod, shaped like the first
pod its Job would create (pod_from_template). A Pod dry-run needs `create` on pods (render/rbac.py
grants it); an identity without it gets a verdict that says the pods were not judged, not a refusal,
since a real submit does not need that right.

What it cannot say: whether the pods will be scheduled (that is preflight's node check and the
queue's business).
"""
from __future__ import annotations

import copy
import hashlib
import re
import uuid

from ...config import Config
from ...errors import BackendError
from ...render import jobset as rj
from ...spec import JobSpec
from .api import JOBSETS, K8sClient, api_message, is_connection_error

JS = "jobset.sigs.k8s.io/"
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
_PSA = re.compile(r'violates PodSecurity "([a-z]+):')
_CAP = re.compile(r'must not include "([A-Z_]+)" in securityContext\.capabilities\.add')
# words of a Pod Security violation -> what to change in the config; only level privileged allows these
# (baseline says "hostPath volumes", restricted 'restricted volume type "hostPath"')
_PRIVILEGED_ONLY = {"non-default capabilities": "drop kubernetes.pod.capabilities",
                    "host namespaces": "set kubernetes.pod.host_network: false",
                    "hostPort": "set kubernetes.pod.host_network: false",
                    "hostPath": "set kubernetes.checkpoint_pvc (without it the checkpoints are a hostPath volume)"}
NOT_JUDGED = ("this identity may not create pods, so Pod Security and other pod admission did not judge the "
              "pod template (a real submit does not need that right; the Jobs create the pods)")


def pod_from_template(jobset: dict, rjob: dict, uid: str) -> dict:
    """The first pod (job index 0, completion index 0) the Job of replicated job rjob would create, as a
    bare Pod: the template's spec and labels plus what the JobSet and Job controllers add (recorded from
    the native cluster's pods, tests/fixtures/k8s/recorded), so a policy keyed on them matches as it
    would. uid stands in for the JobSet's and the Job's uids, which exist only once they are created.
    Only the template's labels and annotations are kept from its metadata; a generateName keeps any two
    dry-runs from clashing."""
    meta, ns = jobset["metadata"], jobset["metadata"]["namespace"]
    tmpl = copy.deepcopy(rjob["template"]["spec"]["template"])
    job = f"{meta['name']}-{rjob['name']}-0"
    # job-key is JobSet's sha1 of "<namespace>/<job>"; kueue.x-k8s.io/podset is Kueue's, added at admission
    js = {JS + "jobset-name": meta["name"], JS + "replicatedjob-name": rjob["name"],
          JS + "replicatedjob-replicas": str(rjob.get("replicas", 1)), JS + "job-index": "0",
          JS + "job-global-index": "0", JS + "restart-attempt": "0", JS + "jobset-uid": uid,
          JS + "job-key": hashlib.sha1(f"{ns}/{job}".encode()).hexdigest()}
    index = {"batch.kubernetes.io/job-completion-index": "0"} \
        if rjob["template"]["spec"].get("completionMode") == "Indexed" else {}
    labels = {**(tmpl.get("metadata") or {}).get("labels", {}), **js, **index,
              "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": job,
              "controller-uid": uid, "job-name": job, "kueue.x-k8s.io/podset": rjob["name"]}
    annotations = {**(tmpl.get("metadata") or {}).get("annotations", {}), **js, **index}
    spec = tmpl["spec"]
    spec.pop("ephemeralContainers", None)   # refused on create: only the ephemeralcontainers subresource adds them
    network = jobset["spec"].get("network") or {}
    if network.get("enableDNSHostnames", True):
        spec.setdefault("subdomain", network.get("subdomain") or meta["name"])
        spec.setdefault("hostname", f"{job}-0")
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{job}-0-", "namespace": ns, "labels": labels,
                         "annotations": annotations},
            "spec": spec}


def dry_run(client: K8sClient, job: rj.K8sJob) -> list[dict]:
    """One verdict per object of the job, in apply order, then one per pod template:
    {kind, name, namespace, ok, status?, message?, note?}."""
    core, co, ns = client.core(), client.custom(), job.namespace
    out = []
    for obj in job.objects:
        kind, name = obj["kind"], obj["metadata"]["name"]

        def send(obj=obj, kind=kind):
            if kind == "ConfigMap":
                core.create_namespaced_config_map(ns, obj, dry_run="All", field_validation="Strict",
                                                  _request_timeout=client.timeout)
            elif kind == "JobSet":
                co.create_namespaced_custom_object(JOBSETS.group, JOBSETS.version, ns, JOBSETS.plural, obj,
                                                   dry_run="All", field_validation="Strict",
                                                   _request_timeout=client.timeout)
            else:
                raise ValueError(f"no dry-run for {kind}")
        out.append(_verdict(client, kind, name, ns, send))
    uid = str(uuid.uuid4())
    for rjob in job.jobset["spec"]["replicatedJobs"]:
        pod = pod_from_template(job.jobset, rjob, uid)
        v = _verdict(client, "Pod", pod["metadata"]["generateName"].rstrip("-"), ns,
                     lambda pod=pod: core.create_namespaced_pod(ns, pod, dry_run="All", field_validation="Strict",
                                                                _request_timeout=client.timeout))
        if v.get("status") == 403 and "cannot create resource" in v.get("message", ""):
            v.update(ok=True, judged=False, note=NOT_JUDGED)   # RBAC's refusal, not admission's
        out.append(dict(v, replicated_job=rjob["name"]))
    return out


def _verdict(client: K8sClient, kind: str, name: str, ns: str, send) -> dict:
    from kubernetes.client.rest import ApiException
    verdict: dict = {"kind": kind, "name": name, "namespace": ns}
    try:
        send()
        verdict["ok"] = True
    except ApiException as exc:
        # 409: a leftover of the same name; a real submit deletes it first, so the object is fine
        verdict.update(ok=exc.status == 409, status=exc.status, message=api_message(exc))
    except Exception as exc:
        if not is_connection_error(exc):
            raise
        raise BackendError(f"server dry-run: the API server at {client.host} is unreachable "
                           f"({type(exc).__name__})",
                           tip="start the cluster (`poc cluster up --k8s`) or fix kubernetes.kubeconfig") from None
    return verdict


def validate_config(cfg: Config, specs: list[JobSpec], client: K8sClient | None = None) -> dict:
    """Dry-run the jobs a campaign of cfg submits on Kubernetes (``specs``: the scenarios' plan,
    harness/scenarios.py submitted_specs); {"ok", "api_server", "objects": [verdicts]}.
    client: the API client (default: the one the config's kubeconfig gives, as a campaign would use)."""
    from .backend import KubernetesBackend
    backend = KubernetesBackend.from_config(cfg)      # renders exactly what a campaign would submit
    c = client or backend.client
    try:
        verdicts = []
        for s in specs:
            verdicts += [dict(v, run_id=s.run_id) for v in dry_run(c, backend.render(s).payload)]
        return {"ok": all(v["ok"] for v in verdicts), "api_server": c.host, "objects": verdicts}
    finally:
        backend.close()


def pod_security_tip(message: str, namespace: str) -> str | None:
    """What to change when Pod Security admission refused the pod; None for any other refusal."""
    m = _PSA.search(message)
    if not m:
        return None
    level = m.group(1)
    caps = sorted(set(_CAP.findall(message)))
    cap_change = _PRIVILEGED_ONLY["non-default capabilities"]
    changes = sorted({change for words, change in _PRIVILEGED_ONLY.items() if words in message} |
                     ({cap_change} if caps else set()))
    changes = [f"{c} ({', '.join(caps)})" if c == cap_change and caps else c for c in changes]
    if changes:   # what the config adds: no level below privileged allows it
        what, needed = " and ".join(changes), "privileged"
    else:         # restricted's own demands (runAsNonRoot, seccompProfile, capabilities drop ALL): not rendered
        what, needed = "the harness's pods do not set what this level demands", "baseline"
    return (f"namespace {namespace} enforces Pod Security level {level!r} (its label {PSA_ENFORCE}), so the "
            f"JobSet would be accepted and its pods refused (FailedCreate): {what}, or ask the cluster admins "
            f"for level {needed!r} there (or an exemption for these pods); `kubectl get ns {namespace} "
            "--show-labels` shows the level")


_TIPS = {401: "the kubeconfig's credentials were refused",
         403: "this identity may not create it there: apply rbac.yaml from `poc render --platform k8s --out DIR` "
              "(or ask the cluster admins to)",
         404: "the namespace or the API (JobSet) is missing: check kubernetes.namespace and that JobSet is installed"}


def failure(result: dict) -> BackendError | None:
    """The first refusal as an error for the CLI's ERROR/TIP boundary; None when all passed."""
    bad = [v for v in result["objects"] if not v["ok"]]
    if not bad:
        return None
    v = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    what = f"{v['kind']} {v['namespace']}/{v['name']}"
    if v["kind"] == "Pod":
        what += f" (the pod template of replicated job {v.get('replicated_job')}, sent as a bare Pod)"
        tip = pod_security_tip(v.get("message") or "", v["namespace"]) or (
            "pod admission refused the pods this JobSet's Jobs would create, so they would never start "
            "(FailedCreate): fix what the message names in kubernetes.pod (a service account, priority class or "
            "setting the namespace's policy refuses), or ask the cluster admins")
    else:
        tip = _TIPS.get(v.get("status"), "fix the config (or the rendered object) as the message says; "
                                         "`poc render --platform k8s --out DIR` shows what was sent")
    return BackendError(f"the API server at {result['api_server']} refused {what} "
                        f"(run {v['run_id']}): HTTP {v.get('status')}: {v.get('message')}{more}", tip=tip)
