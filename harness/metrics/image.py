"""Image pull: how long the first attempt waited for its container image, from the kubelet's own events.

image_pull_s (Kubernetes): per pod of the first attempt, the seconds from the kubelet's Pulling event to its
Pulled event for the pod's containers (0 where the image was already on the node); the value is the slowest
pod's, because the job starts when the last pod has its image. It lies inside launch_s (allocated -> every
rank's process started) and is not added to it. The facts come from the Kubernetes stamps
(harness/evidence/k8s.py ``image_pull``), so `poc rederive` reads the same events again.

What the kubelet writes (kubernetes/kubernetes, pkg/kubelet/images/image_manager.go), event reason Pulled:
* ``Container image "X" already present on machine`` (and, with KubeletEnsureSecretPulledImages,
  ``... and can be accessed by the pod``): no pull; 0 s exactly.
* ``Successfully pulled image "X" in A (B including waiting). Image size: N bytes.`` (kubelets since the
  image-size change, kubernetes#121719); ``... in A (B including waiting)`` before it (kubernetes#111772):
  A is the runtime's pull, B the time since the kubelet's Pulling event, queueing behind other pulls
  included (serializeImagePulls is the kubelet's default). Both are Go durations truncated to the
  millisecond; B is the figure (what the pod waited), A is kept as pull_s.
* ``Successfully pulled image "X" in B`` (older kubelets): B since the Pulling event, to the nanosecond.
* anything else (``Successfully pulled image "X"`` with no time, another runtime's words), or a pull the
  kubelet tried more than once (more than one Pulling event: the message times the last try only): from
  the first Pulling event to the Pulled event, at the events' whole seconds.
On Slurm with a container runtime the batch script imports the image as a step of its own before the others
(render/sbatch.py: pyxis under the job's container name, which the later steps reuse; apptainer's conversion of
a docker:// reference): image_pull_s is that step, the script's time-stamps around it (exact), all nodes at once.
Batch scripts from before the step had none: pyxis imported inside the training step (inside launch_s and
step_launch_s), and apptainer pulls nothing when given a .sif.
"""
from __future__ import annotations

import re

from ..timing import Span, Stamp
from .common import _span_metric

_GO = r"(?:\d+(?:\.\d+)?(?:ns|us|µs|μs|ms|s|m|h))+"
PRESENT = re.compile(r'Container image "(?P<image>[^"]*)" already present on machine')
PULLED = re.compile(rf'Successfully pulled image "(?P<image>[^"]*)"(?: in (?P<pull>{_GO})'
                    rf'(?: \((?P<total>{_GO}) including waiting\))?)?(?:\. Image size: (?P<bytes>\d+) bytes)?')
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|s|m|h)")
# per pod's figure, the resolution it was read at, coarsest last
MEASURED_MS = "the kubelet's measured duration (truncated to the ms)"
MEASURED_NS = "the kubelet's measured duration (ns)"
EVENTS = "the Pulling and Pulled events' whole seconds"
PRESENT_RES = "already present: 0 s"
_ORDER = (PRESENT_RES, MEASURED_NS, MEASURED_MS, EVENTS)


def go_duration(text: str) -> float:
    """Go's time.Duration.String() ("1m2.5s", "850ms", "0s") -> seconds."""
    return sum(float(n) * _UNIT[u] for n, u in _PART.findall(text))


def image_pull_metrics(st: dict) -> dict[str, dict]:
    """{"image_pull_s": metric} from the stamps' image_pull facts, or {} where there are none (Slurm, local,
    a Kubernetes run whose pods have no Pulled event kept)."""
    facts = st.get("image_pull")
    if not isinstance(facts, dict):
        return slurm_import(st)
    m = image_pull(facts.get("events") or [], facts.get("pods") or [])
    return {} if m is None else {"image_pull_s": m}


def image_pull(events: list[dict], pods: list[dict]) -> dict | None:
    """The metric from the kubelet's Pulling/Pulled events ({reason, uid, container, message, at (a Stamp)})
    about the first attempt's pods ({pod, uid, node, slot}); None without a Pulled event among them.
    Per slot (a pod the Job controller replaced keeps its slot), the pod whose image was ready first."""
    by_uid: dict[str, list[dict]] = {}
    for e in events:
        if isinstance(e, dict) and e.get("reason") in ("Pulling", "Pulled"):
            by_uid.setdefault(str(e.get("uid")), []).append(e)
    per_slot: dict[str, dict] = {}
    for p in pods:
        pod = _pod(p, by_uid.get(str(p.get("uid")), []))
        if pod is not None and (_slot(p) not in per_slot or _ready(pod) < _ready(per_slot[_slot(p)])):
            per_slot[_slot(p)] = pod
    if not per_slot:
        return None
    missing = sorted({_slot(p) for p in pods} - set(per_slot))    # a slot none of whose pods has a Pulled event
    chosen = list(per_slot.values())
    rows = [r for pod in chosen for r in pod["containers"]]
    known = not missing and all(pod["seconds"] is not None for pod in chosen)
    span = Span(*(max(pod[k] for pod in chosen) for k in ("seconds", "lo", "hi"))) if known else None
    slowest = max(chosen, key=lambda pod: (-1.0 if pod["seconds"] is None else pod["seconds"], str(pod["pod"])))
    ready = [r["pulled_at"] for r in rows if r["pulled_at"] is not None]
    detail = {"pods": [{k: v for k, v in r.items() if k != "pulled_at" and v is not None} for r in rows],
              "pre_staged": not missing and all(r["source"] == "already present" for r in rows),
              "slowest": slowest["pod"],
              "resolution": "; ".join(sorted({r["resolution"] for r in rows}, key=_ORDER.index)),
              "part_of": "launch_s"}
    if missing:
        detail["no_pulled_event"] = missing
    last = max(ready, key=lambda s: s.t) if ready else None
    return _span_metric("image_pull_s", span, {"image_ready": last}, **detail)


