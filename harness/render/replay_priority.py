"""A trace's QOS names -> priorities, and preemption between them, on both schedulers (pure).

A trace job's ``qos`` is a class of service ("high", "normal", "low", or a site's own names from
sacct). A replay with ``--preemption priority`` gives each class a priority on both sides and lets a
job preempt running jobs of lower classes; with ``--preemption off`` (the default) the classes are
labels only and nothing is preempted, as before.

=====================================  ==========================================================
Kubernetes (Kueue)                     Slurm (priority/multifactor, preempt/qos)
=====================================  ==========================================================
a WorkloadPriorityClass per class,     a QOS per class (``sacctmgr add qos``) with
value = its priority; each JobSet      ``Priority=`` its priority; each job ``--qos=``;
labelled ``kueue.x-k8s.io/priority-    ``PriorityWeightQOS`` outweighs fair share and age, so a
class``; Kueue orders a queue by       higher class goes first, as in Kueue
priority, then creation time
ClusterQueue ``preemption``:           each QOS ``Preempt=`` every class of lower priority,
``withinClusterQueue: LowerPriority``  ``PreemptMode=REQUEUE``: the preempted job goes back to
``reclaimWithinCohort: LowerPriority`` the queue and later runs again from its start
``borrowWithinCohort: LowerPriority``
an evicted Workload is requeued; its   (cluster-wide ``PreemptType=preempt/qos``,
JobSet suspended, its pods deleted,    ``PreemptMode=REQUEUE``: clusters/slurm/emulated.py; a
made again when it is admitted again   class with no ``Preempt=`` list preempts nothing)
=====================================  ==========================================================

What stays different, and is the comparison: Kueue preempts a workload of *another* tenant only while
that tenant borrows beyond its nominal quota (a quota is a guarantee), and only as many as the
pending workload needs within its tenant's quota and borrowing limits; Slurm's preempt/qos preempts
a lower class's job wherever the higher one needs the nodes, whoever owns it. Both restart the
preempted job from the beginning: the emulated job is a sleep, and a real one would resume from its
last checkpoint on either.

Class names the priority table does not name take ``normal``'s priority (or the lowest given, when
it has no ``normal``): a site's history may have classes the replay was not told about, and they
should neither outrank nor be preempted by the default class.
"""
from __future__ import annotations

from dataclasses import dataclass

PREEMPTION_MODES = ("off", "priority")
# the usual three classes; a site's own are given with --qos-priority NAME=N
DEFAULT_PRIORITIES: dict[str, int] = {"low": 100, "normal": 1000, "high": 10000}
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
LOWER = "LowerPriority"


@dataclass(frozen=True)
class ClassPriority:
    qos: str           # the trace's class name, as the jobs carry it
    priority: int


def parse_priorities(text: str | None) -> dict[str, int]:
    """``high=10000,normal=1000`` -> {name: priority}, added to (and overriding) the defaults."""
    out = dict(DEFAULT_PRIORITIES)
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, eq, value = part.partition("=")
        name = name.strip()
        try:
            prio = int(value)
        except ValueError:
            prio = -1
        if not eq or not name or not 0 <= prio <= 1_000_000:
            raise ValueError(f"{part.strip()!r}: give NAME=PRIORITY, a whole number from 0 to 1000000")
        out[name] = prio
    return out


def class_priorities(qos_names: list[str], table: dict[str, int]) -> list[ClassPriority]:
    """Each class the trace uses with its priority, highest first (ties by name)."""
    fallback = table.get("normal", min(table.values(), default=0))
    got = {q: table.get(q, fallback) for q in set(qos_names)}
    return [ClassPriority(q, p) for q, p in sorted(got.items(), key=lambda kv: (-kv[1], kv[0]))]


def lower_than(classes: list[ClassPriority], c: ClassPriority) -> list[str]:
    """The classes a class preempts: every one of strictly lower priority, by name."""
    return sorted(o.qos for o in classes if o.priority < c.priority)


# ---- Kueue ------------------------------------------------------------------------------------------

def cluster_queue_preemption(mode: str) -> dict | None:
    """The ClusterQueue's ``preemption`` for a mode; None: Kueue's default (never preempt)."""
    if mode == "off":
        return None
    return {"withinClusterQueue": LOWER, "reclaimWithinCohort": LOWER, "borrowWithinCohort": {"policy": LOWER}}


def settings_text(mode: str, classes: list[ClassPriority]) -> str:
    """The preemption setting, as a replay's settings record it."""
    prios = ", ".join(f"{c.qos}={c.priority}" for c in classes)
    if mode == "off":
        return f"off: no preemption; classes ({prios}) are labels only, every job at the same priority"
    return (f"priority: classes {prios}; a job may preempt running jobs of lower classes (Kueue: withinClusterQueue, "
            "reclaimWithinCohort and borrowWithinCohort LowerPriority; Slurm: preempt/qos, PreemptMode=REQUEUE)")


# ---- Slurm ------------------------------------------------------------------------------------------

def qos_setup(classes: list[ClassPriority], names: dict[str, str], existing: set[str]) -> list[list[str]]:
    """sacctmgr argv lists that make (or, for one that exists, set) each class's QOS with its priority and
    the lower classes it preempts. `names`: class -> the Slurm QOS name (render/replay_slurm.py).
    Lowest priority first: a QOS's ``preempt=`` may name only QOSes that exist already. An empty
    ``preempt=`` clears the list (``preempt=''`` is refused as an empty list)."""
    argvs = []
    for c in sorted(classes, key=lambda c: (c.priority, c.qos)):
        qos = names[c.qos]
        settings = [f"priority={c.priority}", "preempt=" + ",".join(names[q] for q in lower_than(classes, c)),
                    "preemptmode=requeue"]
        if qos in existing:
            argvs.append(["sacctmgr", "-i", "modify", "qos", "where", f"name={qos}", "set", *settings])
        else:
            argvs.append(["sacctmgr", "-i", "add", "qos", qos, *[s for s in settings if s != "preempt="]])
    return argvs


def qos_teardown(made: list[str], modified: list[str]) -> list[list[str]]:
    """sacctmgr argv lists that remove the QOSes a replay made and put those it only set (``normal``) back
    as slurmdbd makes them: priority 0, preempting nothing, the cluster's preempt mode."""
    argvs = [["sacctmgr", "-i", "modify", "qos", "where", f"name={q}", "set", "priority=0", "preempt=",
              "preemptmode=cluster"] for q in modified]
    if made:
        argvs.append(["sacctmgr", "-i", "delete", "qos", "name=" + ",".join(made)])
    return argvs
