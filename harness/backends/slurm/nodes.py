"""Bringing back the nodes a lose_node fault took: restart the node's container (the local cluster) or
resume the node (a cluster where the run may set node states), and only while the node is still the
fault's: the reason on it is exactly the run's own mark (guard.lost_node_mark), or, where the fault left
the reason to slurmctld (a killed container), exactly one of slurmctld's own, set by SlurmUser. Someone
else's reason on the node since (an operator's drain for maintenance, a down of theirs, even one worded
like slurmctld's) outlives the run: the node is left as it is, and the run says so."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ...errors import BackendError, PocError
from ..base import Handle
from . import guard

log = logging.getLogger(__name__)


def restore_lost_nodes(sched, handle: Handle, docker: dict | None, docker_call: Callable[[list[str]], None],
                       docker_run, clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> None:
    """Bring back what the run's lose_node fault took away (or was about to: the handle is journalled
    first), so the next run finds the nodes idle. Safe to repeat: what is done leaves handle.data, what
    is left to someone else goes to handle.data["nodes_left"] with the state and reason seen."""
    stopped = handle.data.get("stopped_containers") or {}
    # a node another job of the run took (a serving replica's node loss) carries that job's mark
    marks = handle.data.get("lost_marks") or {}
    own = guard.lost_node_mark(str(handle.data.get("job_id", "")))
    for host in list(handle.data.get("lost_nodes") or []):
        mark = marks.get(host) or own
        container = stopped.get(host) or (docker or {}).get("nodes", {}).get(host)
        if container:
            docker_call(["docker", "start", container])   # no-op for a running container
            left = wait_node_back(sched, host, mark, docker, docker_run, clock, sleep)
        else:
            left = resume_if_ours(sched, host, mark)
        handle.data.setdefault("node_records", []).append(sched.node_record(host, "restore"))
        if left:
            handle.data.setdefault("nodes_left", {})[host] = left
            log.warning("node %s left as it is (%s): that reason is not this run's, so the run does not "
                        "resume the node", host, left)
        handle.data["lost_nodes"].remove(host)
        stopped.pop(host, None)
        marks.pop(host, None)
    handle.data.pop("stopped_containers", None)
    handle.data.pop("lost_marks", None)


def resume_if_ours(sched, host: str, mark: str) -> str | None:
    """Resume a node the fault set down while it is still the fault's; else what holds it."""
    usable, seen = sched.node_usable(host)
    if usable:
        return None
    reason = sched.node_reason(host)
    if guard.restorable(reason, mark):   # the harness set the reason: only its own mark, exactly
        sched.set_node_state(host, "resume", check=False)
        return None
    return _held(seen, reason)


def wait_node_back(sched, host: str, mark: str, docker: dict | None, docker_run, clock, sleep,
                   wait_s: float = 90, resume_after_s: float = 30) -> str | None:
    """Wait for a restarted node's slurmd to take jobs again: None once it does; what holds it as soon as
    someone else's reason is on it (theirs to bring back: waiting longer would not help)."""
    start, resumed, slurmctld = clock(), False, None
    while True:
        usable, seen = sched.node_usable(host)
        if usable:
            return None
        waited = clock() - start
        late = not resumed and waited > resume_after_s and docker
        if "drain" in seen or late:
            reason = sched.node_reason(host)
            slurmctld = slurmctld or _slurm_user(sched)
            if not guard.restorable(reason, mark, slurmctld):
                return _held(seen, reason)
            if late:   # ReturnToService did not bring it back, and the reason on it is the fault's
                docker_run(["docker", "exec", docker["controller"], "scontrol", "update", f"nodename={host}",
                            "state=resume"], capture_output=True, timeout=30)
                resumed = True
        if waited > wait_s:
            raise BackendError(f"node {host} is not back {wait_s:g} s after its container started (sinfo: {seen})",
                               tip=f"`scontrol update nodename={host} state=resume` on the controller, "
                                   "then `poc run --resume`")
        sleep(2)


def _slurm_user(sched) -> str | None:
    """SlurmUser, asked only when a reason must be judged; None (only the run's own mark is taken) when
    the settings cannot be read."""
    try:
        return guard.slurm_user(sched.settings())
    except PocError:
        return None


def _held(seen: str, reason: guard.NodeReason | None) -> str:
    if reason is None:
        return f"{seen}, reason unreadable"
    return f"{seen}, reason {reason.text!r}" + (f" set by {reason.user}" if reason.user not in ("", "Unknown") else "")
