"""The queue policies a scale replay runs under, named, on both schedulers (pure).

Which job starts next is policy before it is engine. Slurm's backfill reserves nodes for its top job and
starts a later job only where it fits without delaying that reservation; its priority/multifactor weighs
fair share, age and (with ``PriorityWeightJobSize``) job size. Kueue's ``BestEffortFIFO`` lets a newer
workload that fits pass an older one that does not ("older Workloads that can't be admitted will not
block newer Workloads that fit", Kueue's docs), and reserves nothing; ``StrictFIFO`` lets nothing pass
the head of a ClusterQueue. A comparison of the two at their settings compares policies; to compare the
engines, the policies have to be matched. So a replay names its policy pair, and a verdict says which
comparison it answers:

============  ==============================================  ================================================
pair          Kubernetes (Kueue)                              Slurm (emulated)
============  ==============================================  ================================================
site          BestEffortFIFO, a ClusterQueue per tenant in    sched/backfill; multifactor fair share 10000,
              one cohort (the committed replays up to now)    age 1000, job size 1000
defaults      BestEffortFIFO, a ClusterQueue per tenant in    sched/backfill; every PriorityWeight 0 (Slurm's
              one cohort, fair sharing off: Kueue's default   default): submission order, backfilled
strict-fifo   StrictFIFO, all tenants in ONE ClusterQueue:    sched/builtin (no backfill), every weight 0:
              nobody passes the oldest workload               nobody passes the oldest job
no-size       StrictFIFO, a ClusterQueue per tenant           sched/backfill; fair share 10000, age 1000, job
                                                              size 0 (no preference for big jobs)
============  ==============================================  ================================================

``strict-fifo`` is the engine question: the same order on both, so what differs is how fast each gets
a decided job onto its nodes. ``defaults`` is what a site gets without tuning either. ``site`` and
``no-size`` keep tenancy (fair share against per-tenant quotas) and differ in whether big jobs are
favoured. Kueue fair sharing (a setting of the Kueue process: clusters/k8s/tuning.py) is recorded beside
the pair, not part of it: it orders ClusterQueues of a cohort against each other by their share.

Every setting that orders jobs is recorded by the replay as the clusters report it (Slurm's ``scontrol show
config``, the ClusterQueues as created, Kueue's Configuration), so a reader checks the pair against what
ran rather than against this table.
"""
from __future__ import annotations

from dataclasses import dataclass

QUEUEING = ("BestEffortFIFO", "StrictFIFO")
SCHEDULERS = ("sched/backfill", "sched/builtin")


@dataclass(frozen=True)
class KueuePolicy:
    queueing: str = "BestEffortFIFO"
    one_queue: bool = False          # every tenant's LocalQueue feeds one ClusterQueue (one order for all)

    def __post_init__(self) -> None:
        if self.queueing not in QUEUEING:
            raise ValueError(f"queueingStrategy {self.queueing!r}: one of {', '.join(QUEUEING)}")


@dataclass(frozen=True)
class SlurmPolicy:
    scheduler: str = "sched/backfill"
    weight_fairshare: int = 10_000
    weight_age: int = 1_000
    weight_job_size: int = 1_000

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"SchedulerType {self.scheduler!r}: one of {', '.join(SCHEDULERS)}")

    def conf(self) -> dict[str, str]:
        """What ``scontrol show config`` prints for these settings (its own spelling)."""
        return {"SchedulerType": self.scheduler, "PriorityWeightFairShare": str(self.weight_fairshare),
                "PriorityWeightAge": str(self.weight_age), "PriorityWeightJobSize": str(self.weight_job_size)}


@dataclass(frozen=True)
class QueuePolicy:
    name: str
    answers: str                    # which comparison a verdict under it answers
    kueue: KueuePolicy
    slurm: SlurmPolicy

    def text(self) -> str:
        k, s = self.kueue, self.slurm
        queues = "one ClusterQueue for every tenant" if k.one_queue else "a ClusterQueue per tenant in one cohort"
        return (f"{self.name}: Kueue {k.queueing}, {queues}; "
                f"Slurm {s.scheduler}, PriorityWeightFairshare {s.weight_fairshare}, PriorityWeightAge {s.weight_age}, "
                f"PriorityWeightJobSize {s.weight_job_size} ({self.answers})")


POLICIES: dict[str, QueuePolicy] = {p.name: p for p in (
    QueuePolicy("site", "the two as this POC configured them: policy and engine together",
                KueuePolicy(), SlurmPolicy()),
    QueuePolicy("defaults", "each product at its default ordering: what a site gets untuned",
                KueuePolicy(), SlurmPolicy(weight_fairshare=0, weight_age=0, weight_job_size=0)),
    QueuePolicy("strict-fifo", "the engines under one order: strict FIFO across every tenant on both",
                KueuePolicy("StrictFIFO", one_queue=True), SlurmPolicy("sched/builtin", 0, 0, 0)),
    QueuePolicy("no-size", "tenancy without a preference for big jobs: StrictFIFO per tenant against backfill "
                "with fair share and age only", KueuePolicy("StrictFIFO"), SlurmPolicy(weight_job_size=0)),
)}
DEFAULT = "site"


def policy(name: str) -> QueuePolicy:
    if name not in POLICIES:
        raise ValueError(f"queue policy {name!r}: one of {', '.join(POLICIES)}")
    return POLICIES[name]


def emulated_fields(p: QueuePolicy) -> dict[str, object]:
    """The emulated Slurm cluster's settings (clusters/slurm/emulated.py EmulatedShape fields) for the pair."""
    s = p.slurm
    return {"scheduler_type": s.scheduler, "priority_weight_fairshare": s.weight_fairshare,
            "priority_weight_age": s.weight_age, "priority_weight_job_size": s.weight_job_size}


def slurm_mismatch(p: QueuePolicy, running: dict[str, str]) -> list[str]:
    """The settings of the running Slurm cluster (``scontrol show config``, parsed) that differ from the
    pair's Slurm side, as "Key: running X, pair Y"; [] when it runs the pair's."""
    want = p.slurm.conf()
    return [f"{k}: running {running.get(k, 'not reported')}, {p.name} wants {v}" for k, v in want.items()
            if running.get(k) != v]


def of_slurm_conf(running: dict[str, str]) -> str | None:
    """The pair whose Slurm side the running settings are, or None."""
    return next((n for n, p in POLICIES.items() if not slurm_mismatch(p, running)), None)
