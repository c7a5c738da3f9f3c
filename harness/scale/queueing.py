"""Queue figures that say why a job waited, not only how long (pure; outcome.JobOutcome in, dicts out).

* **Bounded slowdown** per size class: (wait + run) / max(run, tau), at least 1. It weighs a wait against
  the job's own length, so a minute's wait of a ten-second job reads as the harm it is and a minute on a
  day-long job does not; tau keeps the shortest jobs from dominating. tau is 10 s of *replay* time: the
  schedulers' pass intervals and start-up are seconds that do not compress, so a job shorter than that
  is compared with that.
* **Overtaking**: how many jobs started while an earlier-submitted job was still waiting. That is what
  backfill does (Slurm starts a later job that fits in a hole without delaying the reserved top job) and
  what Kueue's BestEffortFIFO does (an older workload that does not fit does not block newer ones that
  fit), and what a strict FIFO never does. With it, **the queue head's wait**: how long each job was the
  oldest one waiting, and how many later jobs started in that time. A head that waits long while later
  jobs pass is one nothing reserves nodes for.
* **Utilisation over the arrival window**: the jobs' own GPU-seconds of work inside [first submission,
  first submission + the trace's window], over what the cluster had. Unlike work / makespan it does not
  hang on the one job that ends last; it says how full the cluster was kept while work arrived.
* **Per tenant**: each tenant's jobs, queue p50/p99 and share of the GPU-seconds.
"""
from __future__ import annotations

import bisect
import heapq
import itertools

from .outcome import JobOutcome, nearest_rank, tenant_shares
from .trace import SIZE_CLASSES, size_class

TAU_S = 10.0


def bounded_slowdown(o: JobOutcome, runtime_s: float, tau_s: float = TAU_S) -> float | None:
    """max(1, (wait + run) / max(run, tau)) with the trace's run time; None for a job that never started."""
    if o.queue_s is None:
        return None
    return max(1.0, (o.queue_s + runtime_s) / max(runtime_s, tau_s))


def slowdown_by_size(outcomes: list[JobOutcome], runtime_s: dict[str, float], tau_s: float = TAU_S) -> dict[str, dict]:
    """Per size class (and "all"): jobs counted, mean, p50 and p99 of the bounded slowdown."""
    out: dict[str, dict] = {}
    for name, _, _ in (*SIZE_CLASSES, ("all", 0, 0)):
        vals = [bounded_slowdown(o, runtime_s[o.id], tau_s) for o in outcomes
                if (name == "all" or size_class(o.nodes) == name) and o.id in runtime_s]
        vals = [v for v in vals if v is not None]
        if vals:
            out[name] = {"jobs": len(vals), "mean": sum(vals) / len(vals), "p50": nearest_rank(vals, 50),
                         "p99": nearest_rank(vals, 99)}
    return {"tau_s": tau_s, "classes": out}


