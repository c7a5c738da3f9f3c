"""A watch cache: one kind in one namespace, kept current by a background thread.

List once (with its resourceVersion), then apply ADDED/MODIFIED/DELETED; list again when the
watch ends or fails. ``objects()`` is None while the cache is out of sync, and the caller lists
instead: a poll never acts on a stale picture after the API server went away.

A cache may keep what DELETED events carried (``keep_gone``): a JobSet restart deletes the pods
of the earlier attempt, and their last state (containers' finishedAt, deletionTimestamp) is
evidence of when that attempt ended; the harness clock when the event arrived bounds the deletion.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from ...render import jobset as rj
from .api import JOBSETS, WORKLOADS, K8sClient
from .state import get, workload_of

Key = tuple[str, str]          # (namespace, JobSet name)
GONE_MAX = 4096                # deleted objects kept per cache (a campaign's runs each read theirs at collect)


def _name(o) -> str:
    return o["metadata"]["name"] if isinstance(o, dict) else o.metadata.name


class Watched:
    def __init__(self, what: str, list_fn, args: tuple, kwargs: dict, timeout: float,
                 convert: Callable[[object], dict] = lambda o: o, keep_gone: bool = False,
                 count: Callable[[str], None] = lambda what: None):
        self.what, self.list_fn, self.args, self.kwargs, self.timeout = what, list_fn, args, kwargs, timeout
        self.count = count          # each request this cache makes: "LIST <kind> (watch)", "WATCH <kind>"
        self.kind = what.split("/")[0]
        self.convert = convert
        self.keep_gone = keep_gone
        self._objs: dict[str, dict] = {}
        self._gone: OrderedDict[str, tuple[float, dict]] = OrderedDict()   # uid -> (seen at, last object)
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self.relists = 0
        self.last_error = ""
        self._thread = threading.Thread(target=self._run, name=f"poc-watch-{what}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import watch
        while not self._stop.is_set():
            w = None
            try:
                self.count(f"LIST {self.kind} (watch)")
                resp = self.list_fn(*self.args, _request_timeout=self.timeout, **self.kwargs)
                if isinstance(resp, dict):
                    items, rv = resp.get("items", []), resp["metadata"].get("resourceVersion")
                else:
                    items, rv = resp.items, resp.metadata.resource_version
                with self._lock:
                    self._objs = {_name(o): self.convert(o) for o in items}
                self.relists += 1
                self._synced.set()
                w = watch.Watch()
                self.count(f"WATCH {self.kind}")
                for ev in w.stream(self.list_fn, *self.args, resource_version=rv, timeout_seconds=55,
                                   _request_timeout=70, allow_watch_bookmarks=False, **self.kwargs):
                    if self._stop.is_set():
                        break
                    kind, obj = ev.get("type"), ev.get("object")
                    if kind == "ERROR" or obj is None:
                        break                                   # e.g. 410 Gone: list again
                    with self._lock:
                        if kind == "DELETED":
                            self._objs.pop(_name(obj), None)
                            if self.keep_gone:
                                self._bury(time.time(), self.convert(obj))
                        else:
                            self._objs[_name(obj)] = self.convert(obj)
            except Exception as exc:  # noqa: BLE001 - API server away: out of sync until the next list
                self._synced.clear()
                self.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
                self._stop.wait(1.0)
            finally:
                if w is not None:
                    w.stop()

    def objects(self, wait_s: float = 0.0) -> list[dict] | None:
        if not self._synced.wait(wait_s):
            return None
        with self._lock:
            return list(self._objs.values())

    def _bury(self, seen_at: float, obj: dict) -> None:
        uid = get(obj, "metadata", "uid") or get(obj, "metadata", "name")
        self._gone[uid] = (seen_at, obj)
        while len(self._gone) > GONE_MAX:
            self._gone.popitem(last=False)

    def gone(self) -> list[tuple[float, dict]]:
        """(harness clock when the DELETED event arrived, the object it carried), oldest first."""
        with self._lock:
            return list(self._gone.values())

    def stop(self) -> None:
        self._stop.set()


class Looks:
    """One consistent look at several runs' JobSets, Workloads and Pods: from the watch caches when
    they are in sync, else one list per kind and namespace. Keys are (namespace, JobSet name)."""

    def __init__(self, client: K8sClient, use_watches: bool = True, owner: str = ""):
        self.client, self.use_watches = client, use_watches
        # the campaign's owner id (set by the backend's submit): the watches and lists select its objects only
        self.owner = owner
        self._watches: dict[str, tuple[Watched, Watched, Watched]] = {}
        self.stats = {"from_watches": 0, "from_lists": 0}

    def _watched(self, ns: str) -> tuple[Watched, Watched, Watched]:
        if ns not in self._watches:
            c, t = self.client, self.client.timeout
            co, core = c.custom(), c.core()
            self._watches[ns] = (
                Watched(f"jobsets/{ns}", co.list_namespaced_custom_object, (*JOBSETS[:2], ns, JOBSETS.plural),
                        {"label_selector": self._selector()}, t, count=c.count),
                Watched(f"workloads/{ns}", co.list_namespaced_custom_object, (*WORKLOADS[:2], ns, WORKLOADS.plural),
                        {}, t, count=c.count),
                Watched(f"pods/{ns}", core.list_namespaced_pod, (ns,), {"label_selector": self._selector()}, t,
                        convert=c.to_dict, keep_gone=True, count=c.count))
        return self._watches[ns]

    def look(self, keys: list[Key]) -> tuple[dict, dict, dict]:
        if self.use_watches:
            cached = self._from_watches(keys)
            if cached is not None:
                self.stats["from_watches"] += 1
                return cached
        self.stats["from_lists"] += 1
        c = self.client
        js: dict = {}
        wl: dict = {}
        pods: dict = {}
        for ns in sorted({ns for ns, _ in keys}):
            names = sorted(n for k_ns, n in keys if k_ns == ns)
            sel = f"{rj.JOBSET_NAME_LABEL} in ({','.join(names)})" + (
                f",{rj.OWNER_LABEL}={self.owner}" if self.owner else "")
            j_items = c.list("LIST jobsets", JOBSETS, ns, label_selector=self._selector())
            w_items = c.list("LIST workloads", WORKLOADS, ns)
            p_items = [c.to_dict(p) for p in c.call("LIST pods", c.core().list_namespaced_pod, ns,
                                                     label_selector=sel).items]
            _file(ns, set(names), j_items, w_items, p_items, js, wl, pods)
        return js, wl, pods

    def _selector(self) -> str:
        return "poc/platform=k8s" + (f",{rj.OWNER_LABEL}={self.owner}" if self.owner else "")

    def _from_watches(self, keys: list[Key]) -> tuple[dict, dict, dict] | None:
        """None when a cache is out of sync or lacks a run's JobSet (just created, or gone)."""
        js: dict = {}
        wl: dict = {}
        pods: dict = {}
        for ns in sorted({ns for ns, _ in keys}):
            got = [x.objects(wait_s=5.0) for x in self._watched(ns)]
            if any(g is None for g in got):
                return None
            names = {n for k_ns, n in keys if k_ns == ns}
            _file(ns, names, *got, js, wl, pods)
            if any((ns, n) not in js for n in names):
                return None
        return js, wl, pods

    def gone_pods(self, ns: str) -> list[tuple[float, dict]]:
        """Pods of ns deleted while its pod watch ran: (when the DELETED event arrived, last object)."""
        trio = self._watches.get(ns)
        return trio[2].gone() if trio else []

    def stop(self) -> None:
        for trio in self._watches.values():
            for w in trio:
                w.stop()
        self._watches.clear()


def _file(ns, names, j_items, w_items, p_items, js, wl, pods) -> None:
    for o in j_items:
        js[(ns, o["metadata"]["name"])] = o
    for owner, o in workload_of(w_items).items():
        wl[(ns, owner)] = o
    for p in p_items:
        owner = get(p, "metadata", "labels", rj.JOBSET_NAME_LABEL)
        if owner in names:
            pods.setdefault((ns, owner), []).append(p)
