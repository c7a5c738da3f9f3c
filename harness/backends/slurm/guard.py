"""Shared-cluster safety on Slurm: a lose_node fault may take down only a node this run holds alone, and
brings it back only while the reason on it is still the fault's (restorable); a run's directory is made
and removed only as slurm.workdir/<campaign>[-<owner id>]/<run_id> (and slurm.checkpoint_dir's likewise),
only while it is this user's and holds the run's owner mark (render/owned_dir.py).

A node set DOWN (or its container killed) kills every job on it. Slurm's select/cons_tres packs
jobs that do not ask for whole nodes onto the same node (recorded here: a 1-node job placed on c1
beside a 2-node job, tests/fixtures/slurm/trixie/guard/), so "the node is in our allocation" is not
enough on a shared cluster: no other job may be running there either.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product
from posixpath import normpath

from ... import slurm_parse as sp
from ...errors import BackendError, CommandError, TransportError
from ...render.owned_dir import CANNOT_CLEAR, MARK_NOT_OURS, owned_dir_argv
from ...states import JobState

OTHER_JOB_STATES = "RUNNING,COMPLETING,SUSPENDED,CONFIGURING"
_GROUP = re.compile(r"\[([^\]]*)\]")


def expand_hostlist(expr: str) -> list[str]:
    """Slurm's hostlist syntax (``c[1-3,7],gpu-a[01-02]b``, several bracket groups) -> host names,
    zero padding kept, as ``scontrol show hostnames`` prints them."""
    items, depth, cur = [], 0, ""
    for ch in (expr or "").strip():
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    out: list[str] = []
    for item in filter(None, (i.strip() for i in items)):
        parts = _GROUP.split(item)   # text, group, text, group, ..., text
        choices = [[p] if i % 2 == 0 else _range(p) for i, p in enumerate(parts)]
        out += ["".join(c) for c in product(*choices)]
    return out


def _range(group: str) -> list[str]:
    out = []
    for piece in group.split(","):
        lo, _, hi = piece.strip().partition("-")
        if not hi:
            out.append(lo)
            continue
        width = len(lo) if lo.startswith("0") else 0
        out += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
    return out


def _same_host(host: str, node: str) -> bool:
    """A rank's hostname may be the node's FQDN while Slurm names it by its short name."""
    return host == node or host.split(".")[0] == node.split(".")[0]


def refuse(message: str, tip: str) -> BackendError:
    return BackendError(f"lose_node refused: {message}", tip=tip)


def held_node(sched, shell, job_id: str, host: str) -> str:
    """The Slurm name of the node ``host`` if job_id is running on it and no other job is; else
    BackendError. ``shell``: a transport that runs squeue (None: slurmrestd with files: mount)."""
    try:
        rc, out, err = sched.squeue([job_id])
    except (TransportError, CommandError) as exc:
        raise refuse(f"could not ask Slurm which nodes job {job_id} holds: {exc}",
                     tip="the fault is skipped rather than aimed at a node the run may not hold") from None
    job = next((j for j in sp.squeue_json(out) if j.job_id == str(job_id)), None)
    if job is None:
        raise refuse(f"squeue does not list job {job_id} (rc {rc}{': ' + err.strip()[:200] if err.strip() else ''})",
                     tip="the job ended before the fault; choose an earlier faults[].at_step")
    if job.native_state != "RUNNING" or job.state is not JobState.RUNNING or "COMPLETING" in job.flags:
        state = "+".join([job.native_state, *job.flags]) or job.state.value
        raise refuse(f"job {job_id} is {state}, not running",
                     tip="the fault is aimed at a running job's node")
    nodes = expand_hostlist(job.nodes)
    node = next((n for n in nodes if _same_host(host, n)), None)
    if node is None:
        raise refuse(f"node {host!r} is not allocated to job {job_id} (its nodes: {job.nodes or 'none'})",
                     tip="the target rank's host must be one of the run's nodes; check the workload's host names")
    if shell is None:
        raise refuse(f"cannot check that no other job runs on {node}: slurmrestd with slurm.rest.files: mount "
                     "has no shell for squeue", tip="use slurm.rest.files: ssh, or drop the lose_node fault")
    alone_on(shell, job_id, node)
    # a node an operator is draining (or has marked) would lose that mark when the harness resumes it
    _, seen = sched.node_usable(node)
    if any(w in seen.lower() for w in ("drain", "down", "fail", "maint", "reboot", "reserved")):
        raise refuse(f"node {node} is {seen.strip()}: the harness's resume afterwards would undo an operator's state",
                     tip="aim the fault at a rank on another node, or wait until the node is back in service")
    return node


def alone_on(shell, job_id: str, node: str) -> None:
    """BackendError unless no job but job_id runs on node. Asked again just before the node goes
    (SlurmBackend.inject): Slurm has no compare-and-set on a node's state, so another job can land
    between the first check and the action; the second check makes that window the time of one
    command, and the record keeps when it was asked."""
    res = shell.run(["squeue", "-h", f"--nodelist={node}", f"--states={OTHER_JOB_STATES}", "-o", "%i|%u"],
                    timeout=60, check=False)
    if res.returncode != 0:
        raise refuse(f"squeue --nodelist={node} failed: {res.stderr.strip()[:200]}",
                     tip="the fault is skipped rather than aimed at a node another job may share")
    others = [ln.strip() for ln in res.stdout.splitlines()
              if ln.strip() and ln.split("|")[0].strip() != str(job_id)]
    if others:
        who = ", ".join(f"job {o.split('|')[0]}" + (f" of {o.split('|')[1]}" if "|" in o else "") for o in others[:5])
        raise refuse(f"node {node} also runs {who}; setting it down would kill them",
                     tip="ask for whole nodes (slurm.extra_sbatch: ['--exclusive']) so the fault's node is the run's "
                         "alone, or drop the lose_node fault on a shared partition")


def _owned_dir(t, mode: str, path: str, mark: str, timeout: float):
    """The owned-directory command (render/owned_dir.py) through the transport: (exit code, its words)."""
    res = t.run(owned_dir_argv(mode, path, mark), timeout=timeout, check=False)
    said = res.stderr.strip().replace("poc-owned-dir: ", "")[:300]
    return res.returncode, said


def _cannot_clear(path: str, said: str, setting: str) -> BackendError:
    return BackendError(f"could not remove all of {path}: {said}",
                        tip="nothing was started in it; remove what is left yourself (a file another user made, "
                            f"a file still open on a network file system), or choose another {setting}")


def prepare_run_dir(t, path: str, mark: str) -> None:
    """Make the run directory afresh with the run's owner mark in it (t: the Slurm transport; mark:
    spec.owner_mark); BackendError, touching nothing, when a directory of that path is someone else's,
    and when what is in it could not all be removed."""
    rc, said = _owned_dir(t, "prepare", path, mark, 60)
    if rc == MARK_NOT_OURS:
        whose = said.split(": ", 1)[-1] if said else ("it has no owner mark" if mark else "a campaign's mark is in it")
        raise BackendError(f"{path} exists and is not this campaign's ({whose}): another user's run directory?",
                           tip="nothing was removed; choose another campaign name or slurm.workdir, or remove "
                               "the directory yourself if it is yours")
    if rc == CANNOT_CLEAR:
        raise _cannot_clear(path, said, "slurm.workdir")
    if rc != 0:
        raise BackendError(f"could not prepare the run directory {path}: {said}",
                           tip="check that slurm.workdir is writable by you where the harness runs Slurm's commands")


def remove_run_dir(t, path: str, mark: str) -> bool:
    """Remove the run directory if it is the campaign's (or gone already); False, touching nothing, if not."""
    rc, said = _owned_dir(t, "remove", path, mark, 120)
    if rc == MARK_NOT_OURS:
        return False
    if rc == CANNOT_CLEAR:
        raise _cannot_clear(path, said, "directory")
    if rc != 0:
        raise BackendError(f"could not remove the run directory {path}: {said}")
    return True


