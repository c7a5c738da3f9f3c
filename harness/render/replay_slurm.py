"""A trace's jobs -> the batch scripts a Slurm scale replay submits (pure).

Each trace job is one batch script: ``nodes`` nodes with one task each, the job's GPUs per node, one
CPU and 1 GiB per node (as each pod asks on Kubernetes: without ``--mem`` Slurm would give a job every
node's whole memory and a 2-GPU job would hold a whole node), the tenant as the account, the limit
as ``--time``, and a body that sleeps for the run time. Slurm keeps limits in whole minutes, so the
limit is rounded up to one: a compressed trace's limits of seconds become a minute each, which makes
backfill plan with coarser estimates than the trace's (Kueue does not plan with limits at all).

User text (tenant, QOS) goes only into ``#SBATCH`` lines, after it is reduced to the characters
Slurm allows in names; nothing from the trace reaches a line the shell runs but a whole number.

Tenants are accounts in slurmdbd, made before the replay and removed after it (``account_setup``,
``account_teardown``: argv lists for sacctmgr, never a shell line), from the same quota mapping as
Kubernetes (render/replay_k8s.py ``TenantQuota``, ``equal_quotas`` by default):

=====================================  ==========================================================
Kubernetes (Kueue)                     Slurm (slurmdbd association, priority/multifactor)
=====================================  ==========================================================
a ClusterQueue per tenant              an account per tenant (``--account``), root a user of each
``nominalQuota`` of N GPUs             ``fairshare=N``: shares in proportion to the quotas (equal
                                       quotas, equal shares); a soft target, not a reservation
borrowing in one cohort, no limit      no ``GrpTRES``: an account may use every idle GPU, and its
(``borrow_gpus`` None)                 usage lowers its priority while it does (fair share)
``borrowingLimit`` of B GPUs           ``GrpTRES=gres/gpu=N+B``: a hard cap on what it holds at once
Kueue admits in queue order (FIFO)     priority: fair share, then age (PriorityWeight* in
                                       clusters/slurm/emulated.py)
=====================================  ==========================================================

Kueue's nominal quota is a guarantee that can preempt borrowers back (when preemption is on); Slurm's
fair share only orders the queue, so an account under its share waits for running jobs to end.
Slurm lowercases account names; ``slurm_account`` does so first, so tenants that differ only in
case share an account.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..scale.trace import TraceJob
from .replay_k8s import TenantQuota

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class SlurmTarget:
    replay: str                      # this replay's name: every job's name, so squeue can select them
    partition: str | None = None     # None: the cluster's default partition
    # on (with --preemption priority): each job asks for its class's QOS (render/replay_priority.py) and
    # may be requeued when preempted; off: the replay makes no QOS, every job runs in the account's default
    with_qos: bool = False
    limit_grace_s: int = 30          # render/replay_k8s.py says why; a replay scales it (grace_for)


def slurm_name(text: str, limit: int = 64) -> str:
    """An account, QOS or job name Slurm accepts, from a trace's free text."""
    s = _UNSAFE.sub("_", text)[:limit]
    return s or "_"


def slurm_qos(qos: str) -> str:
    """The QOS a class's jobs run in: a Slurm name in lower case, as sacctmgr stores it."""
    return slurm_name(qos).lower()


def slurm_account(tenant: str) -> str:
    """The account a tenant's jobs run under: a Slurm name in lower case, as slurmdbd stores it."""
    return slurm_name(tenant).lower()


@dataclass(frozen=True)
class AccountShare:
    account: str
    tenant: str
    fairshare: int
    max_gpus: int | None = None      # GrpTRES gres/gpu; None: no cap (borrow whatever is idle)


def account_shares(quotas: list[TenantQuota]) -> list[AccountShare]:
    """Each tenant's quota as an account: shares = nominal GPUs (at least 1, Slurm's smallest share),
    a GPU cap only where the quota caps borrowing. Tenants that map to one account are one account,
    with their shares summed."""
    merged: dict[str, AccountShare] = {}
    for q in quotas:
        acct = slurm_account(q.tenant)
        cap = None if q.borrow_gpus is None else q.gpus + q.borrow_gpus
        if acct in merged:
            old = merged[acct]
            cap = None if old.max_gpus is None or cap is None else old.max_gpus + cap
            merged[acct] = AccountShare(acct, f"{old.tenant},{q.tenant}", old.fairshare + max(1, q.gpus), cap)
        else:
            merged[acct] = AccountShare(acct, q.tenant, max(1, q.gpus), cap)
    return list(merged.values())


def account_setup(shares: list[AccountShare], user: str = "root", qos: list[str] = ()) -> list[list[str]]:
    """sacctmgr argv lists that make each account with its share (and cap) and let `user` submit to it,
    in the QOSes `qos` as well as ``normal`` (associations enforce which QOS a job may ask for)."""
    argvs = []
    allowed = ["qos=" + ",".join(sorted({"normal", *qos})), "defaultqos=normal"] if qos else []
    for a in shares:
        add = ["sacctmgr", "-i", "add", "account", a.account, f"fairshare={a.fairshare}"]
        if a.max_gpus is not None:
            add.append(f"GrpTRES=gres/gpu={a.max_gpus}")
        argvs += [add, ["sacctmgr", "-i", "add", "user", user, f"account={a.account}", *allowed]]
    return argvs


def account_teardown(accounts: list[str], user: str = "root") -> list[list[str]]:
    """sacctmgr argv lists that remove `user` from the accounts, then the accounts."""
    if not accounts:
        return []
    names = ",".join(accounts)
    return [["sacctmgr", "-i", "delete", "user", "name=" + user, f"account={names}"],
            ["sacctmgr", "-i", "delete", "account", f"name={names}"]]


def time_minutes(limit_s: int, grace_s: int) -> int:
    """``--time`` in whole minutes, never under one: Slurm's limits have a minute's resolution."""
    return max(1, math.ceil((limit_s + grace_s) / 60))


def batch_script(job: TraceJob, target: SlurmTarget) -> str:
    lines = ["#!/bin/sh",
             f"#SBATCH --job-name={slurm_name(target.replay)}",
             f"#SBATCH --account={slurm_account(job.tenant)}",
             f"#SBATCH --nodes={job.nodes}",
             "#SBATCH --ntasks-per-node=1",
             "#SBATCH --cpus-per-task=1",
             "#SBATCH --mem=1G",
             f"#SBATCH --time={time_minutes(job.limit_s, target.limit_grace_s)}",
             "#SBATCH --output=/dev/null"]
    if job.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    if target.partition:
        lines.append(f"#SBATCH --partition={slurm_name(target.partition)}")
    if target.with_qos:
        lines += [f"#SBATCH --qos={slurm_qos(job.qos)}", "#SBATCH --requeue"]
    lines.append(f"exec sleep {int(job.runtime_s)}")
    return "\n".join(lines) + "\n"
