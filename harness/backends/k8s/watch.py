"""A watch cache: one kind in one namespace, kept current by a background thread.

List once (with its resourceVersion), then apply ADDED/MODIFIED/DELETED; list again when the
watch ends or fails. ``objects()`` is None while the cache is out of sync, and the caller lists
instead: a poll never acts on a stale picture after the API server went away.
"""
from __future__ import annotations

import threading
from collections.abc import Callable


def _name(o) -> str:
    return o["metadata"]["name"] if isinstance(o, dict) else o.metadata.name


class Watched:
    def __init__(self, what: str, list_fn, args: tuple, kwargs: dict, timeout: float,
                 convert: Callable[[object], dict] = lambda o: o):
        self.what, self.list_fn, self.args, self.kwargs, self.timeout = what, list_fn, args, kwargs, timeout
        self.convert = convert
        self._objs: dict[str, dict] = {}
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

    def stop(self) -> None:
        self._stop.set()
