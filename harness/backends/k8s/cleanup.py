"""Removing a finished run's checkpoint sub-path (its checkpoints and event files) on Kubernetes.

* The native cluster: the hostPath directory is on this machine (<checkpoint_root>/<campaign>-<owner id>/
  <run_id>; the campaign's directory name is spec.campaign_dir).
* A PersistentVolumeClaim: only a pod can reach it, so a short cleanup pod (render/cleanup.py) removes
  /poc-run/<campaign>-<owner id>/<run_id>, is waited for with a time-out, and is deleted after. The pod
  carries the campaign's poc/owner label: a pod of its name that is not the campaign's (another user's
  run of the same id) is left alone and the cleanup refused, and the harness deletes its own pod by uid.
Either way the directory goes only when the owner mark the run's pods wrote in it (render/owned_dir.py)
is the run's (spec.owner_mark: a keyed digest of that directory's path; the owner id in records of an
older harness); a directory with another mark, or none, is kept and the record says why.
* A hostPath on a real cluster's nodes: not reachable from here; kept, and the record says so.

The caller (KubernetesBackend.cleanup, after collect and cancel) decides whether to remove at all
(keep_run_files); a failure here is a warning in the run record, never a failed run.

Before a submit (prepare_run_dir) the same command runs in its "prepare" mode, as the Slurm backend's
does: a re-run of the run (`poc run --resume`: the same owner id and run id, so the same sub-path) starts
afresh instead of resuming from the interrupted attempt's checkpoints, and the directory holds the
run's mark before any pod starts. A directory that is not the campaign's refuses the submit.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from ...config import Kubernetes
from ...errors import BackendError, SubmitError
from ...render import cleanup as rc
from ...render.owned_dir import MARK_NOT_OURS, OWNER_MARK, owned_dir_argv
from . import ownership
from .api import K8sClient
from .state import get


def host_path_dir(root: str, path: str, campaign: str, run_id: str) -> Path:
    """path, checked to be exactly <root>/<campaign>/<run_id>: an rmtree never reaches elsewhere."""
    try:
        rc.cleanup_target(campaign, run_id)   # plain names only
    except ValueError as exc:
        raise BackendError(f"refusing to remove {path!r}: {exc}", tip="nothing was removed") from None
    want = Path(os.path.normpath(root)) / campaign / run_id
    got = Path(os.path.normpath(path))
    if got != want or not want.is_absolute():
        raise BackendError(f"refusing to remove {path!r}: not the run's directory {str(want)!r} under the "
                           "checkpoint root", tip="report this as a harness bug; nothing was removed")
    return got


NOT_OURS = "its owner mark is not this run's (or it has none): kept, nothing removed"


def mark_is(d: Path, mark: str) -> bool:
    """The directory's owner mark file (not through a link) holds exactly mark (compared in constant time)."""
    import hmac
    if not mark:
        return False
    try:
        fd = os.open(d / OWNER_MARK, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fh:
        got = fh.read(4096).strip()
    return hmac.compare_digest(got, mark.encode())


def remove_host_path(root: str, path: str, campaign: str, run_id: str, mark: str = "",
                     run=subprocess.run, mode: str = "remove") -> dict:
    """The run's directory on this machine, removed by the same owned-directory command the cleanup pod
    and the Slurm backend run (render/owned_dir.py): one rule for the owner mark, wherever it is applied.
    mark: the run directory's owner mark (spec.owner_mark). mode "prepare": made afresh with the mark in
    it instead (before a submit)."""
    d = host_path_dir(root, path, campaign, run_id)
    res = run(owned_dir_argv(mode, str(d), mark), capture_output=True, text=True, timeout=120, check=False)
    if res.returncode == MARK_NOT_OURS:
        return {"removed": [], "kept": [str(d)], "reason": NOT_OURS}
    if res.returncode != 0:
        raise BackendError(f"could not {mode} {d}: {res.stderr.strip()[:300]}", tip="nothing else was touched")
    if mode == "remove":
        try:
            d.parent.rmdir()     # the campaign's directory, once its last run is gone
        except OSError:
            pass
    return {"removed": [str(d)], "kept": []}


def prepare_run_dir(client: K8sClient, k: Kubernetes, image: str, *, pvc: str | None, local: bool,
                    checkpoint_root: str, path: str, campaign: str, run_id: str, owner: str,
                    mark: str | None = None) -> dict | None:
    """Before the run's JobSet is created: its checkpoint sub-path made afresh with the run's mark
    (mark: spec.owner_mark, what the run's pods write there too; the owner id when None)
    (a cleanup pod on a PVC, the owned-directory command on this machine's hostPath); None where the
    harness cannot reach it (a hostPath on a real cluster's nodes). SubmitError, touching nothing, when
    a directory of that path is not the campaign's: the run would resume from its checkpoints."""
    mark = owner if mark is None else mark
    if pvc:
        out = run_cleanup_pod(client, k, image, pvc, campaign, run_id, owner=owner, mark=mark, mode="prepare",
                              refuse=SubmitError)
        where = f"pvc {pvc}:{path}"
        by_hand = f"remove {path} on claim {pvc} yourself (from any pod that mounts it)"
    elif local:
        out = remove_host_path(checkpoint_root, path, campaign, run_id, mark, mode="prepare")
        where, by_hand = path, f"remove it with rm -rf {path}"
    else:
        return None
    if out["kept"]:
        # exit MARK_NOT_OURS: with a mark, another mark or none (a pod cannot tell us which); without, a mark
        whose = "its owner mark is not this run's, or it has none" if mark else "a campaign's owner mark is in it"
        raise SubmitError(f"the run's checkpoint directory {where} exists and is not this campaign's ({whose}): "
                          "the run would resume from (and write into) someone else's checkpoints",
                          tip=f"nothing was removed or submitted; choose another campaign name, or if the directory "
                              f"is yours (an attempt stopped before its pods wrote the mark), {by_hand}")
    return out


def run_cleanup_pod(client: K8sClient, k: Kubernetes, image: str, pvc: str, campaign: str, run_id: str, *,
                    owner: str = "", mark: str | None = None, timeout_s: float = 180, clock=time.monotonic,
                    sleep=time.sleep, mode: str = "remove", refuse=BackendError) -> dict:
    """Run the cleanup pod to completion (or timeout_s); the pod it made is deleted (by its uid) whatever
    happened. mode "prepare": the owned-directory command makes the sub-path afresh with the run's mark
    instead of removing it. A pod of that name that is not this campaign's run's cleanup pod (its poc/owner
    label) is left alone: refuse (an error class) is raised, nothing touched."""
    ownership.check_owner(owner)
    pod = rc.cleanup_pod(k, image, pvc, campaign, run_id, owner, mark, mode)
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    core = client.core()
    target = f"pvc {pvc}:{rc.cleanup_target(campaign, run_id)}"
    # a leftover of this run's own (a crash mid-cleanup) goes first; someone else's of that name stays
    old = client.call("GET pod (old cleanup)", core.read_namespaced_pod, name, ns, missing_ok=True)
    if old is not None:
        old = client.to_dict(old)
        if not ownership.is_ours(old, owner, campaign, run_id) or \
                ownership.labels_of(old).get("poc/role") != "cleanup":
            raise ownership.not_ours("Pod", name, ns, old, campaign, cls=refuse)
        client.call("DELETE pod (old cleanup)", core.delete_namespaced_pod, name, ns, missing_ok=True,
                    conflict_ok=True, body=ownership.delete_options(ownership.uid_of(old), grace_s=0))
        _wait_gone(client, ns, name, clock, sleep, 60)
    start = clock()
    made = client.to_dict(client.call("CREATE pod (cleanup)", core.create_namespaced_pod, ns, pod))
    uid = ownership.uid_of(made)
    phase, reason, code = "Pending", "", None
    try:
        while clock() - start < timeout_s:
            p = client.call("GET pod (cleanup)", core.read_namespaced_pod, name, ns, missing_ok=True)
            p = client.to_dict(p) if p is not None else {}
            if p and uid and ownership.uid_of(p) != uid:
                p = {}   # ours is gone (deleted by hand) and the name is another pod's: not ours to read
            phase = get(p, "status", "phase", default="Pending")
            if phase in ("Succeeded", "Failed"):
                code = next((get(c, "state", "terminated", "exitCode") for c in get(
                    p, "status", "containerStatuses", default=[]) or []), None)
                break
            waiting = [get(c, "state", "waiting", "reason") for c in get(p, "status", "containerStatuses",
                                                                           default=[]) or []]
            reason = next((w for w in waiting if w), "") or get(p, "status", "reason", default="")
            unschedulable = _unschedulable(p)
            if unschedulable:
                reason = unschedulable
                if _never_schedules(unschedulable):
                    break
            sleep(1)
        took = round(clock() - start, 3)
        if phase == "Succeeded":
            return {"removed": [target], "kept": [], "pod": name, "seconds": took}
        if phase == "Failed" and code == MARK_NOT_OURS:
            return {"removed": [], "kept": [target], "pod": name, "seconds": took, "reason": NOT_OURS}
        log = ""
        if phase == "Failed":
            try:
                client.count("READ pod log")
                log = str(core.read_namespaced_pod_log(name, ns, _request_timeout=10))[-500:]
            except Exception:  # noqa: BLE001 - the log is a nicety; the phase already says it failed
                log = ""
        raise BackendError(f"cleanup pod {ns}/{name} ({mode} {target}) {phase.lower()} after {took:g} s"
                           + (f" ({reason})" if reason and phase != "Failed" else "")
                           + (f": {log.strip()}" if log.strip() else ""),
                           tip=_tip(mode, target, pvc, ns, reason))
    finally:
        # the pod this call made, and no other: its uid is the delete's precondition (409: left)
        client.call("DELETE pod (cleanup)", core.delete_namespaced_pod, name, ns, missing_ok=True,
                    conflict_ok=True, body=ownership.delete_options(uid, grace_s=0))


def _tip(mode: str, target: str, pvc: str, ns: str, reason: str) -> str:
    if _never_schedules(reason):
        return (f"create the PersistentVolumeClaim {pvc} in namespace {ns}, or set kubernetes.checkpoint_pvc to "
                "a claim that exists there (kubectl get pvc -n " + ns + ")"
                + ("" if mode == "remove" else "; nothing was submitted"))
    if mode == "remove":
        return f"{target} may remain; remove it by hand, or set keep_run_files: always"
    return ("nothing was submitted; the pod runs the run's image with the claim mounted, so the run's pods "
            "would likely fail the same way: fix that first")


def _unschedulable(pod: dict) -> str:
    """The scheduler's own words for why the pod is not placed (its PodScheduled condition), or ""."""
    for c in get(pod, "status", "conditions", default=[]) or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return str(c.get("message") or "Unschedulable")
    return ""


def _never_schedules(message: str) -> bool:
    # a claim that does not exist stays missing: waiting out the timeout would only hide the scheduler's words
    return "persistentvolumeclaim" in message and "not found" in message


def _wait_gone(client: K8sClient, ns: str, name: str, clock, sleep, wait_s: float) -> None:
    deadline = clock() + wait_s
    while clock() < deadline:
        if client.call("GET pod", client.core().read_namespaced_pod, name, ns, missing_ok=True) is None:
            return
        sleep(1)
