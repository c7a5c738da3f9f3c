"""Following pod logs as they are written (``follow=true``), one thread per running pod.

Polling the log endpoint once a poll makes an event wait up to a whole poll interval before the
harness sees it; a followed log delivers each line as the kubelet reads it. The stream can end
(the container exited, the API server or kubelet went away): the thread reconnects from a little
before its last line (``sinceSeconds``; ``PodLog`` and the caller's ``Unseen`` drop the repeats)
until it is stopped. The backend reads once more with a plain request when a pod has ended, so
nothing the stream missed is lost.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .logs import PodLog

READ_TIMEOUT_S = 60     # an idle stream (a hung rank prints nothing) is re-opened after this


def whole_lines(chunks):
    """Chunks of a byte stream -> text blocks of whole lines (a line cut between chunks waits for its end)."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        head, sep, buf = buf.rpartition(b"\n")
        if sep:
            yield head.decode("utf-8", errors="replace")


class Follower:
    def __init__(self, core, ns: str, pod: str, container: str, log: PodLog, lock: threading.Lock,
                 count: Callable[[str], None] = lambda what: None):
        self.core, self.ns, self.pod, self.container = core, ns, pod, container
        self.count = count          # each stream opened is one request to the API server
        self.log, self.lock = log, lock
        self.events: list[dict] = []
        self.error = ""
        self.streams = 0
        self._stop = threading.Event()
        self._resp = None
        self._thread = threading.Thread(target=self._run, name=f"poc-log-{pod}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                since = self.log.since_seconds(time.time())
            kw = {"container": self.container, "timestamps": True, "follow": True}
            if since is not None:
                kw["since_seconds"] = since
            try:
                self.count("FOLLOW pod log")
                self._resp = self.core.read_namespaced_pod_log(self.pod, self.ns, _preload_content=False,
                                                               _request_timeout=(10, READ_TIMEOUT_S), **kw)
                self.streams += 1
                self._pump(self._resp)
            except Exception as exc:  # noqa: BLE001 - any break of the stream: note it, re-open it
                self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            finally:
                self._close()
            self._stop.wait(0.5)

    def _pump(self, resp) -> None:
        for text in whole_lines(resp.stream(65536, decode_content=True)):
            if self._stop.is_set():
                return
            now = time.time()
            events = self.log.feed_locked(text, self.lock)
            for e in events:          # when the harness had it (the pipeline keeps the first stamp)
                e.setdefault("observed_at", now)
            with self.lock:
                self.events += events

    def _close(self) -> None:
        resp, self._resp = self._resp, None
        if self._stop.is_set():
            try:
                self.core.api_client.close()
            except Exception:  # noqa: BLE001, S110 - its pool may already be closed
                pass
        if resp is not None:
            try:
                resp.release_conn()
                resp.close()
            except Exception:  # noqa: BLE001, S110 - closing a broken connection may fail; it is gone either way
                pass

    def take(self) -> list[dict]:
        with self.lock:
            out, self.events = self.events, []
        return out

    def stop(self) -> None:
        self._stop.set()
        self._close()


class Followers:
    """pod -> its Follower; the caller decides which pods to follow and when to stop.
    count: told "FOLLOW pod log" for each stream opened (K8sClient.count)."""

    def __init__(self, core_factory, container: str, count: Callable[[str], None] = lambda what: None):
        self.core_factory, self.container, self.count = core_factory, container, count
        self._f: dict[tuple[str, str], Follower] = {}
        self._lock = threading.Lock()       # one lock for every PodLog a follower feeds

    def follow(self, ns: str, pod: str, log: PodLog) -> Follower:
        key = (ns, pod)
        if key not in self._f:
            self._f[key] = Follower(self.core_factory(), ns, pod, self.container, log, self._lock, self.count)
        return self._f[key]

    def get(self, ns: str, pod: str) -> Follower | None:
        return self._f.get((ns, pod))

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def stop(self, ns: str, pod: str) -> list[dict]:
        """Stop following; the events it had not handed over yet."""
        f = self._f.pop((ns, pod), None)
        if f is None:
            return []
        f.stop()
        return f.take()

    def stop_all(self) -> None:
        for f in self._f.values():
            f.stop()
        self._f.clear()
