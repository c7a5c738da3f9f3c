"""What the harness sets up on the local Kubernetes cluster before a campaign: the namespace,
Kueue's queues (a quota for ``queue_jobs`` jobs of the config's shape) and the worker image on
every node. Only for the cluster this project runs; on a user's cluster nothing is created.

``client`` is the backend's K8sClient (call, patiently, core, custom); the objects come from the
pure renderer, so what is created here is what `poc render --platform k8s` prints.
"""
from __future__ import annotations

import time

from ...clusters import images, native_k8s
from ...errors import BackendError
from ...render import jobset as rj

SETUP_KINDS = ("Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue")


def setup_local(client, objects: list[dict], namespace: str, *, import_image: bool,
                clock=time.monotonic, sleep=time.sleep) -> dict:
    """Create what is absent; keep an existing ClusterQueue's quota in step. Returns what it did."""
    report: dict = {"created": [], "updated": []}
    for obj in objects:
        if obj["kind"] in SETUP_KINDS:
            _create_or_update(client, obj, namespace, report)
    # the default service account appears shortly after the namespace; pods need it
    deadline = clock() + 30
    while clock() < deadline:
        if client.call("GET serviceaccount default", client.core().read_namespaced_service_account, "default",
                       namespace, missing_ok=True) is not None:
            break
        sleep(0.5)
    if import_image:
        t0 = clock()
        try:
            ref = images.ensure_worker_image()
            report["image_import"] = native_k8s.import_image(ref)
        except Exception as exc:  # noqa: BLE001 - ClusterError, CommandError: reported with the tip below
            raise BackendError(f"the worker image could not be put on the local cluster's nodes: "
                               f"{getattr(exc, 'message', exc)}",
                               tip="poc cluster images worker; then retry") from None
        report["image_s"] = round(clock() - t0, 1)
    return report


def _create(client, obj: dict, namespace: str):
    core, co = client.core(), client.custom()
    group, version = rj.KUEUE_API.split("/")
    kind = obj["kind"]
    if kind == "Namespace":
        return lambda: core.create_namespace(obj, _request_timeout=client.timeout)
    if kind == "LocalQueue":
        return lambda: co.create_namespaced_custom_object(group, version, namespace, "localqueues", obj,
                                                          _request_timeout=client.timeout)
    return lambda: co.create_cluster_custom_object(group, version, kind.lower() + "s", obj,
                                                   _request_timeout=client.timeout)


def _create_or_update(client, obj: dict, namespace: str, report: dict, patience_s: float = 60) -> None:
    """Kueue's webhooks answer 500 while Kueue (re)starts: waited out for patience_s."""
    from kubernetes.client.rest import ApiException
    kind, name = obj["kind"], obj["metadata"]["name"]
    try:
        client.patiently(_create(client, obj, namespace), patience_s)
        report["created"].append(f"{kind}/{name}")
        return
    except ApiException as exc:
        if exc.status != 409:
            raise BackendError(f"creating {kind} {name}: HTTP {exc.status} {exc.reason}: {client.message(exc)}",
                               tip="is Kueue running? its webhooks must answer") from None
    if kind == "ClusterQueue":  # it exists: keep its quota at what fits queue_jobs of this config's job
        group, version = rj.KUEUE_API.split("/")
        co = client.custom()
        cur = client.call(f"GET ClusterQueue {name}", co.get_cluster_custom_object, group, version, "clusterqueues",
                          name)
        want = obj["spec"]["resourceGroups"]
        if cur["spec"].get("resourceGroups") != want:
            client.call(f"PATCH ClusterQueue {name}", co.patch_cluster_custom_object, group, version,
                        "clusterqueues", name, {"spec": {"resourceGroups": want}})
            report["updated"].append(f"ClusterQueue/{name}")
