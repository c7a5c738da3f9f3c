"""Which sbatch options slurm.extra_sbatch may add: an allow-list.

The harness tracks one job by its id, reads its output from the run directory, and sizes it from
resources.*; an option that changed the job's shape (nodes, tasks, GPUs, memory), its count
(--array), where it writes or runs (--output, --chdir), how it is found (--job-name, --comment) or
how it restarts (--requeue, --signal) would break a measurement silently, or let a config aimed at
a shared cluster do far more than one benchmark job. A deny-list misses options Slurm adds later;
an allow-list only ever refuses too much, and the message says what to use instead.
"""
from __future__ import annotations

import re

# Options that only narrow where the job may run, or add bookkeeping Slurm keeps for it.
ALLOWED = frozenset({
    "--exclusive",      # whole nodes (the node-loss fault asks for it)
    "--constraint",     # as slurm.constraint: a node feature expression
    "--prefer",         # a soft constraint
    "--exclude",        # nodes not to use
    "--contiguous", "--spread-job", "--tmp", "--licenses", "--network",
    "--gres-flags", "--gpu-bind", "--gpu-freq", "--cpu-freq", "--mem-bind",
    "--mail-type", "--mail-user", "--wckey", "--mcs-label", "--acctg-freq", "--profile", "--propagate",
    "--export",         # the launch line's srun passes --export=ALL whatever this says
    "--begin",          # not before a time: the queue figure then includes the wait the user asked for
    "--nice",           # lower the job's own priority (a user may only lower it)
})

# Options that have a key of their own, which the rendered script already writes.
OWN_KEY = {
    "--partition": "slurm.partition", "--account": "slurm.account", "--qos": "slurm.qos",
    "--time": "slurm.time_limit", "--reservation": "slurm.reservation", "--gres": "slurm.gres",
    "--switches": "slurm.switches", "--gpus-per-node": "resources.gpus_per_node and slurm.gpu_type",
    "--nodes": "resources.nodes", "--mem": "resources.memory_mb", "--cpus-per-task": "resources.cpus_per_node",
}

_PLAIN = re.compile(r"--[a-z][a-z0-9-]*(=[A-Za-z0-9_.,:=/+@%-]+)?")


def problem(item: str) -> str | None:
    """Why item may not be an extra sbatch option, or None when it may."""
    if not _PLAIN.fullmatch(item):
        return f"{item!r} is not a plain --option or --option=value"
    opt = item.split("=", 1)[0]
    if opt in ALLOWED:
        return None
    if opt in OWN_KEY:
        return f"{opt} has a key of its own: set {OWN_KEY[opt]} instead"
    return (f"{opt} is not on the allow-list (options that cannot change the job's shape, count, output, "
            f"working directory or restarts, which the harness sets and tracks): {', '.join(sorted(ALLOWED))}")
