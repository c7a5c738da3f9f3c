"""The campaign's largest job against the nodes of its partition, so a size no partition node count can
hold is refused at preflight rather than by sbatch at that run's submit.

Preflight asks ``sinfo -h -N -o %N|%P`` (of slurm.partition, if set) once: one line per node and
partition, the default partition marked with ``*``. A job asking for more nodes than its partition has
is an error before anything is submitted (sbatch would answer "Requested node configuration is not
available"). Nodes that are down or drained still count: they may come back while the job waits. If
sinfo cannot be asked (slurmrestd with a mounted run directory has no shell), nothing is refused here.
"""
from __future__ import annotations

from ...errors import BackendError, CommandError, TransportError


def sinfo_text(t, partition: str | None) -> str | None:
    """What ``sinfo -h -N -o %N|%P`` prints, or None if it could not be asked."""
    argv = ["sinfo", "-h", "-N", "-o", "%N|%P", *(["-p", partition] if partition else [])]
    try:
        return t.run(argv, timeout=30, check=True).stdout
    except (TransportError, CommandError):
        return None


def partition_nodes(text: str, partition: str | None) -> tuple[str, int] | None:
    """(the partition a job goes to, its distinct nodes) from sinfo's lines: slurm.partition, or the one
    marked default; None when there is no default partition to read."""
    seen: dict[str, set[str]] = {}
    default = None
    for line in (text or "").splitlines():
        node, _, part = line.strip().partition("|")
        if not node or not part:
            continue
        if part.endswith("*"):
            part = default = part[:-1]
        seen.setdefault(part, set()).add(node)
    name = partition or default
    if name is None or name not in seen:
        return None
    return name, len(seen[name])


def check(t, nodes: int, partition: str | None) -> dict | None:
    """Raise BackendError when the partition has fewer nodes than ``nodes`` (the campaign's largest job);
    return {partition, nodes} as sinfo showed it (for the record), or None if sinfo said nothing usable."""
    if nodes < 1:
        return None
    text = sinfo_text(t, partition)
    found = partition_nodes(text or "", partition)
    if found is None:
        return None
    name, have = found
    if nodes > have:
        raise BackendError(
            f"the campaign's largest job asks for {nodes} nodes, but partition {name!r} has {have} "
            f"(sinfo -N{' -p ' + partition if partition else ''}); sbatch would refuse it",
            tip=f"lower scale.nodes' largest size (or resources.nodes) to {have} or fewer, or set "
                f"slurm.partition to one with {nodes} nodes or more (sinfo -s lists them)")
    return {"partition": name, "nodes": have}