def own_checkpoint_dir(root: str | None, path: str, campaign: str, run_id: str) -> str | None:
    """The run's directory under slurm.checkpoint_dir (`root`), checked to be exactly
    <root>/<campaign>/<run_id>; None when there is no such root (the checkpoints are in the run
    directory, which goes with it)."""
    if not root or not path:
        return None
    return run_dir_to_remove(path, root, campaign, run_id, setting="slurm.checkpoint_dir")


def prepare_checkpoint_dir(t, path: str, mark: str) -> None:
    """Make the run's checkpoint directory afresh, the run's owner mark in it, before the run starts (a
    resumed campaign re-runs an interrupted run from scratch, and would otherwise resume from that
    attempt's checkpoint). Made now rather than by the workload at its first checkpoint: from submit on,
    the directory and its campaign's directory are this user's (0700), so nobody can plant a checkpoint
    there while the job waits in the queue. BackendError, touching nothing, when a directory of that path
    (or its campaign's directory) is someone else's."""
    rc, said = _owned_dir(t, "prepare", path, mark, 120)
    if rc == MARK_NOT_OURS:
        raise BackendError(f"the checkpoint directory {path} is not this campaign's ({said.split(': ', 1)[-1]}): "
                           "the run would resume from someone else's checkpoints",
                           tip="nothing was removed; choose another campaign name or slurm.checkpoint_dir, or "
                               "remove the directory yourself if it is yours")
    if rc == CANNOT_CLEAR:
        raise _cannot_clear(path, said, "slurm.checkpoint_dir")
    if rc != 0:
        raise BackendError(f"could not prepare the checkpoint directory {path}: {said}",
                           tip="check that slurm.checkpoint_dir is writable by you on the login node")


