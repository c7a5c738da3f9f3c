"""Server-side dry-run: the API server's verdict on the rendered objects, with nothing stored.

`poc validate --server-dry-run` sends every planned run's ConfigMap and JobSet with ``dryRun=All``
and ``fieldValidation=Strict``: authentication, RBAC (may this identity create them in the
namespace?), the CRD schema (an unknown or misspelt field is an error, not silently pruned), and
the admission webhooks (JobSet's and Kueue's defaulting and validation) all run, as for a real
submit; then the API server discards the objects. What it cannot say: whether the pods will be
scheduled (that is preflight's node check and the queue's business).
"""
from __future__ import annotations

from ...config import Config
from ...errors import BackendError
from ...render import jobset as rj
from ...spec import JobSpec
from .api import JOBSETS, K8sClient, api_message, is_connection_error


def dry_run(client: K8sClient, job: rj.K8sJob) -> list[dict]:
    """One verdict per object of the job, in apply order: {kind, name, ok, status?, message?}."""
    from kubernetes.client.rest import ApiException
    core, co, ns = client.core(), client.custom(), job.namespace
    out = []
    for obj in job.objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        verdict: dict = {"kind": kind, "name": name, "namespace": ns}
        try:
            if kind == "ConfigMap":
                core.create_namespaced_config_map(ns, obj, dry_run="All", field_validation="Strict",
                                                  _request_timeout=client.timeout)
            elif kind == "JobSet":
                co.create_namespaced_custom_object(JOBSETS.group, JOBSETS.version, ns, JOBSETS.plural, obj,
                                                   dry_run="All", field_validation="Strict",
                                                   _request_timeout=client.timeout)
            else:
                raise ValueError(f"no dry-run for {kind}")
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
        out.append(verdict)
    return out


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


def failure(result: dict) -> BackendError | None:
    """The first refusal as an error for the CLI's ERROR/TIP boundary; None when all passed."""
    bad = [v for v in result["objects"] if not v["ok"]]
    if not bad:
        return None
    v = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    tip = {401: "the kubeconfig's credentials were refused",
           403: "this identity may not create it there: apply rbac.yaml from `poc render --platform k8s --out DIR` "
                "(or ask the cluster admins to)",
           404: "the namespace or the API (JobSet) is missing: check kubernetes.namespace and that JobSet is "
                "installed"}.get(v.get("status"), "fix the config (or the rendered object) as the message says; "
                                                   "`poc render --platform k8s --out DIR` shows what was sent")
    return BackendError(f"the API server at {result['api_server']} refused {v['kind']} {v['namespace']}/{v['name']} "
                        f"(run {v['run_id']}): HTTP {v.get('status')}: {v.get('message')}{more}", tip=tip)
