"""The Kubernetes API as the backend uses it: one client, one error mapping, one retry rule.

``K8sClient`` loads the kubeconfig only when first used, so a backend built from a config renders
jobs on a machine with no cluster. Every call goes through ``call()``: a time-out, 404 as None where
the caller allows it, and API errors as BackendError carrying the API server's own message.
"""
from __future__ import annotations

import collections
import datetime as dt
import json
import time
from pathlib import Path
from typing import NamedTuple

from ...errors import BackendError
from ...render import jobset as rj


class Resource(NamedTuple):
    """A custom resource's coordinates, as CustomObjectsApi takes them."""
    group: str
    version: str
    plural: str


def _resource(api_version: str, plural: str) -> Resource:
    group, version = api_version.split("/")
    return Resource(group, version, plural)


JOBSETS = _resource(rj.JOBSET_API, "jobsets")
WORKLOADS = _resource(rj.KUEUE_API, "workloads")
LOCALQUEUES = _resource(rj.KUEUE_API, "localqueues")
CLUSTERQUEUES = _resource(rj.KUEUE_API, "clusterqueues")
RESOURCEFLAVORS = _resource(rj.KUEUE_API, "resourceflavors")
TOPOLOGIES = _resource(rj.KUEUE_API, "topologies")   # Kueue TAS
WORKLOADPRIORITYCLASSES = _resource(rj.KUEUE_API, "workloadpriorityclasses")
CONFLICT = object()   # K8sClient.call(conflict_ok=True): the request got 409 Conflict


def parse_time(s) -> float | None:
    """An API timestamp (datetime, or RFC 3339 text with any fraction) -> epoch seconds; None for
    anything else. The harness reads text it does not control: a bad value is missing, not a crash."""
    if s is None:
        return None
    if isinstance(s, dt.datetime):
        return s.replace(tzinfo=s.tzinfo or dt.UTC).timestamp()
    text = str(s).strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    head, dot, rest = text.partition(".")
    if dot:  # fromisoformat takes at most 6 fraction digits; the kubelet writes 9
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[:min(digits, 6)]:0<6}{rest[digits:]}" if digits else head + rest
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if t.tzinfo is None:
        return None   # the API always says UTC; a zone-less stamp is not one of its timestamps
    try:
        return t.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


_UNITS = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
          "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6}


def qty(v) -> float:
    """A Kubernetes quantity -> a number (cpu in cores, memory in bytes); NaN when it is none."""
    s = str(v).strip()
    for u in sorted(_UNITS, key=len, reverse=True):
        if s.endswith(u):
            s, mult = s[: -len(u)], _UNITS[u]
            break
    else:
        mult = 1.0
    try:
        return float(s) * mult
    except ValueError:
        return float("nan")


def api_message(exc) -> str:
    """The API server's own message from an ApiException (its body is JSON when it has one)."""
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else (exc.body or "")
    try:
        return str(json.loads(body).get("message", body))
    except (ValueError, AttributeError):
        return str(body)


def tip_for_status(status: int) -> str:
    if status in (401, 403):
        return "the kubeconfig's identity lacks rights: apply rbac.yaml from `poc render --platform k8s --out DIR`"
    if status == 404:
        return "a resource is missing: check that JobSet and Kueue are installed and the namespace exists"
    return "see the API server's message above"


def is_connection_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("urllib3", "socket", "ssl")) or isinstance(exc, OSError)


def is_webhook_outage(exc: BaseException) -> bool:
    """JobSet's and Kueue's webhooks answer 500/503 while their controller (re)starts."""
    return getattr(exc, "status", None) in (500, 503) and "webhook" in str(getattr(exc, "body", "") or "")


def retry_webhook(fn, patience_s: float, *, clock=time.monotonic, sleep=time.sleep, interval_s: float = 2.0):
    """fn() again while a webhook is down, for patience_s; any other error, or the last one, is raised."""
    deadline = clock() + patience_s
    while True:
        try:
            return fn()
        except Exception as exc:
            if not is_webhook_outage(exc) or clock() >= deadline:
                raise
            sleep(interval_s)


