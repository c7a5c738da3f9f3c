"""What a user can read about a run right now, in Kubernetes' own words (the mistake probe's view).

A user who submitted a JobSet finds out what is wrong from, in the order they usually look:
``kubectl get/describe jobset`` (its conditions), ``kubectl describe workload`` (Kueue's
QuotaReserved/Admitted messages: "couldn't assign flavors ...", "LocalQueue x doesn't exist"),
``kubectl describe pod`` (the PodScheduled condition, each container's waiting/terminated reason
and message: ErrImagePull, CreateContainerConfigError, ...; the Warning events below it) and
``kubectl logs`` of a failed container (python's "can't open file"). ``messages`` turns one look at
those objects into ``{"source", "text"}`` dicts (pure; fed recorded objects in the tests);
``view`` takes the look.

A look costs one API call in the steady state: the JobSet, Workload and pods come from the
backend's watch caches (``Looks``), the events are one list of the namespace, and a failed
container's log is read once (a terminated container's log no longer changes).
"""
from __future__ import annotations

import re
import weakref

from ...errors import BackendError
from ...render import jobset as rj
from ..base import Handle
from .evidence_raw import owned_by, run_events
from .state import get, items

LOG_TAIL_LINES = 20         # a failed container's last lines, when torchrun's report is not among them
LOG_READ_LINES = 120        # read: torchrun's traceback and summary are ~45 lines after the workload's error
CHILD_LINES = 10            # the workload's last lines before torchrun reports it failed
LINE_MAX = 400              # one log line, as shown (a traceback line can be long)
EVENT_TYPES = ("Warning",)  # Normal events say what went right (Scheduled, Pulled, Started)
# torch.distributed.elastic's line when a worker process exits non-zero (torch 2.x)
_AGENT_FAILED = re.compile(r"failed \(exitcode: -?\d+\) local_rank: ")

# backend -> {(pod uid, container, restartCount): log excerpt}; dies with its backend
_TAILS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _add(out: list[dict], seen: set, source: str, text) -> None:
    text = str(text or "").strip()
    if text and (source, text) not in seen:
        seen.add((source, text))
        out.append({"source": source, "text": text})


def condition_messages(out: list[dict], seen: set, obj: dict | None, what: str) -> None:
    """Each condition that carries a message, as `kubectl describe` shows it."""
    for c in items(obj, "status", "conditions"):
        if c.get("message"):
            _add(out, seen, f"{what} condition {c.get('type')}", c["message"])


def failed_containers(pods: list[dict]) -> list[tuple[dict, dict]]:
    """(pod, container status) of containers that ended with a non-zero exit code."""
    out = []
    for p in pods:
        for cs in items(p, "status", "containerStatuses"):
            code = get(cs, "state", "terminated", "exitCode")
            if code not in (None, 0):
                out.append((p, cs))
    return out


def tail_key(pod: dict, cs: dict) -> tuple:
    return (get(pod, "metadata", "uid") or get(pod, "metadata", "name"), cs.get("name"), cs.get("restartCount", 0))


