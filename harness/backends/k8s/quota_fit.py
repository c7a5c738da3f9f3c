"""The campaign's largest job against the nominal quota of the ClusterQueue behind its LocalQueue, so a
job Kueue could never admit ("exceeds maximum capacity") is refused at preflight on a user's cluster,
before anything is submitted. On this machine's native cluster the harness sizes that quota itself
(local_setup.py, to the same largest job), so there is nothing to refuse.

Each resource the job's pods request counts, times the pods (one per node): render.jobset.quota(spec),
what the harness would ask of a ClusterQueue of its own. A ClusterQueue in a cohort may borrow beyond
its nominal quota: no refusal there, only the shortfall recorded. A resource the ClusterQueue does not
cover is recorded, not refused: Kueue may be configured to leave it out (excludeResourcePrefixes), and
`poc check` names it.
"""
from __future__ import annotations

from ...errors import BackendError
from ...render import jobset as rj
from ...spec import JobSpec
from .api import qty
from .state import get, items


def nominal(cq: dict) -> dict[str, tuple[float, str, str]]:
    """resource -> (the most nominal quota any flavor gives it, as written, that flavor)."""
    best: dict[str, tuple[float, str, str]] = {}
    for g in items(cq, "spec", "resourceGroups"):
        for f in g.get("flavors") or []:
            for r in f.get("resources") or []:
                q = qty(r.get("nominalQuota"))
                if r.get("name") not in best or q > best[r["name"]][0]:
                    best[r["name"]] = (q, str(r.get("nominalQuota")), str(f.get("name")))
    return best


def shortfall(cq: dict, spec: JobSpec, extra: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(what the job asks for beyond the ClusterQueue's nominal quota, one entry per resource; the resources
    it asks for that the ClusterQueue does not cover)."""
    best = nominal(cq)
    short, uncovered = [], []
    for res, want in rj.quota(spec, 1, extra).items():
        need = qty(want)
        if not need:
            continue   # a resource the job does not use (GPUs of a CPU job) needs no quota
        if res not in best:
            uncovered.append(res)
        elif need > best[res][0]:
            short.append(f"{res}: {want} asked for in all, the nominal quota is {best[res][1]} (flavor {best[res][2]})")
    return short, uncovered


def check(cq: dict | None, spec: JobSpec | None, extra: dict[str, str] | None = None) -> dict | None:
    """Raise BackendError when ``spec`` (the campaign's largest job) cannot fit ``cq``'s nominal quota and
    the queue cannot borrow; return what was found for the record (None: the ClusterQueue was not readable)."""
    if cq is None or spec is None:
        return None
    name = get(cq, "metadata", "name")
    short, uncovered = shortfall(cq, spec, extra)
    cohort = get(cq, "spec", "cohort")
    if short and not cohort:
        raise BackendError(
            f"the campaign's largest job ({spec.nodes} nodes) does not fit ClusterQueue {name}: "
            + "; ".join(short) + ": Kueue would never admit it",
            tip=f"lower scale.nodes' largest size (or resources.nodes, cpus_per_node, memory_mb, gpus_per_node) "
                f"to what the quota fits, or ask the cluster admins for more quota in ClusterQueue {name}")
    return {"cluster_queue": name, "nodes": spec.nodes, "fits": not short,
            **({"short_borrowing_from_cohort": short, "cohort": cohort} if short else {}),
            **({"not_covered": uncovered} if uncovered else {})}
