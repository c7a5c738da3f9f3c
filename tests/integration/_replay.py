"""The trace both schedulers' replay tests run: queueing is certain, since a whole-cluster job holds
every node and no preemption is configured on either side, so the three jobs behind it wait for its end."""
from __future__ import annotations

from harness.scale.trace import NodeShape, Trace, TraceJob

NODES, GPUS = 16, 8


def job(id: str, submit: int, tenant: str, nodes: int, runtime: int, gpus: int = GPUS, qos: str = "normal") -> TraceJob:
    return TraceJob(id=id, submit_s=submit, tenant=tenant, nodes=nodes, gpus_per_node=gpus,
                    limit_s=runtime * 3, runtime_s=runtime, qos=qos)


TRACE = Trace(name="replay-it", source="made for the replay tests", shape=NodeShape(nodes=NODES, gpus_per_node=GPUS),
              duration_s=4, jobs=(job("whole", 0, "a", 16, 12), job("b-four", 2, "b", 4, 4),
                                  job("a-one", 3, "a", 1, 3, gpus=4), job("b-two", 4, "b", 2, 3)))


def check_queued_behind_the_whole_cluster_job(got: dict, slack_s: float = 3) -> None:
    """The shared expectations on the outcomes (by trace job id) of TRACE's replay."""
    assert set(got) == {j.id for j in TRACE.jobs} and all(o.state == "completed" for o in got.values()), got
    whole = got["whole"]
    assert whole.queue_s <= slack_s, whole
    for later in ("b-four", "a-one", "b-two"):    # nothing fits beside the whole-cluster job
        assert got[later].start >= whole.end, (later, got[later], whole)
        assert got[later].queue_s >= 12 - 4 - 1, got[later]
    for j in TRACE.jobs:   # each ran its run time, to the records' whole seconds and the platform's start-up
        assert j.runtime_s - 1 <= got[j.id].end - got[j.id].start <= j.runtime_s + slack_s, got[j.id]


# With --preemption priority: tenant a's low-class job holds every node (borrowing b's half of the GPUs)
# when b's high-class job arrives, which fits within b's own quota. Kueue reclaims b's quota from the
# borrower, Slurm's high QOS preempts the low one; on both the low job goes back to the queue and runs
# again, whole, after the high one.
PREEMPT_TRACE = Trace(name="preempt-it", source="made for the preemption test",
                      shape=NodeShape(nodes=NODES, gpus_per_node=GPUS), duration_s=6,
                      jobs=(job("a-low", 0, "a", 16, 12, qos="low"), job("b-high", 6, "b", 4, 4, qos="high")))