def messages(jobset: dict | None, workload: dict | None, pods: list[dict], events: list[dict],
             logs: dict[str, str] | None = None) -> list[dict]:
    """One look at a run's objects -> what a user can read, each once, in the order they would look.

    events: already the run's own (``evidence_raw.run_events``); logs: pod name -> its failed
    container's log excerpt (``log_excerpt``)."""
    out: list[dict] = []
    seen: set = set()
    condition_messages(out, seen, jobset, "JobSet")
    condition_messages(out, seen, workload, "Kueue Workload")
    for p in pods:
        for c in items(p, "status", "conditions"):
            if c.get("type") == "PodScheduled" and c.get("status") != "True" and c.get("message"):
                _add(out, seen, "pod condition PodScheduled", f"{c.get('reason', '')}: {c['message']}".lstrip(": "))
        for cs in items(p, "status", "initContainerStatuses") + items(p, "status", "containerStatuses"):
            waiting = get(cs, "state", "waiting", default={})
            if waiting.get("reason") and waiting["reason"] != "ContainerCreating":
                _add(out, seen, "container waiting reason",
                     f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": "))
            done = get(cs, "state", "terminated", default={})
            if done and done.get("exitCode") not in (None, 0):
                _add(out, seen, "container terminated reason",
                     f"{done.get('reason', 'Terminated')} (exit code {done['exitCode']}): "
                     f"{done.get('message', '')}".rstrip(": "))
    for e in sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or "")):
        if e.get("type") in EVENT_TYPES:
            kind = str(get(e, "involvedObject", "kind", default="") or get(e, "regarding", "kind", default=""))
            _add(out, seen, f"{kind.lower() or 'object'} event {e.get('reason', '')}".rstrip(), e.get("message"))
    for text in (logs or {}).values():
        _add(out, seen, "pod log", text)
    return out


def log_excerpt(text: str) -> str:
    """What a failed container's log says went wrong. torchrun ends a failed run with its own
    traceback and a summary naming the script ("/opt/poc/x.py FAILED"); the workload's own last
    words (python's "can't open file ...", the tail of its traceback) come just before torchrun's
    "failed (exitcode: N) local_rank: ..." line. Without that line (not torchrun, or cut off): the
    last lines."""
    lines = [ln.rstrip()[:LINE_MAX] for ln in str(text or "").splitlines() if ln.strip()]
    cut = next((i for i, ln in enumerate(lines) if _AGENT_FAILED.search(ln)), None)
    if cut is None:
        return "\n".join(lines[-LOG_TAIL_LINES:])
    summary = [ln for ln in lines[cut:] if ln.endswith(" FAILED")]
    return "\n".join(lines[max(0, cut - CHILD_LINES):cut] + summary)


def view(backend, handle: Handle) -> list[dict]:
    """What a user can read about handle's run right now (see ``messages``). API errors are not
    raised: a look that cannot be taken says so as its one message, and the next look tries again."""
    c = backend.client
    ns, name = handle.data["namespace"], handle.data["name"]
    try:
        js, wl, pods = backend.looks.look([(ns, name)])
    except BackendError as exc:
        return [{"source": "harness", "text": f"cannot read the run's objects: {exc.message}"}]
    j = js.get((ns, name))
    if j is not None and get(j, "metadata", "uid") != handle.data.get("uid"):
        j = None            # a different JobSet of the same name
    w, ps = wl.get((ns, name)), [p for p in pods.get((ns, name), []) if j is None or owned_by(p, j)]
    try:
        evs = [c.to_dict(e) for e in c.call("LIST events", c.core().list_namespaced_event, ns).items]
    except BackendError:
        evs = []            # the objects' own words still stand
    return messages(j, w, ps, run_events(evs, ns, name, j, w, ps), log_excerpts(backend, ns, ps))


def read_log(client, ns: str, pod: dict, cs: dict) -> str:
    """A container's last LOG_READ_LINES lines, as the API server returns them."""
    return client.call("READ pod log", client.core().read_namespaced_pod_log, get(pod, "metadata", "name"), ns,
                       container=cs.get("name") or rj.CONTAINER, tail_lines=LOG_READ_LINES)


def log_excerpts(backend, ns: str, pods: list[dict]) -> dict[str, str]:
    """pod name -> what its failed container's log says went wrong; each container read once."""
    try:
        cache = _TAILS.setdefault(backend, {})
    except TypeError:       # a backend that cannot be weakly referenced: read every look
        cache = {}
    out = {}
    for p, cs in failed_containers(pods):
        key = tail_key(p, cs)
        if key not in cache:
            try:
                cache[key] = log_excerpt(read_log(backend.client, ns, p, cs))
            except BackendError:
                continue    # the pod went away between the look and the read: the next look has its successor
        if cache[key]:
            out[get(p, "metadata", "name")] = cache[key]
    return out