class K8sClient:
    """One API client for one kubeconfig/context, created on first use.

    ``calls`` counts the requests made to the API server, by kind (``call()``'s ``what``, and what
    the watch caches and log streams open: "LIST pods (watch)", "WATCH pods", "FOLLOW pod log"), so
    the harness can say how many calls submitting, watching, reading logs and cancelling took."""

    def __init__(self, kubeconfig: str, context: str | None = None, *, timeout_s: float = 10.0, api_client=None):
        self.kubeconfig = kubeconfig
        self.context = context
        self.timeout = timeout_s
        self._api = api_client
        self.calls: collections.Counter[str] = collections.Counter()

    def count(self, what: str, n: int = 1) -> None:
        """Count a request made outside call() (a watch, a log stream, a webhook-retried create)."""
        self.calls[what] += n

    @property
    def api(self):
        if self._api is None:
            try:
                from kubernetes import client, config
            except ImportError as exc:
                raise BackendError(f"the kubernetes Python client is missing: {exc}",
                                   tip="pip install the project (it depends on kubernetes)") from None
            if not Path(self.kubeconfig).is_file():
                raise BackendError(f"kubeconfig {self.kubeconfig} does not exist",
                                   tip="run `poc cluster up --k8s` for the local cluster, or set kubernetes.kubeconfig")
            conf = client.Configuration()
            try:
                config.load_kube_config(config_file=self.kubeconfig, context=self.context, client_configuration=conf)
            except Exception as exc:  # noqa: BLE001 - the loader raises many kinds; all mean a bad kubeconfig
                raise BackendError(f"cannot load kubeconfig {self.kubeconfig}: {exc}",
                                   tip="check the file and kubernetes.context") from None
            conf.retries = 1
            self._api = client.ApiClient(conf)
        return self._api

    @property
    def host(self) -> str:
        return self.api.configuration.host

    def core(self):
        from kubernetes import client
        return client.CoreV1Api(self.api)

    def custom(self):
        from kubernetes import client
        return client.CustomObjectsApi(self.api)

    def apps(self):
        from kubernetes import client
        return client.AppsV1Api(self.api)

    def own_core(self):
        """A CoreV1Api on a client (and connection pool) of its own: for one long-lived log stream,
        or for kubernetes.stream(), which patches the client it is given."""
        from kubernetes import client
        return client.CoreV1Api(client.ApiClient(self.api.configuration))

    def to_dict(self, obj) -> dict:
        """A typed API object as the API server's JSON (camelCase, RFC 3339 times)."""
        return obj if isinstance(obj, dict) else self.api.sanitize_for_serialization(obj)

    @staticmethod
    def message(exc) -> str:
        return api_message(exc)

    def patiently(self, fn, patience_s: float):
        """fn() (a create) again while JobSet's or Kueue's webhook is down, for patience_s."""
        return retry_webhook(fn, patience_s)

    def call(self, what: str, fn, *args, missing_ok: bool = False, conflict_ok: bool = False, **kw):
        """One API call with a time-out; errors become BackendError naming the call. missing_ok: a 404
        returns None; conflict_ok: a 409 (a delete's uid precondition failed: the name is someone else's
        object now) returns CONFLICT."""
        from kubernetes.client.rest import ApiException
        self.calls[what] += 1     # a failed request was still made: it counts
        try:
            return fn(*args, _request_timeout=self.timeout, **kw)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            if conflict_ok and exc.status == 409:
                return CONFLICT
            raise BackendError(f"{what}: HTTP {exc.status} {exc.reason}: {api_message(exc)}".strip(),
                               tip=tip_for_status(exc.status)) from None
        except Exception as exc:
            if is_connection_error(exc):
                raise BackendError(f"{what}: the Kubernetes API server at {self.host} is unreachable "
                                   f"({type(exc).__name__})",
                                   tip="start the cluster (`poc cluster up --k8s`) or fix kubernetes.kubeconfig/context"
                                   ) from None
            raise

    # custom objects, by Resource
    def get(self, what: str, res: Resource, name: str, ns: str | None = None, **kw):
        co = self.custom()
        if ns is None:
            return self.call(what, co.get_cluster_custom_object, *res, name, **kw)
        return self.call(what, co.get_namespaced_custom_object, res.group, res.version, ns, res.plural, name, **kw)

    def list(self, what: str, res: Resource, ns: str, **kw) -> list[dict]:
        co = self.custom()
        return self.call(what, co.list_namespaced_custom_object, res.group, res.version, ns, res.plural, **kw)["items"]

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None