def _slot(p: dict) -> str:
    return str(p.get("slot") or p.get("pod"))


def _ready(pod: dict) -> float:
    t = [r["pulled_at"].t for r in pod["containers"] if r["pulled_at"] is not None]
    return max(t) if t else float("inf")


def _pod(p: dict, events: list[dict]) -> dict | None:
    """One pod: its containers' first Pulled event each (the kubelet pulls them one after another, so the
    pod's seconds are their sum); None without a Pulled event."""
    by_container: dict[str, list[dict]] = {}
    for e in sorted(events, key=lambda e: _t(e.get("at"))):
        by_container.setdefault(str(e.get("container") or ""), []).append(e)
    rows = [r for c, evs in by_container.items() if (r := _container(p, c, evs)) is not None]
    if not rows:
        return None
    known = all(r["seconds"] is not None for r in rows)
    return {"pod": p.get("pod"), "containers": rows,
            "seconds": sum(r["seconds"] for r in rows) if known else None,
            "lo": sum(r["lo"] for r in rows) if known else None, "hi": sum(r["hi"] for r in rows) if known else None}


def _container(p: dict, container: str, events: list[dict]) -> dict | None:
    pulled = next((e for e in events if e["reason"] == "Pulled"), None)
    if pulled is None:
        return None
    at: Stamp | None = pulled.get("at") if isinstance(pulled.get("at"), Stamp) else None
    tries = [e for e in events if e["reason"] == "Pulling" and isinstance(e.get("at"), Stamp)
             and (at is None or e["at"].lo <= at.hi)]
    msg = str(pulled.get("message") or "")
    row: dict = {"pod": p.get("pod"), "node": p.get("node") or pulled.get("node"), "container": container or None,
                 "image": None, "seconds": None, "lo": None, "hi": None, "source": "pulled", "bytes": None,
                 "pull_s": None, "tries": len(tries) if len(tries) > 1 else None, "message": msg,
                 "resolution": EVENTS, "pulled_at": at}
    present, got = PRESENT.search(msg), PULLED.search(msg)
    if present:
        row.update(image=present["image"], seconds=0.0, lo=0.0, hi=0.0, source="already present",
                   resolution=PRESENT_RES)
        return row
    if got:
        row.update(image=got["image"], bytes=int(got["bytes"]) if got["bytes"] else None)
        if got["total"]:
            row["pull_s"] = go_duration(got["pull"])
    if got and got["pull"] and len(tries) <= 1:
        waited = got["total"] or got["pull"]
        res, text = (1e-3, MEASURED_MS) if got["total"] else (1e-9, MEASURED_NS)
        s = go_duration(waited)
        row.update(seconds=s, lo=s, hi=s + res, resolution=text)
    elif tries and at is not None:
        span = Span.between(tries[0]["at"], at)     # whole seconds each: +-1 s
        row.update(seconds=max(span.value, 0.0), lo=max(span.lo, 0.0), hi=span.hi)
    return row


def _t(s) -> float:
    return s.t if isinstance(s, Stamp) else float("-inf")


def slurm_import(st: dict) -> dict[str, dict]:
    """Slurm's image import step of the first attempt (harness/evidence/slurm.py image_import); {} without one."""
    atts = st.get("attempts") or []
    imp = atts[0].get("image_import") if atts and isinstance(atts[0], dict) else None
    if not isinstance(imp, dict) or not isinstance(imp.get("start"), Stamp) or not isinstance(imp.get("done"), Stamp):
        return {}
    window = Span.between(imp["start"], imp["done"])
    return {"image_pull_s": _span_metric("image_pull_s", window, {"import_start": imp["start"],
                                                                  "import_done": imp["done"]},
                                         how="the batch script's image import step, every node at once (pyxis/enroot "
                                             "or apptainer), exit " + str(imp.get("rc")))}