def overtaking(outcomes: list[JobOutcome]) -> dict:
    """Jobs started while an earlier-submitted one waited, and the queue head's wait.

    ``jobs_overtaken``: jobs at least one later submission started before; ``overtakes``: such
    (waiting job, later job) pairs in all; ``most``: the most one job saw. A job submitted in the same
    second as another is not later than it (whole-second records cannot order them). The head is the
    earliest-submitted job still waiting (ties: the trace order); ``head_wait_s``: per job, the seconds
    it spent as the head, p50 / p99 / max over the jobs that ever were; ``passed_head``: starts of
    other jobs while some job was the head."""
    # sweeps over sorted lists rather than a scan of every job per job and per event: a real history's
    # thousands of jobs would take minutes at n^2 on every rederive
    order = {o.id: i for i, o in enumerate(outcomes)}
    started = sorted((o for o in outcomes if o.start is not None), key=lambda o: o.start)
    per: dict[str, int] = {}
    earlier: list[float] = []           # submissions of the jobs that started strictly before the current start
    for _, group in itertools.groupby(started, key=lambda o: o.start):
        same = list(group)
        for o in same:
            n = len(earlier) - bisect.bisect_right(earlier, o.submit)
            if n:
                per[o.id] = n
        for o in same:
            bisect.insort(earlier, o.submit)
    # the head over time: events are submissions and starts; between events the head is constant. A heap of
    # the submitted jobs by (submit, trace order), the started ones dropped lazily once the time passes them
    events = sorted({o.submit for o in outcomes} | {o.start for o in started})
    by_submit = sorted(outcomes, key=lambda o: (o.submit, order[o.id]))
    heap: list[tuple[float, int, JobOutcome]] = []
    head_time: dict[str, float] = {}
    nxt = 0
    for a, b in itertools.pairwise(events):
        while nxt < len(by_submit) and by_submit[nxt].submit <= a:
            heapq.heappush(heap, (by_submit[nxt].submit, order[by_submit[nxt].id], by_submit[nxt]))
            nxt += 1
        while heap and heap[0][2].start is not None and heap[0][2].start <= a:
            heapq.heappop(heap)
        if heap:
            head = heap[0][2]
            head_time[head.id] = head_time.get(head.id, 0.0) + (b - a)
    # a start at t passes the head of t if a job before it in (submit, trace order), submitted before t, was
    # still waiting at t: the latest start (never: infinite) among such jobs says so
    inf = float("inf")
    seconds = [t for t, _ in itertools.groupby(o.submit for o in by_submit)]
    latest_upto: list[float] = []       # [i]: the latest start among the jobs of the first i submit seconds
    best = -inf
    for _, same in itertools.groupby(by_submit, key=lambda o: o.submit):
        latest_upto.append(best)
        best = max([best, *(inf if o.start is None else o.start for o in same)])
    passed, i, seen_here, best_here = 0, -1, None, -inf
    for o in by_submit:
        if o.submit != seen_here:
            i, seen_here, best_here = i + 1, o.submit, -inf
        if o.start is not None:
            if o.start > o.submit:       # every job before it was submitted before its start
                latest = max(latest_upto[i], best_here)
            else:                        # only those submitted before its start count
                latest = latest_upto[bisect.bisect_left(seconds, o.start)]
            passed += latest > o.start
        best_here = max(best_here, inf if o.start is None else o.start)
    heads = list(head_time.values())
    return {"jobs_overtaken": len(per), "overtakes": sum(per.values()), "most": max(per.values(), default=0),
            "passed_head": passed, "head_jobs": len(heads),
            "head_wait_p50_s": nearest_rank(heads, 50), "head_wait_p99_s": nearest_rank(heads, 99),
            "head_wait_max_s": max(heads, default=None)}


def arrival_window_utilisation(outcomes: list[JobOutcome], runtime_s: dict[str, float], total_gpus: int,
                               window_s: float) -> float | None:
    """GPU-seconds of the jobs' own run times inside [first submission, + window_s] over the cluster's."""
    if total_gpus <= 0 or window_s <= 0 or not outcomes:
        return None
    t0 = min(o.submit for o in outcomes)
    t1 = t0 + window_s
    work = 0.0
    for o in outcomes:
        if o.start is None or o.id not in runtime_s:
            continue
        end = o.start + (min(runtime_s[o.id], o.end - o.start) if o.end is not None else runtime_s[o.id])
        a, b = max(o.start, t0), min(end, t1)
        if b > a:
            work += o.gpus * (b - a)
    return work / (total_gpus * window_s)


def per_tenant(outcomes: list[JobOutcome]) -> dict[str, dict]:
    """Per tenant: jobs, started, queue p50 / p99 / max (s), share of the allocated GPU-seconds."""
    shares = tenant_shares(outcomes)
    out = {}
    for t in sorted({o.tenant for o in outcomes}):
        waits = [o.queue_s for o in outcomes if o.tenant == t and o.queue_s is not None]
        out[t] = {"jobs": sum(o.tenant == t for o in outcomes), "started": len(waits),
                  "p50_s": nearest_rank(waits, 50), "p99_s": nearest_rank(waits, 99),
                  "max_s": max(waits, default=None), "gpu_share": shares.get(t, 0.0)}
    return out


def wait_split(outcomes: list[JobOutcome], admitted: dict[str, float]) -> dict | None:
    """A Kubernetes wait in two: admission (creation -> Kueue's Admitted, the quota decision) and the pod
    pipeline (Admitted -> the gang's last pod bound: the Job and pods made, ungated and scheduled). p50,
    p99 and max of each, over the jobs with both; None without admissions (Slurm's allocation is the start)."""
    adm, pipe = [], []
    for o in outcomes:
        t = admitted.get(o.id)
        if t is None or o.start is None:
            continue
        adm.append(max(0.0, t - o.submit))
        pipe.append(max(0.0, o.start - t))
    if not adm:
        return None
    return {"jobs": len(adm),
            "admission": {"p50_s": nearest_rank(adm, 50), "p99_s": nearest_rank(adm, 99), "max_s": max(adm)},
            "pod_pipeline": {"p50_s": nearest_rank(pipe, 50), "p99_s": nearest_rank(pipe, 99), "max_s": max(pipe)}}