def run_dir_to_remove(run_dir: str, workdir: str, campaign: str, run_id: str,
                      setting: str = "slurm.workdir") -> str:
    """run_dir, checked to be exactly <workdir>/<campaign>/<run_id> (no '..', no other place), else
    BackendError: an rm -rf must never reach outside the run's own directory. campaign: the campaign's
    directory name (spec.campaign_dir); workdir: the root `setting` names (the checkpoint directory's
    root is slurm.checkpoint_dir)."""
    want = normpath(f"{workdir.rstrip('/')}/{campaign}/{run_id}")
    got = normpath(run_dir)
    if (got != want or ".." in got.split("/") or not workdir.strip("/") or not campaign or not run_id
            or "/" in campaign or "/" in run_id or campaign in (".", "..") or run_id in (".", "..")):
        raise BackendError(f"refusing to remove {run_dir!r}: not the run's directory {want!r} under {setting}",
                           tip="report this as a harness bug; nothing was removed")
    return got


@dataclass(frozen=True)
class NodeReason:
    """The reason on a node and the user who set it (sinfo %E and %u; slurmrestd's reason and
    reason_set_by_user)."""
    text: str
    user: str = ""


# Reasons slurmctld sets by itself when a node dies or comes back under a job, each whole: an operator's
# reason that only begins like one ("Not responding, PSU swapped") is the operator's.
SLURMCTLD_REASONS = re.compile(r"Not responding|Kill task failed|batch job complete failure|Prolog error|"
                               r"Epilog error|Node unexpectedly rebooted(?: boot_time=\d+ last response=\d+)?")
NO_REASON = ("", "none", "(null)")


def lost_node_mark(job_id: str) -> str:
    """The reason a lose_node fault sets on the node it takes down: names the job, so another run's
    mark (or an operator's reason) is never taken for this run's."""
    return f"poc-lose-node job {job_id}"


def slurm_user(conf: dict[str, str]) -> str | None:
    """The user slurmctld acts as (scontrol show config: "SlurmUser = slurm(64030)"), or None."""
    return (conf.get("SlurmUser") or "").split("(", 1)[0].strip() or None


def restorable(reason: NodeReason | None, mark: str | None, slurmctld: str | None = None) -> bool:
    """May the harness resume a node its lose_node fault took? Yes while the reason on it is exactly this
    run's mark, or none; no once anyone else has put a reason of theirs on it (an operator's drain or
    down outlives the run: resuming it would undo their work), nor when the reason cannot be read.

    slurmctld: the SlurmUser, given only where the fault left the reason to slurmctld (the local cluster's
    node container killed: the node went silent, the harness set no reason). There a reason slurmctld
    set is the fault's too, taken only whole and only as set by that user: an operator typing the
    same words is someone else."""
    if reason is None:
        return False
    r = reason.text.strip()
    if r in NO_REASON or (mark and r == mark):
        return True
    return bool(slurmctld) and reason.user.strip() == slurmctld and SLURMCTLD_REASONS.fullmatch(r) is not None
